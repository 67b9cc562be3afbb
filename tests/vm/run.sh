#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run.sh [bookworm|trixie ...]: the VM tier. For each Debian release (default: both), a real
# guest with systemd, cgroup v2 and logind boots under QEMU with no network device (the last
# boot of one release has a restricted one, for the Ansible role over ssh), installs nothing
# from the network, and runs tests/vm/scenario.sh from a systemd oneshot unit. The
# scenario prints TAP to the guest's second serial port; this script copies each ok/not ok
# line into its own output (prefixed with the release) and adds a "not ok" for a guest that
# never reports, stops early or times out. Ends with "N passed, N failed, N skipped".
#
# Images (tests/vm/image.sh) are cached under $OCSB_VM_CACHE (default /var/tmp/ocsb-vm) by
# release and package list; each run works on a copy.
#
# Environment:
#   OCSB_VM_DEB       an ocsb .deb to install (one release only); default: build/matrix/
#                     <release>/ocsb_*.deb when present, else built for the release in a chroot
#   OCSB_VM_TIMEOUT   seconds per guest, first boot to last power-off (default 2400)
#   OCSB_VM_KEEP=1    keep the per-run directory (tree, image, serial logs)
#   OCSB_VM_ACCEL     kvm or tcg: skip the KVM probe
#   OCSB_VM_MEM       guest memory in MiB (default 3072)
#   OCSB_VM_POWEROFF_WAIT  seconds the guest has to power off after "# END" (default 120)
#   OCSB_VM_BASE      a guest base tarball to use instead of the cached one (debugging)
#   OCSB_VM_ANSIBLE   the release whose last boot runs the Ansible role over ssh (default
#                     bookworm: Debian 12's ansible-core supports its Python; none: no release)
set -u
export LC_ALL=C

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
CACHE=${OCSB_VM_CACHE:-/var/tmp/ocsb-vm}
TIMEOUT=${OCSB_VM_TIMEOUT:-2400}
MEM=${OCSB_VM_MEM:-3072}
POWEROFF_WAIT=${OCSB_VM_POWEROFF_WAIT:-120}
OC_PREFIX=$(sed -n 's/^#define OCSB_OPENCODE_PREFIX "\(.*\)"$/\1/p' "$REPO/common/opencode.h")

LOG=$(mktemp /tmp/ocsb-vm-log.XXXXXX)
out() { printf '%s\n' "$*" | tee -a "$LOG"; }
say_ok() { out "ok - $1"; }
say_not_ok() {
	out "not ok - $1"
	shift
	local t
	for t in "$@"; do
		[ -n "$t" ] && printf '%s\n' "$t" | tail -n 30 | sed 's/^/  # /'
	done
}
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

summary() {
	local results skips passed notok skipped
	results=$(grep -E '^(not )?ok( [0-9]+)?( |$)' "$LOG")
	skips=$(grep -iE '# skip' <<<"$results")
	passed=$(grep -viE '# skip' <<<"$results" | grep -c '^ok')
	notok=$(grep -viE '# skip' <<<"$results" | grep -c '^not ok')
	skipped=$(grep -c . <<<"$skips")
	echo "$passed passed, $notok failed, $skipped skipped"
	rm -f "$LOG"
	[ "$notok" -eq 0 ] && [ "$passed" -gt 0 ]
}

if [ "$(id -u)" -ne 0 ]; then
	say_ok "vm tier # SKIP needs root (run: sudo make test-vm)"
	summary
	exit
fi

# run.sh --images [RELEASE...]: only make the guests' base images that are not cached yet
# (tests/run-all.sh does it in the background while the other tiers run: a cold image is a
# download of minutes). No TAP: lines starting with "#"; a failure is left to the tier,
# which tries again and reports it.
if [ "${1:-}" = --images ]; then
	shift
	[ "$#" -gt 0 ] || set -- bookworm trixie
	command -v mmdebstrap >/dev/null || { echo "# vm images: mmdebstrap missing (the tier will say so)"; exit 0; }
	# In a mount namespace of its own (mmdebstrap's mounts and the tmpfs below are seen by
	# nothing else), and mmdebstrap's temporary root on a tmpfs when memory allows: the disk
	# then sees only the tarball, not the writes of some 20,000 files beside other tests.
	if [ -z "${OCSB_VM_IMAGES_NS:-}" ]; then
		rm -f "$LOG"
		exec env OCSB_VM_IMAGES_NS=1 unshare --mount --propagation private -- "$0" --images "$@"
	fi
	mkdir -p "$CACHE"
	avail=$(awk '/^MemAvailable:/ { print int($2 / 1024 / 1024) }' /proc/meminfo)
	TMPDIR=
	if [ "${avail:-0}" -ge 6 ] && [ "${OCSB_VM_TMPFS:-1}" = 1 ] &&
		TMPDIR=$(mktemp -d /var/tmp/ocsb-vm-images.XXXXXX); then
		mount -t tmpfs -o size=4g,mode=0700 ocsb-vm-images "$TMPDIR" || { rmdir "$TMPDIR"; TMPDIR=; }
	fi
	if [ -n "$TMPDIR" ]; then export TMPDIR; else unset TMPDIR; fi
	# Stopped (tests/run-all.sh ends): what this run was writing goes (cached_tar names it
	# by this shell's pid); bash runs the trap once the timeout(1) in front has ended.
	trap 'rm -f "$CACHE"/.base-*."$$".tmp.tar "$CACHE"/.base-*."$$".log "$LOG" "$LOG.err"; exit 130' INT TERM
	trap 'rm -f "$LOG" "$LOG.err"; [ -z "${TMPDIR:-}" ] || { umount "$TMPDIR"; rmdir "$TMPDIR"; } 2>/dev/null' EXIT
	# shellcheck source=tests/vm/image.sh
	. "$VM_DIR/image.sh"
	for rel in "$@"; do
		t0=$(now)
		# shellcheck disable=SC2046
		if cached_tar base "$rel" $(guest_pkgs "$rel") 2>"$LOG.err"; then
			how=cached
			[ -z "$MADE" ] || how="cold: built"
			echo "# $rel: guest base image $how in $(elapsed "$t0") s, ahead of the tier"
		else
			echo "# $rel: guest base image ahead of the tier failed (the tier tries again): $(tail -n 3 "$LOG.err" | tr '\n' ' ')"
		fi
	done
	rm -f "$LOG" "$LOG.err"
	exit 0
fi
missing=()
for tool in mmdebstrap qemu-system-x86_64 mkfs.ext4 unshare chroot timeout; do
	command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -x "$OC_PREFIX/node_modules/opencode-linux-x64/bin/opencode" ] || missing+=("OpenCode in $OC_PREFIX (make deps)")
if [ "${#missing[@]}" -gt 0 ]; then
	say_not_ok "vm tier prerequisites" "missing: ${missing[*]}" \
		"sudo make test-deps (qemu-system-x86 qemu-utils mmdebstrap e2fsprogs, and OpenCode)"
	summary
	exit
fi

RELEASES=("$@")
[ "${#RELEASES[@]}" -gt 0 ] || RELEASES=(bookworm trixie)
for r in "${RELEASES[@]}"; do
	case $r in
	bookworm | trixie) ;;
	*) say_not_ok "unknown release '$r' (bookworm or trixie)"; summary; exit ;;
	esac
done
if [ -n "${OCSB_VM_DEB:-}" ] && [ "${#RELEASES[@]}" -ne 1 ]; then
	say_not_ok "OCSB_VM_DEB names one package: give exactly one release"
	summary
	exit
fi
mkdir -p "$CACHE"
# What a run killed outright left: a half-written image (and its log) whose writer is gone.
for f in "$CACHE"/.*.tmp.tar "$CACHE"/.*.log; do
	[ -f "$f" ] || continue
	p=${f%.tmp.tar}
	p=${p%.log}
	p=${p##*.}
	case $p in *[!0-9]* | '') continue ;; esac
	kill -0 "$p" 2>/dev/null || rm -f "$f"
done

# shellcheck source=tests/vm/image.sh
. "$VM_DIR/image.sh"

# KVM: /dev/kvm may exist and still hang guests. Boot the kernel alone under KVM and wait a
# few seconds for its first console line; anything else is TCG. Decided once per run.
ACCEL=${OCSB_VM_ACCEL:-}
probe_kvm() { # probe_kvm KERNEL
	local con pid i
	[ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	con=$(mktemp /tmp/ocsb-vm-kvm.XXXXXX)
	qemu-system-x86_64 -accel kvm -cpu host -m 256 -kernel "$1" \
		-append "console=ttyS0 panic=-1" -no-reboot -nic none -display none \
		-serial "file:$con" -monitor none >/dev/null 2>&1 &
	pid=$!
	for i in $(seq 1 20); do
		sleep 0.5
		[ -s "$con" ] && break
	done
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	if grep -q 'Linux version' "$con"; then
		rm -f "$con"
		return 0
	fi
	rm -f "$con"
	return 1
}

# --- the Ansible boot (issue 30): the role, from this host over ssh into the guest's last
# boot, the way a fleet is reached. The guest says "# NIC-NEXT-BOOT" before that boot, which
# then gets QEMU's user-mode network, restricted (the guest reaches nothing, not even this
# host) with 127.0.0.1:PORT forwarded to its sshd; it says "# ANSIBLE" when the owner can log
# in with this run's key and sudo, and waits for /run/ocsb-vm-ansible-done.
ANSIBLE_REL=${OCSB_VM_ANSIBLE-bookworm}
# shellcheck source=tests/ansible-lib.sh
. "$REPO/tests/ansible-lib.sh"
case $ANSIBLE_REL in
bookworm | trixie | none) ;;
*)
	say_not_ok "OCSB_VM_ANSIBLE='$ANSIBLE_REL': bookworm, trixie or none"
	ANSIBLE_REL=none
	;;
esac
# ansible_setup RELEASE TREE RUNDIR: the key pair and the guest's copy of its public half.
# Sets ANSIBLE_ON.
ansible_setup() {
	local rel=$1 tree=$2 rundir=$3
	ANSIBLE_ON=
	[ "$rel" = "$ANSIBLE_REL" ] || return 0
	if ! command -v ansible-playbook >/dev/null; then
		say_ok "$rel: the Ansible role over ssh # SKIP ansible-playbook missing (package ansible-core: sudo make test-deps)"
		return 0
	fi
	if [ -z "${PKG_DEB:-}" ]; then
		say_ok "$rel: the Ansible role over ssh # SKIP no .deb for the role to install (a staged install)"
		return 0
	fi
	rm -f "$rundir/ansible-key" "$rundir/ansible-key.pub"
	local o
	if ! o=$(ssh-keygen -q -t ed25519 -N '' -C ocsb-vm-ansible -f "$rundir/ansible-key" 2>&1 &&
		install -m 0644 "$rundir/ansible-key.pub" "$tree/usr/local/lib/ocsb-vm/ansible.pub" 2>&1); then
		say_not_ok "$rel: the Ansible boot's ssh key (ssh-keygen, package openssh-client)" "$o"
		return 0
	fi
	out "# $rel: the last boot runs the Ansible role over ssh (OCSB_VM_ANSIBLE=$ANSIBLE_REL)"
	ANSIBLE_ON=1
}
# listener_start RUNDIR: a listener on a free port of the host's 127.0.0.1 that counts what
# connects to it, for the Ansible boot's check that its network is restricted (the guest's
# 10.0.2.2 is the host's loopback unless restrict=on). Sets LISTEN_PORT and LISTEN_PID;
# RUNDIR/listener.count holds the number of connections.
listener_start() {
	local i
	LISTEN_PORT=
	: >"$1/listener.port"
	python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
open(sys.argv[1] + "/listener.port", "w").write("%d\n" % s.getsockname()[1])
n = 0
while True:
    c, _ = s.accept()
    c.close()
    n += 1
    open(sys.argv[1] + "/listener.count", "w").write("%d\n" % n)
' "$1" </dev/null >/dev/null 2>&1 &
	LISTEN_PID=$!
	for i in $(seq 1 50); do
		LISTEN_PORT=$(cat "$1/listener.port")
		[ -z "$LISTEN_PORT" ] || break
		sleep 0.1
	done
}
listener_count() { cat "$1/listener.count" 2>/dev/null || echo 0; }
wait_count() { # RUNDIR N: until the listener has counted N connections (5 s at most)
	local i
	for i in $(seq 1 50); do
		[ "$(listener_count "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# guest_play NAME: one run of the play (ansible_play, tests/ansible-lib.sh: at most 600 s,
# within the guest's 1500 s wait); ocsb-provision's summary in PROV_SAYS.
guest_play() {
	ansible_play "$AD" "$1" guest -i "$AD/inventory" -v "$AD/play.yml"
	local rc=$?
	PROV_SAYS=$(ansible_prov_says "$AD" "$1")
	return $rc
}
# ansible_run RELEASE RUNDIR PORT: the two plays, then the guest's signal (ok or failed).
ansible_run() {
	local rel=$1 rundir=$2 port=$3 result=failed ssh_opts reached= until
	AD=$rundir/ansible
	mkdir -p "$AD"
	# Only this run's key and options: not root's ~/.ssh/config, agent or known hosts.
	ssh_opts=(-F /dev/null -i "$rundir/ansible-key" -o IdentitiesOnly=yes -p "$port"
		-o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
		-o LogLevel=ERROR -o ConnectTimeout=10)
	# At most 180 s to reach sshd, 600 s per play, 60 s for the signal: within the guest's
	# 1500 s wait. A guest that cannot be reached is stopped (it would wait its 1500 s).
	until=$(($(date +%s) + 180))
	while [ "$(date +%s)" -lt "$until" ]; do
		if timeout 30 ssh -n "${ssh_opts[@]}" dev@127.0.0.1 true 2>"$AD/ssh.err"; then
			reached=1
			break
		fi
		sleep 2
	done
	if [ -z "$reached" ]; then
		say_not_ok "$rel: the host reaches the guest's sshd as dev with its key (127.0.0.1:$port, 180 s)" \
			"$(cat "$AD/ssh.err")"
		kill "$qpid" 2>/dev/null
		return 1
	fi
	say_ok "$rel: the host reaches the guest's sshd as dev with its key (127.0.0.1:$port forwarded)"
	cat >"$AD/inventory" <<-EOF
	guest ansible_host=127.0.0.1 ansible_port=$port ansible_user=dev ansible_ssh_private_key_file=$rundir/ansible-key ansible_ssh_common_args='-F /dev/null -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null' ansible_python_interpreter=/usr/bin/python3
	EOF
	# The .deb is copied to the guest first, the way a fleet without a repository is served;
	# the role installs it with apt (the guest has its dependencies: nothing is downloaded).
	cat >"$AD/play.yml" <<-EOF
	- name: ocsb on a guest, over ssh
	  hosts: all
	  become: true
	  gather_facts: false
	  vars:
	    ocsb_package: /var/tmp/${PKG_DEB##*/}
	    ocsb_agents:
	      - name: ai-dev
	        owner: dev
	        projects: [/home/dev/code/p]
	    ocsb_egress:
	      block: [blocked-by-ansible.example]
	  pre_tasks:
	    - name: Copy the package to the guest
	      ansible.builtin.copy:
	        src: $PKG_DEB
	        dest: /var/tmp/${PKG_DEB##*/}
	        mode: "0644"
	  roles: [ocsb]
	EOF
	(
		ansible_env "$AD" "$REPO/deploy/ansible/roles" || exit 1
		export ANSIBLE_SSH_ARGS='-o ControlMaster=auto -o ControlPersist=20s' ANSIBLE_TIMEOUT=60
		ok=1
		# The package task's own result: the copy before it changes in any first play.
		pkg_task() { awk '/^TASK \[ocsb : Install the ocsb package from a \.deb/ { t = 1; next }
			t && /^(changed|ok|skipping|fatal|failed):/ { sub(/:.*/, ""); print; exit }' "$AD/$1.out"; }
		if guest_play first && [ "$RECAP_FAILED" = 0 ] && [ "$(pkg_task first)" = changed ] &&
			grep -Eq 'ocsb-provision: [1-9][0-9]* changes?' "$AD/first.out"; then
			say_ok "$rel: the role's first play over ssh installs the .deb and provisions (changed=$RECAP_CHANGED; $PROV_SAYS; $PLAY_TIME s)"
		else
			ok=
			say_not_ok "$rel: the role's first play over ssh installs the .deb and provisions" \
				"changed=${RECAP_CHANGED:-?} failed=${RECAP_FAILED:-?}, the package task: $(pkg_task first) ($PROV_SAYS)" \
				"$(grep -E '^(fatal|failed|changed|TASK|guest)|msg' "$AD/first.out" | tail -n 40)"
		fi
		if guest_play second && [ "$RECAP_FAILED" = 0 ] && [ "$RECAP_CHANGED" = 0 ] &&
			grep -q 'ocsb-provision: 0 changes' "$AD/second.out"; then
			say_ok "$rel: the role's second play over ssh changes nothing (changed=0; $PROV_SAYS; $PLAY_TIME s)"
		else
			ok=
			say_not_ok "$rel: the role's second play over ssh changes nothing" \
				"changed=${RECAP_CHANGED:-?} failed=${RECAP_FAILED:-?} ($PROV_SAYS)" \
				"$(grep -E '^(fatal|failed|changed|TASK|guest)|msg' "$AD/second.out" | tail -n 40)"
		fi
		[ -n "$ok" ]
	) && result=ok
	# The guest goes on either way; it checks the machine only after "ok". Written whole,
	# then renamed: the guest never reads a half-written file.
	if ! timeout 60 ssh -n "${ssh_opts[@]}" dev@127.0.0.1 "echo $result | sudo -n tee /run/ocsb-vm-ansible-done.tmp >/dev/null &&
		sudo -n mv /run/ocsb-vm-ansible-done.tmp /run/ocsb-vm-ansible-done" 2>"$AD/ssh.err"; then
		say_not_ok "$rel: the host told the guest the plays ended" "$(cat "$AD/ssh.err")"
	fi
}

# run_guest RELEASE TREE: image the tree, boot it, relay the TAP. Sets BOOT_* timings.
run_guest() {
	local rel=$1 tree=$2 rundir=$3 kernel initrd img con tap qpid t0 n deadline
	local line accel_args
	kernel=$(ls "$tree"/boot/vmlinuz-* | sort -V | tail -n 1)
	initrd=$(ls "$tree"/boot/initrd.img-* | sort -V | tail -n 1)
	img=$rundir/disk.img
	con=$rundir/console.log
	tap=$rundir/tap.log
	ansible_setup "$rel" "$tree" "$rundir" || return 1
	# The kernel and initrd are read from the host's copy; the guest keeps its own.
	cp "$kernel" "$rundir/vmlinuz" && cp "$initrd" "$rundir/initrd.img" || return 1
	local size_mb
	size_mb=$(($(du -sm "$tree" | cut -f1) + 3072))
	rm -f "$img"
	truncate -s "${size_mb}M" "$img" || return 1
	local t_mk
	t_mk=$(now)
	if ! mkfs.ext4 -q -F -L ocsb-root -d "$tree" "$img" >"$rundir/mkfs.log" 2>&1; then
		say_not_ok "$rel: mkfs.ext4 -d of the guest tree" "$(cat "$rundir/mkfs.log")"
		return 1
	fi
	out "# $rel: disk image ${size_mb} MiB made in $(elapsed "$t_mk") s"
	if [ -z "$ACCEL" ]; then
		if probe_kvm "$rundir/vmlinuz"; then ACCEL=kvm; else ACCEL=tcg; fi
		out "# accelerator: $ACCEL (KVM probe: $([ "$ACCEL" = kvm ] && echo kernel printed || echo no console output or no /dev/kvm))"
	fi
	if [ "$ACCEL" = kvm ]; then
		accel_args=(-accel kvm -cpu host)
	else
		accel_args=(-accel tcg,thread=multi -cpu max)
	fi
	t0=$(now)
	deadline=$(($(date +%s) + TIMEOUT))
	BOOT_FIRST=
	BOOT_END=
	BOOTS=0
	local done_seen= t_end= stuck= reboot_seen= boot con_all=$rundir/console.log
	local nic_next= nic port= ansible_seen= append=
	: >"$con_all"
	# One QEMU per boot: the scenario says "# REBOOT" and reboots the guest, which ends QEMU
	# (-no-reboot: a kernel panic must not boot again unseen); the same disk boots again.
	for boot in 1 2 3 4 5 6; do
		BOOTS=$boot
		con=$rundir/console.$boot.log
		tap=$rundir/tap.$boot.log
		: >"$con"
		: >"$tap"
		reboot_seen=
		nic=(-nic none)
		port=
		append=
		if [ -n "$nic_next" ]; then
			port=$(free_port)
			if [ -n "$port" ]; then
				nic=(-nic "user,model=virtio-net-pci,restrict=on,hostfwd=tcp:127.0.0.1:$port-:22")
			else
				say_not_ok "$rel: a free loopback port for the Ansible boot (python3)"
			fi
			nic_next=
			# What the guest must not reach: a listener on the host's loopback, its port
			# on the guest's kernel command line. The control: the host reaches it.
			listener_start "$rundir"
			if [ -n "$LISTEN_PORT" ] && timeout 5 bash -c "echo >/dev/tcp/127.0.0.1/$LISTEN_PORT" 2>/dev/null &&
				wait_count "$rundir" 1; then
				say_ok "$rel: control: the host's listener on 127.0.0.1:$LISTEN_PORT counts a connection"
				append=" ocsb_vm.hostport=$LISTEN_PORT"
			else
				say_not_ok "$rel: control: the host's listener on 127.0.0.1:${LISTEN_PORT:-?} counts a connection"
			fi
		fi
		# ttyS0: kernel and systemd console (kept for diagnosis); ttyS1: the scenario's TAP.
		qemu-system-x86_64 "${accel_args[@]}" -m "$MEM" -smp 2 \
			-kernel "$rundir/vmlinuz" -initrd "$rundir/initrd.img" \
			-append "root=/dev/vda rw console=ttyS0 quiet systemd.show_status=0 systemd.firstboot=off panic=-1$append" \
			-drive "file=$img,if=virtio,format=raw" "${nic[@]}" -display none -no-reboot \
			-monitor none -serial "file:$con" -serial "file:$tap" \
			>"$rundir/qemu.$boot.log" 2>&1 &
		qpid=$!
		n=0
		while :; do
			# Copy the complete lines that arrived since the last look.
			local total
			total=$(wc -l <"$tap")
			if [ "$total" -gt "$n" ]; then
				while IFS= read -r line; do
					line=${line%$'\r'}
					case $line in
					'ok '* | 'not ok '*)
						[ -n "$BOOT_FIRST" ] || BOOT_FIRST=$(elapsed "$t0")
						line=$(sed -E 's/^(not ok|ok) - /\1 - '"$rel"': /' <<<"$line")
						out "$line"
						;;
					'# END'*) done_seen=1 ;;
					'# REBOOT'*) reboot_seen=1 ;;
					'# NIC-NEXT-BOOT'*) [ -n "$ANSIBLE_ON" ] && nic_next=1 ;;
					'# ANSIBLE'*)
						ansible_seen=1
						if [ -n "$ANSIBLE_ON" ] && [ -n "$port" ]; then
							ansible_run "$rel" "$rundir" "$port"
						else
							say_not_ok "$rel: the guest asked for the Ansible plays in a boot without a network device"
						fi
						;;
					'#'* | '  #'*) out "$line" ;;
					esac
				done < <(sed -n "$((n + 1)),${total}p" "$tap")
				n=$total
			fi
			if ! kill -0 "$qpid" 2>/dev/null; then
				break
			fi
			# After "# END" the guest powers itself off; one that does not is stopped here.
			if [ -n "$done_seen" ] && [ -z "$t_end" ]; then
				t_end=$(date +%s)
			fi
			if [ -n "$t_end" ] && [ "$(date +%s)" -ge $((t_end + POWEROFF_WAIT)) ]; then
				kill "$qpid" 2>/dev/null
				wait "$qpid" 2>/dev/null
				stuck=1
				break
			fi
			if [ "$(date +%s)" -ge "$deadline" ]; then
				kill "$qpid" 2>/dev/null
				wait "$qpid" 2>/dev/null
				say_not_ok "$rel: guest finished within ${TIMEOUT} s (boot $boot)" "last console lines:" \
					"$(tail -n 20 "$con" | tr -d '\r')"
				break
			fi
			sleep 1
		done
		wait "$qpid" 2>/dev/null
		if [ -n "${LISTEN_PID:-}" ]; then
			kill "$LISTEN_PID" 2>/dev/null
			wait "$LISTEN_PID" 2>/dev/null
			LISTEN_PID=
		fi
		if [ -n "$append" ]; then
			if [ "$(listener_count "$rundir")" = 1 ]; then
				say_ok "$rel: nothing of the Ansible boot reached the host's listener (restrict=on; 1 connection, the control's)"
			else
				say_not_ok "$rel: nothing of the Ansible boot reached the host's listener (restrict=on)" \
					"$(listener_count "$rundir") connections, 1 of them the control's"
			fi
		fi
		cat "$con" >>"$con_all"
		[ -n "$reboot_seen" ] && [ -z "$done_seen" ] && [ "$(date +%s)" -lt "$deadline" ] || break
		out "# $rel: the guest rebooted (boot $boot ended at $(elapsed "$t0") s); booting the same disk again"
	done
	con=$con_all
	BOOT_END=$(elapsed "$t0")
	if [ -n "$ANSIBLE_ON" ] && [ -z "$ansible_seen" ]; then
		say_not_ok "$rel: the guest reached its Ansible boot (no '# ANSIBLE' line; $BOOTS boots)"
	fi
	if [ -z "$BOOT_FIRST" ]; then
		say_not_ok "$rel: the guest reported TAP" "console:" "$(tail -n 30 "$con" | tr -d '\r')"
	elif [ -z "$done_seen" ]; then
		say_not_ok "$rel: the scenario ran to its end (no '# END' line; $BOOTS boots)" \
			"console:" "$(tail -n 30 "$con" | tr -d '\r')" "$(tail -n 5 "$rundir/qemu.$BOOTS.log")"
	elif [ -n "$stuck" ]; then
		say_not_ok "$rel: the guest powered off within ${POWEROFF_WAIT} s of the scenario's end (stopped)" \
			"console:" "$(tail -n 30 "$con" | tr -d '\r')"
	else
		say_ok "$rel: the scenario ran to its end over $BOOTS boots and the guest powered off${t_end:+ ($(($(date +%s) - t_end)) s after # END)}"
	fi
	return 0
}

TIER0=$(now)
for rel in "${RELEASES[@]}"; do
	t_rel=$(now)
	out "# == $rel"
	rundir=$(mktemp -d "$CACHE/run-$rel.XXXXXX")
	if prepare_guest "$rel" "$rundir"; then
		run_guest "$rel" "$rundir/tree" "$rundir" ||
			say_not_ok "$rel: the guest's kernel, initrd and disk image (in $rundir; OCSB_VM_KEEP=1 keeps it)"
		out "# $rel timings: package ${PKG_TIME:-?} s ($PKG_HOW), image ${IMAGE_TIME:-?} s ($IMAGE_HOW), guest tree ${TREE_TIME:-?} s, boot to first TAP line ${BOOT_FIRST:-none} s, ${BOOTS:-?} boots to power-off ${BOOT_END:-?} s, release total $(elapsed "$t_rel") s"
	fi
	if [ "${OCSB_VM_KEEP:-}" = 1 ]; then
		out "# $rel: kept $rundir"
	else
		rm -rf "$rundir"
	fi
done
out "# vm tier: $(elapsed "$TIER0") s for ${RELEASES[*]}"
summary
