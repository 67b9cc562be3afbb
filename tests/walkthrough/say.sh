#!/bin/bash
# SPDX-License-Identifier: MIT
# say.sh STEPS: run each line of STEPS (a shell command; blank lines and # comments
# skipped, "#:" lines echoed as notes) in this shell, echoing "$ command", its output and
# "[exit N]". A step's exit status never stops the walk: the transcript shows what the user
# would see next.
while IFS= read -r line; do
	case $line in
	'#:'*) echo "${line#'#:'}"; continue ;;
	'' | '#'*) continue ;;
	esac
	echo "\$ $line"
	eval "$line" </dev/null 2>&1
	echo "[exit $?]"
done <"$1"
