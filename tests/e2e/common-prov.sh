# SPDX-License-Identifier: MIT
# Shared setup for the ocsb-provision t-files: a project of the owner, a canary web server,
# helpers to provision and to ssh with the sync key. Sourced after lib.sh.

AGENT=ai-dev
PROJECT=$OWNER_HOME/code/shop
SYNC_KEY=$OWNER_HOME/.config/ocsb/${AGENT}_sync_ed25519
PIN=$OWNER_HOME/.config/ocsb/known_hosts

make_project() {
	as_owner mkdir -p "$PROJECT"
	as_owner git -C "$PROJECT" init -q
}

# A loopback HTTP server whose answer proves a connection reached it.
CANARY_PORT=7000
start_canary() {
	mkdir -p "$E2E_SCRATCH/www"
	echo "CANARY-$$" >"$E2E_SCRATCH/www/canary.txt"
	(cd "$E2E_SCRATCH/www" && exec python3 -m http.server "$CANARY_PORT" --bind 127.0.0.1 \
		>/dev/null 2>&1) &
	wait_port 127.0.0.1 "$CANARY_PORT" 5
}
canary_via() { # canary_via CURL_ARGS...: 0 when the canary answered through them
	curl -s --max-time 3 "$@" | grep -q "CANARY-$$"
}

# Sync key ssh, with the pinned known_hosts and strict checking (proves the pin too).
sync_ssh() {
	as_owner ssh -i "$SYNC_KEY" -o IdentitiesOnly=yes -o BatchMode=yes \
		-o StrictHostKeyChecking=yes -o UserKnownHostsFile="$PIN" -o ConnectTimeout=5 \
		-o LogLevel=ERROR -- "$AGENT@localhost" "$@"
}

# bg_owner cmd...: run cmd as the owner in the background; BG_PID is the command itself
# (one subshell that execs), so killing it stops the command.
bg_owner() {
	(cd "$OWNER_HOME" && exec setpriv --reuid="$OWNER" --regid="$OWNER" --init-groups \
		--reset-env "$@") &
	BG_PID=$!
}

provision() { prov --owner "$OWNER" --project "$PROJECT" "$@"; }

# start_keyring: a real gnome-keyring on a private session bus of the owner's, unlocked.
# KR its directory, BUS the bus address, KR_PID the session (kill_tree it at the end).
start_keyring() {
	local i
	KR=$OWNER_HOME/.kr
	as_owner mkdir -m 0700 -p "$KR/run"
	bg_owner dbus-run-session -- bash -c "export XDG_RUNTIME_DIR=$KR/run XDG_DATA_HOME=$KR/data
		eval \"\$(printf pw | gnome-keyring-daemon --unlock --components=secrets --daemonize)\"
		echo \"\$DBUS_SESSION_BUS_ADDRESS\" >$KR/bus; exec sleep 600"
	KR_PID=$BG_PID
	for i in $(seq 50); do [ -s "$KR/bus" ] && break; sleep 0.1; done
	BUS=$(cat "$KR/bus" 2>/dev/null)
}

# fake_opencode [MiB]: a root-owned stand-in for OpenCode (opencode-bin must be root's) at
# /etc/fakeoc/opencode, named in ocsb.conf. `serve --port N` answers 200 on 127.0.0.1:N;
# with MiB, it also writes that much to stdout, then FLOOD-DONE.
fake_opencode() {
	mkdir -p /etc/fakeoc
	cat >/etc/fakeoc/opencode <<PY
#!/usr/bin/python3
import http.server, sys, threading
port = int(sys.argv[sys.argv.index("--port") + 1])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
def flood(mib):
    line = b"x" * 1023 + b"\\n"
    for _ in range(mib * 1024):
        sys.stdout.buffer.write(line)
    sys.stdout.buffer.write(b"FLOOD-DONE\\n")
    sys.stdout.flush()
if ${1:-0}:
    threading.Thread(target=flood, args=(${1:-0},), daemon=True).start()
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
PY
	chmod 755 /etc/fakeoc /etc/fakeoc/opencode
	echo 'opencode-bin /etc/fakeoc/opencode' >>/etc/ocsb/ocsb.conf
}
