#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t-05-stock.sh: the suite passes on a stock machine, not only on the one it was written
# on. On stock Debian /root is 0700, so an unprivileged test binary that inherits
# HOME=/root cannot read root's dotfiles: libgit2 then failed every tree diff with EACCES
# (7 failures in test_sync), which a traversable /root had hidden. Here /root is made
# stock (0700, a .gitconfig only root can read) and the unit runner is run the way
# `sudo make test` runs it.

# shellcheck source=lib.sh
. "$E2E_LIB"

RUN_UNIT=$(cd "$(dirname "$E2E_LIB")/.." && pwd)/run-unit.sh
NOBODY=65534

# /root is an overlay here (t-00): changing it changes nothing on the host.
chmod 0700 /root
printf '[user]\n\tname = root\n' >/root/.gitconfig
chmod 0600 /root/.gitconfig
mkdir -p /root/.config/git && printf '[core]\n\tbare = false\n' >/root/.config/git/config
check_output "/root is 0700 inside (stock Debian)" '^700$' stat -c %a /root
# Control: the setting bites. nobody with HOME=/root cannot read the global config.
check "root reads /root/.gitconfig (control)" test -r /root/.gitconfig
check_fails "nobody cannot read /root/.gitconfig (the stock setting bites)" \
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups -- test -r /root/.gitconfig

bins=()
for t in test_sync test_config test_doctor; do
	[ -x "$OCSB_BUILD/tests/$t" ] && bins+=("$OCSB_BUILD/tests/$t")
done
if [ "${#bins[@]}" -eq 0 ]; then
	skip "unit runner with HOME=/root and /root 0700" \
		"no unit test binaries in $OCSB_BUILD/tests (run: make test)"
else
	out=$(HOME=/root LANG=de_DE.UTF-8 LC_ALL= "$RUN_UNIT" "${bins[@]}" 2>&1)
	rc=$?
	summary=$(tail -n 1 <<<"$out")
	if [ $rc -eq 0 ] && [[ $summary =~ ^unit:\ ([0-9]+)\ passed,\ 0\ failed ]] &&
		[ "${BASH_REMATCH[1]}" -gt 0 ]; then
		pass "unit runner with HOME=/root and /root 0700: $summary"
	else
		fail "unit runner with HOME=/root and /root 0700 (exit $rc): $summary" \
			"$(grep -E '^not ok|^# ' <<<"$out" | head -n 30)"
	fi
fi
