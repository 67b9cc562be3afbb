# SPDX-License-Identifier: MIT
# --remove undoes the setup and keeps the account; --remove --purge leaves nothing of the uid.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"

# cron.deny and at.deny as they were before ocsb (issue 28, item 8: an empty cron.deny ocsb
# had made was left behind).
mkdir -p "$E2E_SCRATCH/deny"
for f in cron.deny at.deny; do
	[ ! -e "/etc/$f" ] || cp -a "/etc/$f" "$E2E_SCRATCH/deny/$f"
done
make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision
for f in cron.deny at.deny; do
	if [ -e "$E2E_SCRATCH/deny/$f" ]; then
		check_output "$f (the machine's) lists the agent, its lines kept" "^$AGENT\$" \
			bash -c "diff '$E2E_SCRATCH/deny/$f' /etc/$f | sed -n 's/^> //p'"
	else
		check_output "$f (none before) is made, marked as ocsb's" \
			"^# Made by ocsb-provision: removed with the last user it lists\.,$AGENT,\$" \
			bash -c "tr '\n' , </etc/$f"
	fi
done
check_output "positive control: ssh works before removal" "^$AGENT$" owner_ssh "$AGENT" id -un
uid=$(id -u "$AGENT")

# A warden between two supervisors answers on no control socket, yet would put the table
# back: --remove refuses while a root process runs ocsb-warden (a copy of sleep so named
# stands in), and another account's process of that name holds nothing up (the control is
# the --remove below, with it running).
fake_dir=$(mktemp -d /tmp/ocsb-fake-warden.XXXXXX) && chmod 0755 "$fake_dir" &&
	install -m 0755 /bin/sleep "$fake_dir/ocsb-warden"
"$fake_dir/ocsb-warden" 300 &
fake_warden=$!
check_fails_output "--remove refuses while ocsb-warden runs (no supervisor answering)" \
	"ocsb-warden is running \\(pid $fake_warden\\) and would put the netlock back" prov --remove
check "and the agent is still there" id -u "$AGENT"
kill "$fake_warden"; wait "$fake_warden" 2>/dev/null
setpriv --reuid=65534 --regid=65534 --clear-groups "$fake_dir/ocsb-warden" 300 &
fake_warden=$!

check_output "--remove succeeds" '^ocsb-provision: [1-9][0-9]* removals?$' prov --remove
kill "$fake_warden"; wait "$fake_warden" 2>/dev/null
rm -rf "$fake_dir"
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

# What provisioning writes where systemd runs (there is none in the namespace): the unit's
# /etc copy of a make install, its enabling link and the agent's slice drop-in. The
# guest test found all three left after --remove --purge.
units=/etc/systemd/system
mkdir -p "$units/multi-user.target.wants" "$units/user-$uid.slice.d"
{ echo "# Written by ocsb-provision; edits are overwritten."; cat "$OCSB_BUILD/gen/ocsb-agentd.service"; } \
	>"$units/ocsb-agentd.service"
ln -sf "$units/ocsb-agentd.service" "$units/multi-user.target.wants/ocsb-agentd.service"
printf '# Written by ocsb-provision; edits are overwritten.\n[Slice]\nIPAddressDeny=any\n' \
	>"$units/user-$uid.slice.d/ocsb.conf"
check "positive control: state under /var/lib/ocsb before the purge" test -d /var/lib/ocsb/agents
# What ocsb-agentd keeps for a project (its OpenCode password) and the agent's fake identity
# (issue 15: both were found left after --remove --purge of the only agent).
mkdir -p /var/lib/ocsb/agentd && (umask 077 && echo pw0123456789abcdef >"/var/lib/ocsb/agentd/$(basename "$PROJECT").password")
check "positive control: the agent's identity exists before the purge" test -d "/var/lib/ocsb/identity/$AGENT"

# What a sync pull leaves in the owner's repository: the agent's branches, ocsb sync's files.
as_owner git -C "$PROJECT" -c user.name=o -c user.email=o@example.org commit -q --allow-empty -m one
as_owner git -C "$PROJECT" update-ref "refs/remotes/$AGENT/work" HEAD
as_owner touch "$PROJECT/.git/ocsb-sync.lock" "$PROJECT/.git/ocsb-sync.review"
check "positive control: the agent's branch is in the owner's repository" \
	as_owner git -C "$PROJECT" rev-parse -q --verify "refs/remotes/$AGENT/work"

rc=0
prov --remove --purge >"$E2E_SCRATCH/purge.out" 2>&1 || rc=$?
check_output "--remove --purge succeeds" '^ocsb-provision: [1-9]' \
	bash -c "cat '$E2E_SCRATCH/purge.out'; exit $rc"
for f in cron.deny at.deny; do
	if [ -e "$E2E_SCRATCH/deny/$f" ]; then
		check "$f is as it was before ocsb" cmp "$E2E_SCRATCH/deny/$f" "/etc/$f"
	else
		check_fails "$f, made by ocsb, is removed" test -e "/etc/$f"
	fi
done
# The owner's repository is the owner's: root leaves it and names what stays, with the
# command that removes it (issue 28, item 8).
check_output "the removal names what stays in the owner's repository, and the command" \
	"^kept in $OWNER's repository $PROJECT: the agent's branches refs/remotes/$AGENT/\* and ocsb sync's \.git/ocsb-sync\.\* .*; to remove them, as $OWNER: git -C " \
	cat "$E2E_SCRATCH/purge.out"
cmd=$(sed -n "s|^kept in $OWNER's repository $PROJECT: .*, as $OWNER: ||p" "$E2E_SCRATCH/purge.out")
check "  ... the command runs as the owner" as_owner sh -c "$cmd"
check_output "  ... and the agent's branches are gone" '^$' \
	as_owner git -C "$PROJECT" for-each-ref "refs/remotes/$AGENT/"
check_output "  ... and ocsb sync's files" '^$' find "$PROJECT/.git" -maxdepth 1 -name 'ocsb-sync.*'
check "  ... the owner's own branch is kept (control)" as_owner git -C "$PROJECT" rev-parse -q --verify HEAD
# Back to a project without commits, as the rest of this file expects.
as_owner sh -c "git -C '$PROJECT' update-ref -d \"\$(git -C '$PROJECT' symbolic-ref HEAD)\""
check_fails "account deleted" getent passwd "$AGENT"
check_fails "group deleted" getent group "$AGENT"
check_fails "home deleted" test -e /home/$AGENT
check_fails "no process of the uid left" pgrep -u "$uid"
places=(/home /run /tmp /var/tmp /dev/shm /etc /var/lib /var/spool /var/mail)
root_writable && places=(/ "${places[@]}")
left=$(find "${places[@]}" -xdev -uid "$uid" 2>/dev/null | head)
[ -z "$left" ] && pass "no file owned by uid $uid anywhere" || fail "files of uid $uid remain" "$left"
check_fails "config removed by --purge" test -e /etc/ocsb/ocsb.conf
check_fails "state removed by --purge" test -e /var/lib/ocsb/agents/$AGENT
check_fails "unit copy in /etc removed by --purge" test -e "$units/ocsb-agentd.service"
check_fails "unit's enabling link removed by --purge" test -L "$units/multi-user.target.wants/ocsb-agentd.service"
check_fails "slice drop-in removed by --purge" test -e "$units/user-$uid.slice.d/ocsb.conf"
check_fails "empty slice drop-in directory removed" test -e "$units/user-$uid.slice.d"
check_fails "agentd's OpenCode password removed with the last agent" test -e "/var/lib/ocsb/agentd/$(basename "$PROJECT").password"
check_fails "the agent's identity removed with the last agent" test -e "/var/lib/ocsb/identity/$AGENT"
check_fails "/var/lib/ocsb removed with the last agent" test -e /var/lib/ocsb
check_fails "/var/log/ocsb (the supervisor's logs) removed with the last agent" test -e /var/log/ocsb
# Like ocsb-inject's, the supervisor's account stays (apt purge ocsb removes it): owns no file.
check "the system account ocsb-agentd is kept" getent passwd ocsb-agentd
places=(/home /run /tmp /var/tmp /dev/shm /etc /var/lib /var/log /var/spool)
root_writable && places=(/ "${places[@]}")
left=$(find "${places[@]}" -xdev -user ocsb-agentd 2>/dev/null | head)
[ -z "$left" ] && pass "no file owned by ocsb-agentd left" || fail "files of ocsb-agentd remain" "$left"
check_fails "/etc/ocsb removed with the last agent" test -e /etc/ocsb
check_fails "pam_namespace line gone from /etc/pam.d/sshd" grep -q 'ocsb-provision' /etc/pam.d/sshd
check_fails "agent gone from cron.deny and at.deny" grep -qx "$AGENT" /etc/cron.deny /etc/at.deny
left=$(find /etc /var/lib /var/log /var/spool /home -xdev -name '*ocsb*' 2>/dev/null | head)
[ -z "$left" ] && pass "no file named *ocsb* left in /etc, /var/lib, /var/log, /var/spool, /home" ||
	fail "ocsb files remain after --remove --purge" "$left"
check "sshd config still valid after purge" sshd -t
check_output "positive control: the owner still logs in to her own account" "^$OWNER$" owner_ssh "$OWNER" id -un
check_output "provisioning again after a purge works" '^ocsb-provision: [1-9]' provision
check_output "and converges" '^ocsb-provision: 0 changes$' provision

# --- One agent of two (issue 15): --remove --purge takes that agent's state under
# /var/lib/ocsb (its fake identity, its mirror, its state file; agentd's OpenCode passwords
# and stored secrets only with the agent agentd serves, the one of /etc/ocsb/ocsb.conf)
# and leaves the other's.
TWO=ai-two
TWO_CONF=/etc/ocsb/two.conf
PW=/var/lib/ocsb/agentd/$(basename "$PROJECT").password
REC=/var/lib/ocsb/agentd/secrets.rec
prov_two() { prov --config "$TWO_CONF" "$@"; }
agentd_state() { # what ocsb-agentd keeps for the agent it serves (it does not run here)
	mkdir -p /var/lib/ocsb/agentd && (umask 077 && echo pw0123456789abcdef >"$PW" && echo rec >"$REC")
	# written by the supervisor as its account (issue 26)
	chown ocsb-agentd:ocsb-agentd "$PW" "$REC"
}
make_two() {
	{ grep -v '^agent ' /etc/ocsb/ocsb.conf; echo "agent $TWO"; } >"$TWO_CONF"
	check_output "a second agent $TWO, from its own configuration" '^ocsb-provision: [1-9]' prov_two
}
make_two
agentd_state
for a in "$AGENT" "$TWO"; do
	check "positive control: $a's identity exists" test -d "/var/lib/ocsb/identity/$a"
	check "positive control: $a's mirror exists" test -d "/var/lib/ocsb/mirror/$a"
	check "positive control: $a's state file exists" test -f "/var/lib/ocsb/agents/$a"
done
check_output "--remove --purge of $TWO while $AGENT remains keeps the machine's network state" \
	"^kept the nftables table inet ocsb, the egress proxy and its rules: 1 other agent remains\$" \
	prov_two --remove --purge
check_fails "$TWO's account is gone" getent passwd "$TWO"
check_fails "$TWO's identity is gone" test -e "/var/lib/ocsb/identity/$TWO"
check_fails "$TWO's mirror is gone" test -e "/var/lib/ocsb/mirror/$TWO"
check_fails "$TWO's mirror status and links files are gone" \
	test -e "/var/lib/ocsb/mirror/$TWO.status" -o -e "/var/lib/ocsb/mirror/$TWO.links"
check_fails "$TWO's state file is gone" test -e "/var/lib/ocsb/agents/$TWO"
check "control: $AGENT's identity stays" test -d "/var/lib/ocsb/identity/$AGENT"
check "control: $AGENT's mirror stays" test -d "/var/lib/ocsb/mirror/$AGENT"
check "control: $AGENT's mirror links file stays" test -f "/var/lib/ocsb/mirror/$AGENT.links"
check "control: $AGENT's state file stays" test -f "/var/lib/ocsb/agents/$AGENT"
check "control: agentd's OpenCode password stays ($AGENT's: agentd serves it)" test -f "$PW"
check "control: agentd's stored secrets stay ($AGENT's)" test -f "$REC"
check "the egress rules stay for $AGENT" test -f /etc/ocsb/egress.conf
check "the secrets sealing key stays for $AGENT" test -f /var/lib/ocsb/agentd/secrets.key
check "the pam_namespace line stays for $AGENT's sessions" grep -q 'ocsb-provision' /etc/pam.d/sshd
check "$AGENT's pam_namespace entry stays" test -f "/etc/security/namespace.d/ocsb-$AGENT.conf"
# The remove took $TWO's uid out of the table's set and left it right for $AGENT.
check_output "control: $AGENT converges at once" '^ocsb-provision: 0 changes$' provision
check_output "control: ssh as $AGENT still works" "^$AGENT$" owner_ssh "$AGENT" id -un

make_two
check_output "--remove --purge of $AGENT (agentd's) while $TWO remains" \
	"^kept the nftables table inet ocsb, the egress proxy and its rules: 1 other agent remains\$" \
	prov --remove --purge
check_fails "$AGENT's identity is gone" test -e "/var/lib/ocsb/identity/$AGENT"
check_fails "$AGENT's mirror is gone" test -e "/var/lib/ocsb/mirror/$AGENT"
check_fails "agentd's OpenCode password for $AGENT's project is gone" test -e "$PW"
check_fails "agentd's stored secrets for $AGENT are gone" test -e "$REC"
check "control: $TWO's identity stays" test -d "/var/lib/ocsb/identity/$TWO"
check "control: $TWO's mirror stays" test -d "/var/lib/ocsb/mirror/$TWO"
check "control: $TWO's state file stays" test -f "/var/lib/ocsb/agents/$TWO"
check_output "control: $TWO still converges" '^ocsb-provision: 0 changes$' prov_two
check_output "control: ssh as $TWO works" "^$TWO$" owner_ssh "$TWO" id -un
check_output "--remove --purge of $TWO, the last agent" '^ocsb-provision: [1-9]' prov_two --remove --purge
check_fails "/var/lib/ocsb removed with the last agent of two" test -e /var/lib/ocsb

# --- The netlock of every agent (known issue "Several agents", fixed): one table, the set
# agents of their uids. Each "blocked" probe is paired with the same request through the
# proxy (the agent's way out) and with root's and the owner's direct request.
fake_internet_up >/dev/null 2>&1 && pass "fake internet up" || fail "fake internet up"
mkdir -p /etc/ocsb
printf 'allow allowed.test\nblock blocked.test\n' >/etc/ocsb/egress.conf
check_output "$AGENT provisioned again" '^ocsb-provision: [1-9]' provision
make_two
in_set() { nft list set inet ocsb agents | grep -Eq "[{ ,]$1([ ,}]|\$)"; }
direct() { as_user "$1" curl -sS --max-time 3 --noproxy '*' http://198.18.1.10/; }
proxied() { as_user "$1" curl -sS --max-time 5 -x http://127.0.0.1:3128 http://allowed.test/; }
locked() { # DESC: both agents blocked directly, both through the proxy, root and the owner not
	local a
	for a in "$AGENT" "$TWO"; do
		check "$1: $a's uid is in the set" in_set "$(id -u "$a")"
		check_fails "$1: $a's direct connection to the internet is blocked" direct "$a"
		check_output "$1: control: $a reaches it through the proxy" "WEB allowed.test" proxied "$a"
	done
	check_output "$1: control: root connects directly" "WEB allowed.test" curl -sS --max-time 3 --noproxy '*' http://198.18.1.10/
	check_output "$1: control: the owner connects directly" "WEB allowed.test" direct "$OWNER"
}
locked "two agents"
check_output "one rule serves both: meta skuid @agents jump agent" '^1$' bash -c "nft list table inet ocsb | grep -c 'meta skuid @agents jump agent'"
check_output "$AGENT converges (its run keeps $TWO's uid)" '^ocsb-provision: 0 changes$' provision
check_output "$TWO converges (its run keeps $AGENT's uid)" '^ocsb-provision: 0 changes$' prov_two
check_output "--check is clean for $AGENT" '^ocsb-provision: 0 differences' provision --check
check_output "--check is clean for $TWO" '^ocsb-provision: 0 differences' prov_two --check

# Each agent's own agent-ports range, whoever applies the table (known issue "Several
# agents": the one range of the configuration that applied it was open to every agent in
# the set). The range rule matches the agent's uid; the other agents' ranges come from
# their registry entries. A listener in each range on 127.0.0.1 (root's, like the owner's
# database): each agent reaches its own, is reset on the other's; root and the owner reach
# both (controls).
set_ports() { sed -i '/^agent-ports /d' "$1" && echo "agent-ports $2" >>"$1"; }
SERVERS=()
local_server() { # PORT: a banner "LOCAL-PORT" on 127.0.0.1:PORT
	python3 -c 'import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c,_=s.accept(); c.sendall(b"LOCAL-%s\n" % sys.argv[1].encode()); c.close()' "$1" >/dev/null 2>&1 &
	SERVERS+=($!)
	wait_port 127.0.0.1 "$1" 5
}
banner_as() { as_user "$1" timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" && head -1 <&3' "$2"; }
own_ranges() { # DESC A-PORT B-PORT: $AGENT's range holds A-PORT, $TWO's B-PORT
	local u
	for u in root "$OWNER"; do
		check_output "$1: control: $u reaches 127.0.0.1:$2 ($AGENT's range)" "LOCAL-$2" banner_as "$u" "$2"
		check_output "$1: control: $u reaches 127.0.0.1:$3 ($TWO's range)" "LOCAL-$3" banner_as "$u" "$3"
	done
	check_output "$1: $AGENT reaches its own range (127.0.0.1:$2)" "LOCAL-$2" banner_as "$AGENT" "$2"
	check_output "$1: $TWO reaches its own range (127.0.0.1:$3)" "LOCAL-$3" banner_as "$TWO" "$3"
	check_fails_output "$1: $AGENT is reset on $TWO's range (127.0.0.1:$3)" "refused" banner_as "$AGENT" "$3"
	check_fails_output "$1: $TWO is reset on $AGENT's range (127.0.0.1:$2)" "refused" banner_as "$TWO" "$2"
}
local_server 9005
local_server 9105
local_server 9205
set_ports /etc/ocsb/ocsb.conf 9000-9009
set_ports "$TWO_CONF" 9100-9109
check_output "$TWO's run records its agent-ports 9100-9109" "record $TWO's agent-ports 9100-9109" prov_two
check "its registry entry has the line" grep -qx 'ports 9100-9109' "/var/lib/ocsb/agents/$TWO"
check_output "$AGENT's run (agent-ports 9000-9009) applies the table" "^\+ install the nftables table inet ocsb" provision
own_ranges "$AGENT's run applied the table" 9005 9105
check_output "one range rule per agent, with its uid" '^2$' bash -c "nft list chain inet ocsb agent | grep -Ec 'meta skuid [0-9]+ fib daddr type local tcp dport (9000-9009|9100-9109) accept'"
check_fails "no range rule without a uid" bash -c "nft list chain inet ocsb agent | grep -E '^[[:space:]]*fib daddr type local tcp dport [0-9]+-[0-9]+ accept'"
check_output "$TWO converges: $AGENT's run gave it its own range" '^ocsb-provision: 0 changes$' prov_two
nft flush ruleset
check_output "$TWO's run applies the table after a flush" "^\+ install the nftables table inet ocsb" prov_two
own_ranges "$TWO's run applied the table" 9005 9105
check_output "$AGENT converges: $TWO's run gave it its own range" '^ocsb-provision: 0 changes$' provision
check_output "--check is clean for $AGENT with two ranges" '^ocsb-provision: 0 differences' provision --check
check_output "--check is clean for $TWO with two ranges" '^ocsb-provision: 0 differences' prov_two --check
# A range changed in a configuration is drift for it until its run records and applies it.
set_ports "$TWO_CONF" 9110-9119
check_fails_output "--check for $TWO names the changed range (exit 1)" "drift: record $TWO's agent-ports 9110-9119" prov_two --check
set_ports "$TWO_CONF" 9100-9109
# An entry without the line (written before ranges were recorded): no range, fail closed.
sed -i '/^ports /d' "/var/lib/ocsb/agents/$TWO"
check_output "$AGENT's run with $TWO's entry lacking its ports line" "^\+ install the nftables table inet ocsb" provision
check_fails_output "$TWO has no range without its entry's line" "refused" banner_as "$TWO" 9105
check_output "control: $AGENT keeps its own" "LOCAL-9005" banner_as "$AGENT" 9005
check_output "$TWO's next run writes the line again" "record $TWO's agent-ports 9100-9109" prov_two
own_ranges "the line written again" 9005 9105

# Ranges that overlap (issue 25): one agent's range over another's lets each reach the
# servers the other runs there, and a range over another agent's OpenCode ports lets it
# reach that agent's OpenCode. Refused before any change, by --check and --dry-run alike,
# naming both agents, both ranges and the line of the keyword; a disjoint range is taken.
kw_line() { grep -n "^$2 " "$1" | cut -d: -f1; }
ruleset_same() { nft list ruleset | diff -q "$E2E_SCRATCH/ruleset-overlap" - >/dev/null; }
refused_everywhere() { # DESC REGEX PROV-FUNCTION: refused in each mode, nothing changed
	local m
	snapshot_state overlap
	nft list ruleset >"$E2E_SCRATCH/ruleset-overlap"
	for m in apply --check --dry-run; do
		check_fails_output "$1 ($m)" "$2" "$3" $([ $m = apply ] || echo $m)
	done
	state_unchanged "$1: no file changed" overlap
	check "$1: the table is unchanged" ruleset_same
}
check "positive control: $AGENT's entry records its OpenCode ports" grep -qx 'opencode-ports 4096-4096' "/var/lib/ocsb/agents/$AGENT"
set_ports "$TWO_CONF" 9005-9104
refused_everywhere "$TWO's agent-ports 9005-9104 over $AGENT's 9000-9009 is refused" \
	"^ocsb-provision: error: $TWO_CONF:$(kw_line "$TWO_CONF" agent-ports): agent-ports 9005-9104 of $TWO overlaps agent-ports 9000-9009 of $AGENT \(/var/lib/ocsb/agents/$AGENT\)" prov_two
check "$TWO's entry still records 9100-9109" grep -qx 'ports 9100-9109' "/var/lib/ocsb/agents/$TWO"
check_fails_output "$TWO is still reset on $AGENT's range (127.0.0.1:9005)" "refused" banner_as "$TWO" 9005
set_ports "$TWO_CONF" 9100-9109
set_ports /etc/ocsb/ocsb.conf 9109-9120
refused_everywhere "$AGENT's agent-ports 9109-9120 over $TWO's 9100-9109 is refused" \
	"^ocsb-provision: error: /etc/ocsb/ocsb.conf:$(kw_line /etc/ocsb/ocsb.conf agent-ports): agent-ports 9109-9120 of $AGENT overlaps agent-ports 9100-9109 of $TWO" provision
set_ports /etc/ocsb/ocsb.conf 9000-9009
set_ports "$TWO_CONF" 4090-4099
echo 'opencode-port 4196' >>"$TWO_CONF" # its own OpenCode ports outside its range
refused_everywhere "$TWO's agent-ports 4090-4099 over $AGENT's OpenCode port 4096 is refused" \
	"^ocsb-provision: error: $TWO_CONF:$(kw_line "$TWO_CONF" agent-ports): agent-ports 4090-4099 of $TWO overlaps the OpenCode ports 4096-4096 of $AGENT \(/var/lib/ocsb/agents/$AGENT\)" prov_two
sed -i '/^opencode-port /d' "$TWO_CONF"
set_ports "$TWO_CONF" 9100-9109
echo 'opencode-port 9105' >>/etc/ocsb/ocsb.conf
refused_everywhere "$AGENT's opencode-port 9105 in $TWO's agent-ports 9100-9109 is refused" \
	"^ocsb-provision: error: /etc/ocsb/ocsb.conf:$(kw_line /etc/ocsb/ocsb.conf opencode-port): the OpenCode ports 9105-9105 of $AGENT \(opencode-port 9105, one per project\) overlap agent-ports 9100-9109 of $TWO" provision
sed -i '/^opencode-port /d' /etc/ocsb/ocsb.conf
set_ports "$TWO_CONF" 9010-9099
check_output "control: a disjoint range beside $AGENT's (9010-9099) is taken" "record $TWO's agent-ports 9010-9099" prov_two
set_ports "$TWO_CONF" 9100-9109
check_output "$TWO back to 9100-9109" "record $TWO's agent-ports 9100-9109" prov_two
check_output "control: $AGENT converges" '^ocsb-provision: 0 changes$' provision
own_ranges "after the refused overlaps" 9005 9105

# ocsb doctor (root) names whom the table covers, and fails when its agent is not among them.
doc() { "$OCSB_BUILD/ocsb" doctor; true; }
check_output "doctor (root): the table covers $AGENT" "^OK +netlock +.*covers .*$AGENT \($(id -u "$AGENT")\)" doc
check_output "doctor (root): the table covers $TWO" "^OK +netlock +.*covers .*$TWO \($(id -u "$TWO")\)" doc
nft delete element inet ocsb agents "{ $(id -u "$AGENT") }"
check_fails "positive control: $AGENT's uid taken out by hand" in_set "$(id -u "$AGENT")"
check_output "doctor (root) fails: the table does not cover $AGENT" "^FAIL +netlock +table inet ocsb does not cover $AGENT" doc

# A registry entry whose account was deleted by hand is named; processes may still run under
# its recorded uid, so that uid stays locked until a purge forgets the entry. The rest applies.
(umask 077 && printf 'agent ghost\norigin created\nuid 4242\n' >/var/lib/ocsb/agents/ghost)
check_output "a stale entry (no account ghost) is named" "no account for ghost: its recorded uid 4242 stays in the set" provision
check "and the table is right again: $AGENT's uid is back" in_set "$(id -u "$AGENT")"
check "ghost's recorded uid stays in the set" in_set 4242
(umask 077 && printf 'agent ghost\norigin created\n' >/var/lib/ocsb/agents/ghost)
check_output "an entry without account or recorded uid is named" "no account for ghost: left out" provision
check_fails "and then nothing of it is in the set" in_set 4242
rm -f /var/lib/ocsb/agents/ghost
# A registry name of a system account: squid's own egress through itself would cut every
# agent off, so the proxy's uid never enters the set.
proxy_uid=$(id -u proxy)
(umask 077 && printf 'agent proxy\norigin created\n' >/var/lib/ocsb/agents/proxy)
check_output "the entry proxy is named and left out" "proxy has uid $proxy_uid, the proxy's: left out" provision
check_fails "the proxy's uid $proxy_uid is not in the set" in_set "$proxy_uid"
rm -f /var/lib/ocsb/agents/proxy
locked "a system account in the registry changes nothing"

# ocsb-agentd (serving $AGENT, the agent of ocsb.conf) restores the set of both after a flush.
start_agentd() {
	OCSB_TEST_HOOKS=1 setsid "$OCSB_BUILD/ocsb-warden" --foreground -v \
		>>"$E2E_SCRATCH/agentd-30.log" 2>&1 </dev/null &
	AGENTD=$!
}
start_agentd
check "ocsb-agentd's control socket appears" wait_for 20 test -S /run/ocsb/agentd.sock
check "ocsb-agentd's proxy listens" wait_for 20 bash -c "ss -Hltn 'sport = :3128' | grep -q LISTEN"
nft flush ruleset
check "ocsb-agentd restores the table after nft flush ruleset" wait_for 10 nft list set inet ocsb agents
locked "after a flush, restored by ocsb-agentd"
own_ranges "restored by ocsb-agentd" 9005 9105
# $TWO's range changed while ocsb-agentd runs: its run applies the table with the new range,
# and agentd, reading the registry again on that change, keeps it (a read-back that
# compared only the uids would put the old range back).
set_ports "$TWO_CONF" 9200-9209
check_output "$TWO's run with agent-ports 9200-9209 while ocsb-agentd runs" "record $TWO's agent-ports 9200-9209" prov_two
sleep 1
check_output "$TWO reaches its new range (127.0.0.1:9205) with ocsb-agentd running" "LOCAL-9205" banner_as "$TWO" 9205
check_fails_output "$TWO is reset on its old range (127.0.0.1:9105)" "refused" banner_as "$TWO" 9105
check_fails_output "$AGENT is reset on $TWO's new range (127.0.0.1:9205)" "refused" banner_as "$AGENT" 9205
check_output "control: $AGENT reaches its own (127.0.0.1:9005)" "LOCAL-9005" banner_as "$AGENT" 9005
check "ocsb-agentd's guard has $TWO's new range" bash -c "nft list chain inet ocsb_guard agent | grep -q 'meta skuid $(id -u "$TWO") fib daddr type local tcp dport 9200-9209 accept'"
check_output "--check is clean for $TWO after its change, agentd running" '^ocsb-provision: 0 differences' prov_two --check
set_ports "$TWO_CONF" 9100-9109
check_output "$TWO back to 9100-9109" "record $TWO's agent-ports 9100-9109" prov_two
check "ocsb-agentd's guard holds both uids too" bash -c "nft list set inet ocsb_guard agents | grep -q '$(id -u "$TWO")'"
# An agent provisioned while ocsb-agentd runs: agentd reads the registry again, keeps its uid.
THREE=ai-three
THREE_CONF=/etc/ocsb/three.conf
{ grep -v '^agent ' /etc/ocsb/ocsb.conf; echo "agent $THREE"; } >"$THREE_CONF"
set_ports "$THREE_CONF" 9300-9309 # its own: $AGENT's 9000-9009 would be refused
check_output "a third agent provisioned while ocsb-agentd runs" '^ocsb-provision: [1-9]' prov --config "$THREE_CONF"
sleep 1
check "ocsb-agentd keeps $THREE's uid in the set" in_set "$(id -u "$THREE")"
check "and in its guard" bash -c "nft list set inet ocsb_guard agents | grep -q '$(id -u "$THREE")'"
check_fails "$THREE's direct connection is blocked" direct "$THREE"
check_output "control: $THREE reaches the internet through the proxy" "WEB allowed.test" proxied "$THREE"
check_output "--check is clean for $TWO while ocsb-agentd runs" '^ocsb-provision: 0 differences' prov_two --check
kill "$AGENTD"
wait "$AGENTD" 2>/dev/null
# $THREE's account deleted by hand while a process of its uid runs: the uid stays locked.
three_uid=$(id -u "$THREE")
as_user "$THREE" setsid sleep 1000 </dev/null >/dev/null 2>&1 &
three_pid=$!
sleep 0.2
check "positive control: a process of $THREE runs" pgrep -u "$three_uid" sleep
check "userdel -f -r $THREE while it runs" userdel -f -r "$THREE"
check_fails "positive control: $THREE has no account" getent passwd "$THREE"
check_output "the stale entry is named, its uid kept" "no account for $THREE: its recorded uid $three_uid stays in the set" provision
check "$THREE's uid $three_uid stays in the set" in_set "$three_uid"
by_uid() { setpriv --reuid="$three_uid" --regid="$three_uid" --clear-groups --reset-env "$@"; }
check_fails "uid $three_uid's direct connection is still blocked" by_uid curl -sS --max-time 3 --noproxy '*' http://198.18.1.10/
check_output "control: uid $three_uid reaches it through the proxy" "WEB allowed.test" by_uid curl -sS --max-time 5 -x http://127.0.0.1:3128 http://allowed.test/
kill "$three_pid"
wait "$three_pid" 2>/dev/null
check_output "--remove --purge of $THREE" "^kept the nftables table inet ocsb" prov --config "$THREE_CONF" --remove --purge
check_fails "the purge forgot $THREE: its uid has left the set" in_set "$three_uid"
check_output "squid for the agents again, without ocsb-agentd" '^ocsb-provision: [0-9]' provision

# --remove of one agent: its uid leaves the set, the other stays locked.
two_uid=$(id -u "$TWO")
check_output "--remove --purge of $TWO while $AGENT remains" \
	"^kept the nftables table inet ocsb, the egress proxy and its rules: 1 other agent remains\$" \
	prov_two --remove --purge
check_fails "$TWO's uid $two_uid has left the set" in_set "$two_uid"
check "$AGENT's uid stays in the set" in_set "$(id -u "$AGENT")"
check_fails "$AGENT's direct connection is still blocked" direct "$AGENT"
check_output "control: $AGENT reaches the internet through the proxy" "WEB allowed.test" proxied "$AGENT"
check_output "control: root connects directly" "WEB allowed.test" curl -sS --max-time 3 --noproxy '*' http://198.18.1.10/
check_output "$AGENT converges after the remove" '^ocsb-provision: 0 changes$' provision
check_output "--remove --purge of $AGENT, the last agent" '^ocsb-provision: [1-9]' prov --remove --purge
check_fails "the table goes with the last agent" nft list table inet ocsb
kill "${SERVERS[@]}" 2>/dev/null
wait "${SERVERS[@]}" 2>/dev/null || true # killed: 143 is expected
