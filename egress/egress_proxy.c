/* SPDX-License-Identifier: MIT */
/*
 * The proxy from its rules (proxy.h): squid.conf rendered from the egress rules, checked
 * with `squid -k parse`, squid started detached and told to re-read it. The paths, the pid
 * and the stop stay in common/proxy.c, for programs that run no egress rules.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress.h"
#include "log.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"
#include "util.h"

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
