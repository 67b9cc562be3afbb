/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"
#include "ctl_int.h"
#include "util.h"

static const struct {
	enum ctl_verb verb;
	const char *name;
} verbs[] = {
	{CTL_STATUS, "STATUS"},
	{CTL_RESTART, "RESTART"},
	{CTL_LOGS, "LOGS"},
	{CTL_WEB, "WEB"},
	{CTL_PING, "PING"},
	{CTL_SECRET_PUT, "SECRET-PUT"},
	{CTL_RELOAD, "RELOAD"},
};

const char *ctl_verb_name(enum ctl_verb verb)
{
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (verbs[i].verb == verb)
			return verbs[i].name;
	return NULL;
}

/*
 * A peer-supplied token quoted in a message: the payload was checked to be printable, but its
 * length is the peer's choice, and our error line goes back to it and into logs.
 */
#define CLIP_MAX 40
static const char *clip(const char *s, size_t n, char out[CLIP_MAX + 4])
{
	if (n <= CLIP_MAX) {
		memcpy(out, s, n);
		out[n] = '\0';
	} else {
		memcpy(out, s, CLIP_MAX);
		memcpy(out + CLIP_MAX, "...", 4);
	}
	return out;
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static int is_upper(int c)
{
	return c >= 'A' && c <= 'Z';
}

static int is_lower(int c)
{
	return c >= 'a' && c <= 'z';
}

static int is_printable(int c)
{
	return c >= 0x20 && c <= 0x7e;
}

/* Shared by requests and responses: the byte-level rules, before any field is looked at. */
static int check_text(const char *p, size_t len, const char *what, char *err, size_t errlen)
{
	if (len == 0)
		return seterr(err, errlen, "empty %s", what);
	if (len > CTL_MAX_FRAME)
		return seterr(err, errlen, "%s too long (%zu bytes, at most %d)", what, len,
			CTL_MAX_FRAME);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];

		if (c != '\n' && !is_printable(c))
			return seterr(err, errlen,
				"invalid byte 0x%02x at offset %zu of the %s (only printable ASCII "
				"and newlines)",
				c, i, what);
	}
	if (p[len - 1] != '\n')
		return seterr(err, errlen, "%s does not end with a newline", what);
	return 0;
}

/* "OCSB/<decimal>": canonical digits only, so that one version has one spelling. */
static int check_version(const char *t, size_t n, const char *what, char *err, size_t errlen)
{
	char q[CLIP_MAX + 4];
	const char *d;
	size_t nd;

	if (n < 5 || memcmp(t, "OCSB/", 5) != 0)
		return seterr(
			err, errlen, "not an ocsb %s (expected 'OCSB/%d ...')", what, CTL_VERSION);
	d = t + 5;
	nd = n - 5;
	if (nd == 0 || nd > 9 || (nd > 1 && d[0] == '0'))
		goto bad;
	for (size_t i = 0; i < nd; i++)
		if (!is_digit(d[i]))
			goto bad;
	if (nd != 1 || d[0] != '0' + CTL_VERSION)
		return seterr(err, errlen, "unsupported protocol version %.*s", (int)nd, d);
	return 0;
bad:
	return seterr(err, errlen, "malformed protocol version '%s'", clip(d, nd, q));
}

/*
 * Project names end up in paths and unit names on the daemon side: no '/', no leading '.'
 * (so neither "." nor ".." nor hidden files), nothing a shell or a config would interpret.
 */
static int check_project(const char *s, size_t n, char *err, size_t errlen)
{
	char q[CLIP_MAX + 4];

	if (n == 0)
		return seterr(err, errlen, "empty project name");
	if (n > CTL_MAX_NAME)
		return seterr(err, errlen, "invalid project name '%s': %zu characters, at most %d",
			clip(s, n, q), n, CTL_MAX_NAME);
	if (s[0] == '.')
		return seterr(err, errlen, "invalid project name '%s': must not start with '.'",
			clip(s, n, q));
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (!(is_upper(c) || is_lower(c) || is_digit(c) || c == '.' || c == '_' ||
			    c == '-'))
			return seterr(err, errlen,
				"invalid project name '%s': character '%c' not allowed (letters, "
				"digits, '.', '_', '-')",
				clip(s, n, q), c);
	}
	return 0;
}

/* Canonical decimal only ("007", "+7" refused): one count, one spelling. */
static int parse_count(const char *s, size_t n, unsigned *ret, char *err, size_t errlen)
{
	char q[CLIP_MAX + 4];
	unsigned v = 0;

	if (n == 0 || n > 5 || s[0] == '0')
		goto bad;
	for (size_t i = 0; i < n; i++) {
		if (!is_digit(s[i]))
			goto bad;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > CTL_MAX_LOG_LINES)
		goto bad;
	*ret = v;
	return 0;
bad:
	return seterr(
		err, errlen, "invalid line count '%s' (1..%d)", clip(s, n, q), CTL_MAX_LOG_LINES);
}

static int b64_value(int c)
{
	if (is_upper(c))
		return c - 'A';
	if (is_lower(c))
		return c - 'a' + 26;
	if (is_digit(c))
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Standard base64 with padding, strictly: non-zero bits after the last byte are refused, as
 * libsodium's decoder (which the secrets code will use) refuses them, so that what passes here
 * also decodes there and one sealed box has exactly one spelling.
 */
static int check_base64(const char *s, size_t n, char *err, size_t errlen)
{
	size_t pad = 0;

	if (n == 0)
		return seterr(err, errlen, "empty sealed value");
	if (n > CTL_MAX_SEALED)
		return seterr(err, errlen, "sealed value too long (%zu characters, at most %d)", n,
			CTL_MAX_SEALED);
	if (n % 4 != 0)
		return seterr(err, errlen,
			"invalid base64 in sealed value: length %zu is not a multiple of 4", n);
	if (s[n - 1] == '=')
		pad = s[n - 2] == '=' ? 2 : 1;
	for (size_t i = 0; i < n - pad; i++)
		if (b64_value((unsigned char)s[i]) < 0)
			return seterr(err, errlen,
				"invalid base64 in sealed value: character '%c' at position %zu",
				s[i], i + 1);
	if ((pad == 1 && (b64_value((unsigned char)s[n - 2]) & 0x3)) ||
		(pad == 2 && (b64_value((unsigned char)s[n - 3]) & 0xf)))
		return seterr(err, errlen, "invalid base64 in sealed value: non-zero padding bits");
	return 0;
}

/*
 * Split a line on single spaces. Returns the number of fields (also those beyond max, which
 * are not stored), or -1 for an empty field: a doubled, leading or trailing space would give
 * two spellings of one request.
 */
static int split_fields(const char *line, size_t n, const char **tok, size_t *toklen, int max)
{
	size_t start = 0;
	int count = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && line[i] != ' ')
			continue;
		if (i == start)
			return -1;
		if (count < max) {
			tok[count] = line + start;
			toklen[count] = i - start;
		}
		count++;
		start = i + 1;
	}
	return count;
}

static int token_is(const char *t, size_t n, const char *s)
{
	return strlen(s) == n && memcmp(t, s, n) == 0;
}

int ctl_parse_request(
	const char *payload, size_t len, struct ctl_request *ret, char *err, size_t errlen)
{
	struct ctl_request rq = {0};
	const char *tok[4], *line, *nl, *name;
	size_t toklen[4], rest;
	char q[CLIP_MAX + 4];
	int ntok, max_args;

	if (check_text(payload, len, "request", err, errlen) < 0)
		return -1;
	/* check_text guarantees a '\n' at the end, so every line below is terminated. */
	nl = memchr(payload, '\n', len);
	if (nl == payload)
		return seterr(err, errlen, "empty request line");
	ntok = split_fields(payload, (size_t)(nl - payload), tok, toklen, 4);
	if (ntok < 0)
		return seterr(err, errlen,
			"malformed request line (fields are separated by single spaces)");
	if (check_version(tok[0], toklen[0], "request", err, errlen) < 0)
		return -1;
	if (ntok < 2)
		return seterr(err, errlen, "missing verb (expected 'OCSB/%d VERB')", CTL_VERSION);
	for (size_t i = 0; i < ARRAY_SIZE(verbs); i++)
		if (token_is(tok[1], toklen[1], verbs[i].name))
			rq.verb = verbs[i].verb;
	if (!rq.verb)
		return seterr(err, errlen,
			"unknown verb '%s' (expected STATUS, RESTART, LOGS, WEB, PING, "
			"SECRET-PUT or RELOAD)",
			clip(tok[1], toklen[1], q));
	name = ctl_verb_name(rq.verb);

	max_args = rq.verb == CTL_RESTART || rq.verb == CTL_LOGS;
	if (ntok - 2 > max_args) {
		if (rq.verb == CTL_RESTART)
			return seterr(
				err, errlen, "RESTART takes at most one argument (a project name)");
		if (rq.verb == CTL_LOGS)
			return seterr(
				err, errlen, "LOGS takes at most one argument (a line count)");
		if (rq.verb == CTL_SECRET_PUT)
			return seterr(err, errlen,
				"SECRET-PUT takes no argument (names are inside the sealed set)");
		return seterr(err, errlen, "%s takes no argument", name);
	}
	if (rq.verb == CTL_RESTART && ntok == 3) {
		if (check_project(tok[2], toklen[2], err, errlen) < 0)
			return -1;
		memcpy(rq.arg, tok[2], toklen[2]);
	} else if (rq.verb == CTL_LOGS && ntok == 3) {
		if (parse_count(tok[2], toklen[2], &rq.count, err, errlen) < 0)
			return -1;
	}

	line = nl + 1;
	rest = len - (size_t)(line - payload);
	if (rq.verb != CTL_SECRET_PUT) {
		if (rest)
			return seterr(err, errlen, "unexpected line 2 (%s takes no body)", name);
		*ret = rq;
		return 0;
	}
	if (!rest)
		return seterr(err, errlen, "SECRET-PUT needs a second line 'sealed BASE64'");
	nl = memchr(line, '\n', rest);
	if ((size_t)(nl - line) < 7 || memcmp(line, "sealed ", 7) != 0)
		return seterr(err, errlen, "line 2 of SECRET-PUT must be 'sealed BASE64'");
	if (check_base64(line + 7, (size_t)(nl - line) - 7, err, errlen) < 0)
		return -1;
	if ((size_t)(nl + 1 - line) != rest)
		return seterr(err, errlen, "unexpected line 3 (SECRET-PUT takes one body line)");
	rq.sealed = strndup(line + 7, (size_t)(nl - line) - 7);
	if (!rq.sealed)
		return seterr(err, errlen, "out of memory");
	*ret = rq;
	return 0;
}

static void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

int ctl_format_request(const struct ctl_request *rq, struct buf *out)
{
	struct ctl_request check;
	const char *name = ctl_verb_name(rq->verb);
	int r;

	if (!name || strnlen(rq->arg, sizeof(rq->arg)) == sizeof(rq->arg))
		return -EINVAL;
	buf_reset(out);
	r = buf_printf(out, "OCSB/%d %s", CTL_VERSION, name);
	if (!r && rq->verb == CTL_RESTART && rq->arg[0])
		r = buf_printf(out, " %s", rq->arg);
	if (!r && rq->verb == CTL_LOGS && rq->count)
		r = buf_printf(out, " %u", rq->count);
	if (!r)
		r = buf_puts(out, "\n");
	if (!r && rq->verb == CTL_SECRET_PUT)
		r = buf_printf(out, "sealed %s\n", rq->sealed ? rq->sealed : "");
	if (r < 0)
		return r;
	/*
	 * The parser is the one definition of a valid request: a client never sends what the
	 * daemon would refuse, and an argument carrying a space or a newline cannot smuggle in
	 * a second field or line.
	 */
	if (ctl_parse_request(out->data, out->len, &check, NULL, 0) < 0) {
		buf_reset(out);
		return -EINVAL;
	}
	ctl_request_free(&check);
	return 0;
}

void ctl_request_free(struct ctl_request *rq)
{
	free(rq->sealed);
	rq->sealed = NULL;
}

static int check_key(const char *s, size_t n)
{
	if (n == 0 || n > CTL_MAX_NAME)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (!(is_lower(c) || is_digit(c) || c == '.' || c == '_' || c == '-'))
			return -1;
	}
	return 0;
}

/* strv_push takes a C string; these are cut out of the payload. */
static int strv_push_n(struct strv *v, const char *s, size_t n)
{
	char *tmp = strndup(s, n);
	int r;

	if (!tmp)
		return -ENOMEM;
	r = strv_push(v, tmp);
	free(tmp);
	return r;
}

int ctl_parse_response(
	const char *payload, size_t len, struct ctl_response *ret, char *err, size_t errlen)
{
	struct ctl_response r = {0};
	const char *line, *nl, *sp, *end = payload + len;
	char q[CLIP_MAX + 4];
	unsigned lineno = 1;
	size_t n;

	if (check_text(payload, len, "response", err, errlen) < 0)
		return -1;
	nl = memchr(payload, '\n', len);
	sp = memchr(payload, ' ', (size_t)(nl - payload));
	if (check_version(payload, (size_t)((sp ? sp : nl) - payload), "response", err, errlen) < 0)
		return -1;
	if (!sp)
		return seterr(err, errlen, "missing status (expected OK or ERR)");
	line = sp + 1;
	n = (size_t)(nl - line);
	if (token_is(line, n, "OK")) {
		r.ok = 1;
	} else if (token_is(line, n, "ERR") || token_is(line, n, "ERR ")) {
		return seterr(err, errlen, "ERR without a message");
	} else if (n > 4 && memcmp(line, "ERR ", 4) == 0) {
		r.error = strndup(line + 4, n - 4);
		if (!r.error)
			goto oom;
	} else if (n > 2 && memcmp(line, "OK", 2) == 0) {
		return seterr(err, errlen, "unexpected text after OK");
	} else {
		return seterr(
			err, errlen, "unknown status '%s' (expected OK or ERR)", clip(line, n, q));
	}

	for (line = nl + 1; line < end; line = nl + 1) {
		lineno++;
		nl = memchr(line, '\n', (size_t)(end - line));
		if (nl == line) {
			seterr(err, errlen, "empty line %u", lineno);
			goto fail;
		}
		sp = memchr(line, ' ', (size_t)(nl - line));
		if (check_key(line, (size_t)((sp ? sp : nl) - line)) < 0) {
			seterr(err, errlen,
				"invalid key '%s' on line %u (expected [a-z0-9._-], at most %d)",
				clip(line, (size_t)((sp ? sp : nl) - line), q), lineno,
				CTL_MAX_NAME);
			goto fail;
		}
		if (!sp) {
			seterr(err, errlen, "line %u has no value (expected 'key value')", lineno);
			goto fail;
		}
		if (strv_push_n(&r.keys, line, (size_t)(sp - line)) < 0 ||
			strv_push_n(&r.values, sp + 1, (size_t)(nl - sp - 1)) < 0)
			goto oom;
	}
	*ret = r;
	return 0;
oom:
	seterr(err, errlen, "out of memory");
fail:
	ctl_response_free(&r);
	return -1;
}

/*
 * Append s to b with anything that could break the line structure or reach a terminal made
 * harmless: whitespace controls become spaces, everything else outside 0x20-0x7e becomes '?'.
 */
static int buf_put_clean(struct buf *b, const char *s, size_t n)
{
	size_t start = b->len;
	int r = buf_append(b, s, n);

	if (r < 0)
		return r;
	for (size_t i = start; i < b->len; i++) {
		unsigned char c = (unsigned char)b->data[i];

		if (c == '\n' || c == '\r' || c == '\t')
			b->data[i] = ' ';
		else if (!is_printable(c))
			b->data[i] = '?';
	}
	return 0;
}

static char *__attribute__((format(printf, 1, 0))) vformat(const char *fmt, va_list ap)
{
	char *s = NULL;

	if (vasprintf(&s, fmt, ap) < 0)
		return NULL;
	return s;
}

int ctl_response_ok(struct buf *out)
{
	buf_reset(out);
	return buf_printf(out, "OCSB/%d OK\n", CTL_VERSION);
}

int ctl_response_err(struct buf *out, const char *fmt, ...)
{
	va_list ap;
	char *msg;
	size_t n;
	int r;

	va_start(ap, fmt);
	msg = vformat(fmt, ap);
	va_end(ap);
	buf_reset(out);
	if (!msg)
		return -ENOMEM;
	n = strlen(msg);
	if (n > CTL_MAX_ERROR)
		n = CTL_MAX_ERROR;
	r = buf_printf(out, "OCSB/%d ERR ", CTL_VERSION);
	if (!r)
		r = n ? buf_put_clean(out, msg, n) : buf_puts(out, "unspecified error");
	if (!r)
		r = buf_puts(out, "\n");
	free(msg);
	if (r < 0)
		buf_reset(out);
	return r;
}

int ctl_response_add(struct buf *out, const char *key, const char *fmt, ...)
{
	size_t klen = strlen(key), vlen, old = out->len;
	va_list ap;
	char *val;
	int r;

	if (check_key(key, klen) < 0 || out->len < 7 || memcmp(out->data, "OCSB/", 5) != 0)
		return -EINVAL;
	va_start(ap, fmt);
	val = vformat(fmt, ap);
	va_end(ap);
	if (!val)
		return -ENOMEM;
	vlen = strlen(val);
	if (vlen > CTL_MAX_FRAME || out->len + klen + vlen + 2 > CTL_MAX_FRAME) {
		free(val);
		return -EMSGSIZE;
	}
	r = buf_append(out, key, klen);
	if (!r)
		r = buf_puts(out, " ");
	if (!r)
		r = buf_put_clean(out, val, vlen);
	if (!r)
		r = buf_puts(out, "\n");
	free(val);
	if (r < 0) {
		out->len = old;
		out->data[old] = '\0';
	}
	return r;
}

const char *ctl_response_get(const struct ctl_response *r, const char *key)
{
	for (size_t i = 0; i < r->keys.n; i++)
		if (strcmp(r->keys.v[i], key) == 0)
			return r->values.v[i];
	return NULL;
}

void ctl_response_free(struct ctl_response *r)
{
	free(r->error);
	r->error = NULL;
	strv_free(&r->keys);
	strv_free(&r->values);
	r->ok = 0;
}

/*
 * MSG_DONTWAIT so that a descriptor someone forgot to make non-blocking cannot stall the
 * daemon's loop; read() only for what is not a socket (pipes, in tests and the fuzzer).
 */
static ssize_t read_some(int fd, void *p, size_t n)
{
	for (;;) {
		ssize_t k = recv(fd, p, n, MSG_DONTWAIT);

		if (k < 0 && errno == ENOTSOCK)
			k = read(fd, p, n);
		if (k >= 0)
			return k;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(unsigned char *p, size_t n)
{
	p[0] = (unsigned char)(n >> 24);
	p[1] = (unsigned char)(n >> 16);
	p[2] = (unsigned char)(n >> 8);
	p[3] = (unsigned char)n;
}

int ctl_reader_feed(struct ctl_reader *r, int fd)
{
	ssize_t k;

	for (;;) {
		if (r->buf && r->have == r->need)
			return 1;
		if (r->hdr_have < sizeof(r->hdr)) {
			k = read_some(fd, r->hdr + r->hdr_have, sizeof(r->hdr) - r->hdr_have);
			if (k <= 0)
				return k == 0 ? -ECONNRESET : k == -EAGAIN ? 0 : (int)k;
			r->hdr_have += (size_t)k;
			continue;
		}
		if (!r->buf) {
			uint32_t n = be32(r->hdr);

			/* Checked before allocating: the peer chooses this number. */
			if (n == 0 || n > CTL_MAX_FRAME)
				return -EPROTO;
			r->buf = malloc((size_t)n + 1);
			if (!r->buf)
				return -ENOMEM;
			r->need = n;
			r->have = 0;
		}
		/* Never past this frame: a pipelined next one stays queued in the socket. */
		k = read_some(fd, r->buf + r->have, r->need - r->have);
		if (k <= 0)
			return k == 0 ? -ECONNRESET : k == -EAGAIN ? 0 : (int)k;
		r->have += (size_t)k;
		if (r->have == r->need)
			r->buf[r->need] = '\0';
	}
}

void ctl_reader_reset(struct ctl_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

int ctl_writer_frame(struct ctl_writer *w, const void *payload, size_t len)
{
	char *p;

	if (len == 0 || len > CTL_MAX_FRAME)
		return -EMSGSIZE;
	if (w->buf)
		return -EBUSY;
	p = malloc(len + 4);
	if (!p)
		return -ENOMEM;
	put_be32((unsigned char *)p, len);
	memcpy(p + 4, payload, len);
	w->buf = p;
	w->len = len + 4;
	w->off = 0;
	return 0;
}

int ctl_writer_flush(struct ctl_writer *w, int fd)
{
	while (w->off < w->len) {
		ssize_t k = send(fd, w->buf + w->off, w->len - w->off, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (k < 0 && errno == ENOTSOCK)
			k = write(fd, w->buf + w->off, w->len - w->off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		if (k == 0)
			return -EPIPE;
		w->off += (size_t)k;
	}
	return 1;
}

void ctl_writer_reset(struct ctl_writer *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

static int send_until(int fd, const void *payload, size_t len, long long deadline)
{
	unsigned char hdr[4];
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	ssize_t k;
	int r;

	if (len == 0 || len > CTL_MAX_FRAME)
		return -EMSGSIZE;
	put_be32(hdr, len);
	while (mh.msg_iovlen) {
		/* MSG_NOSIGNAL: a daemon that closed on us is an error to report, not a SIGPIPE. */
		k = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			r = ctl_wait_fd(fd, POLLOUT, deadline);
			if (r < 0)
				return r;
			continue;
		}
		while (mh.msg_iovlen && (size_t)k >= mh.msg_iov[0].iov_len) {
			k -= (ssize_t)mh.msg_iov[0].iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen) {
			mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + k;
			mh.msg_iov[0].iov_len -= (size_t)k;
		}
	}
	return 0;
}

static int recv_exact(int fd, void *p, size_t n, long long deadline)
{
	size_t have = 0;
	ssize_t k;
	int r;

	while (have < n) {
		k = read_some(fd, (char *)p + have, n - have);
		if (k == 0)
			return -ECONNRESET;
		if (k == -EAGAIN) {
			r = ctl_wait_fd(fd, POLLIN, deadline);
			if (r < 0)
				return r;
			continue;
		}
		if (k < 0)
			return (int)k;
		have += (size_t)k;
	}
	return 0;
}

static int recv_until(int fd, char **ret, size_t *ret_len, long long deadline)
{
	unsigned char hdr[4];
	uint32_t n;
	char *p;
	int r;

	r = recv_exact(fd, hdr, sizeof(hdr), deadline);
	if (r < 0)
		return r;
	n = be32(hdr);
	if (n == 0 || n > CTL_MAX_FRAME)
		return -EPROTO;
	p = malloc((size_t)n + 1);
	if (!p)
		return -ENOMEM;
	r = recv_exact(fd, p, n, deadline);
	if (r < 0) {
		free(p);
		return r;
	}
	p[n] = '\0';
	*ret = p;
	*ret_len = n;
	return 0;
}

int ctl_send_frame(int fd, const void *payload, size_t len, int timeout_ms)
{
	return send_until(fd, payload, len, ctl_deadline_in(timeout_ms));
}

int ctl_recv_frame(int fd, char **ret, size_t *ret_len, int timeout_ms)
{
	return recv_until(fd, ret, ret_len, ctl_deadline_in(timeout_ms));
}

int ctl_call(const char *path, const struct ctl_request *rq, struct ctl_response *ret,
	int timeout_ms, char *err, size_t errlen)
{
	long long deadline = ctl_deadline_in(timeout_ms);
	struct buf req = {0};
	char *answer = NULL, perr[256];
	size_t alen = 0;
	int fd = -1, r, sr;

	r = ctl_format_request(rq, &req);
	if (r < 0) {
		seterr(err, errlen, "invalid %s request: %s",
			ctl_verb_name(rq->verb) ? ctl_verb_name(rq->verb) : "(unknown)",
			strerror(-r));
		goto out;
	}
	fd = ctl_connect_until(path, deadline);
	if (fd < 0) {
		r = fd;
		if (r == -ETIMEDOUT)
			seterr(err, errlen,
				"ocsb-agentd at %s is not accepting connections (timed out after "
				"%d ms)",
				path, timeout_ms);
		else if (r == -EACCES || r == -EPERM)
			seterr(err, errlen,
				"cannot reach ocsb-agentd at %s: %s (only root and the owner may "
				"use it)",
				path, strerror(-r));
		else
			seterr(err, errlen,
				"cannot reach ocsb-agentd at %s: %s (is it running? %s)", path,
				strerror(-r), "sudo ocsb-warden --foreground");
		goto out;
	}
	sr = send_until(fd, req.data, req.len, deadline);
	if (sr == -ETIMEDOUT) {
		r = sr;
		seterr(err, errlen, "ocsb-agentd at %s did not take the request within %d ms", path,
			timeout_ms);
		goto out;
	}
	/*
	 * After a failed send, still read: a daemon that refuses a peer answers with an ERR and
	 * closes, possibly before our request is out, and that message is the useful one.
	 */
	r = recv_until(fd, &answer, &alen, deadline);
	if (r < 0 && sr < 0 && sr != -EPIPE && sr != -ECONNRESET) {
		r = sr;
		seterr(err, errlen, "sending to ocsb-agentd at %s: %s", path, strerror(-r));
		goto out;
	}
	if (r == -ETIMEDOUT) {
		seterr(err, errlen, "ocsb-agentd at %s did not answer within %d ms", path,
			timeout_ms);
		goto out;
	}
	if (r == -ECONNRESET) {
		seterr(err, errlen, "ocsb-agentd at %s closed the connection without answering",
			path);
		goto out;
	}
	if (r == -EPROTO) {
		seterr(err, errlen, "bad answer from ocsb-agentd at %s: invalid frame length",
			path);
		goto out;
	}
	if (r < 0) {
		seterr(err, errlen, "reading from ocsb-agentd at %s: %s", path, strerror(-r));
		goto out;
	}
	if (ctl_parse_response(answer, alen, ret, perr, sizeof(perr)) < 0) {
		r = -EPROTO;
		seterr(err, errlen, "bad answer from ocsb-agentd at %s: %s", path, perr);
		goto out;
	}
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	free(answer);
	buf_free(&req);
	return r;
}

int ctl_peer(int fd, uid_t *uid, gid_t *gid, pid_t *pid)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	if (len != sizeof(uc))
		return -EPROTO;
	if (uid)
		*uid = uc.uid;
	if (gid)
		*gid = uc.gid;
	if (pid)
		*pid = uc.pid;
	return 0;
}
