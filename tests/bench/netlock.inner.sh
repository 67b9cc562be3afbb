# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/netlock). Prints "# ..." figure lines.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"
. "$(dirname "$0")/../e2e/lib-net.sh"

"$OCSB_BUILD/bench_netlock_apply" 200 || fail "netlock apply benchmark"

make_project
fake_internet_up >/dev/null 2>&1
provision >/dev/null 2>&1 || fail "provisioning for the benchmark" "$(provision 2>&1)"

# Throughput from the agent to a sink on loopback, on a port the table lets through
# (the proxy's: squid is stopped for this and a plain sink takes its place).
prov_port=3128
"$OCSB_BUILD/ocsb-provision" --remove >/dev/null 2>&1
sink() {
	python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 3128)); s.listen(4)
while True:
    c, _ = s.accept()
    while c.recv(1 << 20): pass
    c.close()' &
	SINK=$!
	wait_port 127.0.0.1 "$prov_port" 5
}
send_mb() { # MB: seconds to send MB MiB as the agent
	as_user "$AGENT" python3 -c '
import socket, sys, time
n = int(sys.argv[1]); buf = b"x" * (1 << 20)
s = socket.create_connection(("127.0.0.1", 3128))
t = time.perf_counter()
for _ in range(n): s.sendall(buf)
s.shutdown(socket.SHUT_WR); s.recv(1)
print("%.4f" % (time.perf_counter() - t))' "$1"
}
sink
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
# Alternate the two cases so a busy moment of the machine hits both alike.
nft list table inet ocsb >/dev/null 2>&1 && nft delete table inet ocsb
"$OCSB_BUILD/ocsb-provision" >/dev/null 2>&1 # puts the table back (squid cannot bind: busy port)
nft list table inet ocsb >/dev/null 2>&1 || { kill "$SINK"; fail "table for the throughput run"; }
: >"$E2E_SCRATCH/with"
: >"$E2E_SCRATCH/without"
: >"$E2E_SCRATCH/ctonly"
# The table's `ct` rule turns connection tracking on for the namespace; most machines have
# it on already (any stateful firewall, docker). The third case isolates that part: no
# ocsb table, but another table with a ct match, so conntrack runs.
ct_only() { printf 'table inet bench_ct {\n chain o {\n type filter hook output priority 10; policy accept;\n ct state invalid counter\n }\n}\n' | nft -f -; }
for i in 1 2 3 4 5 6 7; do
	send_mb 2048 >>"$E2E_SCRATCH/with"
	nft delete table inet ocsb
	send_mb 2048 >>"$E2E_SCRATCH/without"
	ct_only
	send_mb 2048 >>"$E2E_SCRATCH/ctonly"
	nft delete table inet bench_ct
	"$OCSB_BUILD/ocsb-provision" >/dev/null 2>&1
done
with=$(median <"$E2E_SCRATCH/with")
without=$(median <"$E2E_SCRATCH/without")
ctonly=$(median <"$E2E_SCRATCH/ctonly")
kill "$SINK" 2>/dev/null
awk -v a="$without" -v b="$with" -v c="$ctonly" 'BEGIN {
	printf "# loopback 2 GiB as the agent, median of 7 (target: the table costs < 5%%)\n"
	printf "#   no table, no conntrack:    %.3f s (%.0f MiB/s)\n", a, 2048 / a
	printf "#   conntrack only:            %.3f s (%.0f MiB/s)\n", c, 2048 / c
	printf "#   ocsb table:                %.3f s (%.0f MiB/s)\n", b, 2048 / b
	printf "#   table vs nothing %+.1f%%, table vs conntrack already on %+.1f%%\n",
		(b - a) / a * 100, (b - c) / c * 100 }'

# Request latency: through the proxy (as the agent) vs direct (as root), 50 requests each.
"$OCSB_BUILD/ocsb-provision" >/dev/null 2>&1
wait_port 127.0.0.1 3128 5
lat() { # who curl-args...: mean ms of 50 requests (each a fresh curl, like a tool would)
	local who=$1
	shift
	for i in $(seq 50); do
		as_user "$who" curl -s -o /dev/null -w '%{time_total}\n' --max-time 5 "$@" http://allowed.test/
	done | awk '{s += $1} END {printf "%.3f", s / NR * 1000}'
}
direct=$(lat root --noproxy '*')
proxied=$(lat "$AGENT" -x http://127.0.0.1:3128)
awk -v d="$direct" -v p="$proxied" 'BEGIN {
	printf "# request to the fake internet, mean of 50: direct %.3f ms, through the proxy %.3f ms (x%.2f)\n", d, p, p / d }'
pass "netlock benchmark ran"
