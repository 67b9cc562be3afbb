/* SPDX-License-Identifier: MIT */
/*
 * The injector's loop: the hand-over socket from ocsb-agentd, the listener agentd holds for
 * each route port (listen.c), one forked process per connection. A process holds the key set it was forked with, so a new
 * set (`ocsb secrets push`) applies to new connections while one in flight finishes with
 * its own. Usage lines go back to agentd over the same socket; nothing is written to disk.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"
#include "log.h"

#define MAX_CHILDREN 64
#define SERVE_TIMEOUT_MS (300 * 1000)

struct daemon {
	int ctl; /* borrowed: the socket to ocsb-agentd */
	int report_r, report_w; /* owned: the children's usage lines */
	struct inj_conf conf; /* owned */
	struct inj_tls *tls; /* owned */
	int slot[INJ_MAX_ROUTES]; /* owned: agentd's listener of INJ_PORT_BASE + i, -1 none */
	int lfd[INJ_MAX_ROUTES]; /* borrowed from slot: listener of conf.r[i], -1 none */
	unsigned children;
	struct buf in; /* the hand-over being read */
	char rep[4096];
	size_t rep_len;
};

/* A new hand-over: each route on agentd's listener of its port; none is bound here. */
static int apply(struct daemon *d, struct inj_conf *nc)
{
	int nl[INJ_MAX_ROUTES];
	struct inj_tls *t;
	char err[512];

	if (inj_tls_new(nc->ca_pem, nc->ca_len, &t, err, sizeof(err)) < 0) {
		log_err("TLS: %s", err);
		return -1;
	}
	for (size_t i = 0; i < nc->n; i++) {
		unsigned p = nc->r[i].port;

		nl[i] = p >= INJ_PORT_BASE && p < INJ_PORT_BASE + INJ_MAX_ROUTES
			? d->slot[p - INJ_PORT_BASE]
			: -1;
		if (nl[i] < 0)
			log_err("route %s: ocsb-agentd holds no listener on 127.0.0.1:%u: not "
				"served",
				nc->r[i].name, p);
	}
	inj_conf_free(&d->conf);
	inj_tls_free(d->tls);
	d->conf = *nc;
	d->tls = t;
	memcpy(d->lfd, nl, sizeof(nl));
	log_info("%zu route(s) loaded", d->conf.n);
	return 0;
}

/* The usage line of one request: "usage\tROUTE\tDAY\tSTATUS\tREQ\tRESP\tIN\tOUT\n". */
int inj_usage_line(const char *route, time_t when, const struct inj_usage *u, char *out, size_t n)
{
	struct tm tm;
	char day[16];

	gmtime_r(&when, &tm);
	strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	return snprintf(out, n, "usage\t%s\t%s\t%d\t%llu\t%llu\t%lld\t%lld\n", route, day,
		u->status, u->req_bytes, u->resp_bytes, u->in_tokens, u->out_tokens);
}

static void child_serve(struct daemon *d, size_t i, int fd)
{
	struct inj_usage u;
	char why[600], line[256];
	int r, n;

	/* Ends with the injector: nothing of it outlives the supervisor's stop. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Nothing but this connection and the report pipe. */
	for (size_t j = 0; j < INJ_MAX_ROUTES; j++)
		if (d->slot[j] >= 0)
			close(d->slot[j]);
	close(d->report_r);
	close(d->ctl);
	r = inj_serve(fd, &d->conf.r[i], d->tls, SERVE_TIMEOUT_MS, &u, why, sizeof(why));
	close(fd);
	if (r < 0)
		log_warn("route %s: %s", d->conf.r[i].name, why);
	else
		log_info("route %s: %d, %llu bytes up, %llu down", d->conf.r[i].name, u.status,
			u.req_bytes, u.resp_bytes);
	n = inj_usage_line(d->conf.r[i].name, time(NULL), &u, line, sizeof(line));
	if (n > 0 && (size_t)n < sizeof(line) && write(d->report_w, line, (size_t)n) < 0)
		log_warn("usage report lost: %s", strerror(errno));
	inj_conf_free(&d->conf);
	_exit(r < 0);
}

static void accept_one(struct daemon *d, size_t i)
{
	int fd = accept4(d->lfd[i], NULL, NULL, SOCK_CLOEXEC);
	pid_t pid;

	if (fd < 0)
		return;
	if (d->children >= MAX_CHILDREN) {
		struct buf b = {0};
		if (inj_error_answer(503, "too many requests in flight", &b) == 0)
			(void)!send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		buf_free(&b);
		close(fd);
		return;
	}
	pid = fork();
	if (pid == 0)
		child_serve(d, i, fd);
	if (pid > 0)
		d->children++;
	else
		log_err("fork: %s", strerror(errno));
	close(fd);
}

/* The hand-over: "ocsb-inject LEN\n" then LEN bytes of inj_conf text. */
static int read_ctl(struct daemon *d)
{
	char tmp[65536];
	ssize_t r = read(d->ctl, tmp, sizeof(tmp));

	if (r <= 0)
		return r < 0 && errno == EINTR ? 0 : -1;
	if (d->in.len + (size_t)r > INJ_CONF_MAX + 64 || buf_append(&d->in, tmp, (size_t)r) < 0) {
		explicit_bzero(tmp, sizeof(tmp));
		return -1;
	}
	explicit_bzero(tmp, sizeof(tmp));
	for (;;) {
		char *nl = memchr(d->in.data, '\n', d->in.len), *e;
		unsigned long len;
		struct inj_conf nc;
		char err[256];

		if (!nl)
			return d->in.len > 64 ? -1 : 0;
		if (strncmp(d->in.data, "ocsb-inject ", 12) != 0)
			return -1;
		len = strtoul(d->in.data + 12, &e, 10);
		if (e != nl || len > INJ_CONF_MAX)
			return -1;
		size_t hl = (size_t)(nl - d->in.data) + 1;
		if (d->in.len < hl + len)
			return 0;
		if (inj_conf_parse(d->in.data + hl, len, &nc, err, sizeof(err)) < 0) {
			log_err("hand-over refused: %s", err);
			dprintf(d->ctl, "error\t%s\n", err);
		} else if (apply(d, &nc) < 0) {
			inj_conf_free(&nc);
			dprintf(d->ctl, "error\tTLS setup failed\n");
		} else {
			dprintf(d->ctl, "ready\t%zu\n", d->conf.n);
		}
		explicit_bzero(d->in.data, hl + len);
		memmove(d->in.data, d->in.data + hl + len, d->in.len - hl - len);
		d->in.len -= hl + len;
	}
}

static void relay_reports(struct daemon *d)
{
	char chunk[1024], *nl;
	size_t room;
	ssize_t r;

	/* A line longer than the buffer is dropped whole (below); the room is never 0. */
	if (d->rep_len >= sizeof(d->rep))
		d->rep_len = 0;
	room = sizeof(d->rep) - d->rep_len;
	r = read(d->report_r, chunk, room < sizeof(chunk) ? room : sizeof(chunk));
	if (r <= 0)
		return;
	memcpy(d->rep + d->rep_len, chunk, (size_t)r);
	d->rep_len += (size_t)r;
	while ((nl = memchr(d->rep, '\n', d->rep_len))) {
		size_t n = (size_t)(nl - d->rep) + 1;
		(void)!write(d->ctl, d->rep, n);
		memmove(d->rep, d->rep + n, d->rep_len - n);
		d->rep_len -= n;
	}
	if (d->rep_len == sizeof(d->rep))
		d->rep_len = 0;
}

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}
static void on_chld(int sig)
{
	(void)sig;
}

int inj_daemon(int ctl)
{
	struct daemon d;
	struct sigaction sa = {.sa_handler = on_term};
	int p[2];

	memset(&d, 0, sizeof(d));
	d.ctl = ctl;
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++)
		d.lfd[i] = -1;
	/* agentd's listeners come first on the socket, before any hand-over. */
	if (inj_recv_listeners(ctl, d.slot) < 0) {
		log_err("no route listeners from ocsb-agentd on the hand-over socket");
		return -1;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	d.report_r = p[0];
	d.report_w = p[1];
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	while (!stop) {
		struct pollfd pf[INJ_MAX_ROUTES + 2];
		size_t map[INJ_MAX_ROUTES], np = 2;

		pf[0] = (struct pollfd){.fd = d.ctl, .events = POLLIN};
		pf[1] = (struct pollfd){.fd = d.report_r, .events = POLLIN};
		for (size_t i = 0; i < d.conf.n; i++)
			if (d.lfd[i] >= 0) {
				map[np - 2] = i;
				pf[np++] = (struct pollfd){.fd = d.lfd[i], .events = POLLIN};
			}
		int r = poll(pf, np, 1000);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			d.children--;
		if (r <= 0)
			continue;
		if (pf[0].revents && read_ctl(&d) < 0) {
			/* agentd is gone or broke protocol: nothing more to serve. */
			log_info("hand-over socket closed");
			break;
		}
		if (pf[1].revents)
			relay_reports(&d);
		for (size_t k = 2; k < np; k++)
			if (pf[k].revents & POLLIN)
				accept_one(&d, map[k - 2]);
	}
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++)
		if (d.slot[i] >= 0)
			close(d.slot[i]);
	inj_conf_free(&d.conf);
	inj_tls_free(d.tls);
	if (d.in.data)
		explicit_bzero(d.in.data, d.in.cap);
	buf_free(&d.in);
	close(d.report_r);
	close(d.report_w);
	return 0;
}
