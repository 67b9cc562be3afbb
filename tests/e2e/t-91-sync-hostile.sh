# SPDX-License-Identifier: MIT
# ocsb sync pull (and push) against a hostile agent. The agent owns its ~/.bashrc, which
# sshd's login shell (`bash -c '/usr/bin/git-shell -c ...'`) sources before git-shell, and
# its global git config (~/.config/git/config), which git-upload-pack reads
# (uploadpack.packObjectsHook): it controls the server side completely. Pull and push must
# survive a hostile server: every failure is a clear error, and nothing of the owner's
# changes (refs, HEAD, index, config, hooks, reflogs, work tree); each refusal is paired
# with a positive control that succeeds.
# shellcheck disable=SC2016 # the bash -c snippets expand their variables themselves
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
AHOME=/home/$AGENT
AREPO=$AHOME/shop
ocsb_owner() { as_owner env -C "$PROJECT" "$OCSB" "$@"; }
ogit() { as_owner git -C "$PROJECT" "$@"; }
agit() { as_user "$AGENT" git -C "$AREPO" "$@"; }
asagent() { as_user "$AGENT" "$@"; }
# aput FILE: stdin into a file of the agent's, as the agent
aput() { as_user "$AGENT" sh -c 'cat > "$1"' _ "$1"; }

# Everything of the owner's a failed pull must leave alone, refs/remotes included.
owner_state() {
	as_owner bash -c 'cd "$1" && git symbolic-ref HEAD; git rev-parse HEAD;
		git for-each-ref --format="%(refname) %(objectname)";
		sha256sum .git/index .git/config; ls -la .git/FETCH_HEAD 2>&1;
		cat .git/packed-refs 2>/dev/null | sha256sum;
		find .git/refs .git/logs -printf "%p %y %s\n" | sort;
		find .git/logs -type f -print0 | sort -z | xargs -0r sha256sum;
		find .git/hooks -print0 | sort -z | xargs -0 ls -ld --time-style=+;
		find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum' _ \
		"$PROJECT"
}
# Files of the object store that are not objects or finished packs (temporary packs).
owner_tmp() {
	find "$PROJECT/.git/objects" -type f ! -path '*/info/*' \
		! -regex '.*/objects/[0-9a-f][0-9a-f]/[0-9a-f]*' \
		! -regex '.*/pack/pack-[0-9a-f]*\.\(pack\|idx\|rev\|mtimes\|keep\)' -printf '%P %s\n'
}

# refused DESC REGEX ARGS...: `ocsb sync pull ARGS` fails with REGEX, and the owner's
# state is byte-identical afterwards.
refused() {
	local desc=$1 re=$2 before after
	shift 2
	before=$(owner_state)
	check_fails_output "$desc" "$re" ocsb_owner sync pull "$@"
	after=$(owner_state)
	if [ "$before" = "$after" ]; then
		pass "$desc: the owner's refs, HEAD, index, config, hooks and reflogs are unchanged"
	else
		fail "$desc: the owner's repository changed" \
			"$(diff <(echo "$before") <(echo "$after"))"
	fi
}
fsck_clean() {
	_capture ogit fsck --no-dangling --no-progress
	if [ "$_rc" -eq 0 ] && [ -z "$_out" ]; then pass "$1"; else fail "$1" "$_out"; fi
	_detail "$(owner_tmp | sed 's/^/leftover in .git\/objects: /')"
}
# new_branch NAME: an agent branch carrying objects the owner does not have
n_branch=0
new_branch() {
	n_branch=$((n_branch + 1))
	asagent sh -c "cd '$AREPO' && git checkout -q -B '$1' main &&
		echo '$1 $n_branch $RANDOM' > '$1.txt' && git add '$1.txt' && git commit -qm '$1'"
}

make_project
ogit symbolic-ref HEAD refs/heads/main
as_owner git config --global user.name Owner
as_owner git config --global user.email owner@example.com
as_owner sh -c "cd '$PROJECT' && echo one > a.txt && git add a.txt && git commit -qm one"
check_output "fresh provisioning" '^ocsb-provision: [1-9][0-9]* changes$' provision
as_user "$AGENT" git config --global user.name Agent
as_user "$AGENT" git config --global user.email agent@example.com
check "ocsb sync push seeds the agent's clone" ocsb_owner sync push
new_branch feature
check_output "positive control: a plain pull works" 'ai-dev/feature: new' ocsb_owner sync pull

# --- 1. what the agent controls on its side ----------------------------------------------
# ~/.bashrc: sourced by sshd's non-interactive login shell (bash does for ssh commands).
aput "$AHOME/.bashrc" <<'EOF'
[ -n "${SSH_ORIGINAL_COMMAND:-}" ] || return 0
echo "$SSH_ORIGINAL_COMMAND" >>"$HOME/bashrc-ran"
if [ -s "$HOME/hostile" ]; then
	read -r mode <"$HOME/hostile"
	case $mode in
	path) export PATH=$HOME/bin:$PATH ;;
	execpath) export GIT_EXEC_PATH=$HOME/evil ;;
	none) ;;
	# A function named like the absolute path replaces the forced command itself.
	*) /usr/bin/git-shell() { exec python3 "$HOME/fake.py" "$mode"; } ;;
	esac
fi
EOF
check "positive control: status works with the agent's ~/.bashrc" ocsb_owner sync status
check_output "the agent's ~/.bashrc ran before git-shell for the sync key" \
	"git-upload-pack '$AREPO'" cat "$AHOME/bashrc-ran"

# Fakes that leave a marker when run and make the operation fail.
marker_fake() { # marker_fake PATH NAME
	asagent mkdir -p "$(dirname "$1")"
	printf '#!/bin/sh\necho %s >> %s/ran\necho "fake %s" >&2\nexit 1\n' \
		"$2" "$AHOME" "$2" | aput "$1"
	asagent chmod +x "$1"
}
marker_fake "$AHOME/bin/git-upload-pack" bin-git-upload-pack
marker_fake "$AHOME/bin/git" bin-git
marker_fake "$AHOME/git-shell-commands/git-upload-pack" gsc-git-upload-pack
marker_fake "$AHOME/evil/git-upload-pack" execpath-git-upload-pack
marker_fake "$AHOME/evil/git" execpath-git
marker_fake "$AHOME/evil/git-pack-objects" execpath-git-pack-objects
ran() { cat "$AHOME/ran" 2>/dev/null | sort -u | tr '\n' ' '; }

# ~/.ssh/environment: PermitUserEnvironment no; the same variable via ~/.bashrc: honoured.
asagent mkdir -p -m 700 "$AHOME/.ssh"
echo "GIT_EXEC_PATH=$AHOME/evil" | aput "$AHOME/.ssh/environment"
new_branch env1
rm -f "$AHOME/ran"
check_output "GIT_EXEC_PATH in ~/.ssh/environment is ignored (PermitUserEnvironment no)" \
	'ai-dev/env1: new' ocsb_owner sync pull
check_output "and none of the fakes ran" '^$' ran
asagent rm -f "$AHOME/.ssh/environment"

# PATH: git-shell runs "git upload-pack" from the git exec path, before PATH.
echo path | aput "$AHOME/hostile"
new_branch path1
rm -f "$AHOME/ran"
check_output "fakes git and git-upload-pack earlier on the agent's PATH are not run" \
	'ai-dev/path1: new' ocsb_owner sync pull
check_output "none of the fakes ran, ~/git-shell-commands/git-upload-pack included" '^$' ran
# GIT_EXEC_PATH exported by ~/.bashrc: git-shell runs the agent's "git": it controls
# what runs. Pull must fail clearly and change nothing.
echo execpath | aput "$AHOME/hostile"
new_branch path2
rm -f "$AHOME/ran"
refused "GIT_EXEC_PATH from the agent's ~/.bashrc runs its fake git: pull fails with its message" \
	'remote: fake execpath-git|time limit reached' --timeout 8
check_output "the agent's fake git did run (the agent controls the server side)" 'execpath-git' ran
echo none | aput "$AHOME/hostile"
check_output "positive control: without GIT_EXEC_PATH the same pull works" \
	'ai-dev/path2: new' ocsb_owner sync pull
printf '#!/bin/sh\necho gsc-probe-ran\n' | aput "$AHOME/git-shell-commands/probe"
asagent chmod +x "$AHOME/git-shell-commands/probe"
check_output "positive control: git-shell does run ~/git-shell-commands/probe" \
	'gsc-probe-ran' sync_ssh probe
fsck_clean "after the PATH fakes the owner's repository passes git fsck"

# --- 2. a fake server: the forced command replaced by a ~/.bashrc function -------------
aput "$AHOME/fake.py" <<'EOF'
import os, shlex, subprocess, sys, threading, time
mode = sys.argv[1]
cmd = shlex.split(os.environ.get("SSH_ORIGINAL_COMMAND", "x x"))
out = sys.stdout.buffer
def pkt(b):
    return b"%04x" % (len(b) + 4) + b
if mode == "garbage":
    out.write(b"HTTP/1.1 200 OK\r\n\x1b[31m" + os.urandom(4096)); out.flush(); sys.exit(0)
if mode == "silent":
    time.sleep(60); sys.exit(0)
if mode == "advsleep":
    subprocess.run(["git", "upload-pack", "--advertise-refs", cmd[1]])
    sys.stdout.flush(); time.sleep(60); sys.exit(0)
if mode == "badlen":
    out.write(b"zzzz" + b"0" * 100); out.flush(); sys.exit(0)
if mode.startswith("rp-"):
    # A receive-pack that takes the commands and the pack, then lies in its report.
    import select
    out.write(pkt(b"0" * 40 + b" capabilities^{}\0report-status quiet ofs-delta\n") + b"0000")
    out.flush()
    buf = b""
    while select.select([0], [], [], 2)[0]:
        b = os.read(0, 65536)
        if not b:
            break
        buf += b
    refs, i = [], 0
    while i + 4 <= len(buf) and buf[i:i + 4] != b"0000":
        n = int(buf[i:i + 4], 16)
        refs.append(buf[i + 4:i + n].split(b"\0")[0].split()[2])
        i += n
    rep = [b"unpack ok\n"]
    if mode == "rp-other":
        rep.append(b"ok refs/heads/not-pushed\n")
    elif mode == "rp-ng":
        rep += [b"ng " + r + b" hooked \x1b[31mred\n" for r in refs]
    else:
        rep += [b"ok " + r + b"\n" for r in refs]
    out.write(b"".join(pkt(x) for x in rep) + (b"" if mode == "rp-noflush" else b"0000"))
    out.flush(); sys.exit(0)
# inject: the real upload-pack, with extra refs (names from ~/inject, NUL-separated)
# spliced into its advertisement, pointing at the first advertised object.
p = subprocess.Popen(["git", "upload-pack", cmd[1]], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, bufsize=0)
names = [n for n in open(os.path.expanduser("~/inject"), "rb").read().split(b"\0") if n]
sha = None
while True:
    n = p.stdout.read(4)
    if n == b"0000":
        for name in names:
            out.write(pkt(sha + b" " + name + b"\n"))
        out.write(b"0000"); out.flush()
        break
    body = p.stdout.read(int(n, 16) - 4)
    if sha is None:
        sha = body[:40]
    out.write(n + body)
def pump(src, dst):
    while True:
        b = os.read(src, 65536)
        if not b:
            break
        os.write(dst, b)
    try:
        os.close(dst)
    except OSError:
        pass
threading.Thread(target=pump, args=(0, p.stdin.fileno()), daemon=True).start()
pump(p.stdout.fileno(), 1)
p.wait()
EOF

new_branch fake1
echo garbage | aput "$AHOME/hostile"
refused "a server that sends garbage: pull fails with a clear error" \
	'connecting to the agent: .*(invalid|unexpected|bad|corrupt|malformed|closed)'
echo badlen | aput "$AHOME/hostile"
refused "a server that sends a bad pkt-line length: pull fails with a clear error" \
	'connecting to the agent: .*(invalid|unexpected|bad|corrupt|malformed|closed)'
echo none | aput "$AHOME/hostile"
check_output "positive control: the real server again, the same pull works" \
	'ai-dev/fake1: new' ocsb_owner sync pull

# A fake receive-pack whose report does not confirm the ref: push must not claim success.
as_owner sh -c "cd '$PROJECT' && echo p > p.txt && git add p.txt && git commit -qm p"
echo rp-other | aput "$AHOME/hostile"
check_fails_output "a receive-pack reporting on another ref: push fails" \
	'bad status report.*not pushed' ocsb_owner sync push --to hostile-push
echo rp-noflush | aput "$AHOME/hostile"
check_fails_output "a receive-pack whose report never ends: push fails" \
	'reading the agent.s reply: .*closed the connection' ocsb_owner sync push --to hostile-push
echo rp-ng | aput "$AHOME/hostile"
check_fails_output "a refusal (ng) fails the push with its reason escaped" \
	'refused refs/heads/hostile-push: hooked \\x1b\[31mred' ocsb_owner sync push --to hostile-push
echo none | aput "$AHOME/hostile"
check_fails "the fakes wrote no hostile-push branch" agit rev-parse -q --verify hostile-push
check_output "positive control: the real receive-pack takes the same push" \
	'^pushed main -> ai-dev:hostile-push$' ocsb_owner sync push --to hostile-push

# A clone the agent tampered with (issue 16 item 5): ocsb's push next to git push over the
# same key and pin, to the same clone. Refs naming a tree and a blob are odd, not broken:
# both pushes work. A ref naming a commit the clone lacks (the owner's next commit: its id
# can be known or guessed) makes both leave that commit out of the pack, and the agent's
# receive-pack refuses both: ocsb says what that means.
gpush() { # gpush DST: git push of the owner's HEAD to the agent's DST
	as_owner env -C "$PROJECT" GIT_SSH_COMMAND="ssh -i $SYNC_KEY -o IdentitiesOnly=yes \
		-o BatchMode=yes -o UserKnownHostsFile=$PIN -o StrictHostKeyChecking=yes" \
		git push -q "ssh://$AGENT@localhost$AREPO" "HEAD:refs/heads/$1"
}
as_owner sh -c "cd '$PROJECT' && echo t1 > t.txt && git add t.txt && git commit -qm t1"
asagent sh -c "cd '$AREPO' && git update-ref refs/odd/tree \$(git rev-parse 'hostile-push^{tree}') &&
	git update-ref refs/tags/odd-blob \$(echo odd | git hash-object -w --stdin)"
check_output "a clone with refs naming a tree and a blob: ocsb sync push works" \
	'^pushed main -> ai-dev:tamper-ocsb$' ocsb_owner sync push --to tamper-ocsb
check "and git push to the same clone works too" gpush tamper-git
t1=$(ogit rev-parse HEAD)
as_owner sh -c "cd '$PROJECT' && echo t2 > t.txt && git add t.txt && git commit -qm t2"
asagent sh -c "cd '$AREPO' && echo $(ogit rev-parse HEAD) > .git/refs/heads/ghost"
check_fails_output "a ref naming a commit the clone lacks: ocsb sync push fails, saying what it means" \
	'advertises refs to objects it does not have' ocsb_owner sync push --to tamper-ocsb
check_fails "git push to the same clone fails too" gpush tamper-git
check_output "neither moved the agent's branches" "^$t1 $t1$" \
	asagent sh -c "cd '$AREPO' && echo \$(git rev-parse tamper-ocsb tamper-git)"
asagent rm -f "$AREPO/.git/refs/heads/ghost"
check_output "positive control: the ghost ref gone, the same ocsb sync push works" \
	'^pushed main -> ai-dev:tamper-ocsb$' ocsb_owner sync push --to tamper-ocsb
check "and so does git push" gpush tamper-git

# --- 3. weird ref names, spliced into a real advertisement --------------------------------
printf '%s\0' 'refs/heads/ctl\001x' 'refs/heads/esc\033[31mred' 'refs/heads/tab\tx' \
	'refs/heads/del\177x' 'refs/heads/c1\302\233x' 'refs/tags/evil-tag' \
	'refs/remotes/ai-dev/main' 'refs/remotes/ai-dev/planted' 'refs/pull/1/head' \
	'refs/heads/../../config' 'refs/heads/x/.git/config' 'refs/heads/lock.lock' \
	'refs/heads/HEAD' 'refs/heads/' 'refs/heads/sp ace' |
	while IFS= read -r -d '' n; do printf "$n\\0"; done | aput "$AHOME/inject"
new_branch weird
echo inject | aput "$AHOME/hostile"
main_before=$(ogit rev-parse refs/remotes/ai-dev/main)
_capture ocsb_owner sync pull
weird=$_out
if [ "$_rc" -eq 0 ] && grep -q 'ai-dev/weird: new' <<<"$weird"; then
	pass "injected refs: the pull still fetches the valid branch"
else fail "injected refs: the pull still fetches the valid branch" "$weird"; fi
for want in 'ctl\\x01x' 'esc\\x1b\[31mred' 'tab\\x09x' 'del\\x7fx' 'c1\\xc2\\x9bx' \
	'x/\.git/config' 'lock\.lock' 'heads/HEAD' 'sp ace'; do
	if grep -q "^skipped: \".*$want\"" <<<"$weird"; then
		pass "skipped loudly with an escaped name: /$want/"
	else fail "skipped loudly with an escaped name: /$want/" "$weird"; fi
done
if LC_ALL=C grep -q $'[\001\033\t\177]' <<<"$weird"; then
	fail "no raw control character reaches the owner's terminal" "$(cat -v <<<"$weird")"
else pass "no raw control character reaches the owner's terminal"; fi
_capture ogit for-each-ref --format='%(refname)'
if grep -Eq 'ctl|esc|tab|del|c1|evil-tag|planted|pull|config|lock|HEAD|sp' <<<"$_out"; then
	fail "none of the weird names reached the owner's refs" "$_out"
else pass "none of the weird names reached the owner's refs"; fi
check_output "a ref outside refs/heads cannot set refs/remotes/ai-dev/main" "^$main_before$" \
	ogit rev-parse refs/remotes/ai-dev/main
check_output "positive control: refs/remotes/ai-dev/weird was written" 'weird' \
	ogit for-each-ref refs/remotes/ai-dev/weird
echo none | aput "$AHOME/hostile"

# --- 4. a hostile pack: uploadpack.packObjectsHook in the agent's own global git config ---
aput "$AHOME/hook.sh" <<'EOF'
#!/bin/sh
mode=$(cat "$HOME/hookmode" 2>/dev/null)
case $mode in
empty) cat >/dev/null; exec cat "$HOME/empty.pack" ;;
partial) cat >/dev/null; exec cat "$HOME/partial.pack" ;;
junk) cat >/dev/null; head -c 200000 /dev/urandom ;;
hang) cat >/dev/null; exec sleep 60 ;;
slow) "$@" | python3 -c '
import sys, time
while True:
    b = sys.stdin.buffer.read(262144)
    if not b: break
    sys.stdout.buffer.write(b); sys.stdout.buffer.flush(); time.sleep(0.08)' ;;
*) exec "$@" ;;
esac
EOF
asagent chmod +x "$AHOME/hook.sh"
# ~/.gitconfig is the read-only mirror of the owner's (issue 7); git reads the agent's
# ~/.config/git/config as global configuration too, and that one the agent can write.
asagent mkdir -p "$AHOME/.config/git"
check "the agent sets uploadpack.packObjectsHook in its global git config" \
	as_user "$AGENT" git config --file "$AHOME/.config/git/config" uploadpack.packObjectsHook \
	"$AHOME/hook.sh"
python3 -c 'import hashlib,sys; h=b"PACK\0\0\0\2\0\0\0\0"; sys.stdout.buffer.write(h+hashlib.sha1(h).digest())' |
	aput "$AHOME/empty.pack"

new_branch ghost1
echo empty | aput "$AHOME/hookmode"
refused "the agent advertises a branch and sends an empty pack: pull fails" \
	'incomplete history for branch "ghost1": missing commit'
check_fails "no ref to the missing object" ogit rev-parse -q --verify refs/remotes/ai-dev/ghost1
echo junk | aput "$AHOME/hookmode"
refused "the agent sends a corrupt pack: pull fails with a clear error" \
	'fetching from the agent: ' --timeout 15
_detail "$_out"
: | aput "$AHOME/hookmode"
check_output "positive control: the honest pack, the same pull fetches ghost1" \
	'ai-dev/ghost1: new' ocsb_owner sync pull
fsck_clean "after the corrupt pack the owner's repository passes git fsck"

# A pack with the new commit only: its tree and blob are missing.
new_branch ghost2
agit rev-parse ghost2 | asagent sh -c "git -C '$AREPO' pack-objects --stdout > '$AHOME/partial.pack'"
echo partial | aput "$AHOME/hookmode"
refused "the agent sends a commit without its tree: pull fails" \
	'incomplete history: (missing|bad) tree .*no ref was written'
check_fails "no ref to the incomplete commit" ogit rev-parse -q --verify refs/remotes/ai-dev/ghost2
fsck_clean "after the incomplete pack the owner's repository passes git fsck"
# Once the commit object is in the owner's store, a second pull has nothing to download:
# the ref must still not point at an incomplete history.
refused "a second pull of the incomplete commit fails too" \
	'incomplete history: (missing|bad) tree .*no ref was written'
fsck_clean "and the owner's repository still passes git fsck"
: | aput "$AHOME/hookmode"
# libgit2 does not fetch a tip whose commit object it has: the remedy the error names.
check "git gc --prune=now drops the unreferenced incomplete commit" ogit gc -q --prune=now
check_output "positive control: the honest pack, the same pull fetches ghost2" \
	'ai-dev/ghost2: new' ocsb_owner sync pull
fsck_clean "after the honest pull the owner's repository passes git fsck"

# A commit and its tree, but not the new file's blob: found by the pull's own check (a
# few commits on top of the owner's refs are checked without running git).
new_branch ghost3
asagent sh -c "cd '$AREPO' && printf '%s\n' \$(git rev-parse ghost3) \$(git rev-parse ghost3^{tree}) |
	git pack-objects --stdout > '$AHOME/partial.pack'"
echo partial | aput "$AHOME/hookmode"
refused "the agent sends a commit and its tree without the new blob: pull fails" \
	'incomplete history: missing blob [0-9a-f]{40} \(ghost3\.txt in commit .*no ref was written'
check_fails "no ref to the commit without its blob" ogit rev-parse -q --verify refs/remotes/ai-dev/ghost3
# A new root commit without its tree: not decided by that check, git rev-list finds it.
asagent sh -c "cd '$AREPO' && t=\$(printf '100644 blob %s\tg4.txt\n' \$(echo ghost4 \$RANDOM | git hash-object -w --stdin) | git mktree) &&
	git branch -f ghost4 \$(git commit-tree -m ghost4 \$t) && git rev-parse ghost4 | git pack-objects --stdout > '$AHOME/partial.pack'"
check "the agent deletes ghost3" asagent sh -c "cd '$AREPO' && git checkout -q main && git branch -q -D ghost3"
refused "the agent sends a new root commit without its tree: pull fails" \
	'incomplete history: .*(missing|bad) tree .*no ref was written'
check_fails "no ref to the root commit without its tree" ogit rev-parse -q --verify refs/remotes/ai-dev/ghost4
fsck_clean "after both incomplete packs the owner's repository passes git fsck"
: | aput "$AHOME/hookmode"
check "git gc --prune=now drops what the incomplete packs left" ogit gc -q --prune=now
check_output "positive control: the honest pack, the same pull fetches ghost4" \
	'ai-dev/ghost4: new' ocsb_owner sync pull

# --- 5. a huge blob and --max-bytes --------------------------------------------------------
asagent sh -c "cd '$AREPO' && git checkout -q -B huge main && head -c 64M /dev/urandom > huge.bin &&
	git add huge.bin && git commit -qm huge && rm -f huge.bin && git checkout -q main"
refused "a 64 MiB blob with --max-bytes 16M is refused, the limit named" \
	'more than 16777216 bytes.*--max-bytes' --max-bytes 16M
check_fails "no ref was written for the huge branch" \
	ogit rev-parse -q --verify refs/remotes/ai-dev/huge
fsck_clean "after the refused huge blob the owner's repository passes git fsck"
check_output "positive control: without the limit the huge blob is fetched" \
	'ai-dev/huge: new' ocsb_owner sync pull
check_output "and it is complete" '^67108864$' ogit cat-file -s refs/remotes/ai-dev/huge:huge.bin

# --- 6. a hung remote ------------------------------------------------------------------------
timed_refused() { # DESC REGEX MAXSECS ARGS...
	local desc=$1 re=$2 max=$3 t0 t1
	shift 3
	t0=$(date +%s)
	refused "$desc" "$re" "$@"
	t1=$(date +%s)
	if [ $((t1 - t0)) -le "$max" ]; then pass "$desc: gave up after $((t1 - t0)) s (<= $max)"
	else fail "$desc: gave up after $((t1 - t0)) s (> $max)"; fi
}
new_branch hung1
echo silent | aput "$AHOME/hostile"
timed_refused "a remote that never answers: pull fails at --timeout 4" \
	'time limit reached.*--timeout' 15 --timeout 4
echo advsleep | aput "$AHOME/hostile"
timed_refused "a remote that advertises then stops: pull fails at --timeout 4" \
	'time limit reached.*--timeout' 15 --timeout 4
echo none | aput "$AHOME/hostile"
echo hang | aput "$AHOME/hookmode"
timed_refused "a remote whose pack never comes (upload-pack keepalives only): --timeout 8" \
	'time limit reached.*--timeout' 20 --timeout 8
: | aput "$AHOME/hookmode"
pkill -u "$AGENT" -x sleep 2>/dev/null

# SIGSTOP of the agent's git processes mid-transfer, as root.
asagent sh -c "cd '$AREPO' && git checkout -q -B stopped main && head -c 24M /dev/urandom > s.bin &&
	git add s.bin && git commit -qm stopped && rm -f s.bin && git checkout -q main"
echo slow | aput "$AHOME/hookmode"
wait_agent_git() { # until the agent's pack-objects runs (at most 10 s)
	local i
	for ((i = 0; i < 100; i++)); do
		pgrep -u "$AGENT" -f 'pack-objects' >/dev/null && return 0
		sleep 0.1
	done
	return 1
}
before=$(owner_state)
t0=$(date +%s)
bg_owner env -C "$PROJECT" "$OCSB" sync pull --timeout 10 >"$E2E_SCRATCH/stop.out" 2>&1
if wait_agent_git; then
	sleep 1
	stopped=$(pgrep -u "$AGENT" -d ' ' -f 'git|python3|sleep')
	kill -STOP $stopped
	wait "$BG_PID"
	rc=$?
	t1=$(date +%s)
	kill -CONT $stopped 2>/dev/null
	if [ "$rc" -ne 0 ] && grep -Eq 'time limit reached|no data' "$E2E_SCRATCH/stop.out" &&
		[ $((t1 - t0)) -le 25 ]; then
		pass "SIGSTOP of the agent's git mid-transfer: pull fails after $((t1 - t0)) s"
	else
		fail "SIGSTOP of the agent's git mid-transfer: pull fails in time" \
			"exit $rc after $((t1 - t0)) s" "$(cat "$E2E_SCRATCH/stop.out")"
	fi
	after=$(owner_state)
	if [ "$before" = "$after" ]; then pass "and the owner's state is unchanged"; else
		fail "and the owner's state is unchanged" "$(diff <(echo "$before") <(echo "$after"))"; fi
else
	fail "SIGSTOP test: the agent's pack-objects never started" "$(cat "$E2E_SCRATCH/stop.out")"
	kill_tree "$BG_PID"
fi
fsck_clean "after the stalled pull the owner's repository passes git fsck"

# --- 7. interrupted pulls: SIGINT and SIGKILL mid-transfer ------------------------------------
for sig in INT KILL; do
	before=$(owner_state)
	bg_owner env -C "$PROJECT" "$OCSB" sync pull >"$E2E_SCRATCH/sig.out" 2>&1
	mid=
	for ((i = 0; i < 100; i++)); do
		# mid-transfer: a temporary pack in the owner's store has grown past 2 MiB
		if owner_tmp | awk '$2 > 2097152 { f = 1 } END { exit !f }'; then mid=1; break; fi
		sleep 0.1
	done
	kill "-$sig" "$BG_PID"
	wait "$BG_PID"
	rc=$?
	if [ -n "$mid" ] && [ "$rc" -ne 0 ]; then pass "SIG$sig mid-transfer stops the pull (exit $rc)"
	else fail "SIG$sig mid-transfer stops the pull" "mid=$mid exit $rc" "$(cat "$E2E_SCRATCH/sig.out")"; fi
	after=$(owner_state)
	if [ "$before" = "$after" ]; then
		pass "after SIG$sig: no partial refs/remotes update, HEAD, index, config unchanged"
	else
		fail "after SIG$sig: the owner's state changed" "$(diff <(echo "$before") <(echo "$after"))"
	fi
	fsck_clean "after SIG$sig the owner's repository passes git fsck --no-dangling"
done
: | aput "$AHOME/hookmode"
check_output "positive control: the re-run completes" 'ai-dev/stopped: new' ocsb_owner sync pull
check_output "and the interrupted branch's blob is complete" '^25165824$' \
	ogit cat-file -s refs/remotes/ai-dev/stopped:s.bin
fsck_clean "after the re-run the owner's repository passes git fsck"
check_output "the re-run removed the temporary packs the interrupted pulls left" '^$' owner_tmp

# Only stale pack_git2_* regular files go: one still open in a live process (another
# libgit2 program's download) and a symlink of that name stay; the rest of the store too.
PACKDIR=$PROJECT/.git/objects/pack
as_owner sh -c "head -c 4096 /dev/urandom > '$PACKDIR/pack_git2_live' &&
	head -c 4096 /dev/urandom > '$PACKDIR/pack_git2_stale' &&
	head -c 10 /dev/urandom > '$OWNER_HOME/outside' &&
	ln -s '$OWNER_HOME/outside' '$PACKDIR/pack_git2_link' &&
	touch -h -d '-1 hour' '$PACKDIR/pack_git2_live' '$PACKDIR/pack_git2_stale'"
bg_owner sh -c "exec 3<'$PACKDIR/pack_git2_live'; exec sleep 60"
holder=$BG_PID
sleep 0.2
check_output "a pull with leftovers present works" 'REVIEW GATE' ocsb_owner sync pull
check_fails "the stale temporary pack is removed" test -e "$PACKDIR/pack_git2_stale"
check "positive control: the one a live process holds open is kept" \
	test -f "$PACKDIR/pack_git2_live"
check "a symlink named pack_git2_* is left alone" test -L "$PACKDIR/pack_git2_link"
check "and its target untouched" test -s "$OWNER_HOME/outside"
kill "$holder"
wait "$holder" 2>/dev/null
check_output "once nothing holds it, the next pull removes it too" 'REVIEW GATE' \
	ocsb_owner sync pull
check_fails "gone" test -e "$PACKDIR/pack_git2_live"
rm -f "$PACKDIR/pack_git2_link"
fsck_clean "after the clean-up the owner's repository passes git fsck"

# One pull at a time per repository: a second one waits for nothing and says why.
bg_owner env -C "$PROJECT" flock "$PROJECT/.git/ocsb-sync.lock" sleep 30
locker=$BG_PID
sleep 0.3
check_fails_output "a pull while another holds the repository's lock is refused, saying why" \
	'another ocsb sync pull is running' ocsb_owner sync pull
kill_tree "$locker"
check_output "positive control: the lock released, the pull works" 'REVIEW GATE' \
	ocsb_owner sync pull

# --- 8. the host key changed under the pin -----------------------------------------------
mkdir -p "$E2E_SCRATCH/hostkeys"
cp -p /etc/ssh/ssh_host_* "$E2E_SCRATCH/hostkeys/"
sshd_reload() {
	kill -HUP "$(cat /run/sshd.pid)"
	sleep 0.5
	wait_port 127.0.0.1 22 5
}
rm -f /etc/ssh/ssh_host_*
ssh-keygen -q -A
sshd_reload
new_branch rekey
accepted=$(grep -c "Accepted publickey for $AGENT" "$E2E_SSHD_LOG")
refused "sshd's host keys replaced: pull refuses to connect, pointing at the pin" \
	'host key of localhost does not match the pin in .*known_hosts|another type than the pin'
check_output "the sync key was never offered to the impostor" "^$accepted$" \
	grep -c "Accepted publickey for $AGENT" "$E2E_SSHD_LOG"
check_fails "status refuses too" ocsb_owner sync status
rm -f /etc/ssh/ssh_host_*
cp -p "$E2E_SCRATCH/hostkeys/"* /etc/ssh/
sshd_reload
check_output "positive control: the pinned host key back, the same pull works" \
	'ai-dev/rekey: new' ocsb_owner sync pull
fsck_clean "at the end the owner's repository passes git fsck"
