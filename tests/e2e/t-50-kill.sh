# SPDX-License-Identifier: MIT
# ocsb-provision killed with SIGKILL after each of its changes: a plain re-run converges.
# OCSB_FAULT_KILL_AT=N makes it SIGKILL itself right after its N-th change (a test hook: in a
# test build, with OCSB_TEST_HOOKS=1).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
planned=$(provision --dry-run | grep -c '^would: ')
# Kill points follow every step that changes something (a change may have several steps);
# k walks them until a run is not killed any more.
for ((k = 1; k <= 40; k++)); do
	out=$(OCSB_TEST_HOOKS=1 OCSB_FAULT_KILL_AT=$k provision 2>&1)
	rc=$?
	if [ $rc -ne 137 ]; then
		total=$((k - 1))
		[ $rc -eq 0 ] && [ $total -ge "$planned" ] &&
			pass "run with a kill point past the last step completes ($total kill points, $planned planned changes)" ||
			fail "run with a kill point past the last step completes" "exit $rc, $total kill points, $planned planned" "$out"
		break
	fi
	out=$(provision 2>&1)
	rc=$?
	chk=$(prov --check 2>&1)
	crc=$?
	login=$(owner_ssh "$AGENT" id -un 2>&1)
	if [ $rc -eq 0 ] && [ $crc -eq 0 ] && [ "$login" = "$AGENT" ]; then
		pass "killed after step $k: re-run converges, no drift, login works"
	else
		fail "killed after step $k: re-run converges" "run exit $rc" "$out" \
			"check exit $crc" "$chk" "login: $login"
	fi
	prov --remove --purge >/dev/null 2>&1 || fail "reset after iteration $k" "$(prov --remove --purge 2>&1)"
done
[ "$k" -le 40 ] || fail "kill points end" "still killed at 40"

# The same for --remove --purge, with traces left in shared places.
for ((k = 1; k <= 40; k++)); do
	[ -n "$(getent passwd "$AGENT")" ] || provision >/dev/null 2>&1
	uid=$(id -u "$AGENT")
	as_user "$AGENT" sh -c 'echo x > /tmp/agent-left; echo y > /dev/shm/agent-left'
	OCSB_TEST_HOOKS=1 OCSB_FAULT_KILL_AT=$k prov --remove --purge >/dev/null 2>&1
	rc=$?
	if [ $rc -eq 0 ]; then
		[ $k -ge 5 ] && pass "purge with a kill point past its last step completes ($((k - 1)) kill points)" ||
			fail "purge has at least 5 kill points" "only $((k - 1))"
		break
	fi
	out=$(prov --remove --purge 2>&1)
	rc2=$?
	places=(/home /run /tmp /var/tmp /dev/shm /etc /var/lib)
	root_writable && places=(/ "${places[@]}")
	left=$(find "${places[@]}" -xdev -uid "$uid" 2>/dev/null | head -5)
	if [ $rc -eq 137 ] && [ $rc2 -eq 0 ] && [ -z "$left" ] && ! getent passwd "$AGENT" >/dev/null; then
		pass "purge killed after step $k: re-run leaves no account and no file of uid $uid"
	else
		fail "purge killed after step $k: re-run converges" "first exit $rc, second exit $rc2" "$out" "left: $left"
	fi
done
