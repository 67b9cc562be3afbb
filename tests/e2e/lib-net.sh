# SPDX-License-Identifier: MIT
# lib-net.sh: "the internet" for e2e tests, sourced after lib.sh inside the test namespace.
# fake_internet_up makes a second network namespace `inet` joined by a veth pair; it holds
# every address of 198.18.0.0/15 (RFC 2544, benchmarking: never a real host) the tests use,
# with small servers on them. The test namespace routes everything to it, so a packet that
# escapes the netlock lands here and nowhere else: `inet` has no route out.
#
#   198.18.0.1       this namespace's side of the veth
#   198.18.0.2       the internet's side (gateway)
#   198.18.1.10      allowed.test     HTTP :80 "WEB allowed.test", TLS-like TCP :443, :8443
#   198.18.1.11      blocked.test     HTTP :80 "WEB blocked.test"
#   198.18.1.12      other.test       HTTP :80 (neither allowed nor blocked), TCP :22
#   198.18.1.13      internal.test    HTTP :80, named in tests that allow private-looking hosts
#   198.18.0.53      DNS port 53 UDP/TCP listener that answers nothing useful (a canary);
#                    with INET_DNS_LOG set, each query's name is appended to that file
#   169.254.169.254  "cloud metadata" HTTP :80, reachable only through the veth
# Names are in /etc/hosts (squid reads it), so no resolver is needed.

INET_NS=inet
INET_HOSTS=(allowed.test:198.18.1.10 blocked.test:198.18.1.11 other.test:198.18.1.12
	internal.test:198.18.1.13)

# A tiny server in the internet namespace: HTTP that names the host it serves, or raw TCP
# that greets with a banner (stands in for TLS: CONNECT tunnels only need bytes to flow).
# LOG (optional): the name each DNS query asks for is appended to it ("udp NAME", "tcp NAME").
_inet_server() { # KIND ADDR PORT TEXT [LOG]
	ip netns exec "$INET_NS" python3 -c '
import socket, sys, threading
kind, addr, port, text = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
log = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
def qname(msg):
    labels, i = [], 12
    while i < len(msg) and msg[i] and len(labels) < 64:
        labels.append(msg[i + 1:i + 1 + msg[i]].decode("ascii", "replace"))
        i += 1 + msg[i]
    return ".".join(labels)
def note(how, msg):
    if log:
        with open(log, "a") as f:
            f.write("%s %s\n" % (how, qname(msg)))
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
typ = socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM
s = socket.socket(fam, typ)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
if kind == "udp":
    while True:
        data, peer = s.recvfrom(2048)
        note("udp", data)
        s.sendto(text.encode(), peer)
s.listen(64)
def serve(c):
    try:
        c.settimeout(5)
        if kind == "http":
            c.recv(4096)
            body = (text + "\n").encode()
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        elif log:
            note("tcp", c.recv(4096)[2:])
            c.sendall((text + "\n").encode())
        else:
            c.sendall((text + "\n").encode())
            c.recv(1)
    except Exception:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
' "$@" >/dev/null 2>&1 &
}

fake_internet_up() {
	local h name addr
	mkdir -p /run/netns
	ip netns add "$INET_NS" || return 1
	ip link add veth-lan type veth peer name veth-inet || return 1
	ip link set veth-inet netns "$INET_NS"
	ip addr add 198.18.0.1/24 dev veth-lan
	ip link set veth-lan up
	ip netns exec "$INET_NS" ip link set lo up
	ip netns exec "$INET_NS" ip addr add 198.18.0.2/24 dev veth-inet
	ip netns exec "$INET_NS" ip link set veth-inet up
	ip netns exec "$INET_NS" ip route add default dev veth-inet
	for h in "${INET_HOSTS[@]}"; do
		ip netns exec "$INET_NS" ip addr add "${h#*:}/32" dev lo
		printf '%s\t%s\n' "${h#*:}" "${h%%:*}" >>/etc/hosts
	done
	ip netns exec "$INET_NS" ip addr add 198.18.0.53/32 dev lo
	ip netns exec "$INET_NS" ip addr add 169.254.169.254/32 dev lo
	# Everything leaves through the veth: 198.18/15 and the link-local canary included.
	ip route add default via 198.18.0.2 dev veth-lan
	ip route add 169.254.169.254/32 via 198.18.0.2 dev veth-lan

	for h in "${INET_HOSTS[@]}"; do
		name=${h%%:*} addr=${h#*:}
		_inet_server http "$addr" 80 "WEB $name"
	done
	_inet_server tcp 198.18.1.10 443 "TLS-LIKE allowed.test:443"
	_inet_server tcp 198.18.1.10 8443 "TLS-LIKE allowed.test:8443"
	_inet_server tcp 198.18.1.12 22 "SSH-2.0-fake other.test"
	_inet_server udp 198.18.0.53 53 "DNS-CANARY" "${INET_DNS_LOG:-}"
	_inet_server tcp 198.18.0.53 53 "DNS-CANARY-TCP" "${INET_DNS_LOG:-}"
	_inet_server http 169.254.169.254 80 "METADATA secret-token"
	for addr in 198.18.1.10 198.18.1.11 198.18.1.12 198.18.1.13 169.254.169.254; do
		wait_port "$addr" 80 5 || return 1
	done
	wait_port 198.18.1.10 443 5
}

# inet_dns_asked NAME: 0 when the fake resolver logged a query for NAME (INET_DNS_LOG)
# within 3 seconds.
inet_dns_asked() {
	local i
	for i in $(seq 30); do
		grep -q -- " $1\$" "$INET_DNS_LOG" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
