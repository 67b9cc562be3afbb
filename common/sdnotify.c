/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sdnotify.h"

int sd_notify_take(char *name, size_t n)
{
	const char *e = getenv("NOTIFY_SOCKET");
	size_t len = e ? strlen(e) : 0;
	int r = 0;

	name[0] = '\0';
	if (len) {
		if ((e[0] != '/' && e[0] != '@') || len >= n ||
			len >= sizeof(((struct sockaddr_un *)0)->sun_path))
			r = -EINVAL;
		else
			memcpy(name, e, len + 1);
	}
	unsetenv("NOTIFY_SOCKET");
	return r;
}

int sd_notify_send(const char *name, const char *state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(name), n = strlen(state);
	socklen_t salen;
	ssize_t w;
	int fd, r;

	if (!len)
		return 0;
	if ((name[0] != '/' && name[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract: the name's bytes only, no NUL */
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	w = sendto(fd, state, n, MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	r = w < 0 ? -errno : (size_t)w == n ? 1 : -EIO;
	close(fd);
	return r;
}
