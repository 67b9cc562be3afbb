/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control protocol (common/ctl.c): the input is taken as a request
 * payload, as a response payload, as text to sanitize into a response, and as the byte stream
 * of a connection fed to ctl_reader_feed in chunks. Besides the sanitizers' findings, the
 * properties the daemon relies on abort() when broken:
 *   - what parses formats back to the very same bytes (one request, one spelling);
 *   - an error leaves the output untouched and its message is one printable line;
 *   - anything run through ctl_response_err/add parses back, as one line per call;
 *   - the reader never holds more than one frame of at most CTL_MAX_FRAME bytes, and ends
 *     every stream with a frame, -EPROTO or -ECONNRESET.
 * Build and run: `make fuzz` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl.h"
#include "util.h"
#include "fuzz_util.h"

static void check_message(const char *err)
{
	CHECK(err[0] != '\0');
	for (const char *p = err; *p; p++)
		CHECK(*p >= 0x20 && *p <= 0x7e);
}

static void check_request(const char *p, size_t n)
{
	struct ctl_request rq, sentinel;
	struct buf b = {0};
	char err[256];

	memset(&rq, 0x5a, sizeof(rq));
	sentinel = rq;
	err[0] = '\0';
	if (ctl_parse_request(p, n, &rq, err, sizeof(err)) < 0) {
		CHECK(memcmp(&rq, &sentinel, sizeof(rq)) == 0);
		check_message(err);
		return;
	}
	CHECK(ctl_verb_name(rq.verb) != NULL);
	CHECK(strlen(rq.arg) <= CTL_MAX_NAME);
	CHECK(rq.count <= CTL_MAX_LOG_LINES);
	CHECK((rq.verb == CTL_SECRET_PUT) == (rq.sealed != NULL));
	CHECK(ctl_format_request(&rq, &b) == 0);
	CHECK(b.len == n && memcmp(b.data, p, n) == 0);
	buf_free(&b);
	ctl_request_free(&rq);
}

static void check_response(const char *p, size_t n)
{
	struct ctl_response r = {.ok = 7}, r2;
	struct buf b = {0};
	char err[256];

	err[0] = '\0';
	if (ctl_parse_response(p, n, &r, err, sizeof(err)) < 0) {
		CHECK(r.ok == 7 && !r.error && !r.keys.v && !r.values.v);
		check_message(err);
		return;
	}
	CHECK(r.ok ? !r.error : r.error && r.error[0]);
	CHECK(r.keys.n == r.values.n);
	if (r.keys.n)
		CHECK(ctl_response_get(&r, r.keys.v[0]) == r.values.v[0]);
	/* Rebuilt with the server's functions, it is the same payload (the builders cut long
	 * ERR messages, which the parser still accepts). */
	if (r.ok || strlen(r.error) <= CTL_MAX_ERROR) {
		CHECK((r.ok ? ctl_response_ok(&b) : ctl_response_err(&b, "%s", r.error)) == 0);
		for (size_t i = 0; i < r.keys.n; i++)
			CHECK(ctl_response_add(&b, r.keys.v[i], "%s", r.values.v[i]) == 0);
		CHECK(b.len == n && memcmp(b.data, p, n) == 0);
		CHECK(ctl_parse_response(b.data, b.len, &r2, err, sizeof(err)) == 0);
		ctl_response_free(&r2);
	}
	buf_free(&b);
	ctl_response_free(&r);
}

/* Whatever a handler puts in a value or an error message, the response stays well-formed. */
static void check_sanitize(const uint8_t *data, size_t size)
{
	struct ctl_response r;
	struct buf b = {0};
	char err[256], *s = malloc(size + 1);
	size_t len;

	CHECK(s != NULL);
	memcpy(s, data, size);
	s[size] = '\0';
	len = strlen(s);

	CHECK(ctl_response_ok(&b) == 0);
	CHECK(ctl_response_add(&b, "value", "%s", s) == 0);
	CHECK(ctl_response_add(&b, "x", "[%s]", s) == 0);
	CHECK(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)) == 0);
	CHECK(r.ok && r.keys.n == 2 && strlen(r.values.v[0]) == len);
	ctl_response_free(&r);

	CHECK(ctl_response_err(&b, "%s", s) == 0);
	CHECK(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)) == 0);
	CHECK(!r.ok && r.keys.n == 0);
	if (len == 0)
		len = strlen("unspecified error");
	else if (len > CTL_MAX_ERROR)
		len = CTL_MAX_ERROR;
	CHECK(strlen(r.error) == len);
	ctl_response_free(&r);
	buf_free(&b);
	free(s);
}

/* Chunk sizes from the input itself, so that libFuzzer can steer the splits too. */
static size_t next_chunk(uint32_t *state)
{
	*state = *state * 1103515245u + 12345u;
	switch ((*state >> 16) % 4) {
	case 0:
		return 1;
	case 1:
		return 1 + (*state >> 8) % 7;
	case 2:
		return 1 + (*state >> 4) % 300;
	default:
		return 4096;
	}
}

static int drain(struct ctl_reader *r, int fd)
{
	int k;

	for (;;) {
		k = ctl_reader_feed(r, fd);
		CHECK(r->hdr_have <= sizeof(r->hdr));
		CHECK(r->need <= CTL_MAX_FRAME && r->have <= r->need);
		if (k != 1)
			return k;
		CHECK(r->buf && r->have == r->need && r->need > 0 && r->buf[r->need] == '\0');
		check_request(r->buf, r->have);
		check_response(r->buf, r->have);
		ctl_reader_reset(r);
	}
}

static void check_reader(const uint8_t *data, size_t size)
{
	struct ctl_reader r = {0};
	uint32_t state = (uint32_t)size;
	size_t off = 0, n;
	int sv[2], k = 0;

	for (size_t i = 0; i < size && i < 8; i++)
		state = state * 31 + data[i];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0);
	while (off < size) {
		n = next_chunk(&state);
		if (n > size - off)
			n = size - off;
		/* Each chunk is read before the next is written: the socket never fills. */
		CHECK(write(sv[1], data + off, n) == (ssize_t)n);
		off += n;
		k = drain(&r, sv[0]);
		if (k < 0)
			break;
		CHECK(k == 0);
	}
	if (k == 0) {
		close(sv[1]);
		sv[1] = -1;
		k = drain(&r, sv[0]);
	}
	CHECK(k == -EPROTO || k == -ECONNRESET);
	if (k == -EPROTO)
		CHECK(r.buf == NULL);
	ctl_reader_reset(&r);
	close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_request((const char *)data, size);
	check_response((const char *)data, size);
	check_sanitize(data, size);
	check_reader(data, size);
	return 0;
}
