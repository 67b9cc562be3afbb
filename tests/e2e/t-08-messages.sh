#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t-08-messages.sh: a mistyped word or a missing argument, as a newcomer types them (issue
# 28 item 9), gets one line: the program's prefix ("ocsb: error:", "ocsb sync: error:",
# "ocsb-provision: error:"), what is wrong, the nearest valid word when there is one, and
# where the help is; exit 2, never a page of usage. Each command as the owner (the
# provisioning one as root), before anything is set up: nothing here needs it.

# shellcheck source=lib.sh
. "$E2E_LIB"

OCSB=$OCSB_BUILD/ocsb
PROV=$OCSB_BUILD/ocsb-provision

# one_line DESC REGEX cmd...: exit 2, exactly one line of output, and it matches REGEX.
one_line() {
	local desc=$1 re=$2 out rc
	shift 2
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -Eq -- "$re" <<<"$out"; then
		pass "$desc"
	else
		fail "$desc" "command: $* (exit $rc; want exit 2 and one line matching /$re/)" "$out"
	fi
}

one_line "ocsb stauts: the nearest command" \
	"^ocsb: error: unknown command 'stauts' \(did you mean 'status'\?\); see ocsb --help$" \
	as_owner "$OCSB" stauts
one_line "ocsb sync pul: the nearest subcommand" \
	"^ocsb sync: error: unknown subcommand 'pul' \(did you mean 'pull'\?\); see ocsb sync --help$" \
	as_owner "$OCSB" sync pul
one_line "ocsb secrets sett: the nearest command" \
	"^ocsb secrets: error: unknown command 'sett' \(did you mean 'set'\?\); see ocsb secrets --help$" \
	as_owner "$OCSB" secrets sett
one_line "ocsb secrets set without NAME: says a NAME is needed, with an example" \
	"^ocsb secrets: error: set needs the NAME of the secret \(ocsb secrets set NAME, e.g. ANTHROPIC_API_KEY\); see ocsb secrets --help$" \
	as_owner "$OCSB" secrets set
one_line "ocsb doctor --fx: the nearest option" \
	"^ocsb doctor: error: unknown option '--fx' \(did you mean '--fix'\?\); see ocsb --help$" \
	as_owner "$OCSB" doctor --fx
one_line "ocsb egress verfy: the nearest subcommand" \
	"^ocsb egress: error: unknown subcommand 'verfy' \(did you mean 'verify'\?\); see ocsb --help$" \
	as_owner "$OCSB" egress verfy
one_line "ocsb frobnicate: no near word, still one line" \
	"^ocsb: error: unknown command 'frobnicate'; see ocsb --help$" as_owner "$OCSB" frobnicate
one_line "ocsb-provision --ownr: the nearest option" \
	"^ocsb-provision: error: unknown option '--ownr' \(did you mean '--owner'\?\); see ocsb-provision --help$" \
	"$PROV" --ownr "$OWNER"
check_fails "  ... and nothing was set up" test -e /etc/ocsb/ocsb.conf
# Positive controls: the words spelled right are taken (help, not an error).
check_output "control: ocsb --help answers" '^Usage: ocsb COMMAND' as_owner "$OCSB" --help
check_output "control: ocsb sync --help answers" '^ +ocsb sync pull ' as_owner "$OCSB" sync --help
