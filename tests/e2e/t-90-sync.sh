# SPDX-License-Identifier: MIT
# ocsb sync end to end: push into the agent's clone, pull its branches back into
# refs/remotes/ai-dev/* only (invariant 5), the review gate, forced updates, the host key
# pin, hostile ref names and transfer bounds. Real sshd, real provisioning, real git-shell.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
AREPO=/home/$AGENT/shop
ocsb_owner() { as_owner env -C "$PROJECT" "$OCSB" "$@"; }
ogit() { as_owner git -C "$PROJECT" "$@"; }
agit() { as_user "$AGENT" git -C "$AREPO" "$@"; }

# Everything of the owner's that a pull must leave alone: HEAD, local branches, index,
# config, hooks, the work tree, FETCH_HEAD (hashed; refs/remotes and objects excluded).
owner_fingerprint() {
	as_owner bash -c 'cd "$1" && git symbolic-ref HEAD && git rev-parse HEAD &&
		git for-each-ref refs/heads refs/tags &&
		sha256sum .git/index .git/config && ls -la .git/FETCH_HEAD 2>&1;
		find .git/hooks -print0 | sort -z | xargs -0 ls -ld --time-style=+;
		find . -path ./.git -prune -o -print0 | sort -z | xargs -0 ls -ld --time-style=+;
		find . -path ./.git -prune -o -type f -print0 | sort -z | xargs -0 sha256sum' _ \
		"$PROJECT"
}

make_project
ogit symbolic-ref HEAD refs/heads/main
as_owner git config --global user.name Owner
as_owner git config --global user.email owner@example.com
as_owner sh -c "cd '$PROJECT' && echo one > a.txt && git add a.txt && git commit -qm one &&
	echo two >> a.txt && git commit -qam two"
check_output "fresh provisioning" '^ocsb-provision: [1-9][0-9]* changes$' provision
as_user "$AGENT" git config --global user.name Agent
as_user "$AGENT" git config --global user.email agent@example.com

# --- push
as_owner git init -q "$OWNER_HOME/other"
check_fails_output "sync in a repository that is not a configured project is refused" \
	'not a project of agent ai-dev' as_owner env -C "$OWNER_HOME/other" "$OCSB" sync status
check_fails_output "sync outside any repository is refused with the reason" \
	'not inside a git repository' as_owner env -C "$OWNER_HOME" "$OCSB" sync status
check_fails_output "outside a repository: says which directories are projects" \
	"a project of $AGENT: cd $PROJECT" as_owner env -C "$OWNER_HOME" "$OCSB" sync pull
t0=$(date +%s.%N)
check_output "ocsb sync push hands the current branch to the agent" \
	'^pushed main -> ai-dev:main$' ocsb_owner sync push
t1=$(date +%s.%N)
_detail "push took $(echo "$t1 - $t0" | bc) s"
check_output "the agent's clone has both commits" '^2$' agit rev-list --count main
check_output "and its work tree (updateInstead)" '^two$' as_user "$AGENT" tail -n1 "$AREPO/a.txt"

# A dirty checked-out branch: updateInstead refuses; the error says so and what to do.
as_user "$AGENT" sh -c "echo dirty >> '$AREPO/a.txt'"
as_owner sh -c "cd '$PROJECT' && echo three >> a.txt && git commit -qam three"
check_fails_output "push to the agent's dirty checked-out branch is an error with the reason" \
	'refused refs/heads/main' ocsb_owner sync push
check_fails_output "and the error suggests --to" '\-\-to' ocsb_owner sync push
check_output "positive control: push --to another branch works" \
	'^pushed main -> ai-dev:owner-main$' ocsb_owner sync push --to owner-main
check_output "the agent's work is untouched by the refused push" 'dirty' \
	as_user "$AGENT" tail -n1 "$AREPO/a.txt"
agit checkout -q -- a.txt

# Non-fast-forward: the agent committed on owner-main; push refuses locally unless --force.
as_user "$AGENT" sh -c "cd '$AREPO' && c=\$(git commit-tree -p owner-main -m agent-work owner-main^{tree}) &&
	git update-ref refs/heads/owner-main \$c"
check_fails_output "a push that would drop the agent's commits is refused (non-fast-forward)" \
	'commits yours does not' ocsb_owner sync push --to owner-main
check_output "positive control: --force overwrites the agent's branch" \
	'^pushed main -> ai-dev:owner-main$' ocsb_owner sync push --to owner-main --force
check_output "the agent's owner-main is now the owner's main" \
	"^$(ogit rev-parse main)$" agit rev-parse owner-main
check_output "a push with nothing new succeeds" '^pushed main -> ai-dev:owner-main$' \
	ocsb_owner sync push --to owner-main
check_fails_output "the same branch named twice is refused before connecting" \
	'pushed twice' ocsb_owner sync push main main

# --- pull: a plain branch
agit checkout -q -b feature
as_user "$AGENT" sh -c "cd '$AREPO' && echo b > b.txt && git add b.txt && git commit -qm b"
before=$(owner_fingerprint)
t0=$(date +%s.%N)
_capture ocsb_owner sync pull
first=$_out
if [ "$_rc" -eq 0 ] && grep -q '^ai-dev/feature: new ' <<<"$first"; then
	pass "ocsb sync pull fetches the agent's new branch"
else fail "ocsb sync pull fetches the agent's new branch" "$first"; fi
t1=$(date +%s.%N)
_detail "pull took $(echo "$t1 - $t0" | bc) s"
check_output "refs/remotes/ai-dev/feature exists in the owner's repository" \
	"^$(agit rev-parse feature)$" ogit rev-parse refs/remotes/ai-dev/feature
after=$(owner_fingerprint)
if [ "$before" = "$after" ]; then
	pass "HEAD, branches, index, config, hooks and work tree are byte-identical after pull"
else
	fail "owner's repository changed by pull" "$(diff <(echo "$before") <(echo "$after"))"
fi
as_owner touch "$PROJECT/.probe"
probe=$(owner_fingerprint)
as_owner rm -f "$PROJECT/.probe"
if [ "$probe" != "$after" ]; then pass "positive control: the fingerprint sees a new file"; else
	fail "positive control: the fingerprint sees a new file"; fi
check_fails "no remote was written to the owner's .git/config" ogit config --get remote.ai-dev.url
_capture ogit config --get-regexp '^remote\.'
if [ -z "$_out" ]; then pass "no remote of any name in .git/config"; else
	fail "no remote of any name in .git/config" "$_out"; fi
check "positive control: git config --get reads that file" ogit config --get core.bare
check_output "a harmless branch passes the review gate" '^REVIEW GATE: nothing flagged' \
	printf '%s\n' "$first"
check_output "the pull reports ahead/behind against the owner's branch" \
	'ai-dev/main: new .*0 commits ahead of your main, 1 behind' printf '%s\n' "$first"
check "--strict: exit 0 when the gate flags nothing" ocsb_owner sync pull --strict

# --- review gate
as_user "$AGENT" sh -c "cd '$AREPO' && printf '*.c filter=evil\n' > .gitattributes &&
	mkdir -p .husky && printf '#!/bin/sh\necho hi\n' > .husky/pre-commit &&
	ln -s /etc/passwd pw && printf '#!/bin/sh\n' > run.sh && chmod +x run.sh &&
	mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml &&
	git add -A && git commit -qm risky"
_capture ocsb_owner sync pull
gate=$_out
for want in '\[attr-driver\] ai-dev/feature: \.gitattributes' \
	'\[hook\] ai-dev/feature: \.husky/pre-commit' \
	'\[symlink-out\] ai-dev/feature: pw' \
	'\[new-exec\] ai-dev/feature: run\.sh' \
	'\[ci\] ai-dev/feature: \.github/workflows/ci\.yml' \
	'ai-dev/feature: updated'; do
	if grep -Eq -- "$want" <<<"$gate"; then pass "pull flags /$want/"; else
		fail "pull flags /$want/" "$gate"; fi
done
if [ "$_rc" -eq 0 ]; then pass "without --strict, flags leave the exit status 0"; else
	fail "without --strict, flags leave the exit status 0" "exit $_rc" "$gate"; fi
check_output "the pull says what is new since the last one" \
	'^  new since your last pull: 1 commit, 5 files changed' printf '%s\n' "$gate"
check_output "the gate marks the flags the new commit raises" \
	'^  \[ci\] ai-dev/feature: \.github/workflows/ci\.yml: .*\(new since your last pull\)$' \
	printf '%s\n' "$gate"
check_output "the pull left its review memo for the branch" \
	"^branch refs/remotes/ai-dev/feature $(agit rev-parse feature) " \
	as_owner cat "$PROJECT/.git/ocsb-sync.review"
# --strict: a distinct status when anything is flagged, the refs written all the same
as_user "$AGENT" sh -c "cd '$AREPO' && echo more > more.txt && git add more.txt && git commit -qm more"
_capture ocsb_owner sync pull --strict
strict=$_out
if [ "$_rc" -eq 3 ] && grep -q '^REVIEW GATE: 5 risky changes' <<<"$strict"; then
	pass "--strict exits 3 when the gate flags anything"
else
	fail "--strict exits 3 when the gate flags anything" "exit $_rc" "$strict"
fi
check_output "--strict still wrote the remote-tracking ref" "^$(agit rev-parse feature)\$" \
	ogit rev-parse refs/remotes/ai-dev/feature
# One harmless commit on a flagged branch: the review starts from the memo, and the
# whole branch's flags are all still there, no longer marked new.
for want in '^  \[attr-driver\] ai-dev/feature: \.gitattributes: ' \
	'^  \[hook\] ai-dev/feature: \.husky/pre-commit: ' \
	'^  \[symlink-out\] ai-dev/feature: pw: ' \
	'^  \[new-exec\] ai-dev/feature: run\.sh: ' \
	'^  \[ci\] ai-dev/feature: \.github/workflows/ci\.yml: '; do
	line=$(grep -E -- "$want" <<<"$strict")
	if [ -n "$line" ] && ! grep -q 'new since your last pull)$' <<<"$line"; then
		pass "after a harmless commit, still flagged, not as new: /$want/"
	else
		fail "after a harmless commit, still flagged, not as new: /$want/" "$strict"
	fi
done
check_output "after a harmless commit: one new commit, one file" \
	'^  new since your last pull: 1 commit, 1 file changed, 1 insertion' printf '%s\n' "$strict"
check_fails "--strict is refused for push" ocsb_owner sync push --strict
check_output "--help documents --strict" 'pull .*--strict' ocsb_owner sync --help
# One list of the review gate's flags: what --help prints (from the code) is what
# docs/sync.md's table and ocsb(1) name, and the other way round.
src=$(cd "$(dirname "$0")/../.." && pwd)
flags=$(ocsb_owner sync --help | awk '/^The review gate.s flags/ { on = 1; next } on && /^  [a-z]/ { print $1 }')
docs=$(sed -n 's/^   | \([a-z-]*\) | .*/\1/p' "$src/docs/sync.md" | grep -v '^flag$' | sort)
man=$(grep -A1 '^\.TP' "$src/man/ocsb.1" | sed -n 's/^\.B \([a-z][a-z-]*\)$/\1/p' | sort)
if [ "$(wc -l <<<"$flags")" -ge 10 ] && [ "$(sort <<<"$flags")" = "$docs" ] &&
	[ -z "$(comm -23 <(sort <<<"$flags") <(sort -u <<<"$man"))" ]; then
	pass "the gate's flags: --help, docs/sync.md and ocsb(1) name the same $(wc -l <<<"$flags")"
else
	fail "the gate's flags: --help, docs/sync.md and ocsb(1) name the same" "help: $(echo $flags)" "docs: $(echo $docs)" "man misses: $(comm -23 <(sort <<<"$flags") <(sort -u <<<"$man") | tr '\n' ' ')"
fi
check_output "--json carries the same review (on a second pull too)" '"flag":"symlink-out"' \
	ocsb_owner sync pull --json
_capture ocsb_owner sync pull --json
check "--json output is valid JSON" python3 -c 'import json,sys; json.loads(sys.argv[1])' "$_out"

# --- forced update: reported, old tip kept in the reflog
old=$(agit rev-parse feature)
agit reset -q --hard HEAD~2
as_user "$AGENT" sh -c "cd '$AREPO' && echo c > c.txt && git add c.txt && git commit -qm rewritten"
check_output "a rewritten agent branch is reported as forced" '^ai-dev/feature: forced ' \
	ocsb_owner sync pull
check_output "the old tip is still in the reflog of refs/remotes/ai-dev/feature" "^$old" \
	ogit reflog show --format=%H refs/remotes/ai-dev/feature
check "and its objects are still there" ogit cat-file -e "$old^{commit}"

# --- deleted branches
agit branch -q tmp
check_output "positive control: a new branch tmp is fetched" 'ai-dev/tmp: new' ocsb_owner sync pull
agit branch -q -D tmp
check_output "a branch the agent deleted is reported" '^ai-dev/tmp: deleted' ocsb_owner sync pull
check_fails "and its remote-tracking ref is gone" ogit rev-parse -q --verify refs/remotes/ai-dev/tmp

# --- OCSB_SYNC_TRACE=1: the pull's phases on stderr; nothing without it
check_output "OCSB_SYNC_TRACE=1 prints the pull's phases" \
	'^ocsb trace +[0-9.]+ ms +[0-9]+ KiB: history checked' \
	as_owner env -C "$PROJECT" OCSB_SYNC_TRACE=1 "$OCSB" sync pull
# The SSH connection opens (in the pull's own process) while its confined child reads the
# repository: the parent starts it before the child has loaded the memos, and the pull
# goes on through it (the child's channel is relayed).
_capture as_owner env -C "$PROJECT" OCSB_SYNC_TRACE=1 "$OCSB" sync pull
c=$(grep -n 'connection opening meanwhile' <<<"$_out" | head -1 | cut -d: -f1)
m=$(grep -n 'memos loaded' <<<"$_out" | head -1 | cut -d: -f1)
if [ "$_rc" -eq 0 ] && [ -n "$c" ] && [ -n "$m" ] && [ "$c" -lt "$m" ]; then
	pass "the connection is opened before the repository's memos are read"
else fail "the connection is opened before the repository's memos are read" "$_out"; fi
_capture ocsb_owner sync pull
if [ "$_rc" -eq 0 ] && ! grep -q 'ocsb trace' <<<"$_out"; then
	pass "without OCSB_SYNC_TRACE, no trace line"
else fail "without OCSB_SYNC_TRACE, no trace line" "$_out"; fi

# --- a history unrelated to the owner's HEAD: the pull remembers that (so the next one
# skips a walk of both histories) and notices when it stops being true
rt=$(as_user "$AGENT" sh -c "cd '$AREPO' && printf '100644 blob %s\tr.txt\n' \$(echo r | git hash-object -w --stdin) | git mktree")
agit branch -q scratch "$(agit commit-tree -m root "$rt")"
check_output "an agent branch with no history in common with HEAD is fetched" \
	'^ai-dev/scratch: new' ocsb_owner sync pull
check_output "the pull remembers that it shares nothing with HEAD" \
	'^refs/remotes/ai-dev/scratch [0-9a-f]{40} [0-9a-f]{40}$' as_owner cat "$PROJECT/.git/ocsb-sync.unrelated"
ino=$(stat -c %i "$PROJECT/.git/ocsb-sync.unrelated")
ocsb_owner sync pull >/dev/null 2>&1
check "a pull that learnt nothing new leaves that memo's file alone (same inode)" \
	test "$(stat -c %i "$PROJECT/.git/ocsb-sync.unrelated")" = "$ino"
rt2=$(as_user "$AGENT" sh -c "cd '$AREPO' && printf '100644 blob %s\tr.txt\n' \$(echo r2 | git hash-object -w --stdin) | git mktree")
agit branch -q -f scratch "$(agit commit-tree -p scratch -m second "$rt2")"
check_output "one more commit on it: one commit to review" \
	'^ai-dev/scratch: updated .*, 1 commit to review' ocsb_owner sync pull
check "the memo was carried forward to the new tip" \
	grep -q "^refs/remotes/ai-dev/scratch $(agit rev-parse scratch) " "$PROJECT/.git/ocsb-sync.unrelated"
check "positive control: carrying it forward rewrote the file (a new inode)" \
	test "$(stat -c %i "$PROJECT/.git/ocsb-sync.unrelated")" != "$ino"
# The agent merges the owner's history in: the branch is related to HEAD now, and the
# review must start from the merge base again (a stale memo would say "1 commit").
agit branch -q -f scratch "$(agit commit-tree -p scratch -p owner-main -m merge "$rt2")"
_capture ocsb_owner sync pull
merged=$_out
want=$(ogit rev-list --count refs/remotes/ai-dev/scratch --not HEAD)
if [ "$want" -gt 1 ] && grep -Eq "^ai-dev/scratch: updated .*, $want commits to review" <<<"$merged"; then
	pass "after merging the owner's history, the review counts from HEAD again ($want commits)"
else
	fail "after merging the owner's history, the review counts from HEAD again ($want commits)" "$merged"
fi
check_fails "and the memo forgot the branch" \
	grep -qs '^refs/remotes/ai-dev/scratch ' "$PROJECT/.git/ocsb-sync.unrelated"

# --- status (ls-remote only)
agit branch -q unseen "$(agit commit-tree -p feature -m unseen 'feature^{tree}')"
check_output "status lists the agent's unfetched branch" '^unseen .*not fetched' \
	ocsb_owner sync status
check_output "status compares fetched branches" '^main .*(same|ahead|behind)' \
	ocsb_owner sync status
check_fails "status fetched nothing" ogit rev-parse -q --verify refs/remotes/ai-dev/unseen

# --- hostile ref names in the agent's repository: skipped loudly, the rest fetched
tip=$(agit rev-parse feature)
long=$(head -c 300 /dev/zero | tr '\0' a)
printf '%s refs/heads/evil\342\200\256txt.exe\n%s refs/heads/%s\n%s refs/heads/a..b\n' \
	"$tip" "$tip" "$long" "$tip" >>"$AREPO/.git/packed-refs"
chown "$AGENT:" "$AREPO/.git/packed-refs"
check_output "positive control: the agent's git advertises the bidi-named branch" 'evil' \
	agit for-each-ref refs/heads
_capture ocsb_owner sync pull
hostile=$_out
if [ "$_rc" -eq 0 ] && grep -q 'skipped.*evil\\xe2\\x80\\xaetxt.exe.*bidi' <<<"$hostile"; then
	pass "a bidi branch name is skipped with an escaped name and the reason"
else
	fail "a bidi branch name is skipped with an escaped name and the reason" "$hostile"
fi
if grep -q 'skipped.*aaaa.*longer than' <<<"$hostile"; then pass "an overlong ref is skipped";
else fail "an overlong ref is skipped" "$hostile"; fi
# Names only: a commit id may hold "aaaa" (it did: ecaea62...242aaaa4e8).
_capture ogit for-each-ref --format='%(refname)' refs/remotes
if ! grep -Eq 'evil|aaaa|a\.\.b' <<<"$_out"; then pass "nothing of those names reached the owner"
else fail "nothing of those names reached the owner" "$_out"; fi
check_output "positive control: the valid branches are still fetched" 'refs/remotes/ai-dev/unseen' \
	ogit for-each-ref refs/remotes
sed -i '/ refs\/heads\/\(evil\|aaaa\|a\.\.b\)/d' "$AREPO/.git/packed-refs"

# --- bounds on what the agent may send
as_user "$AGENT" sh -c "cd '$AREPO' && git checkout -q -b big &&
	head -c 300000 /dev/urandom > r.bin &&
	git add r.bin && git commit -qm big"
check_fails_output "a pull over --max-objects is aborted with the reason" 'max-objects' \
	ocsb_owner sync pull --max-objects 2
check_fails_output "a pull over --max-bytes is aborted with the reason" 'max-bytes' \
	ocsb_owner sync pull --max-bytes 64K
check_fails "an aborted pull wrote no ref" ogit rev-parse -q --verify refs/remotes/ai-dev/big
check_output "positive control: the same pull within the bounds works" 'ai-dev/big: new' \
	ocsb_owner sync pull

# --- who committed (issue 28): the agent's commits name it as committer, the author is
# the owner's mirrored user.name by default (agent-git-author agent names the agent), and
# the pull's review says both. The agent's own user.name (set above) goes, so the
# mirrored one applies again.
as_user "$AGENT" git config --global --unset user.name
as_user "$AGENT" git config --global --unset user.email
agent_ident='ai-dev \(ocsb agent\) <ai-dev@[a-z0-9-]+\.ocsb>'
check_output "an ssh session of the agent has the agent as git's committer" \
	"^$agent_ident\$" owner_ssh "$AGENT" 'echo "$GIT_COMMITTER_NAME <$GIT_COMMITTER_EMAIL>"'
owner_ssh "$AGENT" 'cd ~/shop && git branch who "$(git commit-tree -p main -m who "main^{tree}")"'
check_output "a commit the agent makes in its ssh session names the agent as committer" \
	"^$agent_ident\$" agit log -1 --format='%cn <%ce>' who
check_output "control: its author is the owner's mirrored user.name and user.email" \
	'^Owner <owner@example.com>$' agit log -1 --format='%an <%ae>' who
_capture ocsb_owner sync pull
check_output "the pull's review says the agent committed it and the owner is the author" \
	"^  1 commit committed by $agent_ident, authored by Owner <owner@example.com>\$" \
	printf '%s\n' "$_out"
echo 'agent-git-author agent' >>/etc/ocsb/ocsb.conf
owner_ssh "$AGENT" 'cd ~/shop && git branch who2 "$(git commit-tree -p main -m who2 "main^{tree}")"'
check_output "agent-git-author agent: the author is the agent too" \
	"^$agent_ident / $agent_ident\$" agit log -1 --format='%an <%ae> / %cn <%ce>' who2
check_output "and the JSON review names the agent as committer and author" \
	"\"commits\":1,\"committer\":\"$agent_ident\",\"author\":\"$agent_ident\"" \
	ocsb_owner sync pull --json
sed -i '/^agent-git-author /d' /etc/ocsb/ocsb.conf

# --- the host key pin (invariant 6)
cp -p "$PIN" "$E2E_SCRATCH/pin.good"
ssh-keygen -q -t ed25519 -N '' -f "$E2E_SCRATCH/fake" >/dev/null
fake=$(cut -d' ' -f2 "$E2E_SCRATCH/fake.pub")
sed -i -E "s|^([^ ]+) [^ ]+ [^ ]+|\1 ssh-ed25519 $fake|" "$PIN"
check_fails_output "a wrong pin: pull refuses to connect" \
	'does not match the pin|another type than the pin' \
	ocsb_owner sync pull
: >"$PIN"
check_fails_output "no pin: pull refuses to connect" 'no pinned host key' ocsb_owner sync pull
cp -p "$E2E_SCRATCH/pin.good" "$PIN"
check_output "positive control: the right pin works" 'REVIEW GATE' ocsb_owner sync pull
