/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for what ocsb-agentd (and ocsb-provision) read from the agent's side:
 *   - the output of `ocsb-agentd --mirror-link`, the link maker run as the agent, read by
 *     the supervisor (agentd/mirrorwatch.c) and by ocsb-provision (mirror_agent.c) through
 *     mirror_link_output: the input is the whole output;
 *   - the answer to the readiness probe from OpenCode, which runs as the agent
 *     (opencode_probe_answer, common/opencode.c): the input, received in chunks (sizes
 *     drawn from the input), into a buffer the size of the child's;
 *   - log_vis (common/log.c), which escapes every text of the agent's before agentd logs it
 *     (the link maker's lines and stderr, OpenCode's errors).
 * Properties, abort() when broken:
 *   - every line of the link maker's output reaches the caller once, in order, its text
 *     the line after "! " for a problem line (a bare "!" has none), nothing else;
 *   - the probe's verdict does not depend on how the answer was cut into reads, and "it
 *     serves" only for an answer that starts with an HTTP/1.x 200 status line;
 *   - log_vis's output holds no control, bidi or invisible character and no escape but
 *     \\ \n \r \t \xHH, reads back to the very input, and cut short it is a prefix of the
 *     whole, never half an escape or half a character.
 * Build and run: `make fuzz FUZZ_ONLY=agentd_output` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mirror.h"
#include "opencode.h"
#include "fuzz_util.h"

#define PROBE_BUF 256 /* struct child's probe_buf */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet(argc, argv);
	return 0;
}

/* --- the link maker's output */

struct seen {
	char **text;
	int *problem;
	size_t n;
};

static void on_line(void *arg, const char *text, int problem)
{
	struct seen *s = arg;

	s->text = realloc(s->text, (s->n + 1) * sizeof(*s->text));
	s->problem = realloc(s->problem, (s->n + 1) * sizeof(*s->problem));
	CHECK(s->text && s->problem);
	CHECK(strchr(text, '\n') == NULL);
	s->text[s->n] = strdup(text);
	CHECK(s->text[s->n] != NULL);
	s->problem[s->n++] = problem;
}

static void check_links(const uint8_t *data, size_t size)
{
	/* Exactly the output's bytes and its NUL: a read past them is ASan's to see. */
	char *out = fuzz_strndup((const char *)data, size);
	char *copy = fuzz_strndup((const char *)data, size);
	struct seen s = {0};
	size_t k = 0, len = strlen(copy);

	mirror_link_output(out, on_line, &s);
	/* The oracle: the lines up to the first NUL, the empty ones left out. */
	for (size_t i = 0; i < len;) {
		char *nl = memchr(copy + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (copy + i)) : len - i;
		char *line = copy + i;

		line[l] = '\0';
		if (l) {
			int problem = line[0] == '!';
			const char *want = !problem ? line : l > 1 ? line + 2 : line + 1;

			CHECK(k < s.n);
			CHECK(s.problem[k] == problem && !strcmp(s.text[k], want));
			k++;
		}
		i += l + 1;
	}
	CHECK(k == s.n);
	for (size_t i = 0; i < s.n; i++)
		free(s.text[i]);
	free(s.text);
	free(s.problem);
	free(out);
	free(copy);
}

/* --- the readiness probe */

/* The answer read in chunks as child_probe_event does; the verdict, -1 at its end. */
static int probe(const uint8_t *data, size_t size, uint32_t seed, char *buf)
{
	size_t len = 0, off = 0;

	buf[0] = '\0';
	while (off < size) {
		size_t n;
		int r;

		seed = seed * 1103515245u + 12345u;
		n = 1 + (seed >> 16) % 64;
		if (n > size - off)
			n = size - off;
		if (n > PROBE_BUF - 1 - len)
			n = PROBE_BUF - 1 - len;
		if (n == 0)
			return -1; /* recv of 0 bytes: the buffer is full, judged already */
		memcpy(buf + len, data + off, n);
		len += n;
		off += n;
		buf[len] = '\0';
		r = opencode_probe_answer(buf, len, PROBE_BUF);
		CHECK(r >= -1 && r <= 1);
		if (r)
			return r;
	}
	return -1; /* end of file before a verdict: not ready */
}

static void check_probe(const uint8_t *data, size_t size)
{
	char one[PROBE_BUF], cut[PROBE_BUF];
	int whole = probe(data, size, 0, one), r;
	uint32_t seed = (uint32_t)size;

	for (size_t i = 0; i < size && i < 8; i++)
		seed = seed * 31 + data[i];
	r = probe(data, size, seed, cut);
	CHECK(r == whole);
	if (r == 1)
		CHECK(!strncmp(cut, "HTTP/1.1 200", 12) || !strncmp(cut, "HTTP/1.0 200", 12));
}

/* --- log_vis */

static int hexv(int c)
{
	return isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
}

static void check_vis(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	size_t full = 4 * size + 1, o, k = 0;
	char *out = malloc(full), *back = malloc(size + 1), small[13];
	unsigned char *unit = calloc(full + 1, 1); /* 1 where a unit of out starts (or ends it) */

	CHECK(out && back && unit);
	o = log_vis(s, size, out, full);
	CHECK(o == strlen(out));
	unit[o] = 1;
	/* Safe to print, and read back to the input. */
	for (size_t i = 0; i < o;) {
		unsigned cp;
		size_t l = log_utf8_decode((const unsigned char *)out + i, o - i, &cp);

		unit[i] = 1;
		CHECK(l > 0 && !log_cp_unsafe(cp));
		if (cp != '\\') {
			memcpy(back + k, out + i, l);
			k += l;
			i += l;
			continue;
		}
		CHECK(i + 1 < o && strchr("\\nrtx", out[i + 1]) && out[i + 1]);
		if (out[i + 1] == 'x') {
			CHECK(i + 3 < o && isxdigit((unsigned char)out[i + 2]) &&
				isxdigit((unsigned char)out[i + 3]));
			back[k++] = (char)(hexv(out[i + 2]) << 4 | hexv(out[i + 3]));
			i += 4;
		} else {
			back[k++] = out[i + 1] == 'n' ? '\n'
				: out[i + 1] == 'r'   ? '\r'
				: out[i + 1] == 't'   ? '\t'
						      : '\\';
			i += 2;
		}
	}
	CHECK(k == size && !memcmp(back, s, size));
	/* Cut short: a prefix of the whole, ending between two units. */
	for (size_t n = 1; n <= sizeof(small); n += 3) {
		size_t sl = log_vis(s, size, small, n);

		CHECK(sl < n && sl == strlen(small) && !memcmp(small, out, sl));
		CHECK(unit[sl]);
	}
	free(unit);
	free(out);
	free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_links(data, size);
	check_probe(data, size);
	check_vis(data, size);
	return 0;
}
