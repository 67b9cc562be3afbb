/* SPDX-License-Identifier: MIT */
/*
 * Who connected (sockdiag.h): the uid of the socket at the other end of a TCP connection
 * between two sockets of this machine, for ocsb-inject. Apart from
 * who listens (sockdiag.c), which is all the warden asks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/sock_diag.h>

#include "sockdiag.h"
#include "sockdiag_int.h"

struct peer_q {
	struct sockaddr_in local, peer;
	uid_t uid;
	int r;
};

static int peer_answer(const struct nlmsghdr *h, void *ctx)
{
	struct peer_q *q = ctx;
	const struct inet_diag_msg *m = mnl_nlmsg_get_payload(h);

	/* The socket asked for, not a neighbour's. */
	if (m->idiag_family != AF_INET || m->id.idiag_sport != q->peer.sin_port ||
		m->id.idiag_dport != q->local.sin_port ||
		m->id.idiag_src[0] != q->peer.sin_addr.s_addr ||
		m->id.idiag_dst[0] != q->local.sin_addr.s_addr) {
		q->r = -ESRCH;
		return 1;
	}
	q->uid = (uid_t)m->idiag_uid;
	q->r = 0;
	return 1;
}

static int peer_body(int nl, void *ctx)
{
	struct peer_q *q = ctx;
	struct inet_diag_req_v2 req = {
		.sdiag_family = AF_INET,
		.sdiag_protocol = IPPROTO_TCP,
		.idiag_states = ~0u,
	};
	int r;

	/* The connecting socket's own view: its source is our peer, its destination us. */
	req.id.idiag_sport = q->peer.sin_port;
	req.id.idiag_dport = q->local.sin_port;
	req.id.idiag_src[0] = q->peer.sin_addr.s_addr;
	req.id.idiag_dst[0] = q->local.sin_addr.s_addr;
	req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	r = sockdiag_ask(nl, &req, 0, peer_answer, q);
	return r < 0 ? r : q->r;
}

int sockdiag_peer_uid(int nl, int fd, uid_t *ret_uid)
{
	struct peer_q q = {.r = -EPROTO};
	socklen_t ll = sizeof(q.local), pl = sizeof(q.peer);
	int r;

	if (getsockname(fd, (struct sockaddr *)&q.local, &ll) < 0 ||
		getpeername(fd, (struct sockaddr *)&q.peer, &pl) < 0)
		return -errno;
	if (q.local.sin_family != AF_INET || q.peer.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	r = sockdiag_with(nl, peer_body, &q);
	if (r == 0)
		*ret_uid = q.uid;
	return r;
}
