/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "fileops.h"
#include "log.h"

/*
 * SIGHUP's squid configuration. `squid -k parse` takes about 0.1 s (more on a busy
 * machine): it runs in a forked child whose answer the loop reads as an event, so the loop
 * goes on meanwhile. Only a configuration squid accepted is written, and only then is
 * squid told to reload; until then the proxy keeps the rules it had. A SIGHUP during a
 * check is remembered: the check runs again when this one ends, on the newest rules.
 */

/* In the forked child: the verdict on fd (empty: accepted), the exit status to match. */
static int check_child(struct agentd *d, int fd)
{
	char err[1024] = "";
	int r = proxy_check_text(&d->proxy, d->pcheck_conf.data, err, sizeof(err));
	size_t len = strlen(err), off = 0;

	while (off < len) {
		ssize_t w = write(fd, err + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	return r < 0 ? 1 : 0;
}

/* The rules of pcheck_gen are not squid's: why, for `ocsb status`. */
static void refused(struct agentd *d, const char *why)
{
	d->proxy_failed_gen = d->pcheck_gen;
	snprintf(d->proxy_error, sizeof(d->proxy_error), "%s", why);
}

void proxycheck_begin(struct agentd *d)
{
	pid_t pid;
	int p[2];

	if (d->egress.off) {
		d->proxy_gen = d->egress_gen;
		return;
	}
	if (d->pcheck_pid > 0) {
		d->pcheck_again = 1;
		return;
	}
	d->pcheck_gen = d->egress_gen;
	buf_free(&d->pcheck_conf);
	if (proxy_render(&d->proxy, &d->egress, &d->pcheck_conf) < 0) {
		refused(d, "proxy: out of memory rendering the rules");
		return;
	}
	if (fo_same(d->proxy.conf, d->pcheck_conf.data, d->pcheck_conf.len, 0644, getuid(),
		    getgid()) == 1) {
		buf_free(&d->pcheck_conf);
		d->proxy_gen = d->pcheck_gen;
		return; /* the rules changed nothing squid sees */
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		refused(d, "proxy: pipe failed");
		log_err("proxy: pipe: %s (the proxy keeps its rules)", strerror(errno));
		return;
	}
	pid = fork();
	if (pid < 0) {
		refused(d, "proxy: fork failed");
		log_err("proxy: fork: %s (the proxy keeps its rules)", strerror(errno));
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		_exit(check_child(d, p[1]));
	}
	close(p[1]);
	d->pcheck_pid = pid;
	d->pcheck_fd = p[0];
	if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0 ||
		agentd_watch(d, p[0], &d->pcheck_src, SRC_PROXYCHECK, NULL, EPOLLIN) < 0) {
		log_err("proxy: watching the check: %s (the proxy keeps its rules)",
			strerror(errno));
		proxycheck_close(d);
	}
}

/* The check's answer, as it comes; at its end the verdict. */
void proxycheck_event(struct agentd *d)
{
	char chunk[512];
	int status = 0, r;

	for (;;) {
		ssize_t n = read(d->pcheck_fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return; /* more to come */
		if (n <= 0)
			break;
		if (d->pcheck_out.len < 4096)
			buf_append(&d->pcheck_out, chunk, (size_t)n);
	}
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->pcheck_fd, NULL);
	close(d->pcheck_fd);
	d->pcheck_fd = -1;
	/* Its end of the pipe closed as it exited: the wait is for a zombie. */
	while (waitpid(d->pcheck_pid, &status, 0) < 0 && errno == EINTR)
		;
	d->pcheck_pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		log_err("%.*s; the proxy keeps its rules",
			d->pcheck_out.len ? (int)d->pcheck_out.len : 30,
			d->pcheck_out.len ? d->pcheck_out.data : "proxy: the configuration check failed");
		refused(d, "squid -k parse refused the rendered rules (the supervisor's log says why)");
	} else if ((r = fo_write(d->proxy.conf, d->pcheck_conf.data, d->pcheck_conf.len, 0644,
			    getuid(), getgid())) < 0) {
		log_err("%s: %s (the proxy keeps its rules)", d->proxy.conf, strerror(-r));
		refused(d, "writing squid's configuration failed");
	} else {
		d->proxy_gen = d->pcheck_gen;
		/* squid is the warden's child: it sends the SIGHUP by its pidfd. */
		if (d->proxy_child.pid > 0 && (r = wc_signal(d, d->proxy_child.slot, SIGHUP)) < 0)
			log_warn("proxy: reload (SIGHUP): %s", strerror(-r));
		log_notice("proxy: new rules in force");
	}
	buf_free(&d->pcheck_out);
	buf_free(&d->pcheck_conf);
	if (d->pcheck_again) {
		d->pcheck_again = 0;
		proxycheck_begin(d);
	}
}

int agentd_learn_timeout(struct agentd *d)
{
	time_t now = time(NULL);
	char until[32];

	if (!d->egress.learning)
		return -1;
	if (now < d->egress.learn_until)
		return (int)(d->egress.learn_until - now > 60 ? 60000
							       : (d->egress.learn_until - now) * 1000);
	egress_time_utc(d->egress.learn_until, until, sizeof(until));
	d->egress.learning = 0;
	d->egress_gen++;
	log_notice("egress: learn mode ended (%s): the allowlist again; `sudo ocsb egress learn "
		   "stop` writes what it learned",
		until);
	proxycheck_begin(d);
	return -1;
}

void proxycheck_close(struct agentd *d)
{
	if (d->pcheck_fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->pcheck_fd, NULL);
		close(d->pcheck_fd);
		d->pcheck_fd = -1;
	}
	if (d->pcheck_pid > 0) {
		kill(d->pcheck_pid, SIGKILL);
		while (waitpid(d->pcheck_pid, NULL, 0) < 0 && errno == EINTR)
			;
		d->pcheck_pid = 0;
	}
	buf_free(&d->pcheck_out);
	buf_free(&d->pcheck_conf);
}
