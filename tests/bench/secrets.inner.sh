# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/secrets). Prints "# ..." figure lines.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"
. "$(dirname "$0")/../e2e/lib-net.sh"

OCSB=$OCSB_BUILD/ocsb
make_project
fake_internet_up >/dev/null 2>&1
provision >/dev/null 2>&1 || { fail "provisioning"; exit 1; }

KR=$OWNER_HOME/.kr
as_owner mkdir -m 0700 -p "$KR/run"
bg_owner dbus-run-session -- bash -c "export XDG_RUNTIME_DIR=$KR/run XDG_DATA_HOME=$KR/data
	eval \"\$(printf pw | gnome-keyring-daemon --unlock --components=secrets --daemonize)\"
	echo \"\$DBUS_SESSION_BUS_ADDRESS\" >$KR/bus; exec sleep 600"
for i in $(seq 50); do [ -s "$KR/bus" ] && break; sleep 0.1; done
BUS=$(cat "$KR/bus" 2>/dev/null)
sec() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
for i in $(seq 10); do
	head -c 48 /dev/urandom | base64 | sec --global set "BENCH_KEY_$i" >/dev/null ||
		{ fail "set BENCH_KEY_$i"; exit 1; }
done

OCSB_TEST_HOOKS=1 setsid "$OCSB_BUILD/ocsb-warden" --foreground >"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
for i in $(seq 100); do [ -S /run/ocsb/agentd.sock ] && break; sleep 0.1; done

ms() { # ms CMD...: wall time of one run in milliseconds; the command must succeed
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$E2E_SCRATCH/ms.err" || { echo "FAILED"; _detail "$*: $(tail -3 "$E2E_SCRATCH/ms.err")" >&2; return; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
stats() { sort -n | awk '{ v[NR] = $1; s += $1 } END { if (NR) printf "min %d ms, median %d ms, max %d ms, mean %.1f ms (%d runs)", v[1], v[int((NR + 1) / 2)], v[NR], s / NR, NR }'; }

echo "# first push (new set: includes restarting OpenCode if it runs): $(ms sec push) ms"
echo "# ocsb secrets list (keyring search, no values, no agentd): $(for i in $(seq "$RUNS"); do ms sec list; done | stats)"
echo "# ocsb secrets push, 10 secrets, unchanged set (no restart): $(for i in $(seq "$RUNS"); do ms sec push; done | stats)"
# The owner-side process alone, without as_owner's setpriv/env: the same push from a shell
# already running as the owner.
as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" OCSB="$OCSB" RUNS="$RUNS" bash -c '
	for i in $(seq "$RUNS"); do t0=$(date +%s%N); "$OCSB" secrets push >/dev/null || echo fail; echo $((($(date +%s%N) - t0) / 1000000)); done' |
	sort -n | awk '{ v[NR] = $1 } END { printf "# push from the owner'"'"'s shell (target < 100 ms): min %d ms, median %d ms, max %d ms\n", v[1], v[int((NR + 1) / 2)], v[NR] }'
# CPU per push of every process on the path: wall times on a loaded machine are CPU time
# stretched by the run queue, so these are the figures to compare between versions.
cpu_ticks() { # user+system clock ticks of the processes named $1 (comm)
	local t=0 p f
	for p in $(pgrep -x "$1"); do
		f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
		set -- "$1" $f
		t=$((t + ${12} + ${13}))
	done
	echo "$t"
}
hz=$(getconf CLK_TCK)
d0=$(cpu_ticks dbus-daemon) k0=$(cpu_ticks gnome-keyring-d) a0=$(cpu_ticks ocsb-agentd)
c=$(as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" OCSB="$OCSB" RUNS="$RUNS" bash -c '
	for i in $(seq "$RUNS"); do "$OCSB" secrets push >/dev/null; done; times' | tail -1)
d1=$(cpu_ticks dbus-daemon) k1=$(cpu_ticks gnome-keyring-d) a1=$(cpu_ticks ocsb-agentd)
# `times` (children): "XmY.YYYs XmZ.ZZZs" user and system.
c_ms=$(echo "$c" | awk -v n="$RUNS" '{ split($1, u, "[ms]"); split($2, s, "[ms]"); printf "%.1f", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 / n }')
per() { awk -v t="$1" -v n="$RUNS" -v hz="$hz" 'BEGIN { printf "%.1f", t * 1000 / hz / n }'; }
echo "# CPU per push: ocsb $c_ms ms, dbus-daemon $(per $((d1 - d0))) ms, gnome-keyring-daemon $(per $((k1 - k0))) ms, ocsb-agentd $(per $((a1 - a0))) ms"
t0=$EPOCHREALTIME
for i in $(seq "$RUNS"); do "$OCSB" --help >/dev/null; done
t1=$EPOCHREALTIME
c=$( (for i in $(seq "$RUNS"); do "$OCSB" --help >/dev/null; done; times) | tail -1)
echo "# ocsb --help (process start-up only): $(( (${t1/./} - ${t0/./}) / 1000 / RUNS )) ms wall, $(echo "$c" | awk -v n="$RUNS" '{ split($1, u, "[ms]"); split($2, s, "[ms]"); printf "%.1f", (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 / n }') ms CPU (mean)"
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
grep -E 'secrets: 10 secrets' "$E2E_SCRATCH/agentd.log" | head -1 | sed 's/^/# agentd: /'
kill -TERM "$AGENTD"
pass "secrets benchmark ran"
