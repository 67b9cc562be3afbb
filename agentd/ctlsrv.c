/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "ctl.h"
#include "fileops.h"
#include "log.h"
#include "dirs.h"

/*
 * The control socket. Anyone can connect (mode 0666): the peer's uid, from the kernel
 * (SO_PEERCRED), decides. Root and the owner are served; everyone else, the agent first
 * of all, gets one error line and the door. One request per connection.
 *
 * No client holds the loop: sockets are non-blocking, a request is read as it comes (one
 * frame at most), the reply is written as the socket takes it, and a client that has not
 * sent its request and taken its answer within CTL_CLIENT_DEADLINE_MS is closed.
 */

#define CTL_CLIENT_DEADLINE_MS 5000

/*
 * The socket the warden bound (mode 0666) and listens on: ours to serve, not to bind,
 * unlink or chmod (its directory is root's).
 */
int ctlsrv_open(struct agentd *d, int fd)
{
	int acc = 0;
	socklen_t al = sizeof(acc);

	snprintf(d->ctl_path, sizeof(d->ctl_path), "%s", d->paths.ctl_sock);
	for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++)
		d->clients[i].fd = -1;
	d->ctlfd = -1;
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc) {
		log_err("fd %d is not the listening control socket (ocsb-warden starts ocsb-agentd)",
			fd);
		return -1;
	}
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
		log_err("%s: %s", d->ctl_path, strerror(errno));
		return -1;
	}
	d->ctlfd = fd;
	d->ctl_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (d->ctl_timer < 0 ||
		agentd_watch(d, d->ctl_timer, &d->ctl_timer_src, SRC_CTL_TIMER, d, EPOLLIN) < 0)
		return -1;
	return agentd_watch(d, fd, &d->ctl_src, SRC_CTL_LISTEN, d, EPOLLIN);
}

static void client_close(struct agentd *d, struct ctl_client *cl)
{
	if (cl->fd < 0)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, cl->fd, NULL);
	close(cl->fd);
	cl->fd = -1;
	if (cl->reader) {
		ctl_reader_reset(cl->reader);
		free(cl->reader);
		cl->reader = NULL;
	}
	if (cl->writer) {
		ctl_writer_reset(cl->writer);
		free(cl->writer);
		cl->writer = NULL;
	}
}

struct ctl_client *ctlsrv_slot(struct ctl_client *v, size_t n)
{
	struct ctl_client *old = NULL;

	for (size_t i = 0; i < n; i++) {
		if (v[i].fd < 0)
			return &v[i];
		if (!old || v[i].deadline_ms < old->deadline_ms)
			old = &v[i];
	}
	return old;
}

long ctlsrv_next_deadline(const struct ctl_client *v, size_t n)
{
	long next = 0;

	for (size_t i = 0; i < n; i++)
		if (v[i].fd >= 0 && (!next || v[i].deadline_ms < next))
			next = v[i].deadline_ms;
	return next;
}

/* The timer follows the nearest deadline; off with no client. */
static void deadline_arm(struct agentd *d)
{
	struct itimerspec it = {0};
	long next = ctlsrv_next_deadline(d->clients, AGENTD_MAX_CLIENTS), now = mono_ms();

	if (next) {
		long in = next > now ? next - now : 1;

		it.it_value.tv_sec = in / 1000;
		it.it_value.tv_nsec = (in % 1000) * 1000000L;
	}
	timerfd_settime(d->ctl_timer, 0, &it, NULL);
}

void ctlsrv_timer(struct agentd *d)
{
	uint64_t ticks;
	long now = mono_ms();

	if (read(d->ctl_timer, &ticks, sizeof(ticks)) < 0) {
		/* spurious wake-up: the deadlines are checked anyway */
	}
	for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++) {
		struct ctl_client *cl = &d->clients[i];

		if (cl->fd >= 0 && now >= cl->deadline_ms) {
			log_debug("control: uid %u: no request and answer within %d ms: closed",
				(unsigned)cl->uid, CTL_CLIENT_DEADLINE_MS);
			client_close(d, cl);
		}
	}
	deadline_arm(d);
}

void ctlsrv_close(struct agentd *d)
{
	for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++)
		client_close(d, &d->clients[i]);
	/* The socket's name is the warden's: it stays for the next supervisor. */
	if (d->ctlfd > 0)
		close(d->ctlfd);
	if (d->ctl_timer >= 0)
		close(d->ctl_timer);
}

void ctlsrv_accept(struct agentd *d)
{
	for (;;) {
		int fd = accept4(d->ctlfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ctl_client *cl = NULL;
		uid_t uid;
		gid_t gid;
		pid_t pid;

		if (fd < 0)
			return;
		if (ctl_peer(fd, &uid, &gid, &pid) < 0 || (uid != 0 && uid != d->owner.uid)) {
			struct buf b = {0};

			/* Rate-limited: a refused peer looping on connect must not flood the log. */
			static time_t last;
			static unsigned quiet;
			time_t now = time(NULL);

			if (now - last >= 10) {
				log_warn("control: refused uid %u (pid %d): only root and %s may "
					 "connect%s",
					(unsigned)uid, (int)pid, d->owner.name,
					quiet ? " (more refusals not logged)" : "");
				last = now;
				quiet = 0;
			} else {
				quiet++;
			}
			ctl_response_err(&b, "not allowed: uid %u is neither root nor the owner %s",
				(unsigned)uid, d->owner.name);
			{
				struct ctl_writer once = {0};

				/* One try: the line fits in a new socket's empty buffer. */
				if (ctl_writer_frame(&once, b.data, b.len) < 0 ||
					ctl_writer_flush(&once, fd) != 1)
					log_debug("control: refusal not delivered");
				ctl_writer_reset(&once);
			}
			buf_free(&b);
			close(fd);
			continue;
		}
		/* Full: the oldest client gives way (clients are root or the owner). */
		cl = ctlsrv_slot(d->clients, AGENTD_MAX_CLIENTS);
		if (cl->fd >= 0)
			client_close(d, cl);
		cl->fd = fd;
		cl->uid = uid;
		cl->deadline_ms = mono_ms() + CTL_CLIENT_DEADLINE_MS;
		cl->reader = calloc(1, sizeof(struct ctl_reader));
		cl->writer = calloc(1, sizeof(struct ctl_writer));
		if (!cl->reader || !cl->writer || agentd_watch(d, fd, &cl->src, SRC_CTL_CLIENT, cl, EPOLLIN) < 0) {
			client_close(d, cl);
			continue;
		}
		deadline_arm(d);
	}
}

static const char *state_name(const struct child *c)
{
	switch (c->state) {
	case CH_STOPPED:
		return "stopped";
	case CH_BACKOFF:
		return "restarting";
	case CH_STARTING:
		return "starting";
	case CH_RUNNING:
		return "running";
	case CH_STOPPING:
		return "restarting";
	}
	return "?";
}

static void add_child(struct buf *b, const struct child *c, int with_secret)
{
	ctl_response_add(b, c->is_opencode ? "instance" : "proxy", "%s",
		c->is_opencode ? strchr(c->name, '/') + 1 : "squid");
	ctl_response_add(b, "state", "%s", state_name(c));
	if (c->pid > 0) {
		ctl_response_add(b, "pid", "%d", (int)c->pid);
		ctl_response_add(b, "uptime-s", "%ld", ms_since(&c->started) / 1000);
	}
	ctl_response_add(b, "restarts", "%u", c->restarts + c->crashes_in_row);
	if (c->last_error[0])
		ctl_response_add(b, "last-error", "%s", c->last_error);
	if (c->is_opencode) {
		ctl_response_add(b, "url", "http://127.0.0.1:%u", c->port);
		ctl_response_add(b, "user", "opencode");
		if (with_secret)
			ctl_response_add(b, "password", "%s", c->password);
	}
}

/*
 * The route ports agentd serves, as "18400 18401" ("none"): `ocsb doctor` (root) compares
 * them with the ones its guard table holds. routes_ok: the warden took exactly these
 * (WP_ROUTES answered 0), so the tables hold their rules (a refusal left the routes
 * open to no rule).
 */
static void route_ports(struct agentd *d, char *out, size_t n, int *routes_ok)
{
	unsigned ports[WP_MAX_ROUTES];
	size_t np = injectd_ports(d, ports), len = 0;

	*routes_ok = (np == 0 && d->n_routes_sent == 0) ||
		(d->routes_ok && np == d->n_routes_sent);
	snprintf(out, n, "none");
	for (size_t i = 0; i < np && len < n; i++) {
		len += (size_t)snprintf(out + len, n - len, "%s%u", i ? " " : "", ports[i]);
		if (i >= d->n_routes_sent || d->routes_sent[i] != ports[i])
			*routes_ok = 0;
	}
}

/*
 * RELOAD, root's (what `sudo ocsb egress allow|apply|learn` send after changing root's
 * files): as a SIGHUP, through the warden, which re-reads ocsb.conf first. The answer
 * gives the generations before it; the client polls STATUS until they move.
 */
static void do_reload(struct agentd *d, uid_t uid, struct buf *b)
{
	unsigned reloads = d->reloads, gen = d->egress_gen;
	int r;

	if (uid != 0) {
		ctl_response_err(b, "RELOAD is root's: run it with sudo");
		return;
	}
	r = wc_call_ok(d, WP_RELOAD, NULL, 0, NULL, 0);
	if (r < 0) {
		ctl_response_err(b, "the warden refused the reload (%s)", strerror(-r));
		return;
	}
	ctl_response_ok(b);
	ctl_response_add(b, "reloads", "%u", reloads);
	ctl_response_add(b, "egress-generation", "%u", gen);
}

/* The rules in force and learn mode, for `ocsb status` and the reload's wait. */
static void add_egress(struct agentd *d, struct buf *b)
{
	const struct egress *e = &d->egress;
	char until[32];
	time_t now = time(NULL);

	ctl_response_add(b, "egress", "%s", e->off ? "off" : "on");
	ctl_response_add(b, "egress-policy", "%s",
		e->policy == EGRESS_ALLOWLIST ? "allowlist" : "blocklist");
	if (e->learn_until) {
		egress_time_utc(e->learn_until, until, sizeof(until));
		if (e->learning)
			ctl_response_add(b, "egress-learn", "on until %s (%ld min left; set in %s)",
				until, (long)((e->learn_until - now + 59) / 60), e->learn_file);
		else
			ctl_response_add(b, "egress-learn",
				"ended %s: sudo ocsb egress learn stop writes the proposal", until);
	}
	for (size_t i = 0; i < e->proposals.n; i++)
		ctl_response_add(b, "egress-proposal", "%s (not in force: sudo ocsb egress apply)",
			e->proposals.v[i]);
	ctl_response_add(b, "egress-generation", "%u", d->egress_gen);
	ctl_response_add(b, "proxy-generation", "%u", d->proxy_gen);
	if (d->proxy_failed_gen > d->proxy_gen)
		ctl_response_add(b, "proxy-refused", "%u: %s", d->proxy_failed_gen, d->proxy_error);
	ctl_response_add(b, "reloads", "%u", d->reloads);
	if (d->reload_error[0])
		ctl_response_add(b, "reload-error", "%s", d->reload_error);
}

static void do_status(struct agentd *d, struct buf *b, int web_only)
{
	char routes[WP_MAX_ROUTES * 6 + 8];
	const struct wp_r_status *st = &d->wstatus;
	int routes_ok;

	ctl_response_ok(b);
	if (!web_only) {
		/* The netlock's and the cgroup's state, as the warden has them now. */
		wc_status(d, &d->wstatus);
		route_ports(d, routes, sizeof(routes), &routes_ok);
		ctl_response_add(b, "version", OCSB_VERSION);
		ctl_response_add(b, "agent", "%s", d->agent.name);
		ctl_response_add(b, "uptime-s", "%ld", ms_since(&d->started) / 1000);
		ctl_response_add(b, "netlock", "%s",
			st->frozen	     ? "FAILED (agent frozen)"
				: !routes_ok ? "FAILED (route ports served without their rules)"
					     : "verified");
		ctl_response_add(b, "route-ports", "%s", routes);
		ctl_response_add(b, "netlock-restores", "%u", st->restores);
		if (st->restores)
			ctl_response_add(b, "netlock-last-restore-ms", "%.2f",
				(double)st->last_restore_us / 1e3);
		if (st->netlock_error[0])
			ctl_response_add(b, "netlock-error", "%s", st->netlock_error);
		ctl_response_add(b, "frozen", "%s",
			st->frozen == 2	     ? "yes (cgroup freezer)"
				: st->frozen ? "yes (SIGSTOP)"
					     : "no");
		if (st->cg_mode != CG_NONE) {
			ctl_response_add(b, "limits", "memory %llu MiB, tasks %u, cpu %u%%",
				(unsigned long long)(st->memory_max >> 20), st->tasks_max,
				st->cpu_percent);
			ctl_response_add(b, "cgroup", "%s", st->cg_what);
			ctl_response_add(b, "cgroup-processes", "%d", (int)st->cg_procs);
		} else {
			ctl_response_add(b, "limits", "NONE: %s", st->cg_error);
		}
		add_egress(d, b);
		if (!d->egress.off)
			add_child(b, &d->proxy_child, 0);
	}
	for (size_t i = 0; i < d->n_oc; i++)
		add_child(b, &d->oc[i], 1);
	if (d->inject_child.pid > 0 || d->inject_child.state != CH_STOPPED)
		add_child(b, &d->inject_child, 0);
}

static void do_restart(struct agentd *d, const char *project, struct buf *b)
{
	int n = 0;

	for (size_t i = 0; i < d->n_oc; i++) {
		if (project[0] && strcmp(strchr(d->oc[i].name, '/') + 1, project) != 0)
			continue;
		child_restart(d, &d->oc[i]);
		n++;
	}
	if (!n) {
		ctl_response_err(b, "no OpenCode instance named '%s'", project);
		return;
	}
	ctl_response_ok(b);
	ctl_response_add(b, "restarted", "%d", n);
}

/*
 * The last `max` bytes of a log (NUL-terminated): only what one frame can carry is read,
 * however long the file is. 0, or -errno.
 */
static int read_tail(const char *path, size_t max, char **ret, size_t *ret_len)
{
	struct stat st;
	off_t at;
	size_t len = 0;
	char *data;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	at = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
	data = malloc(max + 1);
	if (!data) {
		close(fd);
		return -ENOMEM;
	}
	while (len < max) {
		ssize_t n = pread(fd, data + len, max - len, at + (off_t)len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (r < 0) {
		free(data);
		return r;
	}
	data[len] = '\0';
	*ret = data;
	*ret_len = len;
	return 0;
}

static void do_logs(struct agentd *d, unsigned count, struct buf *b)
{
	size_t budget;

	ctl_response_ok(b);
	if (!count)
		count = 50;
	/* Each instance gets an equal share of the frame. */
	budget = (CTL_MAX_FRAME - 1024) / (d->n_oc ? d->n_oc : 1) * 3 / 4; /* room for prefixes */
	for (size_t i = 0; i < d->n_oc; i++) {
		char path[4096], name[128], *data = NULL;
		size_t len = 0, lines = 0;
		const char *p;

		child_log_name(&d->oc[i], name, sizeof(name));
		if (path_join(path, sizeof(path), CHILD_LOG_DIR, name) < 0 ||
			read_tail(path, budget + 1, &data, &len) < 0)
			continue;
		/*
		 * The newest `count` lines that fit in one frame: walk back from the end
		 * counting lines and bytes, then add them oldest first.
		 */
		p = data + len;
		if (p > data && p[-1] == '\n')
			p--;
		while (p > data && lines < count && (size_t)(data + len - p) < budget) {
			if (*--p == '\n')
				lines++;
		}
		if (*p == '\n')
			p++;
		while (*p) {
			size_t l = strcspn(p, "\n");

			if (ctl_response_add(b, "log", "%s: %.*s", strchr(d->oc[i].name, '/') + 1,
				    (int)l, p) == -EMSGSIZE)
				break;
			p += l + (p[l] ? 1 : 0);
		}
		free(data);
	}
}

static void handle(struct agentd *d, struct ctl_client *cl, const char *payload, size_t len)
{
	struct ctl_request rq;
	struct buf b = {0};
	char err[512];

	if (ctl_parse_request(payload, len, &rq, err, sizeof(err)) < 0) {
		log_warn("control: uid %u: bad request: %s", (unsigned)cl->uid, err);
		ctl_response_err(&b, "%s", err);
		goto send;
	}
	switch (rq.verb) {
	case CTL_PING:
		ctl_response_ok(&b);
		ctl_response_add(&b, "version", OCSB_VERSION);
		break;
	case CTL_STATUS:
		do_status(d, &b, 0);
		break;
	case CTL_WEB:
		do_status(d, &b, 1);
		break;
	case CTL_RESTART:
		do_restart(d, rq.arg, &b);
		break;
	case CTL_LOGS:
		do_logs(d, rq.count, &b);
		break;
	case CTL_SECRET_PUT:
		secretd_put(d, cl->uid, rq.sealed, &b);
		break;
	case CTL_RELOAD:
		do_reload(d, cl->uid, &b);
		break;
	}
	ctl_request_free(&rq);
send:
	if (ctl_writer_frame(cl->writer, b.data, b.len) < 0)
		log_err("control: uid %u: the reply could not be framed", (unsigned)cl->uid);
	buf_free(&b);
}

void ctlsrv_client(struct agentd *d, struct ctl_client *cl, uint32_t events)
{
	struct ctl_reader *r = cl->reader;
	struct ctl_writer *w = cl->writer;
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = &cl->src};
	int st;

	if (w->buf) {
		/* Answering: the rest of the reply, as the socket takes it. */
		if (ctl_writer_flush(w, cl->fd) == 0 && !(events & (EPOLLHUP | EPOLLERR)))
			return;
		client_close(d, cl);
		deadline_arm(d);
		return;
	}
	st = ctl_reader_feed(r, cl->fd);
	if (st == 0 && !(events & (EPOLLHUP | EPOLLERR)))
		return;
	if (st == 1) {
		handle(d, cl, r->buf, r->have);
		ctl_reader_reset(r);
		if (w->buf && ctl_writer_flush(w, cl->fd) == 0 &&
			epoll_ctl(d->epfd, EPOLL_CTL_MOD, cl->fd, &ev) == 0)
			return;
	} else if (st == -EPROTO) {
		log_warn("control: uid %u sent a frame of a bad length: closed", (unsigned)cl->uid);
	}
	client_close(d, cl);
	deadline_arm(d);
}
