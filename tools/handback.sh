#!/bin/sh
# SPDX-License-Identifier: MIT
# handback.sh UID:GID: after a make run as root in a tree a user owns (the Makefile's first
# lines), everything in the tree that is not UID:GID's becomes theirs again (build/, the
# .deb, test output), so that nothing in their clone is left they cannot rebuild or remove.
# -h: a link itself, never what it points to; -xdev: no other file system (a mount a test
# left) is entered; find does not follow links into directories.
set -eu
case ${1:-} in
[0-9]*:[0-9]*) ;;
*) echo "handback.sh: usage: handback.sh UID:GID" >&2; exit 2 ;;
esac
uid=${1%%:*}
gid=${1#*:}
cd "$(dirname "$0")/.."
n=$(find . -xdev \( ! -uid "$uid" -o ! -gid "$gid" \) -print -exec chown -h "$uid:$gid" {} + | wc -l)
[ "$n" -eq 0 ] || echo "make: $n files made as root in $(pwd) handed back to uid $uid"
