#!/bin/sh
# SPDX-License-Identifier: MIT
# opencode-lock.sh: pin OpenCode for `ocsb-provision --install-opencode`. A maintainer runs
# it (with network, as any user) after changing OCSB_OPENCODE_VERSION in common/opencode.h,
# reviews the diff of conf/opencode/ and commits it; ocsb-provision carries these files
# compiled in and installs nothing else.
#   conf/opencode/package.json        the one dependency, exact version
#   conf/opencode/package-lock.json   the whole tree npm resolves, sha512 for every package
#       that can be installed (other platforms' packages the registry does not serve are
#       listed by platform only, see below)
#   conf/opencode/manifest-linux-x64.txt  what `npm ci` of that lockfile puts on disk on
#       linux x64 (the one platform ocsb installs OpenCode for; npm records only the current
#       platform's optional packages in a lockfile): one line per entry, sorted by path,
#         d MODE - PATH | f MODE SHA256 PATH | l 0777 TARGET PATH
#       root takes over a staged tree only when it is exactly this (less npm's own
#       node_modules/.package-lock.json, which root leaves behind).
# opencode-lock.sh --manifest DIR: print the manifest of the tree DIR (used by the tests).
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
out=$here/conf/opencode

# manifest DIR: the format above, made by the same rules ocsb-provision checks by.
manifest() {
	(cd "$1" && find . -mindepth 1 -printf '%y %m %P\n' | LC_ALL=C sort -k3) |
		while read -r type mode path; do
			# npm's record of what it installed: root does not take it over.
			[ "$path" = node_modules/.package-lock.json ] && continue
			case $type in
			d) printf 'd %04o - %s\n' "0$mode" "$path" ;;
			f) printf 'f %04o %s %s\n' "0$mode" "$(sha256sum <"$1/$path" | cut -d' ' -f1)" \
				"$path" ;;
			l) printf 'l 0777 %s %s\n' "$(readlink "$1/$path")" "$path" ;;
			*) echo "opencode-lock: $1/$path: not a file, directory or link" >&2; exit 1 ;;
			esac
		done
}
if [ "${1:-}" = "--manifest" ]; then
	[ $# -eq 2 ] || { echo "usage: $0 --manifest DIR" >&2; exit 2; }
	manifest "$2"
	exit 0
fi
[ $# -eq 0 ] || { echo "usage: $0 [--manifest DIR]" >&2; exit 2; }

if [ "$(uname -s) $(uname -m)" != "Linux x86_64" ]; then
	echo "opencode-lock: run this on linux x86_64: npm locks the current platform's packages" >&2
	exit 1
fi
version=$(sed -n 's/^#define OCSB_OPENCODE_VERSION "\(.*\)"$/\1/p' "$here/common/opencode.h")
[ -n "$version" ] || { echo "opencode-lock: no OCSB_OPENCODE_VERSION in common/opencode.h" >&2; exit 1; }
tmp=$(mktemp -d /tmp/opencode-lock.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# npm's files for this run only: neither the user's ~/.npmrc nor their cache.
export npm_config_userconfig="$tmp/npmrc" npm_config_cache="$tmp/cache"
export npm_config_update_notifier=false npm_config_audit=false npm_config_fund=false
umask 022

mkdir "$tmp/lock"
printf '{\n  "name": "ocsb-opencode",\n  "private": true,\n  "dependencies": {\n    "opencode-ai": "%s"\n  }\n}\n' \
	"$version" >"$tmp/lock/package.json"
(cd "$tmp/lock" && npm install --package-lock-only --ignore-scripts --save-exact >/dev/null)
# npm writes only this platform's optional packages into a lockfile, and npm 11 then
# refuses `npm ci` of it (package.json and lockfile "not in sync"). Each other platform's
# package is added as npm records it, with the registry's integrity; one the registry does
# not serve (a mirror holding only linux x64) gets an entry without integrity, its platform
# read from its name: npm never installs it here (wrong os, cpu or libc), and root's
# manifest check below would refuse it anyway.
(cd "$tmp/lock" && node -e '
const fs = require("fs"), { execFileSync } = require("child_process");
const lock = JSON.parse(fs.readFileSync("package-lock.json", "utf8"));
const top = lock.packages["node_modules/opencode-ai"];
for (const [name, ver] of Object.entries(top.optionalDependencies || {})) {
	const key = "node_modules/" + name;
	if (lock.packages[key] && lock.packages[key].resolved) continue;
	let v = null;
	try {
		v = JSON.parse(execFileSync("npm", ["view", "--json", name + "@" + ver],
			{ stdio: ["ignore", "pipe", "ignore"] }));
	} catch (e) {
		const m = /^opencode-(darwin|linux|windows)-(x64|arm64)(-baseline)?(-musl)?$/.exec(name);
		if (!m) throw new Error(name + "@" + ver + ": not on the registry, platform unknown");
		process.stderr.write("opencode-lock: " + name + "@" + ver + " is not on this " +
			"registry: locked by platform only, never installable\n");
		const e2 = { version: ver, cpu: [m[2]], os: [m[1] === "windows" ? "win32" : m[1]] };
		if (m[4]) e2.libc = ["musl"];
		e2.optional = true;
		lock.packages[key] = e2;
		continue;
	}
	const e = { version: v.version, resolved: v.dist.tarball, integrity: v.dist.integrity };
	for (const f of ["cpu", "os", "libc"]) if (v[f]) e[f] = v[f];
	e.license = v.license;
	e.optional = true;
	const had = lock.packages[key];
	if (had && had.integrity !== e.integrity)
		throw new Error(name + ": the registry now says " + e.integrity);
	lock.packages[key] = had ? Object.assign(had, { resolved: e.resolved }) : e;
}
/* The URL too (npm leaves it out after a metadata-only resolve): with it, `npm ci` fetches
 * no package metadata and writes the same node_modules/.package-lock.json every time. */
for (const [key, e] of Object.entries(lock.packages)) {
	if (key === "" || e.resolved || !e.integrity) continue;
	const name = key.slice("node_modules/".length);
	const v = JSON.parse(execFileSync("npm", ["view", "--json", name + "@" + e.version]));
	if (v.dist.integrity !== e.integrity)
		throw new Error(name + ": the registry now says " + v.dist.integrity);
	const ordered = { version: e.version, resolved: v.dist.tarball };
	lock.packages[key] = Object.assign(ordered, e);
}
const sorted = {};
for (const k of Object.keys(lock.packages).sort()) sorted[k] = lock.packages[k];
lock.packages = sorted;
fs.writeFileSync("package-lock.json", JSON.stringify(lock, null, 2) + "\n");
')
# Every package npm may install here pinned by content, not only by name and version.
if [ "$(grep -c '"resolved": ' "$tmp/lock/package-lock.json")" != \
	"$(grep -c '"integrity": "sha512-' "$tmp/lock/package-lock.json")" ]; then
	echo "opencode-lock: a package in the lockfile has no sha512 integrity" >&2
	exit 1
fi

# The tree, as ocsb-provision's npm ci makes it (same flags).
mkdir "$tmp/x64"
cp "$tmp/lock/package.json" "$tmp/lock/package-lock.json" "$tmp/x64/"
(cd "$tmp/x64" && npm ci --ignore-scripts --no-audit --no-fund >/dev/null)
manifest "$tmp/x64" >"$tmp/manifest-linux-x64.txt"
mkdir -p "$out"
cp "$tmp/lock/package.json" "$tmp/lock/package-lock.json" "$tmp"/manifest-linux-*.txt "$out/"
echo "opencode-lock: pinned opencode-ai@$version in $out (npm $(npm --version)); review and commit"
