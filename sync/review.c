/* SPDX-License-Identifier: MIT */
/*
 * The review of one fetched branch: its base (where the agent's work starts from the
 * owner's point of view), its commit count, its diffstat and the gate's flags, for the
 * whole branch and for what is new since the owner's last pull.
 *
 * From scratch the whole-branch review walks the branch's whole history twice (merge
 * base, ahead/behind) and diffs every line of every file it changes: a 20,000-commit
 * branch costs that on every pull, even when one commit is new. So each pull leaves a
 * memo per branch in <gitdir>/ocsb-sync.review and the next one starts from it:
 *
 * - History. The memo holds tip T, the owner's commit L it was reviewed against, their
 *   merge base B (the only one) and the counts. For new T', L': when every path from T'
 *   ends at T (no root, within a bounded walk: the set W_T of new commits) and every path
 *   from L' ends at L (W_L), the common ancestors of T' and L' are those of T and L unless
 *   one side contained the other (B = T, or B = L while the owner moved): a new agent
 *   commit in the owner's history would make T an ancestor of L, and an owner's commit in
 *   the agent's history would make L one of T. Then B' = B and every count grows by |W|.
 *   A branch built on the owner's tip (B = L) keeps a Bloom filter of its commits: when
 *   the owner moves, no new owner commit in it (nor among the new agent commits) proves
 *   B' = L. Anything else (force-push, a merge either way, a new root, a long walk,
 *   another merge base) is computed from scratch.
 * - Diffstat. The same tip and base are the same two trees: the memo keeps their diff
 *   (paths, modes, blob pairs, line counts) and a pull where neither moved takes it from
 *   there. Otherwise the tree diff runs (diff.c opens only subtrees that differ) and the
 *   line counts, a pure function of the two blobs' contents, come from the memo by blob
 *   pair when it has them.
 * - Flags are never memoized: every changed path is classified on every pull.
 *
 * A wrong memo must never hide a flag: the classifier runs on every path, and the paths,
 * the base and the counts come from the memo only as proven above. The unit test drives
 * random histories (commits, force-pushes, merges either way) and compares every pull's
 * incremental review (every path, its modes, counts and flags) with one from scratch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync.h"

#define REVIEW_BLOB_MAX (1u << 20) /* .gitattributes / link targets read for the gate */
#define REVIEW_DIFF_MAX (64u << 20) /* larger blobs count as binary, unread */

/* --- walks */

int sync_walk_onto_set(git_repository *repo, const git_oid *from, const git_oid *stop, size_t limit,
	struct sync_oidset *set)
{
	git_oid *queue;
	size_t nqueue = 0;
	int ok = 0, r;

	memset(set, 0, sizeof(*set));
	if (git_oid_equal(from, stop))
		return 1;
	if (git_repository_is_shallow(repo) != 0)
		return 0; /* a cut history: a missing parent looks like a root */
	queue = calloc(limit + 1, sizeof(*queue));
	if (!queue)
		return 0;
	git_oid_cpy(&queue[nqueue++], from);
	while (nqueue) {
		git_oid id = queue[--nqueue];
		git_commit *c = NULL;
		unsigned parents;

		if (git_oid_equal(&id, stop))
			continue;
		r = sync_oidset_add(set, &id);
		if (r == 0)
			continue;
		if (r < 0 || set->n > limit || git_commit_lookup(&c, repo, &id) < 0)
			goto out;
		parents = git_commit_parentcount(c);
		if (parents == 0 || nqueue + parents > limit) {
			git_commit_free(c);
			goto out;
		}
		for (unsigned i = 0; i < parents; i++)
			git_oid_cpy(&queue[nqueue++], git_commit_parent_id(c, i));
		git_commit_free(c);
	}
	ok = 1;
out:
	free(queue);
	git_error_clear();
	return ok;
}

int sync_walk_onto(git_repository *repo, const git_oid *from, const git_oid *stop, size_t limit,
	size_t *ret_count)
{
	struct sync_oidset set;
	int ok = sync_walk_onto_set(repo, from, stop, limit, &set);

	if (ok)
		*ret_count = set.n;
	sync_oidset_free(&set);
	return ok;
}

/*
 * --- the agent's commits, as a Bloom filter
 *
 * For a branch built on the owner's tip (base B = the owner's commit L), a new owner
 * commit might be one of the agent's (the owner merged or fast-forwarded to the agent's
 * work): then the base moves. "Not in the agent's commits" must be certain to keep the
 * base, and a Bloom filter's "no" is: a "maybe" (a false positive) only costs a review
 * from scratch. It holds tip ^B, a superset is harmless too.
 */
#define BLOOM_K 4
#define BLOOM_BITS_PER SYNC_BLOOM_BITS_PER
#define BLOOM_MAX_BYTES SYNC_BLOOM_MAX_BYTES

static size_t bloom_bit(const git_oid *id, unsigned k, size_t bytes)
{
	uint32_t h;

	memcpy(&h, id->id + 4 * k, sizeof(h)); /* ids are hashes: slices are independent */
	return h & (bytes * 8 - 1);
}

static int bloom_has(const struct sync_rmemo *m, const git_oid *id)
{
	for (unsigned k = 0; k < BLOOM_K; k++) {
		size_t b = bloom_bit(id, k, m->bloom_bytes);

		if (!(m->bloom[b / 8] & (1u << (b % 8))))
			return 0;
	}
	return 1;
}

static void bloom_add(struct sync_rmemo *m, const git_oid *id)
{
	for (unsigned k = 0; k < BLOOM_K; k++) {
		size_t b = bloom_bit(id, k, m->bloom_bytes);

		m->bloom[b / 8] |= (unsigned char)(1u << (b % 8));
	}
	m->bloom_n++;
}

/* Room for n ids (and as many again); 0, or -1 with no filter. */
static int bloom_new(struct sync_rmemo *m, size_t n)
{
	size_t bytes = 128;

	while (bytes * 8 < 2 * n * BLOOM_BITS_PER && bytes < BLOOM_MAX_BYTES)
		bytes *= 2;
	if (bytes * 8 < n * BLOOM_BITS_PER)
		return -1;
	m->bloom = calloc(bytes, 1);
	if (!m->bloom)
		return -1;
	m->bloom_bytes = bytes;
	m->bloom_n = 0;
	return 0;
}

static int bloom_full(const struct sync_rmemo *m, size_t more)
{
	return (m->bloom_n + more) * BLOOM_BITS_PER > m->bloom_bytes * 8;
}

/*
 * A filter of every commit of tip ^base, n of them (libgit2's walk: with odd commit
 * dates it may list more, never fewer; more only fills the filter sooner).
 */
static int bloom_build(git_repository *repo, const git_oid *tip, const git_oid *base, size_t n,
	struct sync_rmemo *m)
{
	git_revwalk *w = NULL;
	git_oid id;
	int r;

	if (bloom_new(m, n) < 0)
		return -1;
	if (git_revwalk_new(&w, repo) < 0 || git_revwalk_push(w, tip) < 0 ||
		git_revwalk_hide(w, base) < 0)
		goto fail;
	while ((r = git_revwalk_next(&id, w)) == 0) {
		if (bloom_full(m, 1))
			goto fail;
		bloom_add(m, &id);
	}
	if (r != GIT_ITEROVER)
		goto fail;
	git_revwalk_free(w);
	return 0;
fail:
	git_revwalk_free(w);
	git_error_clear();
	free(m->bloom);
	m->bloom = NULL;
	m->bloom_bytes = m->bloom_n = 0;
	return -1;
}

static void history_free(struct sync_history *h)
{
	free(h->bloom);
	h->bloom = NULL;
}

int sync_history_step(git_repository *repo, const struct sync_rmemo *m, const git_oid *tip,
	const git_oid *against, int have_local, size_t limit, struct sync_history *out)
{
	struct sync_oidset wt = {0}, wl = {0};
	int owner_moved = !git_oid_equal(against, &m->against);
	int on_owner = git_oid_equal(&m->base, &m->against); /* B = L */
	int ok = 0;

	memset(out, 0, sizeof(*out));
	if (!m->have_base || !m->unique || m->have_local != have_local)
		return 0;
	/* The owner's history contained the agent's tip: new agent commits may be in it too. */
	if (git_oid_equal(&m->base, &m->tip))
		return 0;
	/* The agent's history contains the owner's commit: without the filter, new owner
	 * commits may be agent commits. */
	if (owner_moved && on_owner && !m->bloom)
		return 0;
	if (!sync_walk_onto_set(repo, tip, &m->tip, limit, &wt))
		goto out;
	if (owner_moved && !sync_walk_onto_set(repo, against, &m->against, limit, &wl))
		goto out;
	if (owner_moved && on_owner) {
		out->filtered = 1;
		/*
		 * B = L: the common ancestors stay L's unless a new owner commit is one of the
		 * agent's, old (the filter) or new (W_T). Then B' = L still, the owner's commits
		 * are all behind, and the base is no longer the owner's tip: no filter needed.
		 */
		for (size_t i = 0; i < wl.cap; i++)
			if (!git_oid_is_zero(&wl.v[i]) &&
				(bloom_has(m, &wl.v[i]) || sync_oidset_has(&wt, &wl.v[i])))
				goto out;
	}
	out->have_base = 1;
	out->unique = 1;
	git_oid_cpy(&out->base, &m->base);
	out->commits = m->commits + wt.n;
	out->ahead = have_local ? m->ahead + wt.n : 0;
	out->behind = have_local ? m->behind + wl.n : 0;
	out->new_commits = wt.n;
	/* Still on the owner's unmoved tip: the filter grows by the new commits. */
	if (on_owner && !owner_moved && m->bloom && !bloom_full(m, wt.n)) {
		struct sync_rmemo nb = {0};

		nb.bloom = malloc(m->bloom_bytes);
		if (nb.bloom) {
			memcpy(nb.bloom, m->bloom, m->bloom_bytes);
			nb.bloom_bytes = m->bloom_bytes;
			nb.bloom_n = m->bloom_n;
			for (size_t i = 0; i < wt.cap; i++)
				if (!git_oid_is_zero(&wt.v[i]))
					bloom_add(&nb, &wt.v[i]);
			out->bloom = nb.bloom;
			out->bloom_bytes = nb.bloom_bytes;
			out->bloom_n = nb.bloom_n;
		}
	}
	ok = 1;
out:
	sync_oidset_free(&wt);
	sync_oidset_free(&wl);
	return ok;
}

/* --- line counts, looked up by blob pair */

static int is_gitlink(unsigned mode)
{
	return (mode & 0170000) == 0160000;
}

struct stat_cache {
	const struct sync_linestat *v; /* borrowed */
	size_t *slot; /* index + 1, 0 free */
	size_t cap;
};

static size_t pair_hash(const git_oid *a, const git_oid *b)
{
	size_t x, y;

	memcpy(&x, a->id, sizeof(x));
	memcpy(&y, b->id + 4, sizeof(y));
	return x ^ (y * 0x9e3779b97f4a7c15ull);
}

static void cache_init(struct stat_cache *c, const struct sync_linestat *v, size_t n)
{
	memset(c, 0, sizeof(*c));
	if (!n)
		return;
	for (c->cap = 16; c->cap < 2 * n; c->cap *= 2)
		;
	c->slot = calloc(c->cap, sizeof(*c->slot));
	if (!c->slot) {
		c->cap = 0;
		return; /* no cache: only slower */
	}
	c->v = v;
	for (size_t i = 0; i < n; i++) {
		size_t h;

		if (v[i].unreadable || is_gitlink(v[i].old_mode) || is_gitlink(v[i].new_mode))
			continue; /* no line counts */
		h = pair_hash(&v[i].old_id, &v[i].new_id) & (c->cap - 1);
		while (c->slot[h])
			h = (h + 1) & (c->cap - 1);
		c->slot[h] = i + 1;
	}
}

static const struct sync_linestat *cache_get(
	const struct stat_cache *c, const git_oid *a, const git_oid *b)
{
	if (!c->cap)
		return NULL;
	for (size_t h = pair_hash(a, b) & (c->cap - 1); c->slot[h]; h = (h + 1) & (c->cap - 1)) {
		const struct sync_linestat *s = &c->v[c->slot[h] - 1];

		if (git_oid_equal(&s->old_id, a) && git_oid_equal(&s->new_id, b))
			return s;
	}
	return NULL;
}

/* The blob's first REVIEW_BLOB_MAX bytes; *cut when there are more. 0 or -1. */
static int read_blob(git_repository *repo, const git_oid *id, char **data, size_t *len, int *cut)
{
	git_blob *b;
	git_object_size_t sz;

	*data = NULL;
	*len = 0;
	*cut = 0;
	if (git_blob_lookup(&b, repo, id) < 0)
		return -1;
	sz = git_blob_rawsize(b);
	if (sz > REVIEW_BLOB_MAX) {
		sz = REVIEW_BLOB_MAX;
		*cut = 1;
	}
	*data = malloc((size_t)sz + 1);
	if (*data) {
		memcpy(*data, git_blob_rawcontent(b), (size_t)sz);
		(*data)[sz] = '\0';
		*len = (size_t)sz;
	}
	git_blob_free(b);
	return *data ? 0 : -1;
}

/*
 * Lines added and removed between two blobs (either may be absent: mode 0). Blobs over
 * REVIEW_DIFF_MAX count as binary without being read, as git treats files over
 * core.bigFileThreshold: a pull's memory stays bounded whatever the agent commits.
 */
static int line_stats(
	git_repository *repo, const struct sync_delta *d, size_t *add, size_t *del, int *binary)
{
	git_odb *odb = NULL;
	git_blob *ob = NULL, *nb = NULL;
	git_patch *p = NULL;
	git_object_t type;
	size_t len;
	int r = -1;

	*add = *del = 0;
	*binary = 0;
	if (git_repository_odb(&odb, repo) < 0)
		return -1;
	for (int side = 0; side < 2; side++) {
		const git_oid *id = side ? &d->new_id : &d->old_id;

		if (!(side ? d->new_mode : d->old_mode))
			continue;
		if (git_odb_read_header(&len, &type, odb, id) < 0 || type != GIT_OBJECT_BLOB)
			goto out;
		if (len > REVIEW_DIFF_MAX)
			*binary = 1;
	}
	if (*binary) {
		r = 0;
		goto out;
	}
	if ((d->old_mode && git_blob_lookup(&ob, repo, &d->old_id) < 0) ||
		(d->new_mode && git_blob_lookup(&nb, repo, &d->new_id) < 0))
		goto out;
	/*
	 * From buffers, not blobs: libgit2 looks up a diff driver in the repository's
	 * attributes for each blob pair (two stats per file, 5,000 files on an initial pull);
	 * lines and binary detection need the content only.
	 */
	if (git_patch_from_buffers(&p, ob ? git_blob_rawcontent(ob) : NULL,
		    ob ? (size_t)git_blob_rawsize(ob) : 0, NULL,
		    nb ? git_blob_rawcontent(nb) : NULL, nb ? (size_t)git_blob_rawsize(nb) : 0,
		    NULL, NULL) < 0)
		goto out;
	if (p) {
		git_patch_line_stats(NULL, add, del, p);
		*binary = (git_patch_get_delta(p)->flags & GIT_DIFF_FLAG_BINARY) != 0;
	}
	r = 0;
out:
	git_patch_free(p);
	git_blob_free(ob);
	git_blob_free(nb);
	git_odb_free(odb);
	return r;
}

/* Classify one changed path: from its path and modes, and the contents the gate reads. */
static unsigned classify(git_repository *repo, const char *path, unsigned old_mode,
	const git_oid *old_id, unsigned new_mode, const git_oid *new_id)
{
	struct sync_entry e = {.path = path, .old_mode = old_mode, .new_mode = new_mode};
	char *od = NULL, *nd = NULL;
	unsigned flags;
	int old_cut; /* fewer old lines only raise more flags */

	if (new_mode && sync_review_wants_data(path, new_mode))
		read_blob(repo, new_id, &nd, &e.new_len, &e.new_cut);
	if (old_mode && sync_review_wants_data(path, old_mode))
		read_blob(repo, old_id, &od, &e.old_len, &old_cut);
	e.new_data = nd;
	e.old_data = od;
	flags = sync_review_classify(&e);
	free(od);
	free(nd);
	git_error_clear();
	return flags;
}

/*
 * Append e (its path borrowed) to out and *learnt: classified, its line counts counted
 * (from the cache, else the blobs) when count, else e's. 0 or -1.
 */
static int put(git_repository *repo, const struct stat_cache *cache, const struct sync_linestat *e,
	int count, struct sync_rpart *out, struct sync_linestat *learnt, size_t *nlearnt)
{
	struct sync_linestat *l = &learnt[*nlearnt];
	struct sync_rfile *f = &out->v[out->n];

	*l = *e;
	if (count) {
		l->add = l->del = 0;
		l->binary = l->unreadable = 0;
		if (!is_gitlink(l->old_mode) && !is_gitlink(l->new_mode)) {
			const struct sync_linestat *hit = cache_get(cache, &l->old_id, &l->new_id);
			struct sync_delta d = {.old_mode = l->old_mode, .new_mode = l->new_mode};

			git_oid_cpy(&d.old_id, &l->old_id);
			git_oid_cpy(&d.new_id, &l->new_id);
			if (hit) {
				l->add = hit->add;
				l->del = hit->del;
				l->binary = hit->binary;
			} else {
				l->unreadable =
					line_stats(repo, &d, &l->add, &l->del, &l->binary) < 0;
				git_error_clear();
			}
		}
	}
	l->path = strdup(e->path);
	f->path = l->path ? strdup(e->path) : NULL;
	if (!f->path) {
		free(l->path);
		l->path = NULL;
		git_error_set_oom();
		return -1;
	}
	(*nlearnt)++;
	out->n++;
	f->old_mode = l->old_mode;
	f->new_mode = l->new_mode;
	f->add = l->add;
	f->del = l->del;
	f->binary = l->binary;
	f->unreadable = l->unreadable;
	f->flags = classify(repo, l->path, l->old_mode, &l->old_id, l->new_mode, &l->new_id);
	out->ins += f->add;
	out->del += f->del;
	return 0;
}

/*
 * Review the change from tree a to tree b: every changed path classified, line counts
 * from the cache when the blob pair is there. Every changed path also goes to *learnt,
 * in order: the diff itself, for the next pull. *odd (if odd): a tree held a name twice or
 * out of order (sync_deltas.odd).
 */
static int review_trees(git_repository *repo, const git_tree *a, const git_tree *b,
	const struct stat_cache *cache, struct sync_rpart *out, struct sync_linestat **learnt,
	size_t *nlearnt, int *odd)
{
	struct sync_deltas ds = {0};
	int r;

	r = sync_tree_diff(repo, a, b, SYNC_REVIEW_MAX_PATHS, &ds);
	if (r < 0)
		return r;
	if (odd)
		*odd = ds.odd;
	out->v = calloc(ds.n ? ds.n : 1, sizeof(*out->v));
	*learnt = calloc(ds.n ? ds.n : 1, sizeof(**learnt));
	*nlearnt = 0;
	if (!out->v || !*learnt) {
		sync_deltas_free(&ds);
		git_error_set_oom();
		return -1;
	}
	for (size_t i = 0; i < ds.n && r == 0; i++) {
		const struct sync_delta *d = &ds.v[i];
		struct sync_linestat e = {
			.path = d->path, .old_mode = d->old_mode, .new_mode = d->new_mode};

		/* An absent side is the zero id, as the memo keys line counts. */
		if (d->old_mode)
			git_oid_cpy(&e.old_id, &d->old_id);
		if (d->new_mode)
			git_oid_cpy(&e.new_id, &d->new_id);
		r = put(repo, cache, &e, 1, out, *learnt, nlearnt);
	}
	sync_deltas_free(&ds);
	return r;
}

/* Strictly increasing paths (strcmp): the order a merge by path needs. */
static int by_path(const struct sync_linestat *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (strcmp(v[i - 1].path, v[i].path) >= 0)
			return 0;
	return 1;
}

/* The kind of entry a change may not cross without a delete and an add (as diff.c). */
static int kind_of(unsigned mode)
{
	return (mode & 0170000) == 0120000 ? 1 : is_gitlink(mode) ? 2 : 0;
}

/*
 * The whole-branch diff of the last pull again (same tip, same base: the same two trees),
 * classified afresh: the gate's flags are never taken from the memo. Its entries are
 * also the memo this review leaves.
 */
static int review_again(git_repository *repo, const struct sync_rmemo *m, struct sync_rpart *out,
	struct sync_linestat **learnt, size_t *nlearnt)
{
	size_t n = m->nstats;

	out->v = calloc(n ? n : 1, sizeof(*out->v));
	*learnt = calloc(n ? n : 1, sizeof(**learnt));
	*nlearnt = 0;
	if (!out->v || !*learnt) {
		git_error_set_oom();
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		if (put(repo, NULL, &m->stats[i], 0, out, *learnt, nlearnt) < 0)
			return -1;
	return 0;
}

/*
 * The whole-branch diff B -> T' from the memo's B -> T (w) and this pull's T -> T' (s),
 * both by path: a path in neither is the same at B and T'; in one only, that diff says
 * it; in both, B's side of w against T''s side of s (nothing when they are equal, a
 * delete and an add when the kind changes, as diff.c splits it). Every path classified
 * again; line counts carried, else from the cache, else counted.
 * 0, -1 (failed), or 1: a list not strictly in path order (a path twice), compute it.
 */
static int review_composed(git_repository *repo, const struct sync_rmemo *m,
	const struct sync_linestat *s, size_t ns, const struct stat_cache *cache,
	struct sync_rpart *out, struct sync_linestat **learnt, size_t *nlearnt)
{
	size_t i = 0, k = 0, cap = m->nstats + 2 * ns;

	if (!by_path(m->stats, m->nstats) || !by_path(s, ns))
		return 1;
	out->v = calloc(cap ? cap : 1, sizeof(*out->v));
	*learnt = calloc(cap ? cap : 1, sizeof(**learnt));
	*nlearnt = 0;
	if (!out->v || !*learnt) {
		git_error_set_oom();
		return -1;
	}
	while (i < m->nstats || k < ns) {
		const struct sync_linestat *w = i < m->nstats ? &m->stats[i] : NULL;
		const struct sync_linestat *d = k < ns ? &s[k] : NULL;
		int c = !w ? 1 : !d ? -1 : strcmp(w->path, d->path), r;
		struct sync_linestat e;

		i += c <= 0;
		k += c >= 0;
		if (c) {
			r = put(repo, cache, c < 0 ? w : d, 0, out, *learnt, nlearnt);
		} else {
			e = *w;
			e.new_mode = d->new_mode;
			git_oid_cpy(&e.new_id, &d->new_id);
			if (e.old_mode == e.new_mode && git_oid_equal(&e.old_id, &e.new_id))
				continue; /* back to what it was at the base */
			if (e.old_mode && e.new_mode &&
				kind_of(e.old_mode) != kind_of(e.new_mode)) {
				struct sync_linestat gone = e, added = e;

				gone.new_mode = 0;
				memset(&gone.new_id, 0, sizeof(gone.new_id));
				added.old_mode = 0;
				memset(&added.old_id, 0, sizeof(added.old_id));
				r = put(repo, cache, &gone, 1, out, *learnt, nlearnt);
				if (r == 0)
					r = put(repo, cache, &added, 1, out, *learnt, nlearnt);
			} else {
				r = put(repo, cache, &e, 1, out, *learnt, nlearnt);
			}
		}
		if (r < 0)
			return -1;
	}
	return 0;
}

void sync_rpart_free(struct sync_rpart *p)
{
	for (size_t i = 0; p->v && i < p->n; i++)
		free(p->v[i].path);
	free(p->v);
	memset(p, 0, sizeof(*p));
}

void sync_review_free(struct sync_review *rv)
{
	sync_rpart_free(&rv->whole);
	sync_rpart_free(&rv->since);
	sync_rmemo_free(&rv->memo);
	memset(rv, 0, sizeof(*rv));
}

static int commit_tree(git_repository *repo, const git_oid *id, git_tree **out)
{
	git_commit *c;
	int r;

	*out = NULL;
	r = git_commit_lookup(&c, repo, id);
	if (r < 0)
		return r;
	r = git_commit_tree(out, c);
	git_commit_free(c);
	return r;
}

/* The base from scratch: the merge base with `against`, and whether it is the only one. */
static int full_base(git_repository *repo, const git_oid *tip, const git_oid *against,
	git_oid *ret_base, int *ret_unique)
{
	git_oidarray bases = {0};
	int r = git_merge_bases(&bases, repo, tip, against);

	if (r < 0)
		return r;
	if (!bases.count) {
		git_oidarray_dispose(&bases);
		return GIT_ENOTFOUND;
	}
	git_oid_cpy(ret_base, &bases.ids[0]);
	*ret_unique = bases.count == 1;
	git_oidarray_dispose(&bases);
	return 0;
}

int sync_review_run(git_repository *repo, const struct sync_review_in *in, struct sync_review *rv)
{
	git_tree *tipt = NULL, *baset = NULL, *oldt = NULL;
	git_commit *tipc = NULL;
	struct stat_cache cache;
	const struct sync_rmemo *m = in->memo;
	struct sync_history h = {0};
	struct sync_linestat *since_l = NULL;
	size_t nsince_l = 0;
	int r, ret = -1, stepped = 0, counted_commits = 0, since_odd = 0, whole_odd = 0;

	memset(rv, 0, sizeof(*rv));
	cache_init(&cache, m ? m->stats : NULL, m ? m->nstats : 0);

	/* --- base and counts */
	if (m && in->against && !in->unrelated_hint &&
		sync_history_step(
			repo, m, in->tip, in->against, in->have_local, in->walk_limit, &h) == 1) {
		stepped = 1;
		rv->have_base = 1;
		rv->unique = h.unique;
		git_oid_cpy(&rv->base, &h.base);
		rv->commits = h.commits;
		rv->ahead = h.ahead;
		rv->behind = h.behind;
		rv->history_from_memo = 1 + h.filtered;
	} else if (in->against && in->unrelated_hint) {
		rv->unrelated = 1;
		if (in->have_local)
			git_graph_ahead_behind(&rv->ahead, &rv->behind, repo, in->tip, in->against);
	} else if (in->against) {
		size_t ahead = 0, behind = 0;
		int counted =
			git_graph_ahead_behind(&ahead, &behind, repo, in->tip, in->against) == 0;

		if (in->have_local) {
			rv->ahead = ahead;
			rv->behind = behind;
		}
		/*
		 * One walk instead of two when one side contains the other (a branch on the
		 * owner's tip, or one that merged it): the walk flags a commit "reached from
		 * the tip" only along parent links, so nothing behind means against is an
		 * ancestor of tip (base = against), nothing ahead that tip is one of against's.
		 * Either way that base is the only one. Otherwise the full merge base.
		 */
		if (counted && (!behind || !ahead)) {
			git_oid_cpy(&rv->base, !behind ? in->against : in->tip);
			rv->have_base = rv->unique = 1;
			rv->commits = ahead;
			counted_commits = 1;
		} else {
			r = full_base(repo, in->tip, in->against, &rv->base, &rv->unique);
			rv->have_base = r == 0;
			rv->unrelated = r == GIT_ENOTFOUND;
			/* One merge base B: tip ^B is tip ^against (see below), counted already. */
			if (counted && rv->have_base && rv->unique) {
				rv->commits = ahead;
				counted_commits = 1;
			}
		}
	}
	/*
	 * No branch of that name and no common history with HEAD: what changed since the
	 * last pull. Never memoized (the base is the previous tip).
	 */
	if (!rv->have_base && !in->have_local && in->old) {
		rv->have_base = git_merge_base(&rv->base, repo, in->tip, in->old) == 0;
		rv->base_is_old = rv->have_base;
	}
	/*
	 * With one merge base B, the common ancestors of tip and against are exactly B's:
	 * tip ^B is tip ^against, counted above (a 20,000-commit walk saved).
	 */
	if (rv->have_base && !stepped && !counted_commits) {
		size_t behind;

		git_graph_ahead_behind(&rv->commits, &behind, repo, in->tip, &rv->base);
	}
	git_error_clear();

	/* --- the agent's commits when the branch is built on the owner's tip */
	if (stepped && h.bloom) {
		rv->memo.bloom = h.bloom;
		rv->memo.bloom_bytes = h.bloom_bytes;
		rv->memo.bloom_n = h.bloom_n;
		h.bloom = NULL;
	} else if (!stepped && rv->have_base && rv->unique && !rv->base_is_old &&
		git_oid_equal(&rv->base, in->against) && !git_oid_equal(in->tip, in->against)) {
		(void)bloom_build(repo, in->tip, &rv->base, rv->commits, &rv->memo);
	}

	/* The trees are read when a diff needs them (not for the memo's diff of the same tip). */
	if (git_commit_lookup(&tipc, repo, in->tip) < 0)
		goto out;

	/* --- what is new since the last pull */
	if (in->old && !git_oid_equal(in->old, in->tip)) {
		size_t behind;

		if (git_commit_tree(&tipt, tipc) < 0)
			goto out;
		rv->have_since = 1;
		if (stepped)
			rv->since_commits = h.new_commits;
		else
			git_graph_ahead_behind(&rv->since_commits, &behind, repo, in->tip, in->old);
		git_error_clear();
		if (commit_tree(repo, in->old, &oldt) == 0) {
			r = review_trees(repo, oldt, tipt, &cache, &rv->since, &since_l, &nsince_l,
				&since_odd);
			if (r < 0) {
				ret = r == SYNC_DIFF_TOO_BIG ? SYNC_DIFF_TOO_BIG : -1;
				goto out;
			}
		} else {
			rv->have_since = 0; /* the old tip is gone from the store: nothing to say */
		}
	}

	/*
	 * --- whole-branch diff. The base has not moved: the same tip is the same two trees
	 * as last time, the same diff; a tip that moved on from the memo's is the memo's diff
	 * and the one since the last pull, composed. Else computed. Classified every time.
	 */
	r = 1;
	if (m && m->have_base && rv->have_base && !rv->base_is_old &&
		git_oid_equal(&m->base, &rv->base)) {
		if (git_oid_equal(&m->tip, in->tip)) {
			r = review_again(repo, m, &rv->whole, &rv->memo.stats, &rv->memo.nstats);
			rv->diff_from_memo = r == 0;
		} else if (rv->have_since && git_oid_equal(&m->tip, in->old) && !since_odd) {
			/*
			 * Not through a tree with a name twice: the diff since pairs its entries by
			 * position, and a duplicate it pairs away (the same subtree at the old tip)
			 * would take the flags of the memo's entry of that path with it.
			 */
			r = review_composed(repo, m, since_l, nsince_l, &cache, &rv->whole,
				&rv->memo.stats, &rv->memo.nstats);
			rv->diff_from_memo = 2 * (r == 0);
		}
		if (r < 0)
			goto out;
	}
	if (r > 0) {
		if ((!tipt && git_commit_tree(&tipt, tipc) < 0) ||
			(rv->have_base && commit_tree(repo, &rv->base, &baset) < 0))
			goto out;
		r = review_trees(repo, baset, tipt, &cache, &rv->whole, &rv->memo.stats,
			&rv->memo.nstats, &whole_odd);
		if (r < 0) {
			ret = r == SYNC_DIFF_TOO_BIG ? SYNC_DIFF_TOO_BIG : -1;
			goto out;
		}
	}

	/*
	 * --- the memo this review leaves for the next pull. Not its diff of trees with a name
	 * twice or out of order (whole_odd): a later pull would take it again or compose it
	 * with one that pairs those entries otherwise. Then its line counts only, like an
	 * unrelated branch's.
	 */
	if (rv->have_base && !rv->base_is_old && in->against && !whole_odd) {
		git_oid_cpy(&rv->memo.tip, in->tip);
		git_oid_cpy(&rv->memo.against, in->against);
		git_oid_cpy(&rv->memo.base, &rv->base);
		rv->memo.have_base = 1;
		rv->memo.unique = rv->unique;
		rv->memo.have_local = in->have_local;
		rv->memo.commits = rv->commits;
		rv->memo.ahead = rv->ahead;
		rv->memo.behind = rv->behind;
		rv->have_memo = 1;
	} else {
		/* Line counts still help the next pull of an unrelated branch (a pure function). */
		git_oid_cpy(&rv->memo.tip, in->tip);
		git_oid_cpy(&rv->memo.against, in->against ? in->against : in->tip);
		rv->have_memo = 1;
	}
	ret = 0;
out:
	if (stepped)
		history_free(&h);
	sync_linestats_free(since_l, nsince_l);
	free(cache.slot);
	git_tree_free(tipt);
	git_tree_free(baset);
	git_tree_free(oldt);
	git_commit_free(tipc);
	if (ret < 0) {
		sync_rpart_free(&rv->whole);
		sync_rpart_free(&rv->since);
		sync_rmemo_free(&rv->memo);
	}
	return ret;
}
