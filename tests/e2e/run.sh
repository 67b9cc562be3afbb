#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh [t-file...]: hermetic end-to-end suite (default: every tests/e2e/t-*.sh).
#
# Each t-file runs in its own fresh mount+net+pid namespace (ns-inner.sh) with overlays
# and tmpfs over everything useradd, sshd and ocsb write, so the real tools run but the
# machine is not changed. To prove that, the host is fingerprinted before and after and
# any difference is reported as "not ok - host changed: ...".
#
# Environment: OCSB_BUILD (absolute build dir, default <repo>/build), OCSB_E2E_TIMEOUT
# (seconds per t-file, default 600). Output: TAP-like "ok - ..." / "not ok - ..." lines,
# detail lines "  # ...". Exit 0 when nothing is "not ok", 1 otherwise.

set -u
export LC_ALL=C

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$E2E_DIR/../.." && pwd)
OCSB_BUILD=${OCSB_BUILD:-$REPO/build}
TIMEOUT=${OCSB_E2E_TIMEOUT:-600}

if [ "$(id -u)" -ne 0 ]; then
	echo 'ok - e2e suite # SKIP needs root (run: sudo make test)'
	exit 0
fi

# Tests run the build's programs and read files beside them as the owner and the agent.
# A clone where those cannot reach it (/root is 0700 on stock Debian; homes are 0700 on
# newer releases) would fail them for the wrong reason, and a tree on an overlaid
# directory (/root) would be writable inside: then the suite runs from a root-owned copy
# under /tmp (world-traversable, covered and restored read-only by ns-inner.sh), removed
# at the end. OCSB_E2E_STAGED names that copy in the re-executed run. So does a build a user
# made (make TEST_HOOKS=1, then sudo tests/e2e/run.sh; or handed back by a sudo make):
# the supervisor runs only root-owned programs (ocsb-inject beside it), so the copies are
# root's.
stage_why=
if [ -z "${OCSB_E2E_STAGED:-}" ]; then
	if ! { setpriv --reuid=65534 --regid=65534 --clear-groups -- \
		test -r "$E2E_DIR/lib.sh" -a -x "$OCSB_BUILD" 2>/dev/null &&
		case $REPO/ in /root/* | /var/lib/* | /etc/* | /var/log/* | /var/spool/* | /var/mail/*) false ;; esac; }; then
		stage_why="$REPO is not reachable by other users (or lies on a directory the tests overlay)"
	elif [ -n "$(find "$OCSB_BUILD" -maxdepth 1 -name 'ocsb*' ! -uid 0 -print -quit 2>/dev/null)" ]; then
		stage_why="the programs in $OCSB_BUILD are not root's"
	fi
fi
if [ -n "$stage_why" ]; then
	stage=$(mktemp -d /tmp/ocsb-e2e-src.XXXXXX) || exit 1
	chmod 0755 "$stage" && mkdir -m 0755 "$stage/src" "$stage/build" "$stage/build/tests" || exit 1
	# The copies of the programs are root's (cp as root, the owner not preserved).
	cpb() { cp --preserve=mode,timestamps "$@"; }
	if ! tar -C "$REPO" --exclude=./.git --exclude='./build*' -cf - . | tar -C "$stage/src" -xf - ||
		! cpb "$OCSB_BUILD"/ocsb* "$stage/build/" ||
		{ compgen -G "$OCSB_BUILD/bench_*" >/dev/null &&
			! cpb "$OCSB_BUILD"/bench_* "$stage/build/"; } ||
		{ compgen -G "$OCSB_BUILD/tests/test_*" >/dev/null &&
			! cpb "$OCSB_BUILD"/tests/test_* "$stage/build/tests/"; }; then
		rm -rf "$stage"
		echo "not ok - e2e: cannot copy $REPO and $OCSB_BUILD to a traversable place under /tmp"
		exit 1
	fi
	echo "# e2e: $stage_why: running from a copy in $stage"
	args=()
	for t in "$@"; do
		case $t in "$REPO"/*) args+=("$stage/src/${t#"$REPO"/}") ;; *) args+=("$t") ;; esac
	done
	OCSB_E2E_STAGED=$stage OCSB_BUILD=$stage/build "$stage/src/tests/e2e/run.sh" "${args[@]}"
	rc=$?
	rm -rf --one-file-system "$stage"
	exit $rc
fi

FAILED=0
say_ok() { printf 'ok - %s\n' "$1"; }
say_not_ok() {
	local text
	printf 'not ok - %s\n' "$1"
	shift
	FAILED=1
	for text in "$@"; do
		[ -n "$text" ] || continue
		printf '%s\n' "$text" | head -n 40 | sed 's/^/  # /'
	done
}

missing=()
for tool in unshare timeout ip mount setpriv ssh ssh-keygen /usr/sbin/sshd useradd; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
	say_not_ok "e2e prerequisites" "missing: ${missing[*]}"
	exit 1
fi
case $OCSB_BUILD in
/*) ;;
*) OCSB_BUILD=$(cd "$OCSB_BUILD" 2>/dev/null && pwd) || OCSB_BUILD=$PWD/$OCSB_BUILD ;;
esac
case $TIMEOUT in
'' | *[!0-9]*) say_not_ok "OCSB_E2E_TIMEOUT must be a number of seconds, not '$TIMEOUT'"; exit 1 ;;
esac

# Which t-files: arguments may be paths or names relative to tests/e2e.
T_FILES=()
if [ "$#" -eq 0 ]; then
	for t in "$E2E_DIR"/t-*.sh; do
		[ -f "$t" ] && T_FILES+=("$t")
	done
else
	for t in "$@"; do
		if [ -f "$t" ]; then
			T_FILES+=("$(cd "$(dirname "$t")" && pwd)/$(basename "$t")")
		elif [ -f "$E2E_DIR/$t" ]; then
			T_FILES+=("$E2E_DIR/$t")
		else
			say_not_ok "$t: no such t-file"
		fi
	done
fi

# Always under /tmp: ns-inner.sh reads it before covering /tmp, and its overlay scratch
# mount point lives here (only ever mounted inside the namespace).
RUNDIR=$(mktemp -d /tmp/ocsb-e2e.XXXXXX) || exit 1
mkdir "$RUNDIR/ns" "$RUNDIR/host" "$RUNDIR/before" "$RUNDIR/after"
CHILD=
INTERRUPTED=
cleanup() {
	# --one-file-system: should a namespace mount ever leak here, do not descend into it.
	rm -rf --one-file-system "$RUNDIR"
}
trap cleanup EXIT
# Stop the running namespace (timeout forwards the signal to its whole process group;
# unshare's death SIGKILLs the namespace's PID 1), then still check the host.
trap 'INTERRUPTED=1; [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null' INT TERM HUP

# Marker in the environment of everything the suite starts as root, to recognise
# survivors even if they left the process tree.
export OCSB_E2E_RUN="ocsb-e2e-$$-$RANDOM$RANDOM"
SELF_START=$(
	read -r stat <"/proc/$$/stat"
	read -ra f <<<"${stat##*) }"
	echo "${f[19]}"
)
SELF_PIDNS=$(readlink /proc/self/ns/pid)

# --- host fingerprint ------------------------------------------------------------------

# manifest PATH...: type, mode, owner, link target and sha256 of every entry below PATH.
manifest() {
	local p
	for p in "$@"; do
		if [ ! -e "$p" ] && [ ! -L "$p" ]; then
			printf '%s\tabsent\n' "$p"
			continue
		fi
		find "$p" -printf '%p\t%y\t%m\t%u:%g\t%l\n'
		find "$p" -type f -print0 | xargs -0r sha256sum |
			sed -E 's/^\\?([0-9a-f]{64})  (.*)$/\2\tsha256:\1/'
	done | sort
}

# proc_scan: "pid uid start pidns comm" for every process except kernel threads and this
# script's own descendants (its helpers, alive at scan time). pidns and the run marker
# are only looked up for processes younger than the suite (fewer forks).
proc_scan() {
	local d pid stat rest comm uid key val p ns
	local -a f
	local -A ppid_of start_of comm_of uid_of
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		# Whole: a name may hold a newline (PR_SET_NAME), which would cut a read short.
		stat=
		read -r -d '' stat 2>/dev/null <"$d/stat"
		[ -n "$stat" ] || continue
		rest=${stat##*) }
		comm=${stat#*(}
		comm=${comm%)*}
		read -ra f <<<"$rest"
		# A process gone while it was read leaves a short line: nothing to wait for.
		[ "${#f[@]}" -ge 20 ] || continue
		[ "$pid" = 2 ] || [ "${f[1]}" = 2 ] && continue
		uid=
		while read -r key val _; do
			[ "$key" = Uid: ] && { uid=$val; break; }
		done 2>/dev/null <"$d/status"
		ppid_of[$pid]=${f[1]}
		start_of[$pid]=${f[19]}
		comm=${comm//$'\n'/_}
		comm_of[$pid]=${comm// /_}
		uid_of[$pid]=${uid:-?}
	done
	for pid in "${!ppid_of[@]}"; do
		p=$pid
		while [ -n "$p" ] && [ "$p" != 0 ] && [ "$p" != 1 ]; do
			[ "$p" = "$$" ] && continue 2
			p=${ppid_of[$p]:-}
		done
		ns=-
		if [ "${start_of[$pid]}" -ge "$SELF_START" ]; then
			ns=$(readlink "/proc/$pid/ns/pid" 2>/dev/null) || ns=gone
			if tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" | grep -qxF "OCSB_E2E_RUN=$OCSB_E2E_RUN"; then
				ns="$ns,marked"
			fi
		fi
		printf '%s %s %s %s %s\n' "$pid" "${uid_of[$pid]}" "${start_of[$pid]}" "$ns" "${comm_of[$pid]}"
	done | sort -n
}

fingerprint() {
	local out=$1
	manifest /etc/passwd /etc/group /etc/shadow /etc/gshadow /etc/subuid /etc/subgid >"$out/auth"
	manifest /etc/ssh >"$out/ssh"
	manifest /etc/ocsb /var/lib/ocsb >"$out/ocsb"
	if command -v nft >/dev/null; then
		nft list ruleset >"$out/nft" 2>&1
	fi
	# Mount point, per-mount options and fs type (after the " - " separator); duplicates
	# kept (stacking). The options catch a leaked read-only remount of ns-inner.sh.
	awk '{ for (i = 7; $i != "-"; i++) ; print $5, $6, $(i + 1) }' /proc/self/mountinfo | sort >"$out/mounts"
	find /home -mindepth 1 -maxdepth 1 -printf '%f\t%y\t%m\t%u:%g\n' | sort >"$out/home"
	# Leaks of the failed bind-mount approach: /etc/passwd+ and friends, lock files
	# (any new top-level /etc name), and mount(8)'s /run/mount without LIBMOUNT_UTAB.
	{
		find /etc -mindepth 1 -maxdepth 1 | sort
		manifest /run/mount
	} >"$out/leaks"
	cg_left >"$out/cgroups"
	proc_scan >"$out/procs"
	awk '{ print $2, $5 }' "$out/procs" | sort -u >"$out/proc-set"
}

# --- cgroups --------------------------------------------------------------------------
# ocsb-agentd creates the agent's cgroup below its own. The namespaces do not cover the
# cgroup tree, so each t-file runs in a cgroup of its own below ours (v1: memory, pids,
# cpu, freezer), emptied and removed when the file ends; the fingerprint lists what is
# left below ours.
CG_HOME=()
for c in memory pids cpu freezer; do
	own=$(awk -F: -v c="$c" '{ n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i] == c) print $3 }' /proc/self/cgroup)
	[ -n "$own" ] && [ -d "/sys/fs/cgroup/$c$own" ] && CG_HOME+=("/sys/fs/cgroup/$c${own%/}")
done
CG_FILE=()
cg_enter() {
	local h d
	CG_FILE=()
	for h in "${CG_HOME[@]}"; do
		d=$h/ocsb-e2e-$$-$1
		mkdir "$d" 2>/dev/null && echo $$ >"$d/cgroup.procs" && CG_FILE+=("$d")
	done
}
cg_leave() {
	local h d sub pid
	for h in "${CG_HOME[@]}"; do
		echo $$ >"$h/cgroup.procs" 2>/dev/null
	done
	for d in "${CG_FILE[@]}"; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do
			while read -r sub; do
				while read -r pid; do
					kill -9 "$pid" 2>/dev/null
				done <"$sub/cgroup.procs"
				[ -f "$sub/freezer.state" ] && echo THAWED >"$sub/freezer.state" 2>/dev/null
				rmdir "$sub" 2>/dev/null
			done < <(find "$d" -depth -type d)
			[ -d "$d" ] || break
			sleep 0.1
		done
	done
	CG_FILE=()
}
cg_left() {
	local h
	for h in "${CG_HOME[@]}"; do
		find "$h" -mindepth 1 -maxdepth 1 -type d -name "ocsb-e2e-$$-*"
	done | sort
}

# Host facts the tests compare against from inside (they cannot see the host).
cp /etc/passwd /etc/group "$RUNDIR/host/"
if command -v nft >/dev/null; then
	nft list tables >"$RUNDIR/host/nft-tables" 2>/dev/null
fi
fingerprint "$RUNDIR/before"

# --- the t-files -----------------------------------------------------------------------

echo "# ocsb e2e: OCSB_BUILD=$OCSB_BUILD, timeout ${TIMEOUT}s per file"
[ -x "$OCSB_BUILD/ocsb-provision" ] || echo "# note: $OCSB_BUILD/ocsb-provision not built"
# The test hooks many t-files use (the wrapper in OpenCode's place, the netlock fault, t-86's
# CA for its fake provider, ocsb-provision's kill points) exist in a test build only
# (common/testhook.h): said once here, not left to be guessed from their failures.
if [ -f "$OCSB_BUILD/ocsb-agentd" ] && ! grep -aq OCSB_TEST_HOOKS "$OCSB_BUILD/ocsb-agentd"; then
	echo "# note: $OCSB_BUILD is a release build without test hooks: the t-files that use them (t-01, t-50, t-71, t-80, t-85, t-86, t-95, t-96, t-98 and more) fail with it (make TEST_HOOKS=1, or make test-e2e)"
fi

run_one() {
	local t=$1 name out err rc t0 t1 results tee_fd tee_pid
	name=$(basename "$t")
	out=$RUNDIR/$name.out
	err=$RUNDIR/$name.err
	echo "# $name"
	t0=$(date +%s.%N)
	# LIBMOUNT_UTAB: else mount(8) inside creates /run/mount on the host's /run.
	# --kill-child: if unshare dies (timeout, ^C) the namespace's PID 1 gets SIGKILL and
	# with it every process inside. stdout streams through tee; stderr is kept for
	# failures.
	# The tee is started by this shell (not by the background job) so that it is our
	# child and can be waited for: its copy must be complete before we read it.
	exec {tee_fd}> >(tee "$out")
	tee_pid=$!
	cg_enter "${name%.sh}"
	env LIBMOUNT_UTAB="$RUNDIR/utab" E2E_RUNDIR="$RUNDIR" OCSB_BUILD="$OCSB_BUILD" \
		E2E_HOST_NS_mnt="$(readlink /proc/self/ns/mnt)" \
		E2E_HOST_NS_net="$(readlink /proc/self/ns/net)" \
		E2E_HOST_NS_pid="$SELF_PIDNS" \
		timeout --kill-after=5 "$TIMEOUT" \
		unshare --mount --net --pid --fork --mount-proc --propagation private \
		--kill-child=SIGKILL bash "$E2E_DIR/ns-inner.sh" "$t" \
		</dev/null 1>&"$tee_fd" 2>"$err" &
	CHILD=$!
	wait "$CHILD"
	rc=$?
	# A trapped signal interrupts wait: wait again for the real status.
	while kill -0 "$CHILD" 2>/dev/null; do
		wait "$CHILD"
		rc=$?
	done
	CHILD=
	cg_leave
	exec {tee_fd}>&-
	wait "$tee_pid"
	t1=$(date +%s.%N)
	results=$(grep -cE '^(not )?ok\b' "$out")
	if grep -q '^not ok' "$out"; then
		FAILED=1
	fi
	if [ -n "$INTERRUPTED" ]; then
		say_not_ok "$name interrupted"
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] &&
		awk -v a="$t0" -v b="$t1" -v t="$TIMEOUT" 'BEGIN { exit !(b - a >= t) }'; then
		say_not_ok "$name timed out after ${TIMEOUT}s" "$(tail -n 20 "$err")"
	elif [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$out"; then
		say_not_ok "$name exited $rc" "$(tail -n 20 "$err")"
	elif [ "$rc" -ne 0 ]; then
		echo "  # $name exited $rc"
		[ -s "$err" ] && tail -n 20 "$err" | sed 's/^/  # stderr: /'
	elif [ "$results" -eq 0 ]; then
		say_not_ok "$name printed no results" "$(tail -n 20 "$err")"
	fi
	awk -v a="$t0" -v b="$t1" -v n="$name" 'BEGIN { printf "# %s: %.1f s\n", n, b - a }'
}

for t in "${T_FILES[@]}"; do
	[ -n "$INTERRUPTED" ] && break
	run_one "$t"
done

# --- host unchanged? ------------------------------------------------------------------

fingerprint "$RUNDIR/after"

compare() {
	local what=$1 file=$2 diff
	if [ ! -e "$RUNDIR/before/$file" ] && [ ! -e "$RUNDIR/after/$file" ]; then
		say_ok "host unchanged: $what # SKIP not available"
	else
		diff=$(diff -u "$RUNDIR/before/$file" "$RUNDIR/after/$file" | tail -n +3)
		if [ -z "$diff" ]; then
			say_ok "host unchanged: $what"
		else
			say_not_ok "host changed: $what" "$diff"
		fi
	fi
}
compare "/etc/passwd, group, shadow, gshadow, subuid, subgid" auth
compare "/etc/ssh" ssh
compare "/etc/ocsb, /var/lib/ocsb" ocsb
compare "nft ruleset" nft
compare "mount points" mounts
compare "/home entries" home
compare "no cgroups left below the suite's own" cgroups
compare "no /etc/passwd+, lock files or /run/mount leaked" leaks

# Survivors: younger than the suite and either carrying our marker, or in one of the
# pid namespaces our t-files ran in (recorded by ns-inner.sh; all should be dead now), or
# one of the daemons/tools the tests run showing up in the host's pid namespace. Other
# pid namespaces are someone else's: the same machine may run other sandboxes, even
# other copies of this harness.
touch "$RUNDIR/pidns"
leftovers=$(awk -v self="$SELF_START" -v pidns="$SELF_PIDNS" '
	FILENAME != ARGV[2] { ours[$1] = 1; next }
	{ split($4, ns, ",") }
	$3 >= self && ($4 ~ /,marked$/ || (ns[1] in ours) || (ns[1] == pidns &&
		$5 ~ /^(sshd|useradd|usermod|userdel|groupadd|groupdel|squid|ocsb-.*|opencode|ssh-agent|dbus-daemon|gnome-keyring-d)$/))
	' "$RUNDIR/pidns" "$RUNDIR/after/procs")
if [ -z "$leftovers" ]; then
	say_ok "host unchanged: no processes left behind by the tests"
	# New uid/command pairs not attributable to the tests (other users of the machine).
	others=$(comm -13 "$RUNDIR/before/proc-set" "$RUNDIR/after/proc-set")
	[ -n "$others" ] && printf '%s\n' "$others" | head -n 10 |
		sed 's/^/  # unrelated new process (uid comm), not counted: /'
else
	details=()
	while read -r pid uid _ ns comm; do
		details+=("pid $pid uid $uid $comm ($ns): $(ps -o args= -p "$pid" 2>/dev/null || echo gone)")
	done <<<"$leftovers"
	say_not_ok "host changed: processes left behind by the tests" "${details[@]}"
fi

[ -n "$INTERRUPTED" ] && FAILED=1
exit "$FAILED"
