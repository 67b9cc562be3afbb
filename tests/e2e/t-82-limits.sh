# SPDX-License-Identifier: MIT
# Resource limits: what ocsb-agentd runs as the agent cannot exhaust the machine.
# Each limit is shown to hold inside the agent's cgroup and, as the positive control, the
# same load as the agent outside it gets further (so the limit, not something else,
# stopped it).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-cg.sh"

OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
if [ ! -x "$OC_BIN" ]; then
	skip "resource limits" "OpenCode not installed at $OC_BIN (sudo make deps installs it)"
	exit 0
fi
OCSB=$OCSB_BUILD/ocsb
make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
set_limits 1G 300 50
OCSB_TEST_HOOKS=1 setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
status() { as_owner "$OCSB" status; }
field() { status 2>/dev/null | awk -v k="$1" '$1 == k { $1 = ""; sub(/^ +/, ""); print; exit }'; }
running() { status 2>/dev/null | grep -q '^ *state *running'; }
check "agentd answers" wait_for 10 test -S /run/ocsb/agentd.sock
check "OpenCode runs under the limits" wait_for 90 running
check_output "status shows the limits" '^memory 1024 MiB, tasks 300, cpu 50%$' field limits
cgs=$(agent_cgroups "$AGENTD")
if ! grep -q /pids/ <<<"$cgs" || ! grep -q /memory/ <<<"$cgs"; then
	skip "resource limits" "no cgroup v1 memory and pids here: $(field limits)"
	kill -TERM "$AGENTD"
	exit 0
fi
mem=$(grep /memory/ <<<"$cgs")
pids=$(grep /pids/ <<<"$cgs")
cpu=$(grep /cpu/ <<<"$cgs")
check_output "memory limit written" '^1073741824$' cat "$mem/memory.limit_in_bytes"
check_output "task limit written" '^300$' cat "$pids/pids.max"
[ -n "$cpu" ] && check_output "CPU quota written (50 % of one CPU)" '^50000$' cat "$cpu/cpu.cfs_quota_us"

# --- fork bomb: bounded. Children sleep so they pile up; the bomb stops at the first
# EAGAIN or at CAP. Meanwhile root and the owner must still start processes at once.
cat >"$E2E_SCRATCH/bomb.py" <<'PY'
import os, sys, time
cap, n = int(sys.argv[1]), 0
kids = []
while n < cap:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(4)
        os._exit(0)
    kids.append(pid)
    n += 1
print(n, flush=True)
for k in kids:
    os.waitpid(k, 0)
PY
chmod 644 "$E2E_SCRATCH/bomb.py"
in_agent_cgroup "$AGENTD" python3 "$E2E_SCRATCH/bomb.py" 2000 >"$E2E_SCRATCH/bomb.out" 2>&1 &
bomb=$!
sleep 1.5
t0=$(date +%s%N)
check "during the fork bomb root starts a process" bash -c true
check "during the fork bomb the owner starts a process" as_owner true
echo "# starting a process during the bomb took $((($(date +%s%N) - t0) / 1000000)) ms (both)"
wait "$bomb"
n=$(head -1 "$E2E_SCRATCH/bomb.out")
[ -n "$n" ] && [ "$n" -lt 300 ] && pass "fork bomb in the agent's cgroup stopped at $n processes (limit-tasks 300)" ||
	fail "fork bomb stopped by limit-tasks 300" "$(cat "$E2E_SCRATCH/bomb.out")"
as_user "$AGENT" python3 "$E2E_SCRATCH/bomb.py" 600 >"$E2E_SCRATCH/bomb2.out" 2>&1
check_output "positive control: the same bomb outside the cgroup reaches 600" '^600$' head -1 "$E2E_SCRATCH/bomb2.out"
check "OpenCode still answers after the bomb" wait_for 30 running

# The agent's ssh sessions join the same cgroup (pam_namespace's init script, as root,
# from the list agentd keeps in /run/ocsb/AGENT/cgroups): the same bomb from ssh.
check_output "agentd lists its cgroup for ssh sessions" "^$pids/cgroup.procs\$" cat "/run/ocsb/$AGENT/cgroups"
check_output "an ssh session of the agent is in the agent's cgroup" ":pids:.*/ocsb-$AGENT\$" \
	owner_ssh "$AGENT" cat /proc/self/cgroup
install -m 0644 "$E2E_SCRATCH/bomb.py" "/home/$AGENT/bomb.py"
owner_ssh "$AGENT" python3 bomb.py 2000 >"$E2E_SCRATCH/bomb3.out" 2>&1
n=$(head -1 "$E2E_SCRATCH/bomb3.out")
[ -n "$n" ] && [ "$n" -lt 300 ] && pass "fork bomb from an ssh session stopped at $n processes (limit-tasks 300)" ||
	fail "fork bomb from an ssh session stopped by limit-tasks 300" "$(cat "$E2E_SCRATCH/bomb3.out")"

# --- memory hog: killed inside, the machine untouched
hog='import sys; b = bytearray(int(sys.argv[1]) << 20); b[::4096] = b"x" * len(b[::4096]); print("alive")'
check_output "positive control: 100 MiB in the agent's cgroup" '^alive$' in_agent_cgroup "$AGENTD" python3 -c "$hog" 100
in_agent_cgroup "$AGENTD" python3 -c "$hog" 1600 >"$E2E_SCRATCH/hog.out" 2>&1
rc=$?
[ "$rc" -eq 137 ] && ! grep -q alive "$E2E_SCRATCH/hog.out" &&
	pass "a 1600 MiB hog in the agent's cgroup is killed (limit-memory 1G; exit $rc)" ||
	fail "a 1600 MiB hog in the agent's cgroup is killed" "exit $rc" "$(cat "$E2E_SCRATCH/hog.out")"
check_output "positive control: the same hog outside the cgroup lives" '^alive$' as_user "$AGENT" python3 -c "$hog" 1600
check_output "the kernel's OOM killer acted in the agent's cgroup" '^oom_kill [1-9]' cat "$mem/memory.oom_control"
check "OpenCode still answers after the hog" running

# --- CPU: a busy loop inside is throttled. At 10 % of a CPU, so that it is throttled even
# when the machine is busy with other work (a loop that gets little CPU anyway is not).
if [ -n "$cpu" ]; then
	sed -i 's/^limit-cpu 50$/limit-cpu 10/' /etc/ocsb/ocsb.conf
	kill -HUP "$AGENTD"
	check "SIGHUP: the CPU quota follows the file" wait_for 5 grep -qx 10000 "$cpu/cpu.cfs_quota_us"
	before=$(awk '$1 == "nr_throttled" { print $2 }' "$cpu/cpu.stat")
	in_agent_cgroup "$AGENTD" timeout 1.5 sh -c 'while :; do :; done'
	after=$(awk '$1 == "nr_throttled" { print $2 }' "$cpu/cpu.stat")
	[ "$after" -gt "$before" ] && pass "a busy loop in the agent's cgroup is throttled ($((after - before)) periods)" ||
		fail "a busy loop in the agent's cgroup is throttled" "nr_throttled $before -> $after"
	sed -i 's/^limit-cpu 10$/limit-cpu 50/' /etc/ocsb/ocsb.conf
	kill -HUP "$AGENTD"
fi

# --- SIGHUP: new limits in place without a restart
pid=$(status | awk '$1 == "pid" { n++ } n == 2 && $1 == "pid" { print $2; exit }')
sed -i 's/^limit-tasks 300$/limit-tasks 400/' /etc/ocsb/ocsb.conf
kill -HUP "$AGENTD"
check "SIGHUP: the task limit follows the file" wait_for 5 grep -qx 400 "$pids/pids.max"
check_output "SIGHUP: OpenCode kept running" "^$pid$" bash -c "$(declare -f status as_owner as_user); OCSB=$OCSB OWNER=$OWNER status | awk '\$1 == \"pid\" { n++ } n == 2 && \$1 == \"pid\" { print \$2; exit }'"
sed -i 's/^limit-tasks 400$/limit-tasks 5/' /etc/ocsb/ocsb.conf
kill -HUP "$AGENTD"
sleep 1
check_output "SIGHUP with a bad limit: refused with file and line" 'ocsb.conf:[0-9]+: limit-tasks: 5 is out of range' cat "$E2E_SCRATCH/agentd.log"
check_output "SIGHUP with a bad limit: the old limit stays" '^400$' cat "$pids/pids.max"

kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"
check_fails "stopped: the agent's cgroup is gone" test -d "$pids"
check_fails "stopped: and so is its list for ssh sessions" test -e "/run/ocsb/$AGENT/cgroups"
# With limits configured and no agentd, nothing would hold a session: it is refused
# (docs/design.md invariant 4; t-89 makes each window of a restart). With every limit
# 'none' it opens, outside any agent cgroup.
check_fails "with agentd stopped and limits configured an ssh session is refused" owner_ssh "$AGENT" true
set_limits none none none
_capture owner_ssh "$AGENT" cat /proc/self/cgroup
if [ "$_rc" -eq 0 ] && grep -q ':pids:' <<<"$_out" && ! grep -q "/ocsb-$AGENT" <<<"$_out"; then
	pass "positive control: with agentd stopped and no limits an ssh session opens, outside any agent cgroup"
else
	fail "positive control: with agentd stopped and no limits an ssh session opens, outside any agent cgroup" "$_out"
fi
