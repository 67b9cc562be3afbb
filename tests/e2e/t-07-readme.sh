#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t-07-readme.sh: the README keeps its promises to a newcomer (issue 28). It fits (at most
# 250 lines), its quick start comes first and fits one screen (at most 40 lines), it keeps
# the two commands the project requires (the one that sets everything up and starts the
# agent, and `sudo make test-all`), every command of the quick start is run by the
# walk-through (tests/walkthrough/steps-*.sh: each part of a command line, split at && and
# ||, has all its words in one step), and every docs/ page it links exists. Text only.

# shellcheck source=lib.sh
. "$E2E_LIB"

REPO=$(cd "$(dirname "$E2E_LIB")/../.." && pwd)
README=$REPO/README.md
WALK=$REPO/tests/walkthrough

check_output "README.md has at most 250 lines" '^ok$' \
	bash -c '[ "$(wc -l <"$1")" -le 250 ] && echo ok || wc -l <"$1"' _ "$README"
check_output "its first section is the quick start" '^## Quick start$' \
	bash -c 'grep -m 1 "^## " "$1"' _ "$README"
check_output "the quick start fits one screen (at most 40 lines)" '^ok$' \
	awk '/^## Quick start/ { s = NR } s && NR > s && /^## / { n = NR - s; print (n <= 40 ? "ok" : n " lines"); exit }' "$README"
check_output "it keeps the command that sets everything up" \
	'^sudo make deps deb-install && sudo ocsb-provision --owner "\$USER" --project ~/code/myproject$' \
	cat "$README"
check_output "it keeps the command that runs the whole test suite" '^sudo make test-all$' cat "$README"

# The quick start's code block: one command a line, "# ..." comments dropped.
quick=$(awk '/^## Quick start/ { q = 1 } q && /^## / && !/Quick start/ { exit }
	q && /^```/ { c = !c; next } q && c' "$README" | sed -e 's/[[:space:]]*#.*$//' -e '/^$/d')
check_output "the quick start has commands (control)" 'ocsb sync pull' echo "$quick"

# covered PART: some walk-through step holds every word of PART.
STEPS=$(cat "$WALK"/steps-*.sh)
covered() {
	local - w line ok
	set -f # the words are text, not patterns
	while IFS= read -r line; do
		case $line in '#'* | '') continue ;; esac
		ok=1
		for w in $1; do
			[[ " $line " == *" $w "* ]] || { ok=; break; }
		done
		[ -n "$ok" ] && return 0
	done <<<"$STEPS"
	return 1
}
missing=
while IFS= read -r cmd; do
	while IFS= read -r part; do
		part=$(sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' <<<"$part")
		[ -n "$part" ] && ! covered "$part" && missing+="$part; "
	done < <(sed -e 's/&&/\n/g' -e 's/||/\n/g' <<<"$cmd")
done <<<"$quick"
check_output "every command of the quick start is run by the walk-through" '^none$' \
	echo "${missing:-none}"
# Positive control: a command the walk-through never runs is caught.
check_fails "a command not in the walk-through is caught (control)" covered "ocsb frobnicate --now"

bad=
for f in $(grep -o '](docs/[^)#]*' "$README" | sed 's/^](//' | sort -u); do
	[ -f "$REPO/$f" ] || bad+="$f "
done
check_output "every docs/ page the README links exists" '^none$' echo "${bad:-none}"
