# SPDX-License-Identifier: MIT
# `ocsb doctor --fix` as root takes go-rwx off the owner's readable secrets (issue 14 item
# 2). The names are the owner's to change between the scan and the fix: a link swapped in
# at that moment must never make root chmod its target. The test hook (OCSB_TEST_HOOKS=1,
# <run>/ocsb/test-doctor-pause) holds --fix after the scan so the swap is deterministic.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

DOC=$OCSB_BUILD/ocsb
PAUSE=/run/ocsb/test-doctor-pause
PAUSED=/run/ocsb/test-doctor-paused
make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision || exit 1
chmod 0755 "$OWNER_HOME"
# Root's files a swapped link could point at: readable, so the mode change would show.
mkdir -p /etc/ocsb-t96/dir
echo root-target >/etc/ocsb-t96/target && chmod 0644 /etc/ocsb-t96/target
echo root-dir >/etc/ocsb-t96/dir/credentials && chmod 0644 /etc/ocsb-t96/dir/credentials

lax() { as_owner bash -c 'umask 022; echo "machine x" >~/.netrc; mkdir -p ~/.aws && echo key >~/.aws/credentials && chmod 0644 ~/.netrc ~/.aws/credentials'; }

# --- control: nothing swapped, the files are fixed
lax
check_output "control: doctor --fix (root) fixes ~/.netrc" \
	"^OK +owner-file +$OWNER_HOME/.netrc was readable by every account \(0644\): fixed" bash -c "$DOC doctor --fix; true"
check_output "control: ~/.netrc is 0600 now" '^600$' stat -c %a "$OWNER_HOME/.netrc"
check_output "control: ~/.aws/credentials is 0600 now" '^600$' stat -c %a "$OWNER_HOME/.aws/credentials"

# --- the owner swaps a link in while --fix holds between its scan and its fix. One lax file
# per run: the hook holds before the first fix, and the swap must hit the file being fixed.
mkdir -p /run/ocsb
paused_fix() { # paused_fix SWAP-COMMAND...: doctor --fix, held after its scan while the owner swaps
	rm -f "$PAUSED"
	touch "$PAUSE"
	OCSB_TEST_HOOKS=1 "$DOC" doctor --fix >"$E2E_SCRATCH/fix.out" 2>&1 &
	DOCPID=$!
	if wait_for 30 test -e "$PAUSED"; then
		pass "hook: doctor --fix held after its scan"
	else
		fail "hook: doctor --fix held after its scan" "$(cat "$E2E_SCRATCH/fix.out")"
	fi
	as_owner "$@"
	rm -f "$PAUSE"
	wait "$DOCPID"
	fixout=$(cat "$E2E_SCRATCH/fix.out")
	printf '%s\n' "$fixout" | grep owner-file | sed 's/^/# doctor --fix: /'
}

as_owner rm -rf "$OWNER_HOME/.aws"
as_owner bash -c 'echo "machine x" >~/.netrc && chmod 0644 ~/.netrc'
paused_fix ln -sfn /etc/ocsb-t96/target "$OWNER_HOME/.netrc"
check_output "a link swapped in for the file: root's target keeps 0644" '^644$' stat -c %a /etc/ocsb-t96/target
check_output "the file is named, with why it was left alone" \
	"^FAIL owner-file +$OWNER_HOME/.netrc is readable by every account \(0644\); not fixed, left alone: it was replaced by a symbolic link" \
	printf '%s\n' "$fixout"

as_owner rm -f "$OWNER_HOME/.netrc"
as_owner bash -c 'mkdir -m 0755 ~/.aws && echo key >~/.aws/credentials && chmod 0644 ~/.aws/credentials'
paused_fix bash -c "mv ~/.aws ~/.aws-old && ln -sfn /etc/ocsb-t96/dir ~/.aws"
check_output "a link swapped in for a directory on the way: root's file keeps 0644" '^644$' \
	stat -c %a /etc/ocsb-t96/dir/credentials
check_output "the directory case: named, with why" \
	"^FAIL owner-file +$OWNER_HOME/.aws/credentials is readable .*left alone: a symbolic link \(or another file\) is on its path now" \
	printf '%s\n' "$fixout"
check_output "the owner's own file behind the swap is untouched too" '^644$' stat -c %a "$OWNER_HOME/.aws-old/credentials"
check_output "positive control: root can chmod the target (so 0644 means 'not touched')" '^600$' \
	bash -c 'chmod 0600 /etc/ocsb-t96/target && stat -c %a /etc/ocsb-t96/target'

# --- doctor as the owner on a stock Debian (issue 15): at.deny is root:daemon 0640 there.
# What the owner cannot read is a WARN that names root, never a FAIL; as root it is checked.
chown root:daemon /etc/at.deny && chmod 0640 /etc/at.deny
out=$(as_owner "$DOC" doctor 2>&1)
if grep -Eq "^WARN persistence +/etc/at.deny cannot be read as $OWNER: whether it lists $AGENT needs root" <<<"$out" &&
	! grep -q '^FAIL persistence .*at.deny' <<<"$out"; then
	pass "doctor (owner): an unreadable at.deny is a WARN that says it needs root"
else
	fail "doctor (owner): an unreadable at.deny is a WARN that says it needs root" "$out"
fi
check_output "control: doctor (root) reads it: it lists $AGENT" "^OK +persistence +/etc/at.deny lists $AGENT" \
	bash -c "$DOC doctor; true"
# Machine-wide kernel settings come after ocsb's own checks, under their own heading, and
# the summary's FAIL count is ocsb's alone (this host's fs.protected_* decide what they say).
out=$(as_owner "$DOC" doctor 2>&1)
own=$(sed '/^machine-wide kernel settings/,$d' <<<"$out" | grep -c '^FAIL')
after=$(sed -n '/^machine-wide kernel settings/,$p' <<<"$out")
if ! sed '/^machine-wide kernel settings/,$d' <<<"$out" | grep -Eq '^(OK|WARN|FAIL) +sysctl ' &&
	[ "$(grep -Ec '^(OK|WARN|FAIL) +sysctl ' <<<"$after")" -eq 4 ] &&
	grep -Eq "^doctor: $own FAIL, [0-9]+ WARN, [0-9]+ checks; machine-wide: [0-9]+ FAIL, [0-9]+ WARN$" <<<"$out"; then
	pass "doctor: the four fs.protected_* settings apart, ocsb's summary counts its own $own FAIL"
else
	fail "doctor: the four fs.protected_* settings apart, ocsb's summary counts its own FAIL" "$out"
fi

# --- someone who is neither the owner nor root (issue 15): told who may, not EACCES.
useradd -m -s /bin/bash carol
chmod 0700 "$OWNER_HOME"
for cmd in "egress render" doctor; do
	check_fails_output "another user: ocsb $cmd says whose setup it is and who may run it" \
		"agent $AGENT belongs to $OWNER: run ocsb as $OWNER, or as root" as_user carol "$DOC" $cmd
done
check_output "control: the owner renders the rules" '^http_port 127.0.0.1:' as_owner "$DOC" egress render
