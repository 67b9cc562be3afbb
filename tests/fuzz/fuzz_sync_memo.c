/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the memo files `ocsb sync pull` reads back from the owner's .git:
 * ocsb-sync.review (sync/rmemo.c, sync_rmemo_parse) and ocsb-sync.unrelated (sync/related.c,
 * sync_memo_parse). A memo is only ever a shortcut, so a damaged one must cost entries,
 * never memory safety or a wrong entry. The input is taken as each file whole.
 * Properties, abort() when broken:
 *   - every entry read is well-formed: its ref under refs/remotes/, tip and against set,
 *     the base set exactly when have_base says so, a Bloom filter a power of two of bytes
 *     from 128 and not overfull, each changed path non-empty with a mode and 0/1 flags;
 *   - what is read, written again (sync_rmemo_write, sync_memo_write) and read back is
 *     the same memo, and writing that gives the same text (one spelling per memo);
 *   - sync_rmemos_sort then sync_rmemo_bsearch, and sync_rmemos_order then
 *     sync_rmemos_has, find every ref there is and only those (as sync_rmemo_find does).
 * Build and run: `make fuzz FUZZ_ONLY=sync_memo` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	git_libgit2_init();
	fuzz_quiet(argc, argv);
	return 0;
}

/* --- ocsb-sync.review */

static void check_rmemo_entry(const struct sync_rmemo *m)
{
	CHECK(!strncmp(m->ref, "refs/remotes/", 13) && strlen(m->ref) < sizeof(m->ref));
	CHECK(!strchr(m->ref, ' '));
	CHECK(!git_oid_is_zero(&m->tip) && !git_oid_is_zero(&m->against));
	CHECK(m->have_base == !git_oid_is_zero(&m->base));
	CHECK(m->unique == !!m->unique && m->have_local == !!m->have_local);
	if (m->bloom) {
		CHECK(m->bloom_bytes >= 128 && m->bloom_bytes <= SYNC_BLOOM_MAX_BYTES);
		CHECK((m->bloom_bytes & (m->bloom_bytes - 1)) == 0);
		CHECK(m->bloom_n * SYNC_BLOOM_BITS_PER <= m->bloom_bytes * 8);
	} else {
		CHECK(m->bloom_bytes == 0);
	}
	CHECK(m->nstats == 0 || m->stats != NULL);
	for (size_t k = 0; k < m->nstats; k++) {
		const struct sync_linestat *s = &m->stats[k];

		CHECK(s->path && s->path[0]);
		CHECK(s->old_mode || s->new_mode);
		CHECK(s->old_mode <= 0177777 && s->new_mode <= 0177777);
		CHECK((s->binary == 0 || s->binary == 1) &&
			(s->unreadable == 0 || s->unreadable == 1));
	}
}

static int rmemo_equal(const struct sync_rmemo *a, const struct sync_rmemo *b)
{
	if (strcmp(a->ref, b->ref) || !git_oid_equal(&a->tip, &b->tip) ||
		!git_oid_equal(&a->against, &b->against) || !git_oid_equal(&a->base, &b->base) ||
		a->have_base != b->have_base || a->unique != b->unique ||
		a->have_local != b->have_local || a->commits != b->commits ||
		a->ahead != b->ahead || a->behind != b->behind || a->nstats != b->nstats ||
		!a->bloom != !b->bloom)
		return 0;
	/* Without a filter its count means nothing, and is written as 0. */
	if (a->bloom &&
		(a->bloom_bytes != b->bloom_bytes || a->bloom_n != b->bloom_n ||
			memcmp(a->bloom, b->bloom, a->bloom_bytes)))
		return 0;
	for (size_t k = 0; k < a->nstats; k++) {
		const struct sync_linestat *x = &a->stats[k], *y = &b->stats[k];

		if (strcmp(x->path, y->path) || x->old_mode != y->old_mode ||
			x->new_mode != y->new_mode || !git_oid_equal(&x->old_id, &y->old_id) ||
			!git_oid_equal(&x->new_id, &y->new_id) || x->add != y->add ||
			x->del != y->del || x->binary != y->binary ||
			x->unreadable != y->unreadable)
			return 0;
	}
	return 1;
}

/* The memo as its file's text (malloc'd); *ret_len its length. */
static char *rmemo_text(const struct sync_rmemos *ms, size_t *ret_len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, ret_len);

	CHECK(f != NULL);
	sync_rmemo_write(f, ms);
	CHECK(fclose(f) == 0 && text != NULL);
	return text;
}

static void check_lookup(struct sync_rmemos *ms)
{
	size_t *ord;

	sync_rmemos_sort(ms);
	for (size_t i = 0; i < ms->n; i++) {
		const struct sync_rmemo *hit = sync_rmemo_bsearch(ms, ms->v[i].ref);

		CHECK(hit && !strcmp(hit->ref, ms->v[i].ref));
		if (i)
			CHECK(strcmp(ms->v[i - 1].ref, ms->v[i].ref) <= 0);
	}
	ord = sync_rmemos_order(ms);
	CHECK(ord != NULL);
	for (size_t i = 0; i < ms->n; i++) {
		char other[sizeof(ms->v[i].ref) + 1];

		CHECK(sync_rmemos_has(ms, ord, ms->n, ms->v[i].ref));
		/* A ref one byte longer is there only when find says so. */
		snprintf(other, sizeof(other), "%s~", ms->v[i].ref);
		CHECK(sync_rmemos_has(ms, ord, ms->n, other) ==
			(sync_rmemo_find(ms, other) != NULL));
		CHECK((sync_rmemo_bsearch(ms, other) != NULL) ==
			(sync_rmemo_find(ms, other) != NULL));
	}
	free(ord);
}

static void check_rmemo(const uint8_t *data, size_t size)
{
	char *buf = fuzz_strndup((const char *)data, size), *t1, *t2;
	struct sync_rmemos a, b;
	size_t l1, l2;

	CHECK(sync_rmemo_parse(buf, size, &a) == 0);
	for (size_t i = 0; i < a.n; i++)
		check_rmemo_entry(&a.v[i]);
	t1 = rmemo_text(&a, &l1);
	CHECK(strlen(t1) == l1);
	CHECK(sync_rmemo_parse(t1, l1, &b) == 0);
	CHECK(a.n == b.n);
	for (size_t i = 0; i < a.n; i++)
		CHECK(rmemo_equal(&a.v[i], &b.v[i]));
	t2 = rmemo_text(&b, &l2);
	/* t1 was cut in place by the parser: write both again. */
	free(t1);
	t1 = rmemo_text(&a, &l1);
	CHECK(l1 == l2 && !memcmp(t1, t2, l1));
	check_lookup(&a);
	free(t1);
	free(t2);
	sync_rmemos_free(&a);
	sync_rmemos_free(&b);
	free(buf);
}

/* --- ocsb-sync.unrelated */

static char *memo_text(const struct sync_memos *ms, size_t *ret_len)
{
	char *text = NULL;
	FILE *f = open_memstream(&text, ret_len);

	CHECK(f != NULL);
	sync_memo_write(f, ms);
	CHECK(fclose(f) == 0 && text != NULL);
	return text;
}

static void check_memo(const uint8_t *data, size_t size)
{
	char *buf = fuzz_strndup((const char *)data, size), *t1, *t2;
	struct sync_memos a, b;
	size_t l1, l2;

	CHECK(sync_memo_parse(buf, &a) == 0);
	for (size_t i = 0; i < a.n; i++) {
		const struct sync_memo *m = &a.v[i];

		CHECK(!strncmp(m->ref, "refs/remotes/", 13) && strlen(m->ref) < sizeof(m->ref));
		CHECK(!strpbrk(m->ref, " \t\n"));
		CHECK(sync_memo_find(&a, m->ref) != NULL);
		CHECK(!strcmp(sync_memo_find(&a, m->ref)->ref, m->ref));
	}
	t1 = memo_text(&a, &l1);
	CHECK(strlen(t1) == l1);
	CHECK(sync_memo_parse(t1, &b) == 0);
	CHECK(sync_memos_equal(&a, &b));
	t2 = memo_text(&b, &l2);
	free(t1);
	t1 = memo_text(&a, &l1);
	CHECK(l1 == l2 && !memcmp(t1, t2, l1));
	free(t1);
	free(t2);
	sync_memos_free(&a);
	sync_memos_free(&b);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_rmemo(data, size);
	check_memo(data, size);
	return 0;
}
