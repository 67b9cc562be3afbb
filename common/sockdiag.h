/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SOCKDIAG_H
#define OCSB_SOCKDIAG_H

#include <sys/types.h>

/*
 * Who holds a TCP socket on this machine, asked of the kernel (NETLINK_SOCK_DIAG,
 * inet_diag_req_v2, messages built and walked with libmnl) instead of read from the text
 * of /proc/net/tcp: typed fields, IPv4 and IPv6 alike, one exact question for one
 * connection. Any account may ask about any socket of its network namespace.
 */

struct sockdiag_sock {
	uid_t uid; /* the socket's owner (the uid nftables' skuid matches) */
	unsigned long inode; /* "socket:[inode]" among its holders' /proc/PID/fd links */
};

/*
 * A NETLINK_SOCK_DIAG socket (close-on-exec), or -errno. For a process that opens it
 * before a seccomp filter takes socket() away (ocsb-inject); the others pass -1 below.
 */
int sockdiag_open(void);

/*
 * The socket listening on TCP port that takes connections to 127.0.0.1: one bound to
 * 127.0.0.1 or 0.0.0.0, or an IPv6 one bound to :: (without IPV6_V6ONLY) or
 * ::ffff:127.0.0.1. 0 with *ret set, -ENOENT when none, -errno. nl: a socket from
 * sockdiag_open, or -1 for one of this call's own.
 */
int sockdiag_listener(int nl, unsigned port, struct sockdiag_sock *ret);

/*
 * The uid owning the other end of fd, a TCP connection over IPv4 between two sockets of
 * this machine: the connecting socket, found by its 4-tuple (TCP has no SO_PEERCRED).
 * 0, -ENOENT (no such socket: gone, or not on this machine), -EAFNOSUPPORT (not IPv4),
 * -errno. nl as above.
 */
int sockdiag_peer_uid(int nl, int fd, uid_t *ret_uid);

#endif
