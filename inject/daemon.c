/* SPDX-License-Identifier: MIT */
/*
 * The injector's first process: the hand-over socket from ocsb-agentd, the listener agentd
 * holds for each route port (listen.c), and one worker process per route (serve.c).
 *
 * This process reads nothing the agent sends. It accepts, asks the kernel who connected
 * (common/sockdiag.c: only agentd's agent is served, whatever the netlock let through)
 * and passes the connection to its route's worker. It holds every key, in locked memory, to start a worker
 * again if one dies; a worker holds its own route's key alone (the others are wiped in it
 * right after the fork), so a parser bug in a worker gives away one key, not all.
 *
 * A new hand-over (`ocsb secrets push`) starts new workers, and the old ones drain: they
 * take no new connection and end each one after its current answer, so a request in
 * flight finishes with the key it started with and the next one gets the new key. Usage
 * lines go back to agentd over the hand-over socket, queued here and never waited for: a
 * supervisor that stops reading costs counts, not routes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
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
#include "sockdiag.h"

#define OUTQ_MAX (64 * 1024) /* lines for agentd not yet taken */
#define RESTART_MS 1000 /* a worker that died is started again at most this often */

struct worker {
	pid_t pid; /* -1: none */
	int sock; /* owned: connections go to it; closing it drains the worker */
	long started, restart_at;
};

struct daemon {
	int ctl; /* borrowed: the socket to ocsb-agentd */
	int report_r, report_w; /* owned: the workers' usage lines */
	int nl; /* owned: sock_diag, who connected */
	struct inj_conf conf; /* owned: keys in locked memory */
	int slot[INJ_MAX_ROUTES]; /* owned: agentd's listener of INJ_PORT_BASE + i, -1 none */
	int lfd[INJ_MAX_ROUTES]; /* borrowed from slot: listener of conf.r[i], -1 none */
	struct worker wk[INJ_MAX_ROUTES]; /* of conf.r[i] */
	pid_t self;
	struct buf in; /* the hand-over being read */
	struct buf outq; /* lines for agentd */
	unsigned long dropped; /* lines agentd did not take in time */
	char rep[4096];
	size_t rep_len;
};

/* ---- lines to agentd: queued, never blocking ---- */

static void ctl_flush(struct daemon *d)
{
	while (d->outq.len) {
		ssize_t w = send(d->ctl, d->outq.data, d->outq.len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w <= 0)
			return;
		memmove(d->outq.data, d->outq.data + w, d->outq.len - (size_t)w);
		d->outq.len -= (size_t)w;
	}
	if (d->dropped) {
		char line[128];
		int n = snprintf(line, sizeof(line),
			"error\t%lu usage line(s) dropped: ocsb-agentd did not read them\n",
			d->dropped);
		d->dropped = 0;
		if (buf_append(&d->outq, line, (size_t)n) == 0)
			ctl_flush(d);
	}
}

static void ctl_send(struct daemon *d, const char *line, size_t n)
{
	if (d->outq.len + n > OUTQ_MAX || buf_append(&d->outq, line, n) < 0) {
		d->dropped++;
		return;
	}
	ctl_flush(d);
}

static void ctl_printf(struct daemon *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void ctl_printf(struct daemon *d, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n > 0)
		ctl_send(d, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* ---- workers ---- */

/* In the new worker process: its key alone, its descriptors alone, then its loop. */
static void worker_child(struct daemon *d, size_t i, int sock)
{
	struct inj_route r = d->conf.r[i];
	struct inj_worker *w = NULL;
	char err[512];
	int hs, hr;

	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != d->self)
		_exit(0);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	/* stderr (the log), the connections' socket as 3, the usage pipe as 4; nothing else. */
	hs = fcntl(sock, F_DUPFD_CLOEXEC, 64);
	hr = fcntl(d->report_w, F_DUPFD_CLOEXEC, 64);
	if (hs < 0 || hr < 0 || dup2(hs, 3) < 0 || dup2(hr, 4) < 0)
		_exit(1);
	close_range(5, ~0U, 0);
	if (inj_worker_new(&r, d->conf.ca_pem, d->conf.ca_len, 4, NULL, &w, err, sizeof(err)) < 0)
		log_err("route %s: %s", r.name, err);
	/* From here on the agent's bytes are parsed: no fork, no exec, no new kind of socket. */
	else if (inj_confine(1, err, sizeof(err)) < 0) {
		log_err("route %s: %s: not served", r.name, err);
		inj_worker_free(w);
		w = NULL;
	}
	/* Every key of the hand-over is wiped here, this route's too: the worker has its copy. */
	inj_conf_free(&d->conf);
	if (d->in.data)
		explicit_bzero(d->in.data, d->in.cap);
	if (!w)
		_exit(1);
	inj_worker_run(w, 3);
	inj_worker_free(w);
	_exit(0);
}

static int worker_start(struct daemon *d, size_t i)
{
	struct worker *k = &d->wk[i];
	int sv[2];
	pid_t pid;

	k->restart_at = 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_err("route %s: socketpair: %s", d->conf.r[i].name, strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid == 0)
		worker_child(d, i, sv[1]);
	close(sv[1]);
	if (pid < 0) {
		log_err("route %s: fork: %s", d->conf.r[i].name, strerror(errno));
		close(sv[0]);
		return -1;
	}
	/* A worker that stops taking connections makes this side answer 503, never wait. */
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	k->pid = pid;
	k->sock = sv[0];
	k->started = mono_ms();
	return 0;
}

/* Closing its socket makes a worker drain and exit; it is reaped like any child. */
static void worker_drain(struct worker *k)
{
	if (k->sock >= 0)
		close(k->sock);
	k->sock = -1;
	k->pid = -1;
	k->restart_at = 0;
}

/* A hand-over that parsed: every route on agentd's listener of its port, a worker each. */
static int apply(struct daemon *d, struct inj_conf *nc)
{
	struct worker old[INJ_MAX_ROUTES];
	struct inj_conf prev = d->conf;
	struct inj_tls *t;
	char err[512];

	/* The CAs load here once, so a bad bundle is agentd's error, not a dead worker's. */
	if (inj_tls_new(nc->ca_pem, nc->ca_len, &t, err, sizeof(err)) < 0) {
		log_err("TLS: %s", err);
		return -1;
	}
	inj_tls_free(t);
	if (!nc->have_peer)
		log_err("the hand-over names no agent: every connection is refused");
	memcpy(old, d->wk, sizeof(old));
	/*
	 * The previous keys go before any new worker is forked: a fork copies this process's
	 * memory, and a worker must hold its own route's current key alone (the old workers
	 * have their own copies).
	 */
	inj_conf_free(&prev);
	d->conf = *nc;
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++) {
		unsigned p = i < d->conf.n ? d->conf.r[i].port : 0;

		d->wk[i] = (struct worker){.pid = -1, .sock = -1};
		d->lfd[i] = -1;
		if (i >= d->conf.n)
			continue;
		if (p >= INJ_PORT_BASE && p < INJ_PORT_BASE + INJ_MAX_ROUTES)
			d->lfd[i] = d->slot[p - INJ_PORT_BASE];
		if (d->lfd[i] < 0) {
			log_err("route %s: ocsb-agentd holds no listener on 127.0.0.1:%u: not "
				"served",
				d->conf.r[i].name, p);
			continue;
		}
		if (worker_start(d, i) < 0)
			d->wk[i].restart_at = mono_ms() + RESTART_MS;
	}
	/* The new workers exist before the old ones stop taking connections. */
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++)
		if (old[i].sock >= 0)
			worker_drain(&old[i]);
	log_info("%zu route(s) loaded", d->conf.n);
	return 0;
}

/* ---- connections ---- */

static void refuse(struct daemon *d, size_t i, int fd, int status, const char *text)
{
	struct buf b = {0};
	struct inj_usage u;
	char line[256];
	int n;

	if (inj_error_answer(status, text, &b) == 0)
		(void)!send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	buf_free(&b);
	inj_usage_init(&u);
	u.status = INJ_REFUSED;
	n = inj_usage_line(d->conf.r[i].name, time(NULL), &u, line, sizeof(line));
	if (n > 0 && (size_t)n < sizeof(line))
		ctl_send(d, line, (size_t)n);
}

static void accept_one(struct daemon *d, size_t i)
{
	int fd = accept4(d->lfd[i], NULL, NULL, SOCK_CLOEXEC);
	uid_t uid = (uid_t)-1;
	int r;

	if (fd < 0)
		return;
	r = sockdiag_peer_uid(d->nl, fd, &uid);
	if (r < 0 || !d->conf.have_peer || uid != d->conf.peer) {
		/*
		 * The second wall: only agentd's agent spends the owner's key, whatever the
		 * netlock let through (a connection queued before the table was there).
		 */
		if (r < 0)
			log_warn("route %s: a connection whose owner the kernel does not tell "
				 "(%s): refused",
				d->conf.r[i].name, strerror(-r));
		else
			log_warn("route %s: a connection from uid %u refused: only the agent "
				 "(uid %u) uses a route",
				d->conf.r[i].name, (unsigned)uid, (unsigned)d->conf.peer);
		refuse(d, i, fd, 403, "only the agent's account may use a route");
		close(fd);
		return;
	}
	if (d->wk[i].sock < 0 || inj_send_fds(d->wk[i].sock, "c", &fd, 1) < 0)
		refuse(d, i, fd, 503, "the route's worker is busy or restarting");
	close(fd);
}

/* The hand-over: "ocsb-inject LEN\n" then LEN bytes of inj_conf text. */
static int read_ctl(struct daemon *d)
{
	char tmp[65536];
	ssize_t r = read(d->ctl, tmp, sizeof(tmp));

	if (r <= 0)
		return r < 0 && (errno == EINTR || errno == EAGAIN) ? 0 : -1;
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
			ctl_printf(d, "error\t%s\n", err);
		} else if (apply(d, &nc) < 0) {
			inj_conf_free(&nc);
			ctl_printf(d, "error\tTLS setup failed\n");
		} else {
			ctl_printf(d, "ready\t%zu\n", d->conf.n);
		}
		explicit_bzero(d->in.data, hl + len);
		memmove(d->in.data, d->in.data + hl + len, d->in.len - hl - len);
		d->in.len -= hl + len;
	}
}

static int usage_line_ok(const struct daemon *d, const char *line, size_t n)
{
	if (n < 7 || memcmp(line, "usage\t", 6))
		return 0;
	for (size_t i = 0; i < d->conf.n; i++) {
		size_t l = strlen(d->conf.r[i].name);
		if (n > 6 + l && !memcmp(line + 6, d->conf.r[i].name, l) && line[6 + l] == '\t')
			return 1;
	}
	return 0;
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
		/*
		 * A worker's line reaches agentd only as a usage line of a route of the current
		 * set: a worker cannot speak for the injector ("error", "ready") nor invent a
		 * route. (The pipe is shared, so a compromised worker can still miscount
		 * another current route.)
		 */
		if (usage_line_ok(d, d->rep, n))
			ctl_send(d, d->rep, n);
		memmove(d->rep, d->rep + n, d->rep_len - n);
		d->rep_len -= n;
	}
	if (d->rep_len == sizeof(d->rep))
		d->rep_len = 0;
}

/* Children that ended: a current route's worker is started again (not at once). */
static void reap(struct daemon *d)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		for (size_t i = 0; i < d->conf.n; i++) {
			struct worker *k = &d->wk[i];
			long at;

			if (k->pid != pid)
				continue;
			log_err("route %s: its worker ended (%s %d): started again",
				d->conf.r[i].name, WIFSIGNALED(st) ? "signal" : "status",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			close(k->sock);
			k->sock = -1;
			k->pid = -1;
			at = k->started + RESTART_MS;
			k->restart_at = at > mono_ms() ? at : mono_ms();
		}
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
	d.in.wipe = 1; /* the hand-over text holds every key */
	d.ctl = ctl;
	d.self = getpid();
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++) {
		d.lfd[i] = -1;
		d.wk[i] = (struct worker){.pid = -1, .sock = -1};
	}
	/* agentd's listeners come first on the socket, before any hand-over. */
	if (inj_recv_listeners(ctl, d.slot) < 0) {
		log_err("no route listeners from ocsb-agentd on the hand-over socket");
		return -1;
	}
	d.nl = sockdiag_open();
	if (d.nl < 0) {
		log_err("sock_diag: %s: no connection could be checked, none is served",
			strerror(-d.nl));
		return -1;
	}
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	d.report_r = p[0];
	d.report_w = p[1];
	{
		char err[256];
		if (inj_confine(0, err, sizeof(err)) < 0) {
			log_err("%s: refusing to serve unconfined", err);
			return -1;
		}
	}
	fcntl(ctl, F_SETFL, fcntl(ctl, F_GETFL) | O_NONBLOCK);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	while (!stop) {
		struct pollfd pf[INJ_MAX_ROUTES + 2];
		size_t map[INJ_MAX_ROUTES], np = 2;
		long now = mono_ms(), wait = 1000;

		for (size_t i = 0; i < d.conf.n; i++) {
			if (d.wk[i].restart_at && d.wk[i].restart_at <= now &&
				worker_start(&d, i) < 0)
				d.wk[i].restart_at = now + RESTART_MS;
			if (d.wk[i].restart_at && d.wk[i].restart_at - now < wait)
				wait = d.wk[i].restart_at - now;
		}
		pf[0] = (struct pollfd){.fd = d.ctl, .events = POLLIN | (d.outq.len ? POLLOUT : 0)};
		pf[1] = (struct pollfd){.fd = d.report_r, .events = POLLIN};
		for (size_t i = 0; i < d.conf.n; i++)
			if (d.lfd[i] >= 0) {
				map[np - 2] = i;
				pf[np++] = (struct pollfd){.fd = d.lfd[i], .events = POLLIN};
			}
		int r = poll(pf, np, (int)(wait > 0 ? wait : 0));
		reap(&d);
		if (r <= 0)
			continue;
		if ((pf[0].revents & POLLOUT) && d.outq.len)
			ctl_flush(&d);
		if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && read_ctl(&d) < 0) {
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
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++) {
		if (d.slot[i] >= 0)
			close(d.slot[i]);
		if (d.wk[i].pid > 0)
			kill(d.wk[i].pid, SIGKILL);
		if (d.wk[i].sock >= 0)
			close(d.wk[i].sock);
	}
	inj_conf_free(&d.conf);
	if (d.in.data)
		explicit_bzero(d.in.data, d.in.cap);
	buf_free(&d.in);
	buf_free(&d.outq);
	close(d.nl);
	close(d.report_r);
	close(d.report_w);
	return 0;
}
