#!/bin/bash
# SPDX-License-Identifier: MIT
#
# The VM tier's boot probes (units ocsb-vm-probe-*.service, installed by scenario.sh before
# its reboots). As whoever runs it:
#   probe.sh once          one line: uptime, user, and whether a TCP connect got through to
#                          the address outside and to the local service on 127.0.0.1:7070
#                          (both ocsb-vm-far's, up before any probe)
#   probe.sh loop SECONDS  that, every 0.2 s, for SECONDS (and at least 3 times)
# As root:
#   probe.sh ssh USER...   for each USER, the first ssh session sshd accepts (the owner's
#                          key), running `probe.sh once` there; "ssh USER: <line>"
set -u
export LC_ALL=C
FAR=10.99.0.2
FAR_PORT=8080
OWNER=dev
# try ADDR PORT: THROUGH (connected), REFUSED (a reset: the netlock's reject, or nothing
# listens), DENIED (EPERM/EACCES: a cgroup's IPAddressDeny), TIMEOUT (no answer in 3 s:
# says nothing), or OTHER.
try() {
	local out rc
	out=$(timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' sh "$1" "$2" 2>&1)
	rc=$?
	case $rc:$out in
	0:*) echo THROUGH ;;
	124:*) echo TIMEOUT ;;
	*refused*) echo REFUSED ;;
	*"not permitted"* | *"ermission denied"*) echo DENIED ;;
	*) echo OTHER ;;
	esac
}
once() {
	echo "uptime=$(cut -d' ' -f1 /proc/uptime) user=$(id -un) far=$(try "$FAR" "$FAR_PORT") local=$(try 127.0.0.1 7070)"
}
case ${1:-} in
once) once ;;
loop)
	# SECONDS long, and at least 3 tries: a guest slowed by a busy host made one in 15 s.
	end=$((SECONDS + ${2:-10})) n=0
	while [ "$SECONDS" -lt "$end" ] || [ "$n" -lt 3 ]; do
		once
		n=$((n + 1))
		sleep 0.2
	done
	;;
ssh)
	shift
	for u in "$@"; do
		line=
		for _ in $(seq 1 300); do
			line=$(runuser -u "$OWNER" -- ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new \
				-o ConnectTimeout=5 -o LogLevel=ERROR "$u@localhost" "$0" once 2>/dev/null |
				grep '^uptime=') && break
			sleep 0.2
		done
		echo "ssh $u: ${line:-no session within 60 s}"
	done
	;;
*)
	echo "usage: probe.sh once | loop SECONDS | ssh USER..." >&2
	exit 2
	;;
esac
