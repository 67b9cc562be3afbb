#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one command in an extracted build root: tests/matrix/in-root.sh ROOT COMMAND...
# Started by run.sh as PID 1 of fresh mount, network and PID namespaces (unshare): every mount
# made here is private to that namespace and disappears with it, whatever way the run ends, so
# the host never keeps a mount or a process of the matrix. The network namespace has only
# `lo`: building, testing and installing the package must need no download.
set -eu
root=$1
shift
ip link set lo up
mount --bind "$root" "$root"
mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
mount --rbind /dev "$root/dev"
# The host's /dev/shm is not the build's to write into.
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
# pivot_root, not chroot: the kernel refuses user namespaces to a chrooted process (EPERM),
# and unit tests that need one (nft encodings in `unshare -rn`) would only be skipped. The
# old root is stacked on the new one, then detached: nothing of the host stays visible.
# From here on every command is the root's own (its umount: package mount).
cd "$root"
pivot_root . .
umount -l .
cd /
exec /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LC_ALL=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive "$@"
