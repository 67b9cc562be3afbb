# SPDX-License-Identifier: MIT
# The injector's network (issue 25, netlock half): the route ports are reset for every
# account but agentd's agent before the first push and on ports without a route; a SIGHUP,
# a restore after `nft flush ruleset` and an ocsb-provision run keep the routes and the
# injector's own chain in both tables, and `ocsb doctor` compares the guard's routes with
# the ones agentd serves; the ocsb-inject account reaches only its upstreams' port and DNS,
# nothing local. OpenCode is a stand-in (common-prov.sh): the injector is what is tested.
# Every "blocked" probe is paired with the same probe succeeding for root or another port.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"
. "$(dirname "$0")/lib-inject.sh"

for tool in dbus-run-session gnome-keyring-daemon python3 openssl curl nft; do
	if ! command -v "$tool" >/dev/null; then
		skip "the injector's network" "$tool missing (sudo make test-deps installs it)"
		exit 0
	fi
done
OCSB=$OCSB_BUILD/ocsb
VI="sk-ant-net-$RANDOM$RANDOM-key"
R=http://127.0.0.1:18400 # ANTHROPIC_API_KEY, the only route
MSG='{"model":"claude-3-5-haiku-20241022","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}'

make_project
fake_internet_up >/dev/null 2>&1 || fail "fake internet up"
check_output "provisioned" '^ocsb-provision: [1-9]' provision
fake_opencode
AGENT_UID=$(id -u "$AGENT")
INJ_UID=$(id -u ocsb-inject)
P=$E2E_SCRATCH/prov
inject_providers_up "$P" || fail "fake providers up"
# A plain web server on the provider's address, port 80: not a route's upstream port.
_inet_server http 198.18.1.20 80 "WEB api:80"
wait_port 198.18.1.20 80 5 || fail "a web server on 198.18.1.20:80"

start_keyring
sec() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
check_output "set --inject anthropic" '^stored ANTHROPIC_API_KEY \(global, injected via anthropic\)' \
	sec --global set ANTHROPIC_API_KEY --inject anthropic <<<"$VI"

OCSB_TEST_HOOKS=1 OCSB_TEST_INJECT_CA="$P-ca/ca.pem" setsid "$OCSB_BUILD/ocsb-warden" --foreground -v \
	>>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
field() { as_owner "$OCSB" status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" '$1 == k { if (++i == n) { $1 = ""; sub(/^ +/, ""); print; exit } }'; }
running() { [ "$(field state 2)" = running ]; }
inj_pid() { pgrep -u ocsb-inject -x ocsb-inject | head -1; }
wait_for 60 running || fail "OpenCode (the stand-in) runs" "$(tail -20 "$E2E_SCRATCH/agentd.log")"

# tcp_to USER|- ADDR PORT [get|connect]: connect (3 s), print the first line the server sends
# (after a GET with get; CONNECTED alone with connect) or why not. USER "-" is root;
# ocsb-inject, a system account without a shell or home, by setpriv.
TCP_PY='import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    how = sys.argv[3] if len(sys.argv) > 3 else ""
    if how == "connect": print("CONNECTED"); sys.exit(0)
    if how == "get": s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    d = s.recv(200)
    print("ANSWER " + d.decode(errors="replace").splitlines()[0] if d else "CLOSED without a byte")
except OSError as e:
    print("ERROR %s" % e); sys.exit(1)'
tcp_to() {
	local who=$1
	shift
	case $who in
	-) python3 -c "$TCP_PY" "$@" ;;
	ocsb-inject) setpriv --reuid=ocsb-inject --regid=ocsb-inject --clear-groups --reset-env \
		python3 -c "$TCP_PY" "$@" ;;
	*) as_user "$who" python3 -c "$TCP_PY" "$@" ;;
	esac
}
# A local service of the owner beside the routes, on every address (127.0.0.1 and 198.18.0.1).
python3 -c 'import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 18416)); s.listen(16)
while True:
    c, _ = s.accept(); c.sendall(b"LOCAL-18416\n"); c.close()' >/dev/null 2>&1 &
LOCAL_SRV=$!
wait_port 127.0.0.1 18416 5

# --- 2. before the first push: no account but agentd's agent reaches a route port
check "positive control: no route yet (agentd holds the ports, serves none)" \
	bash -c "! nft list table inet ocsb | grep -q 'dport 18400 accept'"
check_output "positive control: the owner reaches a local port beside the routes" '^ANSWER LOCAL-18416$' \
	tcp_to "$OWNER" 127.0.0.1 18416
# agentd listens on every route port from its start: a connection the table let through
# would wait in the backlog and be served with the key once the route exists.
check_fails_output "before the first push, the owner's connect to 127.0.0.1:18400 is reset" \
	'ERROR .*(refused|reset)' tcp_to "$OWNER" 127.0.0.1 18400 connect
check_fails_output "... and root's" 'ERROR .*(refused|reset)' tcp_to - 127.0.0.1 18400 connect
check_fails_output "... and the agent's (no route yet)" 'ERROR .*(refused|reset)' tcp_to "$AGENT" 127.0.0.1 18400 connect

check_output "push" '^pushed 1 secret' sec push
wait_for 15 inj_pid || fail "the injector runs" "$(tail -20 "$E2E_SCRATCH/agentd.log")"
probe() { as_user "$AGENT" curl -sS -m 15 "$@" 2>&1; }
wait_for 10 bash -c "$(declare -f probe as_user); AGENT=$AGENT; probe -d '{}' $R/v1/messages | grep -q INJECTED"
check_output "positive control: after the push the agent gets through the route" 'INJECTED-ANSWER' \
	probe -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
check_fails_output "the owner still does not (a route is the agent's alone)" 'ERROR .*(refused|reset)' \
	tcp_to "$OWNER" 127.0.0.1 18400 connect
check_fails_output "a route port without a route (18401): the owner is reset" 'ERROR .*(refused|reset)' \
	tcp_to "$OWNER" 127.0.0.1 18401 connect
check_fails_output "... and the agent" 'ERROR .*(refused|reset)' tcp_to "$AGENT" 127.0.0.1 18401 connect
check_fails_output "the end of the range (18415): the owner is reset" 'ERROR .*(refused|reset)' \
	tcp_to "$OWNER" 127.0.0.1 18415 connect

# --- 4. the injector's account: its upstreams' port and DNS, nothing local
check_output "positive control: ocsb-inject reaches the provider on 198.18.1.20:443" '^CONNECTED$' \
	tcp_to ocsb-inject 198.18.1.20 443 connect
check_output "positive control: root reaches 198.18.1.20:80" '^ANSWER HTTP/1.0 200' tcp_to - 198.18.1.20 80 get
check_fails_output "ocsb-inject does not: port 80 is no route's upstream" 'ERROR .*(refused|reset)' \
	tcp_to ocsb-inject 198.18.1.20 80 get
check_output "positive control: root reaches the local service on 127.0.0.1:18416" '^ANSWER LOCAL-18416$' \
	tcp_to - 127.0.0.1 18416
check_fails_output "ocsb-inject does not" 'ERROR .*(refused|reset)' tcp_to ocsb-inject 127.0.0.1 18416
check_output "positive control: root reaches it on the host's address 198.18.0.1:18416" '^ANSWER LOCAL-18416$' \
	tcp_to - 198.18.0.1 18416
check_fails_output "ocsb-inject does not" 'ERROR .*(refused|reset)' tcp_to ocsb-inject 198.18.0.1 18416
check_fails_output "nor the proxy port" 'ERROR .*(refused|reset)' tcp_to ocsb-inject 127.0.0.1 3128 connect
check_fails_output "nor a route port" 'ERROR .*(refused|reset)' tcp_to ocsb-inject 127.0.0.1 18400 connect
UDP_PY='import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
try:
    s.sendto(b"q", (sys.argv[1], int(sys.argv[2]))); print("ANSWER " + s.recv(64).decode())
except OSError as e:
    print("ERROR %s" % e); sys.exit(1)'
inj_udp() { setpriv --reuid=ocsb-inject --regid=ocsb-inject --clear-groups --reset-env python3 -c "$UDP_PY" "$@"; }
check_output "ocsb-inject: DNS to a non-local server answers" '^ANSWER DNS-CANARY$' inj_udp 198.18.0.53 53
check_output "ocsb-inject: TCP DNS too" '^ANSWER DNS-CANARY-TCP$' tcp_to ocsb-inject 198.18.0.53 53
# The sockets accepted on agentd's listeners are not root's: accept() gives a new socket
# the uid of the process that accepts it (the kernel's sock_graft), here ocsb-inject. Its
# replies to the agent go through the injector's chain, which lets them out by their reply
# direction from 127.0.0.1's route ports. Read from /proc/net/tcp while a slow request is in
# flight; that the request is served is the proof that the chain lets the replies out.
(probe -d "$MSG" "$R/v1/messages/slow" >"$E2E_SCRATCH/slow.out") &
SLOW=$!
sleep 0.7
SOCK_PY='import sys
for line in open("/proc/net/tcp").readlines()[1:]:
    f = line.split()
    lport, rport, st, uid = int(f[1].split(":")[1], 16), int(f[2].split(":")[1], 16), f[3], f[7]
    if st != "01": continue
    if lport == 18400: print("accepted uid=%s" % uid)
    if rport == 443: print("upstream uid=%s" % uid)'
python3 -c "$SOCK_PY" >"$E2E_SCRATCH/socks" 2>&1
wait "$SLOW"
check_output "positive control: the slow request was served" 'message_stop' cat "$E2E_SCRATCH/slow.out"
check_output "positive control: the injector's upstream socket is ocsb-inject's" "^upstream uid=$INJ_UID\$" cat "$E2E_SCRATCH/socks"
check_output "the socket accepted from the agent is ocsb-inject's, not the listener's (root)" \
	"^accepted uid=$INJ_UID\$" cat "$E2E_SCRATCH/socks"

# tables_keep WHEN: both tables hold the route, the injector's chain and the range reset
tables_keep() {
	local t
	for t in ocsb ocsb_guard; do
		check_output "$1: table $t accepts the agent on the route" \
			"meta skuid $AGENT_UID ip daddr 127.0.0.1 tcp dport 18400 accept" nft list table inet "$t"
		check_output "$1: table $t resets the route range for the others" \
			'ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset' nft list table inet "$t"
		check_output "$1: table $t sends ocsb-inject to its chain" \
			"meta skuid $INJ_UID jump inject" nft list table inet "$t"
		check_output "$1: table $t lets ocsb-inject reach port 443" \
			'^\s*tcp dport 443 accept$' nft list chain inet "$t" inject
	done
}
tables_keep "after the push"

# --- 1. a SIGHUP keeps the routes in both tables
reloads() { grep -c 'configuration reloaded' "$E2E_SCRATCH/agentd.log"; }
n=$(reloads)
kill -HUP "$AGENTD"
check "SIGHUP: the configuration is reloaded" wait_for 10 bash -c "[ \$(grep -c 'configuration reloaded' $E2E_SCRATCH/agentd.log) -gt $n ]"
sleep 0.3
tables_keep "after a SIGHUP"
check_output "after a SIGHUP the agent still gets through the route" 'INJECTED-ANSWER' \
	probe -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
check_fails_output "... the owner still does not" 'ERROR .*(refused|reset)' tcp_to "$OWNER" 127.0.0.1 18400 connect
check_output "ocsb status names the route ports agentd serves" '^ +route-ports +18400$' as_owner "$OCSB" status
check_output "... and the netlock verified (each served route has its rule)" '^ +netlock +verified$' \
	as_owner "$OCSB" status
check_output "doctor (root): the netlock holds the routes agentd serves" \
	'^OK +netlock +table inet ocsb live and equal to the configuration.*routes 18400' bash -c "$OCSB doctor 2>&1; true"
check_fails "doctor (root): no netlock FAIL" bash -c "$OCSB doctor 2>&1 | grep -Eq '^FAIL +netlock'"
check_fails "ocsb-provision --check: no netlock drift" bash -c "$OCSB_BUILD/ocsb-provision --check 2>&1 | grep -q 'nftables'"

# --- a restore after `nft flush ruleset` and an ocsb-provision run keep them too
restores() { field netlock-restores; }
restored_since() { [ "$(restores)" -gt "$1" ]; }
r0=$(restores)
nft flush ruleset
check "nft flush ruleset: restored" wait_for 10 restored_since "$r0"
grep -o 'restored in .*' "$E2E_SCRATCH/agentd.log" | tail -1 | sed 's/^/# agentd: /'
tables_keep "after a restore"
check_output "... the agent gets through" 'INJECTED-ANSWER' probe -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
check_output "ocsb-provision while agentd serves" '^ocsb-provision: [0-9]+ change' prov
tables_keep "after ocsb-provision"
sleep 0.5
check_fails "... and agentd had nothing to restore (the same table)" restored_since "$((r0 + 1))"
check_fails_output "... ocsb-inject still reaches nothing local" 'ERROR .*(refused|reset)' tcp_to ocsb-inject 127.0.0.1 18416
check_output "... positive control: it reaches its upstream" '^CONNECTED$' \
	tcp_to ocsb-inject 198.18.1.20 443 connect

kill "$LOCAL_SRV" 2>/dev/null
kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"
kill_tree "$KR_PID"
cd / || true
