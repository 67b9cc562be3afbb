#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The build matrix: for each Debian release (default: bookworm trixie), a minimal root made
# by mmdebstrap, then in it, with no network: `make WERROR=1 all`, the unit tests as
# `make test-unit` runs them, and when debian/ exists the package: `make deb`, no test hook
# in it, lintian, install, `--help` and `man`, no /usr/local in what is installed, purge
# leaves nothing.
#
# Usage: tests/matrix/run.sh [RELEASE...]            (root; see docs/testing.md)
# Output: TAP lines "ok - ..." / "not ok - ..." (only this script's own: the unit tests'
# TAP stays in the logs), comments "# ...". Exit 1 on any failure.
# Roots are cached as tarballs in /var/tmp/ocsb-matrix/RELEASE-HASH.tar, HASH covering the
# package list, the archive lines and CACHE_VERSION; logs and each release's .deb go to build/matrix/RELEASE/.
set -u

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)

# Bump when the way a root is made changes (mmdebstrap options), to retire cached roots.
CACHE_VERSION=1
cache=${OCSB_MATRIX_CACHE:-/var/tmp/ocsb-matrix}
out=${OCSB_MATRIX_OUT:-$src/build/matrix}
jobs=${OCSB_MATRIX_JOBS:-2}
root_limit=${OCSB_MATRIX_ROOT_TIMEOUT:-900}  # seconds for mmdebstrap (a download)
step_limit=${OCSB_MATRIX_STEP_TIMEOUT:-1800} # seconds for one step in the root
max_age=${OCSB_MATRIX_MAX_AGE_DAYS:-30}      # a cached root older than this is remade
# run.sh --roots [RELEASE...]: only make the roots not cached yet (tests/run-all.sh does it
# in the background while the other tiers run); "#" lines only, a failure left to the matrix.
roots_only=0
if [ "${1:-}" = --roots ]; then
	roots_only=1
	shift
	# In a mount namespace of its own: its tmpfs (below) is seen by nothing else, and the
	# other tiers' checks of the host's mounts see no change.
	if [ -z "${OCSB_MATRIX_ROOTS_NS:-}" ] && [ "$(id -u)" -eq 0 ]; then
		exec env OCSB_MATRIX_ROOTS_NS=1 unshare --mount --propagation private -- "$0" --roots "$@"
	fi
fi
[ $# -gt 0 ] || set -- bookworm trixie

skip_all() {
	echo "ok - build matrix # SKIP $1"
	exit 0
}
[ "$(id -u)" -eq 0 ] || skip_all "needs root (mmdebstrap, mounts, namespaces)"
command -v mmdebstrap >/dev/null 2>&1 || skip_all "mmdebstrap not installed (sudo make test-deps)"
for t in unshare pivot_root ip timeout sha256sum; do
	command -v $t >/dev/null 2>&1 || skip_all "$t not installed"
done

# What the build, the unit tests and `make deb` need, and what the package runs (so that
# installing it needs no download); mount: in-root.sh's umount runs from the root itself.
# debian/control, when present, adds its Build-Depends, Depends and Pre-Depends. Not
# Recommends (nodejs, npm: large): the root has no package lists, so apt-get skips a
# recommended package it cannot find instead of downloading it.
PKGS="build-essential pkg-config libssh-dev libgit2-dev libsodium-dev libnftnl-dev libmnl-dev
libsecret-1-dev libcmocka-dev git util-linux mawk mount
debhelper dpkg-dev fakeroot lintian man-db
openssh-server squid nftables passwd libpam-modules iproute2"

# Package names of the dependency fields of debian/control: substitution variables
# (${shlibs:Depends}), version and architecture qualifiers dropped, the first alternative kept.
control_pkgs() {
	awk '
	/^[^ \t#]/ { field = tolower($0); sub(/:.*/, "", field); v = $0; sub(/^[^:]*:/, "", v) }
	/^[ \t]/ { v = $0 }
	field ~ /^(build-depends|build-depends-indep|build-depends-arch|depends|pre-depends)$/ {
		print v
	}' "$1" | tr ',' '\n' | sed -e 's/|.*//' -e 's/([^)]*)//g' -e 's/\[[^]]*\]//g' \
		-e 's/<[^>]*>//g' -e 's/:any//' -e 's/^[ \t]*//' -e 's/[ \t]*$//' |
		grep -v -e '^$' -e '\$' | sed 's/^debhelper-compat$/debhelper/'
}
if [ -f "$src/debian/control" ]; then
	PKGS="$PKGS $(control_pkgs "$src/debian/control")"
fi
# shellcheck disable=SC2086 # one package a word
pkglist=$(printf '%s\n' $PKGS | LC_ALL=C sort -u)

work=
child=
root_tmp=
failed=0
# Every exit path: stop the running step (its namespaces die with it, and their mounts with
# them), then remove the extracted root. The mount check is a guard: nothing is ever mounted
# under $work in this namespace; if something is, it is unmounted before rm, never crossed.
cleanup() {
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	[ -z "$work" ] || remove_work "$work"
	work=
	[ -z "$root_tmp" ] || rm -f "$root_tmp"
	root_tmp=
}

# Unmount what is mounted on or under DIR (only its tmpfs, see below), then remove it.
remove_work() { # DIR
	awk -v w="$1" '$5 == w || index($5, w "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount -l "$m"; done
	rm -rf --one-file-system "$1"
}

# A run killed by SIGKILL cannot clean up: the next one removes what it left (the name
# holds the pid; a directory whose process is gone is stale).
# (Not with --roots, which runs beside the other tiers: the matrix itself does it later.)
[ "$roots_only" = 1 ] ||
for d in /var/tmp/ocsb-matrix-run.*; do
	[ -d "$d" ] || continue
	p=${d#/var/tmp/ocsb-matrix-run.}
	p=${p%%.*}
	case $p in *[!0-9]* | '') continue ;; esac
	kill -0 "$p" 2>/dev/null || remove_work "$d"
done
for f in "$cache"/.*.tmp*.tar; do
	[ -f "$f" ] || continue
	p=${f##*.tmp}
	p=${p%.tar}
	case $p in *[!0-9]* | '') continue ;; esac
	kill -0 "$p" 2>/dev/null || rm -f "$f"
done

# The extracted root lives on a tmpfs when memory allows (a root is ~0.9 GB, with the build
# ~1.2 GB): extracting and removing it on a loaded disk took 10 s and 40 s here.
# OCSB_MATRIX_TMPFS=0 keeps it on disk.
use_tmpfs=${OCSB_MATRIX_TMPFS:-auto}
if [ "$use_tmpfs" = auto ]; then
	avail=$(awk '/^MemAvailable:/ { print int($2 / 1024 / 1024) }' /proc/meminfo)
	use_tmpfs=0
	[ "${avail:-0}" -ge 6 ] && use_tmpfs=1
fi
trap cleanup EXIT
trap 'exit 130' INT TERM

# Run in the background and wait, so that a signal is handled at once (bash runs a trap
# only after a foreground child ends).
run() {
	"$@" &
	child=$!
	wait "$child"
	local rc=$?
	child=
	return $rc
}

tailed() { tail -n "${2:-30}" "$1" | sed 's/^/#   /'; }

# ok/not ok for a step; the log's last lines on failure.
report() { # RC DESCRIPTION LOG
	if [ "$1" -eq 0 ]; then
		echo "ok - $2"
	else
		echo "not ok - $2"
		[ -n "${3:-}" ] && tailed "$3"
		failed=$((failed + 1))
	fi
}

# One command in the release's root: fresh mount, PID and network namespaces (in-root.sh).
# LIBMOUNT_UTAB keeps mount(8) from creating /run/mount on the host.
in_root() { # LIMIT COMMAND...
	local limit=$1
	shift
	LIBMOUNT_UTAB=$work/utab run timeout -k 10 "$limit" unshare --mount --net --pid --fork \
		--kill-child=SIGKILL --propagation private -- "$here/in-root.sh" "$work/root" "$@"
}

# The archive as a user of RELEASE has it: with its updates and security updates for a
# stable release (spelled out, not left to mmdebstrap's list of suites, and all on
# deb.debian.org, the one archive host every machine here reaches).
sources() { # RELEASE
	local m=${OCSB_MATRIX_MIRROR:-http://deb.debian.org/debian}
	echo "deb $m $1 main"
	case $1 in
	sid | unstable | testing | experimental) ;;
	*)
		echo "deb $m $1-updates main"
		echo "deb ${OCSB_MATRIX_SECURITY:-http://deb.debian.org/debian-security} $1-security main"
		;;
	esac
}

# The release's root tarball, made when missing or too old, path in $tarball.
get_root() { # RELEASE LOG
	local rel=$1 log=$2 tmp old key
	local -a lines
	mapfile -t lines < <(sources "$rel")
	key=$(printf 'cache %s\n%s\n' "$CACHE_VERSION" "$pkglist" "${lines[@]}" | sha256sum |
		cut -c1-12)
	tarball=$cache/$rel-$key.tar
	root_made="cached"
	if [ -f "$tarball" ] && [ -s "$tarball" ] && [ -z "$(find "$tarball" -mtime +"$max_age")" ]; then
		return 0
	fi
	mkdir -p "$cache" && chmod 0755 "$cache" || return 1
	# mmdebstrap picks the output format from the name: the temporary name ends in .tar too.
	tmp=$cache/.$rel-$key.tmp$$.tar
	root_tmp=$tmp
	# Its own mount namespace (root mode mounts /proc and /dev in its temp dir) and its temp
	# dir under $work: a killed mmdebstrap leaves neither behind.
	# shellcheck disable=SC2086
	TMPDIR=$work run timeout -k 30 "$root_limit" unshare --mount --propagation private -- \
		mmdebstrap --variant=apt --format=tar --include="$(echo $pkglist | tr ' ' ',')" \
		"$rel" "$tmp" "${lines[@]}" >"$log" 2>&1
	local rc=$?
	if [ $rc -ne 0 ]; then
		rm -f "$tmp"
		if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
			root_err="mmdebstrap timed out after $root_limit s"
		else
			root_err=$(grep -E '^E:' "$log" | head -n 3 | tr '\n' ' ')
			[ -n "$root_err" ] || root_err="mmdebstrap exit status $rc"
		fi
		return 1
	fi
	mv -f "$tmp" "$tarball" || return 1
	root_tmp=
	for old in "$cache/$rel"-*.tar; do
		[ "$old" = "$tarball" ] || rm -f "$old"
	done
	root_made="built"
}

# The source as a developer has it: tracked and untracked-not-ignored files (uncommitted
# work is tested, build directories are not copied); without git, all but build dirs.
copy_source() { # DEST
	(
		cd "$src" || exit 1
		if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
			git ls-files -z -co --exclude-standard |
				while IFS= read -r -d '' f; do
					# Deleted but not yet committed: not part of the tree.
					if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi
				done
		else
			find . \( -name .git -o -name 'build' -o -name 'build-*' \) -prune -o \
				\( -type f -o -type l \) -print0
		fi | tar --null -T - -cf - --owner=0 --group=0
	) | tar -C "$1" -xf -
}

# Paths of the root (and a checksum of each file in /etc), to compare before and after.
SNAPSHOT='{ find / -xdev \( -path /proc -o -path /dev -o -path /tmp -o -path /src \) -prune \
	-o -print; find /etc -xdev -type f -exec md5sum {} +; } | LC_ALL=C sort'
# apt's and dpkg's bookkeeping, and caches rebuilt by triggers: not the package's files.
BOOKKEEPING='^(/var/lib/dpkg|/var/lib/apt|/var/cache/apt|/var/log/apt|/var/cache/man|/var/cache/debconf|/var/cache/ldconfig)(/|$)|^/var/log/(dpkg|alternatives)\.log$|^/etc/ld\.so\.cache$|[0-9a-f]{32}  /etc/ld\.so\.cache$'

secs() { echo $((SECONDS - $1)); }

release() { # RELEASE
	local rel=$1 dir=$out/$1 t0=$SECONDS t tr tb tu tp rc
	local -a times=()
	rm -rf "$dir" && mkdir -p "$dir" || {
		report 1 "$rel: output directory $dir"
		return
	}
	work=$(mktemp -d "/var/tmp/ocsb-matrix-run.$$.XXXXXX") &&
		{ [ "$use_tmpfs" != 1 ] || mount -t tmpfs -o size=4g,mode=0700 ocsb-matrix "$work"; } || {
		report 1 "$rel: temporary directory"
		cleanup
		return
	}
	root_err=
	if ! get_root "$rel" "$dir/root.log"; then
		report 1 "$rel: build root (${root_err:-see $dir/root.log})"
		cleanup
		return
	fi
	mkdir "$work/root" && tar -C "$work/root" -xf "$tarball" || {
		report 1 "$rel: extract $tarball"
		cleanup
		return
	}
	tr=$(secs "$t0")
	echo "ok - $rel: build root ($root_made, $tr s)"
	times+=("root $tr s ($root_made)")
	# No daemon starts in the root (openssh-server, squid when installed by the package).
	printf '#!/bin/sh\nexit 101\n' >"$work/root/usr/sbin/policy-rc.d"
	chmod 0755 "$work/root/usr/sbin/policy-rc.d"
	mkdir "$work/root/src" && copy_source "$work/root/src" || {
		report 1 "$rel: copy the source tree"
		cleanup
		return
	}

	t=$SECONDS
	in_root "$step_limit" sh -c "cd /src && make -j$jobs WERROR=1 all" >"$dir/build.log" 2>&1
	rc=$?
	tb=$(secs "$t")
	times+=("build $tb s")
	report $rc "$rel: make WERROR=1 all" "$dir/build.log"

	if [ $rc -eq 0 ]; then
		t=$SECONDS
		in_root "$step_limit" sh -c "cd /src && make -j$jobs WERROR=1 test-unit" \
			>"$dir/unit.log" 2>&1
		rc=$?
		tu=$(secs "$t")
		times+=("unit $tu s")
		local counts
		counts=$(sed -n 's/^unit: \([0-9]* passed, [0-9]* failed, [0-9]* skipped\)$/\1/p' \
			"$dir/unit.log" | tail -n 1)
		if [ $rc -eq 0 ] && [ -n "$counts" ]; then
			echo "ok - $rel: unit tests ($counts)"
		else
			echo "not ok - $rel: unit tests (${counts:-no summary, exit status $rc})"
			failed=$((failed + 1))
			# The failing TAP lines, as comments: the suite counts only this line.
			if grep -q '^not ok' "$dir/unit.log"; then
				grep -E '^not ok|^# .*(error|Error|ERROR|fail)' "$dir/unit.log" |
					head -n 40 | sed 's/^/#   /'
			else
				tailed "$dir/unit.log"
			fi
		fi
	fi

	if [ ! -f "$src/debian/control" ]; then
		echo "ok - $rel: package # SKIP no debian/ in the tree"
	elif [ $rc -eq 0 ]; then
		t=$SECONDS
		package "$rel" "$dir"
		tp=$(secs "$t")
		times+=("package $tp s")
	fi

	cleanup
	rel_time[$rel]=$(secs "$t0")
	times+=("total ${rel_time[$rel]} s")
	printf '# %s: %s' "$rel" "${times[0]}"
	printf ', %s' "${times[@]:1}"
	echo
}

# The package stage (debian/ exists): build, lint, install, use, purge.
package() { # RELEASE DIR
	local rel=$1 dir=$2 rc debs deb e w
	in_root "$step_limit" sh -c "cd /src && make deb" >"$dir/deb.log" 2>&1
	rc=$?
	debs=$(cd "$work/root/src" && ls ocsb_*.deb 2>/dev/null)
	if [ $rc -eq 0 ] && [ "$(echo "$debs" | grep -c .)" -ne 1 ]; then
		echo "# make deb left '$debs' in the source root, not one ocsb_*.deb" >>"$dir/deb.log"
		rc=1
	fi
	report $rc "$rel: make deb${debs:+ ($debs)}" "$dir/deb.log"
	[ $rc -eq 0 ] || return
	deb=$debs
	cp "$work/root/src/$deb" "$dir/" || report 1 "$rel: keep $deb in $dir"
	test_hooks "$rel" "$dir" "$deb"

	in_root "$step_limit" sh -c "cd /src && lintian --no-tag-display-limit $deb" \
		>"$dir/lintian.log" 2>&1
	rc=$? # 1: tags at the failing level (errors); more: lintian itself failed
	e=$(grep -c '^E:' "$dir/lintian.log")
	w=$(grep -c '^W:' "$dir/lintian.log")
	if [ "$e" -eq 0 ] && [ $rc -le 1 ]; then
		echo "ok - $rel: lintian $deb (0 errors, $w warnings)"
	else
		echo "not ok - $rel: lintian $deb ($e errors, $w warnings)"
		grep -v '^[WIPNX]:' "$dir/lintian.log" | head -n 30 | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
	grep '^W:' "$dir/lintian.log" | head -n 20 | sed 's/^/#   /'

	in_root 600 sh -c "$SNAPSHOT" >"$dir/files-before.lst" 2>"$dir/snapshot.log"
	# Everything it depends on is in the root and there is no network: no download.
	in_root "$step_limit" apt-get install -y "/src/$deb" >"$dir/install.log" 2>&1
	rc=$?
	report $rc "$rel: apt-get install ./$deb (no download)" "$dir/install.log"
	if [ $rc -eq 0 ]; then
		in_root 60 ocsb --help >"$dir/use.log" 2>&1
		report $? "$rel: ocsb --help (installed)" "$dir/use.log"
		in_root 60 ocsb-provision --help >>"$dir/use.log" 2>&1
		report $? "$rel: ocsb-provision --help (installed)" "$dir/use.log"
		in_root 60 sh -c 'MANPAGER=cat MANWIDTH=80 man ocsb' >"$dir/man.log" 2>&1
		rc=$?
		[ $rc -eq 0 ] && ! grep -qi '^ *ocsb' "$dir/man.log" && rc=1
		report $rc "$rel: man ocsb (installed)" "$dir/man.log"
		usr_local "$rel" "$dir"
	fi

	in_root "$step_limit" apt-get purge -y ocsb >"$dir/purge.log" 2>&1
	rc=$?
	report $rc "$rel: apt-get purge ocsb" "$dir/purge.log"
	in_root 600 sh -c "$SNAPSHOT" >"$dir/files-after.lst" 2>>"$dir/snapshot.log"
	LC_ALL=C comm -13 "$dir/files-before.lst" "$dir/files-after.lst" | grep -vE "$BOOKKEEPING" \
		>"$dir/left-after-purge.lst"
	if [ -s "$dir/left-after-purge.lst" ]; then
		echo "not ok - $rel: purge leaves nothing new ($(grep -c . \
			"$dir/left-after-purge.lst") paths or changed /etc files)"
		head -n 20 "$dir/left-after-purge.lst" | sed 's/^/#   /'
		failed=$((failed + 1))
	else
		echo "ok - $rel: purge leaves nothing new (outside apt/dpkg bookkeeping)"
	fi
}

# The test hooks stay out of the package (common/testhook.h): tools/check-hooks.sh finds none
# of their strings (OCSB_TEST_*, OCSB_FAULT_*, the test wrapper's and fault files' names) in
# any program the package installs. Positive control: it finds every one of them in the test
# build's programs (make TEST_HOOKS=1, here after `make test-unit`: the programs' mains and
# a relink), so a probe that could not see a name never passes.
TEST_PROGS='build/ocsb build/ocsb-agentd build/ocsb-provision build/ocsb-shell build/ocsb-inject build/ocsb-warden'
test_hooks() { # RELEASE DIR DEB
	local rel=$1 dir=$2 deb=$3 rc_pkg rc_test n
	# Every executable file of the package, extracted first: a package without programs
	# gives check-hooks no argument, an error, never "no hook".
	in_root 120 sh -c "cd /src && rm -rf /tmp/ocsb-pkg && dpkg-deb -x $deb /tmp/ocsb-pkg &&
		tools/check-hooks.sh release \$(find /tmp/ocsb-pkg -type f -perm -0100 | sort)" \
		>"$dir/hooks-package.txt" 2>&1
	rc_pkg=$?
	in_root "$step_limit" sh -c "cd /src && make -j$jobs WERROR=1 TEST_HOOKS=1 all >&2 &&
		tools/check-hooks.sh test $TEST_PROGS" >"$dir/hooks-test.txt" 2>"$dir/hooks.log"
	rc_test=$?
	n=$(grep -c '^check-hooks: .*: 0 hook strings$' "$dir/hooks-package.txt")
	if [ $rc_pkg -eq 0 ] && [ "$n" -gt 0 ] && [ $rc_test -eq 0 ]; then
		echo "ok - $rel: no test hook in the package's $n programs (tools/check-hooks.sh; the test build's have every one)"
	else
		echo "not ok - $rel: no test hook in the package's programs (tools/check-hooks.sh: package exit $rc_pkg, test build exit $rc_test; want 0 and 0)"
		tailed "$dir/hooks-package.txt"
		tailed "$dir/hooks-test.txt"
		[ $rc_test -eq 0 ] || tailed "$dir/hooks.log" 10
		failed=$((failed + 1))
	fi
}

# The installed programs and data look for nothing under /usr/local: no file of the package
# names it. Two exceptions, each printed as a comment: an element of a PATH-style list (the
# PATH given to what ocsb runs follows Debian's default PATH, which lists /usr/local/*bin
# first), and documentation (README, man pages: text a person reads, nothing looks it up).
usr_local() { # RELEASE DIR
	local rel=$1 dir=$2 bad docs
	in_root 120 sh -c 'dpkg -L ocsb | while read -r f; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		LC_ALL=C grep -a -o "[[:graph:] ]*/usr/local[[:graph:] ]*" "$f" |
			sed "s|^|$f: |"
	done' >"$dir/usr-local.log" 2>&1
	docs=$(grep -cE '^/usr/share/(doc|man)/' "$dir/usr-local.log")
	# A search-path element: "/usr/local/bin" between ':' or '=' and ':' or the end.
	bad=$(grep -vE '^/usr/share/(doc|man)/' "$dir/usr-local.log" |
		sed -E 's#(^|[=:])/usr/local/s?bin(:|$)#\1\2#g' | grep '/usr/local')
	if [ -z "$bad" ]; then
		echo "ok - $rel: no installed program or data names /usr/local"
	else
		echo "not ok - $rel: installed files name /usr/local ($(echo "$bad" | grep -c .) strings)"
		echo "$bad" | head -n 20 | sed 's/^/#   /'
		failed=$((failed + 1))
	fi
	[ "$docs" -eq 0 ] || echo "# $rel: /usr/local in documentation: $docs lines (see $dir/usr-local.log)"
}

if [ "$roots_only" = 1 ]; then
	for rel in "$@"; do
		t=$SECONDS
		work=$(mktemp -d "/var/tmp/ocsb-matrix-run.$$.XXXXXX") || exit 0
		# mmdebstrap unpacks into $work: on a tmpfs, the disk sees only the tarball, not
		# the writes of some 20,000 files beside the other tiers' tests.
		[ "$use_tmpfs" != 1 ] || mount -t tmpfs -o size=4g,mode=0700 ocsb-matrix "$work" || exit 0
		root_err=
		if get_root "$rel" "$work/root.log"; then
			echo "# $rel: build root $root_made in $(secs "$t") s, ahead of the matrix"
		else
			cp "$work/root.log" "$cache/.roots-$rel.log" 2>/dev/null
			echo "# $rel: build root ahead of the matrix failed (the matrix tries again): ${root_err:-see $cache/.roots-$rel.log}"
		fi
		cleanup
	done
	exit 0
fi

declare -A rel_time
t_all=$SECONDS
for rel in "$@"; do
	case $rel in
	*[!a-z0-9-]* | '')
		report 1 "release name '$rel'"
		continue
		;;
	esac
	t=$SECONDS
	release "$rel"
	rel_time[$rel]=$(secs "$t")
done
summary=
for rel in "$@"; do
	[ -n "${rel_time[$rel]:-}" ] && summary="$summary${summary:+, }$rel ${rel_time[$rel]} s"
done
echo "# matrix: ${summary:-nothing ran}; all $(secs "$t_all") s"
[ "$failed" -eq 0 ]
