/* SPDX-License-Identifier: MIT */
/*
 * Tree-to-tree changes for the review gate. libgit2's git_diff_tree_to_tree reads every
 * subtree of both sides, changed or not: a one-file commit in a 5,000-file project cost
 * ~30 ms of delta-chain inflating, and it grows with the project, not with the change.
 * Here a subtree whose id is the same on both sides is never opened.
 *
 * What comes out matches git_diff_tree_to_tree with default options (unit-tested against
 * it): one entry per changed path in git's order, a type change (file <-> link <-> tree
 * <-> submodule) as a deletion then an addition, a mode change alone as a modification,
 * no rename detection.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sync.h"

#define DIFF_MAX_DEPTH 4096

struct diff_walk {
	git_repository *repo;
	struct sync_deltas *out;
	int odd; /* a tree opened is not in strict git order */
	size_t max; /* entries in out before SYNC_DIFF_TOO_BIG */
	char *path; /* the current directory's prefix, "" or "a/b/" */
	size_t len, cap;
};

/*
 * The mode git itself gives an entry (canon_mode): libgit2's git_tree_entry_filemode
 * tests the executable bit first and makes a raw 120755 a file where git checks out a
 * symbolic link, and a raw 160755 a file where git sees a submodule.
 */
static unsigned mode_of(const git_tree_entry *e)
{
	unsigned m = git_tree_entry_filemode_raw(e);

	if (S_ISREG(m))
		return m & 0100 ? 0100755 : 0100644;
	if (S_ISLNK(m))
		return 0120000;
	if (S_ISDIR(m))
		return 0040000;
	return 0160000;
}

static int is_tree(const git_tree_entry *e)
{
	return e && mode_of(e) == 0040000;
}

/* The kind of entry a change between two modes may not cross without a delete+add. */
static int kind(unsigned mode)
{
	switch (mode & 0170000) {
	case 0040000:
		return 1; /* tree */
	case 0120000:
		return 2; /* symbolic link */
	case 0160000:
		return 3; /* submodule */
	default:
		return 0; /* blob */
	}
}

/* git's tree order: names compared as bytes, a tree's name ending in an implicit '/'. */
static int entry_cmp(const git_tree_entry *x, const git_tree_entry *y)
{
	const char *a = git_tree_entry_name(x), *b = git_tree_entry_name(y);
	size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
	int c = memcmp(a, b, n);
	unsigned char ca, cb;

	if (c)
		return c;
	ca = la > n ? (unsigned char)a[n] : is_tree(x) ? '/' : 0;
	cb = lb > n ? (unsigned char)b[n] : is_tree(y) ? '/' : 0;
	return (int)ca - (int)cb;
}

static int path_push(struct diff_walk *w, const char *name, int dir)
{
	size_t n = strlen(name), need = w->len + n + 2;

	if (need > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(w->path, cap);
		if (!p) {
			git_error_set_oom();
			return -1;
		}
		w->path = p;
		w->cap = cap;
	}
	memcpy(w->path + w->len, name, n);
	w->len += n;
	if (dir)
		w->path[w->len++] = '/';
	w->path[w->len] = '\0';
	return 0;
}

static int emit(struct diff_walk *w, const git_tree_entry *o, const git_tree_entry *n)
{
	const git_tree_entry *e = n ? n : o;
	struct sync_deltas *d = w->out;
	struct sync_delta *nd;
	size_t keep = w->len;
	int r;

	if (d->n >= w->max) {
		char msg[64];

		snprintf(msg, sizeof(msg), "more than %zu changed paths", w->max);
		git_error_set_str(GIT_ERROR_INVALID, msg);
		return SYNC_DIFF_TOO_BIG;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 16;

		nd = realloc(d->v, cap * sizeof(*nd));
		if (!nd) {
			git_error_set_oom();
			return -1;
		}
		d->v = nd;
		d->cap = cap;
	}
	r = path_push(w, git_tree_entry_name(e), 0);
	if (r < 0)
		return r;
	nd = &d->v[d->n];
	memset(nd, 0, sizeof(*nd));
	nd->path = strdup(w->path);
	w->len = keep;
	w->path[keep] = '\0';
	if (!nd->path) {
		git_error_set_oom();
		return -1;
	}
	if (o) {
		nd->old_mode = mode_of(o);
		git_oid_cpy(&nd->old_id, git_tree_entry_id(o));
	}
	if (n) {
		nd->new_mode = mode_of(n);
		git_oid_cpy(&nd->new_id, git_tree_entry_id(n));
	}
	d->n++;
	return 0;
}

static int walk(struct diff_walk *w, const git_tree *a, const git_tree *b, unsigned depth);

/* Entry o and/or n at the same place of the walk (either may be NULL). */
static int one(
	struct diff_walk *w, const git_tree_entry *o, const git_tree_entry *n, unsigned depth)
{
	git_tree *ta = NULL, *tb = NULL;
	size_t keep = w->len;
	int r;

	if (o && n) {
		if (git_oid_equal(git_tree_entry_id(o), git_tree_entry_id(n)) &&
			mode_of(o) == mode_of(n))
			return 0;
		if (kind(mode_of(o)) != kind(mode_of(n))) {
			/* Unreachable for trees (they sort apart); links, submodules, blobs. */
			r = one(w, o, NULL, depth);
			return r < 0 ? r : one(w, NULL, n, depth);
		}
	}
	if (!is_tree(o) && !is_tree(n))
		return emit(w, o, n);
	if (depth >= DIFF_MAX_DEPTH) {
		git_error_set_str(GIT_ERROR_INVALID, "a tree is nested more than 4096 levels deep");
		return SYNC_DIFF_TOO_BIG;
	}
	r = o ? git_tree_lookup(&ta, w->repo, git_tree_entry_id(o)) : 0;
	if (r == 0 && n)
		r = git_tree_lookup(&tb, w->repo, git_tree_entry_id(n));
	if (r < 0)
		goto out;
	r = path_push(w, git_tree_entry_name(n ? n : o), 1);
	if (r == 0)
		r = walk(w, ta, tb, depth + 1);
	w->len = keep;
	if (w->path)
		w->path[keep] = '\0';
out:
	git_tree_free(ta);
	git_tree_free(tb);
	return r;
}

/*
 * A name twice (of one kind: a file and a tree of one name sort apart), or entries out of
 * order: git never writes such a tree (git fsck refuses it), and the walk pairs its
 * entries by position, so a diff of it depends on the other side's order.
 */
static int strict_order(const git_tree *t, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (entry_cmp(git_tree_entry_byindex(t, i - 1), git_tree_entry_byindex(t, i)) >= 0)
			return 0;
	return 1;
}

static int walk(struct diff_walk *w, const git_tree *a, const git_tree *b, unsigned depth)
{
	size_t na = a ? git_tree_entrycount(a) : 0, nb = b ? git_tree_entrycount(b) : 0;
	size_t i = 0, j = 0;
	int r = 0;

	if (!strict_order(a, na) || !strict_order(b, nb))
		w->odd = 1;
	while (r == 0 && (i < na || j < nb)) {
		const git_tree_entry *x = i < na ? git_tree_entry_byindex(a, i) : NULL;
		const git_tree_entry *y = j < nb ? git_tree_entry_byindex(b, j) : NULL;
		int c = !x ? 1 : !y ? -1 : entry_cmp(x, y);

		if (c < 0)
			r = one(w, x, NULL, depth), i++;
		else if (c > 0)
			r = one(w, NULL, y, depth), j++;
		else
			r = one(w, x, y, depth), i++, j++;
	}
	return r;
}

int sync_tree_diff(git_repository *repo, const git_tree *a, const git_tree *b, size_t max,
	struct sync_deltas *out)
{
	struct diff_walk w = {.repo = repo, .out = out, .max = max};
	int r;

	memset(out, 0, sizeof(*out));
	r = walk(&w, a, b, 0);
	free(w.path);
	if (r < 0)
		sync_deltas_free(out);
	else
		out->odd = w.odd;
	return r < 0 ? r : 0;
}

void sync_deltas_free(struct sync_deltas *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i].path);
	free(d->v);
	memset(d, 0, sizeof(*d));
}

/*
 * --- connectivity of a small fetch, without running git
 *
 * Refs the owner already has are trusted complete (what git's own check assumes). Walk
 * from each fetched tip down to such ref tips; each commit on the way must be readable,
 * and so must everything its tree has that its first parent's tree has not (a subtree
 * or blob equal to the parent's is complete because the parent is). A root commit, a
 * long walk or a big change is left to git rev-list.
 */
#define FAST_MAX_COMMITS 256
#define FAST_MAX_ENTRIES 20000
#define FAST_MAX_REFS 10000

/* A stack of ids: the commits still to look at. */
struct oidstack {
	git_oid *v;
	size_t n, cap;
};

static int oidstack_push(struct oidstack *s, const git_oid *id)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		git_oid *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -1;
		s->v = v;
		s->cap = cap;
	}
	git_oid_cpy(&s->v[s->n++], id);
	return 0;
}

/* Open addressing on the id's first bytes (ids are hashes); the zero id marks a free slot. */
static size_t oidset_slot(const struct sync_oidset *s, const git_oid *id)
{
	size_t h;

	memcpy(&h, id->id, sizeof(h));
	for (h &= s->cap - 1; !git_oid_is_zero(&s->v[h]); h = (h + 1) & (s->cap - 1))
		if (git_oid_equal(&s->v[h], id))
			break;
	return h;
}

int sync_oidset_has(const struct sync_oidset *s, const git_oid *id)
{
	return s->cap && !git_oid_is_zero(id) && !git_oid_is_zero(&s->v[oidset_slot(s, id)]);
}

int sync_oidset_add(struct sync_oidset *s, const git_oid *id)
{
	size_t h;

	if (git_oid_is_zero(id))
		return 1; /* never a real object: nothing to remember */
	if (2 * (s->n + 1) > s->cap) { /* keep at most half full */
		struct sync_oidset g = {.cap = s->cap ? 2 * s->cap : 64};

		g.v = calloc(g.cap, sizeof(*g.v));
		if (!g.v)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (!git_oid_is_zero(&s->v[i]))
				git_oid_cpy(&g.v[oidset_slot(&g, &s->v[i])], &s->v[i]);
		g.n = s->n;
		free(s->v);
		*s = g;
	}
	h = oidset_slot(s, id);
	if (!git_oid_is_zero(&s->v[h]))
		return 0;
	git_oid_cpy(&s->v[h], id);
	s->n++;
	return 1;
}

void sync_oidset_free(struct sync_oidset *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

int sync_trusted_add(struct sync_oidset *known, git_reference *ref)
{
	const char *n = git_reference_name(ref);

	/*
	 * A ref's target is taken as it is, without reading it (500 branches and 3,000 tags:
	 * 3,500 object reads saved): were it not a commit (an annotated tag), no commit could
	 * have its id, and one trusted commit less only means more checking.
	 */
	if ((strncmp(n, "refs/heads/", 11) && strncmp(n, "refs/tags/", 10) &&
		    strncmp(n, "refs/remotes/", 13)) ||
		git_reference_type(ref) != GIT_REFERENCE_DIRECT)
		return 0;
	if (known->n >= FAST_MAX_REFS || sync_oidset_add(known, git_reference_target(ref)) < 0)
		return -1;
	return 0;
}

/* The commits the owner's branches, tags and remote-tracking refs point at. */
static int ref_tips(git_repository *repo, struct sync_oidset *out)
{
	git_reference_iterator *it;
	git_reference *ref;
	int ret = 0;

	if (git_reference_iterator_new(&it, repo) < 0)
		return -1;
	while (ret == 0 && git_reference_next(&ref, it) == 0) {
		ret = sync_trusted_add(out, ref);
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	git_error_clear();
	return ret;
}

/*
 * Everything c's tree has beyond its first parent's is in the store, each object of the
 * type its entry says: 1, -1 (why), 0 not decided here (too big, too deep, no memory).
 */
static int fast_tree(git_repository *repo, git_commit *c, size_t *entries, char *why, size_t n)
{
	git_commit *p = NULL;
	git_tree *pt = NULL, *ct = NULL;
	struct sync_deltas ds = {0};
	git_odb *odb = NULL;
	char hex[GIT_OID_HEXSZ + 1], chex[GIT_OID_HEXSZ + 1];
	int ret = -1, r;

	git_oid_tostr(chex, sizeof(chex), git_commit_id(c));
	if (git_commit_parent(&p, c, 0) < 0) {
		snprintf(why, n, "missing commit %s (parent of %s)",
			git_oid_tostr(hex, sizeof(hex), git_commit_parent_id(c, 0)), chex);
		goto out;
	}
	r = git_commit_tree(&pt, p);
	if (r == 0)
		r = git_commit_tree(&ct, c);
	if (r == 0)
		r = sync_tree_diff(repo, pt, ct, FAST_MAX_ENTRIES - *entries, &ds);
	if (r < 0 && r != GIT_ENOTFOUND) {
		ret = 0; /* too many paths, too deep, out of memory: git rev-list decides */
		goto out;
	}
	if (r < 0) {
		const git_error *e = git_error_last();

		snprintf(why, n, "missing tree in commit %s (%s)", chex,
			e ? e->message : "unreadable");
		goto out;
	}
	*entries += ds.n;
	if (git_repository_odb(&odb, repo) < 0) {
		ret = 0;
		goto out;
	}
	for (size_t i = 0; i < ds.n; i++) {
		unsigned m = ds.v[i].new_mode;
		git_object_t type;
		size_t len;

		if (!m || m == 0160000 || m == 0040000) /* gone, a submodule, a tree opened */
			continue;
		if (git_odb_read_header(&len, &type, odb, &ds.v[i].new_id) < 0) {
			snprintf(why, n, "missing blob %s (%s in commit %s)",
				git_oid_tostr(hex, sizeof(hex), &ds.v[i].new_id), ds.v[i].path,
				chex);
			goto out;
		}
		if (type != GIT_OBJECT_BLOB) {
			snprintf(why, n, "%s in commit %s is a %s, its mode says a blob",
				ds.v[i].path, chex, git_object_type2string(type));
			goto out;
		}
	}
	ret = 1;
out:
	git_odb_free(odb);
	sync_deltas_free(&ds);
	git_tree_free(pt);
	git_tree_free(ct);
	git_commit_free(p);
	git_error_clear();
	return ret;
}

int sync_fast_connected(
	git_repository *repo, const git_oid *tips, size_t ntips, char *why, size_t n)
{
	return sync_fast_connected_known(repo, tips, ntips, NULL, why, n);
}

int sync_fast_connected_known(git_repository *repo, const git_oid *tips, size_t ntips,
	const struct sync_oidset *trusted, char *why, size_t n)
{
	struct sync_oidset own = {0}, seen = {0};
	const struct sync_oidset *known = trusted ? trusted : &own;
	struct oidstack queue = {0}, walk = {0};
	size_t entries = 0;
	int ret = 0, root = 0;

	why[0] = '\0';
	if (git_repository_is_shallow(repo) != 0)
		goto out; /* a cut history looks incomplete here: git knows where it is cut */
	if (!trusted && ref_tips(repo, &own) < 0)
		goto out;
	for (size_t i = 0; i < ntips; i++)
		if (oidstack_push(&queue, &tips[i]) < 0)
			goto out;
	/*
	 * The commits first, without their trees: a history too long for this check (20,000
	 * commits, or merges of the owner's older commits) is found in a few reads, not after
	 * FAST_MAX_COMMITS tree diffs (about 80 ms) that git rev-list then does again.
	 */
	while (queue.n) {
		git_oid id = queue.v[--queue.n];
		git_commit *c;
		unsigned parents;

		if (sync_oidset_has(known, &id) || sync_oidset_has(&seen, &id))
			continue;
		if (seen.n >= FAST_MAX_COMMITS || sync_oidset_add(&seen, &id) < 0 ||
			oidstack_push(&walk, &id) < 0)
			goto out;
		if (git_commit_lookup(&c, repo, &id) < 0) {
			char hex[GIT_OID_HEXSZ + 1];

			snprintf(why, n, "missing commit %s", git_oid_tostr(hex, sizeof(hex), &id));
			ret = -1;
			goto out;
		}
		parents = git_commit_parentcount(c);
		for (unsigned i = 0; i < parents; i++)
			if (queue.n >= 4 * FAST_MAX_COMMITS ||
				oidstack_push(&queue, git_commit_parent_id(c, i)) < 0) {
				git_commit_free(c);
				goto out;
			}
		git_commit_free(c);
		if (!parents) {
			/* A root: all of its tree is new, git rev-list reads it (after the rest). */
			root = 1;
			walk.n--;
			break;
		}
	}
	/* Then each commit's tree beyond its first parent's: a missing one is said here. */
	for (size_t k = 0; k < walk.n; k++) {
		git_commit *c;
		int r;

		if (git_commit_lookup(&c, repo, &walk.v[k]) < 0)
			goto out; /* read a moment ago */
		r = fast_tree(repo, c, &entries, why, n);
		git_commit_free(c);
		if (r != 1) {
			ret = r;
			goto out;
		}
	}
	if (root)
		goto out;
	ret = 1;
out:
	sync_oidset_free(&own);
	sync_oidset_free(&seen);
	free(queue.v);
	free(walk.v);
	git_error_clear();
	return ret;
}
