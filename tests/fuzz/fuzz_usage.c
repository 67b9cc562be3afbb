/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the usage ocsb-inject reads from the upstream's answers
 * (inject/conf.c: inj_usage_feed, the status and token counts) and for the usage file
 * agentd sums it into and `ocsb usage` reads (inj_usage_line, inj_usage_add,
 * inj_usage_render, inj_usage_parse). The input is an answer: its head (up to the blank
 * line, fed in one piece as the worker does) and its body, fed in reads whose sizes are
 * drawn from the input. Besides the sanitizers' findings, abort() when:
 *   - the counts depend on how the body was cut into reads, or a token count differs from a
 *     plain reading of the whole answer: the number after the last "input_tokens"/
 *     "prompt_tokens"/"promptTokenCount" (and the output names) in the answer whose digits
 *     end before the answer does; unless a field and its number take more than the 64
 *     bytes the scan keeps between reads (long runs of blanks or leading zeros: a known
 *     limit, they may be missed);
 *   - for a head inj_resp_head takes (the only kind the worker feeds), the status differs
 *     from the one it reads, or the answer's usage line is not summed by inj_usage_add into
 *     the row it says;
 *   - the input taken as a usage file parses, but its rows rendered do not parse back to the
 *     same rows, rendered the same.
 * Build and run: `make fuzz FUZZ_ONLY=usage` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"
#include "fuzz_util.h"

/* What the scan keeps of the previous read (inj_usage.tail). */
#define TAIL 64

static const char *const in_names[] = {"input_tokens", "prompt_tokens", "promptTokenCount"};
static const char *const out_names[] = {
	"output_tokens", "completion_tokens", "candidatesTokenCount"};

/*
 * The plain reading: of every "NAME" followed by blanks or colons and digits (at most 13
 * read), the last one in the answer whose digits end before the answer's end. *ret_long
 * is set when such a field spans more than the scan keeps between reads.
 */
static long long reference(const char *s, size_t len, const char *const names[3], int *ret_long)
{
	long long v = -1;

	for (size_t i = 0; i < len; i++) {
		for (size_t k = 0; k < 3; k++) {
			size_t nl = strlen(names[k]), j = i + nl + 2;
			long long x = 0;

			if (j >= len || s[i] != '"' || memcmp(s + i + 1, names[k], nl) ||
				s[i + nl + 1] != '"')
				continue;
			while (j < len && (s[j] == ' ' || s[j] == ':'))
				j++;
			if (j >= len || s[j] < '0' || s[j] > '9')
				continue;
			while (j < len && s[j] >= '0' && s[j] <= '9' && x < 1000000000000LL)
				x = x * 10 + (s[j++] - '0');
			if (j - i + 1 > TAIL)
				*ret_long = 1;
			if (j < len)
				v = x;
		}
	}
	return v;
}

static uint32_t rnd(uint32_t *s)
{
	*s = *s * 1103515245u + 12345u;
	return *s >> 8;
}

static void feed(struct inj_usage *u, const char *head, size_t nh, const char *body, size_t nb,
	uint32_t seed, int whole)
{
	size_t off = 0;

	inj_usage_init(u);
	if (nh)
		inj_usage_feed(u, head, nh);
	while (off < nb) {
		uint32_t v = rnd(&seed);
		size_t k = whole     ? nb
			: v % 4 == 0 ? 1
			: v % 4 == 1 ? 1 + (v >> 4) % 80
			: v % 4 == 2 ? 1 + (v >> 4) % 5000
				     : 16384;
		if (k > nb - off)
			k = nb - off;
		inj_usage_feed(u, body + off, k);
		off += k;
	}
}

static int rows_equal(const struct inj_usage_row *a, const struct inj_usage_row *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(a[i].route, b[i].route) || strcmp(a[i].day, b[i].day) ||
			a[i].n != b[i].n || a[i].req != b[i].req || a[i].resp != b[i].resp ||
			a[i].in != b[i].in || a[i].out != b[i].out ||
			memcmp(a[i].st, b[i].st, sizeof(a[i].st)) || a[i].refused != b[i].refused)
			return 0;
	return 1;
}

/* The usage line of this answer, summed as agentd sums it. */
static void check_line(const struct inj_usage *u, uint32_t seed)
{
	struct inj_usage_row rows[2];
	char line[256];
	size_t n = 0;
	/* Days from 1970 to 2255: any day the file may name. */
	time_t when = (time_t)(seed % 9000000u) * 1000;
	int k = inj_usage_line("FUZZ_API_KEY", when, u, line, sizeof(line));

	CHECK(k > 0 && (size_t)k < sizeof(line) && !strncmp(line, "usage\t", 6));
	CHECK(line[k - 1] == '\n');
	line[k - 1] = '\0';
	CHECK(inj_usage_add(rows, &n, 2, line + 6) == 0 && n == 1);
	CHECK(!strcmp(rows[0].route, "FUZZ_API_KEY") && strlen(rows[0].day) == 10);
	CHECK(rows[0].n == 1 && rows[0].req == u->req_bytes && rows[0].resp == u->resp_bytes);
	CHECK(rows[0].in == (unsigned long long)(u->in_tokens > 0 ? u->in_tokens : 0));
	CHECK(rows[0].out == (unsigned long long)(u->out_tokens > 0 ? u->out_tokens : 0));
	CHECK(rows[0].st[u->status >= 200 && u->status < 600 ? u->status / 100 - 2 : 4] == 1);
}

/* The input as a usage file: what parses renders to text that parses to the same rows. */
static void check_file(const uint8_t *data, size_t size)
{
	static struct inj_usage_row rows[INJ_USAGE_MAX_ROWS], back[INJ_USAGE_MAX_ROWS];
	struct buf b = {0}, b2 = {0};
	char *text = malloc(size + 1);
	size_t n = 0, m = 0;

	CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	if (inj_usage_parse(text, rows, &n, INJ_USAGE_MAX_ROWS) == 0) {
		CHECK(n <= INJ_USAGE_MAX_ROWS);
		CHECK(inj_usage_render(rows, n, &b) == 0);
		CHECK(b.data || n == 0);
		CHECK(inj_usage_parse(b.data ? b.data : "", back, &m, INJ_USAGE_MAX_ROWS) == 0);
		CHECK(m == n && rows_equal(rows, back, n));
		CHECK(inj_usage_render(back, m, &b2) == 0);
		CHECK(b2.len == b.len && (b.len == 0 || !memcmp(b.data, b2.data, b.len)));
	}
	buf_free(&b);
	buf_free(&b2);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *body;
	struct inj_usage whole, split;
	struct inj_resp resp;
	struct buf out = {0};
	size_t nh, nb;
	uint32_t seed = (uint32_t)size;
	int longf = 0;
	long long in, outk;

	for (size_t i = 0; i < size && i < 4; i++)
		seed = seed * 31 + data[i];
	nh = inj_head_end(p, size);
	body = p + nh;
	nb = size - nh;

	feed(&whole, p, nh, body, nb, seed, 1);
	feed(&split, p, nh, body, nb, seed, 0);
	CHECK(whole.resp_bytes == size && split.resp_bytes == size);

	/* (A field longer than what is kept between reads may be missed: a known limit.) */
	in = reference(p, size, in_names, &longf);
	outk = reference(p, size, out_names, &longf);
	if (!longf) {
		CHECK(whole.in_tokens == split.in_tokens && whole.out_tokens == split.out_tokens);
		CHECK(whole.in_tokens == in && whole.out_tokens == outk);
	}

	/*
	 * The worker feeds the head inj_resp_head took, in one piece: both read the same
	 * status, whatever the reads after it. (A head it refuses is never fed.)
	 */
	if (nh && inj_resp_head(p, nh, "POST", 0, &resp, &out) == 0) {
		CHECK(whole.status == resp.status && split.status == resp.status);
		split.req_bytes = seed;
		check_line(&split, seed);
	}
	buf_free(&out);
	check_file(data, size);
	return 0;
}
