/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the chunked body decoder of ocsb-inject (inj_chunked_feed,
 * inject/head.c): the agent's request bodies go through it re-encoded (to the upstream),
 * the upstream's answers decoded (to be masked and counted). The input is taken twice:
 *   1. as a chunked stream, fed whole and fed in pieces (sizes drawn from the input), in
 *      both modes;
 *   2. as a body and a way to chunk it (sizes, extensions, upper case or zero-padded sizes,
 *      trailer lines), encoded here and followed by bytes of the next request.
 * Besides the sanitizers' findings, abort() when:
 *   - a feed consumes more than it was given, or anything after the last chunk;
 *   - the outcome (malformed, complete after N bytes, incomplete) or the output depends on
 *     how the stream was cut into reads;
 *   - the re-encoded stream of a complete body is not itself complete, consumed whole, with
 *     the same data once decoded, and re-encoded to the very same bytes;
 *   - a well-formed encoding is refused, or decodes to other data, or its last byte is not
 *     where the decoder stops.
 * Build and run: `make fuzz FUZZ_ONLY=chunked` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"
#include "fuzz_util.h"

struct outcome {
	int bad; /* a feed returned -1 */
	int done;
	size_t used; /* bytes consumed in all */
	struct buf out;
};

/* Equal byte strings (memcmp must not see the NULL of an empty buf). */
static int eq(const char *a, size_t an, const char *b, size_t bn)
{
	return an == bn && (an == 0 || !memcmp(a, b, an));
}

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

/* Sizes of the reads: one byte, a few, a few hundred, everything left. */
static size_t piece(uint32_t *s)
{
	uint32_t v = rnd(s);

	switch (v % 4) {
	case 0:
		return 1;
	case 1:
		return 1 + (v >> 4) % 7;
	case 2:
		return 1 + (v >> 4) % 300;
	default:
		return SIZE_MAX;
	}
}

/* Feeds p as the worker does: read after read, each read's bytes until used up or done. */
static void run(const char *p, size_t n, int decode, uint32_t seed, int whole, struct outcome *o)
{
	struct inj_chunked c = {.decode = decode};
	size_t off = 0;

	memset(o, 0, sizeof(*o));
	while (off < n && !c.done) {
		size_t k = whole ? n - off : piece(&seed);
		ssize_t used;

		if (k > n - off)
			k = n - off;
		used = inj_chunked_feed(&c, p + off, k, &o->out);
		if (used < 0) {
			o->bad = 1;
			break;
		}
		CHECK((size_t)used <= k);
		/* A read is consumed whole unless the body ended in it. */
		CHECK(c.done || (size_t)used == k);
		off += (size_t)used;
	}
	o->used = off;
	o->done = c.done;
	if (c.done) {
		/* After the last chunk nothing more is taken. */
		size_t before = o->out.len;
		CHECK(inj_chunked_feed(&c, "0\r\n\r\n", 5, &o->out) == 0 && o->out.len == before);
	}
}

static void same(const struct outcome *a, const struct outcome *b)
{
	CHECK(a->bad == b->bad);
	if (a->bad)
		return;
	CHECK(a->done == b->done && a->used == b->used);
	CHECK(eq(a->out.data, a->out.len, b->out.data, b->out.len));
}

static void check_stream(const char *p, size_t n, uint32_t seed)
{
	struct outcome dw, ds, ew, es, d2, e2;

	run(p, n, 1, 0, 1, &dw);
	run(p, n, 1, seed, 0, &ds);
	run(p, n, 0, 0, 1, &ew);
	run(p, n, 0, seed ^ 0x5a5a5a5a, 0, &es);
	same(&dw, &ds);
	same(&ew, &es);
	/* Both modes read the same framing. */
	CHECK(dw.bad == ew.bad);
	if (!dw.bad)
		CHECK(dw.done == ew.done && dw.used == ew.used);
	if (!dw.bad && dw.done) {
		/* The re-encoding the upstream gets: complete, canonical, the same data. */
		run(ew.out.data, ew.out.len, 1, seed, 0, &d2);
		CHECK(!d2.bad && d2.done && d2.used == ew.out.len);
		CHECK(eq(d2.out.data, d2.out.len, dw.out.data, dw.out.len));
		run(ew.out.data, ew.out.len, 0, seed, 0, &e2);
		CHECK(!e2.bad && e2.done && e2.used == ew.out.len);
		CHECK(eq(e2.out.data, e2.out.len, ew.out.data, ew.out.len));
		buf_free(&d2.out);
		buf_free(&e2.out);
	}
	buf_free(&dw.out);
	buf_free(&ds.out);
	buf_free(&ew.out);
	buf_free(&es.out);
}

/* body encoded in chunks of sizes drawn from seed, in the forms a sender may use. */
static void check_encoded(const char *body, size_t n, uint32_t seed)
{
	static const char *const next = "POST /v1/messages HTTP/1.1\r\n\r\n";
	struct buf enc = {0}, canon = {0};
	struct outcome d, e;
	size_t off = 0;

	while (off < n) {
		uint32_t v = rnd(&seed);
		size_t k = 1 + v % (n - off < 600 ? n - off : 600);

		switch ((v >> 12) % 4) {
		case 0:
			CHECK(buf_printf(&enc, "%zx\r\n", k) == 0);
			break;
		case 1:
			CHECK(buf_printf(&enc, "%zX;name=\"v a\"\r\n", k) == 0);
			break;
		case 2:
			CHECK(buf_printf(&enc, "%06zx \t;x\r\n", k) == 0);
			break;
		default:
			CHECK(buf_printf(&enc, "%015zx\r\n", k) == 0);
			break;
		}
		CHECK(buf_append(&enc, body + off, k) == 0 && buf_puts(&enc, "\r\n") == 0);
		CHECK(buf_printf(&canon, "%zx\r\n", k) == 0);
		CHECK(buf_append(&canon, body + off, k) == 0 && buf_puts(&canon, "\r\n") == 0);
		off += k;
	}
	switch (rnd(&seed) % 3) {
	case 0:
		CHECK(buf_puts(&enc, "0\r\n\r\n") == 0);
		break;
	case 1:
		CHECK(buf_puts(&enc, "000;last\r\nX-Checksum: abc\r\nX-Other:\t1\r\n\r\n") == 0);
		break;
	default:
		CHECK(buf_puts(&enc, "0\r\nTrailer-Key: sk-fuzz-not-passed\r\n\r\n") == 0);
		break;
	}
	CHECK(buf_puts(&canon, "0\r\n\r\n") == 0);
	off = enc.len;
	CHECK(buf_puts(&enc, next) == 0);

	run(enc.data, enc.len, 1, seed, 0, &d);
	CHECK(!d.bad && d.done && d.used == off);
	CHECK(eq(d.out.data, d.out.len, body, n));
	run(enc.data, enc.len, 0, seed, 0, &e);
	CHECK(!e.bad && e.done && e.used == off);
	CHECK(eq(e.out.data, e.out.len, canon.data, canon.len));
	buf_free(&d.out);
	buf_free(&e.out);
	buf_free(&enc);
	buf_free(&canon);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t seed = (uint32_t)size;

	for (size_t i = 0; i < size && i < 4; i++)
		seed = seed * 31 + data[i];
	check_stream((const char *)data, size, seed);
	check_encoded((const char *)data, size, seed);
	return 0;
}
