# SPDX-License-Identifier: MIT
# The escape battery (tests/escape/): every probe as the agent from two places, a child of
# ocsb-agentd (OpenCode's exact conditions, through agentd's test wrapper hook) and an
# `ssh ai-dev@localhost` session, each paired with a positive control run as root or the
# owner. Canaries are planted first. Verdicts per place are compared with the expected ones
# of tests/escape/probes.sh; a place that differs from its expectation is "not ok".
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"

SRC=$(cd "$(dirname "$0")/../escape" && pwd)
ESC=$E2E_SCRATCH/escape	# world-readable copy: the source tree may not be
OCSB=$OCSB_BUILD/ocsb
OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
MARK=m$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
T0=$SECONDS

mkdir -p "$ESC/scratch" && chmod 0755 "$ESC" && chmod 1777 "$ESC/scratch"
cp "$SRC/battery.sh" "$SRC/probes.sh" "$ESC/" && chmod 0644 "$ESC"/*.sh

# --- the world: fake internet, a logging name server, rules, provisioning
make_project
# Something to mirror (issue 7), so the agent's home has links into the mirror (m-symlink).
as_owner mkdir -p "$OWNER_HOME/.config/opencode/command"
as_owner sh -c "printf '{}\n' >'$OWNER_HOME/.config/opencode/opencode.json'"
as_owner sh -c "printf 'escape\n' >'$OWNER_HOME/.config/opencode/command/escape.md'"
fake_internet_up >/dev/null 2>&1 || fail "fake internet up"
_inet_server udp 198.18.1.10 9999 "UDP-CANARY"
ip -6 addr add 2001:db8:e5c::1/64 dev veth-lan nodad
DNS_LOG=$ESC/dns.log
: >"$DNS_LOG"
ip netns exec "$INET_NS" ip addr add 198.18.0.54/32 dev lo
ip netns exec "$INET_NS" python3 -c '
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("198.18.0.54", 53))
log = open(sys.argv[1], "a")
while True:
    q, peer = s.recvfrom(2048)
    i, labels = 12, []
    while i < len(q) and q[i]:
        labels.append(q[i + 1:i + 1 + q[i]].decode(errors="replace")); i += 1 + q[i]
    log.write(".".join(labels) + "\n"); log.flush()
    s.sendto(q[:2] + b"\x81\x83" + q[4:6] + b"\0\0\0\0\0\0" + q[12:], peer)   # NXDOMAIN
' "$DNS_LOG" >/dev/null 2>&1 &
printf 'nameserver 198.18.0.54\n' >/etc/resolv.conf
mkdir -p /etc/ocsb
printf 'allow allowed.test\nblock blocked.test\n' >/etc/ocsb/egress.conf
check_output "provisioned" '^ocsb-provision: [1-9]' provision || exit 1

# --- canaries of the owner (home 0755 on purpose: the lax file is readable and doctor says so)
chmod 0755 "$OWNER_HOME"
as_owner bash -c "
umask 077
echo 'secret $MARK' >~/secret.txt
echo 'https://alice:$MARK@git.example' >~/.git-credentials
mkdir -p -m 0755 ~/.aws && echo 'aws_secret_access_key = $MARK' >~/.aws/credentials && chmod 0644 ~/.aws/credentials
echo 'shared $MARK' >~/group-rw.txt && chmod 0660 ~/group-rw.txt
mkdir -p -m 0700 ~/.run
echo 'tmp $MARK' >/tmp/owner-canary.txt && chmod 0644 /tmp/owner-canary.txt
echo 'shm $MARK' >/dev/shm/owner-canary && chmod 0644 /dev/shm/owner-canary
"
mkdir -p -m 1777 /tmp/.X11-unix
LPORT=7101
# The owner's process: a secret on its command line and in its environment; it listens on
# every local address (dual-stack), on a socket in /tmp and in her home, on an abstract name.
bg_owner env "OWNER_TOKEN=$MARK" python3 -c '
import os, socket, sys, threading
def serve(s):
    while True:
        c, _ = s.accept()
        try: c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nOWNER\n")
        finally: c.close()
socks = []
t = socket.socket(socket.AF_INET6); t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("::", int(sys.argv[1]))); socks.append(t)
for path in ("/tmp/.X11-unix/X9", os.path.expanduser("~/.run/app.sock"), "\0" + sys.argv[2]):
    u = socket.socket(socket.AF_UNIX)
    if not path.startswith("\0") and os.path.exists(path): os.unlink(path)
    u.bind(path)
    if not path.startswith("\0"): os.chmod(path, 0o777)
    socks.append(u)
for s in socks:
    s.listen(16); threading.Thread(target=serve, args=(s,), daemon=True).start()
threading.Event().wait()
' "$LPORT" "ocsb-owner-$MARK" "--password=$MARK"
OWNER_PID=$BG_PID
# A root service on port 80 of every local address (what the proxy must not reach).
python3 -c '
import socket, threading
t = socket.socket(socket.AF_INET6); t.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("::", 80)); t.listen(16)
while True:
    c, _ = t.accept()
    try: c.recv(1024); c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nOWNER\n")
    finally: c.close()
' >/dev/null 2>&1 &
env "ROOT_TOKEN=$MARK" sleep 100000 &
ROOT_PID=$!
bg_owner dbus-daemon --config-file=/usr/share/dbus-1/session.conf --address=unix:path=/tmp/ocsb-owner-bus --nofork
as_owner python3 -c '
import ctypes; l = ctypes.CDLL(None, use_errno=True)
assert l.shmget(0x0c5b0001, 4096, 0o1000 | 0o600) >= 0'
OWNER_AGENT_SOCK=$OWNER_HOME/.ssh/agent.sock
as_owner bash -c "ssh-agent -a '$OWNER_AGENT_SOCK' >/dev/null && SSH_AUTH_SOCK='$OWNER_AGENT_SOCK' ssh-add -q ~/.ssh/id_ed25519"
# Host identifiers: our own machine-id (the overlay's), the real boot_id and command line.
MACHINE_ID=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
echo "$MACHINE_ID" >/etc/machine-id
mkdir -p /var/lib/dbus && echo "$MACHINE_ID" >/var/lib/dbus/machine-id
DMI_NAME=
[ -r /sys/class/dmi/id/product_name ] && DMI_NAME=$(cat /sys/class/dmi/id/product_name)
for f in "$OWNER_HOME/.run/app.sock" /tmp/.X11-unix/X9 /tmp/ocsb-owner-bus; do
	wait_port 127.0.0.1 "$LPORT" 5 && for _ in $(seq 50); do [ -S "$f" ] && break; sleep 0.1; done
done
cat >"$ESC/canaries.env" <<EOF
C_OWNER=$OWNER
C_OWNER_HOME=$OWNER_HOME
C_AGENT=$AGENT
C_AGENT_HOME=$(getent passwd "$AGENT" | cut -d: -f6)
C_AGENT_CLONE=$(getent passwd "$AGENT" | cut -d: -f6)/shop
C_PROJECT=$PROJECT
C_OWNER_PID=$OWNER_PID
C_ROOT_PID=$ROOT_PID
C_MARK=$MARK
C_MACHINE_ID=$MACHINE_ID
C_BOOT_ID=$(cat /proc/sys/kernel/random/boot_id)
C_CMDLINE_SUM=$(sha256sum </proc/cmdline | cut -c1-64)
C_DMI_NAME='$DMI_NAME'
C_PROXY=127.0.0.1:3128
C_LPORT=$LPORT
C_HPORT=80
C_V6_LOCAL=2001:db8:e5c::1
C_ABSTRACT=ocsb-owner-$MARK
C_DBUS=unix:path=/tmp/ocsb-owner-bus
C_SHM_KEY=$((0x0c5b0001))
C_OWNER_AGENT_SOCK=$OWNER_AGENT_SOCK
C_DNS_LOG=$DNS_LOG
C_SCRATCH=$ESC/scratch
C_SECRET_MARK=$MARK
EOF
chmod 0644 "$ESC/canaries.env"

# --- place 1: a child of ocsb-agentd, through the test wrapper hook
AGENTD=
declare -A VERDICT DETAIL
PLACES=()
if [ -x "$OC_BIN" ]; then
	mkdir -p /run/ocsb
	cat >/run/ocsb/test-wrap-opencode <<EOF
#!/bin/bash
ESC_DIR=$ESC bash $ESC/battery.sh run agentd
exec "\$@"
EOF
	chmod 0755 /run/ocsb/test-wrap-opencode
	OCSB_TEST_HOOKS=1 setsid "$OCSB_BUILD/ocsb-agentd" --foreground -v \
		>>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
	AGENTD=$!
	LOG=/var/log/ocsb/shop.log
	done_agentd() { grep -hq '^# escape battery at agentd: done' /var/log/ocsb/*.log 2>/dev/null; }
	end=$((SECONDS + 120))
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
		bash -c "$(declare -f as_owner as_user); OWNER=$OWNER; as_owner env DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent $OCSB secrets --file --passphrase-fd 3 --global set ESCAPE_KEY <<<'$MARK-secret' 3<<<'pw' >/dev/null && as_owner env DBUS_SESSION_BUS_ADDRESS=unix:path=/nonexistent $OCSB secrets --passphrase-fd 3 push 3<<<'pw'"
else
	skip "battery as a child of ocsb-agentd" "OpenCode not installed at $OC_BIN (sudo make deps)"
fi

# The first place's m-symlink swapped one of the agent's links into the mirror; a
# provisioning run puts it back (and must copy nothing through the swapped one).
provision >/dev/null 2>&1 || fail "re-provision between the places" "$(provision 2>&1 | tail -5)"

# --- place 2: an ssh session of the agent, opened by the owner with agent forwarding asked
_capture as_owner env SSH_AUTH_SOCK="$OWNER_AGENT_SOCK" timeout 300 ssh -A -i "$OWNER_KEY" \
	-o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no \
	-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$AGENT@localhost" \
	"ESC_DIR=$ESC bash $ESC/battery.sh run ssh"
if grep -q '^# escape battery at ssh: done' <<<"$_out"; then
	pass "battery ran in an ssh session of $AGENT"
	grep $'^V\t' <<<"$_out" >"$ESC/ssh.out"
	PLACES+=(ssh)
else
	fail "battery ran in an ssh session of $AGENT" "exit $_rc" "$(tail -n 20 <<<"$_out")"
fi

# --- evidence for the judged probes: the next login, the owner's pull
owner_ssh "$AGENT" env >"$ESC/scratch/next-login-env" 2>/dev/null
repo_state() {
	as_owner git -C "$PROJECT" rev-parse HEAD 2>&1
	as_owner git -C "$PROJECT" for-each-ref --format='%(refname) %(objectname)' refs/heads refs/tags
	as_owner git -C "$PROJECT" status --porcelain --ignored
	sha256sum "$PROJECT/.git/config"
	ls -la "$PROJECT/.git/hooks" "$PROJECT"
	[ -e /tmp/pwned ] && echo PWNED
}
repo_state >"$ESC/scratch/owner-repo-before"
_capture as_owner env -C "$PROJECT" "$OCSB" sync pull
pull_out=$_out
repo_state >"$ESC/scratch/owner-repo-after"
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

# --- the report: one line per probe and place, the control first
declare -A CONTROL EXPECT CAT DESC
while IFS=$'\t' read -r id cat exp desc; do
	CAT[$id]=$cat EXPECT[$id]=$exp DESC[$id]=$desc
done < <(ESC_DIR=$ESC bash "$ESC/battery.sh" list)
while IFS=$'\t' read -r _ id v; do CONTROL[$id]=$v; done <"$ESC/control.out"
for place in "${PLACES[@]}"; do
	while IFS=$'\t' read -r _ id v d; do
		VERDICT[$place/$id]=$v DETAIL[$place/$id]=$d
	done < <(cat "$ESC/$place.out" "$ESC/$place.judged")
done
expected() { # expected ID PLACE
	local e=${EXPECT[$1]} x
	case $e in *=*)
		for x in ${e//,/ }; do [ "${x%%=*}" = "$2" ] && { echo "${x#*=}"; return; }; done
		echo "?"; return ;;
	esac
	echo "$e"
}
P=0 F=0 S=0 N=0 DIFF=()
tally() { case $1 in ok) P=$((P + 1)) ;; notok) F=$((F + 1)) ;; skip) S=$((S + 1)) ;; esac; }
: >"$ESC/table"
while IFS=$'\t' read -r id _ _ _; do
	N=$((N + 1))
	name="escape [${CAT[$id]}] $id (${DESC[$id]})"
	got=()
	for place in agentd ssh; do
		v=${VERDICT[$place/$id]:-}
		if [ -z "$v" ]; then
			skip "$name @$place" "the battery did not run there"
			tally skip
			continue
		fi
		got+=("$v")
		want=$(expected "$id" "$place")
		if [ "$v" = skip ]; then
			skip "$name @$place" "${DETAIL[$place/$id]}"
			tally skip
		elif [ "${CONTROL[$id]:-fail}" != ok ]; then
			fail "$name @$place: $v, but the positive control failed (a probe that cannot fail asserts nothing)"
			tally notok
		elif [ "$v" = "$want" ]; then
			pass "$name @$place: $v"
			tally ok
		else
			fail "$name @$place: $v, expected $want" "${DETAIL[$place/$id]}"
			tally notok
		fi
		printf '%s\t%s\t%s\t%s\n' "$id" "$place" "$v" "$want" >>"$ESC/table"
	done
	[ "${#got[@]}" -eq 2 ] && [ "${got[0]}" != "${got[1]}" ] && DIFF+=("$id(agentd=${got[0]},ssh=${got[1]})")
done < <(ESC_DIR=$ESC bash "$ESC/battery.sh" list)
echo "# escape battery places differ (each declared in probes.sh, see docs/escape.md): ${DIFF[*]:-none}"
echo "# escape battery: $N probes x ${#PLACES[@]} places: $P passed, $F failed, $S skipped ($((SECONDS - T0)) s)"
cp "$ESC/table" "$E2E_SCRATCH/escape-table" 2>/dev/null
exit 0
