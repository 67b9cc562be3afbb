# SPDX-License-Identifier: MIT
# The proxy port is the agent's only way out (the netlock lets it reach 127.0.0.1:PORT
# whoever listens), so it must be ocsb's squid. On a stock Debian machine the squid
# package starts squid.service on *:3128, ocsb's default port: provisioning then reported
# success (something listened) while ocsb's squid could not, agentd's squid crash-looped,
# and OpenCode's traffic would have gone through Debian's squid. A foreign listener on
# [::]:3128 plays it here (no systemd in the namespace: the squid.service branch itself
# runs in the VM tier).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
PORT=3128
make_project
# Other checks FAIL in a namespace (no sshd -T match for the agent and so on): only the
# proxy line matters here, whatever doctor's exit status.
doctor() { "$OCSB" doctor; true; }

FOREIGN=
foreign_up() {
	(exec python3 -m http.server "$PORT" --bind :: >/dev/null 2>&1) &
	FOREIGN=$!
	wait_port 127.0.0.1 "$PORT" 10
}
foreign_down() {
	kill "$FOREIGN" 2>/dev/null
	wait "$FOREIGN" 2>/dev/null
	wait_for 10 bash -c "! (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null"
}

check "a foreign listener holds [::]:$PORT (127.0.0.1 too)" foreign_up
check_fails_output "provisioning refuses the port held by another process, naming the fix" \
	"127.0.0.1:$PORT, the agent's proxy port, is held by another process, not ocsb's squid" \
	provision
foreign_down
check_output "positive control: with the port free, provisioning succeeds" \
	'^ocsb-provision: [0-9]+ change' provision
check_output "doctor (root): ocsb's squid holds the port" "OK +proxy +ocsb's squid listens on 127.0.0.1:$PORT" \
	doctor

# agentd: its squid cannot listen while the foreign one holds the port; OpenCode (a
# root-owned stand-in) must not start then, and must once the port is ocsb's again.
kill "$(cat /var/lib/ocsb/proxy/state/squid.pid)"
wait_for 10 bash -c "! (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null"
fake_opencode
check "a foreign listener holds the port again" foreign_up
check_output "doctor (root) FAILs the foreign proxy" "FAIL +proxy +127.0.0.1:$PORT is held by a process that is not ocsb's squid" \
	doctor
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
refused() { grep -q "held by another process, not ocsb's squid: OpenCode not started" "$E2E_SCRATCH/agentd.log"; }
if wait_for 30 refused; then
	pass "agentd does not start OpenCode while another process holds the proxy port"
else
	fail "agentd does not start OpenCode while another process holds the proxy port" \
		"$(tail -n 20 "$E2E_SCRATCH/agentd.log")"
fi
check_fails "and no process of the agent runs" pgrep -u "$AGENT"
foreign_down
running() { as_owner "$OCSB" status 2>/dev/null | grep -Eq '^opencode .*(running|healthy)|^ +state +running'; }
ours() { procs=$(pgrep -u "$AGENT" -f /etc/fakeoc/opencode) && [ -n "$procs" ]; }
if wait_for 120 ours; then
	pass "positive control: with the port free, agentd's squid listens and OpenCode starts"
else
	fail "positive control: with the port free, agentd's squid listens and OpenCode starts" \
		"$(as_owner "$OCSB" status 2>&1)" "$(tail -n 20 "$E2E_SCRATCH/agentd.log")"
fi
check_output "doctor (root): ocsb's squid holds the port again" "OK +proxy +ocsb's squid listens on 127.0.0.1:$PORT" \
	doctor
kill -TERM "$AGENTD"
wait_for 15 bash -c "! kill -0 $AGENTD 2>/dev/null"
