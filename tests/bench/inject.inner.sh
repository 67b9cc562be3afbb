# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/inject). Prints "# ..." figure lines.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"
. "$(dirname "$0")/../e2e/lib-net.sh"
. "$(dirname "$0")/../e2e/lib-inject.sh"

OCSB=$OCSB_BUILD/ocsb
make_project
fake_internet_up >/dev/null 2>&1
provision >/dev/null 2>&1 || { fail "provisioning"; exit 1; }
P=$E2E_SCRATCH/prov
inject_providers_up "$P" || { fail "fake providers"; exit 1; }
# The CA certificate is public: the agent's client trusts it for the proxy path.
install -m 0644 "$P/ca.pem" /tmp/bench-ca.pem
start_keyring
sec() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
echo "sk-bench-$RANDOM" | sec --global set ANTHROPIC_API_KEY --inject anthropic >/dev/null ||
	{ fail "set"; exit 1; }
OCSB_TEST_HOOKS=1 OCSB_TEST_INJECT_CA="$P-ca/ca.pem" setsid "$OCSB_BUILD/ocsb-warden" --foreground \
	>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
for i in $(seq 100); do [ -S /run/ocsb/agentd.sock ] && break; sleep 0.1; done
sec push >/dev/null || { fail "push"; exit 1; }
# Listening, seen from outside (only the agent may connect to a route).
route_up() { ss -Hltn 'sport = :18400' | grep -q LISTEN; }
wait_for 10 route_up || { fail "route up"; exit 1; }
wait_port 127.0.0.1 3128 10 || { fail "proxy up"; exit 1; }

# The provider appends one line per TLS connection to api.rec.conns: the driver counts the
# route's upstream connections from it, less the direct and proxy clients' own.
python3 "$(dirname "$0")/inject_keepalive.py" drive --runs "$RUNS" --conns "$P/api.rec.conns" \
	--agent "$AGENT" --ca /tmp/bench-ca.pem --route http://127.0.0.1:18400 \
	--direct https://api.anthropic.com --proxy 127.0.0.1:3128 ||
	{ fail "the keep-alive clients" "$(tail -5 "$E2E_SCRATCH/agentd.log")"; exit 1; }
pass "inject benchmark ran ($RUNS pings and $RUNS streams per path)"
