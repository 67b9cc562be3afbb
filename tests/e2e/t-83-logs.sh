# SPDX-License-Identifier: MIT
# OpenCode's output goes through ocsb-agentd into a bounded log: a child that writes
# without end cannot fill the disk. A stand-in for OpenCode (root-owned, as opencode-bin
# must be) answers the readiness probe and then floods its output.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
mkdir -p /etc/fakeoc
cat >/etc/fakeoc/opencode <<'PY'
#!/usr/bin/python3
# serve --hostname H --port N: answer 200, and write 30 MiB to stdout in the meantime.
import http.server, sys, threading
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
def flood():
    line = b"x" * 1023 + b"\n"
    for _ in range(30 * 1024):
        sys.stdout.buffer.write(line)
    sys.stdout.buffer.write(b"FLOOD-DONE\n")
    sys.stdout.flush()
threading.Thread(target=flood, daemon=True).start()
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
chmod 755 /etc/fakeoc /etc/fakeoc/opencode
echo 'opencode-bin /etc/fakeoc/opencode' >>/etc/ocsb/ocsb.conf
setsid "$OCSB_BUILD/ocsb-agentd" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
LOG=/var/log/ocsb/opencode-shop.log
flooded() { grep -q FLOOD-DONE "$LOG"; }
wait_for 60 flooded && pass "the stand-in's 30 MiB of output arrive through agentd" || fail "the stand-in's 30 MiB of output arrive through agentd" "$(tail -n 15 "$E2E_SCRATCH/agentd.log")"
size=$(stat -c %s "$LOG")
old=$(stat -c %s "$LOG.1" 2>/dev/null || echo 0)
echo "# log $size bytes, previous $old bytes"
[ "$size" -le $((10 * 1024 * 1024)) ] && pass "the log stays within 10 MiB ($size bytes)" || fail "the log stays within 10 MiB" "$size bytes"
[ "$old" -gt 0 ] && [ "$old" -le $((10 * 1024 * 1024)) ] && pass "one older log kept, also bounded ($old bytes)" || fail "one older log kept, bounded" "$old bytes"
check_output "nothing else piles up in /var/log/ocsb" '^2$' bash -c "ls /var/log/ocsb | grep -c '^opencode-shop'"
check_output "the log is root's, not the agent's" '^root 640$' stat -c '%U %a' "$LOG"
check_output "ocsb logs shows the newest lines" 'FLOOD-DONE' as_owner "$OCSB" logs -n 3
kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"
