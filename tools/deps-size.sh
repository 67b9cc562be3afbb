#!/bin/sh
# SPDX-License-Identifier: MIT
# deps-size.sh: the disk space `make deps` and `make test-deps` add to a fresh minimal root
# of the Debian release this machine runs (the figures in README.md and docs/install.md).
#
# Method: apt's own arithmetic, nothing downloaded or installed. The minimal root is what
# `mmdebstrap --variant=minbase` installs: the packages of priority required, the essential
# ones and apt (usr-is-merged standing for the merged /usr mmdebstrap sets up), resolved
# from this machine's package lists against an empty system. Those packages, at their
# candidate versions, make a dpkg status file; `apt-get --simulate --no-install-recommends
# install` of tools/install-deps.sh's list (and nodejs and npm, which a fresh root lacks)
# against that status names what would be added, and their Installed-Size fields are
# summed. OpenCode's tree (npm ci into /opt/ocsb/opencode, not a Debian package) is measured
# with du where it is installed.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/ocsb-deps-size.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

: >"$tmp/empty"
APT="apt-get -s -o APT::Install-Recommends=false -o Debug::NoLocking=1"

# inst STATUS PKG...: the packages apt would add, one a line.
inst() {
	st=$1
	shift
	# shellcheck disable=SC2086
	$APT -o Dir::State::status="$st" install "$@" 2>"$tmp/err" | awk '$1 == "Inst" { print $2 }' |
		sort -u || true
	if grep -q '^E:' "$tmp/err"; then
		cat "$tmp/err" >&2
		exit 1
	fi
}
# kib PKG...: the sum of their Installed-Size (KiB) at the candidate version.
kib() {
	[ "$#" -gt 0 ] || { echo 0; return; }
	apt-cache show --no-all-versions "$@" 2>/dev/null |
		awk '/^Installed-Size:/ { s += $2 } END { print s + 0 }'
}
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }'; }

base=$(apt list '?or(?priority(required),?essential)' 2>/dev/null | sed -n 's|/.*||p' | sort -u)
# shellcheck disable=SC2086
inst "$tmp/empty" $base apt usr-is-merged >"$tmp/base"
# The minimal root as a dpkg status file: each package's candidate stanza, installed.
# shellcheck disable=SC2046
apt-cache show --no-all-versions $(cat "$tmp/base") |
	awk '/^Package:/ { print; print "Status: install ok installed"; next } { print }' \
		>"$tmp/status"

# shellcheck disable=SC2046
inst "$tmp/status" $("$here/tools/install-deps.sh" --list) nodejs npm >"$tmp/deps"
# shellcheck disable=SC2046
inst "$tmp/status" $("$here/tools/install-deps.sh" --list --test) nodejs npm >"$tmp/all"
comm -13 "$tmp/deps" "$tmp/all" >"$tmp/test"
# shellcheck disable=SC2046
inst "$tmp/status" $("$here/tools/install-deps.sh" --list) >"$tmp/nonode"
comm -13 "$tmp/nonode" "$tmp/deps" >"$tmp/node"

# shellcheck disable=SC2046
d=$(kib $(cat "$tmp/deps"))
# shellcheck disable=SC2046
t=$(kib $(cat "$tmp/test"))
. /etc/os-release
echo "minimal root ($PRETTY_NAME, as mmdebstrap --variant=minbase): $(wc -l <"$tmp/base") packages, $(mb "$(kib $(cat "$tmp/base"))") MB"
# shellcheck disable=SC2046
echo "make deps:      $(wc -l <"$tmp/deps") packages, $(mb "$d") MB ($(wc -l <"$tmp/node") packages, $(mb "$(kib $(cat "$tmp/node"))") MB of them for Debian's Node.js and npm)"
echo "make test-deps: $(wc -l <"$tmp/test") packages more, $(mb "$t") MB (both: $(mb $((d + t))) MB)"
oc=$(sed -n 's/^#define OCSB_OPENCODE_PREFIX "\(.*\)"$/\1/p' "$here/common/opencode.h")
if [ -d "$oc" ]; then
	echo "OpenCode in $oc (make deps, not a Debian package): $(mb "$(du -sk "$oc" | cut -f1)") MB"
fi
if [ -n "${DEPS_SIZE_LIST:-}" ]; then
	echo "--- deps:" && tr '\n' ' ' <"$tmp/deps" && echo
	echo "--- test-deps:" && tr '\n' ' ' <"$tmp/test" && echo
fi
