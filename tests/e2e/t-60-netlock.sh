# SPDX-License-Identifier: MIT
# Netlock and egress: the agent's only way out is the proxy, and the proxy follows the rules.
# Every "blocked" probe as the agent is paired with the same probe as root succeeding.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"

make_project
fake_internet_up && pass "fake internet up" || fail "fake internet up"
mkdir -p /etc/ocsb
cat >/etc/ocsb/egress.conf <<'RULES'
# test rules
allow allowed.test
block blocked.test
expect-pass http://allowed.test/
expect-block http://blocked.test/
expect-block http://169.254.169.254/
RULES
check_output "provisioning with the netlock" '^ocsb-provision: [1-9]' provision
check_output "exactly one table inet ocsb" '^1$' bash -c "nft list tables | grep -c 'table inet ocsb'"
check_output "squid listens on 127.0.0.1:3128" 'LISTEN' bash -c "ss -Hltn 'sport = :3128'"

AG=(as_user "$AGENT")
PX=(-x http://127.0.0.1:3128)
fast() { # fast SECS cmd...: cmd fails, and within SECS seconds (refused, not a hang)
	local t0=$(date +%s%N) limit=$1 rc
	shift
	"$@" >/dev/null 2>&1
	rc=$?
	local ms=$((($(date +%s%N) - t0) / 1000000))
	[ $rc -ne 0 ] && [ $ms -lt $((limit * 1000)) ]
}
web() { curl -sS --max-time 5 "$@"; }

# --- direct connections
check_output "root reaches the fake internet directly (control)" "WEB allowed.test" web --noproxy '*' http://198.18.1.10/
check "agent: direct connection by IP fails fast" fast 2 "${AG[@]}" curl -sS --max-time 5 --noproxy '*' http://198.18.1.10/
check "agent: a program ignoring the proxy variables gets nothing" fast 2 "${AG[@]}" python3 -c '
import socket; socket.create_connection(("198.18.1.10", 80), timeout=3).recv(10)'

# --- through the proxy
check_output "agent: allowed host answers through the proxy" "WEB allowed.test" "${AG[@]}" curl -sS --max-time 5 "${PX[@]}" http://allowed.test/
check_output "agent: blocked host gets 403" '^403$' "${AG[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${PX[@]}" http://blocked.test/
check_output "agent: an unlisted host passes (blocklist policy)" "WEB other.test" "${AG[@]}" curl -sS --max-time 5 "${PX[@]}" http://other.test/

connect_via_proxy() { # USER HOST:PORT: CONNECT through squid, print the status line and the banner
	as_user "$1" python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[1], sys.argv[1])).encode())
data = b""
while b"\r\n\r\n" not in data:
    chunk = s.recv(4096)
    if not chunk: break
    data += chunk
head, _, rest = data.partition(b"\r\n\r\n")
print(head.split(b"\r\n")[0].decode())
if b" 200 " in head.split(b"\r\n")[0] + b" ":
    s.settimeout(5)
    print((rest or s.recv(4096)).decode().strip())
' "$2"
}
check_output "agent: CONNECT to 443 passes" "TLS-LIKE allowed.test:443" connect_via_proxy "$AGENT" allowed.test:443
check_output "agent: CONNECT to a non-443 port is refused" "403" connect_via_proxy "$AGENT" allowed.test:8443
check_output "root reaches allowed.test:8443 directly (control)" "TLS-LIKE" timeout 3 bash -c 'exec 3<>/dev/tcp/198.18.1.10/8443; head -1 <&3'

# --- private and local destinations through the proxy
start_canary
check_output "root reaches the loopback canary (control)" "CANARY" web "http://127.0.0.1:$CANARY_PORT/canary.txt"
check_output "root reaches the metadata canary directly (control)" "METADATA" web --noproxy '*' http://169.254.169.254/
for url in "http://127.0.0.1:$CANARY_PORT/canary.txt" "http://[::1]:$CANARY_PORT/canary.txt" \
	http://10.0.0.1/ http://169.254.169.254/ http://localhost:$CANARY_PORT/canary.txt; do
	check_output "agent: proxy refuses $url" '^403$' "${AG[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${PX[@]}" "$url"
done

# --- local services stay out of reach
for port in 5432 6379 2375 4096; do
	_inet_server tcp 0.0.0.0 "$port" "LOCAL-$port" 2>/dev/null
	(python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(8)
while True:
    c,_=s.accept(); c.sendall(b"LOCAL\n"); c.close()' "$port" >/dev/null 2>&1 &)
done
sleep 0.3
tcp_banner() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"; head -1 <&3' "$1" "$2"; }
for port in 22 5432 6379 2375 4096; do
	check "root reaches 127.0.0.1:$port (control)" tcp_banner 127.0.0.1 "$port"
	check "agent: 127.0.0.1:$port refused fast" fast 2 "${AG[@]}" bash -c "exec 3<>/dev/tcp/127.0.0.1/$port"
done
check "root reaches the host's LAN address 198.18.0.1:5432 (control)" tcp_banner 198.18.0.1 5432
check "agent: the host's LAN address 198.18.0.1:5432 refused fast" fast 2 "${AG[@]}" bash -c "exec 3<>/dev/tcp/198.18.0.1/5432"
check "root reaches [::1]:22 (control)" tcp_banner ::1 22
check "agent: [::1]:22 refused fast" fast 2 "${AG[@]}" bash -c 'exec 3<>/dev/tcp/::1/22'
v4mapped() { as_user "$1" python3 -c '
import socket
s = socket.socket(socket.AF_INET6); s.settimeout(3); s.connect(("::ffff:127.0.0.1", 22)); print(s.recv(64))'; }
check_output "root reaches ::ffff:127.0.0.1:22 (control)" "SSH-2.0" v4mapped root
check "agent: ::ffff:127.0.0.1:22 refused fast" fast 2 v4mapped "$AGENT"

# --- a server the agent runs on every address answers local clients only
# (the reply direction of its sockets is accepted towards local addresses alone: a host of
# the fake internet that connects in gets no byte of it, so nothing leaves around the proxy)
serve_banner() { # USER PORT TEXT: a TCP server on 0.0.0.0:PORT greeting with TEXT, as USER
	local who=$1
	shift
	(as_user "$who" python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(16)
while True:
    c, _ = s.accept()
    try: c.sendall((sys.argv[2] + "\n").encode())
    except OSError: pass
    c.close()' "$@" >/dev/null 2>&1 &)
}
from_inet() { # ADDR PORT: from a host of the fake internet, the first line it gets, or why not
	ip netns exec "$INET_NS" python3 -c 'import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)
    d = s.recv(64)
    print("ANSWER " + d.decode().strip() if d else "CLOSED without a byte"); sys.exit(0 if d else 1)
except OSError as e:
    print("ERROR %s" % e); sys.exit(1)' "$@"
}
serve_banner "$AGENT" 8765 AGENT-SERVER
serve_banner root 8766 ROOT-SERVER
wait_port 127.0.0.1 8765 5 && wait_port 127.0.0.1 8766 5
check_output "positive control: a host of the fake internet reaches root's server on 198.18.0.1" \
	'^ANSWER ROOT-SERVER$' from_inet 198.18.0.1 8766
check_fails_output "it gets nothing from the agent's server on 0.0.0.0" '^(ERROR|CLOSED)' from_inet 198.18.0.1 8765
check_output "positive control: the owner reaches the agent's server on 127.0.0.1" 'AGENT-SERVER' \
	as_owner timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/8765; head -1 <&3'
check_output "... and on the host's own address 198.18.0.1" 'AGENT-SERVER' \
	as_owner timeout 3 bash -c 'exec 3<>/dev/tcp/198.18.0.1/8765; head -1 <&3'

# --- DNS
udp53() { as_user "$1" python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(b"q", ("198.18.0.53", 53)); print(s.recv(64))'; }
check_output "root gets an answer on UDP 53 (control)" "DNS-CANARY" udp53 root
check_fails "agent: UDP 53 refused" udp53 "$AGENT"
check_output "root reaches TCP 53 (control)" "DNS-CANARY-TCP" tcp_banner 198.18.0.53 53
check "agent: TCP 53 refused fast" fast 2 "${AG[@]}" bash -c 'exec 3<>/dev/tcp/198.18.0.53/53'

# --- namespaces do not escape
check_output "agent can make a user namespace (control)" '^0$' "${AG[@]}" unshare -Ur id -u
check "agent in a user namespace: still no direct connection" fast 3 "${AG[@]}" unshare -Ur curl -sS --max-time 5 --noproxy '*' http://198.18.1.10/
check "agent in a new net namespace: nothing reachable" fast 3 "${AG[@]}" unshare -Urn curl -sS --max-time 5 --noproxy '*' http://198.18.1.10/

# --- the owner and root are unaffected
check_output "owner connects directly (unaffected)" "WEB allowed.test" as_owner curl -sS --max-time 5 --noproxy '*' http://198.18.1.10/

# --- ocsb egress verify / logs
check_output "ocsb egress verify: every expectation holds" 'egress verify: 3 passed, 0 failed' "$OCSB_BUILD/ocsb" egress verify
check_output "ocsb egress logs names the blocking rule" 'DENY .*blocked.test:80 .*\[block /etc/ocsb/egress.conf:3\]' "$OCSB_BUILD/ocsb" egress logs
check_fails_output "ocsb egress verify as the owner asks for root" "sudo ocsb egress verify" as_owner "$OCSB_BUILD/ocsb" egress verify
check_output "ocsb egress render prints the squid configuration" '^http_port 127.0.0.1:3128' as_owner "$OCSB_BUILD/ocsb" egress render

# --- idempotence, drift, repair
check_output "second run: 0 changes" '^ocsb-provision: 0 changes$' provision
check_output "still exactly one table" '^1$' bash -c "nft list tables | grep -c 'table inet ocsb'"
nft flush ruleset
check_fails_output "--check detects a flushed ruleset" 'drift: install the nftables table inet ocsb' prov --check
check "agent has no direct way out after the flush either... (control: the table is gone)" bash -c "! nft list tables | grep -q ocsb"
check_output "a run restores the table" '^ocsb-provision: 1 change$' prov
check "agent: direct connection refused again" fast 2 "${AG[@]}" curl -sS --max-time 5 --noproxy '*' http://198.18.1.10/

# --- bad rules: file:line, nothing applied, the running proxy keeps its rules
snapshot_state goodrules
STATE_PATHS+=(/var/lib/ocsb)
before=$(nft list table inet ocsb)
cp /etc/ocsb/egress.conf "$E2E_SCRATCH/egress.good"
printf 'allow blocked.test\nallow-regex ([unclosed\n' >>/etc/ocsb/egress.conf
check_fails_output "bad rules file: file:line error" '/etc/ocsb/egress.conf:8: bad regex' prov
[ "$(nft list table inet ocsb)" = "$before" ] && pass "bad rules: netlock untouched" || fail "bad rules: netlock untouched"
check_output "bad rules: blocked host still blocked" '^403$' "${AG[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${PX[@]}" http://blocked.test/
cp "$E2E_SCRATCH/egress.good" /etc/ocsb/egress.conf

# --- connect rule opens a port; reload keeps squid running
pid=$(cat /var/lib/ocsb/proxy/state/squid.pid)
echo "connect allowed.test:8443" >>/etc/ocsb/egress.conf
check_output "adding a connect rule: one change" '^ocsb-provision: 1 change$' prov
sleep 0.5
check_output "agent: CONNECT to allowed.test:8443 now passes" "TLS-LIKE allowed.test:8443" connect_via_proxy "$AGENT" allowed.test:8443
check_output "squid reloaded in place (same pid)" "^$pid$" cat /var/lib/ocsb/proxy/state/squid.pid

# --- egress off
echo "egress off" >>/etc/ocsb/egress.conf
check_output "egress off applies" '^ocsb-provision: [1-9]' prov
check "agent: even the proxy port is refused with egress off" fast 2 "${AG[@]}" bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128'
check_fails "squid stopped with egress off" bash -c "ss -Hltn 'sport = :3128' | grep -q LISTEN"

# --- removal
check_output "--remove" '^ocsb-provision: [1-9]' prov --remove
check_fails "--remove deleted the table" bash -c "nft list tables | grep -q 'inet ocsb'"
