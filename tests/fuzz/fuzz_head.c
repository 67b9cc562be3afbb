/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the HTTP heads ocsb-inject parses (inject/head.c): the agent's
 * request head (inj_rewrite, inj_head_end) and the upstream's answer head (inj_resp_head).
 * The first byte picks a route (prefix, key header, upstream port), the method the answer
 * is to, and whether the agent asked for "Connection: close"; the rest is the head. Besides
 * the sanitizers' findings, abort() when:
 *   - a refused request leaves bytes in the output, or its status is not one the injector
 *     answers with, or its text is not one printable line;
 *   - an accepted request's rewritten head is not one head ending at its blank line, does
 *     not keep the request line, Host and the key header exactly once each, has a second
 *     framing header, frames the body otherwise than inj_req says, passes a header the
 *     injector drops, or holds a header line the agent did not send (beyond the injector's
 *     own Host, key, framing and Accept-Encoding lines, in that order);
 *   - the rewritten head, rewritten again, is not the very same head with the same method
 *     and framing (what the injector sends re-parses to itself);
 *   - the same properties for the answer's head (framing from what was parsed, hop-by-hop
 *     headers dropped, "Connection: close" iff asked) and its idempotence;
 *   - an error answer of the injector's own (inj_error_answer) is not an answer head its own
 *     parser accepts with that status and the body's length.
 * Build and run: `make fuzz FUZZ_ONLY=head` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "inject.h"
#include "fuzz_util.h"

#define KEY "sk-fuzz-KEY-0123456789abcdef"

static struct inj_route make_route(unsigned which)
{
	struct inj_route r;

	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "FUZZ_API_KEY");
	r.port = 18400;
	switch (which % 4) {
	case 0:
		snprintf(r.host, sizeof(r.host), "api.anthropic.com");
		r.uport = 443;
		snprintf(r.prefix, sizeof(r.prefix), "/v1");
		snprintf(r.hname, sizeof(r.hname), "x-api-key");
		snprintf(r.htmpl, sizeof(r.htmpl), "{}");
		break;
	case 1:
		snprintf(r.host, sizeof(r.host), "api.example.test");
		r.uport = 8443;
		snprintf(r.hname, sizeof(r.hname), "Authorization");
		snprintf(r.htmpl, sizeof(r.htmpl), "Bearer {}");
		break;
	case 2:
		snprintf(r.host, sizeof(r.host), "generativelanguage.googleapis.com");
		r.uport = 443;
		snprintf(r.prefix, sizeof(r.prefix), "/v1beta/models");
		snprintf(r.hname, sizeof(r.hname), "x-goog-api-key");
		snprintf(r.htmpl, sizeof(r.htmpl), "{}");
		break;
	default:
		/* A header of the route's own that the agent may send too. */
		snprintf(r.host, sizeof(r.host), "git.example.test");
		r.uport = 443;
		snprintf(r.prefix, sizeof(r.prefix), "/org/repo.git");
		snprintf(r.hname, sizeof(r.hname), "X-Token");
		snprintf(r.htmpl, sizeof(r.htmpl), "token {} v1");
		break;
	}
	return r;
}

/* Headers the request rewrite never passes on from the agent (head.c's list). */
static const char *const req_dropped[] = {"authorization", "proxy-authorization", "x-api-key",
	"x-goog-api-key", "api-key", "cookie", "host", "connection", "keep-alive",
	"proxy-connection", "te", "trailer", "upgrade", "transfer-encoding", "content-length",
	"expect", "accept-encoding", "forwarded", "x-forwarded-for", "x-forwarded-host",
	"x-forwarded-proto", "via"};
/* Headers the answer's rewrite never passes on from the upstream. */
static const char *const resp_dropped[] = {"connection", "keep-alive", "proxy-connection", "te",
	"trailer", "upgrade", "transfer-encoding", "content-length"};

static int name_is(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);

	return len > n && line[n] == ':' && !strncasecmp(line, name, n);
}

static int in_list(const char *line, size_t len, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (name_is(line, len, list[i]))
			return 1;
	return 0;
}

/* The next line of a head at *p (up to end): its start and length; NULL at the blank line. */
static const char *next_line(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *eol;

	eol = memmem(s, (size_t)(end - s), "\r\n", 2);
	CHECK(eol != NULL);
	*len = (size_t)(eol - s);
	*p = eol + 2;
	return *len ? s : NULL;
}

/* A well-formed head: one "\r\n\r\n", at its end, and no bare CR or LF. */
static void check_one_head(const struct buf *b)
{
	CHECK(b->len >= 4 && inj_head_end(b->data, b->len) == b->len);
	for (size_t i = 0; i < b->len; i++) {
		if (b->data[i] == '\r')
			CHECK(i + 1 < b->len && b->data[i + 1] == '\n');
		if (b->data[i] == '\n')
			CHECK(i > 0 && b->data[i - 1] == '\r');
	}
}

static size_t count_lines(const struct buf *b)
{
	const char *p = b->data, *end = b->data + b->len;
	size_t len, n = 0;

	while (next_line(&p, end, &len))
		n++;
	return n;
}

static void check_refusal(const struct buf *out, const struct inj_req *req)
{
	static const int statuses[] = {400, 403, 405, 431, 500, 501};
	int known = 0;

	CHECK(out->len == 0);
	for (size_t i = 0; i < ARRAY_SIZE(statuses); i++)
		known |= req->status == statuses[i];
	CHECK(known);
	CHECK(req->why && req->why[0]);
	for (const char *c = req->why; *c; c++)
		CHECK(*c >= 0x20 && *c < 0x7f);
}

/* The key header as the injector writes it. */
static void key_line(const struct inj_route *r, char *out, size_t n)
{
	const char *at = strstr(r->htmpl, "{}");

	snprintf(out, n, "%s: %.*s%s%s", r->hname, (int)(at - r->htmpl), r->htmpl, KEY, at + 2);
}

static void check_request(const struct inj_route *r, const char *head, size_t n)
{
	struct buf out = {0}, out2 = {0};
	struct inj_req req, req2;
	const char *p, *end, *line, *in = head, *in_end = head + n, *sp;
	char host[300], kline[400];
	size_t len, nlines;
	int seen_key = 0, seen_te = 0, seen_cl = 0, seen_ae = 0;

	if (inj_rewrite(r, KEY, head, n, &out, &req) < 0) {
		check_refusal(&out, &req);
		buf_free(&out);
		return;
	}
	CHECK(req.status == 0 && req.why == NULL);
	CHECK(inj_head_end(head, n) == n);
	check_one_head(&out);
	CHECK(!strcmp(req.method, "GET") || !strcmp(req.method, "HEAD") ||
		!strcmp(req.method, "POST") || !strcmp(req.method, "PUT") ||
		!strcmp(req.method, "PATCH") || !strcmp(req.method, "DELETE") ||
		!strcmp(req.method, "OPTIONS"));
	if (req.body != INJ_BODY_NONE)
		CHECK(!strcmp(req.method, "POST") || !strcmp(req.method, "PUT") ||
			!strcmp(req.method, "PATCH"));
	CHECK(req.body != INJ_BODY_LENGTH || req.clen > 0);

	/* The request line: the agent's method and target, HTTP/1.1. */
	p = out.data;
	end = out.data + out.len;
	line = next_line(&p, end, &len);
	CHECK(line && len > 9 && !memcmp(line + len - 9, " HTTP/1.1", 9));
	CHECK(n >= len && !memcmp(head, line, len));
	sp = memchr(line, ' ', len);
	CHECK(sp && (size_t)(sp - line) == strlen(req.method) &&
		!memcmp(line, req.method, strlen(req.method)));
	next_line(&in, in_end, &len);

	/* Host: pinned to the upstream, first. */
	if (r->uport != 443)
		snprintf(host, sizeof(host), "Host: %s:%u", r->host, r->uport);
	else
		snprintf(host, sizeof(host), "Host: %s", r->host);
	line = next_line(&p, end, &len);
	CHECK(line && len == strlen(host) && !memcmp(line, host, len));

	/* The agent's headers that pass, each as it sent it and in its order; then the rest. */
	key_line(r, kline, sizeof(kline));
	while ((line = next_line(&p, end, &len))) {
		if (name_is(line, len, r->hname)) {
			CHECK(!seen_key++ && len == strlen(kline) && !memcmp(line, kline, len));
			continue;
		}
		if (seen_key) {
			if (name_is(line, len, "transfer-encoding")) {
				CHECK(!seen_te++ && !seen_cl && !seen_ae);
				CHECK(len == 26 && !memcmp(line, "Transfer-Encoding: chunked", 26));
			} else if (name_is(line, len, "content-length")) {
				char want[64];
				CHECK(!seen_cl++ && !seen_te && !seen_ae);
				snprintf(want, sizeof(want), "Content-Length: %llu", req.clen);
				CHECK(len == strlen(want) && !memcmp(line, want, len));
			} else {
				CHECK(!seen_ae++);
				CHECK(len == 25 && !memcmp(line, "Accept-Encoding: identity", 25));
			}
			continue;
		}
		CHECK(!in_list(line, len, req_dropped, ARRAY_SIZE(req_dropped)));
		/* Found among the agent's lines, after the previous one found. */
		for (;;) {
			size_t ilen;
			const char *il = next_line(&in, in_end, &ilen);

			CHECK(il != NULL);
			if (ilen == len && !memcmp(il, line, len))
				break;
		}
	}
	CHECK(p == end && seen_key == 1 && seen_ae == 1);
	CHECK(seen_te == (req.body == INJ_BODY_CHUNKED));
	if (req.body == INJ_BODY_LENGTH)
		CHECK(seen_cl);
	if (req.body == INJ_BODY_NONE)
		CHECK(!seen_te && (!seen_cl || req.clen == 0));

	/*
	 * What the injector sends, taken as a request, is rewritten to itself: the same
	 * method and framing ("Connection: close" is not passed on, so close is not kept).
	 * Unless the injector's own lines took it past the header count.
	 */
	nlines = count_lines(&out) - 1;
	if (inj_rewrite(r, KEY, out.data, out.len, &out2, &req2) < 0) {
		check_refusal(&out2, &req2);
		CHECK(nlines > INJ_MAX_HEADERS && req2.status == 431);
	} else {
		CHECK(out2.len == out.len && !memcmp(out2.data, out.data, out.len));
		CHECK(!strcmp(req2.method, req.method) && req2.body == req.body &&
			req2.clen == req.clen && req2.close == 0);
	}
	buf_free(&out);
	buf_free(&out2);
}

static void check_answer(const char *head, size_t n, const char *method, int close_client)
{
	struct buf out = {0}, out2 = {0};
	struct inj_resp resp, resp2;
	const char *p, *end, *line;
	size_t len, nlines;
	int seen_te = 0, seen_cl = 0, seen_close = 0;

	if (inj_resp_head(head, n, method, close_client, &resp, &out) < 0) {
		buf_free(&out);
		return;
	}
	CHECK(inj_head_end(head, n) == n);
	check_one_head(&out);
	CHECK(resp.status >= 100 && resp.status <= 999 && resp.status != 101);
	CHECK(resp.body >= INJ_BODY_NONE && resp.body <= INJ_BODY_CLOSE);
	CHECK(resp.te_lines <= 1 && resp.client_close == close_client);
	if (resp.body == INJ_BODY_CLOSE)
		CHECK(resp.upstream_close);
	CHECK(resp.body != INJ_BODY_LENGTH || resp.clen > 0);
	if (!strcmp(method, "HEAD") || resp.status < 200 || resp.status == 204 ||
		resp.status == 304)
		CHECK(resp.body == INJ_BODY_NONE);

	p = out.data;
	end = out.data + out.len;
	line = next_line(&p, end, &len);
	CHECK(line && n >= len && !memcmp(line, head, len));
	while ((line = next_line(&p, end, &len))) {
		if (name_is(line, len, "transfer-encoding")) {
			CHECK(!seen_te++ && len == 26 &&
				!memcmp(line, "Transfer-Encoding: chunked", 26));
		} else if (name_is(line, len, "content-length")) {
			CHECK(!seen_cl++);
		} else if (name_is(line, len, "connection")) {
			CHECK(!seen_close++ && len == 17 && !memcmp(line, "Connection: close", 17));
		} else {
			CHECK(!in_list(line, len, resp_dropped, ARRAY_SIZE(resp_dropped)));
			/* Passed on as the upstream wrote it. */
			CHECK(memmem(head, n, line, len) != NULL);
		}
	}
	CHECK(seen_close == close_client);
	CHECK(!(seen_te && seen_cl));
	CHECK(seen_te == (resp.body == INJ_BODY_CHUNKED || resp.body == INJ_BODY_CLOSE));
	if (resp.body == INJ_BODY_LENGTH) {
		char want[64];
		snprintf(want, sizeof(want), "Content-Length: %llu\r\n", resp.clen);
		CHECK(seen_cl && memmem(out.data, out.len, want, strlen(want)));
	}

	/* The head the agent gets, parsed again, is the same head with the same framing. */
	nlines = count_lines(&out) - 1;
	if (inj_resp_head(out.data, out.len, method, close_client, &resp2, &out2) < 0) {
		CHECK(nlines > 200);
	} else {
		CHECK(out2.len == out.len && !memcmp(out2.data, out.data, out.len));
		CHECK(resp2.status == resp.status && resp2.clen == resp.clen);
		CHECK(resp2.body == (resp.body == INJ_BODY_CLOSE ? INJ_BODY_CHUNKED : resp.body));
	}
	buf_free(&out);
	buf_free(&out2);
}

/* The injector's own answers are answers its own parser takes, body length included. */
static void check_error_answer(unsigned status)
{
	static const int st[] = {400, 403, 405, 408, 431, 501, 502, 503, 504, 500};
	static const char *const why[] = {"bad request line", "path outside this route",
		"the upstream's answer head is too large"};
	struct buf out = {0}, h = {0};
	struct inj_resp resp;
	size_t end;
	int s = st[status % ARRAY_SIZE(st)];
	const char *w = why[status % ARRAY_SIZE(why)];

	CHECK(inj_error_answer(s, w, &out) == 0);
	end = inj_head_end(out.data, out.len);
	CHECK(end > 0);
	CHECK(inj_resp_head(out.data, end, "GET", 0, &resp, &h) == 0);
	CHECK(resp.status == s && resp.body == INJ_BODY_LENGTH);
	CHECK(resp.clen == out.len - end);
	CHECK(resp.upstream_close);
	buf_free(&out);
	buf_free(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const methods[] = {"GET", "HEAD", "POST", "PUT"};
	struct inj_route r;
	const char *head;
	size_t n, end;

	if (size < 1)
		return 0;
	r = make_route(data[0] & 3);
	head = (const char *)data + 1;
	n = size - 1;
	/* As the worker reads it: the head up to its blank line (and the bytes as they are). */
	check_request(&r, head, n);
	end = inj_head_end(head, n);
	if (end && end < n)
		check_request(&r, head, end);
	check_answer(head, end ? end : n, methods[(data[0] >> 2) & 3], (data[0] >> 4) & 1);
	check_error_answer(data[0]);
	return 0;
}
