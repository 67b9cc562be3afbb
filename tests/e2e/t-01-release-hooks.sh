# SPDX-License-Identifier: MIT
# t-01-release-hooks.sh: the test hooks (common/testhook.h) stay out of a release build. This
# tree is built again as `make TEST_HOOKS=0 all` into a scratch directory (about 20 s on 2
# cores) and tools/check-hooks.sh finds none of the hooks' strings (OCSB_TEST_*,
# OCSB_FAULT_*, the wrapper's and the fault files' names) in any of its programs. Positive
# control: the same probe finds every one of them in the test build under test
# ($OCSB_BUILD, make TEST_HOOKS=1), so a probe that sees nothing never passes. The build
# matrix makes the same check on the package's programs (tests/matrix/run.sh).
. "$E2E_LIB"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
CHECK=$SRC/tools/check-hooks.sh
REL=$E2E_SCRATCH/build-release
PROGS=(ocsb ocsb-agentd ocsb-provision ocsb-shell ocsb-inject)

if ! command -v make >/dev/null || ! command -v strings >/dev/null; then
	skip "no test hook in a release build" "make or strings (binutils) missing"
	exit 0
fi

# The positive control first: the build under test must be a test build.
check_output "control: every hook's string is in the test build's programs ($OCSB_BUILD)" \
	'^check-hooks: ocsb-agentd: [1-9]' "$CHECK" test "${PROGS[@]/#/$OCSB_BUILD/}"

# The source tree is read-only here: objects and the generated headers go to the scratch.
t0=$SECONDS
if make -C "$SRC" -s -j"$(nproc)" BUILDDIR="$REL" TEST_HOOKS=0 all >"$E2E_SCRATCH/make.log" 2>&1; then
	pass "make TEST_HOOKS=0 all into a scratch directory ($((SECONDS - t0)) s)"
else
	fail "make TEST_HOOKS=0 all into a scratch directory" "$(tail -n 20 "$E2E_SCRATCH/make.log")"
	exit 0
fi
check_output "its buildflags.h is a release build's (TEST_HOOKS=0)" 'TEST_HOOKS=0' cat "$REL/gen/buildflags.h"
check_fails "its buildflags.h does not define OCSB_TEST_BUILD" grep -q OCSB_TEST_BUILD "$REL/gen/buildflags.h"
check_output "no test hook in the release build's programs" '^check-hooks: ocsb-agentd: 0 hook strings$' \
	"$CHECK" release "${PROGS[@]/#/$REL/}"
rm -rf "$REL"
