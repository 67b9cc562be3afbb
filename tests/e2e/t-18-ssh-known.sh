# SPDX-License-Identifier: MIT
# The README's `ssh ai-dev@localhost` asks nothing about a host key (issue 15): provisioning
# vouches for this machine's own host keys in /etc/ssh/ssh_known_hosts (one marked block,
# nothing in the owner's home), and --remove takes the block away again (the control: then
# the same ssh fails on the unknown key).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

# The owner's ssh exactly as a person types it: her default known_hosts files, no
# StrictHostKeyChecking override; BatchMode turns the question into a failure.
plain_ssh() {
	as_owner ssh -i "$OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o ConnectTimeout=5 \
		-- "$AGENT@localhost" "$@"
}

make_project
printf '# the machine'"'"'s own line, kept\nexample.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeep\n' \
	>/etc/ssh/ssh_known_hosts
check_output "provisioning vouches for the host keys" \
	'vouch for this machine.s host keys in /etc/ssh/ssh_known_hosts' provision
check_output "ssh $AGENT@localhost asks nothing and logs in" "^$AGENT$" plain_ssh id -un
check_fails "the owner's home got no known_hosts of ours" test -e "$OWNER_HOME/.ssh/known_hosts"
check "the machine's own line is kept" grep -q '^example.org ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKeep$' /etc/ssh/ssh_known_hosts
check_output "one block, marked" '^1$' grep -c '^# >>> ocsb-provision' /etc/ssh/ssh_known_hosts
check_output "converges" '^ocsb-provision: 0 changes$' provision
check_output "--remove takes the block away" "remove ocsb's block from /etc/ssh/ssh_known_hosts" prov --remove
check_fails "no block left" grep -q 'ocsb-provision' /etc/ssh/ssh_known_hosts
check "the machine's own line is still there" grep -q '^example.org ' /etc/ssh/ssh_known_hosts
out=$(plain_ssh true 2>&1)
if [ $? -ne 0 ] && grep -q 'Host key verification failed' <<<"$out"; then
	pass "control: without the block, the same ssh fails on the unknown host key"
else
	fail "control: without the block, the same ssh fails on the unknown host key" "$out"
fi
