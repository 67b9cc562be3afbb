# SPDX-License-Identifier: MIT
# tap.sh: TAP lines for report.sh and run-here.sh (sourced). notok sets FAILED=1.
ok() { printf 'ok - %s\n' "$1"; }
notok() {
	local text
	printf 'not ok - %s\n' "$1"
	shift
	for text in "$@"; do
		[ -n "$text" ] && printf '%s\n' "$text" | head -n 40 | sed 's/^/  # /'
	done
	FAILED=1
}
skip() { printf 'ok - %s # SKIP %s\n' "$1" "$2"; }
