# SPDX-License-Identifier: MIT
# --dry-run prints the plan and changes nothing, before and after provisioning.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
snapshot_state before
out=$(provision --dry-run 2>&1)
rc=$?
[ $rc -eq 0 ] && pass "--dry-run on a fresh machine exits 0" || fail "--dry-run exit $rc" "$out"
grep -q "^would: create account $AGENT" <<<"$out" && pass "plan names the account" || fail "plan names the account" "$out"
grep -q "^would: write /etc/ssh/sshd_config.d/ocsb-$AGENT.conf" <<<"$out" && pass "plan names the sshd drop-in" || fail "plan names the sshd drop-in" "$out"
grep -q "^would: create the empty repository ~$AGENT/shop" <<<"$out" && pass "plan names the agent's repository" || fail "plan names the agent's repository" "$out"
grep -Eq "^ocsb-provision: [1-9][0-9]* changes planned, none made" <<<"$out" && pass "plan ends with a count" || fail "plan ends with a count" "$out"
state_unchanged "--dry-run changed nothing" before
check_fails "no account after --dry-run" getent passwd "$AGENT"
check "positive control: the real run creates it" bash -c "'$OCSB_BUILD/ocsb-provision' --owner $OWNER --project $PROJECT >/dev/null && getent passwd $AGENT"
planned=$(grep -c '^would: ' <<<"$out")
applied=$(prov --config /etc/ocsb/ocsb.conf --check 2>&1 | grep -c '^drift: ')
[ "$applied" -eq 0 ] && pass "after the run, no drift left ($planned steps were planned)" || fail "drift after run" "$applied"
snapshot_state after
check_output "--dry-run after provisioning: 0 changes planned" '^ocsb-provision: 0 changes planned' prov --dry-run
state_unchanged "second --dry-run changed nothing" after
