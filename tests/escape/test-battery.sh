#!/bin/bash
# SPDX-License-Identifier: MIT
#
# test-battery.sh: the escape battery's runner judged on its own, unprivileged, in seconds
# (no world, no agent: one probe against a canary file made here). A probe that crashes,
# hangs, lacks a tool, or fails for a reason nobody declared must come out "error" (a
# failure), never "blocked"; and a canary that was never planted (ENOENT where EACCES is
# the protection) must not pass either. report.sh must count an error as "not ok".
#
#   tests/escape/test-battery.sh      TAP lines, exit 0 when every check passed
#
# As root it re-runs itself as nobody from a copy under /tmp (root reads every file, so
# the refusal it checks could not happen).

set -u
export LC_ALL=C
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

if [ "$(id -u)" -eq 0 ]; then
	copy=$(mktemp -d /tmp/ocsb-esc-test.XXXXXX) || exit 1
	cp "$SRC"/battery.sh "$SRC"/probes.sh "$SRC"/report.sh "$SRC"/tap.sh "$SRC"/test-battery.sh "$copy/" &&
		chmod 0755 "$copy" && chmod 0644 "$copy"/*.sh
	setpriv --reuid=65534 --regid=65534 --clear-groups --reset-env env -C / bash "$copy/test-battery.sh"
	rc=$?
	rm -rf "$copy"
	exit $rc
fi

T=$(mktemp -d /tmp/ocsb-esc-test.XXXXXX) || exit 1
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT
FAILED=0
ok() { printf 'ok - %s\n' "$1"; }
notok() {
	printf 'not ok - %s\n' "$1"
	shift
	[ $# -gt 0 ] && printf '%s\n' "$@" | sed 's/^/  # /'
	FAILED=1
}

mkdir -p "$T/esc" "$T/owner" "$T/empty"
cp "$SRC/battery.sh" "$SRC/probes.sh" "$T/esc/"
MARK=m$RANDOM$RANDOM
echo "secret $MARK" >"$T/owner/secret.txt"
world() { # world OWNER_HOME: canaries.env naming that home
	printf 'C_OWNER_HOME=%s\nC_MARK=%s\nC_OWNER=%s\n' "$1" "$MARK" "$(id -un)" >"$T/esc/canaries.env"
}
# verdict ID [ENV...]: the runner's line for probe ID, "verdict<TAB>detail".
verdict() {
	local id=$1
	shift
	env ESC_DIR="$T/esc" "$@" bash "$T/esc/battery.sh" run unit | awk -F'\t' -v id="$id" '$1 == "V" && $2 == id { print $3 "\t" $4 }'
}
expect() { # expect DESC WANT-VERDICT DETAIL-REGEX GOT
	local v=${4%%$'\t'*} d=${4#*$'\t'}
	if [ "$v" = "$2" ] && grep -Eq -- "$3" <<<"$d"; then
		ok "$1: $v ($d)"
	else
		notok "$1" "want $2 with detail /$3/, got: $4"
	fi
}
# One probe only: ESC_ONLY cuts the table down to it.
export ESC_ONLY=f-secret-0600
n=$(ESC_DIR=$T/esc bash "$T/esc/battery.sh" list | wc -l)
[ "$n" -eq 1 ] || notok "ESC_ONLY leaves one probe in the table" "$(ESC_DIR=$T/esc bash "$T/esc/battery.sh" list)"

world "$T/owner"
chmod 0000 "$T/owner/secret.txt"
expect "a refused read (EACCES, declared) is blocked" blocked '^EACCES ' "$(verdict f-secret-0600)"
expect "ESC_BREAK=signal: a crash is an error" error 'SIGSEGV' "$(verdict f-secret-0600 ESC_BREAK=f-secret-0600)"
expect "ESC_BREAK=missing: a missing tool is an error" error 'exit 127' "$(verdict f-secret-0600 ESC_BREAK=f-secret-0600:missing)"
expect "ESC_BREAK=hang: a time-out is an error" error 'timed out' "$(verdict f-secret-0600 ESC_BREAK=f-secret-0600:hang PROBE_TIMEOUT=2)"
expect "ESC_BREAK=reason: an undeclared reason is an error" error 'undeclared reason: EBOGUS' "$(verdict f-secret-0600 ESC_BREAK=f-secret-0600:reason)"
expect "ESC_BREAK=silent: status 10 without a BLOCKED line is an error" error 'without a BLOCKED line' "$(verdict f-secret-0600 ESC_BREAK=f-secret-0600:silent)"
expect "ESC_BREAK=fail: a plain failure is an error" error '^exit 1 ' "$(verdict f-secret-0600 ESC_BREAK=f-secret-0600:fail)"
expect "ESC_BREAK names another probe: this one runs normally" blocked '^EACCES ' "$(verdict f-secret-0600 ESC_BREAK=f-ssh-key)"
world "$T/empty"
expect "a canary that was never planted (ENOENT) is an error, not blocked" error 'undeclared reason: ENOENT' "$(verdict f-secret-0600)"
world "$T/owner"
chmod 0644 "$T/owner/secret.txt"
expect "a readable canary is open" open 'read ' "$(verdict f-secret-0600)"
chmod 0000 "$T/owner/secret.txt"

# The report: an error is "not ok" and counted as failed; a blocked probe is "ok".
ESC_DIR=$T/esc bash "$T/esc/battery.sh" control >"$T/esc/control.out"
printf 'C\tf-secret-0600\tok\n' >"$T/esc/control.out"	# the owner's read (not testable here)
ESC_DIR=$T/esc ESC_BREAK=f-secret-0600 bash "$T/esc/battery.sh" run agentd | grep $'^V\t' >"$T/esc/agentd.out"
ESC_DIR=$T/esc bash "$T/esc/battery.sh" run ssh | grep $'^V\t' >"$T/esc/ssh.out"
out=$(ESC_DIR=$T/esc bash "$SRC/report.sh" "$T/esc" agentd ssh)
rc=$?
if [ $rc -eq 1 ] && grep -q '^not ok - .*f-secret-0600.*@agentd: error' <<<"$out" &&
	grep -q '^ok - .*f-secret-0600.*@ssh: blocked' <<<"$out" &&
	grep -q '^# escape battery: 1 probes x 2 places: 1 passed, 1 failed, 0 skipped' <<<"$out"; then
	ok "report.sh: the crashed place is not ok, the other ok, exit 1"
else
	notok "report.sh: the crashed place is not ok, the other ok, exit 1" "exit $rc" "$out"
fi

exit $FAILED
