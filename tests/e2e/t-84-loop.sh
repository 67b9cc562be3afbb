# SPDX-License-Identifier: MIT
# ocsb-agentd's loop never waits on one thing: while OpenCode takes its time to stop, a
# control client stalls half-way through a request, or a mirror refresh of 10,000 files
# runs, an `nft flush ruleset` is still restored at once and other clients are answered.
# Each "while ..." figure is paired with the same probe with nothing going on. The restore
# is timed on an nftables event socket (tests/bench/agentd_load.py probe).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
LIMIT_MS=250 # the restore takes a few ms (p99 12 ms idle); the waits provoked here, 0.5 s to 3 s
PROBE=$(dirname "$0")/../bench/agentd_load.py
MANY=$OWNER_HOME/.config/opencode/many
make_project
as_owner mkdir -p "$MANY"
as_owner sh -c "cd '$MANY' && for i in \$(seq 10000); do echo one >f\$i.md; done"
# Two projects: two OpenCode stand-ins for the shutdown check at the end.
as_owner mkdir -p "$OWNER_HOME/code/shop2"
as_owner git -C "$OWNER_HOME/code/shop2" init -q
check_output "provisioned" '^ocsb-provision: [1-9]' provision --project "$OWNER_HOME/code/shop2"
fake_opencode
# The stand-in ignores SIGTERM: a restart has to wait for the SIGKILL, 3 s later.
sed -i 's/^import http.server, sys, threading$/import http.server, sys, threading, signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)/' /etc/fakeoc/opencode
check_output "positive control: the stand-in ignores SIGTERM" 'SIG_IGN' cat /etc/fakeoc/opencode
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
field() { as_owner "$OCSB" status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" '$1 == k { if (++i == n) { print $2; exit } }'; }
running() { [ "$(field state 2)" = running ]; }
check "OpenCode (the stand-in) runs" wait_for 60 running

# restore_ms: flush the ruleset, print the ms from the event that took inet ocsb away to the
# commit that brought it back (an nftables event socket; 99999 when none came within 10 s)
restore_ms() {
	python3 "$PROBE" probe 1 | awk '$1 == "timeout" {print 99999; next} {printf "%d\n", $1}'
}
# within NAME MS: pass when MS <= LIMIT_MS
within() {
	if [ "$2" -le "$LIMIT_MS" ]; then
		pass "$1: restored in $2 ms (limit $LIMIT_MS)"
	else
		fail "$1: restored in $2 ms (limit $LIMIT_MS)" "$(tail -n 8 "$E2E_SCRATCH/agentd.log")"
	fi
}
status_ms() { # the ms `ocsb status` takes, or 99999 when it fails
	local t0
	t0=$(date +%s%N)
	as_owner "$OCSB" status >/dev/null 2>&1 || { echo 99999; return; }
	echo $((($(date +%s%N) - t0) / 1000000))
}
answers() { # answers NAME: pass when ocsb status answers within 1 s
	local ms
	ms=$(status_ms)
	[ "$ms" -le 1000 ] && pass "$1 ($ms ms)" || fail "$1" "$ms ms"
}

# --- a stop that takes 3 s
within "positive control: nothing going on" "$(restore_ms)"
pid=$(field pid 2)
(
	t0=$(date +%s%N)
	as_owner "$OCSB" restart shop >"$E2E_SCRATCH/restart.out" 2>&1
	echo $((($(date +%s%N) - t0) / 1000000)) >"$E2E_SCRATCH/restart.ms"
) &
rs=$!
sleep 0.3
within "while OpenCode ignores the SIGTERM of a restart" "$(restore_ms)"
answers "ocsb status answers during that restart"
wait "$rs"
ms=$(cat "$E2E_SCRATCH/restart.ms")
[ "$ms" -le 1000 ] && pass "ocsb restart answers at once ($ms ms), the stop goes on" || fail "ocsb restart answers at once" "$ms ms"
check_output "ocsb restart says it restarted" '^restarted 1 instance$' cat "$E2E_SCRATCH/restart.out"
check "the stand-in is killed after 3 s" wait_for 10 grep -q 'did not stop within 3000 ms: killing it' "$E2E_SCRATCH/agentd.log"
new_pid() { p=$(field pid 2); [ -n "$p" ] && [ "$p" != "$pid" ]; }
check "a new OpenCode runs after the restart" wait_for 30 new_pid
check "and answers" wait_for 60 running

# --- clients that stall half-way
stall() { # stall N SECS: N clients send 2 bytes of a frame header and wait; print when each saw the end
	python3 - "$1" "$2" <<'PY'
import socket, sys, time
n, secs = int(sys.argv[1]), float(sys.argv[2])
socks = []
for _ in range(n):
    s = socket.socket(socket.AF_UNIX)
    s.connect("/run/ocsb/agentd.sock")
    s.sendall(b"\0\0")
    socks.append(s)
t0 = time.monotonic()
closed = 0
for s in socks:
    s.settimeout(max(0.01, t0 + secs - time.monotonic()))
    try:
        if s.recv(1) == b"":
            closed += 1
    except ConnectionResetError:
        closed += 1  # closed before its bytes were read (a client evicted at accept)
    except OSError:
        pass
print("closed %d of %d after %.1f s" % (closed, n, time.monotonic() - t0))
PY
}
stall 1 9 >"$E2E_SCRATCH/stall1.out" &
st1=$!
sleep 0.5
within "while a control client stalls half-way through its request" "$(restore_ms)"
answers "another client is answered meanwhile"
wait "$st1"
check_output "the stalled client is closed at its deadline (5 s)" '^closed 1 of 1 after [4-6]\.' cat "$E2E_SCRATCH/stall1.out"
stall 80 9 >"$E2E_SCRATCH/stall80.out" &
st80=$!
sleep 1
answers "with 80 stalled clients (more than the 64 slots), a client is answered"
within "with 80 stalled clients" "$(restore_ms)"
wait "$st80"
check_output "all 80 are closed by their deadline" '^closed 80 of 80 ' cat "$E2E_SCRATCH/stall80.out"

# --- a mirror refresh of 10,000 files
written() { grep -c 'mirror: source changed: 10000 written' "$E2E_SCRATCH/agentd.log"; }
before=$(written)
as_owner sh -c "cd '$MANY' && for i in \$(seq 10000); do echo two >>f\$i.md; done"
# The debounce (100 ms), then a refresh of about 1 s: five flushes over that second, the
# slowest restore counts.
worst=0
for i in 1 2 3 4 5; do
	sleep 0.1
	ms=$(restore_ms)
	[ "$ms" -gt "$worst" ] && worst=$ms
done
within "while the mirror refreshes 10,000 changed files (slowest of 5)" "$worst"
answers "a client is answered during the refresh"
done_refresh() { [ "$(written)" -gt "$before" ]; }
check "the refresh completes: 10,000 written" wait_for 60 done_refresh
grep 'mirror: source changed: 10000 written' "$E2E_SCRATCH/agentd.log" | tail -1 | sed 's/^.*mirror/# mirror/'
check_output "the tree has the new content" '^two$' tail -n 1 "/var/lib/ocsb/mirror/$AGENT/tree/.config/opencode/many/f10000.md"
within "positive control: after all that" "$(restore_ms)"

# Shutdown: both stand-ins ignore SIGTERM, so each is killed after 3 s. They get their
# SIGTERM together: about 3 s in all, not 3 s each (6 s and more when stopped one by one).
two_standins() { [ "$(pgrep -fc '^/usr/bin/python3 /etc/fakeoc/opencode')" -eq 2 ]; }
check "positive control: two OpenCode stand-ins run" wait_for 30 two_standins
t0=$(date +%s%N)
kill -TERM "$AGENTD"
check "agentd stops on SIGTERM" wait_for 15 bash -c "! kill -0 $AGENTD 2>/dev/null"
ms=$((($(date +%s%N) - t0) / 1000000))
if [ "$ms" -ge 2900 ] && [ "$ms" -lt 6000 ]; then
	pass "shutdown stops both instances at once: $ms ms (each ignored SIGTERM for 3 s)"
else
	fail "shutdown stops both instances at once" "$ms ms (want 3 s to 6 s: below, the stand-ins did not wait; 6 s or more, one after the other)" "$(grep -E 'stopped|killing' "$E2E_SCRATCH/agentd.log" | tail -5)"
fi
