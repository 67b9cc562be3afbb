/* SPDX-License-Identifier: MIT */
/*
 * The review memo's file, <gitdir>/ocsb-sync.review (review.c says what it holds and why
 * it can be trusted): one "branch" header line per branch, its Bloom filter in hex, then
 * one line per changed path of its whole-branch diff. Written atomically under the pull's
 * lock; never read through a link; a damaged block ends it (what came before counts).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "sync.h"

#define RMEMO_NAME "ocsb-sync.review"
#define RMEMO_MAX_BYTES (256u << 20)
#define RMEMO_MAX_STATS 2000000u
#define RMEMO_MAX_PATH 65536u
#define BLOOM_BITS_PER SYNC_BLOOM_BITS_PER
#define BLOOM_MAX_BYTES SYNC_BLOOM_MAX_BYTES

/* --- memo file: "branch" header lines, each followed by its line-count lines */

static int rmemo_path(const char *gitdir, const char *suffix, char *out, size_t n)
{
	return sync_gitdir_path(gitdir, RMEMO_NAME, suffix, out, n);
}

static int hex_oid(const char *s, git_oid *out)
{
	if (!strcmp(s, "-")) {
		memset(out, 0, sizeof(*out));
		return 0;
	}
	if (strlen(s) != GIT_OID_HEXSZ || git_oid_fromstr(out, s) < 0) {
		git_error_clear();
		return -1;
	}
	return 0;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v > SIZE_MAX / 4)
		return -1;
	*out = (size_t)v;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Split line into at most max space-separated fields; their number. */
static size_t fields(char *line, char **f, size_t max)
{
	size_t n = 0;
	char *save = NULL;

	for (char *t = strtok_r(line, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
		f[n++] = t;
	return strtok_r(NULL, " ", &save) ? max + 1 : n;
}

/* The header of one branch; 0 or -1. */
static int parse_header(char *line, struct sync_rmemo *m, size_t *nstats)
{
	char *f[14];
	size_t bits;

	if (fields(line, f, 13) != 13 || strcmp(f[0], "branch") != 0 ||
		strncmp(f[1], "refs/remotes/", 13) != 0 || strlen(f[1]) >= sizeof(m->ref) ||
		hex_oid(f[2], &m->tip) < 0 || hex_oid(f[3], &m->against) < 0 ||
		hex_oid(f[4], &m->base) < 0 || parse_size(f[5], &bits) < 0 || bits > 7 ||
		parse_size(f[6], &m->commits) < 0 || parse_size(f[7], &m->ahead) < 0 ||
		parse_size(f[8], &m->behind) < 0 || parse_size(f[9], nstats) < 0 ||
		*nstats > RMEMO_MAX_STATS || parse_size(f[10], &m->bloom_bytes) < 0 ||
		parse_size(f[11], &m->bloom_n) < 0 || strcmp(f[12], "end") != 0)
		return -1;
	/* A filter is a power of two of bytes, not overfull: else there is none. */
	if (m->bloom_bytes &&
		(m->bloom_bytes < 128 || m->bloom_bytes > BLOOM_MAX_BYTES ||
			(m->bloom_bytes & (m->bloom_bytes - 1)) ||
			m->bloom_n > m->bloom_bytes * 8 / BLOOM_BITS_PER))
		return -1;
	memcpy(m->ref, f[1], strlen(f[1]) + 1);
	m->have_base = (bits & 1) != 0;
	m->unique = (bits & 2) != 0;
	m->have_local = (bits & 4) != 0;
	if (git_oid_is_zero(&m->tip) || git_oid_is_zero(&m->against) ||
		m->have_base == git_oid_is_zero(&m->base))
		return -1;
	return 0;
}

static int parse_mode(const char *s, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!*s || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 8);
	if (errno || *end || v > 0177777)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* A path written as hex (any byte but NUL, at most RMEMO_MAX_PATH): owned copy, or NULL. */
static char *parse_path(const char *hex)
{
	size_t n = strlen(hex);
	char *p;

	if (!n || n % 2 || n / 2 > RMEMO_MAX_PATH || !(p = malloc(n / 2 + 1)))
		return NULL;
	for (size_t k = 0; k < n / 2; k++) {
		int hi = hexval(hex[2 * k]), lo = hexval(hex[2 * k + 1]);

		if (hi < 0 || lo < 0 || (hi | lo) == 0) {
			free(p);
			return NULL;
		}
		p[k] = (char)(hi << 4 | lo);
	}
	p[n / 2] = '\0';
	return p;
}

static int parse_stat(char *line, struct sync_linestat *s)
{
	char *f[10];
	size_t add, del, bin, unread;

	if (fields(line, f, 9) != 9 || hex_oid(f[0], &s->old_id) < 0 ||
		hex_oid(f[1], &s->new_id) < 0 || parse_size(f[2], &add) < 0 ||
		parse_size(f[3], &del) < 0 || parse_size(f[4], &bin) < 0 || bin > 1 ||
		parse_mode(f[5], &s->old_mode) < 0 || parse_mode(f[6], &s->new_mode) < 0 ||
		parse_size(f[7], &unread) < 0 || unread > 1 || (!s->old_mode && !s->new_mode) ||
		!(s->path = parse_path(f[8])))
		return -1;
	s->add = add;
	s->del = del;
	s->binary = (int)bin;
	s->unreadable = (int)unread;
	return 0;
}

void sync_linestats_free(struct sync_linestat *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].path);
	free(v);
}

void sync_rmemo_free(struct sync_rmemo *m)
{
	sync_linestats_free(m->stats, m->nstats);
	m->stats = NULL;
	m->nstats = 0;
	free(m->bloom);
	m->bloom = NULL;
	m->bloom_bytes = m->bloom_n = 0;
}

void sync_rmemos_free(struct sync_rmemos *ms)
{
	for (size_t i = 0; i < ms->n; i++)
		sync_rmemo_free(&ms->v[i]);
	free(ms->v);
	ms->v = NULL;
	ms->n = 0;
}

int sync_rmemo_parse(char *buf, size_t len, struct sync_rmemos *ms)
{
	char *p = buf, *end = buf + len;
	int r = 0;

	ms->v = NULL;
	ms->n = 0;
	/* A damaged block ends the memo there: what came before still counts. */
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		struct sync_rmemo m = {0}, *nv;
		size_t nstats;

		if (!nl)
			break;
		*nl = '\0';
		if (parse_header(p, &m, &nstats) < 0)
			break;
		p = nl + 1;
		if (m.bloom_bytes) {
			size_t bytes = m.bloom_bytes;

			m.bloom_bytes = 0; /* set once read */
			nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl || (size_t)(nl - p) != 2 * bytes || !(m.bloom = malloc(bytes)))
				break;
			for (size_t k = 0; k < bytes; k++) {
				int hi = hexval(p[2 * k]), lo = hexval(p[2 * k + 1]);

				if (hi < 0 || lo < 0)
					break;
				m.bloom[k] = (unsigned char)(hi << 4 | lo);
				m.bloom_bytes = k + 1;
			}
			if (m.bloom_bytes != bytes) {
				sync_rmemo_free(&m);
				break;
			}
			p = nl + 1;
		}
		if (nstats) {
			m.stats = calloc(nstats, sizeof(*m.stats));
			if (!m.stats) {
				r = -ENOMEM;
				break;
			}
		}
		for (; m.nstats < nstats && p < end; m.nstats++) {
			nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl)
				break;
			*nl = '\0';
			if (parse_stat(p, &m.stats[m.nstats]) < 0)
				break;
			p = nl + 1;
		}
		if (m.nstats != nstats) {
			sync_rmemo_free(&m);
			break;
		}
		nv = realloc(ms->v, (ms->n + 1) * sizeof(*nv));
		if (!nv) {
			sync_rmemo_free(&m);
			r = -ENOMEM;
			break;
		}
		ms->v = nv;
		ms->v[ms->n++] = m;
	}
	if (r < 0)
		sync_rmemos_free(ms);
	return r;
}

int sync_rmemo_load(const char *gitdir, struct sync_rmemos *ms)
{
	char path[4096], *buf = NULL;
	size_t got = 0;
	int fd, r = 0;

	ms->v = NULL;
	ms->n = 0;
	if (rmemo_path(gitdir, "", path, sizeof(path)) < 0)
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0; /* none yet, or a link: no memo */
	/* Not a regular file, or too big: no memo either. */
	if (fo_read_fd(fd, RMEMO_MAX_BYTES, &buf, &got) == 0)
		r = sync_rmemo_parse(buf, got, ms);
	free(buf);
	close(fd);
	return r;
}

const struct sync_rmemo *sync_rmemo_find(const struct sync_rmemos *ms, const char *ref)
{
	for (size_t i = 0; i < ms->n; i++)
		if (!strcmp(ms->v[i].ref, ref))
			return &ms->v[i];
	return NULL;
}

static int rmemo_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sync_rmemo *)a)->ref, ((const struct sync_rmemo *)b)->ref);
}

void sync_rmemos_sort(struct sync_rmemos *ms)
{
	if (ms->n)
		qsort(ms->v, ms->n, sizeof(*ms->v), rmemo_cmp);
}

const struct sync_rmemo *sync_rmemo_bsearch(const struct sync_rmemos *ms, const char *ref)
{
	struct sync_rmemo key;

	if (!ms->n)
		return NULL;
	snprintf(key.ref, sizeof(key.ref), "%s", ref);
	return bsearch(&key, ms->v, ms->n, sizeof(*ms->v), rmemo_cmp);
}

static int rmemo_idx_cmp(const void *a, const void *b, void *ctx)
{
	const struct sync_rmemo *v = ctx;

	return strcmp(v[*(const size_t *)a].ref, v[*(const size_t *)b].ref);
}

size_t *sync_rmemos_order(const struct sync_rmemos *ms)
{
	size_t *ord = calloc(ms->n ? ms->n : 1, sizeof(*ord));

	for (size_t k = 0; ord && k < ms->n; k++)
		ord[k] = k;
	if (ord)
		qsort_r(ord, ms->n, sizeof(*ord), rmemo_idx_cmp, ms->v);
	return ord;
}

int sync_rmemos_has(const struct sync_rmemos *ms, const size_t *ord, size_t n, const char *ref)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(ms->v[ord[mid]].ref, ref);

		if (!c)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int sync_rmemo_push(struct sync_rmemos *ms, struct sync_rmemo *m)
{
	struct sync_rmemo *nv = realloc(ms->v, (ms->n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	ms->v = nv;
	ms->v[ms->n++] = *m;
	m->stats = NULL; /* moved */
	m->nstats = 0;
	m->bloom = NULL;
	m->bloom_bytes = m->bloom_n = 0;
	return 0;
}

void sync_rmemo_write(FILE *f, const struct sync_rmemos *ms)
{
	for (size_t i = 0; i < ms->n; i++) {
		const struct sync_rmemo *m = &ms->v[i];
		char t[GIT_OID_HEXSZ + 1], a[GIT_OID_HEXSZ + 1], b[GIT_OID_HEXSZ + 1];

		fprintf(f, "branch %s %s %s %s %u %zu %zu %zu %zu %zu %zu end\n", m->ref,
			git_oid_tostr(t, sizeof(t), &m->tip),
			git_oid_tostr(a, sizeof(a), &m->against),
			m->have_base ? git_oid_tostr(b, sizeof(b), &m->base) : "-",
			(m->have_base ? 1u : 0u) | (m->unique ? 2u : 0u) |
				(m->have_local ? 4u : 0u),
			m->commits, m->ahead, m->behind, m->nstats, m->bloom ? m->bloom_bytes : 0,
			m->bloom ? m->bloom_n : 0);
		for (size_t k = 0; m->bloom && k < m->bloom_bytes; k++)
			fprintf(f, "%02x%s", m->bloom[k], k + 1 == m->bloom_bytes ? "\n" : "");
		for (size_t k = 0; k < m->nstats; k++) {
			const struct sync_linestat *s = &m->stats[k];

			fprintf(f, "%s %s %zu %zu %d %o %o %d ",
				git_oid_is_zero(&s->old_id)
					? "-"
					: git_oid_tostr(t, sizeof(t), &s->old_id),
				git_oid_is_zero(&s->new_id)
					? "-"
					: git_oid_tostr(a, sizeof(a), &s->new_id),
				s->add, s->del, s->binary, s->old_mode, s->new_mode, s->unreadable);
			for (const char *c = s->path ? s->path : ""; *c; c++)
				fprintf(f, "%02x", (unsigned char)*c);
			fputc('\n', f);
		}
	}
}

int sync_rmemo_save(const char *gitdir, const struct sync_rmemos *ms)
{
	char path[4096], tmp[4096];
	FILE *f;
	int r;

	f = sync_memo_begin(gitdir, RMEMO_NAME, !ms->n, path, tmp, sizeof(path), &r);
	if (!f)
		return r;
	sync_rmemo_write(f, ms);
	return sync_memo_commit(f, tmp, path);
}
