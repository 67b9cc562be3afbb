# SPDX-License-Identifier: MIT
# An ssh session of the agent joins ocsb-agentd's cgroup or does not open (issue 26 item 7).
# An outside tester's session ran 1,500 processes and 1.5 GiB past limit-tasks 400 and
# limit-memory 256M on a cgroup v1 host without systemd: the pam_namespace init script
# skipped a listed cgroup that was gone and the whole list when it was missing, as
# while ocsb-agentd restarts. Now it refuses then, and checks /proc/PID/cgroup after
# joining. The windows are made here on purpose: a list naming cgroups that were removed,
# one cgroup of the list gone, a write that moves nothing, no list at all; each refusal has
# its positive control (a session that opens, and is in every listed cgroup).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-cg.sh"

make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
fake_opencode
set_limits 256M 400 none
LIST=/run/ocsb/$AGENT/cgroups
start_agentd() {
	setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
	AGENTD=$!
	wait_for 30 test -s "$LIST"
}
stop_agentd() {
	kill -TERM "$AGENTD"
	wait_for 20 bash -c "! kill -0 $AGENTD 2>/dev/null"
}
# in_listed OUT: every cgroup of the saved list is in OUT (a /proc/PID/cgroup text).
in_listed() {
	local p sub ctrl rel
	while read -r p; do
		sub=${p%/cgroup.procs}
		sub=${sub#/sys/fs/cgroup/}
		ctrl=${sub%%/*}
		rel=/${sub#*/}
		grep -Eq "^[0-9]+:([^:]*,)?$ctrl(,[^:]*)?:$rel\$" <<<"$1" || return 1
	done <"$E2E_SCRATCH/list"
}
# session_in_cgroups: an ssh session opens and is in every listed cgroup.
session_in_cgroups() {
	local out
	out=$(owner_ssh "$AGENT" cat /proc/self/cgroup) || return 1
	in_listed "$out"
}
session() { owner_ssh "$AGENT" true; }

check "agentd lists its cgroup for ssh sessions" start_agentd
cp "$LIST" "$E2E_SCRATCH/list"
if ! grep -q /pids/ "$E2E_SCRATCH/list" || ! grep -q /memory/ "$E2E_SCRATCH/list"; then
	skip "joining the agent's cgroup" "no cgroup v1 memory and pids here: $(cat "$LIST")"
	stop_agentd
	exit 0
fi
pids=$(grep /pids/ "$E2E_SCRATCH/list")
mem=$(grep /memory/ "$E2E_SCRATCH/list")
note() { printf '# %s\n' "$*"; }
note "listed: $(tr '\n' ' ' <"$E2E_SCRATCH/list")"
check "positive control: a session is in every listed cgroup (its /proc/self/cgroup)" session_in_cgroups
check_output "and under the task limit" '^400$' owner_ssh "$AGENT" 'cat /sys/fs/cgroup/pids/$(sed -n "s/^[0-9]*:pids://p" /proc/self/cgroup)/pids.max'

# --- a write that moves nothing: the pids cgroup.procs shadowed by a plain file (the
# kernel's answer, /proc/PID/cgroup, is what counts, not the write's success)
: >"$E2E_SCRATCH/fake-procs"
mount --bind "$E2E_SCRATCH/fake-procs" "$pids"
check_fails "written but not moved (pids cgroup.procs shadowed): refused" session
umount "$pids"
check "positive control: the same session once the cgroup is real again" session_in_cgroups

# --- the restart window: agentd stopped (its cgroups removed) while a session had read
# the list; made still by putting the list back as it was.
stop_agentd
check_fails "agentd stopped: its cgroups are gone" test -e "${mem%/cgroup.procs}"
install -m 0644 "$E2E_SCRATCH/list" "$LIST"
check_fails "the list names cgroups that were removed: refused" session
# One hierarchy back (pids), memory still gone: the old script joined pids and let the
# session in, held by the task limit only.
mkdir "${pids%/cgroup.procs}"
check_fails "one listed cgroup (memory) gone, the other there: refused" session
rmdir "${pids%/cgroup.procs}"

# --- no list (agentd not running, starting or stopping): refused while limits are
# configured; let in, outside any agent cgroup, when all three are 'none' (documented:
# docs/design.md invariant 4, the init script).
rm -f "$LIST"
check_fails "no list, limits configured (agentd not running): refused" session
set_limits none none none
_capture owner_ssh "$AGENT" cat /proc/self/cgroup
if [ "$_rc" -eq 0 ] && grep -q ':pids:' <<<"$_out" && ! grep -q "/ocsb-$AGENT" <<<"$_out"; then
	pass "positive control: no list and every limit 'none': the session opens, outside any agent cgroup"
else
	fail "positive control: no list and every limit 'none': the session opens, outside any agent cgroup" "exit $_rc" "$_out"
fi
set_limits none 400 none
check_fails "no list, one limit configured (limit-tasks 400): refused" session
set_limits 256M 400 none

# --- agentd back: sessions join again
check "agentd started again: it lists its cgroup" start_agentd
cp "$LIST" "$E2E_SCRATCH/list"
check "positive control: after the restart a session is in every listed cgroup" session_in_cgroups
stop_agentd
check_fails "stopped: its list is gone" test -e "$LIST"
check_fails "stopped: a session is refused (limits configured)" session
