/* SPDX-License-Identifier: MIT */
/*
 * The route ports' listeners: ocsb-agentd (root) binds all INJ_MAX_ROUTES of them once, at
 * start, before any agent process runs, and holds them for its lifetime; each incarnation
 * of the injector gets them over the hand-over socket (SCM_RIGHTS) and never binds. So no
 * other local account can take a route port while the injector is not yet started, is
 * restarting or gets a new route: the agent's baseURL and git's insteadOf never reach a
 * squatter.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "inject.h"

int inj_listen(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* "ocsb-listen MASK\n", MASK four hex digits: bit i set when the slot i listener follows. */
#define HEAD_FMT "ocsb-listen %04x\n"
#define HEAD_LEN 17

int inj_send_fds(int sock, const char *head, const int *fds, size_t n)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * INJ_MAX_ROUTES)];
	} cm;
	struct iovec iov = {(void *)head, strlen(head)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};

	if (n > INJ_MAX_ROUTES)
		return -1;
	memset(&cm, 0, sizeof(cm));
	if (n) {
		m.msg_control = cm.b;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(&cm.h), fds, sizeof(int) * n);
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)iov.iov_len ? 0 : -1;
}

int inj_send_listeners(int sock, const int lfd[INJ_MAX_ROUTES])
{
	int fds[INJ_MAX_ROUTES];
	unsigned mask = 0;
	size_t n = 0;
	char head[HEAD_LEN + 1];

	for (unsigned i = 0; i < INJ_MAX_ROUTES; i++)
		if (lfd[i] >= 0) {
			mask |= 1u << i;
			fds[n++] = lfd[i];
		}
	snprintf(head, sizeof(head), HEAD_FMT, mask);
	return inj_send_fds(sock, head, fds, n);
}

ssize_t inj_recv_fds(int sock, void *p, size_t n, int *fds, size_t max, size_t *ret_nfd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * INJ_MAX_ROUTES)];
	} cm;
	struct iovec iov = {p, n};
	struct msghdr m = {.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = cm.b,
		.msg_controllen = sizeof(cm.b)};
	size_t nfd = 0;
	ssize_t r;

	memset(&cm, 0, sizeof(cm));
	do
		r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r >= 0)
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (nfd < max)
					fds[nfd++] = fd;
				else
					close(fd);
			}
		}
	/* Descriptors the kernel could not pass (the fd limit): as good as none. */
	if (r >= 0 && (m.msg_flags & MSG_CTRUNC)) {
		while (nfd)
			close(fds[--nfd]);
	}
	*ret_nfd = nfd;
	return r;
}

int inj_recv_listeners(int sock, int ret_lfd[INJ_MAX_ROUTES])
{
	char head[HEAD_LEN + 1], want[HEAD_LEN + 1];
	int fds[INJ_MAX_ROUTES], type = 0, ok = 1;
	size_t got = 0, nfd = 0, k = 0;
	unsigned long mask;
	char *e;
	ssize_t r = inj_recv_fds(sock, head, HEAD_LEN, fds, INJ_MAX_ROUTES, &nfd);

	if (r <= 0) {
		while (nfd)
			close(fds[--nfd]);
		return -1;
	}
	got = (size_t)r;
	/* The rest of the head, if the stream split it (no descriptors come with it). */
	while (ok && got < HEAD_LEN) {
		r = read(sock, head + got, HEAD_LEN - got);
		if (r <= 0)
			ok = 0;
		else
			got += (size_t)r;
	}
	head[HEAD_LEN] = 0;
	mask = ok && !strncmp(head, "ocsb-listen ", 12) ? strtoul(head + 12, &e, 16) : 0;
	if (!ok || strncmp(head, "ocsb-listen ", 12) ||
		e != head + 16 || *e != '\n' || (unsigned)__builtin_popcountl(mask) != nfd)
		ok = 0;
	snprintf(want, sizeof(want), HEAD_FMT, (unsigned)mask);
	if (ok && strcmp(head, want))
		ok = 0;
	/* Each one a listening TCP socket: anything else is not agentd's. */
	for (size_t i = 0; ok && i < nfd; i++) {
		socklen_t tl = sizeof(type);
		if (getsockopt(fds[i], SOL_SOCKET, SO_ACCEPTCONN, &type, &tl) < 0 || type != 1)
			ok = 0;
	}
	if (!ok) {
		for (size_t i = 0; i < nfd; i++)
			close(fds[i]);
		return -1;
	}
	for (unsigned i = 0; i < INJ_MAX_ROUTES; i++)
		ret_lfd[i] = mask & (1u << i) ? fds[k++] : -1;
	return 0;
}
