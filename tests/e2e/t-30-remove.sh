# SPDX-License-Identifier: MIT
# --remove undoes the setup and keeps the account; --remove --purge leaves nothing of the uid.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
check_output "positive control: ssh works before removal" "^$AGENT$" owner_ssh "$AGENT" id -un
uid=$(id -u "$AGENT")

check_output "--remove succeeds" '^ocsb-provision: [1-9][0-9]* removals?$' prov --remove
check_fails "sshd drop-in gone" test -e /etc/ssh/sshd_config.d/ocsb-$AGENT.conf
check_fails "authorized keys gone" test -e /etc/ocsb/keys/$AGENT
check_fails "owner's sync key gone" test -e "$SYNC_KEY"
check_fails "owner's host pin gone" test -e "$PIN"
check "sshd config still valid" sshd -t
check_fails "ssh as the agent refused after --remove" owner_ssh "$AGENT" id -un
check "account kept without --purge" getent passwd "$AGENT"
check "config kept without --purge" test -f /etc/ocsb/ocsb.conf
check_output "re-provisioning after --remove works" '^ocsb-provision: [1-9]' prov
check_output "ssh works again" "^$AGENT$" owner_ssh "$AGENT" id -un

# Leave traces the account's deletion alone would not take: files in shared places, a process.
as_user "$AGENT" sh -c 'echo x > /tmp/agent-tmp; echo y > /dev/shm/agent-shm; mkdir -p /var/tmp/agent-dir/sub; echo z > /var/tmp/agent-dir/sub/f'
as_user "$AGENT" setsid sleep 1000 </dev/null >/dev/null 2>&1 &
sleep 0.2
check "positive control: the agent's process runs" pgrep -u "$uid" sleep
check "positive control: files owned by the uid exist" test -n "$(find /tmp /dev/shm /var/tmp -uid "$uid" -print -quit)"

check_output "--remove --purge succeeds" '^ocsb-provision: [1-9]' prov --remove --purge
check_fails "account deleted" getent passwd "$AGENT"
check_fails "group deleted" getent group "$AGENT"
check_fails "home deleted" test -e /home/$AGENT
check_fails "no process of the uid left" pgrep -u "$uid"
left=$(find / /home /run /tmp /var/tmp /dev/shm /etc /var/lib /var/spool /var/mail -xdev -uid "$uid" 2>/dev/null | head)
[ -z "$left" ] && pass "no file owned by uid $uid anywhere" || fail "files of uid $uid remain" "$left"
check_fails "config removed by --purge" test -e /etc/ocsb/ocsb.conf
check_fails "state removed by --purge" test -e /var/lib/ocsb/agents/$AGENT
check "sshd config still valid after purge" sshd -t
check_output "positive control: the owner still logs in to her own account" "^$OWNER$" owner_ssh "$OWNER" id -un
check_output "provisioning again after a purge works" '^ocsb-provision: [1-9]' provision
check_output "and converges" '^ocsb-provision: 0 changes$' provision
