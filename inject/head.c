/* SPDX-License-Identifier: MIT */
/*
 * The agent's request head, checked and rewritten. Everything here is a pure function of
 * its input: the agent controls every byte, so the parser accepts a narrow subset of
 * HTTP/1.1 and refuses the rest with a fixed text.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "inject.h"

size_t inj_head_end(const char *p, size_t n)
{
	for (size_t i = 3; i < n; i++)
		if (p[i] == '\n' && p[i - 1] == '\r' && p[i - 2] == '\n' && p[i - 3] == '\r')
			return i + 1;
	return 0;
}

static int refuse(struct inj_req *req, int status, const char *why)
{
	req->status = status;
	req->why = why;
	return -1;
}

/* RFC 9110 token characters. */
static int tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * Methods passed on. TRACE is not among them: the upstream would echo the request,
 * the injected key included, back to the agent. CONNECT would make this a tunnel.
 */
static const char *const methods[] = {
	"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"};

/*
 * Headers never passed on. Credentials the agent sent (it has none worth passing, and a
 * second Authorization beside the real one could win upstream), hop-by-hop headers (this
 * hop ends here), the framing (rewritten from what was parsed) and Host (pinned).
 * Expect: the 100-continue exchange is not relayed; the body follows the head at once.
 * Accept-Encoding: responses stay identity so usage can be read from them.
 */
static const char *const dropped[] = {"authorization", "proxy-authorization", "x-api-key",
	"x-goog-api-key", "api-key", "cookie", "host", "connection", "keep-alive",
	"proxy-connection", "te", "trailer", "upgrade", "transfer-encoding", "content-length",
	"expect", "accept-encoding", "forwarded", "x-forwarded-for", "x-forwarded-host",
	"x-forwarded-proto", "via"};

static int is_dropped(const char *name, size_t len, const struct inj_route *r)
{
	for (size_t i = 0; i < ARRAY_SIZE(dropped); i++)
		if (strlen(dropped[i]) == len && !strncasecmp(name, dropped[i], len))
			return 1;
	/* The route's own header: the agent's value must never sit beside the real one. */
	return strlen(r->hname) == len && !strncasecmp(name, r->hname, len);
}

/*
 * The request target: origin-form only ("/path?query"), inside the route's prefix, with
 * no segment that a server would resolve upwards ("." or "..", plainly or
 * percent-encoded) nor an encoded slash or backslash that could make one.
 */
static int target_ok(const char *t, size_t len, const struct inj_route *r, struct inj_req *req)
{
	size_t plen = len, pre = strlen(r->prefix);

	if (len == 0 || t[0] != '/')
		return refuse(req, 400, "only origin-form request targets (/path) are accepted");
	if (len > 1 && t[1] == '/')
		return refuse(req, 400, "request target starts with //");
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)t[i];
		if (c <= 0x20 || c >= 0x7f || c == '#' || c == '\\')
			return refuse(req, 400, "bad character in the request target");
		if (c == '?' && plen == len)
			plen = i;
		/*
		 * Path parameters ("/v1/..;/x") are resolved by some servers after the prefix
		 * was checked here: none in the path.
		 */
		if (c == ';' && plen == len)
			return refuse(req, 400, "';' in the path");
	}
	for (size_t i = 0; i + 2 < plen; i++)
		if (t[i] == '%' &&
			((t[i + 1] == '2' && strchr("eEfF", t[i + 2])) ||
				(t[i + 1] == '5' && strchr("cC", t[i + 2]))))
			return refuse(req, 400, "encoded dot, slash or backslash in the path");
	for (size_t i = 0; i < plen;) {
		size_t j = i + 1;
		while (j < plen && t[j] != '/')
			j++;
		size_t seg = j - i - 1;
		if ((seg == 1 && t[i + 1] == '.') || (seg == 2 && t[i + 1] == '.' && t[i + 2] == '.'))
			return refuse(req, 400, "dot segment in the path");
		i = j;
	}
	if (pre && (plen < pre || memcmp(t, r->prefix, pre) != 0 ||
			   (plen > pre && t[pre] != '/')))
		return refuse(req, 403, "path outside this route");
	return 0;
}

static int header_value_ok(const char *v, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return 0;
	}
	return 1;
}

/*
 * One header line p..eol: its name's length, and its value without the blanks around it
 * in *ret_v..*ret_ve. -1 a bad line (no name, no colon), -2 a bad name, -3 a bad value.
 */
static int header_split(const char *p, const char *eol, size_t *ret_nlen, const char **ret_v,
	const char **ret_ve)
{
	const char *colon = memchr(p, ':', (size_t)(eol - p)), *v, *ve;

	if (!colon || colon == p)
		return -1;
	for (const char *c = p; c < colon; c++)
		if (!tchar((unsigned char)*c))
			return -2;
	v = colon + 1;
	ve = eol;
	while (v < ve && (*v == ' ' || *v == '\t'))
		v++;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;
	if (!header_value_ok(v, (size_t)(ve - v)))
		return -3;
	*ret_nlen = (size_t)(colon - p);
	*ret_v = v;
	*ret_ve = ve;
	return 0;
}

/* 1 when the comma-separated list v (len bytes) holds token, in any case. */
static int has_token(const char *v, size_t len, const char *token)
{
	size_t tl = strlen(token);

	for (size_t i = 0; i < len;) {
		size_t j = i, e;
		while (j < len && v[j] != ',')
			j++;
		e = j;
		while (i < e && (v[i] == ' ' || v[i] == '\t'))
			i++;
		while (e > i && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (e - i == tl && !strncasecmp(v + i, token, tl))
			return 1;
		i = j + 1;
	}
	return 0;
}

static int parse_length(const char *v, size_t len, unsigned long long *ret)
{
	unsigned long long x = 0;

	if (len == 0 || len > 15)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		x = x * 10 + (unsigned)(v[i] - '0');
	}
	*ret = x;
	return 0;
}

/* The route's header line with the key in place of "{}". */
static int put_key_header(const struct inj_route *r, const char *key, struct buf *out)
{
	const char *at = strstr(r->htmpl, "{}");

	if (!at)
		return -1;
	if (buf_puts(out, r->hname) < 0 || buf_puts(out, ": ") < 0 ||
		buf_append(out, r->htmpl, (size_t)(at - r->htmpl)) < 0 || buf_puts(out, key) < 0 ||
		buf_puts(out, at + 2) < 0 || buf_puts(out, "\r\n") < 0)
		return -1;
	return 0;
}

static int rewrite(const struct inj_route *r, const char *key, const char *head, size_t n,
	struct buf *out, struct inj_req *req)
{
	const char *end = head + n, *p = head, *eol, *sp1, *sp2;
	int have_len = 0, have_te = 0, nhdr = 0;
	unsigned long long clen = 0;
	size_t mlen;

	memset(req, 0, sizeof(*req));
	out->len = 0;
	if (n < 4 || inj_head_end(head, n) != n)
		return refuse(req, 400, "incomplete request head");
	eol = memchr(p, '\r', (size_t)(end - p));
	if (!eol || eol[1] != '\n')
		return refuse(req, 400, "bad request line");
	sp1 = memchr(p, ' ', (size_t)(eol - p));
	sp2 = sp1 ? memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1)) : NULL;
	if (!sp1 || !sp2 || (size_t)(eol - sp2 - 1) != 8 || memcmp(sp2 + 1, "HTTP/1.1", 8))
		return refuse(req, 400, "bad request line (HTTP/1.1 only)");
	mlen = (size_t)(sp1 - p);
	if (mlen == 7 && !memcmp(p, "CONNECT", 7))
		return refuse(req, 405, "CONNECT is not accepted");
	for (size_t i = 0; i < ARRAY_SIZE(methods) && !req->method[0]; i++)
		if (strlen(methods[i]) == mlen && !memcmp(p, methods[i], mlen))
			memcpy(req->method, p, mlen);
	if (!req->method[0])
		return refuse(req, 405, "method not accepted");
	if (target_ok(sp1 + 1, (size_t)(sp2 - sp1 - 1), r, req) < 0)
		return -1;
	if (buf_append(out, p, (size_t)(sp2 - p)) < 0 || buf_puts(out, " HTTP/1.1\r\nHost: ") < 0 ||
		buf_puts(out, r->host) < 0)
		goto oom;
	if (r->uport != 443 && buf_printf(out, ":%u", r->uport) < 0)
		goto oom;
	if (buf_puts(out, "\r\n") < 0)
		goto oom;

	for (p = eol + 2; p < end - 2; p = eol + 2) {
		const char *v, *ve;

		eol = memchr(p, '\r', (size_t)(end - p));
		if (!eol || eol[1] != '\n')
			return refuse(req, 400, "bad header line");
		if (*p == ' ' || *p == '\t')
			return refuse(req, 400, "folded header lines are not accepted");
		if (++nhdr > INJ_MAX_HEADERS)
			return refuse(req, 431, "too many header lines");
		size_t nlen;
		int bad = header_split(p, eol, &nlen, &v, &ve);
		if (bad)
			return refuse(req, 400,
				bad == -1	? "bad header line"
				: bad == -2 ? "bad header name"
					    : "bad header value");
		if (nlen == 14 && !strncasecmp(p, "content-length", 14)) {
			unsigned long long x;
			/* Two lengths, or a length beside chunked: the classic smuggling pair. */
			if (have_len || parse_length(v, (size_t)(ve - v), &x) < 0)
				return refuse(req, 400, "bad or repeated Content-Length");
			have_len = 1;
			clen = x;
		} else if (nlen == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
			if (have_te || (size_t)(ve - v) != 7 || strncasecmp(v, "chunked", 7))
				return refuse(req, 501, "only Transfer-Encoding: chunked is accepted");
			have_te = 1;
		} else if (nlen == 10 && !strncasecmp(p, "connection", 10) &&
			has_token(v, (size_t)(ve - v), "close")) {
			req->close = 1;
		}
		if (is_dropped(p, nlen, r))
			continue;
		if (buf_append(out, p, (size_t)(eol - p)) < 0 || buf_puts(out, "\r\n") < 0)
			goto oom;
	}
	if (have_len && have_te)
		return refuse(req, 400, "both Content-Length and Transfer-Encoding");
	/*
	 * A body only where HTTP gives it a meaning: an upstream that ignores a GET's body
	 * would read it as the next request on the kept connection, in front of the next
	 * request's head and its key (a request outside the prefix, with the key).
	 */
	if ((have_te || clen) && strcmp(req->method, "POST") && strcmp(req->method, "PUT") &&
		strcmp(req->method, "PATCH"))
		return refuse(req, 400, "a body is accepted with POST, PUT and PATCH only");
	if (put_key_header(r, key, out) < 0)
		goto oom;
	if (have_te) {
		req->body = INJ_BODY_CHUNKED;
		if (buf_puts(out, "Transfer-Encoding: chunked\r\n") < 0)
			goto oom;
	} else if (have_len) {
		req->body = clen ? INJ_BODY_LENGTH : INJ_BODY_NONE;
		req->clen = clen;
		if (buf_printf(out, "Content-Length: %llu\r\n", clen) < 0)
			goto oom;
	}
	/* HTTP/1.1 keeps the upstream connection open by default: the pool reuses it. */
	if (buf_puts(out, "Accept-Encoding: identity\r\n\r\n") < 0)
		goto oom;
	return 0;
oom:
	/* The partial head holds the key: never leave it behind. */
	if (out->data)
		explicit_bzero(out->data, out->cap);
	out->len = 0;
	return refuse(req, 500, "out of memory");
}

int inj_rewrite(const struct inj_route *r, const char *key, const char *head, size_t n,
	struct buf *out, struct inj_req *req)
{
	if (rewrite(r, key, head, n, out, req) == 0)
		return 0;
	/* A refusal leaves nothing behind: no partial head goes anywhere. */
	if (out->data)
		explicit_bzero(out->data, out->cap);
	out->len = 0;
	return -1;
}

/*
 * Headers of the upstream's answer never passed to the agent: hop-by-hop (each leg has its
 * own connection) and the framing, written again from what was parsed.
 */
static const char *const resp_dropped[] = {"connection", "keep-alive", "proxy-connection", "te",
	"trailer", "upgrade", "transfer-encoding", "content-length"};

int inj_resp_head(const char *head, size_t n, const char *method, int close_client,
	struct inj_resp *resp, struct buf *out)
{
	const char *end = head + n, *p = head, *eol;
	int have_len = 0, chunked = 0, other_te = 0, nhdr = 0, http10;
	unsigned long long clen = 0;
	size_t keep_len = 0;
	const char *keep_cl = NULL;

	memset(resp, 0, sizeof(*resp));
	out->len = 0;
	if (n < 16 || inj_head_end(head, n) != n)
		return -1;
	eol = memchr(p, '\r', (size_t)(end - p));
	/* "HTTP/1.x SSS" then a space or the end of the line. */
	if (!eol || eol[1] != '\n' || eol - p < 12 || memcmp(p, "HTTP/1.", 7) ||
		(p[7] != '0' && p[7] != '1') || p[8] != ' ' || !isdigit((unsigned char)p[9]) ||
		!isdigit((unsigned char)p[10]) || !isdigit((unsigned char)p[11]) ||
		(eol - p > 12 && p[12] != ' '))
		return -1;
	for (const char *c = p; c < eol; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f)
			return -1;
	http10 = p[7] == '0';
	resp->status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	if (resp->status < 100 || resp->status == 101)
		return -1;
	if (buf_append(out, p, (size_t)(eol - p)) < 0 || buf_puts(out, "\r\n") < 0)
		return -1;
	/* An HTTP/1.0 upstream closes unless told otherwise: never kept. */
	resp->upstream_close = http10;
	for (p = eol + 2; p < end - 2; p = eol + 2) {
		const char *v, *ve;
		size_t nlen;
		int drop = 0;

		eol = memchr(p, '\r', (size_t)(end - p));
		if (!eol || eol[1] != '\n' || *p == ' ' || *p == '\t' || ++nhdr > 200)
			return -1;
		if (header_split(p, eol, &nlen, &v, &ve) < 0)
			return -1;
		if (nlen == 14 && !strncasecmp(p, "content-length", 14)) {
			unsigned long long x;
			if (parse_length(v, (size_t)(ve - v), &x) < 0 || (have_len && x != clen))
				return -1;
			have_len = 1;
			clen = x;
			keep_cl = p;
			keep_len = (size_t)(eol - p);
		} else if (nlen == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
			/*
			 * Chunked must be the last coding; anything else is read to the close.
			 * One line only: "chunked" then "gzip" on another line would be taken
			 * for plain chunked text the redactor could read.
			 */
			if (++resp->te_lines > 1)
				return -1;
			if (has_token(v, (size_t)(ve - v), "chunked") && (size_t)(ve - v) >= 7 &&
				!strncasecmp(ve - 7, "chunked", 7))
				chunked = 1;
			else
				other_te = 1;
		} else if (nlen == 10 && !strncasecmp(p, "connection", 10)) {
			if (has_token(v, (size_t)(ve - v), "close"))
				resp->upstream_close = 1;
			else if (http10 && has_token(v, (size_t)(ve - v), "keep-alive"))
				resp->upstream_close = 0;
		}
		for (size_t i = 0; i < ARRAY_SIZE(resp_dropped) && !drop; i++)
			drop = strlen(resp_dropped[i]) == nlen &&
				!strncasecmp(p, resp_dropped[i], nlen);
		if (drop)
			continue;
		if (buf_append(out, p, (size_t)(eol - p)) < 0 || buf_puts(out, "\r\n") < 0)
			return -1;
	}
	if (have_len && (chunked || other_te))
		return -1;
	if (!strcmp(method, "HEAD") || resp->status < 200 || resp->status == 204 ||
		resp->status == 304) {
		/* No body, whatever the head says; its length (of a GET) is passed on as it is. */
		resp->body = INJ_BODY_NONE;
		if (keep_cl &&
			(buf_append(out, keep_cl, keep_len) < 0 || buf_puts(out, "\r\n") < 0))
			return -1;
	} else if (chunked) {
		resp->body = INJ_BODY_CHUNKED;
		if (buf_puts(out, "Transfer-Encoding: chunked\r\n") < 0)
			return -1;
	} else if (have_len && !other_te) {
		resp->body = clen ? INJ_BODY_LENGTH : INJ_BODY_NONE;
		resp->clen = clen;
		if (buf_printf(out, "Content-Length: %llu\r\n", clen) < 0)
			return -1;
	} else {
		/*
		 * Read to the upstream's close, passed on chunked: a read error or a timeout
		 * then ends the agent's connection without the last chunk (an incomplete
		 * answer, not a whole one), and the agent's connection can be kept.
		 */
		resp->body = INJ_BODY_CLOSE;
		resp->upstream_close = 1;
		if (buf_puts(out, "Transfer-Encoding: chunked\r\n") < 0)
			return -1;
	}
	resp->client_close = close_client;
	if (resp->client_close && buf_puts(out, "Connection: close\r\n") < 0)
		return -1;
	return buf_puts(out, "\r\n");
}

int inj_error_answer(int status, const char *why, struct buf *out)
{
	const char *text = status == 400   ? "Bad Request"
			   : status == 403 ? "Forbidden"
			   : status == 405 ? "Method Not Allowed"
			   : status == 408 ? "Request Timeout"
			   : status == 431 ? "Request Header Fields Too Large"
			   : status == 501 ? "Not Implemented"
			   : status == 502 ? "Bad Gateway"
			   : status == 503 ? "Service Unavailable"
			   : status == 504 ? "Gateway Timeout"
					   : "Internal Server Error";

	out->len = 0;
	return buf_printf(out,
		"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
		"Connection: close\r\n\r\nocsb-inject: %s\n",
		status, text, strlen("ocsb-inject: \n") + strlen(why), why);
}

enum { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF };

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

ssize_t inj_chunked_feed(struct inj_chunked *c, const char *in, size_t n, struct buf *out)
{
	size_t i = 0;

	while (i < n && !c->done) {
		char ch = in[i];
		int h;

		switch (c->state) {
		case CH_SIZE:
			h = hexval(ch);
			if (h >= 0) {
				/* 15 hex digits: far beyond any body, and no overflow. */
				if (++c->linelen > 15)
					return -1;
				c->left = c->left * 16 + (unsigned)h;
			} else if (c->linelen && (ch == ';' || ch == ' ' || ch == '\t')) {
				c->state = CH_EXT;
			} else if (c->linelen && ch == '\r') {
				c->state = CH_SIZE_LF;
			} else {
				return -1;
			}
			i++;
			break;
		case CH_EXT:
			/*
			 * Extensions are dropped; bounded like the size line. A tab is blank space
			 * (BWS) or part of a quoted value here, as in a trailer line.
			 */
			if (ch == '\r')
				c->state = CH_SIZE_LF;
			else if ((ch != '\t' && (unsigned char)ch < 0x20) || ++c->linelen > 1024)
				return -1;
			i++;
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				return -1;
			i++;
			c->linelen = 0;
			if (c->left == 0) {
				c->state = CH_TRAILER;
				break;
			}
			if (!c->decode && buf_printf(out, "%llx\r\n", c->left) < 0)
				return -1;
			c->state = CH_DATA;
			break;
		case CH_DATA: {
			size_t take = n - i < c->left ? n - i : (size_t)c->left;
			if (buf_append(out, in + i, take) < 0)
				return -1;
			i += take;
			c->left -= take;
			if (!c->left)
				c->state = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (ch != '\r')
				return -1;
			c->state = CH_DATA_LF;
			i++;
			break;
		case CH_DATA_LF:
			if (ch != '\n' || (!c->decode && buf_puts(out, "\r\n") < 0))
				return -1;
			c->state = CH_SIZE;
			c->linelen = 0;
			i++;
			break;
		case CH_TRAILER:
			/* Trailer fields are dropped (they could carry a credential too). */
			if (ch == '\r') {
				c->state = CH_TRAILER_LF;
			} else if ((ch != '\t' && (unsigned char)ch < 0x20) || ++c->linelen > 8192) {
				return -1;
			}
			i++;
			break;
		case CH_TRAILER_LF:
			if (ch != '\n')
				return -1;
			i++;
			if (c->linelen == 0) {
				if (!c->decode && buf_puts(out, "0\r\n\r\n") < 0)
					return -1;
				c->done = 1;
			} else {
				c->linelen = 0;
				c->state = CH_TRAILER;
			}
			break;
		default:
			return -1;
		}
	}
	return (ssize_t)i;
}
