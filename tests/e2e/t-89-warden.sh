# SPDX-License-Identifier: MIT
# Privilege separation (issue 26): one ocsb process runs as root, the warden; the supervisor
# runs as ocsb-agentd and serves the control socket. A supervisor that breaks the protocol
# (a request its state does not allow, a malformed message, a signal it may not send) or
# dies is killed and replaced; the netlock stays the warden's all along: a connect loop of
# the agent gets no direct connection through meanwhile.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"

OCSB=$OCSB_BUILD/ocsb
make_project
fake_internet_up >/dev/null 2>&1 || fail "fake internet up"
check_output "provisioned" '^ocsb-provision: [1-9]' provision
fake_opencode
LOG=$E2E_SCRATCH/agentd.log
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$LOG" 2>&1 </dev/null &
WARDEN=$!
field() { as_owner "$OCSB" status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" '$1 == k { if (++i == n) { $1 = ""; sub(/^ +/, ""); print; exit } }'; }
oc_running() { [ "$(field state 2)" = running ]; }
check "the supervisor answers and OpenCode runs" wait_for 30 oc_running
sup_pid() { pgrep -u ocsb-agentd -x ocsb-agentd | head -n1; }

# ---- steady state ----
check_output "exactly one ocsb process runs as root: the warden" '^ocsb-warden$' \
	bash -c "pgrep -u 0 -l '^ocsb' | awk '{print \$2}'"
check_output "the supervisor runs as ocsb-agentd" '^ocsb-agentd$' ps -o user= -p "$(sup_pid)"
check_output "its uid and gid are not root's" '^[1-9][0-9]* [1-9][0-9]*$' \
	bash -c "awk '/^Uid:/{u=\$2} /^Gid:/{g=\$2} END{print u, g}' /proc/$(sup_pid)/status"
check_output "the control socket is held by the supervisor alone" "^ocsb-agentd\$" \
	bash -c "ss -xlpn | grep -F /run/ocsb/agentd.sock | grep -o 'users:((\"[a-z-]*' | cut -d'\"' -f2 | sort -u"
check_output "the children's logs are the supervisor's" '^ocsb-agentd$' stat -c %U /var/log/ocsb
check_output "the warden's children: squid as proxy, OpenCode as the agent" "^proxy $AGENT\$" \
	bash -c "echo \$(ps -o user= -p \$(pgrep -x squid | head -n1)) \$(ps -o user= -p $(field pid 2))"

# ---- the connect loop: the agent tries a direct connection every 20 ms throughout ----
as_user "$AGENT" bash -c '
	ok=0 tries=0
	while [ ! -e /tmp/stop-loop ]; do
		tries=$((tries + 1))
		timeout 1 bash -c "exec 3<>/dev/tcp/198.18.1.12/80" 2>/dev/null && ok=$((ok + 1))
		echo "$tries $ok" >/tmp/loop-count
		sleep 0.02
	done' &
LOOP=$!
check "the loop runs (control)" wait_for 10 test -s "/tmp/loop-count"
check "the owner reaches the same host directly (control)" \
	as_owner timeout 3 bash -c 'exec 3<>/dev/tcp/198.18.1.12/80'

# A compromised supervisor: root takes a copy of its end of the protocol (pidfd_getfd) and
# sends what the supervisor could. Each must end with the supervisor killed and replaced.
inject() { # inject MODE: one datagram on the supervisor's end of the protocol
	python3 - "$(sup_pid)" "$1" <<'PY'
import ctypes, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
pid, mode = int(sys.argv[1]), sys.argv[2]
pfd = os.pidfd_open(pid)
fd = libc.syscall(438, pfd, 3, 0)  # pidfd_getfd: the supervisor's fd 3
if fd < 0:
    sys.exit("pidfd_getfd: %s" % os.strerror(ctypes.get_errno()))
s = socket.socket(fileno=fd)
WP_HELLO, WP_SPAWN, WP_SIGNAL = 1, 2, 3
msgs = {
    "state": struct.pack("II", WP_HELLO, 900),                    # HELLO again, in RUN
    "short": b"\x01\x02\x03",                                    # shorter than a header
    "length": struct.pack("III", WP_SIGNAL, 901, 0),              # SIGNAL, half its payload
    "signal": struct.pack("IIII", WP_SIGNAL, 902, 0, 19),         # SIGSTOP to a child
    "kind": struct.pack("IIIIII", WP_SPAWN, 903, 99, 0, 0, 0),    # no such kind
    "unknown": struct.pack("II", 77, 904),                        # no such type
}
s.send(msgs[mode])
PY
}
refusals() { grep -c 'refused: .*killing it' "$LOG"; }
n=0
for mode in state short length signal kind unknown; do
	old=$(sup_pid)
	before=$(refusals)
	check "$mode: the forged message is sent" inject "$mode"
	check "$mode: refused and logged" wait_for 5 bash -c "[ \$(grep -c 'refused: .*killing it' '$LOG') -gt $before ]"
	check "$mode: that supervisor is gone" wait_for 5 bash -c "! kill -0 $old 2>/dev/null"
	check_output "$mode: the netlock table stays" 'table inet ocsb' nft list table inet ocsb
	check "$mode: a new supervisor answers" wait_for 40 bash -c "[ -n \"\$(pgrep -u ocsb-agentd -x ocsb-agentd)\" ] && '$OCSB_BUILD/ocsb' status >/dev/null 2>&1"
	n=$((n + 1))
done
grep 'refused' "$LOG" | sed 's/^/# /' | head -n 8

# Killed from outside: the same.
old=$(sup_pid)
kill -KILL "$old"
check "SIGKILL: that supervisor is gone" wait_for 5 bash -c "! kill -0 $old 2>/dev/null"
check_output "SIGKILL: the warden says so and keeps the netlock" 'supervisor: signal 9 .*the netlock stays' cat "$LOG"
check_output "SIGKILL: the guard table stays" 'table inet ocsb_guard' nft list table inet ocsb_guard
check "SIGKILL: a new supervisor starts OpenCode again" wait_for 60 oc_running
check_output "and the old OpenCode was stopped first (one left)" '^1$' \
	bash -c "pgrep -u '$AGENT' -f fakeoc | wc -l"

# The table altered in place, not deleted: the warden compares the kernel's listing with
# what it recorded when it installed the table (netlock_snap.c) and puts it back. The guard
# holds the agent meanwhile: the connect loop above runs through all of it.
restores() { grep -c 'restored in' "$LOG"; }
altered() { # altered WHAT RESTORED-TEST NFT-ARGS...: alter the table, wait for the restore
	local what=$1 back=$2 before
	shift 2
	before=$(restores)
	check "$what: done" nft "$@"
	check "$what: found and restored" wait_for 5 bash -c \
		"[ \$(grep -c 'restored in' '$LOG') -gt $before ] && $back"
}
uid=$(id -u "$AGENT")
rejects() { nft list chain inet ocsb agent | grep -c 'reject with icmpx admin-prohibited'; }
n_rej=$(rejects)
altered "an accept inserted first in chain agent" \
	"! nft list chain inet ocsb agent | grep -qE '^[[:space:]]*accept\$'" \
	insert rule inet ocsb agent accept
altered "the agent's uid deleted from the set" \
	"nft list set inet ocsb agents | grep -qw $uid" \
	delete element inet ocsb agents "{ $uid }"
altered "a chain added" "! nft list chain inet ocsb extra >/dev/null 2>&1" \
	add chain inet ocsb extra
h=$(nft -a list chain inet ocsb agent | grep 'reject with icmpx admin-prohibited' | tail -n 1 | sed 's/.*# handle //')
altered "the last rule of chain agent deleted" "[ \$(nft list chain inet ocsb agent | grep -c 'reject with icmpx admin-prohibited') = $n_rej ]" \
	delete rule inet ocsb agent handle "$h"
altered "a rule appended to chain output" "! nft list chain inet ocsb output | grep -q 0x00000077" \
	add rule inet ocsb output meta mark 0x77 accept
check_output "each is logged with what differed" 'table inet ocsb altered \(first difference: (a rule|the set.s elements|the table|a chain|a set|a part missing|an addition)\)' \
	cat "$LOG"
grep 'altered:' "$LOG" | tail -n 5 | sed 's/^/# /'
before=$(restores)
nft add table inet unrelated && nft add chain inet unrelated c && nft add rule inet unrelated c accept
sleep 1.5
check_output "positive control: another table's change restores nothing" "^$before\$" restores
nft delete table inet unrelated

touch /tmp/stop-loop
wait "$LOOP"
read -r tries ok </tmp/loop-count
echo "# connect loop: $tries attempts, $ok through"
[ "$tries" -gt 50 ] && pass "the connect loop ran throughout ($tries attempts)" || fail "the connect loop ran throughout" "$tries"
[ "$ok" = 0 ] && pass "no direct connection of the agent got through meanwhile" || fail "no direct connection of the agent got through meanwhile" "$ok of $tries"

# The warden stops with its supervisor and whatever the agent runs.
kill -TERM "$WARDEN"
check "SIGTERM: the warden stops" wait_for 20 bash -c "! kill -0 $WARDEN 2>/dev/null"
check_fails "no supervisor left" pgrep -u ocsb-agentd
check_fails "no OpenCode left" pgrep -u "$AGENT" -f fakeoc
check_output "the plain table stays after the stop" 'table inet ocsb' nft list table inet ocsb

# An earlier version's state (root's): ocsb-provision gives it to the account, the warden
# only checks it and refuses to start the supervisor with it (naming the path and who owns it).
chown root:root /var/lib/ocsb/agentd
echo old >/var/lib/ocsb/agentd/old-file
check_fails_output "a root-owned /var/lib/ocsb/agentd: the warden refuses to start" \
	'/var/lib/ocsb/agentd belongs to root, not to ocsb-agentd: run ocsb-provision' \
	timeout 20 "$OCSB_BUILD/ocsb-warden" --foreground
check_fails "and starts no supervisor" pgrep -u ocsb-agentd
check_fails_output "--check names the difference" 'give /var/lib/ocsb/agentd to ocsb-agentd' provision --check
check_output "provisioning converts it" '^ocsb-provision: [1-9]' provision
check_output "the directory and root's file in it are the account's" \
	'^700 ocsb-agentd ocsb-agentd ocsb-agentd$' \
	bash -c 'echo $(stat -c "%a %U %G" /var/lib/ocsb/agentd) $(stat -c %U /var/lib/ocsb/agentd/old-file)'
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$LOG" 2>&1 </dev/null &
WARDEN=$!
check "positive control: then the warden starts the supervisor and OpenCode" wait_for 30 oc_running
kill -TERM "$WARDEN"
check "and stops" wait_for 20 bash -c "! kill -0 $WARDEN 2>/dev/null"

# ---- ocsb.conf reaches the warden only through a one-shot ocsb-provision ----
# The long-lived root process holds no reader of the file: `ocsb-provision --warden-config`
# (root's, run at the warden's start and on each reload) reads and checks it and prints a
# fixed record (common/wconf.h); the warden reads that, each value bounded again.
check_fails "the warden's binary holds none of ocsb.conf's keywords it does not use" \
	grep -aqE 'mirror-writable|limit-memory|ssh-port' "$OCSB_BUILD/ocsb-warden"
check "positive control: ocsb-provision's holds them" \
	grep -aqE 'mirror-writable|limit-memory|ssh-port' "$OCSB_BUILD/ocsb-provision"
check_output "ocsb-provision --warden-config prints the record, ending with end" \
	'^ocsb-warden-config 1 agent '"$AGENT"' owner .* end$' \
	bash -c "echo \$('$OCSB_BUILD/ocsb-provision' --warden-config)"
check_fails_output "--warden-config with another option is refused, nothing done" \
	'--warden-config takes --config alone' "$OCSB_BUILD/ocsb-provision" --warden-config --remove
check "and the agent is still provisioned (control)" id "$AGENT"
conf=/etc/ocsb/ocsb.conf
cp "$conf" "$E2E_SCRATCH/ocsb.conf.good"
set_tasks() { sed -i '/^limit-tasks/d' "$conf" && echo "limit-tasks $1" >>"$conf"; }
set_tasks lots
check_fails_output "a mistake in ocsb.conf: the warden refuses to start, naming the file and line" \
	"$conf:[0-9]+: .*lots" timeout 20 "$OCSB_BUILD/ocsb-warden" --foreground
check_fails "and starts no supervisor" pgrep -u ocsb-agentd
cp "$E2E_SCRATCH/ocsb.conf.good" "$conf"
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$LOG" 2>&1 </dev/null &
WARDEN=$!
check "positive control: with the file mended it starts" wait_for 30 oc_running
set_tasks lots
kill -HUP "$WARDEN"
check "a reload with the mistake is refused, naming the line" wait_for 10 \
	grep -qE "$conf:[0-9]+: .*lots" "$LOG"
check "and keeps the running configuration" wait_for 5 \
	grep -q 'reload failed: keeping the running configuration' "$LOG"
check "OpenCode still runs" oc_running
set_tasks 333
kill -HUP "$WARDEN"
check "positive control: a good reload applies" wait_for 10 grep -q 'configuration reloaded' "$LOG"
check_output "and the new limit is in force" 'tasks 333,' field limits
cp "$E2E_SCRATCH/ocsb.conf.good" "$conf"
kill -TERM "$WARDEN"
check "and stops" wait_for 20 bash -c "! kill -0 $WARDEN 2>/dev/null"

# A one-shot that answers wrong: cut short, silent with a failure, or never. Each is
# refused with what went wrong; a slow one is killed at the deadline.
fake=$E2E_SCRATCH/fake-sbin
mkdir -p "$fake"
cp "$OCSB_BUILD/ocsb-warden" "$fake/"
fake_provision() { printf '#!/bin/sh\n%s\n' "$1" >"$fake/ocsb-provision" && chmod 755 "$fake/ocsb-provision"; }
fake_provision "printf 'ocsb-warden-config 1\\nagent $AGENT\\n'"
check_fails_output "a record cut short is refused" 'malformed record, line' \
	timeout 20 "$fake/ocsb-warden" --foreground
fake_provision "printf 'ocsb-warden-config 1\\nagent root;x\\n'"
check_fails_output "a value out of bounds is refused" "malformed record, line 2: 'agent root;x'" \
	timeout 20 "$fake/ocsb-warden" --foreground
fake_provision "exit 3"
check_fails_output "a failure without a record is refused" 'ended with status 3 and no record' \
	timeout 20 "$fake/ocsb-warden" --foreground
fake_provision "exec sleep 300"
t0=$(date +%s)
check_fails_output "one that never answers is refused at the deadline" 'no answer within 10 s' \
	timeout 30 "$fake/ocsb-warden" --foreground
check "within about 10 s" test $(($(date +%s) - t0)) -le 15
check_fails "and it is killed" pgrep -f 'sleep 300'
check_fails "none of them started a supervisor" pgrep -u ocsb-agentd

# A reload waits for the one-shot; the netlock's events are served meanwhile. A one-shot
# that takes 5 s at reload (the real one behind it): the table deleted during that wait is
# restored before the reload ends.
for b in ocsb-agentd ocsb-inject ocsb; do ln -sf "$OCSB_BUILD/$b" "$fake/$b"; done
fake_provision "[ \"\$1\" = --warden-config ] && [ -e '$E2E_SCRATCH/slow' ] && sleep 5
exec '$OCSB_BUILD/ocsb-provision' \"\$@\""
setsid "$fake/ocsb-warden" --foreground -v >>"$LOG" 2>&1 </dev/null &
WARDEN=$!
check "the warden with the slow one-shot starts (control)" wait_for 30 oc_running
before=$(restores) reloads=$(grep -c 'configuration reloaded' "$LOG")
touch "$E2E_SCRATCH/slow"
kill -HUP "$WARDEN"
sleep 1
nft delete table inet ocsb
check "the table deleted during the reload's wait is restored within 2 s" wait_for 2 \
	bash -c "[ \$(grep -c 'restored in' '$LOG') -gt $before ]"
check_output "before the reload ended" "^$reloads\$" grep -c 'configuration reloaded' "$LOG"
check "then the reload ends" wait_for 10 \
	bash -c "[ \$(grep -c 'configuration reloaded' '$LOG') -gt $reloads ]"
rm -f "$E2E_SCRATCH/slow"
kill -TERM "$WARDEN"
check "and stops" wait_for 20 bash -c "! kill -0 $WARDEN 2>/dev/null"
