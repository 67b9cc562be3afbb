#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs every Debian package that building ocsb, running it and running its tests need.
# Idempotent: when everything is present it only says so.
set -eu

PKGS="build-essential pkg-config
libssh-dev libgit2-dev libsodium-dev libnftnl-dev libmnl-dev libsecret-1-dev libcmocka-dev
openssh-server openssh-client git passwd nftables
iproute2 util-linux procps coreutils clang-format
squid curl python3"

missing=""
for p in $PKGS; do
	# dpkg-query prints "install ok installed" for a package that is really there.
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all $(echo $PKGS | wc -w) packages present"
	exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing:$missing" >&2
	echo "deps: run as root (sudo make deps) to install them" >&2
	exit 1
fi
echo "deps: installing:$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: done"
