/* SPDX-License-Identifier: MIT */
/*
 * One sock_diag client for the three questions the programs ask about TCP sockets: who
 * listens on a port (agentd: who took a route port; squid's and OpenCode's ports: is it
 * the process we started), and who connected (ocsb-inject: the second wall behind the
 * netlock; sockdiag_peer.c, which the warden does not link). The kernel answers with the socket's uid and inode as numbers; a parser of
 * /proc/net/tcp's columns read IPv4 only and broke with every format change.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>

#include "sockdiag.h"
#include "sockdiag_int.h"

/* Room for a dump's datagram: the kernel fills up to 32 KiB when the reader offers it. */
#define SD_BUF 32768

int sockdiag_open(void)
{
	int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);

	return nl < 0 ? -errno : nl;
}

/*
 * Sends one request and hands each answer to fn until fn returns non-zero: for a single
 * socket asked by its 4-tuple, the first answer ends it; a dump is read to its
 * NLMSG_DONE whatever fn said, so nothing of it stays queued on nl. Answers to an
 * earlier question on the same socket (one abandoned half-way) are skipped by their
 * sequence number. fn's value (0 when it never returned non-zero), or -errno (the
 * kernel's NLMSG_ERROR: -ENOENT for a socket it does not know).
 */
int sockdiag_ask(int nl, const struct inet_diag_req_v2 *req, int dump,
	int (*fn)(const struct nlmsghdr *h, void *ctx), void *ctx)
{
	static uint32_t seq_counter;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	union {
		struct nlmsghdr h;
		char b[SD_BUF];
	} buf;
	struct nlmsghdr *h;
	uint32_t seq = __atomic_add_fetch(&seq_counter, 1, __ATOMIC_RELAXED);
	int result = 0;

	h = mnl_nlmsg_put_header(buf.b);
	h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
	h->nlmsg_flags = NLM_F_REQUEST | (dump ? NLM_F_DUMP : 0);
	h->nlmsg_seq = seq;
	memcpy(mnl_nlmsg_put_extra_header(h, sizeof(*req)), req, sizeof(*req));
	if (sendto(nl, h, h->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	for (;;) {
		ssize_t got = recv(nl, buf.b, sizeof(buf.b), 0);
		int left = (int)got, ours = 0;

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			return -EPROTO;
		for (h = &buf.h; mnl_nlmsg_ok(h, left); h = mnl_nlmsg_next(h, &left)) {
			if (h->nlmsg_seq != seq)
				continue;
			ours = 1;
			if (h->nlmsg_type == NLMSG_DONE)
				return result;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);

				if (mnl_nlmsg_get_payload_len(h) < sizeof(*e))
					return -EPROTO;
				return e->error < 0 ? e->error : result;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
				mnl_nlmsg_get_payload_len(h) < sizeof(struct inet_diag_msg))
				continue;
			if (!result)
				result = fn(h, ctx);
			if (result && !dump)
				return result;
		}
		/* Ours, but not the answer a single question gets. */
		if (ours && !dump)
			return -EPROTO;
	}
}

int sockdiag_with(int nl, int (*body)(int nl, void *ctx), void *ctx)
{
	int own = -1, r;

	if (nl < 0) {
		own = sockdiag_open();
		if (own < 0)
			return own;
		nl = own;
	}
	r = body(nl, ctx);
	if (own >= 0)
		close(own);
	return r;
}

/* ---- who listens ---- */

struct listen_q {
	unsigned port;
	struct sockdiag_sock found;
	int hit;
};

static int v6only_attr(const struct nlattr *a, void *data)
{
	const struct nlattr **v6only = data;

	if (mnl_attr_get_type(a) == INET_DIAG_SKV6ONLY && mnl_attr_validate(a, MNL_TYPE_U8) >= 0)
		*v6only = a;
	return MNL_CB_OK;
}

/* Does this listener take connections to 127.0.0.1? */
static int takes_loopback4(const struct nlmsghdr *h, const struct inet_diag_msg *m)
{
	const struct nlattr *v6only = NULL;
	const uint32_t *a = m->id.idiag_src;
	uint32_t lo = htonl(INADDR_LOOPBACK);

	if (m->idiag_family == AF_INET)
		return a[0] == 0 || a[0] == lo;
	if (m->idiag_family != AF_INET6)
		return 0;
	/* ::ffff:127.0.0.1 */
	if (a[0] == 0 && a[1] == 0 && a[2] == htonl(0xffff) && a[3] == lo)
		return 1;
	if (a[0] || a[1] || a[2] || a[3])
		return 0;
	/* :: takes IPv4 too unless the socket is IPv6-only (the kernel says which). */
	mnl_attr_parse(h, sizeof(*m), v6only_attr, &v6only);
	return !v6only || !mnl_attr_get_u8(v6only);
}

static int listen_answer(const struct nlmsghdr *h, void *ctx)
{
	struct listen_q *q = ctx;
	const struct inet_diag_msg *m = mnl_nlmsg_get_payload(h);

	if (m->idiag_state != TCP_LISTEN || ntohs(m->id.idiag_sport) != q->port ||
		!takes_loopback4(h, m))
		return 0;
	q->found.uid = (uid_t)m->idiag_uid;
	q->found.inode = m->idiag_inode;
	q->hit = 1;
	return 1;
}

static int listen_body(int nl, void *ctx)
{
	static const int families[] = {AF_INET, AF_INET6};
	struct listen_q *q = ctx;

	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]) && !q->hit; i++) {
		struct inet_diag_req_v2 req = {
			.sdiag_family = (uint8_t)families[i],
			.sdiag_protocol = IPPROTO_TCP,
			.idiag_states = 1u << TCP_LISTEN,
		};
		int r;

		/* The kernel skips listeners of other ports itself (a sport filter). */
		req.id.idiag_sport = htons((uint16_t)q->port);
		req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
		req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
		r = sockdiag_ask(nl, &req, 1, listen_answer, q);
		/* A kernel built without IPv6 has no AF_INET6 handler: nothing listens there. */
		if (r < 0 && !(families[i] == AF_INET6 && (r == -ENOENT || r == -EINVAL)))
			return r;
	}
	return q->hit ? 0 : -ENOENT;
}

int sockdiag_listener(int nl, unsigned port, struct sockdiag_sock *ret)
{
	struct listen_q q = {.port = port};
	int r;

	if (port == 0 || port > 65535)
		return -EINVAL;
	r = sockdiag_with(nl, listen_body, &q);
	if (r == 0)
		*ret = q.found;
	return r;
}
