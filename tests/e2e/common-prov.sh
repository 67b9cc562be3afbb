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
