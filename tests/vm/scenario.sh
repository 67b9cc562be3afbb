#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The VM tier's scenario, run as root inside a Debian guest by ocsb-vm-scenario.service once
# the machine is up (tests/vm/run.sh builds the guest). It does what a user does on a real
# machine with systemd, cgroup v2 and logind: provisions an owner's project, then checks the
# unit, the slice drop-in, OpenCode under the unit, an ssh session of the agent and its cgroup,
# and `ocsb doctor`. TAP ("ok - ...", "not ok - ...", details "  # ...") goes to /dev/ttyS1,
# which the host reads; "# END" last. The unit powers the guest off afterwards.
set -u
export LC_ALL=C PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

TAP=${OCSB_VM_TAP:-/dev/ttyS1}
exec 3>"$TAP"
REL=$(cat /usr/local/lib/ocsb-vm/release 2>/dev/null || echo unknown)
OWNER=dev
AGENT=ai-dev
PROJECT=/home/$OWNER/code/p
WORK=/var/tmp/ocsb-vm-work
mkdir -p "$WORK"

tap() { printf '%s\n' "$*" >&3; echo "TAP: $*"; }
pass() { tap "ok - $1"; }
fail() {
	tap "not ok - $1"
	shift
	local t
	for t in "$@"; do
		[ -n "$t" ] && printf '%s\n' "$t" | tail -n 25 | sed 's/^/  # /' >&3
	done
}
skip() { tap "ok - $1 # SKIP $2"; }
note() { tap "# $*"; }
uptime_s() { cut -d' ' -f1 /proc/uptime; }

# check DESC CMD...: ok when CMD exits 0 (its output as detail otherwise)
check() {
	local d=$1 o
	shift
	if o=$("$@" 2>&1); then pass "$d"; else fail "$d" "$o"; fi
}
# check_output DESC ERE CMD...: ok when CMD's output matches ERE
check_output() {
	local d=$1 re=$2 o
	shift 2
	o=$("$@" 2>&1)
	if grep -qE -- "$re" <<<"$o"; then pass "$d"; else fail "$d" "expected /$re/ in:" "$o"; fi
}
# check_fails DESC CMD...: ok when CMD exits non-zero
check_fails() {
	local d=$1 o
	shift
	if o=$("$@" 2>&1); then fail "$d" "succeeded:" "$o"; else pass "$d"; fi
}
wait_for() { # wait_for SECONDS CMD...
	local end=$(($(date +%s) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || return 1
		sleep 1
	done
}
as_owner() { runuser -u "$OWNER" -- "$@"; }
owner_ssh() { # owner_ssh USER@HOST CMD...
	local to=$1
	shift
	as_owner ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=20 \
		-o LogLevel=ERROR "$to" "$@"
}

note "release $REL, kernel $(uname -r), systemd $(systemctl --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p'), scenario started at uptime $(uptime_s) s"

# --- the machine is what the tier is for
check_output "PID 1 is systemd" '/systemd$' readlink /proc/1/exe
check_output "cgroup v2 only (unified hierarchy)" '^cgroup2fs$' stat -fc %T /sys/fs/cgroup
CONTROLLERS=$(cat /sys/fs/cgroup/cgroup.controllers 2>/dev/null)
note "cgroup v2 controllers: $CONTROLLERS"
check "cgroup v2 controllers include cpu, memory, pids" \
	bash -c 'c=" $1 "; [[ $c == *" cpu "* && $c == *" memory "* && $c == *" pids "* ]] || { echo "$1"; exit 1; }' sh "$CONTROLLERS"
check "systemd-logind is active" systemctl is-active systemd-logind
DMI_NAME=$(cat /sys/class/dmi/id/product_name 2>/dev/null)
if [ -n "$DMI_NAME" ]; then
	pass "the guest has DMI (/sys/class/dmi/id/product_name: $DMI_NAME)"
else
	fail "the guest has DMI (/sys/class/dmi/id/product_name)" "$(ls -l /sys/class/dmi/id 2>&1)"
fi
check_fails "no network device but loopback" bash -c 'ls /sys/class/net | grep -vx lo'
check "the package is installed (dpkg)" bash -c 'dpkg-query -W -f="\${Status} \${Version}\n" ocsb | grep "install ok installed" || test -x /usr/sbin/ocsb-provision'
note "ocsb: $(dpkg-query -W -f='${Version}' ocsb 2>/dev/null || echo 'staged install, no package')"

# --- an owner with a key and a project, as on a developer's machine
useradd -m -s /bin/bash "$OWNER"
# As a user would: ssh-keygen makes ~/.ssh 0700; authorized_keys 0600.
as_owner mkdir -p "$PROJECT"
as_owner ssh-keygen -q -t ed25519 -N '' -f "/home/$OWNER/.ssh/id_ed25519"
as_owner install -m 0600 "/home/$OWNER/.ssh/id_ed25519.pub" "/home/$OWNER/.ssh/authorized_keys"
as_owner git -C "$PROJECT" init -q -b main
as_owner git -C "$PROJECT" -c user.name=Dev -c user.email=dev@example.invalid \
	commit -q --allow-empty -m first

# --- Debian's squid package (a dependency) enables squid.service on *:3128, ocsb's proxy port:
# the positive control for the checks after provisioning that it is stopped and disabled.
proxy_owner() { # the parent's command name of whatever listens on 127.0.0.1:3128
	local pid
	pid=$(ss -Htlnp 'sport = :3128' | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
	[ -n "$pid" ] || { echo "nothing listens on 3128"; return 1; }
	ps -o comm= -p "$(ps -o ppid= -p "$pid" | tr -d ' ')"
}
port_held() { ss -Htln 'sport = :3128' | grep -q LISTEN; }
wait_for 60 port_held
check_output "control: before provisioning, Debian's squid.service is active" '^active$' \
	systemctl is-active squid
check_output "control: before provisioning, squid.service is enabled" '^enabled$' \
	systemctl is-enabled squid
pre_owner=$(proxy_owner 2>&1)
if [ -n "$pre_owner" ] && [ "$pre_owner" != ocsb-agentd ] && port_held; then
	pass "control: before provisioning, the proxy port's listener is not ocsb-agentd's (parent: $pre_owner)"
else
	fail "control: before provisioning, the proxy port's listener is not ocsb-agentd's" \
		"parent: $pre_owner" "$(ss -Htlnp 'sport = :3128' 2>&1)"
fi

t_prov=$(uptime_s)
if prov_out=$(ocsb-provision --owner "$OWNER" --project "$PROJECT" 2>&1); then
	pass "ocsb-provision --owner $OWNER --project $PROJECT"
else
	fail "ocsb-provision --owner $OWNER --project $PROJECT (exit $?)" "$prov_out"
fi
echo "$prov_out"
note "provisioning took $(awk -v a="$t_prov" -v b="$(uptime_s)" 'BEGIN { printf "%.1f", b - a }') s"
AGENT_UID=$(id -u "$AGENT" 2>/dev/null)
OWNER_UID=$(id -u "$OWNER")

# --- the unit and the slice drop-in
check_output "ocsb-agentd.service is enabled" '^enabled$' systemctl is-enabled ocsb-agentd
check_output "ocsb-agentd.service is active" '^active$' systemctl is-active ocsb-agentd
check_output "the agent's slice loads ocsb's drop-in" "user-$AGENT_UID.slice.d/ocsb.conf" \
	systemctl show "user-$AGENT_UID.slice" -p DropInPaths
check_output "the agent's slice denies every address (IPAddressDeny)" \
	'^IPAddressDeny=.*(0\.0\.0\.0/0|any)' systemctl show "user-$AGENT_UID.slice" -p IPAddressDeny
check_output "the agent's slice allows loopback only (IPAddressAllow)" \
	'^IPAddressAllow=.*127\.0\.0\.0/8' systemctl show "user-$AGENT_UID.slice" -p IPAddressAllow
check_output "the agent's slice has a task limit (TasksMax)" '^TasksMax=[0-9]+$' \
	systemctl show "user-$AGENT_UID.slice" -p TasksMax
check_output "the agent's slice has a memory limit (MemoryMax)" '^MemoryMax=[0-9]+$' \
	systemctl show "user-$AGENT_UID.slice" -p MemoryMax
check_output "control: the owner's slice has no IPAddressDeny" '^IPAddressDeny=$' \
	systemctl show "user-$OWNER_UID.slice" -p IPAddressDeny

# --- the proxy port is ocsb's: squid.service stopped and disabled by provisioning
wait_for 60 port_held
check_output "what listens on the proxy port is ocsb-agentd's squid" '^ocsb-agentd$' proxy_owner
check_output "Debian's squid.service is inactive after provisioning" '^inactive$' \
	systemctl is-active squid
check_output "Debian's squid.service is disabled after provisioning" '^disabled$' \
	systemctl is-enabled squid

# --- OpenCode under the unit
field() { # field KEY [N]: the N-th (default 1st) value of KEY in ocsb status
	ocsb status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" \
		'$1 == k { if (++i == n) { $1 = ""; sub(/^ +/, ""); print; exit } }'
}
answers() {
	local url pw
	url=$(field url)
	pw=$(field password)
	[ -n "$url" ] && [ -n "$pw" ] || return 1
	[ "$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' -u "opencode:$pw" \
		"$url/global/health")" = 200 ]
}
t_oc=$(uptime_s)
# (No wait when the unit is not running: nothing would answer.)
if systemctl -q is-active ocsb-agentd && wait_for 300 answers; then
	t_ready=$(uptime_s)
	pass "OpenCode answers under the unit (200 with the password from ocsb status)"
	note "OpenCode ready at uptime $t_ready s, $(awk -v a="$t_oc" -v b="$t_ready" 'BEGIN { printf "%.1f", b - a }') s after provisioning returned"
	tap "# TIMING opencode-ready-uptime $t_ready"
else
	fail "OpenCode answers under the unit within 300 s" "$(ocsb status 2>&1)" \
		"$(journalctl -u ocsb-agentd --no-pager -n 30 2>&1)"
fi
URL=$(field url)
PW=$(field password)
check_output "without the password: 401" '^401$' \
	curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$URL/global/health"
OC_PID=$(field pid 2)
check_output "OpenCode runs as $AGENT" "^$AGENT\$" ps -o user= -p "${OC_PID:-1}"
OC_CG=$(sed -n 's/^0:://p' "/proc/${OC_PID:-0}/cgroup" 2>/dev/null)
check_output "OpenCode's cgroup is under ocsb-agentd.service" \
	'^/system\.slice/ocsb-agentd\.service/' echo "$OC_CG"

# --- ssh as the agent: the session's cgroup is the agent's, with its limits
sess_cg=$(owner_ssh "$AGENT@localhost" cat /proc/self/cgroup 2>"$WORK/ssh.err")
if [ -n "$sess_cg" ]; then
	pass "ssh $AGENT@localhost as $OWNER works"
else
	fail "ssh $AGENT@localhost as $OWNER works" "$(cat "$WORK/ssh.err")" \
		"$(journalctl -u ssh --no-pager -n 20 2>&1)"
fi
SESS_CG=$(sed -n 's/^0:://p' <<<"$sess_cg")
note "agent session cgroup: $SESS_CG; OpenCode's: $OC_CG"
check_output "the agent's ssh session is in ocsb-agentd's agent cgroup" \
	'^/system\.slice/ocsb-agentd\.service/ocsb-' echo "$SESS_CG"
limits_of() { # limits_of CGROUP: pids.max and memory.max of it or the nearest ancestor with one
	local d=/sys/fs/cgroup$1 p=max m=max
	while [ "$d" != /sys/fs/cgroup ] && [ "$d" != / ]; do
		[ "$p" = max ] && [ -r "$d/pids.max" ] && p=$(cat "$d/pids.max")
		[ "$m" = max ] && [ -r "$d/memory.max" ] && m=$(cat "$d/memory.max")
		d=$(dirname "$d")
	done
	echo "pids.max=$p memory.max=$m"
}
check_output "the session's cgroup has the agent's limits (pids.max, memory.max)" \
	'^pids\.max=[0-9]+ memory\.max=[0-9]+$' limits_of "$SESS_CG"
note "session limits: $(limits_of "$SESS_CG")"
own_cg=$(owner_ssh "$OWNER@localhost" cat /proc/self/cgroup 2>&1 | sed -n 's/^0:://p')
check_output "control: the owner's own ssh session is in user-$OWNER_UID.slice" \
	"^/user\.slice/user-$OWNER_UID\.slice/session-" echo "$own_cg"

# --- ocsb doctor as root, and what the distribution kernel changes
doctor_out=$(ocsb doctor 2>&1)
echo "$doctor_out"
fails=$(grep -E '^FAIL' <<<"$doctor_out")
if [ -z "$fails" ]; then
	pass "ocsb doctor (root): no FAIL ($(grep -c '^OK' <<<"$doctor_out") OK, $(grep -c '^WARN' <<<"$doctor_out") WARN)"
else
	fail "ocsb doctor (root): no FAIL" "$fails"
fi
grep -E '^WARN' <<<"$doctor_out" | sed 's/^/# doctor: /' >&3
kmaj=$(uname -r | cut -d. -f1)
kmin=$(uname -r | cut -d. -f2)
if [ "$kmaj" -gt 6 ] || { [ "$kmaj" -eq 6 ] && [ "$kmin" -ge 12 ]; }; then
	check_output "kernel $(uname -r): doctor says abstract-sockets OK (Landlock scope)" \
		'^OK +abstract-sockets' echo "$doctor_out"
else
	check_output "kernel $(uname -r): doctor WARNs abstract-sockets with the reason (no Landlock scope before 6.12)" \
		'^WARN +abstract-sockets +the kernel is before 6\.12' echo "$doctor_out"
fi
if [ -n "$DMI_NAME" ] && [ -n "${OC_PID:-}" ]; then
	oc_dmi=$(nsenter -t "$OC_PID" -m cat /sys/class/dmi/id/product_name 2>&1)
	if [ "$oc_dmi" != "$DMI_NAME" ]; then
		pass "OpenCode does not see the machine's DMI product name (sees: ${oc_dmi:-nothing})"
	else
		fail "OpenCode does not see the machine's DMI product name" "it reads: $oc_dmi"
	fi
	root_dmi=$(cat /sys/class/dmi/id/product_name 2>&1)
	if [ "$root_dmi" = "$DMI_NAME" ]; then
		pass "control: root reads the DMI product name"
	else
		fail "control: root reads the DMI product name" "it reads: $root_dmi"
	fi
fi

# --- the netlock under systemd (issue 18, item 4): `nft flush ruleset` while the agent loops
# on direct connects to an address outside (a veth pair into a network namespace: the guest
# has no network device), none gets through; root's do (control).
FAR=10.99.0.2
FAR_PORT=8080
ip netns add ocsb-far && ip link add ocsb-v0 type veth peer name ocsb-v1 netns ocsb-far &&
	ip addr add 10.99.0.1/24 dev ocsb-v0 && ip link set ocsb-v0 up &&
	ip -n ocsb-far addr add "$FAR/24" dev ocsb-v1 && ip -n ocsb-far link set ocsb-v1 up &&
	ip -n ocsb-far link set lo up
ip netns exec ocsb-far perl -MIO::Socket::INET -e '
	my $s = IO::Socket::INET->new(LocalAddr => $ARGV[0], LocalPort => $ARGV[1], Listen => 128,
		ReuseAddr => 1) or die "listen: $!";
	while (my $c = $s->accept) { print $c "HTTP/1.0 200 OK\r\n\r\nFAR\n"; close $c }' \
	"$FAR" "$FAR_PORT" >"$WORK/far.log" 2>&1 &
FAR_PID=$!
far_open() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' sh "$FAR" "$FAR_PORT"; }
check "control: root connects to $FAR:$FAR_PORT (a veth pair into a namespace)" wait_for 20 far_open
restores() { field netlock-restores; }
r0=$(restores)
# The agent's loop, in an ssh session of the agent (its cgroup, its login): a line when it
# starts, then the tries and the ones that got through.
owner_ssh "$AGENT@localhost" "echo started; ok=0; n=0; end=\$((SECONDS + 25));
	while [ \$SECONDS -lt \$end ]; do n=\$((n + 1));
		timeout 1 bash -c 'exec 3<>/dev/tcp/$FAR/$FAR_PORT' 2>/dev/null && ok=\$((ok + 1));
		sleep 0.05; done; echo tries=\$n through=\$ok" >"$WORK/loop.out" 2>"$WORK/loop.err" &
loop_pid=$!
if wait_for 60 grep -q started "$WORK/loop.out"; then
	flushes=0
	for i in 1 2 3 4 5; do
		sleep 1
		nft flush ruleset && flushes=$((flushes + 1))
		# restored before the next one: each flush opens its own window
		wait_for 10 nft list table inet ocsb
	done
	wait "$loop_pid"
	res=$(grep -o 'tries=[0-9]* through=[0-9]*' "$WORK/loop.out")
	tries=$(sed -n 's/^tries=\([0-9]*\).*/\1/p' <<<"$res")
	through=$(sed -n 's/.*through=\([0-9]*\)$/\1/p' <<<"$res")
	note "agent's direct connects during $flushes flushes: ${res:-no result}; netlock-restores ${r0:-?} -> $(restores)"
	check "the table is back after the flushes" nft list table inet ocsb
	check_output "control: agentd restored the table after the flushes (netlock-restores grew)" \
		'^yes$' bash -c '[ "${2:-0}" -gt "${1:-0}" ] && echo yes || echo "no: $1 -> $2"' sh "$r0" "$(restores)"
	if [ -n "$tries" ] && [ "$tries" -ge 10 ] && [ "$through" = 0 ]; then
		pass "nft flush ruleset x$flushes while the agent loops on direct connects to $FAR: 0 of $tries get through"
	else
		fail "nft flush ruleset x$flushes while the agent loops on direct connects to $FAR: 0 get through" \
			"${res:-no result}" "$(cat "$WORK/loop.err")"
	fi
else
	kill "$loop_pid" 2>/dev/null
	fail "the agent's connect loop started (ssh $AGENT@localhost)" "$(cat "$WORK/loop.err")"
fi
check "control: root still connects to $FAR:$FAR_PORT" far_open

# --- the second layer (issue 18, item 4): with ocsb-agentd stopped (nothing restores the
# table) and the ruleset flushed, a new ssh session of the agent is in its user slice, whose
# IPAddressDeny still stops direct connects; the owner's session (no IPAddressDeny) gets
# through (control: without the table, only the slice stops the agent).
probe_far() { # probe_far USER: its ssh session's cgroup, then THROUGH or BLOCKED
	owner_ssh "$1@localhost" "sed -n 's/^0:://p' /proc/self/cgroup;
		timeout 3 bash -c 'exec 3<>/dev/tcp/$FAR/$FAR_PORT' 2>/dev/null && echo THROUGH || echo BLOCKED" 2>&1
}
systemctl stop ocsb-agentd
nft flush ruleset
check_fails "agentd stopped, ruleset flushed: no table inet ocsb" nft list table inet ocsb
agent_far=$(probe_far "$AGENT")
owner_far=$(probe_far "$OWNER")
note "agent's session: $(tr '\n' ' ' <<<"$agent_far"); owner's: $(tr '\n' ' ' <<<"$owner_far")"
check_output "agentd stopped: the agent's new ssh session is in user-$AGENT_UID.slice" \
	"^/user\.slice/user-$AGENT_UID\.slice/" echo "$agent_far"
check_output "no table, agentd stopped: the slice's IPAddressDeny stops the agent's direct connect" \
	'^BLOCKED$' echo "$agent_far"
check_output "control: no table, the owner's session connects directly (its slice has no IPAddressDeny)" \
	'^THROUGH$' echo "$owner_far"
systemctl start ocsb-agentd
check "ocsb-agentd started again: the table is back" wait_for 60 nft list table inet ocsb
kill "$FAR_PID" 2>/dev/null
ip netns del ocsb-far 2>/dev/null
ip link del ocsb-v0 2>/dev/null

# --- limits on cgroup v2 (issue 18, item 3), from an ssh session of the agent: a fork bomb
# stops below limit-tasks and a memory hog is killed at limit-memory, while the owner still
# logs in; the same loads as the owner, outside the agent's cgroup, are the controls. Last
# before removal: OpenCode shares the cgroup and may not live under 256M.
sed -i '/^limit-tasks /d; /^limit-memory /d' /etc/ocsb/ocsb.conf
printf 'limit-tasks 150\nlimit-memory 256M\n' >>/etc/ocsb/ocsb.conf
check "re-provisioning with the lower limits, and ocsb-agentd reloads them" \
	bash -c "ocsb-provision --owner $OWNER --project $PROJECT && systemctl reload ocsb-agentd"
sleep 3
new_cg=$(owner_ssh "$AGENT@localhost" cat /proc/self/cgroup 2>&1 | sed -n 's/^0:://p')
check_output "limit-tasks 150 and limit-memory 256M are in force for a new session" \
	'^pids\.max=150 memory\.max=268435456$' limits_of "$new_cg"
# The bomb: perl (essential in Debian), which counts its own forks and stops at the first
# that fails (bash retries each failed fork for seconds). The children live a minute.
BOMB='perl -e '"'"'$n = 0; for (1 .. 300) { $p = fork; last unless defined $p; if (!$p) { sleep 60; exit 0 } $n++ } print "started=$n\n"'"'"''
owner_ssh "$AGENT@localhost" "$BOMB" >"$WORK/bomb.agent" 2>&1 &
bomb_pid=$!
sleep 5
check_output "the owner still logs in during the agent's fork bomb" "^$OWNER\$" \
	owner_ssh "$OWNER@localhost" id -un
wait "$bomb_pid"
agent_started=$(sed -n 's/^started=//p' "$WORK/bomb.agent" | tail -n 1)
pkill -x -u "$AGENT" perl
note "fork bomb of 300: the agent's session started ${agent_started:-?}"
if [ -n "$agent_started" ] && [ "$agent_started" -lt 150 ]; then
	pass "a fork bomb from the agent's ssh session stops below limit-tasks 150 ($agent_started of 300)"
else
	fail "a fork bomb from the agent's ssh session stops below limit-tasks 150" "$(tail -n 5 "$WORK/bomb.agent")"
fi
own_started=$(owner_ssh "$OWNER@localhost" "$BOMB" 2>&1 | sed -n 's/^started=//p' | tail -n 1)
pkill -x -u "$OWNER" perl
check_output "control: the same bomb as the owner starts all 300 (${own_started:-?})" '^300$' echo "$own_started"
HOG='dd if=/dev/zero of=/dev/null bs=400M count=1 2>/dev/null; echo "exit=$?"'
check_output "a 400 MiB hog in the agent's ssh session is killed at limit-memory 256M" \
	'^exit=(137|9)$|Killed' owner_ssh "$AGENT@localhost" "$HOG"
check_output "control: the same hog as the owner completes" '^exit=0$' owner_ssh "$OWNER@localhost" "$HOG"

# --- removal (issue 18, item 9): ocsb-provision --remove --purge, then apt-get purge ocsb.
# Nothing of ocsb's may be left: no file of the agent's old uid, no unit, drop-in, enablement
# link, nftables table, /etc/ocsb, /var/lib/ocsb or /opt/ocsb (OpenCode's prefix).
DROPIN=/etc/systemd/system/user-$AGENT_UID.slice.d/ocsb.conf
WANTS=/etc/systemd/system/multi-user.target.wants/ocsb-agentd.service
uid_files() { # files of the agent's uid on the root and the memory file systems
	find / /tmp /var/tmp /run /dev/shm -xdev -uid "$AGENT_UID" 2>/dev/null | sort -u | head -n 20
}
ocsb_units() { # ocsb's unit files wherever systemd looks, and what systemd has loaded
	# (not this scenario's own ocsb-vm-scenario.service)
	find /etc/systemd /run/systemd/system /lib/systemd/system /usr/lib/systemd/system \
		-name 'ocsb*' ! -name 'ocsb-vm-*' 2>/dev/null
	systemctl list-units --all --no-legend --plain 'ocsb*' 2>/dev/null |
		grep -v -e '^$' -e '^ocsb-vm-'
}
left_over() { # left_over: what of ocsb is left, one line each
	local f
	[ -n "$(uid_files)" ] && echo "files of uid $AGENT_UID"
	[ -n "$(ocsb_units)" ] && echo "an ocsb unit"
	for f in "$DROPIN" "$WANTS" /etc/ocsb /var/lib/ocsb /opt/ocsb; do
		[ -e "$f" ] || [ -L "$f" ] && echo "$f"
	done
	nft list table inet ocsb >/dev/null 2>&1 && echo "nft table inet ocsb"
}
# Control: each of these is there before the removal (the checks below can fail).
present=$(left_over)
want="files of uid $AGENT_UID
an ocsb unit
$DROPIN
$WANTS
/etc/ocsb
/var/lib/ocsb
/opt/ocsb
nft table inet ocsb"
if [ -n "$AGENT_UID" ] && [ "$present" = "$want" ]; then
	pass "control: before removal, all of it is present (uid $AGENT_UID's files, unit, drop-in, link, table, /etc/ocsb, /var/lib/ocsb, /opt/ocsb)"
else
	fail "control: before removal, all of it is present" "expected:" "$want" "found:" "$present"
fi
if rm_out=$(ocsb-provision --remove --purge 2>&1); then
	pass "ocsb-provision --remove --purge"
else
	fail "ocsb-provision --remove --purge (exit $?)" "$rm_out"
fi
echo "$rm_out"
if purge_out=$(apt-get purge -y ocsb 2>&1); then
	pass "apt-get purge -y ocsb"
else
	fail "apt-get purge -y ocsb (exit $?)" "$purge_out"
fi
echo "$purge_out"
grep -E '^ocsb:' <<<"$purge_out" | sed 's/^/# purge: /' >&3
check_fails "the agent account is gone" id "$AGENT"
o=$(uid_files)
if [ -z "$o" ]; then pass "no file of the agent's old uid $AGENT_UID (find / -xdev -uid, and /tmp /run /dev/shm)"; else fail "no file of the agent's old uid $AGENT_UID" "$o"; fi
o=$(ocsb_units)
if [ -z "$o" ]; then pass "no ocsb unit (file or loaded)"; else fail "no ocsb unit (file or loaded)" "$o"; fi
check_fails "no slice drop-in $DROPIN" test -e "$DROPIN"
check_fails "no enablement link $WANTS" test -L "$WANTS" -o -e "$WANTS"
check_fails "no nft table inet ocsb" nft list table inet ocsb
for d in /etc/ocsb /var/lib/ocsb /opt/ocsb; do
	check_fails "no $d" test -e "$d"
done
check_fails "the package is gone (dpkg)" bash -c 'dpkg-query -W -f="\${Status}\n" ocsb 2>/dev/null | grep -qv "not-installed"'

note "scenario ended at uptime $(uptime_s) s"
tap "# END"
