#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tcb.sh BINARY...: the project's C compiled into each program, from the compile units its
# debug information lists (-g, the default build), and the lines of those source files,
# comments included (issue 26's measure of what runs with each program's rights). Headers
# are not counted; sources outside the tree (libraries) are not listed.
# Prints per program: "PROGRAM  LINES lines in N files", then the files, largest first.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
status=0
for bin in "$@"; do
	if ! units=$(objdump --dwarf=info "$bin" 2>/dev/null |
		awk '/DW_TAG_compile_unit/ { f = 1 } f && /DW_AT_name/ { print $NF; f = 0 }' | sort -u) ||
		[ -z "$units" ]; then
		echo "tcb: $bin: no debug information (build with -g, as make does)" >&2
		status=1
		continue
	fi
	total=0 n=0 list=""
	while read -r u; do
		[ -f "$here/$u" ] || continue
		l=$(wc -l <"$here/$u")
		total=$((total + l)) n=$((n + 1))
		list+="$l $u"$'\n'
	done <<<"$units"
	printf '%-16s %6d lines in %d files\n' "$(basename "$bin")" "$total" "$n"
	sort -rn <<<"$list" | sed '/^$/d' | awk '{ printf "    %6d  %s\n", $1, $2 }'
done
exit "$status"
