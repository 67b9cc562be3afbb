# SPDX-License-Identifier: MIT
# ocsb sync pull reads what the agent sent in a confined child (issue 27 item 4): it cannot
# open the owner's files outside the project's .git (a canary private key, the sync key,
# the work tree), cannot write outside its quarantine (.git/hooks, the owner's packs, the
# home), cannot chmod (the home, .git/hooks), cannot connect anywhere (a loopback listener
# of the test's own), also under older kernels' Landlock ABIs (3: Debian 12's 6.1; 1) and
# without Landlock (the network then by seccomp alone), and cannot make the parent write
# a ref from a forged handover. Each probe runs twice in the same child
# through a test hook (a test build only): before the confinement, where it must succeed
# (the positive control), and confined. Real sshd, provisioning and git-shell.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
AREPO=/home/$AGENT/shop
ocsb_owner() { as_owner env -C "$PROJECT" "$OCSB" "$@"; }
ogit() { as_owner git -C "$PROJECT" "$@"; }
agit() { as_user "$AGENT" git -C "$AREPO" "$@"; }

make_project
ogit symbolic-ref HEAD refs/heads/main
as_owner git config --global user.name Owner
as_owner git config --global user.email owner@example.com
as_owner sh -c "cd '$PROJECT' && echo one > a.txt && git add a.txt && git commit -qm one"
check_output "fresh provisioning" '^ocsb-provision: [1-9][0-9]* changes$' provision
as_user "$AGENT" git config --global user.name Agent
as_user "$AGENT" git config --global user.email agent@example.com
agit checkout -q -b feature
as_user "$AGENT" sh -c "cd '$AREPO' && echo b > b.txt && git add b.txt && git commit -qm b"

# A canary where the owner's ssh key would be, the real sync key, and a loopback listener
# that counts the connections it accepts.
CANARY=$OWNER_HOME/.ssh/id_ed25519
as_owner mkdir -p -m 700 "$OWNER_HOME/.ssh"
as_owner sh -c "echo 'CANARY PRIVATE KEY' > '$CANARY' && chmod 600 '$CANARY'"
SYNCKEY=$OWNER_HOME/.config/ocsb/${AGENT}_sync_ed25519
check "the sync key exists (the canary's neighbour)" test -s "$SYNCKEY"
PORT=18993
ACCEPTS=$E2E_SCRATCH/accepts
: >"$ACCEPTS"
python3 - "$PORT" "$ACCEPTS" <<'EOF' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
s.settimeout(120)
open(sys.argv[2] + ".ready", "w").close()
while True:
    try:
        c, _ = s.accept()
    except OSError:
        break
    with open(sys.argv[2], "a") as f:
        f.write("accepted\n")
    c.close()
EOF
LISTENER=$!
wait_for 10 test -e "$ACCEPTS.ready"

G=$PROJECT/.git
OPEN="$CANARY:$SYNCKEY:$PROJECT/a.txt:$G/HEAD:$G/config"
CREATE="$G/hooks/post-checkout:$G/objects/pack/probe:$OWNER_HOME/probe:$G/objects/ocsb-incoming/pack/probe"
home_mode=$(stat -c %a "$OWNER_HOME")
_capture as_owner env -C "$PROJECT" OCSB_TEST_HOOKS=1 OCSB_SYNC_TRACE=1 \
	OCSB_TEST_SYNC_PROBE_OPEN="$OPEN" OCSB_TEST_SYNC_PROBE_CREATE="$CREATE" \
	OCSB_TEST_SYNC_PROBE_CHMOD="$OWNER_HOME:$G/hooks" \
	OCSB_TEST_SYNC_PROBE_CONNECT="127.0.0.1:$PORT" "$OCSB" sync pull
out=$_out
if [ "$_rc" -eq 0 ] && grep -q '^ai-dev/feature: new ' <<<"$out"; then
	pass "a pull with the probes works (the confined child fetched and reviewed)"
else fail "a pull with the probes works" "$out"; fi
check_output "and wrote refs/remotes/ai-dev/feature" "^$(agit rev-parse feature)$" \
	ogit rev-parse refs/remotes/ai-dev/feature

abi=$(python3 -c 'import ctypes; print(ctypes.CDLL(None).syscall(444, None, 0, 1))')
_detail "kernel $(uname -r), Landlock ABI $abi"
check_output "OCSB_SYNC_TRACE names the confinement" \
	"ocsb trace .*: sync: confined child: landlock ABI $abi \(files.*\), seccomp, no_new_privs" \
	printf '%s\n' "$out"

# probe PHASE WHAT PATH RESULT: the child's line for that probe says RESULT.
probe() {
	local line
	line=$(grep -F "sync probe $1: $2 $3: " <<<"$out" | head -1)
	if [[ -n "$line" && "$line" == *": $4" ]]; then pass "$5"; else fail "$5" "${line:-no probe line}" "$out"; fi
}
probe "before confinement" open "$CANARY" ok "positive control: before confinement the child reads the canary key"
probe confined open "$CANARY" "Permission denied" "confined, it cannot open the canary ~/.ssh/id_ed25519"
probe "before confinement" open "$SYNCKEY" ok "positive control: before confinement it reads the sync key"
probe confined open "$SYNCKEY" "Permission denied" "confined, it cannot open the sync key (the parent authenticates)"
probe "before confinement" open "$PROJECT/a.txt" ok "positive control: before confinement it reads the work tree"
probe confined open "$PROJECT/a.txt" "Permission denied" "confined, it cannot read the work tree"
probe confined open "$G/HEAD" ok "positive control: confined, it reads the project's .git/HEAD"
probe confined open "$G/config" ok "and .git/config (what it must read to fetch)"
probe "before confinement" create "$G/hooks/post-checkout" ok "positive control: before confinement it can create a hook"
probe confined create "$G/hooks/post-checkout" "Permission denied" "confined, it cannot create .git/hooks/post-checkout"
probe confined create "$G/objects/pack/probe" "Permission denied" "confined, it cannot write the owner's objects/pack"
probe confined create "$OWNER_HOME/probe" "Permission denied" "confined, it cannot write the owner's home"
probe confined create "$G/objects/ocsb-incoming/pack/probe" ok "positive control: confined, it writes its quarantine"
probe "before confinement" chmod "$OWNER_HOME" ok "positive control: before confinement it can chmod 0777 the home"
probe confined chmod "$OWNER_HOME" unchanged "confined, its chmod 0777 of the home changes nothing (Landlock has no right for modes)"
probe confined chmod "$G/hooks" unchanged "nor of .git/hooks"
check_output "the home keeps its mode" "^$home_mode\$" stat -c %a "$OWNER_HOME"
probe "before confinement" connect "127.0.0.1:$PORT" ok "positive control: before confinement it connects to the listener"
probe confined connect "127.0.0.1:$PORT" "socket: Operation not permitted" "confined, it cannot even make a socket"
check_output "the listener accepted exactly the one unconfined connection" '^1$' \
	sh -c "wc -l < '$ACCEPTS'"
check_fails "no hook was left behind" test -e "$G/hooks/post-checkout"
check_output "the packs moved in have git's mode (the parent's chmod; the child's did nothing)" \
	'^444$' sh -c "stat -c %a '$G'/objects/pack/*.pack '$G'/objects/pack/*.idx | sort -u"
check_output "the quarantine is empty after the pull" '^$' \
	find "$G/objects/ocsb-incoming" -type f

# Older kernels' Landlock (a test hook caps the ABI: 3 is Debian 12's 6.1, files only; 1
# is 5.13's): the same files are out of reach, and seccomp alone refuses the socket.
n=0
for cap in 3 1; do
	if [ "$abi" -lt "$cap" ]; then continue; fi
	n=$((n + 1))
	agit checkout -q -b "abi$cap"
	as_user "$AGENT" sh -c "cd '$AREPO' && echo $cap > abi$cap.txt && git add abi$cap.txt && git commit -qm abi$cap"
	_capture as_owner env -C "$PROJECT" OCSB_TEST_HOOKS=1 OCSB_SYNC_TRACE=1 OCSB_TEST_SYNC_LANDLOCK_ABI=$cap \
		OCSB_TEST_SYNC_PROBE_OPEN="$CANARY:$G/HEAD" OCSB_TEST_SYNC_PROBE_CREATE="$G/hooks/post-checkout" \
		OCSB_TEST_SYNC_PROBE_CONNECT="127.0.0.1:$PORT" "$OCSB" sync pull
	out=$_out
	if [ "$_rc" -eq 0 ] && grep -q "^ai-dev/abi$cap: new " <<<"$out"; then
		pass "Landlock ABI $cap: the pull works"
	else fail "Landlock ABI $cap: the pull works" "$out"; fi
	check_output "ABI $cap: the trace names it (files only, no tcp or scopes)" \
		"sync: confined child: landlock ABI $cap \(files\), seccomp, no_new_privs" printf '%s\n' "$out"
	probe confined open "$CANARY" "Permission denied" "ABI $cap: the canary key stays out of reach"
	probe confined open "$G/HEAD" ok "positive control: ABI $cap: .git/HEAD is read"
	probe confined create "$G/hooks/post-checkout" "Permission denied" "ABI $cap: no hook can be made"
	probe confined connect "127.0.0.1:$PORT" "socket: Operation not permitted" \
		"ABI $cap: no socket (seccomp: Landlock has no TCP rules there)"
done
check_output "the listener saw only the unconfined probes" "^$((1 + n))\$" sh -c "wc -l < '$ACCEPTS'"

# Without Landlock (a test hook: as on a kernel without it), the pull still works and
# says so; seccomp still keeps the child off the network.
agit checkout -q -b feature2
as_user "$AGENT" sh -c "cd '$AREPO' && echo c > c.txt && git add c.txt && git commit -qm c"
_capture as_owner env -C "$PROJECT" OCSB_TEST_HOOKS=1 OCSB_SYNC_TRACE=1 OCSB_TEST_SYNC_NO_LANDLOCK=1 \
	OCSB_TEST_SYNC_PROBE_OPEN="$CANARY" OCSB_TEST_SYNC_PROBE_CONNECT="127.0.0.1:$PORT" "$OCSB" sync pull
out=$_out
if [ "$_rc" -eq 0 ] && grep -q '^ai-dev/feature2: new ' <<<"$out"; then
	pass "without Landlock the pull still works"
else fail "without Landlock the pull still works" "$out"; fi
check_output "and says on stderr that the child's files are unconfined" \
	'warning: this kernel has no Landlock: .*every file you can read and write' printf '%s\n' "$out"
check_output "the trace says so too" 'sync: confined child: NO landlock' printf '%s\n' "$out"
probe confined open "$CANARY" ok "positive control: without Landlock the confined child reads the canary"
probe confined connect "127.0.0.1:$PORT" "socket: Operation not permitted" \
	"without Landlock, seccomp still refuses it a socket (as on Debian 12's kernel 6.1 for TCP)"
check_output "the listener still saw only the probes before confinement" "^$((2 + n))\$" \
	sh -c "wc -l < '$ACCEPTS'"
_capture as_owner env OCSB_TEST_HOOKS=1 OCSB_TEST_SYNC_NO_LANDLOCK=1 "$OCSB" doctor
check_output "ocsb doctor warns when the kernel lacks Landlock" \
	'sync-confine.*no Landlock.*unconfined' printf '%s\n' "$_out"
_capture as_owner "$OCSB" doctor
if [ "$abi" -gt 0 ]; then
	check_output "positive control: with Landlock, doctor says the child is confined" \
		"sync-confine.*Landlock \(ABI $abi" printf '%s\n' "$_out"
fi

# A handover the parent must not believe: a branch name a turned child might send to
# have a ref written outside refs/remotes/ai-dev/, and a text with a raw escape byte.
agit checkout -q -b feature3
as_user "$AGENT" sh -c "cd '$AREPO' && echo d > d.txt && git add d.txt && git commit -qm d"
refs_before=$(ogit for-each-ref --format='%(refname) %(objectname)')
zero=0000000000000000000000000000000000000000
tip=$(agit rev-parse feature3)
for rec in "branch	../../heads/main	$tip	-	new	0	0	0	1	-	1	1	0	0	0	0	0	0" \
	"skip	$(printf '\033[2J')evil	x" "deleted	main	$zero" "memo	review	write"; do
	_capture as_owner env -C "$PROJECT" OCSB_TEST_HOOKS=1 OCSB_TEST_SYNC_HANDOVER="$rec" \
		"$OCSB" sync pull
	if [ "$_rc" -ne 0 ] && grep -q 'broke the handover' <<<"$_out"; then
		pass "a forged record is refused: $(printf '%s' "${rec%%	*}") ($(grep -o 'handover ([^)]*)' <<<"$_out"))"
	else fail "a forged record is refused: ${rec%%	*}" "$_out"; fi
	if grep -q $'\033' <<<"$_out"; then fail "no raw escape byte reached the terminal" "$_out"; fi
done
refs_after=$(ogit for-each-ref --format='%(refname) %(objectname)')
if [ "$refs_before" = "$refs_after" ]; then pass "nothing was written by the refused pulls"; else
	fail "nothing was written by the refused pulls" "$(diff <(echo "$refs_before") <(echo "$refs_after"))"; fi
check_output "and the quarantine kept nothing" '^$' find "$G/objects/ocsb-incoming" -type f
check_output "positive control: the same pull without the forged record works" \
	'^ai-dev/feature3: new' ocsb_owner sync pull
fsck=$(ogit fsck --no-dangling 2>&1) && pass "the owner's repository passes git fsck" ||
	fail "the owner's repository passes git fsck" "$fsck"

kill "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null
:
