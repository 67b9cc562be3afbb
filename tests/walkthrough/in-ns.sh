#!/bin/bash
# SPDX-License-Identifier: MIT
# in-ns.sh ROOT net|isolated CMD...: PID 1 of a fresh mount+pid (+net for "isolated")
# namespace made by run.sh: gives ROOT a fresh /proc, the host's /sys and /dev, an empty
# /run and /tmp (as a booted machine has), then runs CMD with ROOT as its root (pivot_root). "isolated": the
# namespace's own loopback is the only network, so nothing ROOT loads (nftables) or starts
# (sshd, squid, ocsb-agentd) touches the host's ruleset or ports.
set -eu
root=$1 mode=$2
shift 2
[ "$$" -eq 1 ] || { echo "in-ns.sh: not PID 1 of a new pid namespace (run me through run.sh)" >&2; exit 1; }
if [ "$mode" = isolated ]; then
	[ "$(readlink /proc/self/ns/net)" != "${WALK_HOST_NETNS:?}" ] ||
		{ echo "in-ns.sh: still in the host's network namespace" >&2; exit 1; }
	ip link set lo up
fi
# The root must be a mount point, entered with pivot_root (as a container's is): ocsb-agentd
# makes "/" private in OpenCode's mount namespace, which a chroot's plain directory refuses
# (EINVAL), and the kernel refuses user namespaces to a chrooted process.
mount --bind "$root" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=0755 walk-run "$root/run"
mkdir -m 1777 "$root/run/lock"
mount -t tmpfs -o mode=1777 walk-tmp "$root/tmp"
# The old root goes to /mnt and is let go with its own umount (a fresh root may have
# no mount package).
cd "$root"
pivot_root . mnt
/mnt/usr/bin/umount -l /mnt
cd /
exec "$@"
