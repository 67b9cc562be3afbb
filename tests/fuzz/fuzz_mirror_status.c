/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the mirror's status file (mirror/mirror.c): the manifest the
 * writer (the account ocsb-agentd) leaves in <varlib>/ocsb/mirror/<agent>.status, read
 * back by the owner's reader (mirror_load, to skip unchanged files) and by `ocsb mirror
 * status` (text or --json). The input is the file's text (mirror_status_parse).
 * Properties, abort() when broken:
 *   - a file that parses is rendered again (mirror_render_status) into one that parses to
 *     the same entries (path, kind, state, mode, size, inode, times, detail), ends with
 *     its last line (complete), and renders to the same text again (times aside);
 *   - no two entries have one path, and the manifest's look-up finds each;
 *   - `ocsb mirror status --json` prints one valid JSON value, in valid UTF-8, whatever
 *     the file holds; the text form has no control character but its line feeds.
 * Build and run: `make fuzz FUZZ_ONLY=mirror_status` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mirror_int.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet(argc, argv);
	return 0;
}

/* --- a JSON checker: RFC 8259's grammar, nothing more */

struct js {
	const char *p, *end;
	int depth;
};

static void js_ws(struct js *j)
{
	while (j->p < j->end && strchr(" \t\r\n", *j->p) && *j->p)
		j->p++;
}

static int js_lit(struct js *j, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(j->end - j->p) < n || memcmp(j->p, w, n))
		return 0;
	j->p += n;
	return 1;
}

static int js_string(struct js *j)
{
	if (j->p >= j->end || *j->p != '"')
		return 0;
	for (j->p++; j->p < j->end;) {
		unsigned char c = (unsigned char)*j->p++;

		if (c == '"')
			return 1;
		if (c < 0x20)
			return 0;
		if (c != '\\')
			continue;
		if (j->p >= j->end)
			return 0;
		c = (unsigned char)*j->p++;
		if (c == 'u') {
			for (int i = 0; i < 4; i++, j->p++)
				if (j->p >= j->end || !strchr("0123456789abcdefABCDEF", *j->p) ||
					!*j->p)
					return 0;
		} else if (!strchr("\"\\/bfnrt", c) || !c) {
			return 0;
		}
	}
	return 0;
}

static int js_digits(struct js *j)
{
	const char *s = j->p;

	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s;
}

static int js_value(struct js *j)
{
	int ok = 0;

	if (++j->depth > 64)
		return 0;
	js_ws(j);
	if (j->p >= j->end)
		return 0;
	if (*j->p == '{' || *j->p == '[') {
		char close = *j->p == '{' ? '}' : ']';
		int obj = close == '}';

		j->p++;
		js_ws(j);
		if (j->p < j->end && *j->p == close) {
			j->p++;
			ok = 1;
		} else {
			for (;;) {
				if (obj) {
					js_ws(j);
					if (!js_string(j))
						break;
					js_ws(j);
					if (j->p >= j->end || *j->p++ != ':')
						break;
				}
				if (!js_value(j))
					break;
				js_ws(j);
				if (j->p < j->end && *j->p == ',') {
					j->p++;
					continue;
				}
				ok = j->p < j->end && *j->p++ == close;
				break;
			}
		}
	} else if (*j->p == '"') {
		ok = js_string(j);
	} else if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
		if (*j->p == '-')
			j->p++;
		ok = js_digits(j);
		if (ok && j->p < j->end && *j->p == '.') {
			j->p++;
			ok = js_digits(j);
		}
		if (ok && j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
			j->p++;
			if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
				j->p++;
			ok = js_digits(j);
		}
	} else {
		ok = js_lit(j, "true") || js_lit(j, "false") || js_lit(j, "null");
	}
	j->depth--;
	return ok;
}

static void check_json(const char *s, size_t n)
{
	struct js j = {s, s + n, 0};

	CHECK(js_value(&j));
	js_ws(&j);
	CHECK(j.p == j.end);
	for (size_t i = 0; i < n;) {
		unsigned cp;
		size_t l = log_utf8_decode((const unsigned char *)s + i, n - i, &cp);

		CHECK(l > 0);
		i += l;
	}
}

/* --- the manifest */

static int same_entry(const struct mirror_entry *a, const struct mirror_entry *b)
{
	/* An empty detail is written as none. */
	const char *da = a->detail && a->detail[0] ? a->detail : NULL;
	const char *db = b->detail && b->detail[0] ? b->detail : NULL;

	return !strcmp(a->path, b->path) && a->kind == b->kind && a->state == b->state &&
		a->mode == b->mode && a->size == b->size && a->ino == b->ino &&
		a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns && !da == !db &&
		(!da || !strcmp(da, db));
}

static char *render(struct mirror *m, size_t *ret_len)
{
	struct buf b = {0};
	char *s;

	CHECK(mirror_render_status(m, "fuzz", &b) == 0);
	s = fuzz_strndup(b.data, b.len);
	*ret_len = b.len;
	buf_free(&b);
	return s;
}

/* The text without the line "built ..." (the time of rendering). */
static void drop_built(char *s)
{
	char *b = strstr(s, "\nbuilt ");

	if (b) {
		char *e = strchr(b + 1, '\n');

		memmove(b, e, strlen(e) + 1);
	}
}

static void check_report(struct mirror *m)
{
	for (int json = 0; json < 2; json++) {
		char *out = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&out, &n);

		CHECK(f != NULL);
		mirror_status_report(m, json, f);
		CHECK(fclose(f) == 0);
		if (json) {
			check_json(out, n);
		} else {
			for (size_t i = 0; i < n; i++)
				CHECK(out[i] == '\n' ||
					((unsigned char)out[i] >= 0x20 && out[i] != 0x7f));
		}
		free(out);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_strndup((const char *)data, size), *fp = NULL, *boot = NULL;
	char *t1, *t2, *fp2 = NULL;
	struct mirror m, m2;
	size_t l1, l2;
	int complete = -1, c2 = -1;

	memset(&m, 0, sizeof(m));
	memset(&m2, 0, sizeof(m2));
	if (mirror_status_parse(&m, text, size, &fp, &boot, &complete) < 0) {
		mirror_free(&m);
		goto out;
	}
	CHECK(complete == 0 || complete == 1);
	for (size_t i = 0; i < m.n; i++) {
		CHECK(mirror_entry_find(&m, m.e[i].path) == &m.e[i]);
		for (size_t k = 0; k < i && k < 64; k++)
			CHECK(strcmp(m.e[k].path, m.e[i].path) != 0);
	}
	check_report(&m);
	/* Rendered and read again: the same manifest, written whole. */
	snprintf(m.fingerprint, sizeof(m.fingerprint), "%.60s", fp ? fp : "none");
	t1 = render(&m, &l1);
	CHECK(mirror_status_parse(&m2, t1, l1, &fp2, NULL, &c2) == 0);
	CHECK(c2 == 1);
	CHECK(fp2 && !strcmp(fp2, m.fingerprint));
	CHECK(m2.n == m.n);
	for (size_t i = 0; i < m.n; i++)
		CHECK(same_entry(&m.e[i], &m2.e[i]));
	free(t1);
	memcpy(m2.fingerprint, m.fingerprint, sizeof(m.fingerprint));
	t1 = render(&m, &l1);
	t2 = render(&m2, &l2);
	drop_built(t1);
	drop_built(t2);
	CHECK(!strcmp(t1, t2));
	free(t1);
	free(t2);
	mirror_free(&m);
	mirror_free(&m2);
out:
	free(fp);
	free(fp2);
	free(boot);
	free(text);
	return 0;
}
