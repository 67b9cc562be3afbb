#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh BUILDDIR [NAME...]: run each libFuzzer target BUILDDIR/fuzz/fuzz_NAME
# (default: every tests/fuzz/fuzz_*.c) for FUZZ_SECONDS (default 10), seeded from
# tests/fuzz/corpus/NAME, new inputs kept in BUILDDIR/fuzz/corpus-NAME. One TAP line per
# target with its figures (runs, coverage, corpus), then "N passed, N failed".
# A target fails on a crash, leak, timeout or broken property (the input is saved as
# BUILDDIR/fuzz/NAME-crash-*: replay it with BUILDDIR/fuzz/fuzz_NAME FILE), and when it is
# missing or its seed corpus is empty.
# FUZZ_JOBS targets run at once (default: the number of CPUs), each on its own core for
# its FUZZ_SECONDS; their lines are printed in the order of the targets, each target's
# once it and those before it have ended.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: tests/fuzz/run.sh BUILDDIR [NAME...]}
shift
secs=${FUZZ_SECONDS:-10}
maxlen=${FUZZ_MAXLEN:-16384}
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) jobs=1 ;; esac
if [ $# -eq 0 ]; then
	for f in "$here"/fuzz_*.c; do
		n=${f##*/fuzz_}
		set -- "$@" "${n%.c}"
	done
fi

# fuzz_one NAME: its TAP line (and detail lines) on stdout; status 0 when it passed.
fuzz_one() {
	local name=$1 bin seeds out rc runs cov corp
	bin=$build/fuzz/fuzz_$name
	seeds=$here/corpus/$name
	if [ ! -x "$bin" ]; then
		echo "not ok - fuzz $name: $bin is missing (make fuzz-build)"
		return 1
	fi
	if [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
		echo "not ok - fuzz $name: no seed corpus in tests/fuzz/corpus/$name"
		return 1
	fi
	mkdir -p "$build/fuzz/corpus-$name"
	out=$("$bin" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$build/fuzz/$name-" \
		"$build/fuzz/corpus-$name" "$seeds" 2>&1)
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' <<<"$out")
	cov=$(grep -oE 'cov: [0-9]+' <<<"$out" | tail -n 1 | cut -d' ' -f2)
	corp=$(ls "$build/fuzz/corpus-$name" | wc -l)
	if [ "$rc" -eq 0 ]; then
		echo "ok - fuzz $name: ${runs:-?} runs in ${secs} s, coverage ${cov:-?}, corpus $corp"
		return 0
	fi
	echo "not ok - fuzz $name: exit $rc after ${runs:-?} runs"
	grep -E 'ERROR|SUMMARY|property broken|Test unit written' <<<"$out" | head -n 8 |
		sed 's/^/  # /'
	return 1
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
names=("$@")
pass=0 fail=0 next=0 running=0
# flush: print the finished targets' lines in order, up to the first one still running.
# A target's status file appears (renamed into place) only once its lines are complete.
flush() {
	while [ "$next" -lt "${#names[@]}" ] && [ -e "$tmp/$next.rc" ]; do
		cat "$tmp/$next.out"
		if [ "$(cat "$tmp/$next.rc")" = 0 ]; then
			pass=$((pass + 1))
		else
			fail=$((fail + 1))
		fi
		next=$((next + 1))
	done
}
for i in "${!names[@]}"; do
	while [ "$running" -ge "$jobs" ]; do
		wait -n
		running=$((running - 1))
		flush
	done
	{
		fuzz_one "${names[$i]}" >"$tmp/$i.out" 2>&1
		echo $? >"$tmp/$i.rc.new" && mv "$tmp/$i.rc.new" "$tmp/$i.rc"
	} &
	running=$((running + 1))
done
wait
flush
# A target that left no status (its runner could not write it) fails; the rest still count.
while [ "$next" -lt "${#names[@]}" ]; do
	echo "not ok - fuzz ${names[$next]}: no result"
	fail=$((fail + 1))
	next=$((next + 1))
	flush
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
