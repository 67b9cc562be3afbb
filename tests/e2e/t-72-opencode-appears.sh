# SPDX-License-Identifier: MIT
# OpenCode's binary missing while ocsb-agentd runs (the unit started before OpenCode was
# installed, or a reinstall after apt purge removed /opt/ocsb: issue 28, item 3): the
# instance is stopped with the command that installs it, said once in the log, and starts
# by itself once the binary is there, with no `ocsb restart`. A root-owned stand-in for
# OpenCode (opencode-bin must be root's) plays the install.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
fake_opencode
mv /etc/fakeoc/opencode /etc/fakeoc/opencode.later
check "positive control: opencode-bin names a file that is not there" test ! -e /etc/fakeoc/opencode
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
# field KEY: KEY's value in the instance's part of ocsb status (the proxy's comes first)
field() {
	as_owner "$OCSB" status 2>/dev/null |
		awk -v k="$1" '$1 == "instance" { i = 1 } i && $1 == k { $1 = ""; sub(/^ +/, ""); print; exit }'
}
missing() { field last-error | grep -q 'not found.*run: sudo ocsb-provision --install-opencode'; }
if wait_for 60 missing; then
	pass "ocsb status: the instance is stopped, with the command that installs OpenCode"
else
	fail "ocsb status: the instance is stopped, with the command that installs OpenCode" \
		"$(as_owner "$OCSB" status 2>&1)" "$(tail -n 20 "$E2E_SCRATCH/agentd.log")"
fi
check_output "  ... its state is stopped" '^stopped$' field state
check_fails "  ... and no process of the agent runs" pgrep -u "$AGENT"
sleep 5 # two more looks at the binary (every 2 s)
check_output "the missing binary is logged once, not at every look" '^1$' \
	bash -c "grep -c 'opencode/shop: /etc/fakeoc/opencode: not found' '$E2E_SCRATCH/agentd.log'"
# The install: the binary appears (root's, as opencode-bin must be). Nobody restarts anything.
mv /etc/fakeoc/opencode.later /etc/fakeoc/opencode
running() { [ "$(field state)" = running ]; }
if wait_for 30 running; then
	pass "once the binary is there, the instance starts by itself (no ocsb restart)"
else
	fail "once the binary is there, the instance starts by itself (no ocsb restart)" \
		"$(as_owner "$OCSB" status 2>&1)" "$(tail -n 20 "$E2E_SCRATCH/agentd.log")"
fi
check "  ... as the agent" pgrep -u "$AGENT" -f /etc/fakeoc/opencode
check_output "  ... started once" '^1$' \
	bash -c "grep -c 'opencode/shop: started (pid' '$E2E_SCRATCH/agentd.log'"
kill -TERM "$AGENTD"
wait_for 15 bash -c "! kill -0 $AGENTD 2>/dev/null"
