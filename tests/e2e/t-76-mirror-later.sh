# SPDX-License-Identifier: MIT
# The owner's OpenCode config that did not exist at provisioning still reaches the agent
# (issue 15): the mirror's places are reserved from the first run (a link to an empty,
# read-only directory in the tree, ocsb-agentd's: issue 26), so OpenCode cannot make a real directory there; what
# the owner adds later arrives through the same link. A real directory of the agent's in
# that place is a difference for --check (it was "0 differences").
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

TREE=/var/lib/ocsb/mirror/$AGENT/tree
AHOME=/home/$AGENT
agent() { as_user "$AGENT" "$@"; }

make_project
as_owner rm -rf "$OWNER_HOME/.config/opencode" "$OWNER_HOME/.agents"
check_output "provisioning reserves ~/.config/opencode although the owner has none" \
	"reserve ~/.config/opencode: an empty mirror directory until $OWNER has one" provision
check_output "the agent's ~/.config/opencode is a link into the tree" "^$TREE/.config/opencode\$" \
	readlink "$AHOME/.config/opencode"
check_output "the reserved directory is empty, ocsb-agentd's, read-only" '^555 ocsb-agentd 0$' \
	sh -c "stat -c '%a %U' '$TREE/.config/opencode' | tr '\n' ' '; ls -A '$TREE/.config/opencode' | wc -l"
check_fails "the agent cannot make files there (as OpenCode's first start would)" \
	agent mkdir -p "$AHOME/.config/opencode/agent"
check_output "converges: 0 changes" '^ocsb-provision: 0 changes$' provision
check_output "--check: 0 differences" '^ocsb-provision: 0 differences' prov --check

# The owner starts using OpenCode afterwards: her config reaches the agent, same link.
as_owner mkdir -p "$OWNER_HOME/.config/opencode/command"
as_owner sh -c "echo LATER-BODY > '$OWNER_HOME/.config/opencode/command/later.md'"
check_output "a later run mirrors it" 'mirror .* written' provision
check_output "the agent reads it through the link it already had" '^LATER-BODY$' \
	agent cat "$AHOME/.config/opencode/command/later.md"

# A real directory of the agent's in that place (OpenCode started before the first link,
# issue 28): reported, then taken by the next run, what it held kept aside and said.
agent rm "$AHOME/.config/opencode"
agent mkdir "$AHOME/.config/opencode"
agent sh -c "echo AGENT-OWN > '$AHOME/.config/opencode/opencode.json'"
check_fails_output "--check reports the place that is not linked, and what a run would do" \
	"drift: ~/.config/opencode is not ocsb's link: move it to ~/.config/opencode.ocsb-aside, link it to the mirror" \
	prov --check
check "--check changed nothing" test -d "$AHOME/.config/opencode" -a ! -L "$AHOME/.config/opencode"
check_output "doctor (root) WARNs the place that is not the mirror's link" \
	"^WARN mirror-link +~$AGENT/.config/opencode is a directory of the agent's, not the mirror's link" \
	bash -c "'$OCSB_BUILD/ocsb' doctor; true"
check_fails_output "mirror status (root) reports the place that is not linked" \
	"^unlinked  ~$AGENT/.config/opencode: is a directory of the agent's, not the mirror's link" \
	"$OCSB_BUILD/ocsb" mirror status
check_output "mirror status (the owner, who cannot look into the agent's home) says so" \
	"^places in ~$AGENT: not checked \\(only root can look into the agent's home\\): sudo ocsb mirror status\$" \
	as_owner "$OCSB_BUILD/ocsb" mirror status
check_output "a run takes the place, naming both paths" \
	"~/.config/opencode was not ocsb's link: moved to ~/.config/opencode.ocsb-aside, linked to the mirror" \
	provision
check_output "the place links to the tree again" "^$TREE/.config/opencode\$" readlink "$AHOME/.config/opencode"
check_output "what the agent had is kept aside" '^AGENT-OWN$' \
	agent cat "$AHOME/.config/opencode.ocsb-aside/opencode.json"
check_output "the agent reads the owner's config through the link again" '^LATER-BODY$' \
	agent cat "$AHOME/.config/opencode/command/later.md"
agent rm "$AHOME/.config/opencode"
agent mkdir "$AHOME/.config/opencode"
agent sh -c "echo AGENT-AGAIN > '$AHOME/.config/opencode/opencode.json'"
check_output "a second time: the next name, the first aside kept" \
	"~/.config/opencode was not ocsb's link: moved to ~/.config/opencode.ocsb-aside.2, linked to the mirror" \
	provision
check_output "the second aside holds the second content" '^AGENT-AGAIN$' \
	agent cat "$AHOME/.config/opencode.ocsb-aside.2/opencode.json"
check_output "the first aside is untouched" '^AGENT-OWN$' \
	agent cat "$AHOME/.config/opencode.ocsb-aside/opencode.json"

# Every aside name taken: the place is left, and the owner, who cannot look into the
# agent's home, hears of it from `ocsb doctor` (the links file, issue 28).
odoc() { as_owner "$OCSB_BUILD/ocsb" doctor 2>&1; true; }
odoc_quiet() { ! odoc | grep -q 'link maker'; }
check "control: the owner's doctor has no link maker's problem while all is linked" odoc_quiet
for i in 3 4 5 6 7 8 9; do agent mkdir "$AHOME/.config/opencode.ocsb-aside.$i"; done
agent rm "$AHOME/.config/opencode"
agent mkdir "$AHOME/.config/opencode"
check_output "a run with every aside name taken leaves the place, and says so" \
	"~/.config/opencode is not ocsb's link and ~/.config/opencode.ocsb-aside to .9 are all taken: not linked" \
	provision
check "the place is still the agent's directory" test -d "$AHOME/.config/opencode" -a ! -L "$AHOME/.config/opencode"
check_output "the owner's doctor WARNs the unlinked place" \
	"^WARN mirror +link maker in ~$AGENT: ~/.config/opencode is not ocsb's link and .* not linked" odoc
agent rmdir "$AHOME/.config/opencode.ocsb-aside.9"
check_output "control: a name free again, the next run takes the place" \
	"moved to ~/.config/opencode.ocsb-aside.9, linked to the mirror" provision
check "control: the owner's doctor has no link maker's problem again" odoc_quiet
check_output "control: converges: 0 changes" '^ocsb-provision: 0 changes$' provision
check_output "control: doctor (root): the mirror's places link to the tree" "^OK +mirror-link " \
	bash -c "'$OCSB_BUILD/ocsb' doctor; true"
check_output "control: mirror status (root): every place links to the mirror" \
	"^places in ~$AGENT: the [0-9]+ places? links? to the mirror\$" "$OCSB_BUILD/ocsb" mirror status
