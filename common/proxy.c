/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"
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

int proxy_render(const struct proxy *px, const struct egress *e, struct buf *out)
{
	struct egress_squid sq = {.port = px->port, .state_dir = px->state, .user = PROXY_USER};

	if (egress_render_squid(e, &sq, out) < 0) {
		log_err("rendering the squid configuration failed");
		return -1;
	}
	return 0;
}

int proxy_check_text(const struct proxy *px, const char *text, char *err, size_t errlen)
{
	char tmp[] = "/tmp/ocsb-squid-check.XXXXXX";
	struct spawn_opts o = {.capture = 1, .timeout_ms = 20000};
	struct spawn_result res;
	const char *argv[] = {px->squid, "-k", "parse", "-f", tmp, NULL};
	int fd, r;

	fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "temporary file: %s", strerror(errno));
		return -1;
	}
	r = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -1;
	close(fd);
	if (r == 0)
		r = spawn_run(argv, &o, &res);
	unlink(tmp);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s (install squid: apt-get install squid)", px->squid,
			strerror(-r));
		return -1;
	}
	/* squid 5 exits 0 on some errors (a bad regex): its ERROR lines count too. */
	if (res.status != 0 ||
		(res.output && (strstr(res.output, "FATAL") || strstr(res.output, "ERROR")))) {
		/* squid explains itself in lines with ERROR/FATAL; keep the first of them. */
		const char *line = res.output ? strstr(res.output, "FATAL") : NULL;

		if (!line && res.output)
			line = strstr(res.output, "ERROR");
		snprintf(err, errlen, "squid -k parse rejected the configuration: %.*s",
			line ? (int)strcspn(line, "\n") : 20, line ? line : "(no message)");
		spawn_result_free(&res);
		return -1;
	}
	spawn_result_free(&res);
	return 0;
}

int proxy_pid(const struct proxy *px)
{
	return procs_pidfile(px->pidfile, px->squid);
}

int proxy_start(const struct proxy *px, int timeout_ms, char *err, size_t errlen)
{
	char *const env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};
	const char *argv[] = {px->squid, "-N", "-f", px->conf, NULL};
	struct spawn_opts o = {.envp = env, .detach = 1};
	struct spawn_result res;
	long deadline;
	int r;

	/*
	 * The netlock lets the agent reach this port, whoever listens on it: it must be ocsb's
	 * squid. Debian's squid package starts squid.service on *:3128, ocsb's default port.
	 */
	if (procs_port_holder(px->port, proxy_pid(px)) == -EADDRINUSE) {
		snprintf(err, errlen,
			"127.0.0.1:%u, the agent's proxy port, is held by another process, not "
			"ocsb's squid: stop it (Debian's squid.service: systemctl disable --now "
			"squid) or set another proxy-port in ocsb.conf",
			px->port);
		return -1;
	}
	/* Detached: squid belongs to init, not to the short-lived caller. */
	r = spawn_run(argv, &o, &res);
	spawn_result_free(&res);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", px->squid, strerror(-r));
		return -1;
	}
	deadline = mono_ms() + timeout_ms;
	while (mono_ms() < deadline) {
		if (procs_port_holder(px->port, proxy_pid(px)) == 1)
			return 0;
		usleep(20000);
	}
	snprintf(err, errlen, "squid did not start listening on 127.0.0.1:%u within %d ms (see %s)",
		px->port, timeout_ms, px->cache_log);
	return -1;
}

int proxy_reconfigure(const struct proxy *px)
{
	pid_t pid;
	int fd, r = procs_pidfile_pin(px->pidfile, px->squid, &pid, &fd);

	if (r < 0)
		return r;
	r = procs_pidfd_signal(pid, fd, SIGHUP);
	if (fd >= 0)
		close(fd);
	return r;
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
