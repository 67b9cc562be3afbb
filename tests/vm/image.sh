# SPDX-License-Identifier: MIT
# Sourced by tests/vm/run.sh: the ocsb package for a release, the cached guest base image
# and the per-run guest tree. Everything comes from Debian's archive through mmdebstrap on
# the host; the guest never has a network device to download with (the one boot that has
# one, for the Ansible role, is restricted: see run.sh).
#
# Cache ($CACHE, default /var/tmp/ocsb-vm), every file written under a temporary name and
# renamed into place:
#   build-<release>-<hash>.tar   build root (mmdebstrap, build dependencies)
#   base-<release>-<hash>.tar    guest base (systemd, kernel, sshd, squid, ... and the
#                                package's runtime dependencies); <hash> covers the list
#   pkg-<release>-<srchash>/     the package built from a given source tree

# The guest's own packages, and what the ocsb package depends on (its Depends and the
# libraries of its programs, named per release), so that installing the package needs no
# download; the list is the cache key. A dependency missing here is fetched from the archive
# at install time (the run says so): add it to the list.
GUEST_PKGS="systemd systemd-sysv udev linux-image-amd64 initramfs-tools dbus libpam-systemd
openssh-server openssh-client squid nftables git curl iproute2 procps util-linux passwd
e2fsprogs kmod at cron ca-certificates libpam-modules mount python3 python3-apt sudo
libssh-4 libsodium23 libnftnl11 libmnl0 libsecret-1-0 libseccomp2"
guest_pkgs() { # guest_pkgs RELEASE
	echo "$GUEST_PKGS"
	case $1 in
	bookworm) echo libgit2-1.5 ;;
	trixie) echo libgit2-1.9 ;;
	esac
}
BUILD_PKGS="build-essential pkg-config libssh-dev libgit2-dev libsodium-dev libnftnl-dev
libmnl-dev libsecret-1-dev libssl-dev libseccomp-dev git debhelper"

list_hash() { tr ' \n' '\n\n' <<<"$*" | sed '/^$/d' | sort -u | sha256sum | cut -c1-12; }
comma_list() { tr ' \n' '\n\n' <<<"$*" | sed '/^$/d' | sort -u | paste -sd, -; }

# cached_tar KIND RELEASE PKGS...: CACHED is the path of a cached mmdebstrap tarball, made
# when missing (then MADE=1).
cached_tar() {
	local kind=$1 rel=$2 out tmp
	shift 2
	out=$CACHE/$kind-$rel-$(list_hash "$@").tar
	MADE=
	CACHED=
	if [ ! -s "$out" ]; then
		# This shell's pid, taken once: $BASHPID in a command's redirection is the child's.
		local log=$CACHE/.$kind-$rel.$BASHPID.log
		tmp=${log%.log}.tmp.tar
		# Bounded: a hung download is a failure, not a CI run that never ends.
		if ! timeout 1800 mmdebstrap --variant=apt --include="$(comma_list "$@")" "$rel" "$tmp" \
			>"$log" 2>&1; then
			rm -f "$tmp"
			echo "mmdebstrap $kind $rel failed; see $log:" >&2
			tail -n 20 "$log" >&2
			return 1
		fi
		mv -f "$tmp" "$out" || return 1
		rm -f "$log"
		# Older keys of the same kind and release are dead weight (~0.8 GB each).
		find "$CACHE" -maxdepth 1 -name "$kind-$rel-*.tar" ! -name "${out##*/}" -delete
		MADE=1
	fi
	CACHED=$out
}

# in_root DIR CMD...: run CMD chrooted in DIR with /proc, /dev and /sys mounted in a private
# mount namespace (nothing stays mounted on the host).
in_root() {
	local dir=$1
	shift
	unshare --mount --propagation private -- sh -c '
		d=$1; shift
		mount -t proc proc "$d/proc" && mount --rbind /dev "$d/dev" &&
			mount -t sysfs sysfs "$d/sys" && mount -t tmpfs tmpfs "$d/tmp" || exit 1
		exec chroot "$d" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
			LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"' sh "$dir" "$@"
}

# Source files of the work tree (tracked and untracked, not ignored), as they are now;
# not tests/vm, which the package does not contain (editing the scenario rebuilds nothing).
src_tar() {
	(cd "$REPO" && git ls-files -z -co --exclude-standard -- . ':!tests/vm' |
		xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
		tar --null -T - --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf -)
}

# first alternatives of a Depends field, without versions
deb_depends() {
	dpkg-deb -f "$1" Depends | tr ',' '\n' | sed -E 's/\|.*//; s/\(.*\)//; s/:any//; s/[[:space:]]//g' |
		sed '/^$/d'
}

# ensure_pkg RELEASE: sets PKG_DEB (a .deb) or PKG_STAGE (a tar of `make install`),
# PKG_DEPS (runtime packages), PKG_HOW, PKG_TIME.
ensure_pkg() {
	local rel=$1 t0 srchash dir build broot
	t0=$(now)
	PKG_DEB=
	PKG_STAGE=
	PKG_DEPS=
	if [ -n "${OCSB_VM_DEB:-}" ]; then
		PKG_DEB=$(realpath "$OCSB_VM_DEB")
		PKG_HOW="given: $OCSB_VM_DEB"
	else
		PKG_DEB=$(ls "$REPO"/build/matrix/"$rel"/ocsb_*.deb 2>/dev/null | sort -V | tail -n 1)
		# Only a package newer than every source file: an older one is another tree's.
		if [ -n "$PKG_DEB" ] && [ -n "$(cd "$REPO" && git ls-files -z -co --exclude-standard \
			-- . ':!tests/vm' | xargs -0 -r sh -c 'find "$@" -maxdepth 0 -newer "$0"' "$PKG_DEB" \
			2>/dev/null | head -n 1)" ]; then
			out "# $rel: ${PKG_DEB#"$REPO"/} is older than the sources: not used"
			PKG_DEB=
		fi
		[ -n "$PKG_DEB" ] && PKG_HOW="from the build matrix: ${PKG_DEB#"$REPO"/}"
	fi
	if [ -n "$PKG_DEB" ]; then
		[ -s "$PKG_DEB" ] || { echo "no such package: $PKG_DEB" >&2; return 1; }
		PKG_DEPS=$(deb_depends "$PKG_DEB")
		PKG_TIME=$(elapsed "$t0")
		return 0
	fi
	# Build it for the release from this tree: `make deb` when the tree has it, else
	# `make install DESTDIR=` (no package yet: installed as a staged tree).
	srchash=$(src_tar | sha256sum | cut -c1-12)
	dir=$CACHE/pkg-$rel-$srchash
	if [ ! -f "$dir/done" ]; then
		cached_tar build "$rel" $BUILD_PKGS || return 1
		broot=$CACHED
		build=$(mktemp -d "$CACHE/.build-$rel.XXXXXX")
		tar -C "$build" --numeric-owner -xpf "$broot" || return 1
		mkdir -p "$build/src" && src_tar | tar -C "$build/src" -xf - || return 1
		rm -rf "$build/src/build"
		if grep -q '^deb:' "$REPO/Makefile"; then
			if ! in_root "$build" sh -c 'cd /src && make deb' >"$build/make.log" 2>&1; then
				echo "make deb for $rel failed:" >&2
				tail -n 30 "$build/make.log" >&2
				rm -rf "$build"
				return 1
			fi
			mkdir -p "$dir.tmp" && cp "$build"/src/ocsb_*.deb "$dir.tmp/" || return 1
		else
			if ! in_root "$build" sh -c 'cd /src && make -j2 PREFIX=/usr &&
				make install PREFIX=/usr DESTDIR=/stage' >"$build/make.log" 2>&1; then
				echo "make install for $rel failed:" >&2
				tail -n 30 "$build/make.log" >&2
				rm -rf "$build"
				return 1
			fi
			# Runtime packages: whatever provides the libraries the programs load.
			in_root "$build" sh -c 'for f in /stage/usr/bin/* /stage/usr/sbin/*; do ldd "$f"; done |
				awk "/=>/ { print \$3 }" | sort -u | while read -r l; do
					dpkg -S "$(basename "$l")" 2>/dev/null | grep -v "^diversion" | cut -d: -f1
				done | tr "," "\n" | sed "s/ //g" | grep -v -- "-dev\$" | sort -u' \
				>"$build/deps" || return 1
			mkdir -p "$dir.tmp" && tar -C "$build/stage" -cf "$dir.tmp/stage.tar" . &&
				cp "$build/deps" "$dir.tmp/deps" || return 1
		fi
		cp "$build/make.log" "$dir.tmp/" && touch "$dir.tmp/done" && rm -rf "$dir" &&
			mv "$dir.tmp" "$dir" || return 1
		# One package per release is kept: the one of this source.
		find "$CACHE" -maxdepth 1 -name "pkg-$rel-*" ! -name "${dir##*/}" -exec rm -rf {} +
		rm -rf "$build"
		PKG_HOW="built for $rel in a chroot"
	else
		PKG_HOW="built for $rel earlier from the same source ($dir)"
	fi
	PKG_DEB=$(ls "$dir"/ocsb_*.deb 2>/dev/null | tail -n 1)
	if [ -n "$PKG_DEB" ]; then
		PKG_DEPS=$(deb_depends "$PKG_DEB")
		PKG_HOW="$PKG_HOW, make deb"
	else
		PKG_STAGE=$dir/stage.tar
		PKG_DEPS=$(cat "$dir/deps")
		PKG_HOW="$PKG_HOW, make install DESTDIR= (no package target yet)"
	fi
	PKG_TIME=$(elapsed "$t0")
}

# prepare_guest RELEASE RUNDIR: RUNDIR/tree is the guest, ready to be imaged.
prepare_guest() {
	local rel=$1 rundir=$2 base t0 tree
	if ! ensure_pkg "$rel" 2>"$rundir/pkg.err"; then
		say_not_ok "$rel: the ocsb package for the release" "$(cat "$rundir/pkg.err")"
		return 1
	fi
	out "# $rel: package: $PKG_HOW (${PKG_TIME} s)"
	t0=$(now)
	if [ -n "${OCSB_VM_BASE:-}" ]; then
		# A base tarball given by hand (debugging the tier itself): not checked against
		# the list.
		base=$OCSB_VM_BASE
		MADE=
	else
		# shellcheck disable=SC2046
		if ! cached_tar base "$rel" $(guest_pkgs "$rel") 2>"$rundir/base.err"; then
			say_not_ok "$rel: guest base image (mmdebstrap)" "$(cat "$rundir/base.err")"
			return 1
		fi
		base=$CACHED
	fi
	IMAGE_TIME=$(elapsed "$t0")
	if [ -n "$MADE" ]; then IMAGE_HOW="cold: built"; else IMAGE_HOW="cached: ${base##*/}"; fi
	out "# $rel: guest base image $IMAGE_HOW in $IMAGE_TIME s"

	t0=$(now)
	tree=$rundir/tree
	mkdir -p "$tree"
	tar -C "$tree" --numeric-owner --xattrs --xattrs-include='*' -xpf "$base" || return 1

	# The package, the way a user installs it: apt-get install ./ocsb_*.deb, with a
	# policy-rc.d during the install only (nothing starts in the chroot).
	printf '#!/bin/sh\nexit 101\n' >"$tree/usr/sbin/policy-rc.d"
	chmod 0755 "$tree/usr/sbin/policy-rc.d"
	if [ -n "$PKG_DEB" ]; then
		mkdir -p "$tree/var/cache/ocsb-vm"
		cp "$PKG_DEB" "$tree/var/cache/ocsb-vm/"
		if ! in_root "$tree" apt-get install -y --no-install-recommends \
			"/var/cache/ocsb-vm/${PKG_DEB##*/}" >"$rundir/apt.log" 2>&1; then
			# A dependency the base lacks: fetch it from the archive (on the host's
			# network, the guest has none), as a user's apt would, and say so.
			out "# $rel: the base image lacks a dependency of the package; fetching it (add it to GUEST_PKGS):"
			grep -E '^ .* : Depends|Depends:' "$rundir/apt.log" | head -n 5 | sed 's/^/#   /' | tee -a "$LOG"
			if ! in_root "$tree" sh -c 'apt-get update -qq && apt-get install -y \
				--no-install-recommends "$1"' sh "/var/cache/ocsb-vm/${PKG_DEB##*/}" \
				>>"$rundir/apt.log" 2>&1; then
				say_not_ok "$rel: apt-get install ./${PKG_DEB##*/} in the guest tree" \
					"$(tail -n 20 "$rundir/apt.log")"
				return 1
			fi
			rm -rf "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/archives/*.deb
		fi
		rm -rf "$tree/var/cache/ocsb-vm"
		say_ok "$rel: apt-get install ./${PKG_DEB##*/} in the guest tree (no download)"
	else
		# No package yet: the programs of `make install`, and their libraries' packages.
		tar -C "$tree" --keep-directory-symlink -xf "$PKG_STAGE" || return 1
		local miss
		# shellcheck disable=SC2086
		miss=$(in_root "$tree" sh -c 'for p; do dpkg-query -W -f="\${Status}" "$p" 2>/dev/null |
			grep -q "install ok installed" || echo "$p"; done' sh $PKG_DEPS)
		if [ -n "$miss" ]; then
			out "# $rel: fetching libraries the base lacks: $miss"
			# shellcheck disable=SC2086
			in_root "$tree" sh -c 'apt-get update -qq && apt-get install -y -qq "$@"' sh $miss \
				>"$rundir/apt.log" 2>&1 || {
				say_not_ok "$rel: libraries of the staged install" "$(tail -n 20 "$rundir/apt.log")"
				return 1
			}
		fi
		out "# $rel: staged install (make install DESTDIR=), no package yet"
	fi
	rm -f "$tree/usr/sbin/policy-rc.d"

	# OpenCode, at the path ocsb expects, root's as on the host.
	mkdir -p "$tree$(dirname "$OC_PREFIX")"
	cp -a "$OC_PREFIX" "$tree$OC_PREFIX" || return 1

	# The scenario and its unit: after multi-user, TAP to ttyS1, then power-off.
	install -d "$tree/usr/local/lib/ocsb-vm"
	install -m 0755 "$VM_DIR/scenario.sh" "$VM_DIR/probe.sh" "$VM_DIR/far.sh" "$tree/usr/local/lib/ocsb-vm/"
	# The escape battery and its runner for a provisioned machine.
	install -d "$tree/usr/local/lib/ocsb-vm/escape"
	install -m 0644 "$REPO"/tests/escape/battery.sh "$REPO"/tests/escape/probes.sh \
		"$REPO"/tests/escape/world.sh "$REPO"/tests/escape/report.sh \
		"$REPO"/tests/escape/run-here.sh "$REPO"/tests/escape/tap.sh \
		"$tree/usr/local/lib/ocsb-vm/escape/"
	# The boot probes, installed by the scenario itself before its reboots.
	install -m 0644 "$VM_DIR"/ocsb-vm-far.service "$VM_DIR"/ocsb-vm-probe-*.service \
		"$tree/usr/local/lib/ocsb-vm/"
	install -m 0644 "$VM_DIR/ocsb-vm-scenario.service" "$tree/etc/systemd/system/"
	ln -sf ../ocsb-vm-scenario.service \
		"$tree/etc/systemd/system/multi-user.target.wants/ocsb-vm-scenario.service"
	echo "$rel" >"$tree/usr/local/lib/ocsb-vm/release"

	# A plain machine: its name, loopback names, the root file system, no login prompt on
	# the console, no first-boot questions.
	echo "ocsb-$rel" >"$tree/etc/hostname"
	printf '127.0.0.1 localhost\n127.0.1.1 ocsb-%s\n::1 localhost ip6-localhost\n' "$rel" \
		>"$tree/etc/hosts"
	echo '/dev/vda / ext4 rw,errors=remount-ro 0 1' >"$tree/etc/fstab"
	ln -sf /dev/null "$tree/etc/systemd/system/serial-getty@ttyS0.service"
	ln -sf /dev/null "$tree/etc/systemd/system/getty@tty1.service"
	: >"$tree/etc/machine-id"
	TREE_TIME=$(elapsed "$t0")
	out "# $rel: guest tree ready in $TREE_TIME s"
}
