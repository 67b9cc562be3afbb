/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "fileops.h"
#include "log.h"

#include "procs.h"
#include "procs_int.h"

/*
 * 1 when /proc/pid/status names uid; 0 otherwise, when the process is gone, or when it is
 * a zombie (State Z) or dead (X): it runs nothing, holds nothing and no signal removes it;
 * only its parent's wait does (an init that does not reap leaves them forever).
 */
static int proc_has_uid(pid_t pid, uid_t uid)
{
	char path[64], line[256], st = '?';
	unsigned r, e, s, f;
	int hit = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fp = fopen(path, "re");
	if (!fp)
		return 0;
	while (fgets(line, sizeof(line), fp)) {
		if (sscanf(line, "State: %c", &st) == 1 && (st == 'Z' || st == 'X'))
			break;
		if (sscanf(line, "Uid: %u %u %u %u", &r, &e, &s, &f) == 4) {
			hit = r == uid || e == uid || s == uid || f == uid;
			break;
		}
	}
	fclose(fp);
	return hit;
}

int procs_pidfd(pid_t pid)
{
	static int warned;
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd >= 0)
		return fd;
	if (errno == ENOSYS && !warned) {
		warned = 1;
		log_warn("pidfd_open: %s (kernel before 5.3): processes are signalled by pid, "
			 "which a process started meanwhile may have taken",
			strerror(errno));
	}
	return -errno;
}

int procs_pidfd_signal(pid_t pid, int pidfd, int sig)
{
	int r = pidfd >= 0 ? (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0)
			   : kill(pid, sig);

	return r < 0 ? -errno : 0;
}

int procs_pin_uid(pid_t pid, uid_t uid, int *ret_pidfd)
{
	int fd = procs_pidfd(pid);

	if (fd < 0 && fd != -ENOSYS)
		return fd;
	if (!proc_has_uid(pid, uid)) {
		if (fd >= 0)
			close(fd);
		return -ESRCH;
	}
	*ret_pidfd = fd < 0 ? -1 : fd;
	return 0;
}

int procs_foreach_uid(uid_t uid, void (*fn)(pid_t pid, int pidfd, void *ctx), void *ctx)
{
	struct dirent *e;
	DIR *d = opendir("/proc");
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)) != NULL) {
		pid_t pid = (pid_t)strtol(e->d_name, NULL, 10);
		int fd;

		if (pid <= 1 || pid == getpid() || !proc_has_uid(pid, uid))
			continue;
		/* Cheap test first (most processes are not uid's), then pinned and again. */
		if (procs_pin_uid(pid, uid, &fd) < 0)
			continue;
		fn(pid, fd, ctx);
		if (fd >= 0)
			close(fd);
		n++;
	}
	closedir(d);
	return n;
}

struct sig_ctx {
	int sig, n;
};

static void signal_one(pid_t pid, int pidfd, void *ctx)
{
	struct sig_ctx *c = ctx;

	/* With sig 0 (counting), still alive after the check. */
	if (procs_pidfd_signal(pid, pidfd, c->sig) == 0)
		c->n++;
}

static int scan(uid_t uid, int sig)
{
	struct sig_ctx c = {sig, 0};
	int r = procs_foreach_uid(uid, signal_one, &c);

	return r < 0 ? r : c.n;
}

int procs_signal_uid(uid_t uid, int sig, int until_none)
{
	int total = 0;

	if (!until_none)
		return scan(uid, sig);
	for (int round = 0; round < 100; round++) {
		int n = scan(uid, sig);

		if (n < 0)
			return n;
		if (n == 0)
			return total;
		total += n;
		usleep(10000);
	}
	return -EBUSY;
}

/* 1 when fd is a listening TCP socket on port that takes connections to 127.0.0.1. */
static int listens_loopback4(int fd, unsigned port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int on = 0, v6only = 0;
	socklen_t ol = sizeof(on);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &ol) < 0 || !on ||
		getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		return ntohs(a->sin_port) == port && (a->sin_addr.s_addr == htonl(INADDR_ANY) ||
							     a->sin_addr.s_addr == htonl(INADDR_LOOPBACK));
	}
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		struct in6_addr mapped = {.s6_addr = {[10] = 0xff, [11] = 0xff, 127, 0, 0, 1}};

		if (ntohs(a->sin6_port) != port)
			return 0;
		if (memcmp(&a->sin6_addr, &mapped, sizeof(mapped)) == 0)
			return 1;
		/* :: takes IPv4 too unless the socket is IPv6-only. */
		ol = sizeof(v6only);
		return IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr) &&
		       getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &ol) == 0 && !v6only;
	}
	return 0;
}

/*
 * pid's descriptors that are sockets, each taken by pidfd_getfd (which needs the right to
 * ptrace pid: root, or the caller's own child) and asked with getsockname: no text of the
 * kernel's is parsed, and nothing but sockets is touched (fstat of a FUSE file could
 * block on the agent's file system).
 */
int procs_port_owner_is(pid_t pid, unsigned port)
{
	char dir[64], link[128], got[64];
	struct dirent *e;
	DIR *d;
	int hit = 0, pidfd, r = 0;

	if (port == 0 || port > 65535)
		return -EINVAL;
	pidfd = procs_pidfd(pid);
	if (pidfd < 0)
		return pidfd;
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	if (!d) {
		r = -errno;
		close(pidfd);
		return r;
	}
	while (!hit && (e = readdir(d)) != NULL) {
		char *end;
		long n;
		ssize_t l;
		int fd;

		n = strtol(e->d_name, &end, 10);
		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end || n > INT_MAX)
			continue;
		snprintf(link, sizeof(link), "%s/%.16s", dir, e->d_name);
		l = readlink(link, got, sizeof(got) - 1);
		if (l <= 0)
			continue;
		got[l] = '\0';
		if (strncmp(got, "socket:[", 8) != 0)
			continue;
		fd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)n, 0);
		if (fd < 0) {
			if (errno != EBADF) /* EBADF: closed meanwhile */
				r = -errno;
			continue;
		}
		hit = listens_loopback4(fd, port);
		close(fd);
	}
	closedir(d);
	close(pidfd);
	return hit ? 1 : r;
}

int procs_port_open(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd, ok;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}
