# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/agentd). Prints "# ..." figure lines.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"

if [ ! -x /opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode ]; then
	skip "agentd benchmark" "OpenCode not installed (sudo make deps)"
	exit 0
fi
make_project
# 10,000 small files in the mirror of the owner's configs (the loaded scenario refreshes them).
MIRDIR=$OWNER_HOME/.config/opencode/bench
as_owner mkdir -p "$MIRDIR"
as_owner sh -c "cd '$MIRDIR' && seq -w 10000 | sed 's/.*/f&.md/' | xargs -n 1000 sh -c 'for f; do echo \"bench file \$f\" >\"\$f\"; done' sh"
echo "# mirror: $(find "$MIRDIR" -type f | wc -l) files in $MIRDIR"
provision >/dev/null 2>&1 || fail "provisioning" "$(provision 2>&1)"
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
running() { as_owner "$OCSB_BUILD/ocsb" status 2>/dev/null | awk '$1 == "state" {n++} n == 2 {print $2; exit}' | grep -qx running; }
for i in $(seq 300); do running && break; sleep 0.2; done
running || { fail "OpenCode did not become healthy"; exit 0; }
sleep 2

rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
sshd=$(cat /run/sshd.pid)
sup=$(pgrep -u ocsb-agentd -x ocsb-agentd | head -n 1)
echo "# resident memory: ocsb-warden $(rss $AGENTD) KiB (root; target < 4096), its supervisor ocsb-agentd $(rss "$sup") KiB, sshd listener $(rss "$sshd") KiB (reference)"

switches() { awk '/ctxt_switches/ {s += $2} END {print s}' "/proc/$1/status"; }
a0=$(switches $AGENTD) s0=$(switches "$sshd")
sleep "$IDLE_SECONDS"
a1=$(switches $AGENTD) s1=$(switches "$sshd")
awk -v a=$((a1 - a0)) -v s=$((s1 - s0)) -v t="$IDLE_SECONDS" 'BEGIN {
	printf "# idle wake-ups per minute: ocsb-agentd %.1f (target 0), sshd %.1f (reference), over %d s\n", a * 60 / t, s * 60 / t, t }'

# Restore latency: agentd logs event-to-verified-table time for each restore.
n0=$(grep -c 'restored in' "$E2E_SCRATCH/agentd.log")
t0=$(date +%s%N)
for i in $(seq 200); do
	nft flush ruleset
	for j in $(seq 200); do nft list table inet ocsb >/dev/null 2>&1 && break; sleep 0.005; done
done
wall=$((($(date +%s%N) - t0) / 1000000))
grep 'restored in' "$E2E_SCRATCH/agentd.log" | tail -n +$((n0 + 1)) | sed -E 's/.*restored in ([0-9.]+) ms.*/\1/' |
	sort -n | awk -v wall="$wall" '{a[NR] = $1} END {
	if (NR == 0) { print "# restore: no restore logged"; exit }
	printf "# netlock restore after nft flush ruleset, %d trials: p50 %.2f ms, p99 %.2f ms, max %.2f ms (target p99 < 50 ms); %d ms wall for all, polling included\n",
		NR, a[int(NR * 0.5) + 1], a[int(NR * 0.99)], a[NR], wall }'

# The same restore, measured from outside (an nftables event socket: from the event that
# takes inet ocsb away to the commit that brings it back), idle and then under load: 50
# control clients (slow and large requests), a full mirror refresh of 10,000 files each
# second, OpenCode restarted every 2 s.
LOAD=$(dirname "$0")/agentd_load.py
stats() { # stats LABEL: figures of the probe's lines on stdin
	sort -n | awk -v label="$1" '$1 == "timeout" {t++; next} {a[++n] = $1} END {
	if (n == 0) { printf "# %s: no restore seen (%d timeouts)\n", label, t; exit }
	p99 = int(n * 0.99); if (p99 < n * 0.99) p99++
	printf "# %s: %d trials, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %d timeouts (10 s)\n",
		label, n, a[int(n * 0.5) + 1], a[p99], a[n], t + 0 }'
}
python3 "$LOAD" probe "${IDLE_TRIALS:-100}" | stats "restore from outside, idle"
refreshes0=$(grep -c 'mirror: source changed: 10000 written' "$E2E_SCRATCH/agentd.log")
any0=$(grep -c 'mirror: source changed: ' "$E2E_SCRATCH/agentd.log")
starts0=$(grep -c 'opencode/shop: started' "$E2E_SCRATCH/agentd.log")
n1=$(grep -c 'restored in' "$E2E_SCRATCH/agentd.log")
python3 "$LOAD" load /run/ocsb/agentd.sock "$MIRDIR" 100000 >"$E2E_SCRATCH/load.out" 2>&1 &
LOADER=$!
(while :; do as_owner "$OCSB_BUILD/ocsb" restart shop >/dev/null 2>&1; sleep 2; done) &
RESTARTER=$!
sleep 3
t0=$(date +%s)
python3 "$LOAD" probe "${LOAD_TRIALS:-200}" >"$E2E_SCRATCH/probe.out"
kill "$RESTARTER" "$LOADER" 2>/dev/null
wait "$RESTARTER" "$LOADER" 2>/dev/null
stats "restore from outside, loaded (50 clients, mirror refresh of 10,000 files, OpenCode restarts)" <"$E2E_SCRATCH/probe.out"
# the warden's own part of each loaded restore, from its log: the read-back that found the
# table altered, and the apply with its record (what is left of the figure above is the wake-up).
grep 'restored in' "$E2E_SCRATCH/agentd.log" | tail -n +$((n1 + 1)) |
	sed -nE 's/.*restored in ([0-9.]+) ms.*found ([0-9.]+), apply and record ([0-9.]+).*/\1 \2/p' >"$E2E_SCRATCH/parts"
k=1
for part in apply+record found; do
	cut -d' ' -f$k "$E2E_SCRATCH/parts" | sort -n | awk -v part="$part" '{a[NR] = $1} END {
		if (NR == 0) exit
		p99 = int(NR * 0.99); if (p99 < NR * 0.99) p99++
		printf "# loaded, the warden'"'"'s own %s: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d restores)\n", part, a[int(NR * 0.5) + 1], a[p99], a[NR], NR }'
	k=$((k + 1))
done
# agentd logs (-v) every handler that held its loop 10 ms or more: how many, how long, which
sed -n 's/.*loop: a \([a-z-]*\) event held the loop \([0-9]*\) ms.*/\1 \2/p' "$E2E_SCRATCH/agentd.log" |
	awk '{n[$1]++; if ($2 > m[$1]) m[$1] = $2} END {for (k in n) printf "# loop held >= 10 ms by %s events: %d times, longest %d ms\n", k, n[k], m[k]}' | sort
cat "$E2E_SCRATCH/load.out"
echo "# during the load ($(($(date +%s) - t0)) s of probing): $(($(grep -c 'mirror: source changed: 10000 written' "$E2E_SCRATCH/agentd.log") - refreshes0)) full mirror refreshes (10000 written), $(($(grep -c 'opencode/shop: started' "$E2E_SCRATCH/agentd.log") - starts0)) OpenCode starts"
# every refresh during the load, full or not: how many files each wrote and how long it took
grep 'mirror: source changed: ' "$E2E_SCRATCH/agentd.log" | tail -n +$((any0 + 1)) |
	sed -nE 's/.*: ([0-9]+) written, [0-9]+ removed in ([0-9]+) ms.*/\1 \2/p' | sort -n -k2 | awk '
	{w[NR] = $1; t[NR] = $2; sw += $1} END {
	if (NR) printf "# mirror refreshes during the load: %d, %d files written in all; refresh time p50 %d ms, max %d ms\n", NR, sw, t[int(NR * 0.5) + 1], t[NR] }'
for i in $(seq 300); do running && break; sleep 0.2; done

# OpenCode restart to healthy, after SIGKILL (the first restart waits the 1 s backoff).
pid=$(as_owner "$OCSB_BUILD/ocsb" status | awk '$1 == "pid" {n++} n == 2 {print $2; exit}')
t0=$(date +%s%N)
kill -9 "$pid"
sleep 0.3
for i in $(seq 600); do running && break; sleep 0.05; done
echo "# OpenCode restart to healthy after SIGKILL: $((($(date +%s%N) - t0) / 1000000)) ms (1000 ms of it is the backoff)"
kill -TERM $AGENTD
pass "agentd benchmark ran"
