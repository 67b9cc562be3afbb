#!/bin/bash
# SPDX-License-Identifier: MIT
#
# ns-inner.sh T-FILE
#
# PID 1 of a fresh mount+net+pid namespace, started by run.sh as
#   LIBMOUNT_UTAB=<rundir>/utab unshare --mount --net --pid --fork --mount-proc \
#       --propagation private --kill-child=SIGKILL bash ns-inner.sh T-FILE
# It turns the namespace into a throw-away copy of the machine (overlays over the
# directories that useradd/sshd/ocsb write, tmpfs over the rest), creates the owner
# account, starts the machine's real sshd on loopback, runs T-FILE and exits with its
# status. When this process exits the kernel kills everything left in the namespace.
# Setup failures are reported as "not ok - harness setup ..." lines.

set -u
umask 022
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LC_ALL=C

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T_FILE=${1:?usage: ns-inner.sh T-FILE}
T_NAME=$(basename "$T_FILE")
OWNER=alice
OWNER_HOME=/home/$OWNER
SCRATCH=/run/e2e			# E2E_SCRATCH for the tests (see below)
SSHD_LOG=/var/log/sshd-test.log

die() {
	local what=$1 line
	shift
	printf 'not ok - harness setup for %s: %s\n' "$T_NAME" "$what"
	for line in "$@"; do
		printf '%s\n' "$line" | sed 's/^/  # /'
	done
	exit 1
}

# step DESC cmd...: run a setup command; on failure report it with its output and stop.
step() {
	local what=$1 out
	shift
	out=$("$@" 2>&1) || die "$what" "command: $*" "$out"
}

# Refuse to run anywhere but in the namespace run.sh made: everything below mounts over
# /etc, /home and /run, which on the host would be a disaster. run.sh passes the host's
# namespace ids; we must be PID 1 and in different mount, net and pid namespaces.
[ "$$" -eq 1 ] || die "not PID 1 of a new pid namespace (run me through run.sh)"
for ns in mnt net pid; do
	var=E2E_HOST_NS_$ns
	[ -n "${!var:-}" ] || die "missing $var (run me through run.sh)"
	[ "$(readlink "/proc/self/ns/$ns")" != "${!var}" ] || die "still in the host's $ns namespace"
done
[ -d "${E2E_RUNDIR:-}" ] || die "E2E_RUNDIR is not a directory"
[ -n "${OCSB_BUILD:-}" ] || die "OCSB_BUILD is not set"
[ -f "$T_FILE" ] || die "no such t-file: $T_FILE"

# A t-file with the line "# e2e-harness: syslog-socket" runs on a machine whose /dev/log
# is a socket (t-02-harness-syslog): this namespace gets a /dev of its own (a tmpfs with
# the host's nodes, its mounts bound in) and a socket at /dev/log, before anything else.
if grep -qx '# e2e-harness: syslog-socket' "$T_FILE"; then
	mkdir -p "$E2E_RUNDIR/dev"
	step "a /dev of our own" mount -t tmpfs -o mode=0755 e2e-dev "$E2E_RUNDIR/dev"
	step "the host's nodes in it" cp -a -x /dev/. "$E2E_RUNDIR/dev/"
	while read -r m; do
		[ "$m" = /dev ] || step "bind $m" mount --rbind "$m" "$E2E_RUNDIR/dev/${m#/dev/}"
	done < <(findmnt -rn -o TARGET --submounts --mountpoint /dev | sort)
	step "it on /dev" mount --move "$E2E_RUNDIR/dev" /dev
	rm -f /dev/log
	step "a syslog socket at /dev/log" python3 -c \
		'import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind("/dev/log")'
	[ -S /dev/log ] || die "no socket at /dev/log"
	E2E_DEVLOG_WAS=socket
fi
export E2E_DEVLOG_WAS=${E2E_DEVLOG_WAS:-$( [ -S /dev/log ] && echo socket || echo none)}

# For run.sh's leftover-process check: processes in this pid namespace are ours (the
# machine may run other namespaces). Written now, while the run dir is still writable.
readlink /proc/self/ns/pid >>"$E2E_RUNDIR/pidns"

# A private loopback is the only network: tests talk to sshd over it, nothing else exists.
step "loopback up" ip link set lo up

# Read-only view of every writable host filesystem (/, and /boot, /var, /srv... when they
# are separate mounts): whatever is not overlaid or on a tmpfs below cannot be changed by
# a test, even by mistake. "remount,bind" changes only this namespace's copy of the
# mount (a per-mount flag), never the filesystem itself or the host's mount.
# /proc, /sys and /dev are left alone: the kernel interfaces and device nodes must work.
mapfile -t mountinfo </proc/self/mountinfo	# a snapshot: we change the table as we go
for line in "${mountinfo[@]}"; do
	read -r _ _ _ _ mnt opts _ <<<"$line"
	mnt=$(printf '%b' "${mnt//\\/\\0}")	# mountinfo escapes spaces as \040
	case $mnt in /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
	case ,$opts, in *,rw,*) ;; *) continue ;; esac
	step "read-only $mnt" mount -o remount,bind,ro "$mnt"
done

# Overlay upper/work dirs live on a tmpfs mounted on the run dir. The tmpfs we later put
# on /tmp hides it from the tests, which must not write into overlay internals.
HIDDEN=$E2E_RUNDIR/ns
step "scratch tmpfs" mount -t tmpfs -o mode=0700 e2e-overlay "$HIDDEN"

# Whole directories are overlaid rather than single files bind-mounted: useradd renames
# passwd+ over /etc/passwd (EBUSY on a bind mount, and the + file would land on the
# host). /var/lib holds /var/lib/ocsb and useradd's lastlog/faillog are under /var/log;
# /root catches dotfiles written by root tools (ssh, npm caches).
for dir in /etc /var/log /var/mail /var/spool /var/lib /root; do
	[ -d "$dir" ] || continue
	name=${dir//\//_}
	mkdir -p "$HIDDEN/upper/$name" "$HIDDEN/work/$name"
	# The merged root directory takes the upper dir's owner and mode (/var/mail is
	# root:mail 2775, /root 0700): copy them so nothing looks different inside.
	chown --reference="$dir" "$HIDDEN/upper/$name"
	chmod --reference="$dir" "$HIDDEN/upper/$name"
	step "overlay on $dir" mount -t overlay "e2e-overlay$name" \
		-o "lowerdir=$dir,upperdir=$HIDDEN/upper/$name,workdir=$HIDDEN/work/$name" "$dir"
done

# Empty /run: no host sockets (nscd, dbus, logind, syslog) are reachable, so libc and PAM
# fall back to the files in the overlaid /etc, and sshd.pid/utmp stay private.
step "tmpfs on /run" mount -t tmpfs -o mode=0755 e2e-run /run
mkdir -m 1777 /run/lock
mkdir -m 0755 /run/user
# utmp is where sshd records logins; create it as the system would.
install -m 0664 -o root -g utmp /dev/null /run/utmp 2>/dev/null || : >/run/utmp

# A syslog socket in /dev (a syslog daemon without systemd, as in many containers) would
# carry useradd/PAM messages to the host's logs: cover it, while $HIDDEN is still reachable
# (the tmpfs on /tmp below covers the run dir; issue 28 item 11). On systemd hosts it is a
# link into /run, which is ours already (nothing there now).
if [ -S /dev/log ]; then
	: >"$HIDDEN/no-log"
	step "hide /dev/log" mount --bind "$HIDDEN/no-log" /dev/log
fi

# Scratch space for the tests. Under /run (0755) rather than /tmp (1777) because sshd's
# StrictModes rejects authorized_keys files below a world-writable directory.
mkdir -m 0755 "$SCRATCH"
# Copies of host facts made by run.sh (host /etc/passwd, nft tables...), so tests can
# compare the inside with the outside. Must be copied before /tmp is covered.
step "copy host facts" cp -a "$E2E_RUNDIR/host" "$SCRATCH/host"

# The harness, the t-file and the build dir may live under a directory we are about to
# cover with a tmpfs (a repo in /home/me/src, a t-file in /tmp). Park read-only binds of
# them under /run and put them back at the same absolute paths afterwards, so
# OCSB_BUILD and error messages stay the same. The missing parents are created (root,
# 0755) on the new tmpfs.
COVER=(/home /tmp /var/tmp /dev/shm)
KEEP=()
# The whole source tree: tests read shipped files (common/opencode.h, conf/) beside them.
SRC_DIR=$(cd "$E2E_DIR/../.." && pwd)
for path in "$SRC_DIR" "$E2E_DIR" "$OCSB_BUILD" "$(dirname "$T_FILE")"; do
	[ -d "$path" ] || continue
	case $path in /run | /run/*) die "cannot run from below /run: $path" ;; esac
	for dir in "${COVER[@]}"; do
		case $path in "$dir" | "$dir"/*) KEEP+=("$path") ;; esac
	done
done
for i in "${!KEEP[@]}"; do
	mkdir -p "$SCRATCH/keep/$i"
	step "park ${KEEP[$i]}" mount --bind "${KEEP[$i]}" "$SCRATCH/keep/$i"
	step "park ${KEEP[$i]} read-only" mount -o remount,bind,ro "$SCRATCH/keep/$i"
done

# Now nothing from the host run dir is needed. mount(8) only needed LIBMOUNT_UTAB while
# the host's /run was visible; from here on its default /run/mount is our tmpfs.
unset LIBMOUNT_UTAB

# Home 0755 like the real one: StrictModes refuses keys when /home is group/world
# writable, and a tmpfs defaults to 1777.
step "tmpfs on /home" mount -t tmpfs -o mode=0755 e2e-home /home
for dir in /tmp /var/tmp /dev/shm; do
	step "tmpfs on $dir" mount -t tmpfs -o mode=1777 "e2e${dir//\//-}" "$dir"
done
for i in "${!KEEP[@]}"; do
	mkdir -p "${KEEP[$i]}"
	step "restore ${KEEP[$i]}" mount --move "$SCRATCH/keep/$i" "${KEEP[$i]}"
done
rm -rf "$SCRATCH/keep"

# ocsb-provision copies the ocsb-shell beside it into /var/lib/ocsb/bin for the agent's login
# and refuses one that is not root-owned or is writable by group/others (a build made by a
# user, run with sudo): a root-owned copy over it, in this namespace only.
if [ -f "$OCSB_BUILD/ocsb-shell" ] &&
	[ "$(stat -c %u "$OCSB_BUILD/ocsb-shell")" != 0 -o -n "$(find "$OCSB_BUILD/ocsb-shell" -perm /022)" ]; then
	install -m 0755 -o root -g root "$OCSB_BUILD/ocsb-shell" "$SCRATCH/ocsb-shell"
	step "root-owned ocsb-shell" mount --bind "$SCRATCH/ocsb-shell" "$OCSB_BUILD/ocsb-shell"
fi

# Name resolution of our own. The name server is an address of a future fake internet
# (198.18.0.0/15, RFC 2544): unreachable here, and never a real resolver. rm first: on
# some hosts these are symlinks into /run.
rm -f /etc/resolv.conf /etc/hosts
printf 'nameserver 198.18.0.53\n' >/etc/resolv.conf
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >/etc/hosts

# Clean slate: if this machine already has an owner named alice or an installed ocsb,
# remove them from the overlay only, so the tests start from a machine without ocsb.
if getent passwd "$OWNER" >/dev/null; then
	echo "# harness: host has a user $OWNER; deleted inside the namespace only"
	step "userdel old $OWNER" userdel "$OWNER"
fi
if [ -e /etc/ocsb ] || [ -e /var/lib/ocsb ] || compgen -G '/etc/ssh/sshd_config.d/ocsb-*.conf' >/dev/null ||
	getent passwd ai-dev >/dev/null; then
	echo "# harness: host has ocsb installed; removed inside the namespace only"
	rm -rf /etc/ocsb /var/lib/ocsb /etc/ssh/sshd_config.d/ocsb-*.conf
	if getent passwd ai-dev >/dev/null; then
		step "userdel old ai-dev" userdel ai-dev
	fi
fi

# The owner: a real useradd. '*' = no password login but not locked (with '!' sshd
# treats the account as locked and refuses even keys, at least with UsePAM no).
step "useradd $OWNER" useradd -m -s /bin/bash "$OWNER"
step "usermod -p '*' $OWNER" usermod -p '*' "$OWNER"

as_owner() {
	setpriv --reuid="$OWNER" --regid="$OWNER" --init-groups --reset-env env -C "$OWNER_HOME" "$@"
}
# Her main key (used by owner_ssh) and a second key pair of another type, so tests can
# check that every public key of the owner is picked up. Only the main key may log in
# to her own account (the positive control of t-00).
step "owner ~/.ssh" as_owner mkdir -m 0700 "$OWNER_HOME/.ssh"
step "owner key" as_owner ssh-keygen -q -t ed25519 -N '' -C "$OWNER@e2e" -f "$OWNER_HOME/.ssh/id_ed25519"
step "owner second key" as_owner ssh-keygen -q -t ecdsa -N '' -C "$OWNER@e2e-second" -f "$OWNER_HOME/.ssh/id_ecdsa"
step "owner authorized_keys" as_owner install -m 0600 "$OWNER_HOME/.ssh/id_ed25519.pub" "$OWNER_HOME/.ssh/authorized_keys"

# sshd: the machine's own config and host keys (seen through the overlay); -A only
# creates missing key types, inside the overlay.
step "host keys" ssh-keygen -A
step "privsep dir" mkdir -m 0755 /run/sshd

# Command-line options take precedence over the config file. We only pin where it
# listens (loopback, port 22 even if the machine uses another port) and the pid file
# ocsb-provision signals. Everything else, including Include sshd_config.d/*.conf and
# UsePAM yes, is the machine's real configuration.
#
# PAM (Debian 12, UsePAM yes) works unchanged here, so there is no harness drop-in:
# pam_loginuid can write /proc/self/loginuid (root of the initial user namespace);
# pam_systemd returns success without doing anything because our /run has no
# /run/systemd/system (it believes systemd is not running), so no logind session is
# created on the host; pam_keyinit, pam_limits, pam_env, pam_motd work. PAM's syslog
# messages go nowhere (no /dev/log). t-00 checks that sessions ran the stack.
SSHD=(/usr/sbin/sshd -f /etc/ssh/sshd_config
	-o ListenAddress=127.0.0.1:22 -o "ListenAddress=[::1]:22" -o PidFile=/run/sshd.pid)
step "sshd -t" "${SSHD[@]}" -t
# Absolute path: on SIGHUP sshd re-executes argv[0]. -e + -E: logs go to a file of ours,
# never to the host's syslog.
"${SSHD[@]}" -D -e -E "$SSHD_LOG" </dev/null &
sshd_pid=$!

# Bounded wait for the listener and the pid file (sshd writes it once it listens).
up=
for _ in $(seq 50); do
	kill -0 "$sshd_pid" 2>/dev/null || break
	if [ -s /run/sshd.pid ] && (exec 3<>/dev/tcp/127.0.0.1/22) 2>/dev/null; then
		up=1
		break
	fi
	sleep 0.1
done
[ -n "$up" ] || die "sshd did not come up on 127.0.0.1:22 within 5 s" "$(tail -n 20 "$SSHD_LOG" 2>/dev/null)"

export OCSB_BUILD OWNER OWNER_HOME
export E2E_LIB=$E2E_DIR/lib.sh
export E2E_SCRATCH=$SCRATCH
export E2E_HOST=$SCRATCH/host
export E2E_SSHD_LOG=$SSHD_LOG
export OWNER_KEY=$OWNER_HOME/.ssh/id_ed25519
export OWNER_KEY2=$OWNER_HOME/.ssh/id_ecdsa

# The t-file runs as our child (not exec'd) so it is not PID 1: PID 1 ignores signals it
# has no handler for, which would surprise tests that signal their own processes.
cd /
bash "$T_FILE"
exit $?
