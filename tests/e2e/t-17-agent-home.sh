# SPDX-License-Identifier: MIT
# Nothing the agent does in its own home stops ocsb-provision (issue 15): each place
# provisioning keeps there (~/.bashrc with the secrets hook, the clone ~/shop), replaced by
# a link, a FIFO, a directory or file of the wrong kind, or a 0000 one, is skipped with a
# warning naming it; every other step still runs (a removed pam_namespace file, written by
# the last step, comes back as the control), nothing is followed, and the exit is 0.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
check_output "provisioning" '^ocsb-provision: [1-9]' provision
H=/home/$AGENT
ns=/etc/security/namespace.d/ocsb-$AGENT.conf
check "positive control: the pam_namespace file exists" test -f "$ns"
as_owner sh -c "echo owner-only > '$OWNER_HOME/target.txt'; chmod 600 '$OWNER_HOME/target.txt'"
before=$(sha256sum "$OWNER_HOME/target.txt" /etc/passwd)

# break PLACE KIND: as the agent, put KIND where PLACE was (its own home, its own rights).
break_place() {
	local place=$1 kind=$2
	as_user "$AGENT" rm -rf "$H/$place"
	case $kind in
	link) as_user "$AGENT" ln -s "$OWNER_HOME/target.txt" "$H/$place" ;;
	fifo) as_user "$AGENT" mkfifo "$H/$place" ;;
	other) if [ "$place" = .bashrc ]; then as_user "$AGENT" mkdir "$H/$place"; else as_user "$AGENT" touch "$H/$place"; fi ;;
	0000) if [ "$place" = .bashrc ]; then as_user "$AGENT" touch "$H/$place"; else as_user "$AGENT" mkdir "$H/$place"; fi
		as_user "$AGENT" chmod 0000 "$H/$place" ;;
	esac
}

for place in .bashrc shop; do
	for kind in link fifo other 0000; do
		break_place "$place" "$kind"
		rm -f "$ns"
		out=$(timeout 120 "$OCSB_BUILD/ocsb-provision" --owner "$OWNER" --project "$PROJECT" 2>&1)
		rc=$?
		if [ $rc -eq 0 ] && grep -q "warning: skipped: ~$AGENT/$place " <<<"$out" &&
			grep -q '^ocsb-provision: 1 step skipped' <<<"$out"; then
			pass "$place as $kind: skipped with a warning, exit 0"
		else
			fail "$place as $kind: skipped with a warning, exit 0" "exit $rc" "$out"
		fi
		check "$place as $kind: the steps after it still ran (pam_namespace file back)" test -f "$ns"
		as_user "$AGENT" chmod -f 0700 "$H/$place"
		as_user "$AGENT" rm -rf "$H/$place"
	done
done
# ocsb doctor (root) reports what the agent broke; the clean state is its control.
break_place .bashrc link
check_output "doctor (root): a WARN for the agent's ~/.bashrc link" \
	"^WARN agent-home +~$AGENT/.bashrc is a symbolic link: ocsb-provision skips it" bash -c "'$OCSB_BUILD/ocsb' doctor; true"
as_user "$AGENT" rm -f "$H/.bashrc"
check_output "control: doctor (root): OK once it is gone" "^OK +agent-home " bash -c "'$OCSB_BUILD/ocsb' doctor; true"
check "nothing a link pointed at was changed (the owner's file, /etc/passwd)" \
	test "$before" = "$(sha256sum "$OWNER_HOME/target.txt" /etc/passwd)"
# Once the agent's places are gone, provisioning makes them again: no lasting damage.
check_output "after the agent removes them, provisioning makes the clone again" \
	"create the repository ~$AGENT/shop" provision
check "the clone is back" as_user "$AGENT" git -C "$H/shop" rev-parse --git-dir
check "~/.bashrc sources the secrets hook again" grep -q '^# added by ocsb-provision: the owner.s secrets' "$H/.bashrc"
check_output "and converges" '^ocsb-provision: 0 changes$' provision
