# SPDX-License-Identifier: MIT
# OpenCode's output goes through ocsb-agentd into a bounded log: a child that writes
# without end cannot fill the disk. A stand-in for OpenCode (root-owned, as opencode-bin
# must be) answers the readiness probe and then floods its output.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
fake_opencode 30
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
LOG=/var/log/ocsb/opencode-shop.log
flooded() { grep -q FLOOD-DONE "$LOG"; }
wait_for 60 flooded && pass "the stand-in's 30 MiB of output arrive through agentd" || fail "the stand-in's 30 MiB of output arrive through agentd" "$(tail -n 15 "$E2E_SCRATCH/agentd.log")"
size=$(stat -c %s "$LOG")
old=$(stat -c %s "$LOG.1" 2>/dev/null || echo 0)
echo "# log $size bytes, previous $old bytes"
[ "$size" -le $((10 * 1024 * 1024)) ] && pass "the log stays within 10 MiB ($size bytes)" || fail "the log stays within 10 MiB" "$size bytes"
[ "$old" -gt 0 ] && [ "$old" -le $((10 * 1024 * 1024)) ] && pass "one older log kept, also bounded ($old bytes)" || fail "one older log kept, bounded" "$old bytes"
check_output "nothing else piles up in /var/log/ocsb" '^2$' bash -c "ls /var/log/ocsb | grep -c '^opencode-shop'"
check_output "the log is the supervisor's, not the agent's" '^ocsb-agentd 640$' stat -c '%U %a' "$LOG"
check_output "ocsb logs shows the newest lines" 'FLOOD-DONE' as_owner "$OCSB" logs -n 3
kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"
