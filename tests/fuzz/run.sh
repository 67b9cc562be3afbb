#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/run.sh BUILDDIR [NAME...]: run each libFuzzer target BUILDDIR/fuzz/fuzz_NAME
# (default: every tests/fuzz/fuzz_*.c) for FUZZ_SECONDS (default 10), seeded from
# tests/fuzz/corpus/NAME, new inputs kept in BUILDDIR/fuzz/corpus-NAME. One TAP line per
# target with its figures (runs, coverage, corpus), then "N passed, N failed".
# A target fails on a crash, leak, timeout or broken property (the input is saved as
# BUILDDIR/fuzz/NAME-crash-*: replay it with BUILDDIR/fuzz/fuzz_NAME FILE), and when it is
# missing or its seed corpus is empty.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: tests/fuzz/run.sh BUILDDIR [NAME...]}
shift
secs=${FUZZ_SECONDS:-10}
maxlen=${FUZZ_MAXLEN:-16384}
if [ $# -eq 0 ]; then
	for f in "$here"/fuzz_*.c; do
		n=${f##*/fuzz_}
		set -- "$@" "${n%.c}"
	done
fi
pass=0 fail=0
for name in "$@"; do
	bin=$build/fuzz/fuzz_$name
	seeds=$here/corpus/$name
	if [ ! -x "$bin" ]; then
		echo "not ok - fuzz $name: $bin is missing (make fuzz-build)"
		fail=$((fail + 1))
		continue
	fi
	if [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
		echo "not ok - fuzz $name: no seed corpus in tests/fuzz/corpus/$name"
		fail=$((fail + 1))
		continue
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
		pass=$((pass + 1))
	else
		echo "not ok - fuzz $name: exit $rc after ${runs:-?} runs"
		grep -E 'ERROR|SUMMARY|property broken|Test unit written' <<<"$out" | head -n 8 |
			sed 's/^/  # /'
		fail=$((fail + 1))
	fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
