# SPDX-License-Identifier: MIT
# ocsb-inject on its own (issue 25), run by hand as its account the way ocsb-agentd runs it
# (inject-run.py), with no netlock table: what the injector itself guarantees when the table
# lets a connection through (a connection queued before the table was there, a flush).
#   - only the agent's account is served: another account gets a 403 and the provider
#     never hears of it (the peer's uid from sock_diag);
#   - an answer that echoes the request shows no form of the key;
#   - one route's connections are limited without touching the other routes;
#   - a malformed chunked body gets an answer, not silence;
#   - an ocsb-agentd that stops reading the usage reports stalls nothing.
# Every refusal has its control: the same request from the agent goes through.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"
. "$(dirname "$0")/lib-inject.sh"

for tool in python3 openssl curl; do
	if ! command -v "$tool" >/dev/null; then
		skip "ocsb-inject alone" "$tool missing (sudo make test-deps installs it)"
		exit 0
	fi
done
KEY="sk-ant-wall-$RANDOM$RANDOM-real"
KEY2="sk-ant-other-$RANDOM$RANDOM-second"
make_project
fake_internet_up >/dev/null 2>&1 || fail "fake internet up"
check_output "provisioned (the injector's account with it)" '^ocsb-provision: [1-9]' provision
P=$E2E_SCRATCH/prov
inject_providers_up "$P" || fail "fake providers up"
# No table: the first wall is down, the injector's own is what is tested here.
nft delete table inet ocsb 2>/dev/null
check_fails "no netlock table (nothing resets the owner on the route ports)" nft list table inet ocsb
AUID=$(id -u "$AGENT")
RUN=$E2E_SCRATCH/inj-run.out
python3 "$(dirname "$0")/inject-run.py" "$OCSB_BUILD/ocsb-inject" "$AUID" "$P/ca.pem" \
	"ANTHROPIC_API_KEY:api.anthropic.com:/v1:x-api-key:{}:$KEY" \
	"SECOND_KEY:api.anthropic.com:/v1:x-api-key:{}:$KEY2" >"$RUN" 2>"$E2E_SCRATCH/inj-run.err" &
RUNNER=$!
check "the injector took the hand-over" wait_for 10 grep -q $'^ready\t2' "$RUN"
# The first process and each route's worker run under a seccomp filter (inject/confine.c).
inj_pids() { pgrep -u ocsb-inject -x ocsb-inject; }
check_output "the injector: a first process and a worker per route" '^3$' bash -c "pgrep -u ocsb-inject -x ocsb-inject | wc -l"
check_output "... every one of them filtered (seccomp)" '^Seccomp:\s+2(\s+2){2}$' \
	bash -c 'for p in $(pgrep -u ocsb-inject -x ocsb-inject); do grep "^Seccomp:" /proc/$p/status; done | paste -sd" " | sed "s/ Seccomp://g"'
check_output "... and no capability" '^CapEff:\s+0+$' bash -c "grep '^CapEff' /proc/$(pgrep -u ocsb-inject -x ocsb-inject | tail -1)/status"
# Each worker holds its own route's key alone: root reads every process's memory (maps, mem).
MEMFIND='import re, sys
pid, needle = sys.argv[1], sys.argv[2].encode()
found = 0
with open("/proc/%s/maps" % pid) as maps, open("/proc/%s/mem" % pid, "rb", 0) as mem:
    for line in maps:
        m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
        if not m or "[vvar]" in line or "[vsyscall]" in line:
            continue
        lo, hi = int(m.group(1), 16), int(m.group(2), 16)
        try:
            mem.seek(lo); data = mem.read(hi - lo)
        except OSError:
            continue
        found += data.count(needle)
print("found" if found else "none")'
mem_of() { python3 -c "$MEMFIND" "$1" "$2"; }
# The workers' order is the routes': the first process is the oldest.
set -- $(pgrep -o -u ocsb-inject -x ocsb-inject) $(pgrep -u ocsb-inject -x ocsb-inject | sort -n | tail -n 2)
check_output "positive control: the first process holds the second route's key" '^found$' mem_of "$1" "$KEY2"
# sodium_malloc locks what it holds (never swapped): the first process and a worker.
check_output "the keys' memory is locked (first process)" '^VmLck:\s+[1-9][0-9]* kB$' grep '^VmLck' "/proc/$1/status"
check_output "... and in a worker" '^VmLck:\s+[1-9][0-9]* kB$' grep '^VmLck' "/proc/$2/status"
check_output "positive control: the first route's worker holds its own key" '^found$' mem_of "$2" "$KEY"
check_output "the first route's worker does not hold the second route's key" '^none$' mem_of "$2" "$KEY2"
check_output "the second route's worker does not hold the first route's key" '^none$' mem_of "$3" "$KEY"
MSG='{"model":"m","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
R=http://127.0.0.1:18400

# --- who connected: the peer's uid, asked of the kernel
: >"$P/api.rec"
check_output "positive control: the agent's request goes through" 'INJECTED-ANSWER' \
	as_user "$AGENT" curl -sS -m 10 -d "$MSG" "$R/v1/messages"
check_output "... with the key" "^x-api-key: $KEY\$" cat "$P/api.rec"
: >"$P/api.rec"
check_output "another account is refused by the injector itself (403)" '^HTTP/1.1 403 .*|only the agent' \
	as_owner curl -sS -i -m 10 -d "$MSG" "$R/v1/messages"
check_fails "... and the provider never heard of it" grep -q . "$P/api.rec"
check_output "root too" 'only the agent' curl -sS -m 10 -d "$MSG" "$R/v1/messages"
check_output "the refusal is logged with the uid" "connection from uid $(id -u "$OWNER") refused" cat "$E2E_SCRATCH/inj-run.err"

# --- answers that echo the request: no form of the key reaches the agent
echo_has_key() { # PATH: 0 when the answer through the route holds the key, plainly or in base64
	as_user "$AGENT" curl -sS -i -m 10 -d 'x=1' "$R$1" >"$E2E_SCRATCH/echo.out" 2>&1
	grep -qF "$KEY" "$E2E_SCRATCH/echo.out" && return 0
	sed '1,/^\r*$/d' "$E2E_SCRATCH/echo.out" | base64 -d 2>/dev/null | grep -qF "$KEY"
}
if curl -sS -m 10 --cacert "$P/ca.pem" -H "x-api-key: $KEY" https://api.anthropic.com/v1/echo 2>/dev/null | grep -qF "$KEY"; then
	pass "positive control: the provider's echo holds the key it got (root, directly)"
	for e in echo echo-chunked echo-b64 echo-head; do
		check_fails "/v1/$e through the route shows no form of the key" echo_has_key "/v1/$e"
		check_output "... its answer came, masked" '\*\*\*\*\*\*\*\*' cat "$E2E_SCRATCH/echo.out"
	done
else
	skip "answers that echo the key" "the fake provider has no /v1/echo"
fi

# --- a malformed chunked body: an answer, not silence
check_output "a malformed chunked body gets a 400" '^HTTP/1.1 400 ' \
	as_user "$AGENT" bash -c "printf 'POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n' |
		timeout 10 python3 -c 'import socket, sys; s = socket.create_connection((\"127.0.0.1\", 18400)); s.sendall(sys.stdin.buffer.read()); print(s.recv(4096).decode())'"

# --- one route's connections are bounded; the other route answers meanwhile
HOLD='import socket, sys, time
conns = [socket.create_connection(("127.0.0.1", 18400)) for _ in range(32)]
time.sleep(1)
s = socket.create_connection(("127.0.0.1", 18400))
s.sendall(b"GET /v1/messages HTTP/1.1\r\nHost: x\r\n\r\n")
s.settimeout(10)
print(s.recv(4096).decode().splitlines()[0])
sys.stdout.flush()
time.sleep(float(sys.argv[1]))'
as_user "$AGENT" python3 -c "$HOLD" 6 >"$E2E_SCRATCH/hold.out" 2>&1 &
HOLDER=$!
wait_for 10 grep -q . "$E2E_SCRATCH/hold.out"
check_output "the 33rd connection to a busy route gets a 503" '^HTTP/1.1 503 ' cat "$E2E_SCRATCH/hold.out"
check_output "... while the other route answers" 'INJECTED-ANSWER' \
	as_user "$AGENT" curl -sS -m 10 -d "$MSG" http://127.0.0.1:18401/v1/messages
wait "$HOLDER"

# --- keep-alive: many requests on one connection, an agentd that no longer reads the reports
kill "$RUNNER" 2>/dev/null
wait "$RUNNER" 2>/dev/null
python3 "$(dirname "$0")/inject-run.py" "$OCSB_BUILD/ocsb-inject" "$AUID" "$P/ca.pem" --no-read \
	"ANTHROPIC_API_KEY:api.anthropic.com:/v1:x-api-key:{}:$KEY" >"$RUN" 2>"$E2E_SCRATCH/inj-run.err" &
RUNNER=$!
check "the injector took the hand-over (its reports no longer read)" wait_for 10 grep -q $'^ready\t1' "$RUN"
MANY='import http.client, socket, sys, time
n, t0, conns = int(sys.argv[1]), time.time(), 0
c = None
for i in range(n):
    if c is None:
        c = http.client.HTTPConnection("127.0.0.1", 18400, timeout=10); c.connect(); conns += 1
        c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    c.request("GET", "/v1/ping")
    r = c.getresponse(); r.read()
    if r.will_close:
        c.close(); c = None
print("%d answers in %.1f s, %d connection(s)" % (n, time.time() - t0, conns))'
check_output "6000 requests answered with nobody reading the usage reports" '^6000 answers in' \
	as_user "$AGENT" timeout 120 python3 -c "$MANY" 6000
if [ -s "$P/api.rec.conns" ]; then
	: >"$P/api.rec.conns"
	check_output "the agent's connection is kept: 200 requests, 1 connection" '^200 answers in .*, 1 connection' \
		as_user "$AGENT" python3 -c "$MANY" 200
	check_output "... and upstream at most one connection more" '^[01]$' bash -c "wc -l <$P/api.rec.conns"
else
	skip "kept-alive upstream connections" "the fake provider does not count its connections"
fi
kill "$RUNNER" 2>/dev/null
wait "$RUNNER" 2>/dev/null

# --- a push of new keys: the new workers hold their new key alone, none of the old ones
python3 "$(dirname "$0")/inject-run.py" "$OCSB_BUILD/ocsb-inject" "$AUID" "$P/ca.pem" --second \
	"ANTHROPIC_API_KEY:api.anthropic.com:/v1:x-api-key:{}:$KEY" \
	"SECOND_KEY:api.anthropic.com:/v1:x-api-key:{}:$KEY2" >"$RUN" 2>>"$E2E_SCRATCH/inj-run.err" &
RUNNER=$!
check "the injector took two hand-overs" wait_for 10 bash -c "[ \$(grep -c $'^ready\t2' $RUN) = 2 ]"
NKEY=${KEY/sk-/sk-new-}
NKEY2=${KEY2/sk-/sk-new-}
# The old workers drain (no connection is open) and end: a first process and two workers.
check "the old workers ended" wait_for 10 bash -c '[ "$(pgrep -u ocsb-inject -x ocsb-inject | wc -l)" = 3 ]'
set -- $(pgrep -o -u ocsb-inject -x ocsb-inject) $(pgrep -u ocsb-inject -x ocsb-inject | sort -n | tail -n 2)
check_output "positive control: the new first route's worker holds its new key" '^found$' mem_of "$2" "$NKEY"
for k in KEY KEY2 NKEY2; do
	check_output "... and not $k (an old key, or the other route's)" '^none$' mem_of "$2" "${!k}"
done
check_output "positive control: the new second route's worker holds its new key" '^found$' mem_of "$3" "$NKEY2"
for k in KEY KEY2 NKEY; do
	check_output "... and not $k" '^none$' mem_of "$3" "${!k}"
done
: >"$P/api.rec"
check_output "the agent's request carries the new key" 'INJECTED-ANSWER' \
	as_user "$AGENT" curl -sS -m 10 -d "$MSG" "$R/v1/messages"
check_output "... the new one" "^x-api-key: $NKEY\$" cat "$P/api.rec"
# --- answers that end badly are never taken for whole ones
check_fails_output "an answer cut short (a length not reached) fails for the agent" 'transfer closed|Recv failure|partial' \
	as_user "$AGENT" curl -sS -m 10 "$R/v1/truncated"
check_output "an answer read to the upstream's close reaches the agent whole (re-framed chunked)" '^Transfer-Encoding: chunked' \
	as_user "$AGENT" curl -sS -i -m 10 "$R/v1/close"
kill "$RUNNER" 2>/dev/null
wait "$RUNNER" 2>/dev/null
check_fails "no key in the injector's log" grep -qF -e "$KEY" -e "$NKEY" "$E2E_SCRATCH/inj-run.err"
