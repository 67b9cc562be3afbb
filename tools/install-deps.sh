#!/bin/sh
# SPDX-License-Identifier: MIT
# install-deps.sh [--test] [--list]
#   (no option)  what building ocsb and its Debian package (make deb) and running it need
#                (`make deps`), and the pinned OpenCode release that ocsb-agentd runs;
#   --test       and what the test tiers add: unit tests, fuzz targets, format check,
#                end-to-end, build matrix, VM tier (`make test-deps`, which `make test-all`
#                runs);
#   --list       print the package names instead (one a line; tools/deps-size.sh).
# Idempotent: when everything is present it only says so.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
test=
list=
for a in "$@"; do
	case $a in
	--test) test=1 ;;
	--list) list=1 ;;
	*) echo "install-deps.sh: unknown option '$a' (--test, --list)" >&2; exit 2 ;;
	esac
done
what=deps
[ -z "$test" ] || what=test-deps

# Build: the compiler, pkg-config and the -dev packages the Makefile's pkg-config names;
# debhelper, dpkg-dev and fakeroot for `make deb`. Run: what the package depends on
# (debian/control) and ca-certificates (ocsb-inject verifies its upstreams against the
# system's CAs; npm reaches its registry over TLS).
PKGS="build-essential pkg-config
libssh-dev libgit2-dev libsodium-dev libnftnl-dev libmnl-dev libsecret-1-dev libssl-dev libseccomp-dev
debhelper dpkg-dev fakeroot
openssh-server openssh-client git passwd nftables squid curl libpam-modules mount procps
ca-certificates"

# Only the tests use these: cmocka (unit), clang and its libFuzzer runtime (fuzz targets),
# clang-format (make format-check), lintian (make deb's check, the build matrix),
# python3 and openssl (the end-to-end tests' fake servers and certificates), a real keyring
# on a session bus (ocsb secrets end to end; dbus-x11 is the session bus gnome-keyring asks
# for, where apt would otherwise pick dbus-user-session and systemd's user session with it), at and cron (the escape battery's persistence
# probes), iproute2 and util-linux (the harness's namespaces), mmdebstrap (build matrix, VM
# images), QEMU and e2fsprogs (VM tier), ansible-core (the Ansible role's end-to-end test,
# t-35, and the VM tier's run of it over ssh; ansible-lint below).
TEST_PKGS="libcmocka-dev clang clang-format lintian
python3 openssl dbus dbus-x11 gnome-keyring libsecret-tools at cron iproute2 util-linux
mmdebstrap qemu-system-x86 qemu-utils e2fsprogs ansible-core"

if [ -n "$test" ]; then
	# libFuzzer's runtime is only recommended by clang; where it is a package of its own
	# (Debian 12 and later: libclang-rt-N-dev), name it.
	clang_ver=$(apt-cache depends clang 2>/dev/null | sed -n 's/^ *Depends: clang-\([0-9][0-9]*\)$/\1/p' | head -n 1)
	if [ -n "$clang_ver" ] && apt-cache show "libclang-rt-$clang_ver-dev" >/dev/null 2>&1; then
		TEST_PKGS="$TEST_PKGS libclang-rt-$clang_ver-dev"
	fi
	# ansible-lint checks the Ansible role (t-35), which skips that check where a release
	# has no such package (Debian 12 has it).
	if apt-cache show ansible-lint >/dev/null 2>&1; then
		TEST_PKGS="$TEST_PKGS ansible-lint"
	fi
	PKGS="$PKGS $TEST_PKGS"
fi
if [ -n "$list" ]; then
	printf '%s\n' $PKGS
	exit 0
fi

# OpenCode: the version and the prefix are written once, in common/opencode.h.
hdr() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$here/common/opencode.h"; }
OC_VERSION=$(hdr OCSB_OPENCODE_VERSION)
OC_PREFIX=$(hdr OCSB_OPENCODE_PREFIX)
OC_BIN=$OC_PREFIX/$(hdr OCSB_OPENCODE_BIN_REL)
if [ -z "$OC_VERSION" ] || [ -z "$OC_PREFIX" ] || [ "$OC_BIN" = "$OC_PREFIX/" ]; then
	echo "$what: cannot read the OpenCode version from common/opencode.h" >&2
	exit 1
fi

missing=""
for p in $PKGS; do
	# dpkg-query prints "install ok installed" for a package that is really there.
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing="$missing $p"
done
# Node.js and npm install OpenCode. Any node/npm on PATH will do (NodeSource's nodejs
# carries its own npm and conflicts with Debian's npm package): add only what is absent.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"

# The pinned OpenCode: root's from the prefix down and exactly the tree the repository pins
# (conf/opencode/manifest-linux-x64.txt, compared by the script that made it); anything else
# is reinstalled, not trusted. The binary itself is not run as root here.
oc_ok() {
	[ -x "$OC_BIN" ] || return 1
	[ -z "$(find "$OC_PREFIX" ! -type l \( ! -user root -o -perm /022 \) -print -quit)" ] ||
		return 1
	"$here/tools/opencode-lock.sh" --manifest "$OC_PREFIX" 2>/dev/null |
		cmp -s - "$here/conf/opencode/manifest-linux-x64.txt"
}
oc_missing=
oc_ok || oc_missing=1

if [ -z "$missing" ] && [ -z "$oc_missing" ]; then
	echo "$what: all $(echo $PKGS | wc -w) packages, Node.js, npm and OpenCode $OC_VERSION present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	[ -n "$missing" ] && echo "$what: missing:$missing" >&2
	[ -n "$oc_missing" ] && echo "$what: missing: OpenCode $OC_VERSION in $OC_PREFIX" >&2
	echo "$what: run as root (sudo make $what) to install them" >&2
	exit 1
fi
if [ -n "$missing" ]; then
	echo "$what: installing:$missing"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	# shellcheck disable=SC2086
	apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ -n "$oc_missing" ]; then
	# Exactly what `ocsb-provision --install-opencode` does, because it is that code (npm ci
	# of conf/opencode/'s lockfile as the ocsb-npm account, root's copy checked against the
	# manifest): a throw-away build (not the tree's build dir, whose flags `make test-all`
	# chooses).
	echo "$what: installing OpenCode $OC_VERSION into $OC_PREFIX"
	tmp=$(mktemp -d /tmp/ocsb-deps.XXXXXX)
	trap 'rm -rf "$tmp"' EXIT
	if ! make -C "$here" --no-print-directory -j"$(nproc)" BUILDDIR="$tmp/build" \
		"$tmp/build/ocsb-provision" >"$tmp/build.log" 2>&1; then
		tail -n 30 "$tmp/build.log" >&2
		echo "$what: building ocsb-provision to install OpenCode failed" >&2
		exit 1
	fi
	"$tmp/build/ocsb-provision" --install-opencode
fi
echo "$what: done"
