/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the key's redaction in relayed answers (inject/redact.c). The
 * upstream writes every byte of an answer, and may echo the key in it; the agent must get
 * none of its forms. The input gives the key, a form of it to splice into the answer (so
 * that forms, their prefixes and overlaps are common), and where the answer is cut in two
 * feeds. Besides the sanitizers' findings, abort() when:
 *   - after feed + feed + flush the output does not have the answer's length, or holds a
 *     form of the key (a key holds no '*': stars cannot make a form);
 *   - it differs from the naive search (every form masked at every position);
 *   - the bytes held after a feed are not the longest end of what was fed that starts a
 *     form (more delays the answer, less lets a form through);
 *   - inj_redact_all on the same answer does not give the same bytes and count.
 * Build and run: `make fuzz-redact` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../inject/inject.h"
#include "fuzz_util.h"

/* Input: key length, cut (2 bytes), splice (form, position), the key, the answer. */
#define HDR 5

static char *naive_mask(const struct inj_redact *r, const char *in, size_t n)
{
	char *m = malloc(n + 1);

	CHECK(m != NULL);
	memcpy(m, in, n);
	for (size_t i = 0; i < r->npat; i++)
		for (size_t at = 0; at + r->plen[i] <= n; at++)
			if (memcmp(in + at, r->pat[i], r->plen[i]) == 0)
				memset(m + at, '*', r->plen[i]);
	return m;
}

/* The held bytes: the end of what was fed, its longest suffix that starts a form. */
static void check_hold(const struct inj_redact *r, const char *fed, size_t n)
{
	size_t best = 0;

	for (size_t i = 0; i < r->npat; i++)
		for (size_t l = r->plen[i] - 1; l > best; l--)
			if (l <= n && memcmp(fed + n - l, r->pat[i], l) == 0) {
				best = l;
				break;
			}
	CHECK(r->nhold == best);
	CHECK(best == 0 || memcmp(r->hold, fed + n - best, best) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct inj_redact r;
	struct buf out = {0};
	char key[64], *text, *want, *copy;
	size_t klen, n, cut, hits_all;
	unsigned long long hits_stream;

	if (size < HDR)
		return 0;
	klen = data[0] % 41;
	if (size < HDR + klen)
		return 0;
	for (size_t i = 0; i < klen; i++)
		key[i] = data[HDR + i] == '*' ? '+' : (char)data[HDR + i];
	CHECK(inj_redact_init(&r, key, klen) == 0);
	CHECK(klen >= INJ_REDACT_MIN || r.npat == 0);

	/* The answer, with a form (or a form but its last byte) spliced in when asked. */
	n = size - HDR - klen;
	text = malloc(n + 256);
	CHECK(text != NULL);
	memcpy(text, data + HDR + klen, n);
	if ((data[3] & 0x80) && r.npat) {
		size_t f = data[3] % r.npat, at = n ? data[4] % (n + 1) : 0;
		size_t len = r.plen[f] - ((data[3] & 0x40) ? 1 : 0);

		if (len <= 256) {
			memmove(text + at + len, text + at, n - at);
			memcpy(text + at, r.pat[f], len);
			n += len;
		}
	}
	cut = n ? ((size_t)data[1] | (size_t)data[2] << 8) % (n + 1) : 0;

	CHECK(inj_redact_feed(&r, text, cut, &out) == 0);
	check_hold(&r, text, cut);
	CHECK(out.len + r.nhold == cut);
	CHECK(inj_redact_feed(&r, text + cut, n - cut, &out) == 0);
	check_hold(&r, text, n);
	CHECK(out.len + r.nhold == n);
	CHECK(inj_redact_flush(&r, &out) == 0);
	CHECK(r.nhold == 0);
	CHECK(out.len == n);
	want = naive_mask(&r, text, n);
	if (n) { /* else out.data may be NULL */
		for (size_t i = 0; i < r.npat; i++)
			CHECK(!memmem(out.data, out.len, r.pat[i], r.plen[i]));
		CHECK(memcmp(out.data, want, n) == 0);
	}
	hits_stream = r.hits;

	/* The whole answer at once, in place: the same bytes, as many forms. */
	copy = malloc(n + 1);
	CHECK(copy != NULL);
	memcpy(copy, text, n);
	hits_all = inj_redact_all(&r, copy, n);
	CHECK(memcmp(copy, want, n) == 0);
	CHECK(hits_all == hits_stream);
	CHECK(r.hits == 2 * hits_stream);

	free(copy);
	free(want);
	free(text);
	buf_free(&out);
	inj_redact_free(&r);
	return 0;
}
