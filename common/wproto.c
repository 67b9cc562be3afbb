/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "wproto.h"

int wp_send(int fd, uint32_t type, uint32_t id, const void *payload, size_t len, const void *tail,
	size_t tail_len, const int *fds, size_t nfds)
{
	struct wp_hdr h = {.type = type, .id = id};
	struct iovec iov[3] = {
		{.iov_base = &h, .iov_len = sizeof(h)},
		{.iov_base = (void *)payload, .iov_len = len},
		{.iov_base = (void *)tail, .iov_len = tail_len},
	};
	union {
		char buf[CMSG_SPACE(sizeof(int) * WP_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = iov, .msg_iovlen = 3};
	ssize_t n;

	if (sizeof(h) + len + tail_len > WP_MAX_MSG || nfds > WP_MAX_FDS)
		return -EMSGSIZE;
	if (nfds) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = sendmsg(fd, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == sizeof(h) + len + tail_len ? 0 : -EMSGSIZE;
}

int wp_recv(int fd, struct wp_hdr *h, void *buf, size_t *len, int *fds, size_t *nfds)
{
	struct iovec iov[2] = {
		{.iov_base = h, .iov_len = sizeof(*h)},
		{.iov_base = buf, .iov_len = WP_MAX_MSG - sizeof(*h)},
	};
	union {
		char buf[CMSG_SPACE(sizeof(int) * WP_MAX_FDS)];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = iov,
		.msg_iovlen = 2,
		.msg_control = u.buf,
		.msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c;
	int bad = 0;
	ssize_t n;

	*nfds = 0;
	for (size_t i = 0; i < WP_MAX_FDS; i++)
		fds[i] = -1;
	do
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -ECONNRESET;
	if (n == 0)
		return -ECONNRESET;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		size_t k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			bad = 1;
			continue;
		}
		k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;

			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < WP_MAX_FDS)
				fds[(*nfds)++] = f;
			else {
				close(f);
				bad = 1;
			}
		}
	}
	if (bad || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)n < sizeof(*h)) {
		for (size_t i = 0; i < *nfds; i++)
			close(fds[i]);
		*nfds = 0;
		for (size_t i = 0; i < WP_MAX_FDS; i++)
			fds[i] = -1;
		return -EBADMSG;
	}
	*len = (size_t)n - sizeof(*h);
	return 0;
}

static int name_char(char c, int first)
{
	return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		(!first && c >= '0' && c <= '9');
}

int wp_env_check(const char *env, size_t envlen, uint32_t nenv, char **out, size_t outn)
{
	size_t off = 0;

	if (nenv > WP_MAX_ENV || nenv >= outn || (nenv == 0) != (envlen == 0))
		return -EINVAL;
	if (envlen && env[envlen - 1] != '\0')
		return -EINVAL;
	for (uint32_t i = 0; i < nenv; i++) {
		const char *s = env + off;
		size_t n, k = 0;

		if (off >= envlen)
			return -EINVAL;
		n = strlen(s); /* ends within env: its last byte is a NUL */
		while (k < n && s[k] != '=' && name_char(s[k], k == 0))
			k++;
		if (k == 0 || k >= n || s[k] != '=')
			return -EINVAL;
		out[i] = (char *)s;
		off += n + 1;
	}
	if (off != envlen)
		return -EINVAL;
	out[nenv] = NULL;
	return 0;
}
