/* SPDX-License-Identifier: MIT */
/*
 * One connection of the agent: one request, relayed with the key added, then closed.
 * The head is read whole (bounded) before anything goes upstream; the body is framed
 * exactly (what follows it is never sent); the response is passed on as it arrives.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "inject.h"

static int send_all(int fd, const void *p, size_t n)
{
	const char *s = p;

	while (n) {
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

static ssize_t recv_some(int fd, void *p, size_t n)
{
	ssize_t r;

	do
		r = recv(fd, p, n, 0);
	while (r < 0 && errno == EINTR);
	return r;
}

/* The fixed answer for a refusal; why (for the log) gets the same text. */
static int answer(int fd, int status, const char *text, char *why, size_t whylen)
{
	struct buf b = {0};

	if (inj_error_answer(status, text, &b) == 0)
		send_all(fd, b.data, b.len);
	buf_free(&b);
	snprintf(why, whylen, "%d %s", status, text);
	return -1;
}

/* Reads until the end of the head: its length, with *got the bytes read in all. */
static size_t read_head(int fd, char *buf, size_t cap, size_t *got, int *status)
{
	size_t n = 0, end = 0;

	*status = 400;
	while (!(end = inj_head_end(buf, n))) {
		if (n == cap) {
			*status = 431;
			return 0;
		}
		ssize_t r = recv_some(fd, buf + n, cap - n);
		if (r <= 0) {
			*status = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 408 : 400;
			return 0;
		}
		n += (size_t)r;
	}
	*got = n;
	return end;
}

/* The body after the head: exactly what the framing says, nothing after it. */
static int relay_body(int fd, struct inj_conn *up, const struct inj_req *req, const char *pre,
	size_t npre, struct inj_usage *u)
{
	struct inj_chunked ch = {0};
	struct buf enc = {0};
	char buf[16384];
	unsigned long long left = req->clen;
	int rc = -1;

	while (req->body != INJ_BODY_NONE) {
		const char *p = pre;
		size_t n = npre;

		if (!npre) {
			ssize_t r = recv_some(fd, buf, sizeof(buf));
			if (r <= 0)
				goto out;
			p = buf;
			n = (size_t)r;
		}
		npre = 0;
		if (req->body == INJ_BODY_LENGTH) {
			size_t take = n < left ? n : (size_t)left;
			if (inj_conn_write(up, p, take) < 0)
				goto out;
			u->req_bytes += take;
			left -= take;
			if (!left)
				break;
		} else {
			enc.len = 0;
			if (inj_chunked_feed(&ch, p, n, &enc) < 0)
				goto out;
			if (enc.len && inj_conn_write(up, enc.data, enc.len) < 0)
				goto out;
			u->req_bytes += enc.len;
			if (ch.done)
				break;
		}
	}
	rc = 0;
out:
	buf_free(&enc);
	return rc;
}

int inj_serve(int fd, const struct inj_route *r, struct inj_tls *t, int timeout_ms,
	struct inj_usage *u, char *why, size_t whylen)
{
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	struct timeval head_tv = {.tv_sec = timeout_ms < 30000 ? timeout_ms / 1000 : 30,
		.tv_usec = timeout_ms < 30000 ? (timeout_ms % 1000) * 1000 : 0};
	struct inj_conn *up = NULL;
	struct inj_req req;
	struct buf head = {0};
	char *in = malloc(INJ_HEAD_MAX), buf[16384], err[512];
	size_t got = 0, end;
	int status, rc = -1;

	inj_usage_init(u);
	why[0] = 0;
	if (!in)
		return answer(fd, 503, "out of memory", why, whylen);
	/* The head within 30 s (a stalled client holds one process, not the route). */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &head_tv, sizeof(head_tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	end = read_head(fd, in, INJ_HEAD_MAX, &got, &status);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (!end) {
		answer(fd, status,
			status == 431	? "request head too large"
			: status == 408 ? "request head timed out"
					: "incomplete request head",
			why, whylen);
		goto out;
	}
	if (inj_rewrite(r, r->key, in, end, &head, &req) < 0) {
		answer(fd, req.status, req.why, why, whylen);
		goto out;
	}
	if (inj_conn_open(t, r->host, r->uport, timeout_ms, &up, err, sizeof(err)) < 0) {
		/* The owner's log gets the TLS detail; the agent a fixed text. */
		answer(fd, 502, "upstream unreachable or its certificate was refused", why,
			whylen);
		snprintf(why, whylen, "502 %s", err);
		goto out;
	}
	rc = inj_conn_write(up, head.data, head.len);
	explicit_bzero(head.data, head.cap);
	if (rc < 0 || relay_body(fd, up, &req, in + end, got - end, u) < 0) {
		rc = -1;
		snprintf(why, whylen, "request body not relayed");
		goto out;
	}
	/* No more from the agent: what it sends after the body is never read. */
	shutdown(fd, SHUT_RD);
	for (;;) {
		ssize_t n = inj_conn_read(up, buf, sizeof(buf));
		if (n < 0) {
			snprintf(why, whylen, "upstream read failed");
			break;
		}
		if (n == 0)
			break;
		inj_usage_feed(u, buf, (size_t)n);
		if (send_all(fd, buf, (size_t)n) < 0) {
			snprintf(why, whylen, "the agent closed early");
			break;
		}
	}
	rc = u->status ? 0 : -1;
	if (!u->resp_bytes) {
		answer(fd, 502, "no answer from upstream", why, whylen);
		rc = -1;
	} else if (!u->status && !why[0]) {
		snprintf(why, whylen, "the upstream's answer is not HTTP");
	}
out:
	if (head.data)
		explicit_bzero(head.data, head.cap);
	buf_free(&head);
	free(in);
	inj_conn_close(up);
	return rc;
}
