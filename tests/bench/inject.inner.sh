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
# The CA certificate is public: the agent's curl trusts it for the proxy path.
install -m 0644 "$P/ca.pem" /tmp/bench-ca.pem
start_keyring
sec() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
echo "sk-bench-$RANDOM" | sec --global set ANTHROPIC_API_KEY --inject anthropic >/dev/null ||
	{ fail "set"; exit 1; }
OCSB_TEST_HOOKS=1 OCSB_TEST_INJECT_CA="$P/ca.pem" setsid "$OCSB_BUILD/ocsb-agentd" --foreground \
	>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
for i in $(seq 100); do [ -S /run/ocsb/agentd.sock ] && break; sleep 0.1; done
sec push >/dev/null || { fail "push"; exit 1; }
# Listening, seen from outside (only the agent may connect to a route).
route_up() { ss -Hltn 'sport = :18400' | grep -q LISTEN; }
wait_for 10 route_up || { fail "route up"; exit 1; }
wait_port 127.0.0.1 3128 10 || { fail "proxy up"; exit 1; }

MSG='{"model":"claude-3-5-haiku-20241022","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
W='%{time_starttransfer} %{time_total}\n'
route() { as_user "$AGENT" curl -sS -o /dev/null -w "$W" -d "$MSG" http://127.0.0.1:18400/v1/messages; }
proxy() {
	as_user "$AGENT" curl -sS -o /dev/null -w "$W" -x http://127.0.0.1:3128 --cacert /tmp/bench-ca.pem \
		-H 'x-api-key: held-by-the-agent' -d "$MSG" https://api.anthropic.com/v1/messages
}
direct() { curl -sS -o /dev/null -w "$W" --cacert /tmp/bench-ca.pem -d "$MSG" https://api.anthropic.com/v1/messages; }
route >/dev/null && proxy >/dev/null && direct >/dev/null || { fail "a warm-up request"; exit 1; }
for i in $(seq "$RUNS"); do
	route >>"$E2E_SCRATCH/route"
	proxy >>"$E2E_SCRATCH/proxy"
	direct >>"$E2E_SCRATCH/direct"
done
pct() { # FILE COLUMN: p50 and p99 in ms
	awk -v c="$2" '{ print $c * 1000 }' "$1" | sort -n |
		awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < 1) i = 1; printf "p50 %.1f ms, p99 %.1f ms (%d runs)", v[int((NR + 1) / 2)], v[i], NR }'
}
for w in route proxy direct; do
	echo "# $w: first byte $(pct "$E2E_SCRATCH/$w" 1); whole stream $(pct "$E2E_SCRATCH/$w" 2)"
done
p50() { awk -v c="$2" '{ print $c * 1000 }' "$1" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "# added by the route over the proxy (p50, first byte): $(awk -v a="$(p50 "$E2E_SCRATCH/route" 1)" -v b="$(p50 "$E2E_SCRATCH/proxy" 1)" 'BEGIN { printf "%+.1f ms", a - b }')"
echo "# the fake provider streams 6 events 20 ms apart: ~100 ms of every whole-stream figure is its own"
pass "inject benchmark ran ($RUNS requests per path)"
