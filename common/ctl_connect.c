/* SPDX-License-Identifier: MIT */
/*
 * Reaching the control socket: a connect with a deadline, and the deadline helpers the
 * frame I/O of ctl.c shares. A file of its own: ocsb-provision asks only whether a
 * supervisor listens, and links this without the protocol's parsers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_int.h"

/* Deadlines are absolute CLOCK_MONOTONIC milliseconds; -1 is none (timeout_ms < 0). */
static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long long ctl_deadline_in(int timeout_ms)
{
	return timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
}

int ctl_remaining_ms(long long deadline)
{
	long long left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	return left <= 0 ? 0 : left > INT32_MAX ? INT32_MAX : (int)left;
}

int ctl_wait_fd(int fd, short events, long long deadline)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	for (;;) {
		r = poll(&p, 1, ctl_remaining_ms(deadline));
		if (r > 0)
			return 0; /* including POLLHUP/POLLERR: the next call reports it */
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int ctl_connect_until(const char *path, long long deadline)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, r, soerr;
	socklen_t sl = sizeof(soerr);

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	for (;;) {
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		r = -errno;
		if (r == -EINTR)
			continue;
		if (r == -EAGAIN) {
			/*
			 * The listen backlog is full. Linux cannot poll an unconnected Unix socket
			 * for room, so retry briefly until the deadline.
			 */
			int left = ctl_remaining_ms(deadline);
			struct timespec ts = {0, 10 * 1000000L};

			if (left == 0) {
				r = -ETIMEDOUT;
				break;
			}
			if (left > 0 && left < 10)
				ts.tv_nsec = left * 1000000L;
			nanosleep(&ts, NULL);
			continue;
		}
		if (r == -EINPROGRESS) {
			r = ctl_wait_fd(fd, POLLOUT, deadline);
			if (r == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
				r = -errno;
			else if (r == 0)
				r = -soerr;
			if (r == 0)
				return fd;
		}
		break;
	}
	close(fd);
	return r;
}

int ctl_connect(const char *path, int timeout_ms)
{
	return ctl_connect_until(path, ctl_deadline_in(timeout_ms));
}
