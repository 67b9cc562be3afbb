#!/bin/sh
# SPDX-License-Identifier: MIT
# Run the unit test binaries and sum them up:  tests/run-unit.sh build/tests/test_*
#
# Each binary prints TAP (cmocka, CMOCKA_MESSAGE_OUTPUT=TAP); every line is passed
# through and the last line is "unit: N passed, N failed, N skipped". A binary that
# crashes, stops early or prints no plan counts as one failure, named.
# Started as root, the binaries run as nobody (65534) from a copy in a temp dir:
# unit tests must prove they need no privilege. Exit 1 on any failure.
# Every binary gets an environment built from nothing: its own empty HOME (the caller's may
# be one that nobody cannot enter: /root is 0700 on stock Debian), its own TMPDIR, the C
# locale and a fixed PATH, so a result never depends on the machine's HOME, locale or
# dotfiles. Only the sanitizers' *_OPTIONS pass through.
set -u

if [ $# -eq 0 ]; then
	echo "usage: $0 TEST-BINARY..." >&2
	exit 2
fi

NOBODY=65534
LIMIT=${UNIT_TIMEOUT:-300} # seconds per binary
ROOT=0
[ "$(id -u)" -eq 0 ] && ROOT=1

if [ $ROOT = 1 ]; then
	# Not under root's TMPDIR, which nobody may not be able to reach.
	work=$(mktemp -d /tmp/ocsb-unit-run.XXXXXX) || exit 1
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/ocsb-unit-run.XXXXXX") || exit 1
fi
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
# bin: copies of the binaries, readable by nobody; tmp: the tests' TMPDIR; home: their HOME.
chmod 0755 "$work" && mkdir "$work/bin" "$work/tmp" "$work/home" &&
	chmod 1777 "$work/tmp" || exit 1
if [ $ROOT = 1 ]; then
	chown $NOBODY:$NOBODY "$work/home" || exit 1
fi

# The environment of one test binary (see the top).
testenv() {
	env -i HOME="$work/home" TMPDIR="$work/tmp" PATH=/usr/sbin:/usr/bin:/sbin:/bin \
		LC_ALL=C CMOCKA_MESSAGE_OUTPUT=TAP \
		${ASAN_OPTIONS+ASAN_OPTIONS="$ASAN_OPTIONS"} \
		${UBSAN_OPTIONS+UBSAN_OPTIONS="$UBSAN_OPTIONS"} \
		${LSAN_OPTIONS+LSAN_OPTIONS="$LSAN_OPTIONS"} "$@"
}

# One binary's TAP as "plan results passed failed skipped" (plan -1: none printed).
tally() {
	awk '
	/^1\.\.[0-9]+/ { plan = substr($1, 4) + 0; has_plan = 1; next }
	/^(not )?ok [0-9]+/ {
		n++
		if ($0 ~ /# [Ss][Kk][Ii][Pp]/) s++ # cmocka 1.1.5 prints "not ok N # SKIP"
		else if ($1 == "ok") p++
		else f++
	}
	END { printf "%d %d %d %d %d\n", has_plan ? plan : -1, n, p, f, s }
	' "$1"
}

passed=0
failed=0
skipped=0
for bin in "$@"; do
	name=$(basename "$bin")
	out="$work/$name.out"
	err="$work/$name.err"
	echo "# $name"
	if [ ! -f "$bin" ] || [ ! -x "$bin" ]; then
		echo "not ok - $name: not an executable file"
		failed=$((failed + 1))
		continue
	fi
	if [ $ROOT = 1 ] && [ "${name#test_priv}" != "$name" ]; then
		# Privilege tests need root; everything else must not.
		testenv timeout -k 10 "$LIMIT" "$bin" >"$out" 2>"$err"
	elif [ $ROOT = 1 ]; then
		cp "$bin" "$work/bin/$name" && chmod 0755 "$work/bin/$name" || exit 1
		(cd "$work/tmp" && testenv timeout -k 10 "$LIMIT" setpriv --reuid=$NOBODY \
			--regid=$NOBODY --clear-groups -- "$work/bin/$name") >"$out" 2>"$err"
	else
		testenv timeout -k 10 "$LIMIT" "$bin" >"$out" 2>"$err"
	fi
	rc=$?
	cat "$out"
	# Diagnostics (cmocka's failure messages, sanitizers) follow, as TAP comments.
	sed 's/^/# /' "$err"
	read -r plan results p f s <<-EOF
	$(tally "$out")
	EOF
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	why=
	if [ "$rc" -eq 124 ]; then
		why="timed out after $LIMIT s"
	elif [ "$rc" -gt 128 ]; then
		why="killed by signal $((rc - 128))"
	elif [ "$plan" -lt 0 ]; then
		why="no TAP plan (exit status $rc)"
	elif [ "$results" -lt "$plan" ]; then
		why="stopped after $results of $plan tests (exit status $rc)"
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		why="exit status $rc although no test failed (sanitizer report?)"
	fi
	if [ -n "$why" ]; then
		echo "not ok - $name: $why"
		failed=$((failed + 1))
	fi
done

echo "unit: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
