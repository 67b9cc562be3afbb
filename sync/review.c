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
 * - Diffstat. The tree diff itself opens only subtrees that differ (diff.c) and runs in
 *   full every time; the expensive part, the line counts, is a pure function of the two
 *   blobs' contents: the memo keeps them keyed by the blob ids, nothing else.
 * - Flags are never memoized: every changed path is classified on every pull.
 *
 * A wrong memo must never hide a flag, and the flags do not depend on it at all. The
 * counts and the base do; the unit test drives random histories (commits, force-pushes,
 * merges either way) and compares every pull's incremental review with one from scratch.
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

#define RMEMO_NAME "ocsb-sync.review"
#define RMEMO_MAX_BYTES (256u << 20)
#define RMEMO_MAX_STATS 2000000u
#define REVIEW_BLOB_MAX (1u << 20) /* .gitattributes / link targets read for the gate */
#define REVIEW_DIFF_MAX (64u << 20) /* larger blobs count as binary, unread */

/* --- walks */

int sync_walk_onto_set(git_repository *repo, const git_oid *from, const git_oid *stop,
	size_t limit, struct sync_oidset *set)
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
#define BLOOM_BITS_PER 16 /* ~0.2% false positives when full */
#define BLOOM_MAX_BYTES (16u << 20)

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

static int parse_stat(char *line, struct sync_linestat *s)
{
	char *f[6];
	size_t add, del, bin;

	if (fields(line, f, 5) != 5 || hex_oid(f[0], &s->old_id) < 0 ||
		hex_oid(f[1], &s->new_id) < 0 || parse_size(f[2], &add) < 0 ||
		parse_size(f[3], &del) < 0 || parse_size(f[4], &bin) < 0 || bin > 1)
		return -1;
	s->add = add;
	s->del = del;
	s->binary = (int)bin;
	return 0;
}

void sync_rmemo_free(struct sync_rmemo *m)
{
	free(m->stats);
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

int sync_rmemo_load(const char *gitdir, struct sync_rmemos *ms)
{
	char path[4096], *buf = NULL, *p, *end;
	struct stat st;
	size_t got = 0;
	int fd, r = 0;

	ms->v = NULL;
	ms->n = 0;
	if (rmemo_path(gitdir, "", path, sizeof(path)) < 0)
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0; /* none yet, or a link: no memo */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > RMEMO_MAX_BYTES ||
		!(buf = malloc((size_t)st.st_size + 1)))
		goto out;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	end = buf + got;
	p = buf;
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
out:
	free(buf);
	close(fd);
	if (r < 0)
		sync_rmemos_free(ms);
	return r;
}

const struct sync_rmemo *sync_rmemo_find(const struct sync_rmemos *ms, const char *ref)
{
	for (size_t i = 0; i < ms->n; i++)
		if (!strcmp(ms->v[i].ref, ref))
			return &ms->v[i];
	return NULL;
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

int sync_rmemo_save(const char *gitdir, const struct sync_rmemos *ms)
{
	char path[4096], tmp[4096];
	FILE *f;
	int r;

	if (rmemo_path(gitdir, "", path, sizeof(path)) < 0 ||
		rmemo_path(gitdir, ".tmp", tmp, sizeof(tmp)) < 0)
		return -ENAMETOOLONG;
	if (!ms->n)
		return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
	f = sync_memo_create(tmp, &r);
	if (!f)
		return r;
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

			fprintf(f, "%s %s %zu %zu %d\n",
				git_oid_is_zero(&s->old_id)
					? "-"
					: git_oid_tostr(t, sizeof(t), &s->old_id),
				git_oid_is_zero(&s->new_id)
					? "-"
					: git_oid_tostr(a, sizeof(a), &s->new_id),
				s->add, s->del, s->binary);
		}
	}
	return sync_memo_commit(f, tmp, path);
}

/* --- line counts, looked up by blob pair */

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
		size_t h = pair_hash(&v[i].old_id, &v[i].new_id) & (c->cap - 1);

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

static int read_blob(git_repository *repo, const git_oid *id, char **data, size_t *len)
{
	git_blob *b;
	git_object_size_t sz;

	*data = NULL;
	*len = 0;
	if (git_blob_lookup(&b, repo, id) < 0)
		return -1;
	sz = git_blob_rawsize(b);
	if (sz > REVIEW_BLOB_MAX)
		sz = REVIEW_BLOB_MAX;
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

static int is_gitlink(unsigned mode)
{
	return (mode & 0170000) == 0160000;
}

/*
 * Review the change from tree a to tree b: every changed path classified, line counts
 * from the cache when the blob pair is there. Counted pairs go to *learnt (may be NULL).
 */
static int review_trees(git_repository *repo, const git_tree *a, const git_tree *b,
	const struct stat_cache *cache, struct sync_rpart *out, struct sync_linestat **learnt,
	size_t *nlearnt)
{
	struct sync_deltas ds = {0};
	int r;

	r = sync_tree_diff(repo, a, b, SYNC_REVIEW_MAX_PATHS, &ds);
	if (r < 0)
		return r;
	out->v = calloc(ds.n ? ds.n : 1, sizeof(*out->v));
	if (!out->v) {
		sync_deltas_free(&ds);
		git_error_set_oom();
		return -1;
	}
	if (learnt) {
		*learnt = calloc(ds.n ? ds.n : 1, sizeof(**learnt));
		*nlearnt = 0;
		if (!*learnt) {
			sync_deltas_free(&ds);
			git_error_set_oom();
			return -1;
		}
	}
	for (size_t i = 0; i < ds.n; i++) {
		struct sync_delta *d = &ds.v[i];
		struct sync_rfile *f = &out->v[out->n];
		struct sync_entry e = {
			.path = d->path, .old_mode = d->old_mode, .new_mode = d->new_mode};
		char *od = NULL, *nd = NULL;
		const struct sync_linestat *hit = NULL;
		git_oid zero = {{0}};
		const git_oid *oa = d->old_mode ? &d->old_id : &zero;
		const git_oid *ob = d->new_mode ? &d->new_id : &zero;

		if (e.new_mode && sync_review_wants_data(d->path, e.new_mode))
			read_blob(repo, &d->new_id, &nd, &e.new_len);
		if (e.old_mode && sync_review_wants_data(d->path, e.old_mode))
			read_blob(repo, &d->old_id, &od, &e.old_len);
		e.new_data = nd;
		e.old_data = od;
		f->flags = sync_review_classify(&e);
		free(od);
		free(nd);
		f->path = d->path;
		d->path = NULL; /* now owned by f */
		f->old_mode = d->old_mode;
		f->new_mode = d->new_mode;
		out->n++;
		/* A submodule is a commit id, not content: no lines, as git diff --stat counts it. */
		if (is_gitlink(d->old_mode) || is_gitlink(d->new_mode))
			continue;
		hit = cache_get(cache, oa, ob);
		if (hit) {
			f->add = hit->add;
			f->del = hit->del;
			f->binary = hit->binary;
		} else {
			/* An entry whose object is not what its mode says: git fsck tells. */
			f->unreadable = line_stats(repo, d, &f->add, &f->del, &f->binary) < 0;
			git_error_clear();
		}
		out->ins += f->add;
		out->del += f->del;
		if (learnt && !f->unreadable) {
			struct sync_linestat *s = &(*learnt)[(*nlearnt)++];

			git_oid_cpy(&s->old_id, oa);
			git_oid_cpy(&s->new_id, ob);
			s->add = f->add;
			s->del = f->del;
			s->binary = f->binary;
		}
	}
	sync_deltas_free(&ds);
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
	struct stat_cache cache;
	const struct sync_rmemo *m = in->memo;
	struct sync_history h = {0};
	int r, ret = -1, stepped = 0, counted_commits = 0;

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
		int counted = git_graph_ahead_behind(&ahead, &behind, repo, in->tip, in->against) == 0;

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

	/* --- whole-branch diff */
	if (commit_tree(repo, in->tip, &tipt) < 0 ||
		(rv->have_base && commit_tree(repo, &rv->base, &baset) < 0))
		goto out;
	r = review_trees(repo, baset, tipt, &cache, &rv->whole, &rv->memo.stats, &rv->memo.nstats);
	if (r < 0) {
		ret = r == SYNC_DIFF_TOO_BIG ? SYNC_DIFF_TOO_BIG : -1;
		goto out;
	}

	/* --- what is new since the last pull */
	if (in->old && !git_oid_equal(in->old, in->tip)) {
		size_t behind;

		rv->have_since = 1;
		if (stepped)
			rv->since_commits = h.new_commits;
		else
			git_graph_ahead_behind(&rv->since_commits, &behind, repo, in->tip, in->old);
		git_error_clear();
		if (commit_tree(repo, in->old, &oldt) == 0) {
			r = review_trees(repo, oldt, tipt, &cache, &rv->since, NULL, NULL);
			if (r < 0) {
				ret = r == SYNC_DIFF_TOO_BIG ? SYNC_DIFF_TOO_BIG : -1;
				goto out;
			}
		} else {
			rv->have_since = 0; /* the old tip is gone from the store: nothing to say */
		}
	}

	/* --- the memo this review leaves for the next pull */
	if (rv->have_base && !rv->base_is_old && in->against) {
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
		/* Line counts still help the next pull of an unrelated branch. */
		git_oid_cpy(&rv->memo.tip, in->tip);
		git_oid_cpy(&rv->memo.against, in->against ? in->against : in->tip);
		rv->have_memo = 1;
	}
	ret = 0;
out:
	if (stepped)
		history_free(&h);
	free(cache.slot);
	git_tree_free(tipt);
	git_tree_free(baset);
	git_tree_free(oldt);
	if (ret < 0) {
		sync_rpart_free(&rv->whole);
		sync_rpart_free(&rv->since);
		sync_rmemo_free(&rv->memo);
	}
	return ret;
}
