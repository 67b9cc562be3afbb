# SPDX-License-Identifier: MIT
# ocsb sync --host: an agent provisioned on "another machine". That machine is a second
# network namespace (veth, 198.18.7.0/30) with its own sshd and its own host key; its
# owner is bob, our owner alice has no local provisioning at all. alice pins the host key
# only by the fingerprint she verified (ocsb sync init --accept-host-key), her own key is
# authorized there for git only (ocsb-provision --sync-key), and pull/push/status work
# with --host; an unknown or changed host key is refused, each with a positive control.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
RNS=ocsb-remote
RHOST=198.18.7.2
RKEYS=$E2E_SCRATCH/remote-hostkeys
RPIN=$OWNER_HOME/.config/ocsb/remote_known_hosts
RKEY=$OWNER_HOME/.config/ocsb/remote_sync_ed25519
BOB=bob
BOB_PROJECT=/home/$BOB/code/shop
AREPO=/home/$AGENT/shop
ocsb_owner() { as_owner env -C "$PROJECT" "$OCSB" "$@"; }
ogit() { as_owner git -C "$PROJECT" "$@"; }
agit() { as_user "$AGENT" git -C "$AREPO" "$@"; }
rssh() { # rssh KEY CMD...: ssh to the remote agent with KEY and the remote pin
	as_owner ssh -i "$1" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes \
		-o UserKnownHostsFile="$RPIN" -o ConnectTimeout=5 -o LogLevel=ERROR -- \
		"$AGENT@$RHOST" "${@:2}"
}

# --- "the other machine": its own network namespace, sshd and host key
mkdir -p /run/netns "$RKEYS"
ip netns add "$RNS"
ip link add veth-here type veth peer name veth-there
ip link set veth-there netns "$RNS"
ip addr add 198.18.7.1/30 dev veth-here
ip link set veth-here up
ip netns exec "$RNS" ip link set lo up
ip netns exec "$RNS" ip addr add "$RHOST/30" dev veth-there
ip netns exec "$RNS" ip link set veth-there up
ssh-keygen -q -t ed25519 -N '' -C remote-host -f "$RKEYS/ssh_host_ed25519_key"
start_remote_sshd() { # the machine's sshd config, our host key, listening there only
	ip netns exec "$RNS" /usr/sbin/sshd -D -e -E "$E2E_SCRATCH/remote-sshd.log" \
		-f /etc/ssh/sshd_config -o "ListenAddress=$RHOST:22" \
		-o "PidFile=$E2E_SCRATCH/remote-sshd.pid" -o "HostKey=$RKEYS/ssh_host_ed25519_key" \
		</dev/null &
	RSSHD=$!
	wait_port "$RHOST" 22 5
}
stop_remote_sshd() { kill "$RSSHD" 2>/dev/null; wait "$RSSHD" 2>/dev/null; }

# Its owner bob and his project; provisioned there (the agent ai-dev, git-shell, keys).
useradd -m -s /bin/bash "$BOB"
as_user "$BOB" sh -c "mkdir -p '$BOB_PROJECT' && cd '$BOB_PROJECT' && git init -q -b main &&
	git config user.name Bob && git config user.email bob@example.com &&
	echo bob > bob.txt && git add bob.txt && git commit -qm bob"
check_output "the other machine is provisioned for its owner bob" \
	'^ocsb-provision: [1-9][0-9]* changes$' prov --owner "$BOB" --project "$BOB_PROJECT"
# Started after provisioning, which reloads the machine's sshd for its Match block.
check "the other machine's sshd answers on $RHOST:22" start_remote_sshd
as_user "$AGENT" git config --global user.name Agent
as_user "$AGENT" git config --global user.email agent@example.com

# alice's project here (same name: the agent's clone there is ~ai-dev/shop).
make_project
as_owner git config --global user.name Owner
as_owner git config --global user.email owner@example.com
as_owner sh -c "cd '$PROJECT' && git symbolic-ref HEAD refs/heads/main && echo one > a.txt &&
	git add a.txt && git commit -qm one"

# --- unknown host: refused, nothing trusted on first use
check_fails_output "pull --host of a host never pinned is refused, saying how to pin it" \
	"no pinned host key for $RHOST in .*remote_known_hosts.*ocsb sync init --host $RHOST" \
	ocsb_owner sync pull --host "$RHOST"
check_fails_output "status --host of an unpinned host is refused too" 'no pinned host key' \
	ocsb_owner sync status --host "$RHOST"
ere() { sed 's/[][+.*?^$(){}|\\]/\\&/g' <<<"$1"; } # a literal for grep -E
fp=$(ssh-keygen -lf "$RKEYS/ssh_host_ed25519_key.pub" | awk '{print $2}')
fpre=$(ere "$fp")
check_fails_output "init without --accept-host-key shows the fingerprint and pins nothing" \
	"shows the ssh-ed25519 host key +$fpre nothing was written" \
	ocsb_owner sync init --host "$RHOST"
check_fails "and writes no pin file" test -e "$RPIN"
check_fails_output "init with another fingerprint is refused" 'refusing to pin' \
	ocsb_owner sync init --host "$RHOST" \
	--accept-host-key SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA
check_fails "still no pin file" test -e "$RPIN"
check_output "init with the fingerprint ssh-keygen shows on that machine pins it" \
	"^pinned $RHOST \\(ssh-ed25519 $fpre\\)" ocsb_owner sync init --host "$RHOST" \
	--accept-host-key "$fp"
check_output "the pin is that host key, for that host" \
	"^$RHOST ssh-ed25519 $(ere "$(awk '{print $2}' "$RKEYS/ssh_host_ed25519_key.pub")")$" \
	cat "$RPIN"
check_output "the owner's remote sync key was created, mode 0600" '^600 alice$' \
	stat -c '%a %U' "$RKEY"
check_output "init again: already pinned, the same key" '^already pinned' \
	ocsb_owner sync init --host "$RHOST"

# --- the key is not authorized there yet: a clear error naming the fix
check_fails_output "before the other machine authorizes the key: refused, naming --sync-key" \
	'refused the sync key.*ocsb-provision --sync-key' ocsb_owner sync status --host "$RHOST"
cp "$RKEY.pub" "$E2E_SCRATCH/alice-remote.pub"
check_output "the other machine authorizes alice's key for git only (--sync-key)" \
	'^ocsb-provision: [1-9][0-9]* changes?$' \
	prov --owner "$BOB" --project "$BOB_PROJECT" --sync-key "$E2E_SCRATCH/alice-remote.pub"
check_output "it is authorized with the git-shell forced command, no pty" \
	"^restrict,command=\"/usr/bin/git-shell .* $(ere "$(cut -d' ' -f1-2 "$RKEY.pub")")" \
	cat "/etc/ocsb/keys/$AGENT"
# Declarative, like 'key': the line in ocsb.conf keeps it on every later run.
echo "sync-key \"$E2E_SCRATCH/alice-remote.pub\"" >>/etc/ocsb/ocsb.conf
check_output "with 'sync-key FILE' in ocsb.conf a plain re-run keeps it: 0 changes" \
	'^ocsb-provision: 0 changes$' prov

upload_pack_ls() { printf 0000 | rssh "$RKEY" "git-upload-pack 'shop'"; }
# --- git only: no shell with that key (the owner key of bob would have one)
check_fails "the remote sync key gets no shell there" rssh "$RKEY" id
check_output "positive control: the same key and pin run git-upload-pack there" \
	'refs/heads/main' upload_pack_ls

# --- push, pull, status with --host
check_output "push --host hands alice's branch to the remote agent" \
	'^pushed main -> ai-dev:alice$' ocsb_owner sync push --host "$RHOST" --to alice
check_output "the remote clone has it" "^$(ogit rev-parse main)$" agit rev-parse alice
agit checkout -q -b feature
as_user "$AGENT" sh -c "cd '$AREPO' && echo f > f.txt && git add f.txt && git commit -qm f"
check_output "pull --host fetches the remote agent's branch" "^ai-dev@$RHOST/feature: new" \
	ocsb_owner sync pull --host "$RHOST"
check_output "into refs/remotes/ai-dev@$RHOST/ only" "^$(agit rev-parse feature)$" \
	ogit rev-parse "refs/remotes/ai-dev@$RHOST/feature"
check_output "nothing under refs/remotes/ai-dev/ (kept apart from a local agent)" '^$' \
	ogit for-each-ref refs/remotes/ai-dev/
check_fails "no remote was written to alice's .git/config" ogit config --get-regexp '^remote\.'
check_output "status --host compares without fetching" '^feature .* agent only' \
	ocsb_owner sync status --host "$RHOST"

# --- the host key changed under the pin: refused; init does not re-pin it
stop_remote_sshd
mv "$RKEYS/ssh_host_ed25519_key" "$RKEYS/good" && mv "$RKEYS/ssh_host_ed25519_key.pub" "$RKEYS/good.pub"
ssh-keygen -q -t ed25519 -N '' -C impostor -f "$RKEYS/ssh_host_ed25519_key"
start_remote_sshd
accepted_count() { grep -c "Accepted publickey for $AGENT" "$E2E_SCRATCH/remote-sshd.log" || :; }
accepted=$(accepted_count)
check_fails_output "a changed host key there: pull refuses, pointing at the pin" \
	"host key of $RHOST does not match the pin in .*remote_known_hosts" \
	ocsb_owner sync pull --host "$RHOST"
check_fails_output "push refuses too" 'does not match the pin' \
	ocsb_owner sync push --host "$RHOST" --to alice
check_output "the key was never offered to the impostor" "^$accepted$" accepted_count
newfp=$(ssh-keygen -lf "$RKEYS/ssh_host_ed25519_key.pub" | awk '{print $2}')
check_fails_output "init does not re-pin a changed key, even with its fingerprint" \
	'does not match its pin.*ssh-keygen -R' \
	ocsb_owner sync init --host "$RHOST" --accept-host-key "$newfp"
stop_remote_sshd
mv "$RKEYS/good" "$RKEYS/ssh_host_ed25519_key" && mv "$RKEYS/good.pub" "$RKEYS/ssh_host_ed25519_key.pub"
start_remote_sshd
check_output "positive control: the pinned key back, the same pull works" \
	"^ai-dev@$RHOST/feature: up to date" ocsb_owner sync pull --host "$RHOST"

# --- a non-default port and agent name are part of the pin and of the ref namespace
check_fails_output "the same host on another port is another, unpinned, host" \
	"no pinned host key for \\[$RHOST\\]:2222|cannot connect to $RHOST port 2222" \
	ocsb_owner sync pull --host "$RHOST" --port 2222 --connect-timeout 3
check_fails_output "--port without --host is a usage error" 'go with --host' \
	ocsb_owner sync pull --port 2222
check_fails_output "a host name with shell or ssh syntax is refused" "bad value" \
	ocsb_owner sync pull --host '-oProxyCommand=x'
stop_remote_sshd
ip netns del "$RNS"
