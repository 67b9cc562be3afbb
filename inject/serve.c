/* SPDX-License-Identifier: MIT */
/*
 * One route's worker: the agent's connections, request after request, and a small pool of
 * verified TLS connections to the route's upstream. The agent controls every byte that
 * arrives here, so every read is bounded in size and time: a whole head within head_ms of
 * its first byte (not per read: a client sending a byte a second gets nowhere), a body
 * that never pauses longer than body_ms, at most INJ_ROUTE_CONNS connections per route (one
 * route's abuse leaves the other routes, other processes, answering).
 *
 * Framing is exact on both legs. What follows a request's body is the next request (kept
 * in the connection's buffer, never sent upstream with this one). An answer is relayed
 * with the framing it had (a length, or chunked re-encoded as it is decoded), or read to
 * the upstream's close, and then the agent's connection ends too: the agent never believes
 * a connection reusable that the answer could not leave in a known state. An upstream
 * connection goes back to the pool only after a complete, framed answer.
 *
 * Every answer passes the redactor: the key, and the forms an echo could give it (base64,
 * percent-encoding, ...), become '*' before the agent sees them, across reads and chunks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "inject.h"
#include "log.h"

#define IO_BUF 16384

const struct inj_timeouts inj_timeouts_default = {
	.head_ms = 30000,
	.idle_ms = 60000,
	.body_ms = 30000,
	.upstream_ms = 300000,
	.pool_idle_ms = 20000,
};

struct pooled {
	struct inj_conn *c; /* owned */
	long since;
};

struct inj_worker {
	struct inj_route r; /* r.key owned, in locked memory */
	struct inj_tls *tls; /* owned */
	struct inj_timeouts to;
	int report_fd; /* borrowed */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct pooled pool[INJ_POOL_MAX];
	size_t npool;
	unsigned conns;
	int draining;
	int drain_r, drain_w; /* owned: closing drain_w wakes every waiting connection */
};

/* The agent's connection: what it sent that is not consumed yet. */
struct client {
	int fd;
	char *in; /* owned, INJ_HEAD_MAX bytes */
	size_t got;
	int first; /* no request served yet */
};

int inj_worker_new(const struct inj_route *r, const char *ca_pem, size_t ca_len, int report_fd,
	const struct inj_timeouts *to, struct inj_worker **ret, char *err, size_t errlen)
{
	struct inj_worker *w = calloc(1, sizeof(*w));
	int p[2];

	if (!w)
		return seterr(err, errlen, "out of memory");
	w->r = *r;
	w->r.key = r->key ? inj_key_dup(r->key, strlen(r->key)) : NULL;
	w->to = to ? *to : inj_timeouts_default;
	w->report_fd = report_fd;
	w->drain_r = w->drain_w = -1;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (!w->r.key) {
		free(w);
		return seterr(err, errlen, "route %s: no key (or no memory for it)", r->name);
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		seterr(err, errlen, "pipe: %s", strerror(errno));
		goto fail;
	}
	w->drain_r = p[0];
	w->drain_w = p[1];
	if (inj_tls_new(ca_pem, ca_len, &w->tls, err, errlen) < 0)
		goto fail;
	*ret = w;
	return 0;
fail:
	inj_worker_free(w);
	return -1;
}

void inj_worker_free(struct inj_worker *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->npool; i++)
		inj_conn_close(w->pool[i].c);
	inj_tls_free(w->tls);
	inj_key_free(w->r.key);
	if (w->drain_r >= 0)
		close(w->drain_r);
	if (w->drain_w >= 0)
		close(w->drain_w);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

/* ---- the pool ---- */

/* A kept connection that may take a request, the most recently used first; NULL: none. */
static struct inj_conn *pool_get(struct inj_worker *w)
{
	for (;;) {
		struct pooled p;

		pthread_mutex_lock(&w->mu);
		if (!w->npool) {
			pthread_mutex_unlock(&w->mu);
			return NULL;
		}
		p = w->pool[--w->npool];
		pthread_mutex_unlock(&w->mu);
		if (mono_ms() - p.since < w->to.pool_idle_ms && inj_conn_reusable(p.c))
			return p.c;
		inj_conn_drop(p.c);
	}
}

static void pool_put(struct inj_worker *w, struct inj_conn *c)
{
	pthread_mutex_lock(&w->mu);
	if (!w->draining && w->npool < INJ_POOL_MAX) {
		w->pool[w->npool++] = (struct pooled){c, mono_ms()};
		c = NULL;
	}
	pthread_mutex_unlock(&w->mu);
	inj_conn_close(c);
}

/* Connections idle longer than pool_idle_ms are closed (the worker's loop, each second). */
static void pool_expire(struct inj_worker *w)
{
	struct inj_conn *old[INJ_POOL_MAX];
	size_t n = 0, k = 0;
	long now = mono_ms();

	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->npool; i++) {
		if (now - w->pool[i].since >= w->to.pool_idle_ms || w->draining)
			old[n++] = w->pool[i].c;
		else
			w->pool[k++] = w->pool[i];
	}
	w->npool = k;
	pthread_mutex_unlock(&w->mu);
	/* No close_notify: an upstream that stopped reading must not hold this loop. */
	for (size_t i = 0; i < n; i++)
		inj_conn_drop(old[i]);
}

static int open_upstream(struct inj_worker *w, struct inj_conn **ret, char *why, size_t whylen)
{
	char err[512];

	if (inj_conn_open(w->tls, w->r.host, w->r.uport, w->to.upstream_ms, ret, err, sizeof(err)) <
		0) {
		snprintf(why, whylen, "502 %s", err);
		return -1;
	}
	return 0;
}

/* ---- the agent's side ---- */

static int send_iov(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static int send_all(int fd, const void *p, size_t n)
{
	struct iovec iov = {(void *)p, n};

	return n ? send_iov(fd, &iov, 1) : 0;
}

/* One chunk of a chunked answer, in one write (a streamed event leaves at once). */
static int send_chunk(int fd, const char *p, size_t n)
{
	char size[24];
	struct iovec iov[3] = {{size, 0}, {(void *)p, n}, {"\r\n", 2}};

	if (!n)
		return 0;
	iov[0].iov_len = (size_t)snprintf(size, sizeof(size), "%zx\r\n", n);
	return send_iov(fd, iov, 3);
}

/*
 * Up to n bytes from the agent by deadline (monotonic ms): the count, 0 at its end, -1 an
 * error, -2 the deadline, -3 the worker drains (only with watch_drain).
 */
static ssize_t crecv(
	struct inj_worker *w, int fd, void *p, size_t n, long deadline, int watch_drain)
{
	for (;;) {
		struct pollfd pf[2] = {
			{.fd = fd, .events = POLLIN}, {.fd = w->drain_r, .events = POLLIN}};
		long left = deadline - mono_ms();
		int r;

		if (left <= 0)
			return -2;
		r = poll(pf, watch_drain ? 2 : 1, left > INT_MAX ? INT_MAX : (int)left);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return -2;
		if (pf[0].revents) {
			ssize_t k = recv(fd, p, n, 0);
			if (k < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			return k;
		}
		if (watch_drain && pf[1].revents)
			return -3;
	}
}

/*
 * The fixed answer for a refusal (the connection ends after it); why, unless NULL, gets
 * the same text for the owner's log.
 */
static void answer(int fd, int status, const char *text, char *why, size_t whylen)
{
	struct buf b = {0};

	if (inj_error_answer(status, text, &b) == 0)
		send_all(fd, b.data, b.len);
	buf_free(&b);
	if (why)
		snprintf(why, whylen, "%d %s", status, text);
}

/*
 * The next request's head into c->in: its length; 0 when the connection just ends (the
 * agent closed it, or was idle too long, or the worker drains, before a byte of a new
 * request); -status for a head that cannot be taken (400, 408, 431).
 */
static long read_head(struct inj_worker *w, struct client *c)
{
	long start = mono_ms(), deadline;
	size_t end, scanned = 0;
	ssize_t k;

	if (!c->got) {
		/* A new connection has head_ms for its head; a kept one idle_ms to start one. */
		/*
		 * A drain ends a kept connection between requests; a new one still gets its
		 * first answer (it was handed over before the drain).
		 */
		k = crecv(w, c->fd, c->in, INJ_HEAD_MAX,
			start + (c->first ? w->to.head_ms : w->to.idle_ms), !c->first);
		if (k == -2 && c->first)
			return -408;
		if (k <= 0)
			return 0;
		c->got = (size_t)k;
		if (!c->first)
			start = mono_ms();
	}
	/* The whole head by one deadline, however the agent spaces its bytes. */
	deadline = start + w->to.head_ms;
	for (;;) {
		/* Only what was not looked at yet (and the 3 bytes before it) is scanned. */
		end = inj_head_end(c->in + scanned, c->got - scanned);
		if (end)
			return (long)(scanned + end);
		scanned = c->got > 3 ? c->got - 3 : 0;
		if (c->got == INJ_HEAD_MAX)
			return -431;
		k = crecv(w, c->fd, c->in + c->got, INJ_HEAD_MAX - c->got, deadline, 0);
		if (k == -2)
			return -408;
		if (k <= 0)
			return -400;
		c->got += (size_t)k;
	}
}

/*
 * The body after the head (c->in[off..got) first): exactly what the framing says to the
 * upstream; what follows it stays in c->in for the next request. 0, -1 the agent closed or
 * paused too long, -2 a malformed chunked body, -3 the upstream took no more.
 */
static int relay_body(struct inj_worker *w, struct client *c, size_t off, struct inj_conn *up,
	const struct inj_req *req, struct inj_usage *u)
{
	struct inj_chunked ch = {0};
	struct buf enc = {0};
	unsigned long long left = req->clen;
	size_t pos = off;
	int rc = 0;

	while (req->body != INJ_BODY_NONE) {
		const char *p;
		size_t n;

		if (pos == c->got) {
			size_t want = INJ_HEAD_MAX;
			ssize_t k;

			if (req->body == INJ_BODY_LENGTH && left < want)
				want = (size_t)left;
			pos = c->got = 0;
			k = crecv(w, c->fd, c->in, want, mono_ms() + w->to.body_ms, 0);
			if (k <= 0) {
				rc = -1;
				break;
			}
			c->got = (size_t)k;
		}
		p = c->in + pos;
		n = c->got - pos;
		if (req->body == INJ_BODY_LENGTH) {
			size_t take = n < left ? n : (size_t)left;
			if (inj_conn_write(up, p, take) < 0) {
				rc = -3;
				break;
			}
			u->req_bytes += take;
			pos += take;
			left -= take;
			if (!left)
				break;
		} else {
			ssize_t used;

			enc.len = 0;
			used = inj_chunked_feed(&ch, p, n, &enc);
			if (used < 0) {
				rc = -2;
				break;
			}
			if (enc.len && inj_conn_write(up, enc.data, enc.len) < 0) {
				rc = -3;
				break;
			}
			u->req_bytes += enc.len;
			pos += (size_t)used;
			if (ch.done)
				break;
		}
	}
	buf_free(&enc);
	if (rc == 0) {
		/* The next request (pipelined) moves to the front. */
		memmove(c->in, c->in + pos, c->got - pos);
		c->got -= pos;
	}
	return rc;
}

/* ---- the upstream's answer ---- */

struct relay {
	struct inj_worker *w;
	struct client *c;
	struct inj_redact *rd;
	const struct inj_resp *resp;
	struct inj_usage *u;
	struct buf out;
};

/* Decoded body bytes: counted, masked, and sent (as a chunk when the answer is chunked). */
static int emit(struct relay *x, const char *p, size_t n)
{
	x->out.len = 0;
	inj_usage_feed(x->u, p, n);
	if (inj_redact_feed(x->rd, p, n, &x->out) < 0)
		return -1;
	if (x->resp->body == INJ_BODY_CHUNKED || x->resp->body == INJ_BODY_CLOSE)
		return send_chunk(x->c->fd, x->out.data, x->out.len);
	return send_all(x->c->fd, x->out.data, x->out.len);
}

/* The end of the body: what the redactor held back, and the last chunk. */
static int finish(struct relay *x)
{
	x->out.len = 0;
	if (inj_redact_flush(x->rd, &x->out) < 0)
		return -1;
	if (x->resp->body == INJ_BODY_CHUNKED || x->resp->body == INJ_BODY_CLOSE)
		return send_chunk(x->c->fd, x->out.data, x->out.len) < 0 ||
				send_all(x->c->fd, "0\r\n\r\n", 5) < 0
			? -1
			: 0;
	return send_all(x->c->fd, x->out.data, x->out.len);
}

/*
 * The body after the answer's head (pre: npre bytes already read with it). 1 complete and
 * the upstream connection reusable, 0 complete, -1 broken (the agent's connection must end
 * without a complete answer, so it cannot take it for one).
 */
static int relay_answer_body(struct relay *x, struct inj_conn *up, const char *pre, size_t npre)
{
	struct inj_chunked ch = {.decode = 1};
	struct buf dec = {0};
	unsigned long long left = x->resp->clen;
	char buf[IO_BUF];
	int rc = -1, extra = 0;

	switch (x->resp->body) {
	case INJ_BODY_NONE:
		extra = npre != 0;
		break;
	case INJ_BODY_LENGTH:
		for (;;) {
			size_t take = npre < left ? npre : (size_t)left;
			ssize_t k;

			if (take && emit(x, pre, take) < 0)
				goto out;
			extra |= npre > take;
			left -= take;
			if (!left)
				break;
			k = inj_conn_read(up, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
			if (k <= 0)
				goto out;
			pre = buf;
			npre = (size_t)k;
		}
		break;
	case INJ_BODY_CHUNKED:
		for (;;) {
			ssize_t used;

			dec.len = 0;
			used = inj_chunked_feed(&ch, pre, npre, &dec);
			if (used < 0 || (dec.len && emit(x, dec.data, dec.len) < 0))
				goto out;
			if (ch.done) {
				extra |= (size_t)used < npre;
				break;
			}
			ssize_t k = inj_conn_read(up, buf, sizeof(buf));
			if (k <= 0)
				goto out;
			pre = buf;
			npre = (size_t)k;
		}
		break;
	default: /* INJ_BODY_CLOSE */
		for (;;) {
			ssize_t k;

			if (npre && emit(x, pre, npre) < 0)
				goto out;
			k = inj_conn_read(up, buf, sizeof(buf));
			if (k < 0)
				goto out;
			if (k == 0)
				break;
			pre = buf;
			npre = (size_t)k;
		}
		break;
	}
	if (finish(x) < 0)
		goto out;
	/* Bytes past the answer's end: an upstream out of step is not kept. */
	rc = extra || x->resp->upstream_close ? 0 : 1;
out:
	buf_free(&dec);
	return rc;
}

/*
 * The answer to the request just sent: its head (interim 1xx ones skipped), then the body.
 * 1 relayed and the upstream reusable, 0 relayed, -1 broken after the head went out (the
 * agent's connection ends), -2 nothing usable came (the agent gets a 502).
 */
static int relay_answer(struct relay *x, struct inj_conn *up, const char *method, int close_client,
	struct inj_resp *resp, char *why, size_t whylen)
{
	struct buf hb = {0}, out = {.wipe = 1};
	char buf[IO_BUF];
	size_t end = 0;
	int rc = -2;

	for (;;) {
		while (!(end = hb.len ? inj_head_end(hb.data, hb.len) : 0)) {
			ssize_t k;

			if (hb.len >= INJ_RESP_HEAD_MAX) {
				snprintf(why, whylen, "the upstream's answer head is too large");
				goto out;
			}
			k = inj_conn_read(up, buf, sizeof(buf));
			if (k <= 0) {
				snprintf(why, whylen,
					k == 0 ? "no answer from upstream"
					       : "upstream read failed");
				goto out;
			}
			if (buf_append(&hb, buf, (size_t)k) < 0)
				goto out;
		}
		if (inj_resp_head(hb.data, end, method, close_client, resp, &out) < 0) {
			snprintf(why, whylen, "the upstream's answer is not HTTP/1.1 this relays");
			goto out;
		}
		if (resp->status >= 200)
			break;
		/* 100 Continue or 103 Early Hints: nothing the agent waits for. */
		memmove(hb.data, hb.data + end, hb.len - end);
		hb.len -= end;
	}
	/* Usage reads the status from the head as the upstream sent it. */
	inj_usage_feed(x->u, hb.data, end);
	inj_redact_all(x->rd, out.data, out.len);
	if (send_all(x->c->fd, out.data, out.len) < 0) {
		snprintf(why, whylen, "the agent closed early");
		rc = -1;
		goto out;
	}
	rc = relay_answer_body(x, up, hb.data + end, hb.len - end);
	if (rc < 0)
		snprintf(why, whylen, "the answer broke off (upstream or agent)");
out:
	buf_free(&hb);
	buf_free(&out);
	return rc;
}

static void report(struct inj_worker *w, const struct inj_usage *u)
{
	char line[256];
	int n = inj_usage_line(w->r.name, time(NULL), u, line, sizeof(line));

	/* Never waited for: a lost line is a lost count, a blocked worker a lost route. */
	if (w->report_fd >= 0 && n > 0 && (size_t)n < sizeof(line) &&
		write(w->report_fd, line, (size_t)n) < 0 && errno != EAGAIN)
		log_warn("route %s: usage report lost: %s", w->r.name, strerror(errno));
}

/* One request: 1 the connection may take another, 0 it ends. */
static int serve_one(struct inj_worker *w, struct client *c, struct inj_redact *rd)
{
	struct inj_usage u;
	struct inj_req req;
	struct inj_resp resp;
	struct buf head = {.wipe = 1};
	struct relay x = {.w = w, .c = c, .rd = rd, .resp = &resp, .u = &u};
	struct inj_conn *up = NULL;
	char why[600] = "";
	long end;
	int keep = 0, close_client, reused, rc;

	inj_usage_init(&u);
	end = read_head(w, c);
	if (end == 0)
		return 0;
	c->first = 0;
	if (end < 0) {
		answer(c->fd, (int)-end,
			end == -431	      ? "request head too large"
				: end == -408 ? "request head timed out"
					      : "incomplete request head",
			why, sizeof(why));
		u.status = INJ_REFUSED;
		goto out;
	}
	if (inj_rewrite(&w->r, w->r.key, c->in, (size_t)end, &head, &req) < 0) {
		answer(c->fd, req.status, req.why, why, sizeof(why));
		u.status = INJ_REFUSED;
		goto out;
	}
	pthread_mutex_lock(&w->mu);
	close_client = req.close || w->draining;
	pthread_mutex_unlock(&w->mu);
	up = pool_get(w);
	reused = up != NULL;
	if (!up && open_upstream(w, &up, why, sizeof(why)) < 0) {
		/* The owner's log gets the TLS detail; the agent a fixed text. */
		answer(c->fd, 502, "upstream unreachable or its certificate was refused", NULL, 0);
		goto out;
	}
	rc = inj_conn_write(up, head.data, head.len);
	if (rc < 0 && reused) {
		/* A kept connection the upstream had closed: once more on a new one. */
		inj_conn_close(up);
		up = NULL;
		rc = open_upstream(w, &up, why, sizeof(why));
		if (rc == 0)
			rc = inj_conn_write(up, head.data, head.len);
	}
	explicit_bzero(head.data, head.cap);
	if (rc < 0) {
		/* why keeps the TLS detail for the owner's log when there is one. */
		answer(c->fd, 502, "upstream connection failed", why[0] ? NULL : why, sizeof(why));
		goto out;
	}
	rc = relay_body(w, c, (size_t)end, up, &req, &u);
	if (rc == -2) {
		/* The upstream got part of a request: that connection is never used again. */
		answer(c->fd, 400, "malformed chunked request body", why, sizeof(why));
		goto out;
	}
	if (rc == -3) {
		answer(c->fd, 502, "upstream closed during the request body", NULL, 0);
		snprintf(why, sizeof(why), "502 upstream closed during the request body (%s%s)",
			inj_conn_error(up), reused ? ", a kept connection" : "");
		goto out;
	}
	if (rc < 0) {
		snprintf(why, sizeof(why), "request body not relayed (the agent closed or paused)");
		goto out;
	}
	rc = relay_answer(&x, up, req.method, close_client, &resp, why, sizeof(why));
	if (rc == -2) {
		answer(c->fd, 502, "no usable answer from upstream", NULL, 0);
		u.status = 0;
		goto out;
	}
	if (rc == 1) {
		pool_put(w, up);
		up = NULL;
	}
	keep = rc >= 0 && !resp.client_close;
out:
	buf_free(&head);
	buf_free(&x.out);
	inj_conn_close(up);
	if (why[0])
		log_warn("route %s: %s", w->r.name, why);
	else
		log_debug("route %s: %d, %llu bytes up, %llu down", w->r.name, u.status,
			u.req_bytes, u.resp_bytes);
	report(w, &u);
	return keep;
}

void inj_serve_conn(struct inj_worker *w, int fd)
{
	struct client c = {.fd = fd, .first = 1};
	struct inj_redact rd;
	struct timeval tv = {.tv_sec = w->to.upstream_ms / 1000};

	memset(&rd, 0, sizeof(rd));
	c.in = malloc(INJ_HEAD_MAX);
	if (!c.in || inj_redact_init(&rd, w->r.key, strlen(w->r.key)) < 0) {
		char why[64];
		answer(fd, 503, "out of memory", why, sizeof(why));
		goto out;
	}
	/* An agent that stops reading its answer holds the connection this long at most. */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	while (serve_one(w, &c, &rd))
		;
out:
	inj_redact_free(&rd);
	free(c.in);
	close(fd);
}

/* ---- the worker process ---- */

struct conn_arg {
	struct inj_worker *w;
	int fd;
};

static void *conn_thread(void *p)
{
	struct conn_arg a = *(struct conn_arg *)p;

	free(p);
	inj_serve_conn(a.w, a.fd);
	pthread_mutex_lock(&a.w->mu);
	a.w->conns--;
	pthread_cond_broadcast(&a.w->cv);
	pthread_mutex_unlock(&a.w->mu);
	return NULL;
}

/* A connection from the first process: "c" with its descriptor. */
static int recv_conn(int sock)
{
	int fds[1];
	size_t nfd = 0;
	char tag = 0;
	ssize_t r = inj_recv_fds(sock, &tag, 1, fds, 1, &nfd);

	if (r <= 0) {
		if (nfd)
			close(fds[0]);
		return r == 0 ? -2 : -1;
	}
	if (nfd && tag == 'c')
		return fds[0];
	if (nfd)
		close(fds[0]);
	/* A message without its descriptor (the fd limit): skipped, not taken for an end. */
	errno = EAGAIN;
	return -1;
}

int inj_worker_run(struct inj_worker *w, int sock)
{
	pthread_attr_t attr;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 512 * 1024);
	for (;;) {
		struct pollfd pf = {.fd = sock, .events = POLLIN};
		int r = poll(&pf, 1, 1000), fd;

		pool_expire(w);
		if (r < 0 && errno != EINTR)
			break;
		if (r <= 0)
			continue;
		fd = recv_conn(sock);
		if (fd == -2 || (fd == -1 && errno != EAGAIN))
			break; /* the first process closed it: drain */
		if (fd < 0)
			continue;
		pthread_mutex_lock(&w->mu);
		if (w->conns >= INJ_ROUTE_CONNS) {
			char why[64];
			pthread_mutex_unlock(&w->mu);
			answer(fd, 503, "too many connections on this route", why, sizeof(why));
			close(fd);
			continue;
		}
		w->conns++;
		pthread_mutex_unlock(&w->mu);
		struct conn_arg *a = malloc(sizeof(*a));
		pthread_t t;
		if (a) {
			a->w = w;
			a->fd = fd;
		}
		if (!a || pthread_create(&t, &attr, conn_thread, a) != 0) {
			char why[64];
			free(a);
			answer(fd, 503, "out of resources", why, sizeof(why));
			close(fd);
			pthread_mutex_lock(&w->mu);
			w->conns--;
			pthread_mutex_unlock(&w->mu);
		}
	}
	pthread_attr_destroy(&attr);
	/* Drain: kept connections end now, the others after their current answer. */
	pthread_mutex_lock(&w->mu);
	w->draining = 1;
	pthread_mutex_unlock(&w->mu);
	close(w->drain_w);
	w->drain_w = -1;
	pool_expire(w);
	/*
	 * Bounded: an agent trickling a body (a pause under body_ms each time) would keep an
	 * old worker, and its old key, alive for ever after a push. Past the deadline the
	 * process ends with whatever is still open.
	 */
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += INJ_DRAIN_MAX_S;
	pthread_mutex_lock(&w->mu);
	while (w->conns && pthread_cond_timedwait(&w->cv, &w->mu, &until) != ETIMEDOUT)
		;
	pthread_mutex_unlock(&w->mu);
	return 0;
}
