#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/fuzz/long-run.sh BUILDDIR CPU_MINUTES [JOBS]: the long run of every libFuzzer target
# (issue 27: one CPU-hour at least across them). CPU_MINUTES (run time, each target on a
# CPU of its own; the table gives the CPU time each really had) are shared out by each
# target's weight below (what the agent reaches and how much it parses), JOBS targets at a
# time (default: the number of CPUs). Each target starts from its seeds and the inputs
# earlier runs kept in BUILDDIR/fuzz/corpus-NAME, and adds to them.
# Prints a Markdown table (target, wall and CPU time, runs, runs/s, coverage, features, corpus,
# crashes) for docs/testing.md, then "N passed, N failed"; a crash is saved as
# BUILDDIR/fuzz/NAME-crash-* and fails its target.
set -u
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: tests/fuzz/long-run.sh BUILDDIR CPU_MINUTES [JOBS]}
minutes=${2:?usage: tests/fuzz/long-run.sh BUILDDIR CPU_MINUTES [JOBS]}
jobs=${3:-$(nproc)}
maxlen=${FUZZ_MAXLEN:-16384}

# Weights: parsers the agent feeds directly over the network or through git weigh 3, those
# fed through files or a local peer 2, the rest (root's and the owner's files) 1.
weight() {
	case $1 in
	inject* | head* | chunk* | usage* | redact | pkt* | sideband* | refadv* | review* | sync*) echo 3 ;;
	mirror* | memo* | agentd* | link* | egress* | secrets* | sealed*) echo 2 ;;
	*) echo 1 ;;
	esac
}

names=()
for f in "$here"/fuzz_*.c; do
	n=${f##*/fuzz_}
	names+=("${n%.c}")
done
total=0
for n in "${names[@]}"; do total=$((total + $(weight "$n"))); done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

run_one() {
	local n=$1 secs=$2
	local TIMEFORMAT='%U %S' rc
	mkdir -p "$build/fuzz/corpus-$n"
	# The CPU time the target really had (user + system), not the wall time asked for:
	# on a busy machine the two differ.
	{ time "$build/fuzz/fuzz_$n" -max_total_time="$secs" -max_len="$maxlen" -timeout=10 \
		-rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/fuzz/$n-" \
		"$build/fuzz/corpus-$n" "$here/corpus/$n" >"$out/$n.log" 2>&1; } 2>"$out/$n.time"
	rc=$?
	echo "$rc" >"$out/$n.rc"
	awk '{ printf "%d\n", $1 + $2 }' "$out/$n.time" >"$out/$n.secs"
}

echo "fuzz long run: ${#names[@]} targets, $minutes CPU minutes, $jobs at a time" >&2
for n in "${names[@]}"; do
	secs=$((minutes * 60 * $(weight "$n") / total))
	[ "$secs" -ge 10 ] || secs=10
	echo "$secs" >"$out/$n.wall"
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
	if [ ! -x "$build/fuzz/fuzz_$n" ]; then
		echo 127 >"$out/$n.rc"
		echo 0 >"$out/$n.secs"
		echo 0 >"$out/$n.wall"
		continue
	fi
	echo "  $n: $secs s" >&2
	run_one "$n" "$secs" &
done
wait

pass=0 fail=0 cpu=0
echo "| target | wall s | CPU s | runs | runs/s | coverage | features | corpus | crashes |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in "${names[@]}"; do
	rc=$(cat "$out/$n.rc") secs=$(cat "$out/$n.secs") wall=$(cat "$out/$n.wall")
	log=$out/$n.log
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" 2>/dev/null)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" 2>/dev/null)
	cov=$(grep -oE 'cov: [0-9]+' "$log" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
	ft=$(grep -oE 'ft: [0-9]+' "$log" 2>/dev/null | tail -n 1 | cut -d' ' -f2)
	corp=$(ls "$build/fuzz/corpus-$n" 2>/dev/null | wc -l)
	crashes=$([ "$rc" -eq 0 ] && echo 0 || echo 1)
	cpu=$((cpu + secs))
	echo "| $n | $wall | $secs | ${runs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | $corp | $crashes |"
	if [ "$rc" -eq 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		echo "not ok - fuzz $n: exit $rc" >&2
		grep -E 'ERROR|SUMMARY|property broken|Test unit written' "$log" | head -n 8 >&2
	fi
done
echo "total CPU time: $cpu s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
