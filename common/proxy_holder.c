/* SPDX-License-Identifier: MIT */
/*
 * Who holds a loopback port (procs.h), the proxy's pid by its pid file (proxy.h) and its
 * stop: what provisioning, the supervisor and ocsb doctor ask before they start, stop or
 * judge squid. The warden does not ask it: ocsb-provision --warden-config=start stops a
 * squid provisioning started (provision/wrecord.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include "fileops.h"
#include "util.h"

#include "procs.h"
#include "proxy.h"

int proxy_pid(const struct proxy *px)
{
	return procs_pidfile(px->pidfile, px->squid);
}

int procs_port_holder(unsigned port, pid_t pid)
{
	int own;

	if (!procs_port_open(port))
		return 0;
	if (pid <= 0)
		return -EADDRINUSE;
	own = procs_port_owner_is(pid, port);
	if (own < 0)
		return own;
	return own ? 1 : -EADDRINUSE;
}

/*
 * 1 when pid runs exe. exe may be a link: Debian 13's /usr/sbin/squid is an alternatives
 * link to squid-gnutls or squid-openssl, and /proc/PID/exe names the file itself. So:
 * the same file (device and inode), or a file of exe's resolved name that an upgrade has
 * since replaced (the kernel appends " (deleted)").
 */
static int exe_is(long pid, const char *exe)
{
	char link[64], got[PATH_MAX], real[PATH_MAX];
	struct stat a, b;
	size_t el;
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/%ld/exe", pid);
	if (stat(link, &a) == 0 && stat(exe, &b) == 0 && a.st_dev == b.st_dev &&
		a.st_ino == b.st_ino)
		return 1;
	n = readlink(link, got, sizeof(got) - 1);
	if (n < 0)
		return 0;
	got[n] = '\0';
	if (!realpath(exe, real) && snprintf(real, sizeof(real), "%s", exe) >= (int)sizeof(real))
		return 0;
	el = strlen(real);
	return strncmp(got, real, el) == 0 &&
		(got[el] == '\0' || strcmp(got + el, " (deleted)") == 0);
}

int procs_pidfile(const char *pidfile, const char *exe)
{
	char *data = NULL;
	long pid;

	if (fo_read(pidfile, 64, &data, NULL) < 0)
		return -ENOENT;
	pid = strtol(data, NULL, 10);
	free(data);
	if (pid <= 1 || pid > INT_MAX || !exe_is(pid, exe))
		return -ENOENT;
	return (int)pid;
}

int procs_pidfile_pin(const char *pidfile, const char *exe, pid_t *ret_pid, int *ret_pidfd)
{
	int pid = procs_pidfile(pidfile, exe), fd;

	if (pid < 0)
		return pid;
	fd = procs_pidfd(pid);
	if (fd < 0 && fd != -ENOSYS)
		return fd == -ESRCH ? -ENOENT : fd;
	/* Pinned: the pid file's process, if it still runs exe (see procs.h). */
	if (!exe_is(pid, exe)) {
		if (fd >= 0)
			close(fd);
		return -ENOENT;
	}
	*ret_pid = pid;
	*ret_pidfd = fd < 0 ? -1 : fd;
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
