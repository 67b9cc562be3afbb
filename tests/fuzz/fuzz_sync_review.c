/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the review of what the agent committed (sync/diff.c, sync/review.c,
 * with sync/check.c's gate and sync/rmemo.c's memo): trees built from the input as raw
 * objects in an in-memory repository (no disk), so they may be what no git would write:
 * entries out of order, a name twice, any 16-bit mode, ids of objects that do not exist.
 *
 * The input is text, one entry a line, "MODE PATH[=CONTENT]" (MODE in octal; PATH split
 * on '/', the directories made as needed; a tree mode with no content is a directory;
 * CONTENT "@" and 40 hex digits is an id taken as is, else the bytes of a blob, with
 * escapes \n \r \0 \\ and \*N: the byte before it N more times, up to 1.2 MiB a blob).
 * A line "~" keeps the tree's entries in the order given; "---" starts the next tree.
 * Trees: base, [old,] tip. Commits base <- [old <-] tip, the owner's branch at base.
 * Properties, abort() when broken:
 *   - sync_tree_diff of any two trees gives non-empty paths, canonical modes, and no
 *     change of kind in one entry; nothing from a tree to itself; on well-formed trees
 *     it is git_diff_tree_to_tree's answer, and the reverse diff is the mirror image;
 *   - the review from scratch lists sync_tree_diff's changes (whole branch and since
 *     the last pull), and each path's flags are the gate's on the whole blobs, however
 *     large (the review reads a bounded part);
 *   - the review again from its own memo (through the memo file's text), and the review
 *     composed from the memo of the old tip and the diff since, list the same paths with
 *     the same modes, line counts and flags as the one from scratch: a memo never hides
 *     a flag; a memo keeps a diff for later only when no tree in it held a name twice or
 *     out of order.
 * Build and run: `make fuzz FUZZ_ONLY=sync_review` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <git2/sys/mempack.h>
#include <git2/sys/repository.h>

#include "sync.h"
#include "fuzz_util.h"

#define MAX_BLOB (1200u * 1024)
#define MAX_NODES 4096

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	git_libgit2_init();
	/* No configuration read, whatever HOME holds. */
	for (int lvl = GIT_CONFIG_LEVEL_PROGRAMDATA; lvl <= GIT_CONFIG_LEVEL_GLOBAL; lvl++)
		git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, lvl, "");
	/* The agent's trees may name objects that do not exist: written raw anyway. */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
	fuzz_quiet(argc, argv);
	return 0;
}

/* --- trees from the input */

struct node {
	char *name; /* owned */
	unsigned mode;
	int dir; /* children below, written as a tree */
	int has_id;
	git_oid id;
	char *data; /* owned: blob content */
	size_t len;
	struct node **kids; /* owned */
	size_t nkids;
};

struct section {
	struct node *root;
	int unsorted, odd; /* odd: not what git writes (duplicates, modes, ids, order) */
	size_t nodes;
};

static void node_free(struct node *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->nkids; i++)
		node_free(n->kids[i]);
	free(n->kids);
	free(n->name);
	free(n->data);
	free(n);
}

static struct node *node_add(struct section *s, struct node *parent, const char *name, size_t len)
{
	struct node *n = calloc(1, sizeof(*n)), **kids;

	CHECK(n != NULL);
	n->name = fuzz_strndup(name, len);
	kids = realloc(parent->kids, (parent->nkids + 1) * sizeof(*kids));
	CHECK(kids != NULL);
	parent->kids = kids;
	kids[parent->nkids++] = n;
	s->nodes++;
	return n;
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* CONTENT with its escapes into n->data, or "@hex" into n->id. */
static void content(struct node *n, const char *p, size_t len)
{
	size_t cap = len + 16, o = 0;

	if (len == 41 && p[0] == '@') {
		for (int i = 0; i < 40; i++)
			if (hexval(p[1 + i]) < 0)
				goto blob;
		CHECK(git_oid_fromstrn(&n->id, p + 1, 40) == 0);
		n->has_id = 1;
		return;
	}
blob:
	n->data = malloc(cap);
	CHECK(n->data != NULL);
	for (size_t i = 0; i < len; i++) {
		char c = p[i];
		size_t rep = 1;

		if (c == '\\' && i + 1 < len) {
			c = p[++i];
			if (c == 'n')
				c = '\n';
			else if (c == 'r')
				c = '\r';
			else if (c == '0')
				c = '\0';
			else if (c == '*' && o) {
				rep = 0;
				while (i + 1 < len && p[i + 1] >= '0' && p[i + 1] <= '9' &&
					rep < 10000000)
					rep = rep * 10 + (size_t)(p[++i] - '0');
				c = n->data[o - 1];
			}
		}
		if (o + rep > MAX_BLOB)
			rep = MAX_BLOB - o;
		if (o + rep + 1 > cap) {
			cap = o + rep + 1 + cap;
			n->data = realloc(n->data, cap);
			CHECK(n->data != NULL);
		}
		memset(n->data + o, c, rep);
		o += rep;
	}
	n->len = o;
}

static int is_std_mode(unsigned m)
{
	return m == 0100644 || m == 0100755 || m == 0120000 || m == 0160000 || m == 040000;
}

static void section_line(struct section *s, const char *l, size_t len)
{
	const char *sp = memchr(l, ' ', len), *eq, *path;
	struct node *at = s->root, *n;
	unsigned mode = 0;
	size_t plen;

	if (len == 1 && l[0] == '~') {
		s->unsorted = s->odd = 1;
		return;
	}
	if (!sp || sp == l || sp - l > 7 || s->nodes >= MAX_NODES)
		return;
	for (const char *c = l; c < sp; c++) {
		if (*c < '0' || *c > '7')
			return;
		mode = mode * 8 + (unsigned)(*c - '0');
	}
	mode &= 0177777; /* what a tree entry holds */
	path = sp + 1;
	eq = memchr(path, '=', len - (size_t)(path - l));
	plen = eq ? (size_t)(eq - path) : len - (size_t)(path - l);
	if (!is_std_mode(mode) || (eq && eq + 1 < l + len && eq[1] == '@'))
		s->odd = 1;
	/* The directories on the way: the last one of that name made so far. */
	for (;;) {
		const char *slash = memchr(path, '/', plen);
		struct node *d = NULL;
		size_t cl;

		if (!slash)
			break;
		cl = (size_t)(slash - path);
		for (size_t i = at->nkids; i-- > 0;)
			if (at->kids[i]->dir && strlen(at->kids[i]->name) == cl &&
				!memcmp(at->kids[i]->name, path, cl)) {
				d = at->kids[i];
				break;
			}
		if (!d) {
			d = node_add(s, at, path, cl);
			d->mode = 040000;
			d->dir = 1;
		}
		at = d;
		plen -= cl + 1;
		path = slash + 1;
	}
	n = node_add(s, at, path, plen);
	n->mode = mode;
	if (eq)
		content(n, eq + 1, len - (size_t)(eq + 1 - l));
	n->dir = S_ISDIR(mode) && !n->has_id && !n->data;
	if (!n->dir && !n->has_id && !n->data)
		n->data = calloc(1, 1);
}

/* git's tree order: a tree's name ends in an implicit '/'. */
static int git_cmp(const void *x, const void *y)
{
	const struct node *a = *(struct node *const *)x, *b = *(struct node *const *)y;
	size_t la = strlen(a->name), lb = strlen(b->name), n = la < lb ? la : lb;
	int c = memcmp(a->name, b->name, n);
	unsigned ca, cb;

	if (c)
		return c;
	ca = la > n ? (unsigned char)a->name[n] : S_ISDIR(a->mode) ? '/' : 0;
	cb = lb > n ? (unsigned char)b->name[n] : S_ISDIR(b->mode) ? '/' : 0;
	return (int)ca - (int)cb;
}

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static int has_twice(const struct node *n)
{
	const char **v = calloc(n->nkids + 1, sizeof(*v));
	int twice = 0;

	CHECK(v != NULL);
	for (size_t i = 0; i < n->nkids; i++)
		v[i] = n->kids[i]->name;
	qsort(v, n->nkids, sizeof(*v), str_cmp);
	for (size_t i = 1; i < n->nkids; i++)
		twice |= !strcmp(v[i - 1], v[i]);
	free(v);
	return twice;
}

static void write_node(git_odb *odb, struct section *s, struct node *n)
{
	struct buf b = {0};

	if (n->has_id)
		return;
	if (!n->dir) {
		CHECK(git_odb_write(&n->id, odb, n->data, n->len, GIT_OBJECT_BLOB) == 0);
		n->has_id = 1;
		return;
	}
	for (size_t i = 0; i < n->nkids; i++)
		write_node(odb, s, n->kids[i]);
	if (!s->unsorted && n->nkids)
		qsort(n->kids, n->nkids, sizeof(*n->kids), git_cmp);
	if (has_twice(n))
		s->odd = 1; /* a name twice (a file and a tree of the same name too) */
	for (size_t i = 0; i < n->nkids; i++) {
		const struct node *k = n->kids[i];

		if (!k->name[0])
			s->odd = 1;
		if (i && git_cmp(&n->kids[i - 1], &n->kids[i]) >= 0)
			s->odd = 1; /* out of order */
		CHECK(buf_printf(&b, "%o %s", k->mode, k->name) == 0);
		CHECK(buf_append(&b, "", 1) == 0);
		CHECK(buf_append(&b, (const char *)k->id.id, GIT_OID_RAWSZ) == 0);
	}
	CHECK(git_odb_write(&n->id, odb, b.data ? b.data : "", b.len, GIT_OBJECT_TREE) == 0);
	n->has_id = 1;
	buf_free(&b);
}

/* --- the diff against libgit2's and itself */

static int canon_mode(unsigned m)
{
	return m == 0 || m == 0100644 || m == 0100755 || m == 0120000 || m == 0160000;
}

static int kind(unsigned m)
{
	return (m & 0170000) == 0120000 ? 1 : (m & 0170000) == 0160000 ? 2 : 0;
}

static void check_deltas(const struct sync_deltas *d)
{
	for (size_t i = 0; i < d->n; i++) {
		const struct sync_delta *x = &d->v[i];

		CHECK(x->path && x->path[0]);
		CHECK(canon_mode(x->old_mode) && canon_mode(x->new_mode));
		CHECK(x->old_mode || x->new_mode);
		if (x->old_mode && x->new_mode)
			CHECK(kind(x->old_mode) == kind(x->new_mode));
	}
}

static void check_tree_diff(git_repository *repo, git_tree *a, git_tree *b, int canonical)
{
	struct sync_deltas d, r, self;
	git_diff *ref;
	int k = sync_tree_diff(repo, a, b, SYNC_REVIEW_MAX_PATHS, &d);

	CHECK(k == 0 || k < 0);
	if (k < 0) {
		CHECK(d.n == 0 && d.v == NULL);
		return;
	}
	check_deltas(&d);
	CHECK(sync_tree_diff(repo, a, a, SYNC_REVIEW_MAX_PATHS, &self) == 0 && self.n == 0);
	if (canonical) {
		/* git's own answer; and the other way round, the same changes mirrored. */
		CHECK(git_diff_tree_to_tree(&ref, repo, a, b, NULL) == 0);
		CHECK(d.n == git_diff_num_deltas(ref));
		for (size_t i = 0; i < d.n; i++) {
			const git_diff_delta *g = git_diff_get_delta(ref, i);

			CHECK(!strcmp(d.v[i].path, g->new_file.path));
			CHECK(d.v[i].old_mode == g->old_file.mode);
			CHECK(d.v[i].new_mode == g->new_file.mode);
			CHECK(!d.v[i].old_mode || git_oid_equal(&d.v[i].old_id, &g->old_file.id));
			CHECK(!d.v[i].new_mode || git_oid_equal(&d.v[i].new_id, &g->new_file.id));
		}
		git_diff_free(ref);
		CHECK(sync_tree_diff(repo, b, a, SYNC_REVIEW_MAX_PATHS, &r) == 0);
		CHECK(r.n == d.n);
		for (size_t i = 0, j = 0; i < d.n; i++, j++) {
			/* A change of kind is a deletion then an addition, both ways. */
			if (d.v[i].old_mode && d.v[i].new_mode) {
				CHECK(!strcmp(r.v[j].path, d.v[i].path));
				CHECK(r.v[j].old_mode == d.v[i].new_mode &&
					r.v[j].new_mode == d.v[i].old_mode);
			} else {
				CHECK(!strcmp(r.v[j].path, d.v[i].path));
			}
		}
		sync_deltas_free(&r);
	}
	sync_deltas_free(&d);
}

/* --- the review */

/* review.c reads this much of a .gitattributes or a link's target (REVIEW_BLOB_MAX). */
#define REVIEW_READS (1u << 20)

/*
 * The gate on the whole blobs, as review.c's classify would with no bound; *big when
 * either blob is longer than what the review reads (an old blob cut short hides old lines,
 * so the review may raise more flags than the whole blobs give: on the safe side).
 */
static unsigned gate(git_repository *repo, const char *path, unsigned om, const git_oid *oid,
	unsigned nm, const git_oid *nid, int *big)
{
	struct sync_entry e = {.path = path, .old_mode = om, .new_mode = nm};
	git_blob *ob = NULL, *nb = NULL;
	unsigned f;

	if (om && sync_review_wants_data(path, om) && git_blob_lookup(&ob, repo, oid) == 0) {
		e.old_data = git_blob_rawcontent(ob);
		e.old_len = (size_t)git_blob_rawsize(ob);
	}
	if (nm && sync_review_wants_data(path, nm) && git_blob_lookup(&nb, repo, nid) == 0) {
		e.new_data = git_blob_rawcontent(nb);
		e.new_len = (size_t)git_blob_rawsize(nb);
	}
	*big = e.new_len > REVIEW_READS || e.old_len > REVIEW_READS;
	f = sync_review_classify(&e);
	git_blob_free(ob);
	git_blob_free(nb);
	git_error_clear();
	return f;
}

/* p lists the changes from to to (and so does learnt, if given); 1 if odd trees were met. */
static int check_part_is_diff(git_repository *repo, const struct sync_rpart *p, const git_oid *from,
	const git_oid *to, const struct sync_linestat *learnt, size_t nlearnt)
{
	int odd;

	git_commit *ca, *cb;
	git_tree *ta, *tb;
	struct sync_deltas d;

	CHECK(git_commit_lookup(&ca, repo, from) == 0 && git_commit_lookup(&cb, repo, to) == 0);
	CHECK(git_commit_tree(&ta, ca) == 0 && git_commit_tree(&tb, cb) == 0);
	CHECK(sync_tree_diff(repo, ta, tb, SYNC_REVIEW_MAX_PATHS, &d) == 0);
	CHECK(p->n == d.n);
	for (size_t i = 0; i < d.n; i++) {
		const struct sync_rfile *f = &p->v[i];
		unsigned g;
		int big;

		CHECK(!strcmp(f->path, d.v[i].path));
		CHECK(f->old_mode == d.v[i].old_mode && f->new_mode == d.v[i].new_mode);
		g = gate(repo, f->path, f->old_mode, &d.v[i].old_id, f->new_mode, &d.v[i].new_id,
			&big);

		/* What the gate finds in the whole blob, the review finds; the same, if it read all. */
		CHECK((f->flags & g) == g);
		if (!big)
			CHECK(f->flags == g);
		/* What the memo keeps for the next pull: the same changes, blob pairs included. */
		if (learnt) {
			CHECK(i < nlearnt && !strcmp(learnt[i].path, f->path));
			CHECK(!f->old_mode || git_oid_equal(&learnt[i].old_id, &d.v[i].old_id));
			CHECK(!f->new_mode || git_oid_equal(&learnt[i].new_id, &d.v[i].new_id));
		}
	}
	odd = d.odd;
	sync_deltas_free(&d);
	git_tree_free(ta);
	git_tree_free(tb);
	git_commit_free(ca);
	git_commit_free(cb);
	return odd;
}

static void dump_part(const char *what, const struct sync_rpart *p)
{
	FILE *f = fuzz_err ? fuzz_err : stderr;

	fprintf(f, "%s: %zu paths, +%zu -%zu\n", what, p->n, p->ins, p->del);
	for (size_t i = 0; i < p->n; i++)
		fprintf(f, "  %o %o +%zu -%zu b%d u%d f%x %s\n", p->v[i].old_mode, p->v[i].new_mode,
			p->v[i].add, p->v[i].del, p->v[i].binary, p->v[i].unreadable, p->v[i].flags,
			p->v[i].path);
}

/* The same paths, modes, counts and flags (dumped first when not). */
static void same_part(const struct sync_rpart *a, const struct sync_rpart *b)
{
	int same = a->n == b->n && a->ins == b->ins && a->del == b->del;

	for (size_t i = 0; same && i < a->n; i++)
		same = !strcmp(a->v[i].path, b->v[i].path) && a->v[i].flags == b->v[i].flags &&
			a->v[i].old_mode == b->v[i].old_mode &&
			a->v[i].new_mode == b->v[i].new_mode && a->v[i].add == b->v[i].add &&
			a->v[i].del == b->v[i].del && a->v[i].binary == b->v[i].binary &&
			a->v[i].unreadable == b->v[i].unreadable;
	if (!same) {
		dump_part("from scratch", a);
		dump_part("from the memo", b);
	}
	CHECK(a->n == b->n && a->ins == b->ins && a->del == b->del);
	for (size_t i = 0; i < a->n; i++) {
		const struct sync_rfile *x = &a->v[i], *y = &b->v[i];

		CHECK(!strcmp(x->path, y->path));
		CHECK(x->old_mode == y->old_mode && x->new_mode == y->new_mode);
		CHECK(x->add == y->add && x->del == y->del);
		CHECK(x->binary == y->binary && x->unreadable == y->unreadable);
		CHECK(x->flags == y->flags);
	}
}

/* The memo as the next pull gets it: through the file's text. */
static void memo_through_file(const struct sync_rmemo *m, struct sync_rmemos *out)
{
	struct sync_rmemos one = {.v = (struct sync_rmemo *)m, .n = 1};
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK(f != NULL);
	sync_rmemo_write(f, &one);
	CHECK(fclose(f) == 0);
	CHECK(sync_rmemo_parse(text, len, out) == 0);
	free(text);
}

static int review(git_repository *repo, const git_oid *tip, const git_oid *base, const git_oid *old,
	const struct sync_rmemo *memo, struct sync_review *rv)
{
	struct sync_review_in in = {.tip = tip,
		.against = base,
		.have_local = 1,
		.old = old,
		.memo = memo,
		.walk_limit = SYNC_HISTORY_WALK};
	int r = sync_review_run(repo, &in, rv);

	CHECK(r == 0 || r == SYNC_DIFF_TOO_BIG || r == -1);
	return r;
}

static void check_review(
	git_repository *repo, const git_oid *base, const git_oid *old, const git_oid *tip)
{
	struct sync_review full, again, first, composed;
	struct sync_rmemos m1 = {0}, m2 = {0};
	int r, odd;

	r = review(repo, tip, base, old, NULL, &full);
	if (r != 0) {
		sync_review_free(&full);
		return;
	}
	CHECK(full.have_base && git_oid_equal(&full.base, base));
	CHECK(full.commits == (old ? 2u : 1u) && full.ahead == full.commits && full.behind == 0);
	odd = check_part_is_diff(repo, &full.whole, base, tip, full.memo.stats, full.memo.nstats);
	/* A diff through odd trees is not left to be taken again, nor composed. */
	CHECK(full.memo.have_base == !odd);
	if (old) {
		CHECK(full.have_since && full.since_commits == 1);
		check_part_is_diff(repo, &full.since, old, tip, NULL, 0);
	}
	/* The same review again, from its own memo. */
	CHECK(full.have_memo);
	snprintf(full.memo.ref, sizeof(full.memo.ref), "refs/remotes/ai-dev/b");
	memo_through_file(&full.memo, &m1);
	CHECK(m1.n == 1);
	CHECK(review(repo, tip, base, old, &m1.v[0], &again) == 0);
	CHECK(again.diff_from_memo == !odd);
	same_part(&full.whole, &again.whole);
	/* Composed: the old tip's review first, then the tip from its memo and the diff since. */
	if (old && review(repo, old, base, NULL, NULL, &first) == 0) {
		snprintf(first.memo.ref, sizeof(first.memo.ref), "refs/remotes/ai-dev/b");
		memo_through_file(&first.memo, &m2);
		CHECK(m2.n == 1);
		CHECK(review(repo, tip, base, old, &m2.v[0], &composed) == 0);
		same_part(&full.whole, &composed.whole);
		same_part(&full.since, &composed.since);
		sync_review_free(&composed);
		sync_review_free(&first);
	}
	sync_rmemos_free(&m1);
	sync_rmemos_free(&m2);
	sync_review_free(&again);
	sync_review_free(&full);
}

/* --- the input */

static void commit_of(git_odb *odb, const git_oid *tree, const git_oid *parent, git_oid *out)
{
	char hex[GIT_OID_HEXSZ + 1], phex[GIT_OID_HEXSZ + 1];
	struct buf b = {0};

	git_oid_tostr(hex, sizeof(hex), tree);
	CHECK(buf_printf(&b, "tree %s\n", hex) == 0);
	if (parent)
		CHECK(buf_printf(&b, "parent %s\n", git_oid_tostr(phex, sizeof(phex), parent)) ==
			0);
	CHECK(buf_printf(&b,
		      "author A <a@x> 1700000000 +0000\ncommitter A <a@x> 1700000000 "
		      "+0000\n\nwork\n") == 0);
	CHECK(git_odb_write(out, odb, b.data, b.len, GIT_OBJECT_COMMIT) == 0);
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct section sec[3] = {{0}};
	struct fuzz_in in = {data, size};
	git_odb *odb = NULL;
	git_odb_backend *mp = NULL;
	git_repository *repo = NULL;
	git_tree *t[3] = {NULL};
	git_oid c[3];
	size_t ns = 1, len;
	const char *l;
	int ok = 1;

	for (int i = 0; i < 3; i++) {
		sec[i].root = calloc(1, sizeof(*sec[i].root));
		CHECK(sec[i].root != NULL);
		sec[i].root->dir = 1;
		sec[i].root->mode = 040000;
		sec[i].root->name = fuzz_strndup("", 0);
	}
	while ((l = fuzz_until(&in, '\n', &len))) {
		if (len == 3 && !memcmp(l, "---", 3)) {
			if (ns == 3)
				break;
			ns++;
			continue;
		}
		section_line(&sec[ns - 1], l, len);
	}
	CHECK(git_odb_new(&odb) == 0 && git_mempack_new(&mp) == 0);
	CHECK(git_odb_add_backend(odb, mp, 1) == 0);
	CHECK(git_repository_wrap_odb(&repo, odb) == 0);
	for (size_t i = 0; i < ns; i++) {
		write_node(odb, &sec[i], sec[i].root);
		if (git_tree_lookup(&t[i], repo, &sec[i].root->id) < 0)
			ok = 0; /* libgit2 refuses to parse it: nothing to review */
	}
	if (ok) {
		/* Each step, the whole way, and from nothing (the reverse is checked in each). */
		for (size_t i = 0; i + 1 < ns; i++)
			check_tree_diff(repo, t[i], t[i + 1], !sec[i].odd && !sec[i + 1].odd);
		if (ns == 3)
			check_tree_diff(repo, t[0], t[2], !sec[0].odd && !sec[2].odd);
		check_tree_diff(repo, NULL, t[ns - 1], !sec[ns - 1].odd);
		commit_of(odb, &sec[0].root->id, NULL, &c[0]);
		for (size_t i = 1; i < ns; i++)
			commit_of(odb, &sec[i].root->id, &c[i - 1], &c[i]);
		if (ns > 1)
			check_review(repo, &c[0], ns == 3 ? &c[1] : NULL, &c[ns - 1]);
	}
	git_error_clear();
	for (int i = 0; i < 3; i++) {
		git_tree_free(t[i]);
		node_free(sec[i].root);
	}
	git_repository_free(repo);
	git_odb_free(odb);
	return 0;
}
