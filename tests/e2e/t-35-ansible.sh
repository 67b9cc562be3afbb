# SPDX-License-Identifier: MIT
# The Ansible role deploy/ansible/roles/ocsb (issue 30), run with Debian's ansible-core as
# `ansible-playbook -c local -i localhost,` against this build's ocsb-provision: the first
# play provisions (changed), the second reports changed=0 and touches nothing, check mode
# on a drifted host (ocsb.conf edited, the sshd drop-in removed) reports the drift and
# fixes nothing, `ocsb_state: absent` removes and purges, and again reports changed=0. The package step
# cannot run here (no .deb, /usr read-only): ocsb_install_package is false, and the apt
# tasks are covered by --syntax-check and ansible-lint.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

REPO=$(cd "$(dirname "$E2E_LIB")/../.." && pwd)
ROLE_DIR=$REPO/deploy/ansible
if ! command -v ansible-playbook >/dev/null; then
	skip "the Ansible role" "ansible-playbook missing (package ansible-core: sudo make test-deps)"
	exit 0
fi
W=$E2E_SCRATCH/ansible
# shellcheck source=../ansible-lib.sh
. "$REPO/tests/ansible-lib.sh"
ansible_env "$W" "$ROLE_DIR/roles"

make_project
cat >"$W/vars.yml" <<EOF
ocsb_install_package: false
ocsb_provision_bin: $OCSB_BUILD/ocsb-provision
ocsb_agents:
  - name: $AGENT
    owner: $OWNER
    projects: [$PROJECT]
    agent_ports: 9000-9009
    limits: {memory: none, tasks: none, cpu: none}
ocsb_egress:
  allow: [allowed.test]
  block: [blocked-by-ansible.test]
  expect_block: [http://blocked-by-ansible.test/]
EOF
cat >"$W/play.yml" <<'EOF'
- name: ocsb on this host
  hosts: all
  gather_facts: false
  roles: [ocsb]
EOF

# play NAME ARGS...: one ansible-playbook run (ansible_play: $W/NAME.out, $W/NAME.time,
# RECAP_CHANGED, RECAP_FAILED).
play() {
	local name=$1
	shift
	ansible_play "$W" "$name" localhost -c local -i localhost, -v -e "@$W/vars.yml" "$@" "$W/play.yml"
}
# check_play DESC NAME WANT-CHANGED(regex) ARGS...: the play runs without failure and its
# recap's changed= count matches.
check_play() {
	local desc=$1 name=$2 want=$3
	shift 3
	play "$name" "$@"
	local rc=$?
	if [ "$rc" -eq 0 ] && [ "${RECAP_FAILED:-x}" = 0 ] && [[ $RECAP_CHANGED =~ ^($want)$ ]]; then
		pass "$desc (changed=$RECAP_CHANGED, $PLAY_TIME s)"
		return 0
	fi
	fail "$desc" "exit $rc, changed=${RECAP_CHANGED:-?} (want $want), failed=${RECAP_FAILED:-?}" \
		"$(grep -E '^(fatal|failed|changed|TASK|localhost)|msg' "$W/$name.out" | tail -n 40)"
}
prov_says() { ansible_prov_says "$W" "$1"; }

# --- the example playbook and the role's tasks, the package's included (not run here)
check_output "site.yml passes ansible-playbook --syntax-check" '^playbook: ' \
	ansible-playbook --syntax-check -i localhost, "$ROLE_DIR/site.yml"
if command -v ansible-lint >/dev/null; then
	check_output "ansible-lint (production profile) is clean on site.yml and the role" 'Passed' \
		env -C "$ROLE_DIR" HOME="$W" ansible-lint --offline -p site.yml roles/ocsb
else
	skip "ansible-lint is clean" "ansible-lint missing (not packaged for this release, or not installed: sudo make test-deps)"
fi
check_fails_output "two agents with one name: the role's assert refuses, naming the rule" \
	'each with its own name' ansible-playbook -c local -i localhost, -e "@$W/vars.yml" \
	-e "{\"ocsb_agents\": [{\"name\": \"x\", \"owner\": \"$OWNER\"}, {\"name\": \"x\", \"owner\": \"$OWNER\"}]}" "$W/play.yml"
check_fails "  ... before any change (no account x)" getent passwd x
check_fails_output "a project with a newline (a second ocsb.conf line) is refused by the assert" \
	'no value holds a control character' ansible-playbook -c local -i localhost, -e "@$W/vars.yml" \
	-e "{\"ocsb_agents\": [{\"name\": \"$AGENT\", \"owner\": \"$OWNER\", \"projects\": [\"$PROJECT\\nopencode-bin /tmp/x\"]}]}" \
	"$W/play.yml"
check "  ... before any change (no ocsb.conf)" test ! -e /etc/ocsb/ocsb.conf
check_fails_output "an allow value with a newline (a policy line of its own) is refused by the assert" \
	'connect values hold no space' ansible-playbook -c local -i localhost, -e "@$W/vars.yml" \
	-e '{"ocsb_egress": {"allow": ["allowed.test\npolicy blocklist"]}}' "$W/play.yml"

# --- first play: provisions; second play: nothing to do
check_play "first play provisions (changed)" first '[1-9][0-9]*'
echo "  # first play: $(prov_says first)"
check_output "  ... ocsb-provision reported its changes" 'ocsb-provision: [1-9][0-9]* changes' cat "$W/first.out"
# The harness runs on a machine with OpenCode installed (make deps; provisioning needs it):
# --install-opencode is not run, for that reason.
check_output "  ... --install-opencode did not run: OpenCode's default binary is there" \
	"since '?/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode'? exists" cat "$W/first.out"
check_output "  ... the agent logs in" "^$AGENT$" owner_ssh "$AGENT" id -un
check_output "  ... ocsb.conf is the role's" "^project \"$PROJECT\"$" cat /etc/ocsb/ocsb.conf
check_output "  ... the egress drop-in is written" '^block blocked-by-ansible.test$' cat /etc/ocsb/egress.d/ansible.conf
check_output "  ... this play wrote egress.conf (a first run)" \
	'write /etc/ocsb/egress.conf' cat "$W/first.out"
check "  ... and the drop-in is in force at once: that run read it (squid's rules name it)" \
	grep -q 'blocked-by-ansible.test' /var/lib/ocsb/proxy/squid.conf
snapshot_state second
check_play "second play: changed=0" second 0
echo "  # second play: $(prov_says second)"
check_output "  ... ocsb-provision ran and said 0 changes" 'ocsb-provision: 0 changes' cat "$W/second.out"
state_unchanged "  ... and nothing changed on the host" second

# --- check mode on a drifted host: ocsb.conf edited and the drop-in removed
sed -i 's/^agent-ports 9000-9009$/agent-ports 9000-9019/' /etc/ocsb/ocsb.conf
rm /etc/ssh/sshd_config.d/ocsb-$AGENT.conf
snapshot_state drifted
check_play "check mode on the drifted host reports the drift (changed=2)" check-drift 2 --check --diff
check_output "  ... the edited ocsb.conf, as a diff" '^-agent-ports 9000-9019$' cat "$W/check-drift.out"
check_output "  ... the removed sshd drop-in, from ocsb-provision --check" \
	"drift: write /etc/ssh/sshd_config.d/ocsb-$AGENT.conf" cat "$W/check-drift.out"
check_output "  ... and --dry-run's plan, shown with --diff" \
	"would: write /etc/ssh/sshd_config.d/ocsb-$AGENT.conf" cat "$W/check-drift.out"
state_unchanged "  ... and fixes nothing" drifted
# (The next play would fix both; the absent play below starts from the drifted host.)

# --- ocsb_state: absent with ocsb_purge
check_play "ocsb_state absent with ocsb_purge: --remove --purge (changed)" purge '[1-9][0-9]*' \
	-e ocsb_state=absent -e ocsb_purge=true
check_fails "  ... the account is gone" getent passwd "$AGENT"
check_fails "  ... /etc/ocsb is gone (the role's drop-in with it)" test -e /etc/ocsb
check_fails "  ... /var/lib/ocsb is gone" test -e /var/lib/ocsb
check_play "  ... again: changed=0" purge-again 0 -e ocsb_state=absent -e ocsb_purge=true
# Each play's wall time, and of it the time ocsb-provision's runs took (the command
# tasks' deltas): the rest is Ansible's own.
prov_time() {
	grep -o '"delta": "[0-9:.]*"' "$W/$1.out" | grep -o '[0-9.]*"$' | tr -d '"' |
		awk '{ s += $1 } END { printf "%.1f", s }'
}
echo "  # times (s): $(for n in first second check-drift purge purge-again; do
	printf '%s %s (ocsb-provision %s), ' "$n" "$(cat "$W/$n.time" 2>/dev/null)" "$(prov_time "$n")"; done)"
