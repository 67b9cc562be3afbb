#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t-02-harness-syslog.sh: the harness on a machine whose /dev/log is a socket (a syslog
# daemon without systemd, as in many containers and sysvinit installs; issue 28 item 11).
# The line below makes ns-inner.sh give this namespace a /dev of its own with a socket at
# /dev/log before it sets anything up: that this file runs at all is the harness working
# (before the fix, "hide /dev/log" failed and every t-file was "not ok"). Here: the socket
# was there, it is hidden (nothing reaches a syslog), and the owner's ssh session and
# useradd work as in t-00. t-00 is the run without a socket on hosts that have none.
# e2e-harness: syslog-socket
# shellcheck disable=SC2016 # the bash -c snippets expand their variables themselves

# shellcheck source=lib.sh
. "$E2E_LIB"

check_output "/dev/log was a socket when the harness started (the stand-in syslog)" '^socket$' \
	echo "$E2E_DEVLOG_WAS"
check_output "/dev/log is no socket now: an empty file over it" '^regular empty file$' \
	stat -c %F /dev/log
check_output "  ... mounted by the harness" '^/dev/log$' findmnt -n -o TARGET --mountpoint /dev/log
check_fails "  ... so nothing can log to a syslog through it" \
	python3 -c 'import socket; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).connect("/dev/log")'
check_output "the rest of /dev works: /dev/null, /dev/pts" '^ok$' \
	bash -c 'echo x >/dev/null && [ -c /dev/null ] && [ -d /dev/pts ] && findmnt -n --mountpoint /dev/pts >/dev/null && echo ok'
check_output "owner can ssh to herself with her key (the harness set up)" "^$OWNER\$" \
	owner_ssh "$OWNER" id -un
check "useradd works (its messages go nowhere)" useradd -m e2e-syslog-probe
check_output "  ... the account is there" '^e2e-syslog-probe:' getent passwd e2e-syslog-probe
