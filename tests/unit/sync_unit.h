/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_SYNC_UNIT_H
#define OCSB_TEST_SYNC_UNIT_H

/*
 * For test_sync, test_sync_git, test_sync_git_review and test_review: the includes, the
 * libgit2 set-up they need and the scratch objects two of them build.
 */
#include "unit.h"

#include "log.h"

#include "../../sync/sync.h"

#include <git2/sys/mempack.h>
#include <git2/sys/repository.h>

/*
 * Run the tests with libgit2 set up. These tests need no configuration: none is read,
 * whatever HOME says (a HOME the test user cannot enter made every diff fail with EACCES
 * on stock Debian, /root 0700).
 */
static inline int sync_unit_run(const struct CMUnitTest *tests, size_t n)
{
	int r;

	git_libgit2_init();
	for (int lvl = GIT_CONFIG_LEVEL_PROGRAMDATA; lvl <= GIT_CONFIG_LEVEL_GLOBAL; lvl++)
		if (git_libgit2_opts(GIT_OPT_SET_SEARCH_PATH, lvl, "") < 0) {
			fprintf(stderr, "git_libgit2_opts(SET_SEARCH_PATH, %d) failed\n", lvl);
			return 1;
		}
	r = _cmocka_run_group_tests("tests", tests, n, NULL, NULL);
	git_libgit2_shutdown();
	return r;
}

/* ---- scratch objects (test_sync_git, test_sync_git_review) ---- */

/* A commit on parents[] whose tree is `tree`. */
static inline void commit_tree_on(
	git_repository *repo, const git_oid *tree, const git_oid *parents, size_t np, git_oid *out)
{
	git_signature *sig;
	git_tree *t;
	const git_commit *pc[2] = {NULL, NULL};
	git_commit *owned[2] = {NULL, NULL};

	assert_int_equal(git_signature_new(&sig, "T", "t@example.com", 1700000000, 0), 0);
	assert_int_equal(git_tree_lookup(&t, repo, tree), 0);
	for (size_t i = 0; i < np; i++) {
		assert_int_equal(git_commit_lookup(&owned[i], repo, &parents[i]), 0);
		pc[i] = owned[i];
	}
	assert_int_equal(git_commit_create(out, repo, NULL, sig, sig, NULL, "c", t, np, pc), 0);
	for (size_t i = 0; i < np; i++)
		git_commit_free(owned[i]);
	git_tree_free(t);
	git_signature_free(sig);
}

/* tree { f: content, sub/ { g: content2 } } */
static inline void two_level_tree(git_repository *repo, const char *c1, const char *c2, git_oid *out,
	git_oid *ret_blob2, git_oid *ret_sub)
{
	git_treebuilder *tb;
	git_oid b1, b2, sub;

	assert_int_equal(git_blob_create_from_buffer(&b1, repo, c1, strlen(c1)), 0);
	assert_int_equal(git_blob_create_from_buffer(&b2, repo, c2, strlen(c2)), 0);
	assert_int_equal(git_treebuilder_new(&tb, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, tb, "g", &b2, GIT_FILEMODE_BLOB), 0);
	assert_int_equal(git_treebuilder_write(&sub, tb), 0);
	git_treebuilder_free(tb);
	assert_int_equal(git_treebuilder_new(&tb, repo, NULL), 0);
	assert_int_equal(git_treebuilder_insert(NULL, tb, "f", &b1, GIT_FILEMODE_BLOB), 0);
	assert_int_equal(git_treebuilder_insert(NULL, tb, "sub", &sub, GIT_FILEMODE_TREE), 0);
	assert_int_equal(git_treebuilder_write(out, tb), 0);
	git_treebuilder_free(tb);
	if (ret_blob2)
		*ret_blob2 = b2;
	if (ret_sub)
		*ret_sub = sub;
}

/* A tree object written byte by byte: modes libgit2's tree builder would not write. */
struct raw_entry {
	const char *mode, *name;
	const git_oid *id;
};

static inline void raw_tree(git_repository *repo, const struct raw_entry *e, size_t n, git_oid *out)
{
	char buf[4096];
	size_t len = 0;
	git_odb *odb;

	for (size_t i = 0; i < n; i++) {
		int w = snprintf(buf + len, sizeof(buf) - len, "%s %s", e[i].mode, e[i].name);

		assert_true(w > 0 && len + (size_t)w + 1 + GIT_OID_RAWSZ < sizeof(buf));
		len += (size_t)w + 1; /* the NUL snprintf wrote ends the name */
		memcpy(buf + len, e[i].id->id, GIT_OID_RAWSZ);
		len += GIT_OID_RAWSZ;
	}
	assert_int_equal(git_repository_odb(&odb, repo), 0);
	assert_int_equal(git_odb_write(out, odb, buf, len, GIT_OBJECT_TREE), 0);
	git_odb_free(odb);
}

#endif
