#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole suite: unit tests (unprivileged), the end-to-end suite (root, namespaces), the
# build matrix (root: other Debian releases in chroots, tests/matrix/run.sh), then the VM
# tier (root: Debian 12 and 13 guests with systemd under QEMU, tests/vm/run.sh; it installs
# the packages the matrix left in build/matrix/RELEASE/).
# Ends with one line "N passed, N failed, N skipped" counting every check of all four.
# Usage: tests/run-all.sh UNIT_BINARY...   (OCSB_BUILD names the build directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "== unit tests"
"$here/run-unit.sh" "$@" 2>&1 | tee -a "$log"
echo "== end-to-end tests"
"$here/e2e/run.sh" 2>&1 | tee -a "$log"
echo "== build matrix"
"$here/matrix/run.sh" 2>&1 | tee -a "$log"
echo "== virtual machines"
# Its own closing line is not the suite's: only its ok/not ok lines count.
"$here/vm/run.sh" 2>&1 | grep -vE '^[0-9]+ passed, [0-9]+ failed' | tee -a "$log"

# TAP lines of the runners: "ok N - d", "ok - d", "not ok ...". A skip is marked
# "# SKIP" (cmocka 1.1.5 prints skips as "not ok N # SKIP").
results=$(grep -E '^(not )?ok( [0-9]+)?( |$)' "$log")
skips=$(grep -iE '# skip' <<<"$results")
passed=$(grep -viE '# skip' <<<"$results" | grep -c '^ok')
notok=$(grep -viE '# skip' <<<"$results" | grep -c '^not ok')
skipped=$(grep -c . <<<"$skips")
if [ "$skipped" -gt 0 ]; then
	echo "skipped:"
	sed 's/^/  /' <<<"$skips"
fi
echo "$passed passed, $notok failed, $skipped skipped"
[ "$notok" -eq 0 ] && [ "$passed" -gt 0 ]
