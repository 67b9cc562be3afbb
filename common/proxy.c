/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procs.h"
#include "proxy.h"
#include "util.h"

int proxy_init(struct proxy *px, const struct paths *p, unsigned port)
{
	memset(px, 0, sizeof(*px));
	snprintf(px->squid, sizeof(px->squid), "/usr/sbin/squid");
	px->port = port;
	if (path_join(px->dir, sizeof(px->dir), p->varlib, "ocsb/proxy") < 0 ||
		path_join(px->conf, sizeof(px->conf), px->dir, "squid.conf") < 0 ||
		path_join(px->state, sizeof(px->state), px->dir, "state") < 0 ||
		path_join(px->pidfile, sizeof(px->pidfile), px->state, "squid.pid") < 0 ||
		path_join(px->access_log, sizeof(px->access_log), px->state, "access.log") < 0 ||
		path_join(px->cache_log, sizeof(px->cache_log), px->state, "cache.log") < 0)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * Gone, or a zombie its new parent has not reaped yet. Asked of the pidfd first: while
 * it answers, pid is still that process's, and /proc/pid is about it.
 */
static int gone(pid_t pid, int pidfd)
{
	char path[64], buf[256];
	const char *rp;
	FILE *f;
	int z = 0;

	if (procs_pidfd_signal(pid, pidfd, 0) == -ESRCH)
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 1;
	if (fgets(buf, sizeof(buf), f) && (rp = strrchr(buf, ')')) && rp[1] == ' ')
		z = rp[2] == 'Z' || rp[2] == 'X';
	fclose(f);
	return z;
}

int proxy_stop(const struct proxy *px, int timeout_ms)
{
	long deadline;
	pid_t pid;
	int fd, r = 0;

	if (procs_pidfile_pin(px->pidfile, px->squid, &pid, &fd) < 0)
		return 0;
	procs_pidfd_signal(pid, fd, SIGTERM);
	deadline = mono_ms() + timeout_ms;
	while (mono_ms() < deadline) {
		if (gone(pid, fd))
			goto out;
		usleep(20000);
	}
	procs_pidfd_signal(pid, fd, SIGKILL);
	usleep(50000);
	r = gone(pid, fd) ? 0 : -EBUSY;
out:
	if (fd >= 0)
		close(fd);
	return r;
}
