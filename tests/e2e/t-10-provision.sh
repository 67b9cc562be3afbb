# SPDX-License-Identifier: MIT
# ocsb-provision end to end: account, keys, sshd drop-in, repositories, idempotence, drift.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
check_output "fresh provisioning applies changes" '^ocsb-provision: [1-9][0-9]* changes$' provision

# --- the account (invariant 1)
SHELL_COPY=/var/lib/ocsb/bin/ocsb-shell
check_output "agent account exists, login shell ocsb-shell (the copy in /var/lib/ocsb/bin)" "^$AGENT:x:[0-9]+:[0-9]+:ocsb agent[^:]*:/home/$AGENT:$SHELL_COPY$" getent passwd "$AGENT"
check_output "the copy is root's, 0755, in root-owned directories the agent can enter" '^0:0:755 0:0:755 0:0:755$' \
	sh -c 'stat -c %u:%g:%a "$@" | paste -sd " "' _ "$SHELL_COPY" /var/lib/ocsb/bin /var/lib/ocsb
check "and it is the ocsb-shell beside ocsb-provision" cmp "$OCSB_BUILD/ocsb-shell" "$SHELL_COPY"
check_output "ocsb.conf keeps the real shell" '^#?shell /bin/bash$' cat /etc/ocsb/ocsb.conf
check_output "password field is '*' (no password login, not locked)" "^$AGENT:\*:" getent shadow "$AGENT"
# The supervisor's account (issue 26): a system account of ocsb's, no login, no home.
check_output "the system account ocsb-agentd exists, no login, no home" \
	'^ocsb-agentd:x:[0-9]{1,3}:[0-9]+:ocsb supervisor:/nonexistent:/usr/sbin/nologin$' getent passwd ocsb-agentd
check "its group exists" getent group ocsb-agentd
check_output "its state directory is its own, 0700" '^700 ocsb-agentd ocsb-agentd$' stat -c '%a %U %G' /var/lib/ocsb/agentd
check_output "squid's configuration directory is its own, 0755" '^755 ocsb-agentd ocsb-agentd$' stat -c '%a %U %G' /var/lib/ocsb/squid
check_output "the children's logs directory is its own, 0750" '^750 ocsb-agentd ocsb-agentd$' stat -c '%a %U %G' /var/log/ocsb
check_output "home is 0700 and the agent's" "^700 $AGENT$" stat -c '%a %U' "/home/$AGENT"
check_output "no supplementary group at all" "^$AGENT$" id -Gn "$AGENT"
check_output "positive control: id -Gn lists extra groups when there are some" "sudo" \
	bash -c "groupadd -f sudo && usermod -aG sudo $OWNER && id -Gn $OWNER"
check_fails "the agent is not in the owner's group" bash -c "id -Gn $AGENT | grep -qw $OWNER"
check_output "config written with the values in force" "^owner $OWNER$" cat /etc/ocsb/ocsb.conf
check_output "config keeps the project" "^project \"$PROJECT\"$" cat /etc/ocsb/ocsb.conf

# --- keys (invariant 6)
check_output "authorized keys are root-owned 0644" '^644 root:root$' stat -c '%a %U:%G' /etc/ocsb/keys/$AGENT
check_output "both owner keys are there, restricted" "^restrict,pty ecdsa-sha2-nistp256 " cat /etc/ocsb/keys/$AGENT
check_output "sync key forced to git-shell" '^restrict,command="/usr/bin/git-shell -c \\"\$SSH_ORIGINAL_COMMAND\\"" ssh-ed25519 ' cat /etc/ocsb/keys/$AGENT
check_output "sync key is the owner's, 0600" "^600 $OWNER$" stat -c '%a %U' "$SYNC_KEY"
check_output "sync key is ed25519" 'ED25519' ssh-keygen -l -f "$SYNC_KEY.pub"
check_fails "the agent cannot write its authorized keys" as_user "$AGENT" sh -c "echo x >> /etc/ocsb/keys/$AGENT"
check "positive control: root can write there" sh -c "test -w /etc/ocsb/keys/$AGENT"

# --- ssh access
check_output "ssh $AGENT@localhost with the owner's key" "^$AGENT$" owner_ssh "$AGENT" id -un
check_output "ssh with the owner's second key" "^$AGENT$" env OWNER_SSH_KEY="$OWNER_KEY2" bash -c ". '$E2E_LIB'; owner_ssh $AGENT id -un"
check_output "umask 077 in ssh commands" '^0077$' owner_ssh "$AGENT" umask
check_output "umask 077 in login shells" '^0077$' owner_ssh "$AGENT" bash -lc umask

# --- ocsb-shell: no_new_privs and the Landlock scope, then bash with sshd's arguments
ssh_probe='echo "0=$0 SHELL=$SHELL"; grep NoNewPrivs /proc/self/status'
check_output "ssh command: bash -c through ocsb-shell" '^0=bash SHELL=/bin/bash$' owner_ssh "$AGENT" "$ssh_probe"
check_output "ssh command: no_new_privs set" '^NoNewPrivs:[[:space:]]+1$' owner_ssh "$AGENT" "$ssh_probe"
check_output "positive control: the owner's own ssh session has no no_new_privs" '^NoNewPrivs:[[:space:]]+0$' owner_ssh "$OWNER" "$ssh_probe"
login_probe() { # USER: a login session without a terminal reads its commands from stdin
	owner_ssh "$1" <<<'echo "0=$0"; shopt -q login_shell && echo login-shell; grep NoNewPrivs /proc/self/status'
}
check_output "ssh login session: bash runs as a login shell (-bash)" '^0=-bash$' login_probe "$AGENT"
check_output "ssh login session: bash knows it is a login shell" '^login-shell$' login_probe "$AGENT"
check_output "ssh login session: no_new_privs set" '^NoNewPrivs:[[:space:]]+1$' login_probe "$AGENT"
check_output "positive control: the owner's login session is -bash without no_new_privs" '^NoNewPrivs:[[:space:]]+0$' login_probe "$OWNER"
check_output "ssh command: exit status and arguments pass through" '^a b;c$' \
	owner_ssh "$AGENT" "printf '%s;%s\\n' 'a b' c; exit 0"
exit_3() { owner_ssh "$AGENT" "exit 3"; [ $? -eq 3 ]; }
check "ssh command: the exit status passes through" exit_3
quiet() { local o; o=$(owner_ssh "$AGENT" true 2>&1) && [ -z "$o" ]; }
check "ocsb-shell prints nothing when it reads the config" quiet
chmod 0600 /etc/ocsb/ocsb.conf
check_output "unreadable config: one line on stderr, then bash all the same" \
	"^ocsb-shell: /etc/ocsb/ocsb.conf: Permission denied; using /bin/bash" owner_ssh "$AGENT" 'echo "0=$0"'
check_output "unreadable config: the command still runs" '^0=bash$' owner_ssh "$AGENT" 'echo "0=$0"'
chmod 0644 /etc/ocsb/ocsb.conf
sed -i "s|^#\?shell .*|shell $OCSB_BUILD/ocsb-shell|" /etc/ocsb/ocsb.conf
check_output "shell naming ocsb-shell itself: refused, bash all the same" \
	"^ocsb-shell: shell $OCSB_BUILD/ocsb-shell in /etc/ocsb/ocsb.conf: is ocsb-shell itself; using /bin/bash" owner_ssh "$AGENT" 'echo "0=$0"'
check_fails_output "provisioning refuses shell naming ocsb-shell" "ocsb-shell is the agent's login shell already" prov --check
sed -i "s|^shell .*|#shell /bin/bash|" /etc/ocsb/ocsb.conf
check_output "positive control: the restored config is clean" '^ocsb-provision: 0 differences' prov --check
check_output "proxy variables set (lower case)" '^http_proxy=http://127.0.0.1:3128$' owner_ssh "$AGENT" env
check_output "proxy variables set (upper case)" '^HTTPS_PROXY=http://127.0.0.1:3128$' owner_ssh "$AGENT" env
check_output "host key pinned: strict check against the pin passes" "^$AGENT$" \
	as_owner ssh -i "$OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes \
	-o UserKnownHostsFile="$PIN" -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR "$AGENT@localhost" id -un
check_fails "a wrong pin is refused (the pin is what is checked)" \
	as_owner ssh -i "$OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes \
	-o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR "$AGENT@localhost" id -un

# --- forwardings (each refused for the agent, working for the owner's own account)
start_canary || fail "canary web server did not start"
check "positive control: canary answers directly" canary_via "http://127.0.0.1:$CANARY_PORT/canary.txt"
fwd_L() { # USER LOCALPORT: does -L deliver the canary?
	bg_owner ssh -i "$OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -N \
		-L "127.0.0.1:$2:127.0.0.1:$CANARY_PORT" "$1@localhost"
	local pid=$BG_PID
	wait_port 127.0.0.1 "$2" 5
	canary_via "http://127.0.0.1:$2/canary.txt"
	local rc=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return $rc
}
fwd_D() {
	bg_owner ssh -i "$OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -N -D "127.0.0.1:$2" "$1@localhost"
	local pid=$BG_PID
	wait_port 127.0.0.1 "$2" 5
	canary_via --socks5-hostname "127.0.0.1:$2" "http://127.0.0.1:$CANARY_PORT/canary.txt"
	local rc=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	return $rc
}
check "positive control: -L works for $OWNER" fwd_L "$OWNER" 7101
check_fails "-L refused for $AGENT" fwd_L "$AGENT" 7102
check "positive control: -D works for $OWNER" fwd_D "$OWNER" 7103
check_fails "-D refused for $AGENT" fwd_D "$AGENT" 7104
fwd_R() {
	as_owner ssh -i "$OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ExitOnForwardFailure=yes \
		-R "127.0.0.1:$2:127.0.0.1:$CANARY_PORT" "$1@localhost" \
		"curl -s --max-time 3 http://127.0.0.1:$2/canary.txt" | grep -q "CANARY-$$"
}
check "positive control: -R works for $OWNER" fwd_R "$OWNER" 7105
check_fails "-R refused for $AGENT" fwd_R "$AGENT" 7106
fwd_A() {
	as_owner bash -c 'eval "$(ssh-agent -s)" >/dev/null; ssh-add -q "$0";
		ssh -A -i "$0" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
		-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$1@localhost" "ssh-add -l"; rc=$?;
		kill $SSH_AGENT_PID; exit $rc' "$OWNER_KEY" "$1"
}
check "positive control: -A works for $OWNER" fwd_A "$OWNER"
check_fails "-A refused for $AGENT" fwd_A "$AGENT"

# --- the sync key runs git and nothing else
check_fails_output "sync key cannot run a command" "unrecognized command" sync_ssh id
check_fails "sync key gets no shell" sync_ssh
check_output "sync key can run git-upload-pack (ls-remote of the agent's clone)" '^$' \
	as_owner env GIT_SSH_COMMAND="ssh -i $SYNC_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile=$PIN" \
	git ls-remote "$AGENT@localhost:shop"
check_output "agent clone accepts pushes into its checked-out branch" '^updateInstead$' \
	as_user "$AGENT" git -C "/home/$AGENT/shop" config receive.denyCurrentBranch
check_output "agent clone belongs to the agent" "^$AGENT$" stat -c %U "/home/$AGENT/shop/.git"

# --- sshd: the drop-in applies to the agent only
check_output "sshd: agent gets disableforwarding" '^disableforwarding yes$' sshd -T -C user=$AGENT,host=localhost,addr=127.0.0.1
check_output "sshd: agent keys come from /etc/ocsb/keys" '^authorizedkeysfile /etc/ocsb/keys/%u$' sshd -T -C user=$AGENT,host=localhost,addr=127.0.0.1
check_output "sshd: other users keep their settings" '^authorizedkeysfile \.ssh/authorized_keys' sshd -T -C user=$OWNER,host=localhost,addr=127.0.0.1

# --- idempotence and drift
snapshot_state again
check_output "second run: 0 changes" '^ocsb-provision: 0 changes$' provision
state_unchanged "second run touched nothing" again
check_output "run without options uses the written config: 0 changes" '^ocsb-provision: 0 changes$' prov
check_output "--check: no drift" '^ocsb-provision: 0 differences' prov --check
chmod 0755 /home/$AGENT
echo "# local edit" >>/etc/ssh/sshd_config.d/ocsb-$AGENT.conf
check_fails_output "--check reports a loosened home" "drift: set mode 0700 on /home/$AGENT \(was 0755\)" prov --check
check_fails_output "--check reports an edited drop-in" "drift: write /etc/ssh/sshd_config.d/ocsb-$AGENT.conf" prov --check
check_fails_output "--check exits 1 with a count" "^ocsb-provision: 2 differences" prov --check
check_output "a run repairs both" '^ocsb-provision: 2 changes$' prov
check_output "--check clean again" '^ocsb-provision: 0 differences' prov --check
usermod -s /bin/bash "$AGENT"
check_fails_output "--check reports a login shell set back to bash" "drift: set the login shell of $AGENT to $SHELL_COPY \(was /bin/bash\)" prov --check
check_output "a run puts ocsb-shell back" '^ocsb-provision: 1 change$' prov
check_output "the login shell is ocsb-shell again" ":$SHELL_COPY$" getent passwd "$AGENT"

# --- ocsb-shell must sit beside ocsb-provision, root-owned and not writable by others
lone=$E2E_SCRATCH/lone
mkdir -p "$lone" && cp "$OCSB_BUILD/ocsb-provision" "$lone/"
check_fails_output "refused without ocsb-shell beside it, naming the path" "$lone/ocsb-shell: No such file or directory: .*make install" "$lone/ocsb-provision" --check
cp "$OCSB_BUILD/ocsb-shell" "$lone/" && chmod 0775 "$lone/ocsb-shell"
check_fails_output "refused with a group-writable ocsb-shell" "$lone/ocsb-shell: the agent's login shell must be a root-owned regular file" "$lone/ocsb-provision" --check
chmod 0755 "$lone/ocsb-shell" && chown "$OWNER" "$lone/ocsb-shell"
check_fails_output "refused with an ocsb-shell owned by someone else" "$lone/ocsb-shell: the agent's login shell must be a root-owned" "$lone/ocsb-provision" --check
chown root "$lone/ocsb-shell"
check_output "positive control: accepted once root-owned 0755 (the same program: no drift)" '^ocsb-provision: 0 differences' "$lone/ocsb-provision" --check
printf '\0' >>"$lone/ocsb-shell"
check_fails_output "another ocsb-shell beside it: the copy is drift" "drift: write $SHELL_COPY" "$lone/ocsb-provision" --check
