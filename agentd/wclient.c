/* SPDX-License-Identifier: MIT */
/*
 * The supervisor's side of the warden's protocol (common/wproto.h), fd 3. In the manner
 * of OpenSSH's monitor_wrap.c: every request is synchronous, sent and answered before the
 * caller goes on, so no state of the loop waits on a half-done request. Events (a child
 * exec'd or gone, the agent frozen, ocsb.conf re-read) may come before a reply: they are
 * queued and handled from the loop (wc_drain), never inside the request that read them, so
 * a handler never runs while its caller is between two updates of a child.
 *
 * The warden is root and the one that started us: its socket closing means it stops or
 * dies, and a reply that is not the one asked for means we no longer understand each
 * other. Either way the supervisor exits at once; the children are the warden's, it stops
 * them and starts a new supervisor if it lives.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentd.h"
#include "log.h"

#define WC_QUEUE 256 /* events between two drains: far more than the children can cause */

struct wc_slot {
	int used;
	uint32_t slot;
	void (*fn)(struct agentd *d, const struct wc_event *e, void *arg);
	void *arg;
};

struct wclient {
	uint32_t next_id;
	struct wc_event q[WC_QUEUE]; /* a ring */
	size_t head, n;
	int draining;
	struct wc_slot slots[WP_MAX_CHILDREN];
	char *buf; /* owned: WP_MAX_MSG bytes */
};

static const char *type_name(uint32_t t)
{
	switch (t) {
	case WP_HELLO:
		return "HELLO";
	case WP_SPAWN:
		return "SPAWN";
	case WP_SIGNAL:
		return "SIGNAL";
	case WP_EGRESS:
		return "EGRESS";
	case WP_ROUTES:
		return "ROUTES";
	case WP_PORT:
		return "PORT";
	case WP_WRITE:
		return "WRITE";
	case WP_STATUS:
		return "STATUS";
	case WP_RELOAD:
		return "RELOAD";
	case WP_BYE:
		return "BYE";
	case WP_R_OK:
		return "R_OK";
	case WP_R_SPAWN:
		return "R_SPAWN";
	case WP_R_PORT:
		return "R_PORT";
	case WP_R_STATUS:
		return "R_STATUS";
	case WP_E_EXEC:
		return "E_EXEC";
	case WP_E_EXIT:
		return "E_EXIT";
	case WP_E_FROZEN:
		return "E_FROZEN";
	case WP_E_RELOAD:
		return "E_RELOAD";
	}
	return "?";
}

/* The warden is gone or speaks another protocol: nothing of ours can go on without it. */
static _Noreturn void broken(const char *what, int e)
{
	log_err("warden: %s: %s", what, strerror(e));
	log_err("the warden's socket is unusable: stopping (ocsb-warden stops the children)");
	exit(1);
}

/* An event into the queue: 0, or the type was not an event's (-EBADMSG). */
static int queue(struct agentd *d, const struct wp_hdr *h, const void *p, size_t len)
{
	struct wclient *w = d->wc;
	struct wc_event *e;
	size_t want;

	switch (h->type) {
	case WP_E_EXEC:
		want = sizeof(struct wp_e_exec);
		break;
	case WP_E_EXIT:
		want = sizeof(struct wp_e_exit);
		break;
	case WP_E_FROZEN:
		want = sizeof(struct wp_e_frozen);
		break;
	case WP_E_RELOAD:
		want = 0;
		break;
	default:
		return -EBADMSG;
	}
	if (len != want || h->id != 0) {
		log_err("warden: event %s of %zu bytes, id %u: malformed", type_name(h->type), len,
			(unsigned)h->id);
		exit(1);
	}
	if (w->n == WC_QUEUE) {
		log_err("warden: more than %d events queued: stopping", WC_QUEUE);
		exit(1);
	}
	e = &w->q[(w->head + w->n++) % WC_QUEUE];
	memset(e, 0, sizeof(*e));
	e->type = h->type;
	memcpy(&e->u, p, len);
	return 0;
}

/* One message, blocking: events queued, a reply returned in h/buf/len. */
static void recv_one(struct agentd *d, struct wp_hdr *h, size_t *len, int *is_event)
{
	struct wclient *w = d->wc;
	int fds[WP_MAX_FDS];
	size_t nfds = 0;
	int r = wp_recv(d->wfd, h, w->buf, len, fds, &nfds);

	if (r == -ECONNRESET) {
		log_err("warden: the socket closed: stopping");
		exit(1);
	}
	if (r < 0)
		broken("receiving", -r);
	/* No message of the warden's carries a descriptor to us. */
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (nfds) {
		log_err("warden: %s came with descriptors", type_name(h->type));
		exit(1);
	}
	*is_event = queue(d, h, w->buf, *len) == 0;
}

/* Readable within ms (-1: no limit): 1, or 0 when the time is up. */
static int readable(int fd, long ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r;

	do
		r = poll(&p, 1, ms < 0 ? -1 : (int)ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		broken("poll", errno);
	return r > 0;
}

void wc_call(struct agentd *d, uint32_t type, const void *p, size_t len, const void *tail,
	size_t tail_len, const int *fds, size_t nfds, uint32_t want, void *reply, size_t rlen)
{
	struct wclient *w = d->wc;
	uint32_t id = ++w->next_id ? w->next_id : ++w->next_id; /* never 0: that is an event's */
	struct wp_hdr h;
	size_t got;
	int r, ev;

	if (d->wfd < 0)
		broken(type_name(type), ENOTCONN);
	r = wp_send(d->wfd, type, id, p, len, tail, tail_len, fds, nfds);
	if (r == -EPIPE || r == -ECONNRESET) {
		log_err("warden: the socket closed: stopping");
		exit(1);
	}
	if (r < 0)
		broken(type_name(type), -r);
	for (;;) {
		recv_one(d, &h, &got, &ev);
		if (ev)
			continue;
		if (h.type != want || h.id != id || got != rlen) {
			log_err("warden: %s answered by %s (id %u for %u, %zu bytes for %zu): "
				"stopping",
				type_name(type), type_name(h.type), (unsigned)h.id, (unsigned)id, got,
				rlen);
			exit(1);
		}
		memcpy(reply, w->buf, rlen);
		return;
	}
}

int wc_call_ok(struct agentd *d, uint32_t type, const void *p, size_t len, const void *tail,
	size_t tail_len)
{
	struct wp_r_ok ok;

	wc_call(d, type, p, len, tail, tail_len, NULL, 0, WP_R_OK, &ok, sizeof(ok));
	return ok.err > 0 ? -EPROTO : ok.err;
}

int wc_signal(struct agentd *d, uint32_t slot, int sig)
{
	struct wp_signal s = {.slot = slot, .sig = (uint32_t)sig};

	return wc_call_ok(d, WP_SIGNAL, &s, sizeof(s), NULL, 0);
}

int wc_spawn(struct agentd *d, uint32_t kind, uint32_t index, const char *env, size_t envlen,
	uint32_t nenv, int fd0, int fd1, struct wp_r_spawn *ret)
{
	struct wp_spawn q = {.kind = kind, .index = index, .nenv = nenv, .envlen = (uint32_t)envlen};
	int fds[2] = {fd0, fd1};

	wc_call(d, WP_SPAWN, &q, sizeof(q), env, envlen, fds, fd1 >= 0 ? 2 : 1, WP_R_SPAWN, ret,
		sizeof(*ret));
	if (ret->err > 0)
		ret->err = -EPROTO;
	return ret->err;
}

int wc_port(struct agentd *d, uint32_t slot, unsigned port)
{
	struct wp_port q = {.slot = slot, .port = port};
	struct wp_r_port r;

	wc_call(d, WP_PORT, &q, sizeof(q), NULL, 0, NULL, 0, WP_R_PORT, &r, sizeof(r));
	if (r.err < 0)
		return r.err;
	return r.holder <= WP_PORT_OTHER ? (int)r.holder : -EPROTO;
}

int wc_write(struct agentd *d, uint32_t file, const void *data, size_t len)
{
	struct wp_write q = {.file = file, .len = (uint32_t)len};

	if (len > WP_MAX_FILE)
		return -EFBIG;
	return wc_call_ok(d, WP_WRITE, &q, sizeof(q), data, len);
}

int wc_status(struct agentd *d, struct wp_r_status *ret)
{
	wc_call(d, WP_STATUS, NULL, 0, NULL, 0, NULL, 0, WP_R_STATUS, ret, sizeof(*ret));
	/* Strings from the warden end where their arrays do, whatever it sent. */
	ret->cg_what[sizeof(ret->cg_what) - 1] = '\0';
	ret->cg_error[sizeof(ret->cg_error) - 1] = '\0';
	ret->netlock_error[sizeof(ret->netlock_error) - 1] = '\0';
	ret->stale_agents[sizeof(ret->stale_agents) - 1] = '\0';
	return 0;
}

int wc_on_slot(struct agentd *d, uint32_t slot,
	void (*fn)(struct agentd *d, const struct wc_event *e, void *arg), void *arg)
{
	struct wclient *w = d->wc;

	for (size_t i = 0; i < WP_MAX_CHILDREN; i++) {
		if (w->slots[i].used)
			continue;
		w->slots[i] = (struct wc_slot){.used = 1, .slot = slot, .fn = fn, .arg = arg};
		return 0;
	}
	return -ENOSPC;
}

static void dispatch_slot(struct agentd *d, const struct wc_event *e, uint32_t slot)
{
	struct wclient *w = d->wc;
	struct child *c = child_by_slot(d, slot);

	if (c) {
		if (e->type == WP_E_EXEC)
			child_exec_event(d, c, e->u.exec.code);
		else
			child_exited(d, c, &e->u.exit);
		return;
	}
	for (size_t i = 0; i < WP_MAX_CHILDREN; i++) {
		struct wc_slot *s = &w->slots[i];

		if (!s->used || s->slot != slot)
			continue;
		if (e->type == WP_E_EXIT)
			s->used = 0; /* the slot is the warden's again */
		s->fn(d, e, s->arg);
		return;
	}
	log_debug("warden: %s of slot %u, not a child of ours (any more)", type_name(e->type),
		(unsigned)slot);
}

static void handle(struct agentd *d, const struct wc_event *e)
{
	switch (e->type) {
	case WP_E_EXEC:
		dispatch_slot(d, e, e->u.exec.slot);
		break;
	case WP_E_EXIT:
		dispatch_slot(d, e, e->u.exit.slot);
		break;
	case WP_E_FROZEN:
		agentd_frozen(d, (int)e->u.frozen.frozen);
		break;
	case WP_E_RELOAD:
		if (!d->stopping)
			agentd_reload(d);
		break;
	}
}

void wc_drain(struct agentd *d)
{
	struct wclient *w = d->wc;

	if (!w || w->draining)
		return;
	w->draining = 1;
	while (w->n) {
		struct wc_event e = w->q[w->head];

		w->head = (w->head + 1) % WC_QUEUE;
		w->n--;
		/* A handler may make requests, which may queue more: this loop takes them too. */
		handle(d, &e);
	}
	w->draining = 0;
}

/* What is readable now, without waiting: every message an event, or the protocol broke. */
static void read_ready(struct agentd *d)
{
	struct wp_hdr h;
	size_t len;
	int ev;

	while (readable(d->wfd, 0)) {
		recv_one(d, &h, &len, &ev);
		if (!ev) {
			log_err("warden: %s (id %u) with no request waiting: stopping",
				type_name(h.type), (unsigned)h.id);
			exit(1);
		}
	}
}

void wc_event(struct agentd *d)
{
	read_ready(d);
	wc_drain(d);
}

int wc_wait(struct agentd *d, long deadline)
{
	long left = deadline - mono_ms();
	int got = 0;

	if (left > 0 && readable(d->wfd, left)) {
		read_ready(d);
		got = 1;
	}
	wc_drain(d);
	return got;
}

/*
 * slot's WP_E_EXIT out of the queue into *ret (its WP_E_EXEC dropped with it: the caller
 * asks for the end only): 1, or 0 when it has not come.
 */
static int take_exit(struct wclient *w, uint32_t slot, struct wp_e_exit *ret)
{
	size_t k, at, keep = 0;

	for (at = 0; at < w->n; at++) {
		struct wc_event *e = &w->q[(w->head + at) % WC_QUEUE];

		if (e->type == WP_E_EXIT && e->u.exit.slot == slot)
			break;
	}
	if (at == w->n)
		return 0;
	*ret = w->q[(w->head + at) % WC_QUEUE].u.exit;
	for (k = 0; k < w->n; k++) {
		struct wc_event *e = &w->q[(w->head + k) % WC_QUEUE];
		int mine = k <= at && ((e->type == WP_E_EXIT && e->u.exit.slot == slot) ||
					      (e->type == WP_E_EXEC && e->u.exec.slot == slot));

		if (!mine)
			w->q[(w->head + keep++) % WC_QUEUE] = *e;
	}
	w->n = keep;
	return 1;
}

int wc_wait_exit(struct agentd *d, uint32_t slot, long timeout_ms, struct wp_e_exit *ret)
{
	struct wclient *w = d->wc;
	long deadline = mono_ms() + timeout_ms;

	/* Only this slot's events are taken; the rest wait in the queue for the loop. */
	while (!take_exit(w, slot, ret)) {
		struct wp_hdr h;
		size_t len;
		int ev;

		if (mono_ms() >= deadline || !readable(d->wfd, deadline - mono_ms()))
			return -ETIMEDOUT;
		recv_one(d, &h, &len, &ev);
		if (!ev) {
			log_err("warden: %s (id %u) with no request waiting: stopping",
				type_name(h.type), (unsigned)h.id);
			exit(1);
		}
	}
	return 0;
}

int wc_open(struct agentd *d, int fd)
{
	struct wclient *w = calloc(1, sizeof(*w));
	int type = 0;
	socklen_t tl = sizeof(type);

	d->wfd = -1;
	if (!w || !(w->buf = malloc(WP_MAX_MSG))) {
		free(w);
		log_err("warden: out of memory");
		return -1;
	}
	d->wc = w;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_SEQPACKET) {
		log_err("fd %d is not the warden's SOCK_SEQPACKET socket (ocsb-warden starts "
			"ocsb-agentd)",
			fd);
		return -1;
	}
	/* Not for squid -k parse, the mirror's writer or any other child of ours. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -1;
	d->wfd = fd;
	return agentd_watch(d, fd, &d->w_src, SRC_WARDEN, d, EPOLLIN);
}

void wc_close(struct agentd *d)
{
	struct wclient *w = d->wc;

	if (d->wfd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->wfd, NULL);
		close(d->wfd);
		d->wfd = -1;
	}
	if (w)
		free(w->buf);
	free(w);
	d->wc = NULL;
}
