# SPDX-License-Identifier: MIT
#
# lib.sh: helpers for e2e t-files. Sourced inside the test namespace (ns-inner.sh sets
# OCSB_BUILD, OWNER, OWNER_HOME, OWNER_KEY, OWNER_KEY2, E2E_SCRATCH, E2E_HOST,
# E2E_SSHD_LOG). Output is TAP-like: "ok - ...", "not ok - ...", detail lines "  # ...".
# Checks return 0/1 so a t-file can write `check ... || return`; do not use set -e.

set -u

# _detail LINES...: print each argument (possibly multi-line) as indented "# " lines.
_detail() {
	local text
	for text in "$@"; do
		[ -n "$text" ] || continue
		printf '%s\n' "$text" | head -n 40 | sed 's/^/  # /'
	done
}

# _capture cmd...: run cmd, leaving its stdout+stderr in $_out and its status in $_rc.
# Through a file, not $(...): a background process the command leaves behind (an ssh -N,
# a server) would keep a pipe open and hang the check until the t-file timeout.
_capture() {
	local _capture_file
	_capture_file=$(mktemp /tmp/e2e-out.XXXXXX)
	"$@" >"$_capture_file" 2>&1
	_rc=$?
	_out=$(cat "$_capture_file")
	rm -f "$_capture_file"
}

pass() { printf 'ok - %s\n' "$1"; }
fail() {
	printf 'not ok - %s\n' "$1"
	shift
	_detail "$@"
	return 1
}
skip() { printf 'ok - %s # SKIP %s\n' "$1" "$2"; }

# check DESC cmd...: ok if cmd exits 0.
check() {
	local _desc=$1 _out _rc
	shift
	_capture "$@"
	[ "$_rc" -eq 0 ] && { pass "$_desc"; return 0; }
	fail "$_desc" "command: $* (exit $_rc)" "$_out"
}

# check_fails DESC cmd...: ok if cmd exits non-zero. Pair it with a positive control:
# a missing binary also "fails".
check_fails() {
	local _desc=$1 _out _rc
	shift
	_capture "$@"
	[ "$_rc" -ne 0 ] && { pass "$_desc"; return 0; }
	fail "$_desc" "command: $* (exit 0, expected failure)" "$_out"
}

# check_output DESC REGEX cmd...: ok if cmd exits 0 and its stdout+stderr matches REGEX
# (grep -E, any line).
check_output() {
	local _desc=$1 _re=$2 _out _rc
	shift 2
	_capture "$@"
	if [ "$_rc" -eq 0 ] && grep -Eq -- "$_re" <<<"$_out"; then
		pass "$_desc"
		return 0
	fi
	fail "$_desc" "command: $* (exit $_rc, want output matching /$_re/)" "$_out"
}

# check_fails_output DESC REGEX cmd...: ok if cmd exits non-zero and its output matches
# REGEX: "blocked, and for the expected reason".
check_fails_output() {
	local _desc=$1 _re=$2 _out _rc
	shift 2
	_capture "$@"
	if [ "$_rc" -ne 0 ] && grep -Eq -- "$_re" <<<"$_out"; then
		pass "$_desc"
		return 0
	fi
	fail "$_desc" "command: $* (exit $_rc, want failure with output matching /$_re/)" "$_out"
}

# as_user USER cmd...: run cmd as USER with a clean login-like environment (HOME, USER,
# SHELL, PATH from passwd) and all of USER's groups, from USER's home directory.
# In the background (`as_owner ssh -N ... &`) $! is a bash subshell, not the command:
# stop it with kill_tree.
as_user() {
	local user=$1 home
	shift
	home=$(getent passwd "$user" | cut -d: -f6)
	[ -d "$home" ] || home=/
	setpriv --reuid="$user" --regid="$user" --init-groups --reset-env env -C "$home" "$@"
}
as_owner() { as_user "$OWNER" "$@"; }

# kill_tree PID [SIGNAL]: signal PID and all its descendants (children first found, so
# none is reparented away before it is signalled), then reap PID if it is our child.
kill_tree() {
	local pid=$1 sig=${2:-TERM} child
	kill -STOP "$pid" 2>/dev/null
	for child in $(pgrep -P "$pid"); do
		kill_tree "$child" "$sig"
	done
	kill "-$sig" "$pid" 2>/dev/null
	kill -CONT "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return 0
}

# owner_ssh USER cmd...: ssh as the owner to USER@localhost with her key (OWNER_SSH_KEY,
# default OWNER_KEY). Extra options go in the array OWNER_SSH_OPTS, e.g.
# OWNER_SSH_OPTS=(-o Port=2222). Host keys are not pinned: the harness made them.
OWNER_SSH_OPTS=()
owner_ssh() {
	local user=$1
	shift
	as_owner ssh -i "${OWNER_SSH_KEY:-$OWNER_KEY}" -o IdentitiesOnly=yes \
		-o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
		-o ConnectTimeout=5 -o LogLevel=ERROR "${OWNER_SSH_OPTS[@]}" \
		-- "$user@localhost" "$@"
}

# prov ARGS...: the program under test.
# The harness runs the agent without limits unless a test sets them (set_limits in
# lib-cg.sh): with limits configured, the default, an ssh session of the agent is refused
# while ocsb-agentd does not run (docs/design.md, invariant 4), and most tests ssh
# without it. Added once, after the first run that wrote the configuration.
prov() {
	local rc=0 f=/etc/ocsb/ocsb.conf
	"$OCSB_BUILD/ocsb-provision" "$@" || rc=$?
	if [ "$rc" -eq 0 ] && [ -f "$f" ] && ! grep -Eq '^[[:space:]]*limit-' "$f"; then
		printf 'limit-memory none\nlimit-tasks none\nlimit-cpu none\n' >>"$f"
	fi
	return "$rc"
}

# snapshot_state NAME / state_unchanged DESC NAME: fingerprint of everything
# provisioning may touch (content, type, mode, owner; not times), for idempotence and
# "refused without side effects" checks. Tests may add paths to STATE_PATHS.
STATE_PATHS=(/etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/subuid /etc/subgid
	/etc/ssh /etc/ocsb /home /var/lib/ocsb)
# Runtime files that change by themselves (the proxy's logs and pid) are not state.
STATE_EXCLUDE=(/var/lib/ocsb/proxy/state)
_state_manifest() {
	local p x prune=()
	for x in "${STATE_EXCLUDE[@]}"; do
		prune+=(-path "$x" -prune -o)
	done
	for p in "${STATE_PATHS[@]}"; do
		if [ ! -e "$p" ] && [ ! -L "$p" ]; then
			printf '%s\tabsent\n' "$p"
			continue
		fi
		find "$p" "${prune[@]}" -printf '%p\t%y\t%m\t%u:%g\t%l\n'
		find "$p" "${prune[@]}" -type f -print0 | xargs -0r sha256sum |
			sed -E 's/^\\?([0-9a-f]{64})  (.*)$/\2\tsha256:\1/'
	done | LC_ALL=C sort
}
snapshot_state() {
	mkdir -p "$E2E_SCRATCH/state"
	_state_manifest >"$E2E_SCRATCH/state/$1"
}
state_unchanged() {
	local desc=$1 diff
	diff=$(_state_manifest | diff -u "$E2E_SCRATCH/state/$2" - | tail -n +3)
	if [ -z "$diff" ]; then
		pass "$desc"
	else
		fail "$desc" "changes since snapshot '$2':" "$diff"
	fi
}

# root_writable: 0 when the root mount is writable here (or its options cannot be read).
# ns-inner.sh remounts every host mount read-only (t-00 checks that a write fails), so no
# file can appear on it: a search for files a test left behind walks the overlays and tmpfs
# mounted over it, and "/" (-xdev: that mount alone) only when this says so. A walk of the
# whole root file system took 2 s on a 2-core machine, and t-50 made 24.
root_writable() {
	local opts o
	opts=$(findmnt -n -o OPTIONS --mountpoint / 2>/dev/null)
	[ -n "$opts" ] || return 0
	while read -r o; do
		case ,$o, in *,ro,*) ;; *) return 0 ;; esac
	done <<<"$opts"
	return 1
}

# wait_port HOST PORT SECS: 0 once a TCP connect succeeds, 1 after SECS seconds.
# wait_for SECS cmd...: run cmd every 0.2 s until it succeeds (0) or SECS pass (1).
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ $SECONDS -ge $end ] && return 1
		sleep 0.2
	done
}

wait_port() {
	local host=$1 port=$2 i
	for ((i = 0; i < $3 * 10; i++)); do
		# timeout: a connect to a silent address would otherwise block for minutes
		timeout 1 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$host" "$port" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
