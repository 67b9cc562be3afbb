# SPDX-License-Identifier: MIT
# The escape battery (tests/escape/): every probe as the agent from two places, a child of
# ocsb-agentd (OpenCode's exact conditions, through agentd's test wrapper hook) and an
# `ssh ai-dev@localhost` session, each paired with a positive control run as root or the
# owner. Canaries are planted first. Verdicts per place are compared with the expected ones
# of tests/escape/probes.sh; a place that differs from its expectation is "not ok".
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-cg.sh"

SRC=$(cd "$(dirname "$0")/../escape" && pwd)
ESC=$E2E_SCRATCH/escape	# the world's directory (world.sh): readable by the agent, not in /tmp
OCSB=$OCSB_BUILD/ocsb
OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
T0=$SECONDS

# --- provisioning, then the world (tests/escape/world.sh: canaries, the owner's processes,
# the fake internet with its logging name server; shared with tests/escape/run-here.sh)
make_project
# Something to mirror (issue 7), so the agent's home has links into the mirror (m-symlink).
as_owner mkdir -p "$OWNER_HOME/.config/opencode/command"
as_owner sh -c "printf '{}\n' >'$OWNER_HOME/.config/opencode/opencode.json'"
as_owner sh -c "printf 'escape\n' >'$OWNER_HOME/.config/opencode/command/escape.md'"
mkdir -p /etc/ocsb
printf 'allow allowed.test\nblock blocked.test\n' >/etc/ocsb/egress.conf
check_output "provisioned" '^ocsb-provision: [1-9]' provision || exit 1
# Limits as a machine has them by default (the harness runs without): e-cgroup judges them,
# and the ssh place's session joins OpenCode's cgroup while agentd runs.
set_limits 2G 4096 100
check_output "world.sh up" '^world.sh: up' bash "$SRC/world.sh" up "$ESC" "$OWNER" "$PROJECT" "$AGENT" || exit 1
. "$ESC/canaries.env"
MARK=$C_MARK
OWNER_AGENT_SOCK=$C_OWNER_AGENT_SOCK

# --- place 1: a child of ocsb-agentd, through the test wrapper hook
AGENTD=
PLACES=()
if [ -x "$OC_BIN" ]; then
	mkdir -p /run/ocsb
	cat >/run/ocsb/test-wrap-opencode <<EOF
#!/bin/bash
ESC_DIR=$ESC bash $ESC/battery.sh run agentd
exec "\$@"
EOF
	chmod 0755 /run/ocsb/test-wrap-opencode
	OCSB_TEST_HOOKS=1 setsid "$OCSB_BUILD/ocsb-warden" --foreground -v \
		>>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
	AGENTD=$!
	LOG=/var/log/ocsb/shop.log
	done_agentd() { grep -hq '^# escape battery at agentd: done' /var/log/ocsb/*.log 2>/dev/null; }
	end=$((SECONDS + 300))
	until done_agentd || [ $SECONDS -ge $end ]; do sleep 1; done
	rm -f /run/ocsb/test-wrap-opencode	# OpenCode restarts run OpenCode itself
	if done_agentd; then
		pass "battery ran as a child of ocsb-agentd"
		grep -h $'^V\t' /var/log/ocsb/*.log >"$ESC/agentd.out"
		PLACES+=(agentd)
	else
		fail "battery ran as a child of ocsb-agentd" "$(tail -n 20 "$E2E_SCRATCH/agentd.log")" \
			"$(tail -n 20 /var/log/ocsb/*.log 2>/dev/null)"
	fi
	oc_running() { as_owner "$OCSB" status 2>/dev/null | grep -Eq '^ +state +running$'; }
	for _ in $(seq 120); do oc_running && break; sleep 0.5; done
	if oc_running; then
		pass "OpenCode runs after the battery, in the same sandbox"
	else
		fail "OpenCode runs after the battery, in the same sandbox" "$(as_owner "$OCSB" status 2>&1)" \
			"$(tail -n 5 /var/log/ocsb/*.log)"
	fi
	# A secret handed over (passphrase file store, no keyring needed): the ssh place then
	# looks for it in the agent's home (k-secrets-home).
	check_output "a secret pushed to the agent (for k-secrets-home)" 'pushed 1 secret' \
		bash -c "$(declare -f as_owner as_user); OWNER=$OWNER; as_owner env DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent $OCSB secrets --file --passphrase-fd 3 --global set ESCAPE_KEY <<<'$MARK-secret' 3<<<'pw' >/dev/null && as_owner env DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent $OCSB secrets --passphrase-fd 3 push 3<<<'pw'" &&
		echo C_SECRET_PUSHED=1 >>"$ESC/canaries.env"
else
	skip "battery as a child of ocsb-agentd" "OpenCode not installed at $OC_BIN (sudo make deps)"
fi

# The first place's m-symlink swapped one of the agent's links into the mirror; a
# provisioning run puts it back (and must copy nothing through the swapped one).
provision >/dev/null 2>&1 || fail "re-provision between the places" "$(provision 2>&1 | tail -5)"

# --- place 2: an ssh session of the agent, opened by the owner with agent forwarding asked
if bash "$SRC/world.sh" place-ssh "$ESC"; then
	pass "battery ran in an ssh session of $AGENT"
	PLACES+=(ssh)
else
	fail "battery ran in an ssh session of $AGENT" "$(tail -n 20 "$ESC/ssh.raw")"
fi

# --- evidence for the judged probes: the next login, the owner's pull
bash "$SRC/world.sh" evidence "$ESC" "$OCSB"
pull_out=$(cat "$ESC/pull.out")
for place in "${PLACES[@]}"; do
	check_output "git: the agent's escape-$place branch arrived (control for g-*)" "escape-$place" \
		as_owner git -C "$PROJECT" for-each-ref "refs/remotes/$AGENT/"
done
check_output "git: the pull's review flags the hostile content" 'gitattributes|symlink|hook|gitmodules' \
	printf '%s\n' "$pull_out"

# --- positive controls (root / the owner), while everything still runs
ESC_DIR=$ESC bash "$ESC/battery.sh" control >"$ESC/control.out"

# --- ocsb doctor against the same machine: the lax file, then --fix, then a lost netlock
DOC=$OCSB_BUILD/ocsb
check_fails_output "doctor (owner): FAIL for the 0644 secret, exit 1" \
	"^FAIL owner-file +$OWNER_HOME/.aws/credentials is readable by every account" as_owner "$DOC" doctor
check_output "doctor (owner): the fix is printed" "fix: chmod go-rwx '$OWNER_HOME/.aws/credentials'" \
	bash -c "$(declare -f as_owner as_user); OWNER=$OWNER; as_owner $DOC doctor; true"
check_output "doctor (owner): the home's mode is reported" "^WARN owner-home +$OWNER_HOME is 0755" \
	bash -c "$(declare -f as_owner as_user); OWNER=$OWNER; as_owner $DOC doctor; true"
check_output "doctor (owner): ssh sessions' private namespace reported" '^OK +ssh-sessions .*private /tmp' \
	bash -c "$(declare -f as_owner as_user); OWNER=$OWNER; as_owner $DOC doctor; true"
_capture "$DOC" doctor
root_doc=$_out
printf '%s\n' "$root_doc" | sed 's/^/# doctor: /'
for re in '^OK +netlock +table inet ocsb live' '^OK +sshd +for ai-dev' '^OK +persistence +/etc/cron.deny lists ai-dev' \
	'^OK +persistence +/etc/at.deny lists ai-dev' '^OK +probe-files +ai-dev cannot open' \
	'^OK +probe-network +ai-dev cannot connect to 127.0.0.1:22' '^OK +proxy +ocsb'\''s squid listens on 127.0.0.1:' '^OK +agent-groups' \
	'^OK +abstract-sockets +ssh sessions of ai-dev start under .*/ocsb-shell'; do
	check_output "doctor (root): /$re/" "$re" printf '%s\n' "$root_doc"
done
usermod -s /bin/bash ai-dev
check_output "doctor (root): WARN abstract-sockets, fix named, when the login shell is bash" \
	'^WARN abstract-sockets +ssh sessions of ai-dev can connect .*its login shell is /bin/bash' bash -c "$DOC doctor; true"
usermod -s /var/lib/ocsb/bin/ocsb-shell ai-dev
check_output "doctor --json is valid JSON with the same checks" '^ok [1-9]' bash -c \
	"$DOC doctor --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(\"ok\", len(d[\"checks\"]))'"
check_output "doctor --fix (root) fixes the file" "^OK +owner-file +$OWNER_HOME/.aws/credentials was readable by every account \(0644\): fixed" \
	bash -c "$DOC doctor --fix; true"
check_output "after --fix: mode 0600" '^600$' stat -c %a "$OWNER_HOME/.aws/credentials"
check_output "after --fix: doctor (owner) finds no readable secret" '^OK +owner-files' \
	bash -c "$(declare -f as_owner as_user); OWNER=$OWNER; as_owner $DOC doctor; true"
check_output "positive control: root still reads the fixed file" "$MARK" cat "$OWNER_HOME/.aws/credentials"

# --- stop the agent; judge what had to outlive something
if [ -n "$AGENTD" ]; then
	kill -TERM "$AGENTD"
	for _ in $(seq 100); do kill -0 "$AGENTD" 2>/dev/null || break; sleep 0.1; done
	check_fails "agentd stopped" kill -0 "$AGENTD"
fi
for place in "${PLACES[@]}"; do
	ids=$(awk -F'\t' '$3 == "judge" { print $2 }' "$ESC/$place.out")
	# shellcheck disable=SC2086
	ESC_DIR=$ESC bash "$ESC/battery.sh" judge "$place" $ids >"$ESC/$place.judged"
done
pgrep -u "$AGENT" >/dev/null && pkill -KILL -u "$AGENT"

# --- doctor without the netlock (agentd stopped, table deleted)
nft delete table inet ocsb 2>/dev/null
check_fails_output "doctor (root): FAIL when the netlock is gone, exit 1" '^FAIL netlock ' "$DOC" doctor
check_output "doctor (root): and when agentd is not running" '^FAIL agentd ' bash -c "$DOC doctor; true"
check_output "a provisioning run restores the table" '^ocsb-provision: [1-9]' provision
check_output "doctor (root): netlock OK again" '^OK +netlock' bash -c "$DOC doctor; true"
# --- removal takes the agent out of cron.deny / at.deny and drops its limits file
grep -qx "$AGENT" /etc/cron.deny && grep -qx "$AGENT" /etc/at.deny && pass "cron.deny and at.deny list the agent" ||
	fail "cron.deny and at.deny list the agent" "$(cat /etc/cron.deny /etc/at.deny 2>&1)"
check "pam_namespace line in /etc/pam.d/sshd" grep -q "pam_namespace.so mount_private # ocsb-provision" /etc/pam.d/sshd
check "pam_limits file for the agent" grep -q "^$AGENT hard nproc" "/etc/security/limits.d/ocsb-$AGENT.conf"
check_output "--remove" '^ocsb-provision: [1-9]' prov --remove
check_fails "--remove: cron.deny no longer lists the agent" grep -qx "$AGENT" /etc/cron.deny
check_fails "--remove: at.deny no longer lists the agent" grep -qx "$AGENT" /etc/at.deny
check_fails "--remove: limits file gone" test -e "/etc/security/limits.d/ocsb-$AGENT.conf"
check_fails "--remove: pam_namespace entry gone" test -e "/etc/security/namespace.d/ocsb-$AGENT.conf"
check_fails "--remove: no ocsb line left in /etc/pam.d/sshd" grep -q ocsb-provision /etc/pam.d/sshd
check "positive control: the owner still logs in after --remove" owner_ssh "$OWNER" true

# --- the report: one line per probe and place, the control first (tests/escape/report.sh)
ESC_SECONDS=$((SECONDS - T0)) bash "$SRC/report.sh" "$ESC" agentd ssh
cp "$ESC/table" "$E2E_SCRATCH/escape-table" 2>/dev/null

# --- the world goes as it came: nothing of it left (what run-here.sh relies on in a guest)
check_output "world.sh down" '^world.sh: down' bash "$SRC/world.sh" down "$ESC"
check_fails "world.sh down: no namespace ocsb-esc left" bash -c 'ip netns list | grep -qw ocsb-esc'
check_fails "world.sh down: no veth-lan left" ip link show veth-lan
check_fails "world.sh down: no owner canary in /tmp" test -e /tmp/owner-canary.txt
check_fails "world.sh down: no System V segment left" bash -c "ipcs -m | grep -qi 0x0c5b0001"
check_fails "world.sh down: no process of the owner left" pgrep -u "$OWNER"
check_output "world.sh down: /etc/resolv.conf restored" '^nameserver 198\.18\.0\.53$' cat /etc/resolv.conf
check_fails "world.sh down: /etc/hosts restored" grep -q allowed.test /etc/hosts
check_output "world.sh down: the owner's home mode restored" '^7[05]{2}$' stat -c %a "$OWNER_HOME"
exit 0
