# SPDX-License-Identifier: MIT
# Each bad input gives an error a person can act on, exit 2, and changes nothing.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
useradd -m -s /bin/bash bob

refused() { # DESC REGEX ARGS...: exit 2, message matches, no state change
	local desc=$1 re=$2 out rc
	shift 2
	snapshot_state bad
	out=$("$@" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && grep -Eq -- "$re" <<<"$out"; then
		pass "$desc: refused"
	else
		fail "$desc: refused (want exit 2 and /$re/)" "exit $rc" "$out"
	fi
	state_unchanged "$desc: nothing changed" bad
}

refused "unknown owner" "unknown owner 'nosuch': no such user" prov --owner nosuch --project "$PROJECT"
refused "invalid agent name" "--agent 'Bad Name' is not a valid user name" provision --agent 'Bad Name'
refused "agent name with a slash" "is not a valid user name" provision --agent '../etc'
refused "agent is a system account" "'daemon' is a system account" provision --agent daemon
refused "agent is root" "system account|cannot be root" provision --agent root
refused "agent is an existing user" "user 'bob' already exists .* pass --adopt" provision --agent bob
refused "agent is the owner" "same user" provision --agent "$OWNER"
as_owner mkdir -p "$OWNER_HOME/notgit"
refused "project is not a git repository" "project $OWNER_HOME/notgit: not a git repository" provision --project "$OWNER_HOME/notgit"
refused "project does not exist" "project /nonexistent: No such file" provision --project /nonexistent
mkdir -p /root/secret && git -C /root/secret init -q && chmod 700 /root
refused "project the owner cannot read" "project /root/secret: Permission denied" provision --project /root/secret
refused "no owner at all" "no owner given" prov --project "$PROJECT"
refused "bad key file" "bad.pub:1: not a public key line|bad.pub:1: unknown key type" \
	bash -c "echo 'hello world' > /root/bad.pub && '$OCSB_BUILD/ocsb-provision' --owner $OWNER --project $PROJECT --key /root/bad.pub"
refused "--purge without --remove" "--purge is only valid with --remove" prov --purge
refused "--purge abbreviated" "'--purg': options that delete take their full name: type --purge" prov --remove --purg
refused "--remove abbreviated" "'--rem': options that delete take their full name: type --remove" prov --rem
refused "relative project from /" "project /code/shop: No such file" bash -c "cd / && '$OCSB_BUILD/ocsb-provision' --owner $OWNER --project code/shop"
refused "relative project from /, ./ form" "project /code/shop: No such file" bash -c "cd / && '$OCSB_BUILD/ocsb-provision' --owner $OWNER --project ./code/shop"
refused "two modes" "cannot be combined" prov --check --dry-run
refused "not root" "must run as root" as_owner "$OCSB_BUILD/ocsb-provision" --owner "$OWNER"

mkdir -p /etc/ocsb
printf 'agent ai-dev\n# comment\nagnet typo\n' >/etc/ocsb/ocsb.conf
refused "config with an unknown keyword" "^ocsb-provision: error: /etc/ocsb/ocsb.conf:3: unknown keyword 'agnet'" provision
printf 'agent ai-dev\nproject "/x\n' >/etc/ocsb/ocsb.conf
refused "config with an open quote" "/etc/ocsb/ocsb.conf:2: unterminated double quote" provision
printf 'agent ai-dev\n' >/etc/ocsb/ocsb.conf
chmod 0664 /etc/ocsb/ocsb.conf
refused "group-writable config" "ocsb.conf: file is writable by group or others" provision
chmod 0644 /etc/ocsb/ocsb.conf
chown "$OWNER" /etc/ocsb/ocsb.conf
refused "config owned by another user" "ocsb.conf: file is owned by uid [0-9]+; it must belong to root" provision
rm -f /etc/ocsb/ocsb.conf

# sshd missing: an empty, non-executable file in its place.
: >"$E2E_SCRATCH/nosshd"
mount --bind "$E2E_SCRATCH/nosshd" /usr/sbin/sshd
refused "sshd missing" "sshd not found at /usr/sbin/sshd: install .*apt-get install openssh-server" provision
umount /usr/sbin/sshd

# Nothing listens on the configured ssh port: found before the first change.
mkdir -p /etc/ocsb
printf 'ssh-port 2222\n' >/etc/ocsb/ocsb.conf
refused "sshd not listening on ssh-port" "nothing accepts ssh connections on 127.0.0.1:2222: start sshd first" provision
rm -f /etc/ocsb/ocsb.conf

# An sshd configuration that is already broken is not touched.
cp /etc/ssh/sshd_config "$E2E_SCRATCH/sshd_config.orig"
echo "NoSuchSshdKeyword yes" >>/etc/ssh/sshd_config
refused "broken sshd config beforehand" "does not pass 'sshd -t'" provision
cp "$E2E_SCRATCH/sshd_config.orig" /etc/ssh/sshd_config

# Another run holds the lock.
mkdir -p /run/ocsb
flock /run/ocsb/provision.lock sleep 3 &
sleep 0.3
refused "concurrent run" "another ocsb-provision is running" provision
wait

# An sshd file that overrides ours is caught after writing, and everything is put back.
printf 'Match User %s\n\tAuthorizedKeysFile .ssh/authorized_keys\n' "$AGENT" >/etc/ssh/sshd_config.d/00-local.conf
out=$(provision 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "another configuration file sets it first" <<<"$out" && pass "overriding sshd file detected" || fail "overriding sshd file detected" "exit $rc" "$out"
check_fails "our drop-in was rolled back" test -e /etc/ssh/sshd_config.d/ocsb-$AGENT.conf
check "sshd config still valid" sshd -t
rm /etc/ssh/sshd_config.d/00-local.conf
check_output "positive control: with the override gone the run completes" '^ocsb-provision: [1-9]' provision

# --adopt takes over an existing account on purpose.
check_output "--adopt takes over an existing user" "adopt existing account bob" provision --agent bob --adopt --project "$PROJECT"
check_output "adopted account converges" '^ocsb-provision: 0 changes$' provision --agent bob --project "$PROJECT"
