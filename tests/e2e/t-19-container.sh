# SPDX-License-Identifier: MIT
# In a container (issue 28 item 1). systemd-nspawn's default seccomp filter refuses keyctl,
# mlock and Landlock with EPERM (LXC's deny lists answer ENOSYS); ocsb said "Operation not
# permitted", "raise RLIMIT_MEMLOCK" and "kernel too old". A filter applied here
# (seccomp-run.py, libseccomp) stands in for the container's: each message must name the
# call and the filter, and each check has its control, the same command without the filter.
# And a minimal container has no /run/lock: pam_namespace failed every ssh session of the
# agent (exit 254, no word why) until the entry made it.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

HERE=$(cd "$(dirname "$0")" && pwd)
FILTER=$HERE/seccomp-run.py
DOC=$OCSB_BUILD/ocsb
NSCONF=/etc/security/namespace.d/ocsb-$AGENT.conf
if ! python3 -c 'import ctypes.util, sys; sys.exit(not ctypes.util.find_library("seccomp"))'; then
	skip "container filters" "libseccomp not found (sudo make deps)"
	exit 0
fi
filtered() { "$FILTER" "$@"; } # filtered ERRNO CALLS -- cmd...
doctor() { "$@" "$DOC" doctor 2>&1; true; }

make_project
check_output "provisioned" '^ocsb-provision: [1-9]' provision || exit 1

# --- doctor: the system calls ocsb needs
check_output "control: doctor without a filter: keyctl and mlock pass" \
	'^OK +syscalls +keyctl and mlock pass' doctor
check_fails "control: doctor without a filter says nothing of seccomp" \
	grep -q 'filtered by seccomp' <<<"$(doctor)"
out=$(doctor filtered EPERM keyctl,mlock,landlock_create_ruleset --)
check_output "nspawn-like filter: doctor FAILs keyctl, naming the filter" \
	'^FAIL +syscalls +keyctl: Operation not permitted, refused by .* seccomp filter \(the container.s, not ocsb.s\): ' \
	printf '%s\n' "$out"
check_output "... and mlock" '^FAIL +syscalls +mlock: Operation not permitted, refused by .* seccomp filter' \
	printf '%s\n' "$out"
check_output "... and Landlock: filtered by seccomp, not a kernel too old" \
	'opencode-sandbox .*Landlock scope for abstract sockets and signals: no \(filtered by seccomp: landlock_create_ruleset: ' \
	printf '%s\n' "$out"
check_fails "... never 'kernel too old' on this kernel" grep -q 'kernel too old' <<<"$out"
check_output "... the ssh sessions' scope too" \
	'^WARN +abstract-sockets +no Landlock scope \(filtered by seccomp: landlock_create_ruleset: ' \
	printf '%s\n' "$out"
check_output "... each with the setting that allows it (the container's, or each kind's)" \
	'keyctl: .*(--system-call-filter=@keyring|seccomp=unconfined|security\.syscalls\.deny)' \
	printf '%s\n' "$out"
# LXC's deny lists answer ENOSYS: on a kernel that has Landlock, still the filter.
check_output "LXC-like filter (ENOSYS): Landlock filtered by seccomp" \
	'Landlock scope .*: no \(filtered by seccomp: landlock_create_ruleset: Function not implemented' \
	doctor filtered ENOSYS landlock_create_ruleset --

# --- provisioning: keyctl (every child run as another account joins a session keyring of
# its own: git, npm's install step, OpenCode) and mlock (the secrets' memory) are tried
# before any change; refused, it stops there with the call, the filter and the setting
P=("$OCSB_BUILD/ocsb-provision" --owner "$OWNER" --project "$PROJECT")
check_output "control: provisioning again without a filter" '^ocsb-provision: 0 changes$' provision
check_fails_output "keyctl filtered: provisioning refuses, naming keyctl and the filter" \
	'^ocsb-provision: error: keyctl: Operation not permitted, refused by .* seccomp filter' \
	filtered EPERM keyctl -- "${P[@]}"
check_fails_output "keyctl filtered: so does npm's install step (--install-opencode alone)" \
	'^ocsb-provision: error: keyctl: Operation not permitted, refused by .* seccomp filter' \
	filtered EPERM keyctl -- "$OCSB_BUILD/ocsb-provision" --install-opencode
# LXC's "keyctl errno 38" (Proxmox's unprivileged default): a kernel without keyrings to
# the drop, which lets ENOSYS through; provisioning must not refuse what would work.
check_output "keyctl ENOSYS (LXC's deny list): provisioning goes on" '^ocsb-provision: 0 changes$' \
	filtered ENOSYS keyctl -- "${P[@]}"
out=$(filtered EPERM mlock -- "${P[@]}" 2>&1)
check_output "mlock filtered: provisioning refuses, naming mlock and the filter" \
	'^ocsb-provision: error: mlock: Operation not permitted, refused by .* seccomp filter' \
	printf '%s\n' "$out"
check_fails "... and does not blame RLIMIT_MEMLOCK" grep -q RLIMIT_MEMLOCK <<<"$out"
check_fails "... and changes nothing" grep -q '^ocsb-provision: [0-9]* changes' <<<"$out"
check_output "control: provisioning without a filter still has nothing to do" \
	'^ocsb-provision: 0 changes$' provision

# --- pam_namespace: a polydir missing at login
check_output "the entry creates what is missing (root's, 1777)" \
	'^/run/lock /run/lock/ tmpfs:create=01777,root,root:' cat "$NSCONF"
check "control: an ssh session of the agent" owner_ssh "$AGENT" true
out=$(doctor)
check_output "control: doctor: ssh-sessions OK" '^OK +ssh-sessions ' printf '%s\n' "$out"
check_output "control: doctor opens a session of the agent (end to end)" \
	'^OK +ssh-session +an ssh session of ai-dev opens' printf '%s\n' "$out"
# The entry as provisioning wrote it before: no create. Without /run/lock, sessions fail.
sed -i 's/tmpfs:create=01777,root,root:/tmpfs:/' "$NSCONF"
rmdir /run/lock
check_fails "old entry, no /run/lock: the session fails (the bug)" owner_ssh "$AGENT" true
out=$(doctor)
check_output "... and doctor says why, with the fix" \
	'^FAIL +ssh-sessions +every ssh session of ai-dev fails \(sshd exits 254\): .* names /run/lock, which does not exist' \
	printf '%s\n' "$out"
grep -E '^FAIL +ssh-session' <<<"$out" | sed 's/^/# doctor: /'
check_output "... and its session, opened end to end, fails" \
	'^FAIL +ssh-session +ssh sessions of ai-dev end before their command runs \(ssh exit 25[45]' \
	printf '%s\n' "$out"
check_output "provisioning writes the entry again" '^ocsb-provision: [1-9]' provision
check "no /run/lock, new entry: the session works" owner_ssh "$AGENT" true
check_output "... /run/lock was made root's, 1777" '^1777 root$' stat -c '%a %U' /run/lock
out=$(doctor)
check_output "... doctor: ssh-sessions OK" '^OK +ssh-sessions ' printf '%s\n' "$out"
check_output "... doctor: a session opens again" '^OK +ssh-session +an ssh session' \
	printf '%s\n' "$out"
