#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t-00-harness.sh: the harness itself. Later tests assume that the owner can log in
# over ssh, that keys are what decides, that /etc is a private copy, that the network
# is private and that sshd reloads on SIGHUP: each of these is checked here, every
# "blocked" check next to the positive control that shows the probe itself works.
# (That the host stayed unchanged is checked by run.sh from outside.)
# shellcheck disable=SC2016 # the bash -c snippets expand their variables themselves

# shellcheck source=lib.sh
. "$E2E_LIB"

# --- mounts: the writes of useradd/sshd/ocsb land in throw-away layers -------------------
for dir in /etc /var/log /var/mail /var/spool /var/lib /root; do
	check_output "$dir is an overlay" '^overlay$' findmnt -n -o FSTYPE --mountpoint "$dir"
done
for dir in /home /run /tmp /var/tmp /dev/shm; do
	check_output "$dir is a tmpfs" '^tmpfs$' findmnt -n -o FSTYPE --mountpoint "$dir"
done
check_output "/home is 0755 (sshd StrictModes)" '^755$' stat -c %a /home
# Everything else of the host is mounted read-only inside: a stray write fails.
check_fails "root cannot write to /usr (host read-only)" touch /usr/.e2e-probe
check_fails "root cannot write next to the harness (host read-only)" touch "$(dirname "$E2E_LIB")/.e2e-probe"
check "root can write to /etc (overlay, control)" touch /etc/.e2e-probe
rm -f /etc/.e2e-probe

# --- accounts: real useradd writes the overlaid /etc ---------------------------------
check_output "owner $OWNER exists inside" "^$OWNER:" getent passwd "$OWNER"
check_output "owner password field is '*' (no password, not locked)" "^$OWNER:\*:" getent shadow "$OWNER"
if grep -q "^$OWNER:" "$E2E_HOST/passwd"; then
	skip "owner $OWNER absent from the host's /etc/passwd" "the host has a user $OWNER"
else
	check_fails "owner $OWNER absent from the host's /etc/passwd" grep -q "^$OWNER:" "$E2E_HOST/passwd"
fi
check_fails "/etc/passwd inside differs from the host's" cmp -s /etc/passwd "$E2E_HOST/passwd"
check_output "owner key is hers, 0600, in a 0700 ~/.ssh" "^600 $OWNER 700 $OWNER\$" \
	bash -c 'echo "$(stat -c "%a %U" "$OWNER_KEY") $(stat -c "%a %U" "$OWNER_HOME/.ssh")"'
check "owner has a second key pair" test -s "$OWNER_KEY2" -a -s "$OWNER_KEY2.pub"
check_output "owner has two distinct public keys" '^2$' \
	bash -c 'cat "$OWNER_HOME"/.ssh/*.pub | cut -d" " -f2 | sort -u | wc -l'
check_output "as_owner runs as the owner with her HOME" "^$OWNER $OWNER_HOME\$" \
	as_owner bash -c 'echo "$(id -un) $HOME"'

# --- ssh: keys decide, and the real config is in force ------------------------------
# Positive control for every later ssh test.
check_output "owner can ssh to herself with her key (positive control)" "^$OWNER\$" \
	owner_ssh "$OWNER" id -un
# The same probe against an account without authorized keys must be refused, and for
# the right reason (authentication, not a broken connection).
useradd -m -s /bin/bash e2e-nokey && usermod -p '*' e2e-nokey
check_fails_output "user without authorized key is refused" 'Permission denied' \
	owner_ssh e2e-nokey id -un
OWNER_SSH_KEY=$OWNER_KEY2 check_fails_output "owner's second key is not authorized for herself" \
	'Permission denied' owner_ssh "$OWNER" id -un
# ...and accepted once the key is authorized: the refusal above was about the key.
install -d -m 0700 -o e2e-nokey -g e2e-nokey /home/e2e-nokey/.ssh
install -m 0600 -o e2e-nokey -g e2e-nokey "$OWNER_KEY.pub" /home/e2e-nokey/.ssh/authorized_keys
check_output "same user is accepted once the key is authorized (control)" '^e2e-nokey$' \
	owner_ssh e2e-nokey id -un
# The machine's UsePAM is kept; with PAM the session must really have run the stack
# (pam_loginuid sets the login uid), so PAM problems in the namespace show up here.
usepam=$(/usr/sbin/sshd -T -C "user=$OWNER,host=localhost,addr=127.0.0.1" | awk '$1 == "usepam" { print $2 }')
if [ "$usepam" = yes ]; then
	check_output "ssh sessions run the PAM session stack (loginuid set)" "^$(id -u "$OWNER")\$" \
		owner_ssh "$OWNER" cat /proc/self/loginuid
else
	skip "ssh sessions run the PAM session stack (loginuid set)" "UsePAM ${usepam:-unknown}"
fi

# --- network: a namespace of its own ------------------------------------------------
check_output "only loopback exists in the test netns" '^lo$' \
	bash -c 'ip -o link show | cut -d: -f2 | tr -d " "'
check_output "resolv.conf points at the fake internet only" '^nameserver 198\.18\.0\.53$' cat /etc/resolv.conf
if command -v nft >/dev/null; then
	check_output "nft ruleset inside is empty" '^$' bash -c 'nft list ruleset; echo'
	host_tables=$(grep -c . "$E2E_HOST/nft-tables" 2>/dev/null)
	check_fails "none of the host's ${host_tables:-0} nft tables is visible inside" \
		bash -c 'nft list tables | grep -qxFf "$E2E_HOST/nft-tables"'
	# Control: nft works here, so "empty" is not just a broken nft.
	check_output "nft can add a table inside (control)" '^table inet e2e_probe$' \
		bash -c 'nft add table inet e2e_probe && nft list tables'
	nft delete table inet e2e_probe
else
	skip "nft ruleset inside is empty" "nft not installed"
fi

# --- sshd reload by SIGHUP (ocsb-provision's way when systemd is not running) ---------
pid=$(cat /run/sshd.pid 2>/dev/null)
check_output "/run/sshd.pid names the running sshd" '^sshd$' cat "/proc/${pid:-0}/comm"

# A drop-in like the one ocsb-provision writes: it must take effect on SIGHUP.
probe_cmd='echo "probe=${E2E_RELOAD_PROBE:-unset}"'
check_output "drop-in not yet active before reload (control)" '^probe=unset$' \
	owner_ssh "$OWNER" "$probe_cmd"
printf 'Match User %s\n\tSetEnv E2E_RELOAD_PROBE=reloaded\n' "$OWNER" \
	>/etc/ssh/sshd_config.d/zz-e2e-reload-probe.conf
check "sshd -t accepts the config with the drop-in" /usr/sbin/sshd -t -f /etc/ssh/sshd_config
kill -HUP "$pid"
# sshd re-executes itself on SIGHUP: the listener is briefly gone.
sleep 0.2
check "sshd listens again after SIGHUP" wait_port 127.0.0.1 22 5
check_output "sshd keeps its pid across SIGHUP" "^$pid\$" cat /run/sshd.pid
check_output "owner can still ssh after SIGHUP" "^$OWNER\$" owner_ssh "$OWNER" id -un
check_output "drop-in takes effect after SIGHUP" '^probe=reloaded$' owner_ssh "$OWNER" "$probe_cmd"
rm -f /etc/ssh/sshd_config.d/zz-e2e-reload-probe.conf

# --- helpers ------------------------------------------------------------------------
# A check must not wait for background processes its command leaves behind.
SECONDS=0
check "check returns while a background child still runs" bash -c 'sleep 30 & echo started'
check "...and did not wait for it" test "$SECONDS" -lt 10
as_owner sleep 31 &
bg=$!
sleep 0.3
check "owner's background command runs (control)" pgrep -u "$OWNER" -x sleep
kill_tree "$bg"
check_fails "kill_tree stops the owner's background command" pgrep -u "$OWNER" -x sleep

snapshot_state t00
check "state snapshot unchanged by a read-only probe" state_unchanged "unchanged (inner)" t00
touch "$OWNER_HOME/e2e-state-probe"
check_fails "state snapshot notices a new file in /home (control)" state_unchanged "changed (inner)" t00
rm -f "$OWNER_HOME/e2e-state-probe"
exit 0
