#!/bin/bash
# SPDX-License-Identifier: MIT
# say.sh STEPS: run each line of STEPS (a shell command; blank lines and # comments
# skipped, "#:" lines echoed as notes) in this shell, echoing "$ command", its output and
# "[exit N, S s]" (S: the step's wall time in seconds). A step's exit status never stops the
# walk: the transcript shows what the user would see next.
while IFS= read -r line; do
	case $line in
	'#:'*) echo "${line#'#:'}"; continue ;;
	'' | '#'*) continue ;;
	esac
	echo "\$ $line"
	t0=$(date +%s%N)
	eval "$line" </dev/null 2>&1
	rc=$?
	t1=$(date +%s%N)
	echo "[exit $rc, $(((t1 - t0) / 1000000000)).$((((t1 - t0) / 100000000) % 10)) s]"
done <"$1"
