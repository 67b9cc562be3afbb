# SPDX-License-Identifier: MIT
# Text that comes from the agent reaches root's terminal escaped (issue 14 item 3): here
# git's error about the agent's clone, whose .git file names a directory with an ESC, a
# CSI in UTF-8 (U+009B) and a raw 8-bit CSI byte. git turns the ESC into '?' itself, not
# the others; ocsb-provision's log line must show every one as \xHH.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision || exit 1
AREPO=$(getent passwd "$AGENT" | cut -d: -f6)/shop
as_user "$AGENT" mv "$AREPO/.git" "$AREPO/.git-old"
as_user "$AGENT" bash -c "printf 'gitdir: /nonexistent/E\033[31mSC-\302\23331mC1-\23331mRAW\n' >'$AREPO/.git'"
_capture provision
out=$_out
printf '%s\n' "$out" | grep -a nonexistent | cat -v | sed 's/^/# provision: /'
if [ "$_rc" -ne 0 ] && grep -aq 'nonexistent/E' <<<"$out"; then
	pass "positive control: provisioning fails and logs git's message about the agent's clone"
else
	fail "positive control: provisioning fails and logs git's message about the agent's clone" "$(cat -v <<<"$out")"
fi
if LC_ALL=C grep -aq $'[\001-\010\013-\037\177\233]' <<<"$out"; then
	fail "no raw ESC, other C0, DEL or CSI byte reaches root's terminal" "$(cat -v <<<"$out")"
else
	pass "no raw ESC, other C0, DEL or CSI byte reaches root's terminal"
fi
check_output "the UTF-8 CSI and the raw CSI byte are shown escaped" \
	'nonexistent/E.\[31mSC-\\xc2\\x9b31mC1-\\x9b31mRAW' printf '%s\n' "$out"
