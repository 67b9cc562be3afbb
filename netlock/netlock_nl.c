/* SPDX-License-Identifier: MIT */
/*
 * Netlink plumbing of the netlock: the socket, one request and its replies, errors in words.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_conntrack_tuple_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/gen.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>
#include "netlock.h"
#include "netlock_int.h"

/* ---- netlink plumbing ---- */

void netlock_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || errlen == 0)
		return;
	n = snprintf(err, errlen, "netlock: ");
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* strerror(e) plus what to do about the one error an operator will meet. */
const char *netlock_hint(int e)
{
	return e == EPERM ? ": needs root (CAP_NET_ADMIN)" : "";
}

long netlock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

struct mnl_socket *netlock_socket(int *ret_err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);

	if (!nl) {
		*ret_err = errno;
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		*ret_err = errno;
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

void netlock_drain(struct mnl_socket *nl)
{
	char buf[4096];

	for (;;) {
		ssize_t n = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno != ENOBUFS && errno != EINTR)
			return;
	}
}

/* Wait for the socket to be readable: 0, or -ETIMEDOUT / -errno. */
int netlock_wait(struct mnl_socket *nl, long deadline)
{
	for (;;) {
		struct pollfd pf = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
		long left = deadline - netlock_now_ms();
		int r;

		/* Past the deadline, still take what is queued already. */
		r = poll(&pf, 1, left > 0 ? (int)left : 0);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/*
 * One request and its answers through cb: a dump ends with NLMSG_DONE, a
 * single get (sent with NLM_F_ACK) with its ack. 0 or -errno (-ENOENT: no
 * such object).
 */
int netlock_query(struct mnl_socket *nl, struct nlmsghdr *req, mnl_cb_t cb, void *data)
{
	long deadline;
	uint32_t seq = req->nlmsg_seq, portid = mnl_socket_get_portid(nl);
	char *buf = malloc(NETLOCK_RCVBUF);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0) {
		rc = -errno;
		goto out;
	}
	deadline = netlock_now_ms() + NETLOCK_TIMEOUT_MS;
	for (;;) {
		ssize_t n;
		int r;

		rc = netlock_wait(nl, deadline);
		if (rc < 0)
			goto out;
		n = mnl_socket_recvfrom(nl, buf, NETLOCK_RCVBUF);
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
		if (r < 0) {
			rc = errno ? -errno : -EPROTO;
			goto out;
		}
		if (r == MNL_CB_STOP)
			break;
	}
out:
	free(buf);
	return rc;
}

uint32_t netlock_seq(void)
{
	static uint32_t seq;

	if (!seq)
		seq = (uint32_t)time(NULL);
	return seq++;
}

int netlock_streq(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}
