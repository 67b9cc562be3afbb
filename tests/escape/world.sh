#!/bin/bash
# SPDX-License-Identifier: MIT
#
# world.sh: the world the escape battery probes, on a machine where ocsb is provisioned
# (the e2e namespace of t-95, or a real machine: run-here.sh). Root. Needs only bash,
# coreutils, iproute2, python3, openssh, util-linux, procps, dbus-daemon, git.
#
#   world.sh up DIR OWNER PROJECT [AGENT]
#       DIR (created, 0755; NOT below /tmp, /var/tmp or /dev/shm: the agent's view of those
#       is private) receives battery.sh, probes.sh, canaries.env and scratch/ (1777). Plants
#       the owner's canaries (her home is set to 0755 on purpose), starts her processes (a
#       listener on every local address and on Unix sockets, D-Bus, ssh-agent, a System V
#       segment), a root service on port 80 and a root process with a secret, and the fake
#       internet: a network namespace ocsb-esc joined by veth-lan (198.18.0.1/24 and
#       2001:db8:e5c::1/64 here, 198.18.0.2 there) holding 198.18.0.0/15 servers, the cloud
#       metadata address, and a logging name server 198.18.0.54 that /etc/resolv.conf names.
#       Every change is recorded in DIR/saved/ (root-only) for `down`.
#   world.sh down DIR
#       Undoes `up`: processes stopped, files removed, /etc/hosts, /etc/resolv.conf, the
#       owner's files and her home's mode restored, namespace and veth deleted. DIR stays
#       (the report reads it). Safe to run twice, or after a failed `up`.
#   world.sh place-ssh DIR
#       The battery in an `ssh -A AGENT@localhost` session opened by the owner with her key
#       and her ssh-agent: DIR/ssh.out (V lines), DIR/ssh.raw (everything). Exit 0 when the
#       battery finished there.
#   world.sh evidence DIR [OCSB]
#       What the judges need: the agent's next login (its environment in
#       DIR/scratch/next-login-env), the owner's `ocsb sync pull` (OCSB, default `ocsb`;
#       output in DIR/pull.out, exit status in DIR/pull.rc) with her repository's state
#       before and after it in DIR/scratch/owner-repo-{before,after}.
#
# The ports: ESC_PROXY (default 127.0.0.1:<proxy-port of /etc/ocsb/ocsb.conf, or 3128>) and
# the sshd port the owner uses (ESC_SSH_PORT, default ssh-port of ocsb.conf or 22).

set -u
export LC_ALL=C
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NS='ocsb-esc'
LPORT=7101
SHM_KEY=$((0x0c5b0001))
INET_HOSTS=(allowed.test:198.18.1.10 blocked.test:198.18.1.11 other.test:198.18.1.12
	internal.test:198.18.1.13)

die() { echo "world.sh: $*" >&2; exit 1; }
# conf_value KEYWORD: its first value in /etc/ocsb/ocsb.conf, quotes taken off.
conf_value() { awk -v k="$1" '$1 == k { v = $2; if (v ~ /^".*"$/) v = substr(v, 2, length(v) - 2); print v; exit }' /etc/ocsb/ocsb.conf 2>/dev/null; }

# ---- the record of changes, undone by `down` in reverse order
# Lines: "pid PID", "file PATH" (removed), "saved PATH N" (restored from saved/N, or removed
# when N is "-": it did not exist), "mode PATH MODE", "shm KEY", "netns NAME", "link DEV".
note() { printf '%s\n' "$*" >>"$STATE"; }
save() { # save PATH: keep a copy to restore (type and mode kept; a symlink stays one)
	local n
	if [ -e "$1" ] || [ -L "$1" ]; then
		n=$(wc -l <"$STATE")
		cp -a "$1" "$SAVED/$n" || die "cannot save $1"
		note saved "$1" "$n"
	else
		note saved "$1" -
	fi
}
as_owner() { setpriv --reuid="$OWNER" --regid="$OWNER" --init-groups --reset-env env -C "$OWNER_HOME" "$@"; }
# bg NAME cmd...: a daemon of the world, in its own session, detached from our output.
bg() {
	local name=$1
	shift
	setsid "$@" </dev/null >>"$SAVED/$name.log" 2>&1 &
	note pid $!
}
bg_owner() { local name=$1; shift; bg "$name" setpriv --reuid="$OWNER" --regid="$OWNER" --init-groups --reset-env env -C "$OWNER_HOME" "$@"; }
wait_tcp() { # HOST PORT SECS
	local i
	for ((i = 0; i < $3 * 10; i++)); do
		timeout 1 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
wait_sock() { local i; for ((i = 0; i < 50; i++)); do [ -S "$1" ] && return 0; sleep 0.1; done; return 1; }

# A tiny server in the internet namespace: HTTP naming the host it serves, a TCP banner,
# or UDP answering every datagram with TEXT.
inet_server() { # KIND ADDR PORT TEXT
	bg "inet-$2-$3" ip netns exec "$NS" python3 -c '
import socket, sys, threading
kind, addr, port, text = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
if kind == "udp":
    while True:
        data, peer = s.recvfrom(2048)
        s.sendto(text.encode(), peer)
s.listen(64)
def serve(c):
    try:
        c.settimeout(5)
        if kind == "http":
            c.recv(4096)
            body = (text + "\n").encode()
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
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
' "$@"
}

internet_up() {
	local h addr
	mkdir -p /run/netns
	ip netns add "$NS" || die "ip netns add $NS"
	note netns "$NS"
	ip link add veth-lan type veth peer name veth-inet || die "ip link add veth-lan"
	note link veth-lan
	ip link set veth-inet netns "$NS"
	ip addr add 198.18.0.1/24 dev veth-lan
	ip link set veth-lan up
	V6_LOCAL=
	if [ "$(cat /proc/sys/net/ipv6/conf/veth-lan/disable_ipv6 2>/dev/null)" = 0 ] &&
		ip -6 addr add 2001:db8:e5c::1/64 dev veth-lan nodad 2>/dev/null; then
		V6_LOCAL=2001:db8:e5c::1
	fi
	ip netns exec "$NS" ip link set lo up
	ip netns exec "$NS" ip addr add 198.18.0.2/24 dev veth-inet
	ip netns exec "$NS" ip link set veth-inet up
	ip netns exec "$NS" ip route add default dev veth-inet
	for addr in 198.18.1.10 198.18.1.11 198.18.1.12 198.18.1.13 198.18.0.53 198.18.0.54 169.254.169.254; do
		ip netns exec "$NS" ip addr add "$addr/32" dev lo
	done
	# Only the fake internet's addresses leave through the veth (a real machine keeps its
	# own default route; a guest without network gets this one too).
	ip route add 198.18.0.0/15 via 198.18.0.2 dev veth-lan 2>/dev/null
	ip route add 169.254.169.254/32 via 198.18.0.2 dev veth-lan
	ip route show default | grep -q . || ip route add default via 198.18.0.2 dev veth-lan

	save /etc/hosts
	{
		cat /etc/hosts 2>/dev/null
		for h in "${INET_HOSTS[@]}"; do printf '%s\t%s\n' "${h#*:}" "${h%%:*}"; done
	} >"$SAVED/hosts.new"
	rm -f /etc/hosts && install -m 0644 "$SAVED/hosts.new" /etc/hosts
	grep -q '^127.0.0.1[[:space:]].*localhost' /etc/hosts || printf '127.0.0.1\tlocalhost\n' >>/etc/hosts
	save /etc/resolv.conf
	rm -f /etc/resolv.conf && printf 'nameserver 198.18.0.54\n' >/etc/resolv.conf && chmod 0644 /etc/resolv.conf

	for h in "${INET_HOSTS[@]}"; do
		inet_server http "${h#*:}" 80 "WEB ${h%%:*}"
	done
	inet_server tcp 198.18.1.10 443 "TLS-LIKE allowed.test:443"
	inet_server tcp 198.18.1.10 8443 "TLS-LIKE allowed.test:8443"
	inet_server tcp 198.18.1.12 22 "SSH-2.0-fake other.test"
	inet_server udp 198.18.0.53 53 "DNS-CANARY"
	inet_server tcp 198.18.0.53 53 "DNS-CANARY-TCP"
	inet_server http 169.254.169.254 80 "METADATA secret-token"
	inet_server udp 198.18.1.10 9999 "UDP-CANARY"
	# The logging name server: every name asked, one a line; the answer is NXDOMAIN.
	: >"$DIR/dns.log"
	bg dns-logger ip netns exec "$NS" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("198.18.0.54", 53))
log = open(sys.argv[1], "a")
while True:
    q, peer = s.recvfrom(2048)
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace")); i += 1 + q[i]
    log.write(".".join(labels) + "\n"); log.flush()
    s.sendto(q[:2] + b"\x81\x83" + q[4:6] + b"\0\0\0\0\0\0" + q[12:], peer)
' "$DIR/dns.log"
	for addr in 198.18.1.10 198.18.1.11 198.18.1.12 198.18.1.13 169.254.169.254; do
		wait_tcp "$addr" 80 5 || die "the fake internet's $addr:80 did not come up"
	done
	wait_tcp 198.18.1.10 443 5 && wait_tcp 198.18.1.12 22 5 || die "the fake internet's TCP services did not come up"
}

# owner_file PATH MODE CONTENT: the owner's file, saved first if she had one.
owner_file() {
	save "$1"
	rm -f "$1"
	as_owner sh -c 'umask 077; printf "%s\n" "$3" >"$1" && chmod "$2" "$1"' _ "$1" "$2" "$3" || die "cannot write $1 as $OWNER"
}

canaries_up() {
	local mid d f
	note mode "$OWNER_HOME" "$(stat -c %a "$OWNER_HOME")"
	chmod 0755 "$OWNER_HOME"
	# Her key: the canary (f-ssh-key) and what she logs in with (to the agent, to herself).
	if [ ! -f "$OWNER_HOME/.ssh/id_ed25519" ]; then
		[ -d "$OWNER_HOME/.ssh" ] || { note dir "$OWNER_HOME/.ssh"; as_owner mkdir -m 0700 "$OWNER_HOME/.ssh"; }
		note file "$OWNER_HOME/.ssh/id_ed25519" && note file "$OWNER_HOME/.ssh/id_ed25519.pub"
		as_owner ssh-keygen -q -t ed25519 -N '' -C "$OWNER@escape-world" -f "$OWNER_HOME/.ssh/id_ed25519" ||
			die "ssh-keygen for $OWNER"
	fi
	if ! grep -qF "$(cut -d' ' -f2 "$OWNER_HOME/.ssh/id_ed25519.pub")" "$OWNER_HOME/.ssh/authorized_keys" 2>/dev/null; then
		save "$OWNER_HOME/.ssh/authorized_keys"
		as_owner sh -c 'cat ~/.ssh/id_ed25519.pub >>~/.ssh/authorized_keys && chmod 600 ~/.ssh/authorized_keys'
	fi
	[ -e "$OWNER_HOME/.bashrc" ] || { note file "$OWNER_HOME/.bashrc"; as_owner touch "$OWNER_HOME/.bashrc"; }
	owner_file "$OWNER_HOME/secret.txt" 600 "secret $MARK"
	owner_file "$OWNER_HOME/.git-credentials" 600 "https://alice:$MARK@git.example"
	[ -d "$OWNER_HOME/.aws" ] || { note dir "$OWNER_HOME/.aws"; as_owner mkdir -m 0755 "$OWNER_HOME/.aws"; }
	owner_file "$OWNER_HOME/.aws/credentials" 644 "aws_secret_access_key = $MARK"
	owner_file "$OWNER_HOME/group-rw.txt" 660 "shared $MARK"
	[ -d "$OWNER_HOME/.run" ] || { note dir "$OWNER_HOME/.run"; as_owner mkdir -m 0700 "$OWNER_HOME/.run"; }
	owner_file /tmp/owner-canary.txt 644 "tmp $MARK"
	owner_file /dev/shm/owner-canary 644 "shm $MARK"
	owner_file /run/lock/owner-canary 644 "lock $MARK"
	# Something in the mirror (m-symlink swaps one of the agent's links into it).
	for d in .config .config/opencode .config/opencode/command; do
		[ -d "$OWNER_HOME/$d" ] || { note dir "$OWNER_HOME/$d"; as_owner mkdir -m 0755 "$OWNER_HOME/$d"; }
	done
	f=$OWNER_HOME/.config/opencode/command/escape.md
	[ -e "$f" ] || { note file "$f"; as_owner sh -c "printf 'escape\n' >'$f'"; }
	f=$OWNER_HOME/.config/opencode/opencode.json
	[ -e "$f" ] || { note file "$f"; as_owner sh -c "printf '{}\n' >'$f'"; }
	[ -d /tmp/.X11-unix ] || { note dir /tmp/.X11-unix; mkdir -m 1777 /tmp/.X11-unix; }

	# The owner's process: a secret on its command line and in its environment; it listens
	# on every local address (dual-stack), on a socket in /tmp and in her home, on an
	# abstract name.
	note dir /tmp/.X11-unix/X9 && note file "$OWNER_HOME/.run/app.sock"
	bg_owner owner-listener env "OWNER_TOKEN=$MARK" python3 -c '
import os, socket, sys, threading
def serve(s):
    while True:
        c, _ = s.accept()
        try: c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nOWNER\n")
        finally: c.close()
socks = []
if socket.has_ipv6 and os.path.exists("/proc/net/if_inet6"):
    t = socket.socket(socket.AF_INET6); t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("::", int(sys.argv[1])))
else:
    t = socket.socket(socket.AF_INET); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind(("0.0.0.0", int(sys.argv[1])))
socks.append(t)
for path in ("/tmp/.X11-unix/X9", os.path.expanduser("~/.run/app.sock"), "\0" + sys.argv[2]):
    u = socket.socket(socket.AF_UNIX)
    if not path.startswith("\0") and os.path.exists(path): os.unlink(path)
    u.bind(path)
    if not path.startswith("\0"): os.chmod(path, 0o777)
    socks.append(u)
for s in socks:
    s.listen(16); threading.Thread(target=serve, args=(s,), daemon=True).start()
threading.Event().wait()
' "$LPORT" "ocsb-owner-$MARK" "--password=$MARK"
	OWNER_PID=$(tail -n 1 "$STATE" | cut -d' ' -f2)
	# A root service on port 80 of every local address (what the proxy must not reach).
	bg root-http python3 -c '
import os, socket
if os.path.exists("/proc/net/if_inet6"):
    t = socket.socket(socket.AF_INET6); t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0); a = "::"
else:
    t = socket.socket(socket.AF_INET); a = "0.0.0.0"
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind((a, 80)); t.listen(16)
while True:
    c, _ = t.accept()
    try: c.recv(1024); c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nOWNER\n")
    finally: c.close()
'
	bg root-token env "ROOT_TOKEN=$MARK" sleep 100000
	ROOT_PID=$(tail -n 1 "$STATE" | cut -d' ' -f2)
	note file /tmp/ocsb-owner-bus
	bg_owner owner-dbus dbus-daemon --config-file=/usr/share/dbus-1/session.conf \
		--address=unix:path=/tmp/ocsb-owner-bus --nofork
	note shm "$SHM_KEY"
	as_owner python3 -c '
import ctypes, sys; l = ctypes.CDLL(None, use_errno=True)
assert l.shmget(int(sys.argv[1]), 4096, 0o1000 | 0o600) >= 0' "$SHM_KEY" || die "shmget as $OWNER"
	AGENT_SOCK=$OWNER_HOME/.ssh/agent.sock
	rm -f "$AGENT_SOCK"
	note file "$AGENT_SOCK"
	bg_owner owner-ssh-agent ssh-agent -D -a "$AGENT_SOCK"
	wait_sock "$AGENT_SOCK" || die "the owner's ssh-agent did not start"
	as_owner env SSH_AUTH_SOCK="$AGENT_SOCK" ssh-add -q "$OWNER_HOME/.ssh/id_ed25519" || die "ssh-add as $OWNER"

	# Host identifiers: the machine's own (made up when it has none).
	mid=$(cat /etc/machine-id 2>/dev/null)
	if [ -z "$mid" ]; then
		save /etc/machine-id
		mid=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
		echo "$mid" >/etc/machine-id
	fi
	if [ "$(cat /var/lib/dbus/machine-id 2>/dev/null)" != "$mid" ]; then
		save /var/lib/dbus/machine-id
		mkdir -p /var/lib/dbus && rm -f /var/lib/dbus/machine-id && echo "$mid" >/var/lib/dbus/machine-id
	fi
	MACHINE_ID=$mid
	DMI_NAME=
	[ -r /sys/class/dmi/id/product_name ] && DMI_NAME=$(cat /sys/class/dmi/id/product_name)
	wait_tcp 127.0.0.1 "$LPORT" 5 || die "the owner's listener did not start"
	for f in "$OWNER_HOME/.run/app.sock" /tmp/.X11-unix/X9 /tmp/ocsb-owner-bus; do
		wait_sock "$f" || die "no socket $f"
	done
}

up() {
	DIR=${1:?usage: world.sh up DIR OWNER PROJECT [AGENT]}
	OWNER=${2:?usage: world.sh up DIR OWNER PROJECT [AGENT]}
	PROJECT=${3:?usage: world.sh up DIR OWNER PROJECT [AGENT]}
	AGENT=${4:-ai-dev}
	[ "$(id -u)" -eq 0 ] || die "run me as root"
	case $DIR in /tmp/* | /var/tmp/* | /dev/shm/*) die "$DIR: the agent's /tmp, /var/tmp and /dev/shm are private" ;; /*) ;; *) die "$DIR: not absolute" ;; esac
	OWNER_HOME=$(getent passwd "$OWNER" | cut -d: -f6)
	AGENT_HOME=$(getent passwd "$AGENT" | cut -d: -f6)
	[ -d "$OWNER_HOME" ] || die "no owner $OWNER (or no home)"
	[ -d "$AGENT_HOME" ] || die "no agent $AGENT: provision first"
	[ -d "$PROJECT/.git" ] || die "no repository at $PROJECT"
	[ -e "$DIR/saved/state" ] && die "$DIR: a world is up already (world.sh down $DIR)"
	mkdir -p -m 0755 "$DIR" && chmod 0755 "$DIR" && mkdir -p -m 0700 "$DIR/saved" || die "mkdir $DIR"
	mkdir -p "$DIR/scratch" && chmod 1777 "$DIR/scratch"
	SAVED=$DIR/saved STATE=$DIR/saved/state
	: >"$STATE"
	install -m 0644 "$HERE/battery.sh" "$HERE/probes.sh" "$DIR/" || die "copy the battery into $DIR"
	MARK=m$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	internet_up
	canaries_up
	local port
	port=$(conf_value proxy-port)
	cat >"$DIR/canaries.env" <<EOF
C_OWNER=$OWNER
C_OWNER_HOME=$OWNER_HOME
C_OWNER_KEY=$OWNER_HOME/.ssh/id_ed25519
C_AGENT=$AGENT
C_AGENT_HOME=$AGENT_HOME
C_AGENT_CLONE=$AGENT_HOME/$(basename "$PROJECT")
C_PROJECT=$PROJECT
C_OWNER_PID=$OWNER_PID
C_ROOT_PID=$ROOT_PID
C_MARK=$MARK
C_MACHINE_ID=$MACHINE_ID
C_BOOT_ID=$(cat /proc/sys/kernel/random/boot_id)
C_CMDLINE_SUM=$(sha256sum </proc/cmdline | cut -c1-64)
C_DMI_NAME='$DMI_NAME'
C_PROXY=${ESC_PROXY:-127.0.0.1:${port:-3128}}
C_LPORT=$LPORT
C_HPORT=80
C_V6_LO=$([ -e /proc/net/if_inet6 ] && ip -6 addr show dev lo | grep -q '::1/128' && echo 1)
C_V6_LOCAL=$V6_LOCAL
C_ABSTRACT=ocsb-owner-$MARK
C_DBUS=unix:path=/tmp/ocsb-owner-bus
C_SHM_KEY=$SHM_KEY
C_OWNER_AGENT_SOCK=$AGENT_SOCK
C_DNS_LOG=$DIR/dns.log
C_SCRATCH=$DIR/scratch
C_SECRET_MARK=$MARK
C_SSH_PORT=${ESC_SSH_PORT:-$(conf_value ssh-port | grep . || echo 22)}
EOF
	chmod 0644 "$DIR/canaries.env"
	echo "world.sh: up in $DIR (owner $OWNER, agent $AGENT, mark $MARK)"
}

down() {
	DIR=${1:?usage: world.sh down DIR}
	local STATE=$DIR/saved/state SAVED=$DIR/saved kind a b pid
	[ -f "$STATE" ] || { echo "world.sh: no world in $DIR"; return 0; }
	# Processes first (their sockets and files go after), then the rest in reverse order.
	while read -r kind a _; do
		[ "$kind" = pid ] || continue
		kill -TERM -- "-$a" 2>/dev/null || kill -TERM "$a" 2>/dev/null
	done <"$STATE"
	if ip netns list 2>/dev/null | grep -qw "$NS"; then
		for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
	fi
	sleep 0.3
	while read -r kind a _; do
		[ "$kind" = pid ] && { kill -KILL -- "-$a" 2>/dev/null || kill -KILL "$a" 2>/dev/null; }
	done <"$STATE"
	tac "$STATE" | while read -r kind a b; do
		case $kind in
		file) rm -f -- "$a" ;;
		dir) rmdir -- "$a" 2>/dev/null ;;
		saved)
			rm -f -- "$a"
			[ "$b" = - ] || cp -a "$SAVED/$b" "$a"
			;;
		mode) chmod "$b" "$a" ;;
		shm) ipcrm -M "$a" 2>/dev/null ;;
		link) ip link del "$a" 2>/dev/null ;;
		netns) ip netns del "$a" 2>/dev/null ;;
		esac
	done
	rm -rf "$SAVED"
	echo "world.sh: down ($DIR)"
}

# ---- the places and evidence that need the world's owner
load() {
	DIR=${1:?usage: world.sh $2 DIR}
	[ -r "$DIR/canaries.env" ] || die "$DIR: no world (world.sh up first)"
	# shellcheck disable=SC1091
	. "$DIR/canaries.env"
	OWNER=$C_OWNER OWNER_HOME=$C_OWNER_HOME
}
owner_ssh() { # USER [SSH-OPTION...] -- cmd...: the owner's ssh to USER@localhost with her key
	local user=$1 opts=()
	shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
	shift
	as_owner env SSH_AUTH_SOCK="$C_OWNER_AGENT_SOCK" timeout "${SSH_TIMEOUT:-60}" ssh -i "$C_OWNER_KEY" -p "$C_SSH_PORT" \
		-o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o ConnectTimeout=10 -o LogLevel=ERROR "${opts[@]}" \
		"$user@localhost" "$@"
}

place_ssh() {
	load "$1" place-ssh
	# -A asks for agent forwarding (s-agent-fwd); sshd's Match block must refuse it.
	SSH_TIMEOUT=${ESC_SSH_TIMEOUT:-600} owner_ssh "$C_AGENT" -A -- \
		"ESC_DIR=$DIR ${ESC_ONLY:+ESC_ONLY=$ESC_ONLY }${PROBE_TIMEOUT:+PROBE_TIMEOUT=$PROBE_TIMEOUT }bash $DIR/battery.sh run ssh" \
		</dev/null >"$DIR/ssh.raw" 2>&1
	echo "# ssh exit $?" >>"$DIR/ssh.raw"
	grep -q '^# escape battery at ssh: done' "$DIR/ssh.raw" || return 1
	grep $'^V\t' "$DIR/ssh.raw" >"$DIR/ssh.out"
}

evidence() {
	load "$1" evidence
	local ocsb=${2:-ocsb}
	owner_ssh "$C_AGENT" -- env </dev/null >"$C_SCRATCH/next-login-env" 2>/dev/null
	repo_state >"$C_SCRATCH/owner-repo-before"
	as_owner env -C "$C_PROJECT" "$ocsb" sync pull >"$DIR/pull.out" 2>&1
	echo $? >"$DIR/pull.rc"
	repo_state >"$C_SCRATCH/owner-repo-after"
}
repo_state() {
	as_owner git -C "$C_PROJECT" rev-parse HEAD 2>&1
	as_owner git -C "$C_PROJECT" for-each-ref --format='%(refname) %(objectname)' refs/heads refs/tags
	as_owner git -C "$C_PROJECT" status --porcelain --ignored
	sha256sum "$C_PROJECT/.git/config"
	# Names, types, modes, owners, sizes, link targets: not times (a fetch touches .git).
	find "$C_PROJECT" -path "$C_PROJECT/.git" -prune -o -printf '%p %y %m %u %s %l\n' | sort
	find "$C_PROJECT/.git/hooks" -printf '%p %y %m %u %s %l\n' | sort
	[ -e /tmp/pwned ] && echo PWNED
}

case ${1:-} in
up) shift; up "$@" ;;
down) shift; down "$@" ;;
place-ssh) shift; place_ssh "$@" ;;
evidence) shift; evidence "$@" ;;
*) echo "usage: world.sh up DIR OWNER PROJECT [AGENT] | down DIR | place-ssh DIR | evidence DIR [OCSB]" >&2; exit 2 ;;
esac
