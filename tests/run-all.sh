#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole suite: unit tests and fuzz targets (unprivileged), the end-to-end suite (root, namespaces), the
# build matrix (root: other Debian releases in chroots, tests/matrix/run.sh), then the VM
# tier (root: Debian 12 and 13 guests with systemd under QEMU, tests/vm/run.sh; it installs
# the packages the matrix left in build/matrix/RELEASE/). The matrix's roots and the VM
# tier's images are downloaded in the background from the start (below).
# Ends with one line "N passed, N failed, N skipped" counting every check of all four.
# Usage: tests/run-all.sh UNIT_BINARY...   (OCSB_BUILD names the build directory)
set -u
here=$(cd "$(dirname "$0")" && pwd)
log=$(mktemp)
# The background job below (and every process under it: timeout(1) puts mmdebstrap in a
# process group of its own) ends with this script, however it ends.
kill_tree() { # PID: it and its descendants, the deepest first
	local c
	for c in $(pgrep -P "$1"); do kill_tree "$c"; done
	kill "$1" 2>/dev/null
}
stop_prefetch() {
	[ -n "${vm_pre_pid:-}" ] && kill -0 "$vm_pre_pid" 2>/dev/null || return 0
	kill_tree "$vm_pre_pid"
	wait "$vm_pre_pid" 2>/dev/null
}
trap 'stop_prefetch; rm -f "$log" ${vm_pre:+"$vm_pre"}' EXIT
trap 'exit 130' INT TERM

# The build matrix's roots and the VM tier's base images, when not cached, are downloads of
# minutes each (mmdebstrap): made in the background while the other tiers run, at low
# priority (CPU and I/O), and waited for before the matrix (which, like the VM tier, makes
# again any that failed, and reports that). OCSB_VM_PREFETCH=0 leaves them to their tiers.
# A runner given as OCSB_VM_RUN gets "--images" first.
vm_run=${OCSB_VM_RUN:-$here/vm/run.sh}
vm_pre=
if [ "$(id -u)" -eq 0 ] && [ "${OCSB_VM_PREFETCH:-1}" = 1 ]; then
	vm_pre=$(mktemp)
	# Each in a mount namespace of its own (they see to it): mmdebstrap's mounts of /dev,
	# /sys and /proc and their tmpfs would otherwise be copied into the namespaces the other
	# tiers make, or change the host's mounts under their checks.
	(
		nice -n 10 ionice -c 3 "$here/matrix/run.sh" --roots || exit
		nice -n 10 ionice -c 3 "$vm_run" --images bookworm trixie
	) >"$vm_pre" 2>&1 </dev/null &
	vm_pre_pid=$!
fi

echo "== unit tests"
"$here/run-unit.sh" "$@" 2>&1 | tee -a "$log"
echo "== fuzz targets (${FUZZ_SECONDS:-10} s each)"
"$here/fuzz/run.sh" "$OCSB_BUILD" 2>&1 | grep -vE '^[0-9]+ passed, [0-9]+ failed' | tee -a "$log"
echo "== escape battery runner (unprivileged)"
"$here/escape/test-battery.sh" 2>&1 | tee -a "$log"
echo "== end-to-end tests"
"$here/e2e/run.sh" 2>&1 | tee -a "$log"
if [ -n "$vm_pre" ]; then
	t_pre=$(date +%s)
	wait "$vm_pre_pid"
	grep '^#' "$vm_pre"
	echo "# waited $(($(date +%s) - t_pre)) s for the roots and images made in the background"
	rm -f "$vm_pre"
fi
echo "== build matrix"
"$here/matrix/run.sh" 2>&1 | tee -a "$log"
echo "== virtual machines"
# A guest whose kernel panicked (seen once in the trixie guest under software emulation: a
# fault in the scheduler while idle, an emulator fault, not ocsb's) is booted once more and
# only the second run counts; it says so. Its own closing line is not the suite's: only its
# ok/not ok lines count. The two releases run at once (each guest keeps about 1.3 of 2 cores
# busy under software emulation: 1,404 s for both against about 1,830 s one after the other,
# session 17); OCSB_VM_PARALLEL=0 runs them one after the other.
vm_one() { # RELEASE: its lines, without its closing count
	local rel=$1 vm_out
	vm_out=$("$vm_run" "$rel" 2>&1)
	if grep -q '^not ok' <<<"$vm_out" && grep -q 'Kernel panic' <<<"$vm_out"; then
		grep -E '^  # .*(Kernel panic|RIP:)' <<<"$vm_out" | head -n 2 | sed 's/^  #/# first boot:/'
		echo "# vm: the $rel guest's kernel panicked (an emulator fault): booting it once more"
		vm_out=$("$vm_run" "$rel" 2>&1)
	fi
	grep -vE '^[0-9]+ passed, [0-9]+ failed' <<<"$vm_out"
}
if [ "${OCSB_VM_PARALLEL:-1}" = 1 ]; then
	vm_dir=$(mktemp -d)
	for rel in bookworm trixie; do
		vm_one "$rel" >"$vm_dir/$rel" 2>&1 &
	done
	wait
	cat "$vm_dir/bookworm" "$vm_dir/trixie" | tee -a "$log"
	rm -rf "$vm_dir"
else
	for rel in bookworm trixie; do
		vm_one "$rel"
	done | tee -a "$log"
fi

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
