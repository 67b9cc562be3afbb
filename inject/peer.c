/* SPDX-License-Identifier: MIT */
/*
 * Who is on the other end of a route connection. The netlock already resets every account
 * but agentd's agent on the route ports; this is the second wall, in the injector itself:
 * a connection queued while the table was missing or different (before agentd applied it,
 * a flush, a bug in a rule) is still refused here. TCP has no SO_PEERCRED, but both ends
 * are on this machine: the kernel's sock_diag answers for the connecting socket by its
 * 4-tuple, and its answer carries the uid that owns it (the one nftables' skuid matches).
 * Any account may ask it about any socket of its network namespace.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "inject.h"

int inj_peer_uid(int nl, int fd, uid_t *ret_uid)
{
	static uint32_t seq;
	struct sockaddr_in local, peer;
	socklen_t ll = sizeof(local), pl = sizeof(peer);
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} req;
	union {
		struct nlmsghdr h;
		char b[8192];
	} ans;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	ssize_t n;

	if (getsockname(fd, (struct sockaddr *)&local, &ll) < 0 ||
		getpeername(fd, (struct sockaddr *)&peer, &pl) < 0)
		return -errno;
	if (local.sin_family != AF_INET || peer.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = sizeof(req);
	req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.h.nlmsg_flags = NLM_F_REQUEST;
	req.h.nlmsg_seq = ++seq;
	req.r.sdiag_family = AF_INET;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	/* The connecting socket's own view: its source is our peer, its destination us. */
	req.r.id.idiag_sport = peer.sin_port;
	req.r.id.idiag_dport = local.sin_port;
	req.r.id.idiag_src[0] = peer.sin_addr.s_addr;
	req.r.id.idiag_dst[0] = local.sin_addr.s_addr;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	for (;;) {
		n = recv(nl, &ans, sizeof(ans), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = &ans.h; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
			/* An answer to an earlier, abandoned question is skipped. */
			if (h->nlmsg_seq != seq)
				continue;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				return h->nlmsg_len >= NLMSG_LENGTH(sizeof(*e)) && e->error
					? e->error
					: -EPROTO;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
				h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
				const struct inet_diag_msg *m = NLMSG_DATA(h);
				/* The socket asked for, not a neighbour's. */
				if (m->id.idiag_sport != peer.sin_port ||
					m->id.idiag_dport != local.sin_port ||
					m->id.idiag_src[0] != peer.sin_addr.s_addr ||
					m->id.idiag_dst[0] != local.sin_addr.s_addr)
					return -ESRCH;
				*ret_uid = (uid_t)m->idiag_uid;
				return 0;
			}
			if (h->nlmsg_type == NLMSG_DONE)
				return -ENOENT;
		}
	}
}
