/* SPDX-License-Identifier: MIT */
/*
 * The sync walks against libgit2 on scratch repositories: the tree diff, the
 * unrelated-histories memo, the connectivity of a small fetch and the id set.
 */
#define _GNU_SOURCE
#include "sync_unit.h"

/* --- tree diff (diff.c) against libgit2's git_diff_tree_to_tree, on random trees */

static unsigned rnd_state;
static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 16) % n;
}

/* Names chosen to exercise git's order: "a" the file sorts before "a.b", "a" the tree after. */
static const char *const rnd_names[] = {
	"a", "a.b", "a-b", "a0", "a_", "b", "ab", "z", "A", "\xc3\xa9"};
#define NNAMES (sizeof(rnd_names) / sizeof(rnd_names[0]))

static void rnd_blob(git_repository *repo, git_oid *id, const char *tag)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%s %u\n", tag, rnd(4));

	assert_int_equal(git_blob_create_from_buffer(id, repo, buf, (size_t)n), 0);
}

/* A random tree; `from` (may be NULL) is the tree it mutates a little. */
static void rnd_tree(git_repository *repo, const git_tree *from, unsigned depth, git_oid *out)
{
	git_treebuilder *tb;

	assert_int_equal(git_treebuilder_new(&tb, repo, from), 0);
	for (size_t k = 0; k < NNAMES; k++) {
		const char *name = rnd_names[k];
		const git_tree_entry *cur = git_treebuilder_get(tb, name);
		unsigned what = rnd(from ? 16 : 6);
		git_oid id;

		if (from && what >= 6) {
			/* mostly keep what is there; recurse into kept subtrees */
			if (cur && git_tree_entry_filemode(cur) == GIT_FILEMODE_TREE && what < 9 &&
				depth < 4) {
				git_tree *sub;

				assert_int_equal(
					git_tree_lookup(&sub, repo, git_tree_entry_id(cur)), 0);
				rnd_tree(repo, sub, depth + 1, &id);
				git_tree_free(sub);
				assert_int_equal(git_treebuilder_insert(
							 NULL, tb, name, &id, GIT_FILEMODE_TREE),
					0);
			}
			continue;
		}
		switch (what) {
		case 0:
			if (cur)
				assert_int_equal(git_treebuilder_remove(tb, name), 0);
			break;
		case 1:
			rnd_blob(repo, &id, "f");
			assert_int_equal(
				git_treebuilder_insert(NULL, tb, name, &id, GIT_FILEMODE_BLOB), 0);
			break;
		case 2:
			rnd_blob(repo, &id, rnd(2) ? "f" : "x");
			assert_int_equal(
				git_treebuilder_insert(NULL, tb, name, &id,
					rnd(2) ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB),
				0);
			break;
		case 3:
			rnd_blob(repo, &id, "target");
			assert_int_equal(
				git_treebuilder_insert(NULL, tb, name, &id, GIT_FILEMODE_LINK), 0);
			break;
		case 4:
			rnd_blob(repo, &id, "commit"); /* a gitlink's id need not exist */
			assert_int_equal(
				git_treebuilder_insert(NULL, tb, name, &id, GIT_FILEMODE_COMMIT),
				0);
			break;
		default:
			if (depth < 4) {
				rnd_tree(repo, NULL, depth + 1, &id);
				assert_int_equal(git_treebuilder_insert(
							 NULL, tb, name, &id, GIT_FILEMODE_TREE),
					0);
			}
			break;
		}
	}
	assert_int_equal(git_treebuilder_write(out, tb), 0);
	git_treebuilder_free(tb);
}

static void tree_diff_matches_libgit2(void **state)
{
	git_repository *repo;
	unsigned compared = 0, changes = 0, kinds = 0;

	(void)state;
	/* objects in memory: thousands of loose files would make this test slow */
	{
		git_odb *odb;
		git_odb_backend *mp;

		assert_int_equal(git_odb_new(&odb), 0);
		assert_int_equal(git_mempack_new(&mp), 0);
		assert_int_equal(git_odb_add_backend(odb, mp, 1), 0);
		assert_int_equal(git_repository_wrap_odb(&repo, odb), 0);
		git_odb_free(odb);
	}
	for (unsigned seed = 1; seed <= 300; seed++) {
		git_oid ida, idb;
		git_tree *a, *b;
		git_diff *ref;
		struct sync_deltas mine;

		rnd_state = seed;
		rnd_tree(repo, NULL, 0, &ida);
		assert_int_equal(git_tree_lookup(&a, repo, &ida), 0);
		rnd_tree(repo, a, 0, &idb);
		assert_int_equal(git_tree_lookup(&b, repo, &idb), 0);
		/* both directions, and against nothing */
		for (int dir = 0; dir < 4; dir++) {
			const git_tree *x = dir == 0 ? a : dir == 1 ? b : dir == 2 ? NULL : a;
			const git_tree *y = dir == 0 ? b : dir == 1 ? a : dir == 2 ? b : NULL;

			assert_int_equal(git_diff_tree_to_tree(
						 &ref, repo, (git_tree *)x, (git_tree *)y, NULL),
				0);
			assert_int_equal(sync_tree_diff(repo, x, y, 100000, &mine), 0);
			assert_int_equal(mine.n, git_diff_num_deltas(ref));
			for (size_t i = 0; i < mine.n; i++) {
				const git_diff_delta *d = git_diff_get_delta(ref, i);
				const struct sync_delta *m = &mine.v[i];

				assert_string_equal(m->path, d->new_file.path);
				assert_int_equal(m->old_mode, d->old_file.mode);
				assert_int_equal(m->new_mode, d->new_file.mode);
				if (m->old_mode)
					assert_true(git_oid_equal(&m->old_id, &d->old_file.id));
				if (m->new_mode)
					assert_true(git_oid_equal(&m->new_id, &d->new_file.id));
				kinds |= 1u << d->status;
				changes++;
			}
			compared++;
			sync_deltas_free(&mine);
			git_diff_free(ref);
		}
		git_tree_free(a);
		git_tree_free(b);
	}
	git_repository_free(repo);
	/* The random trees did exercise additions, deletions and modifications. */
	assert_true(kinds & (1u << GIT_DELTA_ADDED));
	assert_true(kinds & (1u << GIT_DELTA_DELETED));
	assert_true(kinds & (1u << GIT_DELTA_MODIFIED));
	assert_true(changes > 1000);
	print_message("# tree diff: %u comparisons, %u changes, all equal to libgit2's\n", compared,
		changes);
}

/* Identical subtrees are not opened: a missing one on both sides is no error. */
static void tree_diff_skips_equal_subtrees(void **state)
{
	git_repository *repo;
	git_treebuilder *tb;
	git_oid missing, blob1, blob2, ta, tb_id;
	git_tree *a, *b;
	struct sync_deltas d;
	git_diff *ref;

	(void)state;
	assert_int_equal(git_repository_init(&repo, unit_path("s.git"), 1), 0);
	assert_int_equal(git_oid_fromstr(&missing, "1111111111111111111111111111111111111111"), 0);
	assert_int_equal(git_blob_create_from_buffer(&blob1, repo, "one\n", 4), 0);
	assert_int_equal(git_blob_create_from_buffer(&blob2, repo, "one\ntwo\n", 8), 0);
	/* the subtree does not exist: only strict object creation would notice */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(git_treebuilder_new(&tb, repo, NULL), 0);
		assert_int_equal(
			git_treebuilder_insert(NULL, tb, "big", &missing, GIT_FILEMODE_TREE), 0);
		assert_int_equal(git_treebuilder_insert(
					 NULL, tb, "f.txt", k ? &blob2 : &blob1, GIT_FILEMODE_BLOB),
			0);
		assert_int_equal(git_treebuilder_write(k ? &tb_id : &ta, tb), 0);
		git_treebuilder_free(tb);
	}
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
	assert_int_equal(git_tree_lookup(&a, repo, &ta), 0);
	assert_int_equal(git_tree_lookup(&b, repo, &tb_id), 0);
	assert_int_equal(sync_tree_diff(repo, a, b, 100, &d), 0);
	assert_int_equal(d.n, 1);
	assert_string_equal(d.v[0].path, "f.txt");
	sync_deltas_free(&d);
	/* Control: libgit2's diff opens it, and fails. */
	assert_true(git_diff_tree_to_tree(&ref, repo, a, b, NULL) < 0);
	/* A changed subtree that is missing is an error, not a silently empty review. */
	assert_int_equal(sync_tree_diff(repo, NULL, b, 100, &d), GIT_ENOTFOUND);
	assert_int_equal(d.n, 0);
	git_tree_free(a);
	git_tree_free(b);
	git_repository_free(repo);
}

/* --- the unrelated-histories memo (related.c) */

static void commit_on(git_repository *repo, const git_oid *parent, const char *msg, git_oid *out)
{
	git_signature *sig;
	git_treebuilder *tb;
	git_oid tid, bid;
	git_tree *t;
	git_commit *p = NULL;

	assert_int_equal(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
	assert_int_equal(git_blob_create_from_buffer(&bid, repo, msg, strlen(msg)), 0);
	assert_int_equal(git_treebuilder_new(&tb, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, tb, "f", &bid, GIT_FILEMODE_BLOB), 0);
	assert_int_equal(git_treebuilder_write(&tid, tb), 0);
	git_treebuilder_free(tb);
	assert_int_equal(git_tree_lookup(&t, repo, &tid), 0);
	if (parent)
		assert_int_equal(git_commit_lookup(&p, repo, parent), 0);
	assert_int_equal(
		git_commit_create_v(out, repo, NULL, sig, sig, NULL, msg, t, p ? 1 : 0, p), 0);
	git_commit_free(p);
	git_tree_free(t);
	git_signature_free(sig);
}

static void merge_of(git_repository *repo, const git_oid *p1, const git_oid *p2, git_oid *out)
{
	git_signature *sig;
	git_commit *a, *b;
	git_tree *t;

	assert_int_equal(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
	assert_int_equal(git_commit_lookup(&a, repo, p1), 0);
	assert_int_equal(git_commit_lookup(&b, repo, p2), 0);
	assert_int_equal(git_commit_tree(&t, a), 0);
	assert_int_equal(
		git_commit_create_v(out, repo, NULL, sig, sig, NULL, "merge", t, 2, a, b), 0);
	git_tree_free(t);
	git_commit_free(a);
	git_commit_free(b);
	git_signature_free(sig);
}

static void unrelated_carried_forward(void **state)
{
	git_repository *repo;
	git_oid t0, t1, t2, h0, h1, m, orphan, o2, base;

	(void)state;
	assert_int_equal(git_repository_init(&repo, unit_path("u.git"), 1), 0);
	commit_on(repo, NULL, "agent root", &t0);
	commit_on(repo, &t0, "agent 1", &t1);
	commit_on(repo, &t1, "agent 2", &t2);
	commit_on(repo, NULL, "owner root", &h0);
	commit_on(repo, &h0, "owner 1", &h1);
	/* the premise, as the pull establishes it */
	assert_int_equal(git_merge_base(&base, repo, &t0, &h0), GIT_ENOTFOUND);
	/* new commits on either side, no new root: still unrelated */
	assert_int_equal(sync_still_unrelated(repo, &t0, &t2, &h0, &h1, 100), 1);
	assert_int_equal(sync_still_unrelated(repo, &t2, &t2, &h1, &h1, 100), 1);
	assert_int_equal(git_merge_base(&base, repo, &t2, &h1), GIT_ENOTFOUND);
	/* the agent merges the owner's history: its root is new on the agent side */
	merge_of(repo, &t2, &h1, &m);
	assert_int_equal(sync_still_unrelated(repo, &t2, &m, &h1, &h1, 100), 0);
	assert_int_equal(git_merge_base(&base, repo, &m, &h1), 0); /* control: related now */
	/* the owner merges the agent's history: same on the owner's side */
	merge_of(repo, &h1, &t2, &m);
	assert_int_equal(sync_still_unrelated(repo, &t2, &t2, &h1, &m, 100), 0);
	/* a new root that is not the other side's still makes it unprovable */
	commit_on(repo, NULL, "another root", &orphan);
	merge_of(repo, &t2, &orphan, &o2);
	assert_int_equal(sync_still_unrelated(repo, &t2, &o2, &h1, &h1, 100), 0);
	/* a walk longer than the limit gives up */
	assert_int_equal(sync_still_unrelated(repo, &t0, &t2, &h0, &h1, 1), 0);
	/* a tip the walk cannot read gives up */
	assert_int_equal(git_oid_fromstr(&base, "2222222222222222222222222222222222222222"), 0);
	assert_int_equal(sync_still_unrelated(repo, &t0, &base, &h0, &h1, 100), 0);
	git_repository_free(repo);
}

static void memo_file(void **state)
{
	struct sync_memos ms = {0};
	git_oid a, b;
	const char *text;

	(void)state;
	assert_int_equal(git_oid_fromstr(&a, "1111111111111111111111111111111111111111"), 0);
	assert_int_equal(git_oid_fromstr(&b, "2222222222222222222222222222222222222222"), 0);
	/* missing: empty */
	assert_int_equal(sync_memo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 0);
	assert_int_equal(sync_memo_add(&ms, "refs/remotes/ai-dev/x", &a, &b), 0);
	assert_int_equal(sync_memo_add(&ms, "refs/remotes/ai-dev@h/y", &b, &a), 0);
	assert_int_equal(sync_memo_save(unit_dir, &ms), 0);
	sync_memos_free(&ms);
	assert_int_equal(sync_memo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 2);
	assert_non_null(sync_memo_find(&ms, "refs/remotes/ai-dev/x"));
	assert_true(git_oid_equal(&sync_memo_find(&ms, "refs/remotes/ai-dev@h/y")->tip, &b));
	assert_null(sync_memo_find(&ms, "refs/remotes/ai-dev/y"));
	{ /* what a pull compares before it rewrites the file */
		struct sync_memos o = {0};

		assert_int_equal(sync_memo_add(&o, "refs/remotes/ai-dev/x", &a, &b), 0);
		assert_false(sync_memos_equal(&ms, &o));
		assert_int_equal(sync_memo_add(&o, "refs/remotes/ai-dev@h/y", &b, &a), 0);
		assert_true(sync_memos_equal(&ms, &o));
		git_oid_cpy(&o.v[1].against, &b);
		assert_false(sync_memos_equal(&ms, &o));
		git_oid_cpy(&o.v[1].against, &a);
		git_oid_cpy(&o.v[0].tip, &b);
		assert_false(sync_memos_equal(&ms, &o));
		git_oid_cpy(&o.v[0].tip, &a);
		o.v[0].ref[strlen(o.v[0].ref) - 1] = 'w';
		assert_false(sync_memos_equal(&ms, &o));
		sync_memos_free(&o);
	}
	sync_memos_free(&ms);
	/* damaged lines are dropped, good ones kept */
	text = "refs/remotes/ai-dev/x 1111111111111111111111111111111111111111 "
	       "2222222222222222222222222222222222222222\n"
	       "refs/remotes/ai-dev/short 1111 2222\n"
	       "refs/heads/main 1111111111111111111111111111111111111111 "
	       "2222222222222222222222222222222222222222\n"
	       "garbage\n"
	       "refs/remotes/ai-dev/z 111111111111111111111111111111111111111g "
	       "2222222222222222222222222222222222222222\n";
	unit_write(unit_path("ocsb-sync.unrelated"), text, strlen(text), 0600);
	assert_int_equal(sync_memo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 1);
	assert_string_equal(ms.v[0].ref, "refs/remotes/ai-dev/x");
	/* empty set: the file goes */
	sync_memos_free(&ms);
	assert_int_equal(sync_memo_save(unit_dir, &ms), 0);
	assert_int_equal(access(unit_path("ocsb-sync.unrelated"), F_OK), -1);
	/* a link in its place is neither read nor written through */
	unit_write(unit_path("elsewhere"), text, strlen(text), 0600);
	assert_int_equal(symlink(unit_path("elsewhere"), unit_path("ocsb-sync.unrelated")), 0);
	assert_int_equal(sync_memo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 0);
	assert_int_equal(symlink(unit_path("elsewhere"), unit_path("ocsb-sync.unrelated.tmp")), 0);
	assert_int_equal(sync_memo_add(&ms, "refs/remotes/ai-dev/x", &a, &b), 0);
	assert_int_equal(sync_memo_save(unit_dir, &ms), 0);
	sync_memos_free(&ms);
	assert_int_equal(sync_memo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 1); /* the link was replaced by the file, not followed */
	sync_memos_free(&ms);
	{
		struct stat st;

		assert_int_equal(lstat(unit_path("elsewhere"), &st), 0);
		assert_int_equal((size_t)st.st_size, strlen(text));
	}
}

/* --- connectivity of a small fetch (diff.c) */

static void drop_loose(const char *gitdir, const git_oid *id)
{
	char hex[GIT_OID_HEXSZ + 1], path[PATH_MAX];

	git_oid_tostr(hex, sizeof(hex), id);
	snprintf(path, sizeof(path), "%s/objects/%.2s/%s", gitdir, hex, hex + 2);
	assert_int_equal(unlink(path), 0);
}

/* A repository NAME whose main is one commit (base) on the tree two_level_tree makes (t0). */
static git_repository *repo_with_main(const char *name, git_oid *t0, git_oid *base)
{
	git_repository *repo;
	git_reference *ref;

	assert_int_equal(git_repository_init(&repo, unit_path(name), 1), 0);
	two_level_tree(repo, "one\n", "two\n", t0, NULL, NULL);
	commit_tree_on(repo, t0, NULL, 0, base);
	assert_int_equal(git_reference_create(&ref, repo, "refs/heads/main", base, 1, NULL), 0);
	git_reference_free(ref);
	return repo;
}

static void fast_connectivity(void **state)
{
	git_repository *repo;
	git_oid t0, base, t, c, blob, sub, r, chain, bogus, pair[2];
	char why[600];
	const char *gd = unit_path("c.git");

	(void)state;
	repo = repo_with_main("c.git", &t0, &base);

	/* complete: a new file in the subtree */
	two_level_tree(repo, "one\n", "two, changed\n", &t, NULL, NULL);
	commit_tree_on(repo, &t, &base, 1, &c);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), 1);
	/* an up-to-date tip (a ref already) is complete too */
	assert_int_equal(sync_fast_connected(repo, &base, 1, why, sizeof(why)), 1);

	/* the changed blob is missing */
	two_level_tree(repo, "one\n", "three\n", &t, &blob, NULL);
	commit_tree_on(repo, &t, &base, 1, &c);
	drop_loose(gd, &blob);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "missing blob"));
	assert_non_null(strstr(why, "sub/g"));

	/* the changed subtree is missing */
	two_level_tree(repo, "one\n", "four\n", &t, NULL, &sub);
	commit_tree_on(repo, &t, &base, 1, &c);
	drop_loose(gd, &sub);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "missing tree in commit"));

	/* two commits deep, the older one incomplete: found through the newer */
	two_level_tree(repo, "five\n", "two\n", &t, NULL, NULL);
	{
		git_oid mid, top, t2, b5;

		commit_tree_on(repo, &t, &base, 1, &mid);
		two_level_tree(repo, "six\n", "two\n", &t2, NULL, NULL);
		commit_tree_on(repo, &t2, &mid, 1, &top);
		assert_int_equal(sync_fast_connected(repo, &top, 1, why, sizeof(why)), 1);
		assert_int_equal(git_blob_create_from_buffer(&b5, repo, "five\n", 5), 0);
		drop_loose(gd, &b5);
		assert_int_equal(sync_fast_connected(repo, &top, 1, why, sizeof(why)), -1);
		assert_non_null(strstr(why, "missing blob"));
	}

	/* a merge whose second parent is missing */
	assert_int_equal(git_oid_fromstr(&bogus, "3333333333333333333333333333333333333333"), 0);
	{
		git_buf raw = GIT_BUF_INIT;
		git_signature *sig;
		git_tree *tt;
		git_odb *odb;
		char body[512];

		assert_int_equal(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
		assert_int_equal(git_tree_lookup(&tt, repo, &t0), 0);
		{
			git_commit *bc;

			assert_int_equal(git_commit_lookup(&bc, repo, &base), 0);
			assert_int_equal(git_commit_create_buffer(&raw, repo, sig, sig, NULL, "m",
						 tt, 1, (const git_commit **)&bc),
				0);
			git_commit_free(bc);
		}
		/* add a second parent line by hand: libgit2 would refuse a missing parent */
		{
			char hex[GIT_OID_HEXSZ + 1], bhex[GIT_OID_HEXSZ + 1];
			const char *nl = strchr(raw.ptr, '\n');
			const char *nl2 = strchr(nl + 1, '\n');
			int len;

			git_oid_tostr(hex, sizeof(hex), &bogus);
			git_oid_tostr(bhex, sizeof(bhex), &base);
			len = snprintf(body, sizeof(body), "%.*sparent %s\n%s",
				(int)(nl2 - raw.ptr + 1), raw.ptr, hex, nl2 + 1);
			assert_true(len > 0 && (size_t)len < sizeof(body));
			assert_non_null(strstr(body, bhex));
		}
		assert_int_equal(git_repository_odb(&odb, repo), 0);
		assert_int_equal(git_odb_write(&c, odb, body, strlen(body), GIT_OBJECT_COMMIT), 0);
		git_odb_free(odb);
		git_buf_dispose(&raw);
		git_tree_free(tt);
		git_signature_free(sig);
		assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);
		assert_non_null(strstr(why, "missing commit 3333333333"));
	}

	/* not decided here: a root commit, a long history, a missing tip */
	commit_tree_on(repo, &t, NULL, 0, &r); /* t, not t0: that would be base itself */
	pair[0] = r;
	assert_int_equal(sync_fast_connected(repo, pair, 1, why, sizeof(why)), 0);
	chain = base;
	two_level_tree(repo, "seven\n", "two\n", &t, NULL, NULL);
	for (int i = 0; i < 300; i++) {
		git_oid next;

		commit_tree_on(repo, i % 2 ? &t0 : &t, &chain, 1, &next);
		chain = next;
	}
	assert_int_equal(sync_fast_connected(repo, &chain, 1, why, sizeof(why)), 0);
	/* control: the same kind of history, short, is decided */
	{
		git_oid c1, c2;

		commit_tree_on(repo, &t, &base, 1, &c1);
		commit_tree_on(repo, &t0, &c1, 1, &c2);
		assert_int_equal(sync_fast_connected(repo, &c2, 1, why, sizeof(why)), 1);
	}
	pair[0] = base;
	pair[1] = bogus;
	assert_int_equal(sync_fast_connected(repo, pair, 2, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "missing commit"));
	git_repository_free(repo);
}

/* Modes as git checks them out, not as libgit2 reads them. */
static void tree_diff_git_modes(void **state)
{
	git_repository *repo;
	git_oid blob, t1, t2, t3;
	git_tree *a, *b, *c;
	struct sync_deltas d;

	(void)state;
	assert_int_equal(git_repository_init(&repo, unit_path("m.git"), 1), 0);
	assert_int_equal(git_blob_create_from_buffer(&blob, repo, "../../etc/passwd", 16), 0);
	{
		const struct raw_entry e1[] = {{"100644", "f", &blob}};
		const struct raw_entry e2[] = {{"100664", "f", &blob}};
		const struct raw_entry e3[] = {{"120755", "f", &blob}};

		raw_tree(repo, e1, 1, &t1);
		raw_tree(repo, e2, 1, &t2);
		raw_tree(repo, e3, 1, &t3);
	}
	assert_int_equal(git_tree_lookup(&a, repo, &t1), 0);
	assert_int_equal(git_tree_lookup(&b, repo, &t2), 0);
	assert_int_equal(git_tree_lookup(&c, repo, &t3), 0);
	/* 100664 is git's 100644: no change */
	assert_int_equal(sync_tree_diff(repo, a, b, 100, &d), 0);
	assert_int_equal(d.n, 0);
	/* 120755 is a symbolic link for git: a type change, the link flagged as one */
	assert_int_equal(sync_tree_diff(repo, a, c, 100, &d), 0);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.v[1].new_mode, 0120000);
	{
		struct sync_entry e = {.path = "f",
			.new_mode = d.v[1].new_mode,
			.new_data = "../../etc/passwd",
			.new_len = 16};

		assert_true(sync_review_classify(&e) & SYNC_FLAG_SYMLINK_OUT);
	}
	sync_deltas_free(&d);
	/* control: libgit2 reads the same entry as a file */
	assert_int_equal(git_tree_entry_filemode(git_tree_entry_byindex(c, 0)),
		GIT_FILEMODE_BLOB_EXECUTABLE);
	git_tree_free(a);
	git_tree_free(b);
	git_tree_free(c);
	git_repository_free(repo);
}

/* 21 tree objects, each naming the next twice: 2^20 paths. Bounded, not expanded. */
static void tree_diff_bomb(void **state)
{
	git_repository *repo;
	git_oid leaf, t, base, bomb, t0;
	git_tree *top;
	struct sync_deltas d;
	git_reference *ref;
	char why[600];

	(void)state;
	assert_int_equal(git_repository_init(&repo, unit_path("b.git"), 1), 0);
	assert_int_equal(git_blob_create_from_buffer(&leaf, repo, "x", 1), 0);
	{
		const struct raw_entry e[] = {{"100644", "a", &leaf}, {"100644", "b", &leaf}};

		raw_tree(repo, e, 2, &t);
	}
	for (int i = 0; i < 20; i++) {
		git_oid up;
		const struct raw_entry e[] = {{"40000", "a", &t}, {"40000", "b", &t}};

		raw_tree(repo, e, 2, &up);
		t = up;
	}
	assert_int_equal(git_tree_lookup(&top, repo, &t), 0);
	assert_int_equal(sync_tree_diff(repo, NULL, top, 5000, &d), SYNC_DIFF_TOO_BIG);
	assert_int_equal(d.n, 0);
	git_tree_free(top);
	/* control: the same walk with room for a small tree */
	two_level_tree(repo, "one\n", "two\n", &t0, NULL, NULL);
	assert_int_equal(git_tree_lookup(&top, repo, &t0), 0);
	assert_int_equal(sync_tree_diff(repo, NULL, top, 5000, &d), 0);
	assert_int_equal(d.n, 2);
	sync_deltas_free(&d);
	git_tree_free(top);
	/* the connectivity check leaves such a commit to git */
	commit_tree_on(repo, &t0, NULL, 0, &base);
	assert_int_equal(git_reference_create(&ref, repo, "refs/heads/main", &base, 1, NULL), 0);
	git_reference_free(ref);
	commit_tree_on(repo, &t, &base, 1, &bomb);
	assert_int_equal(sync_fast_connected(repo, &bomb, 1, why, sizeof(why)), 0);
	git_repository_free(repo);
}

/* An entry whose object is not what its mode says: refused, like git rev-list does. */
static void fast_connectivity_types(void **state)
{
	git_repository *repo;
	git_oid t0, base, sub, bad, c, blob;
	git_reference *ref;
	char why[600];

	(void)state;
	assert_int_equal(git_repository_init(&repo, unit_path("t.git"), 1), 0);
	two_level_tree(repo, "one\n", "two\n", &t0, NULL, &sub);
	commit_tree_on(repo, &t0, NULL, 0, &base);
	assert_int_equal(git_reference_create(&ref, repo, "refs/heads/main", &base, 1, NULL), 0);
	git_reference_free(ref);
	{
		const struct raw_entry e[] = {{"100644", "evil", &sub}};

		raw_tree(repo, e, 1, &bad);
	}
	commit_tree_on(repo, &bad, &base, 1, &c);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "evil in commit"));
	assert_non_null(strstr(why, "is a tree"));
	/* control: a blob there is fine */
	assert_int_equal(git_blob_create_from_buffer(&blob, repo, "ok\n", 3), 0);
	{
		const struct raw_entry e[] = {{"100644", "evil", &blob}};

		raw_tree(repo, e, 1, &bad);
	}
	commit_tree_on(repo, &bad, &base, 1, &c);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), 1);
	git_repository_free(repo);
}

/* The id set the walks share: grows, keeps each id once, never keeps the zero id. */
static void oidset_basics(void **state)
{
	struct sync_oidset set = {0};
	git_oid id, zero;

	(void)state;
	memset(&zero, 0, sizeof(zero));
	for (unsigned i = 0; i < 5000; i++) {
		git_odb_hash(&id, &i, sizeof(i), GIT_OBJECT_BLOB);
		assert_int_equal(sync_oidset_add(&set, &id), 1);
		assert_int_equal(sync_oidset_add(&set, &id), 0);
	}
	assert_int_equal(set.n, 5000);
	assert_true(set.cap >= 2 * set.n);
	for (unsigned i = 0; i < 5000; i++) {
		git_odb_hash(&id, &i, sizeof(i), GIT_OBJECT_BLOB);
		assert_true(sync_oidset_has(&set, &id));
	}
	git_odb_hash(&id, "absent", 6, GIT_OBJECT_BLOB);
	assert_false(sync_oidset_has(&set, &id));
	assert_int_equal(sync_oidset_add(&set, &zero), 1);
	assert_false(sync_oidset_has(&set, &zero));
	assert_int_equal(set.n, 5000);
	sync_oidset_free(&set);
	assert_false(sync_oidset_has(&set, &id));
}

/*
 * The commits the owner's refs point at are trusted as complete (as rev-list --not
 * --branches --tags --remotes trusts them): a branch's, tag's or remote-tracking ref's
 * target as it is, never read. base2 lacks its new blob; c on base2 is complete only when
 * a ref names base2. An annotated tag (not peeled) trusts nothing more: more checking.
 */
/*
 * A history longer than the fast check's walk is left to git rev-list after reading its
 * commits only: the tip's missing blob is not looked for (0, not -1), so no tree diff was
 * spent on a walk that git redoes. The same history cut short is still checked (-1).
 */
static void fast_connectivity_long_walk(void **state)
{
	git_repository *repo;
	git_oid t0, base, t, prev, tip, blob, top;
	char why[600], content[32];
	const char *gd = unit_path("l.git");

	(void)state;
	repo = repo_with_main("l.git", &t0, &base);
	prev = base;
	for (int i = 0; i < 300; i++) { /* FAST_MAX_COMMITS is 256 */
		snprintf(content, sizeof(content), "step %d\n", i);
		two_level_tree(repo, content, "two\n", &t, NULL, NULL);
		commit_tree_on(repo, &t, &prev, 1, &tip);
		prev = tip;
	}
	two_level_tree(repo, "last\n", "gone\n", &t, &blob, NULL);
	commit_tree_on(repo, &t, &prev, 1, &top);
	drop_loose(gd, &blob);
	assert_int_equal(sync_fast_connected(repo, &top, 1, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	/* control: with a ref on the commit below the top, the walk is one commit long */
	{
		git_reference *ref;

		assert_int_equal(
			git_reference_create(&ref, repo, "refs/heads/near", &prev, 1, NULL), 0);
		git_reference_free(ref);
	}
	assert_int_equal(sync_fast_connected(repo, &top, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "missing blob"));
	git_repository_free(repo);
}

static void fast_connectivity_ref_tips(void **state)
{
	git_repository *repo;
	git_oid t0, base, t2, base2, b2, t3, c, tagid;
	git_reference *ref;
	git_object *target;
	git_signature *sig;
	char why[600];
	const char *gd = unit_path("t.git");

	(void)state;
	repo = repo_with_main("t.git", &t0, &base);
	two_level_tree(repo, "one\n", "base2 only\n", &t2, &b2, NULL);
	commit_tree_on(repo, &t2, &base, 1, &base2);
	two_level_tree(repo, "c\n", "base2 only\n", &t3, NULL, NULL);
	commit_tree_on(repo, &t3, &base2, 1, &c);
	drop_loose(gd, &b2);
	/* control: nothing names base2, the walk reaches it and finds the blob missing */
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "missing blob"));

	/* a lightweight tag on base2: trusted */
	assert_int_equal(git_reference_create(&ref, repo, "refs/tags/light", &base2, 1, NULL), 0);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), 1);
	assert_int_equal(git_reference_delete(ref), 0);
	git_reference_free(ref);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);

	/* an annotated tag is not peeled: base2 is not trusted through it */
	assert_int_equal(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
	assert_int_equal(git_object_lookup(&target, repo, &base2, GIT_OBJECT_COMMIT), 0);
	assert_int_equal(git_tag_create(&tagid, repo, "v1", target, sig, "v1\n", 0), 0);
	git_object_free(target);
	git_signature_free(sig);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), -1);

	/* a remote-tracking ref on base2: its target trusted as it is */
	assert_int_equal(
		git_reference_create(&ref, repo, "refs/remotes/ai-dev/w", &base2, 1, NULL), 0);
	git_reference_free(ref);
	assert_int_equal(sync_fast_connected(repo, &c, 1, why, sizeof(why)), 1);

	/* the pull's variant: the trusted set as given, the refs not read again */
	{
		struct sync_oidset given = {0};

		assert_int_equal(
			sync_fast_connected_known(repo, &c, 1, &given, why, sizeof(why)), -1);
		assert_int_equal(git_reference_lookup(&ref, repo, "refs/remotes/ai-dev/w"), 0);
		assert_int_equal(sync_trusted_add(&given, ref), 0);
		git_reference_free(ref);
		assert_true(sync_oidset_has(&given, &base2));
		assert_int_equal(
			sync_fast_connected_known(repo, &c, 1, &given, why, sizeof(why)), 1);
		sync_oidset_free(&given);
		/* what sync_trusted_add takes: not a ref outside heads, tags and remotes */
		assert_int_equal(
			git_reference_create(&ref, repo, "refs/notes/x", &base2, 1, NULL), 0);
		assert_int_equal(sync_trusted_add(&given, ref), 0);
		git_reference_free(ref);
		assert_int_equal(given.n, 0);
		assert_int_equal(
			git_reference_create(&ref, repo, "refs/tags/v2", &tagid, 1, NULL), 0);
		assert_int_equal(sync_trusted_add(&given, ref), 0);
		git_reference_free(ref);
		assert_true(sync_oidset_has(&given, &tagid)); /* as it is, not peeled */
		assert_false(sync_oidset_has(&given, &base2));
		sync_oidset_free(&given);
	}
	git_repository_free(repo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(oidset_basics),
		cmocka_unit_test_setup_teardown(
			tree_diff_matches_libgit2, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			tree_diff_skips_equal_subtrees, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			unrelated_carried_forward, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(memo_file, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fast_connectivity, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			tree_diff_git_modes, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(tree_diff_bomb, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fast_connectivity_types, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fast_connectivity_ref_tips, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			fast_connectivity_long_walk, unit_setup_dir, unit_teardown_dir),
	};

	return sync_unit_run(tests, sizeof(tests) / sizeof(tests[0]));
}
