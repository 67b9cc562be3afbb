#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check-hooks.sh release|test BINARY...: the test hooks (common/testhook.h) by the strings
# they leave in a program: their variables (OCSB_TEST_*, OCSB_FAULT_*, OCSB_OPENCODE_PINS),
# the files they look for (test-wrap-opencode, fault-netlock, test-doctor-pause), the
# wrapper's field and function (test_wrap) and the keyring's bogus collection.
#   release: none of them in any BINARY (a release build, the package's programs); exit 1
#            when one is found, each found string printed.
#   test:    the positive control, on a test build's programs (make TEST_HOOKS=1): every
#            name above is found in one of them, so a name this list spells wrong, or a
#            hook renamed, cannot make "release" pass by looking for nothing; exit 1 when
#            one is missing.
# Exit 2 when a BINARY is missing or `strings` cannot read it. One line per binary on stdout:
#   "check-hooks: PROGRAM: N hook strings".
# A new hook gets a name under OCSB_TEST_ or OCSB_FAULT_ (then nothing here changes), or an
# entry in HOOKS.
set -u
export LC_ALL=C

# Extended regular expressions, one per hook (or family of hooks).
HOOKS=(
	'OCSB_TEST_[A-Z_]+'
	'OCSB_FAULT_[A-Z_]+'
	'OCSB_OPENCODE_PINS'
	'test-wrap-opencode'
	'test_wrap'
	'fault-netlock'
	'test-doctor-pause'
	'collection/ocsb_test_none'
)

mode=${1:-}
case $mode in release | test) shift ;; *) mode='' ;; esac
if [ -z "$mode" ] || [ $# -eq 0 ]; then
	echo "usage: $0 release|test BINARY..." >&2
	exit 2
fi
pattern=$(IFS='|'; echo "${HOOKS[*]}")
found=$(mktemp) || exit 2
trap 'rm -f "$found"' EXIT

for bin in "$@"; do
	# Read first: a missing or unreadable file must not count as "no hook in it".
	if [ ! -f "$bin" ] || ! s=$(strings -a "$bin"); then
		echo "check-hooks: $bin: cannot read it" >&2
		exit 2
	fi
	hits=$(grep -oE "$pattern" <<<"$s" | sort -u)
	echo "check-hooks: $(basename "$bin"): $(grep -c . <<<"$hits") hook strings"
	[ -n "$hits" ] && sed "s|^|$(basename "$bin")\t|" <<<"$hits" >>"$found"
done

rc=0
if [ "$mode" = release ]; then
	if [ -s "$found" ]; then
		sed 's/^/check-hooks: found in a release build: /' "$found"
		rc=1
	fi
else
	for h in "${HOOKS[@]}"; do
		if ! cut -f2 "$found" | grep -qxE "$h"; then
			echo "check-hooks: '$h' is in none of the test build's programs"
			rc=1
		fi
	done
fi
exit $rc
