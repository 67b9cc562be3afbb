/* SPDX-License-Identifier: MIT */
/*
 * The pull's download handle (haves.c), the review memo's lookup (rmemo.c) and the review
 * of big blobs and duplicate names (review.c), against libgit2 on scratch repositories.
 * The walks themselves: test_sync_git.
 */
#define _GNU_SOURCE
#include "sync_unit.h"

/*
 * The download's handle (haves.c): the given refs from memory, globbed as libgit2 does,
 * nothing written through it, objects shared with the repository.
 */
static void haves_handle(void **state)
{
	git_repository *repo, *r2;
	git_oid t0, a, b, blob;
	git_reference *ref;
	git_reference_iterator *it;
	git_revwalk *walk;
	const char *names[] = {"refs/remotes/ai-dev/x/y", "refs/heads/main"};
	const char *name;
	git_oid ids[2];
	size_t n = 0, walked = 0;
	const char *gd = unit_path("h.git");

	(void)state;
	assert_int_equal(git_repository_init(&repo, gd, 1), 0);
	two_level_tree(repo, "one\n", "two\n", &t0, NULL, NULL);
	commit_tree_on(repo, &t0, NULL, 0, &a);
	commit_tree_on(repo, &t0, &a, 1, &b);
	/* a ref of the repository that is not given: not seen through the handle */
	assert_int_equal(git_reference_create(&ref, repo, "refs/heads/other", &a, 1, NULL), 0);
	git_reference_free(ref);
	git_oid_cpy(&ids[0], &b);
	git_oid_cpy(&ids[1], &a);
	assert_int_equal(sync_haves_repo(&r2, repo, names, ids, 2), 0);

	assert_int_equal(git_reference_lookup(&ref, r2, "refs/remotes/ai-dev/x/y"), 0);
	assert_true(git_oid_equal(git_reference_target(ref), &b));
	git_reference_free(ref);
	assert_int_equal(git_reference_lookup(&ref, r2, "refs/heads/other"), GIT_ENOTFOUND);
	/* a glob's '*' takes '/' too, as libgit2's own refdb does */
	assert_int_equal(git_reference_iterator_glob_new(&it, r2, "refs/remotes/*"), 0);
	while (git_reference_next_name(&name, it) == 0) {
		assert_string_equal(name, "refs/remotes/ai-dev/x/y");
		n++;
	}
	git_reference_iterator_free(it);
	assert_int_equal(n, 1);
	/* what the negotiation does: every ref under refs/, both tips and their history */
	assert_int_equal(git_revwalk_new(&walk, r2), 0);
	assert_int_equal(git_revwalk_push_glob(walk, "refs/*"), 0);
	while (git_revwalk_next(&t0, walk) == 0)
		walked++;
	git_revwalk_free(walk);
	assert_int_equal(walked, 2);
	/* read-only */
	assert_true(git_reference_create(&ref, r2, "refs/heads/new", &a, 1, NULL) < 0);
	assert_int_equal(git_reference_lookup(&ref, repo, "refs/heads/new"), GIT_ENOTFOUND);
	/* objects written through it land in the repository's store */
	assert_int_equal(git_blob_create_from_buffer(&blob, r2, "via handle\n", 11), 0);
	{
		git_blob *bl;

		assert_int_equal(git_blob_lookup(&bl, repo, &blob), 0);
		git_blob_free(bl);
	}
	git_repository_free(r2);
	git_repository_free(repo);
}

/* The review memos found by bisection: sorted, found, absent; the order of a prefix. */
static void rmemo_lookup(void **state)
{
	struct sync_rmemos ms = {0};
	const char *refs[] = {
		"refs/remotes/a/z", "refs/remotes/a/b", "refs/remotes/b/a", "refs/remotes/a/m"};
	size_t *ord = NULL;

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		struct sync_rmemo m = {0};

		/* the order of the first three, made before the fourth arrives */
		if (i == 3)
			assert_non_null(ord = sync_rmemos_order(&ms));
		snprintf(m.ref, sizeof(m.ref), "%s", refs[i]);
		m.commits = i;
		assert_int_equal(sync_rmemo_push(&ms, &m), 0);
	}
	assert_true(sync_rmemos_has(&ms, ord, 3, "refs/remotes/b/a"));
	assert_true(sync_rmemos_has(&ms, ord, 3, "refs/remotes/a/z"));
	assert_true(sync_rmemos_has(&ms, ord, 3, "refs/remotes/a/b"));
	assert_false(sync_rmemos_has(&ms, ord, 3, "refs/remotes/a/m")); /* came later */
	assert_false(sync_rmemos_has(&ms, ord, 3, "refs/remotes/a/c"));
	free(ord);
	sync_rmemos_sort(&ms);
	for (size_t i = 0; i < 4; i++) {
		const struct sync_rmemo *m = sync_rmemo_bsearch(&ms, refs[i]);

		assert_non_null(m);
		assert_int_equal(m->commits, i);
		assert_ptr_equal(m, sync_rmemo_find(&ms, refs[i]));
	}
	assert_null(sync_rmemo_bsearch(&ms, "refs/remotes/a/c"));
	assert_null(sync_rmemo_bsearch(&ms, "refs/remotes/a"));
	sync_rmemos_free(&ms);
	assert_null(sync_rmemo_bsearch(&ms, "refs/remotes/a/b"));
}

/* --- the review of hostile trees (found by tests/fuzz/fuzz_sync_review.c) */

static int review_of(git_repository *repo, const git_oid *tip, const git_oid *base,
	const git_oid *old, const struct sync_rmemo *memo, struct sync_review *rv)
{
	struct sync_review_in in = {.tip = tip,
		.against = base,
		.have_local = 1,
		.old = old,
		.memo = memo,
		.walk_limit = SYNC_HISTORY_WALK};

	return sync_review_run(repo, &in, rv);
}

static unsigned flags_of(const struct sync_rpart *p, const char *path)
{
	unsigned f = 0;

	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->v[i].path, path))
			f |= p->v[i].flags;
	return f;
}

/*
 * The gate reads the first MiB of a .gitattributes or a link's target; git reads a
 * .gitattributes up to 100 MB. What follows the first MiB may say anything: flagged
 * (corpus regress-big-attributes, regress-big-link).
 */
static void review_big_blobs(void **state)
{
	git_repository *repo;
	git_oid small, big, target, t0, t1, base, tip;
	size_t n = (1u << 20) + 64;
	char *text = malloc(n);
	struct sync_review rv;

	(void)state;
	assert_non_null(text);
	assert_int_equal(git_repository_init(&repo, unit_path("big.git"), 1), 0);
	assert_int_equal(git_blob_create_from_buffer(&small, repo, "# none\n", 7), 0);
	memset(text, '#', n);
	memcpy(text + n - 16, "\n* filter=evil\n", 16);
	assert_int_equal(git_blob_create_from_buffer(&big, repo, text, n), 0);
	memset(text, 'x', n);
	memcpy(text + n - 12, "/../../../..", 12);
	assert_int_equal(git_blob_create_from_buffer(&target, repo, text, n), 0);
	{
		const struct raw_entry e0[] = {{"100644", ".gitattributes", &small}};
		const struct raw_entry e1[] = {
			{"100644", ".gitattributes", &big}, {"120000", "link", &target}};

		raw_tree(repo, e0, 1, &t0);
		raw_tree(repo, e1, 2, &t1);
	}
	commit_tree_on(repo, &t0, NULL, 0, &base);
	commit_tree_on(repo, &t1, &base, 1, &tip);
	assert_int_equal(review_of(repo, &tip, &base, NULL, NULL, &rv), 0);
	assert_true(flags_of(&rv.whole, ".gitattributes") & SYNC_FLAG_ATTR_DRIVER);
	assert_true(flags_of(&rv.whole, "link") & SYNC_FLAG_SYMLINK_OUT);
	sync_review_free(&rv);
	/* control: the small one the other way round raises nothing */
	assert_int_equal(review_of(repo, &base, &tip, NULL, NULL, &rv), 0);
	assert_int_equal(flags_of(&rv.whole, ".gitattributes"), 0);
	sync_review_free(&rv);
	free(text);
	git_repository_free(repo);
}

/*
 * A tip whose tree names "d" twice: the link d/x under the first (the old tip's subtree,
 * unchanged), a plain d/x under the second. The diff since the old tip pairs the first
 * away and sees d/x added as a file; composed with the memo's d/x (the link), that file
 * took its place and the link's flag went with it. Such a review is made from scratch
 * (corpus regress-composed-hides-flag).
 */
static void review_duplicate_names(void **state)
{
	git_repository *repo;
	git_oid one, link, plain, dl, dp, t0, t1, t2, base, old, tip;
	struct sync_review first, composed, scratch;
	struct sync_rmemos ms = {0};

	(void)state;
	assert_int_equal(git_repository_init(&repo, unit_path("dup.git"), 1), 0);
	assert_int_equal(git_blob_create_from_buffer(&one, repo, "1", 1), 0);
	assert_int_equal(git_blob_create_from_buffer(&link, repo, "../../etc", 9), 0);
	assert_int_equal(git_blob_create_from_buffer(&plain, repo, "plain", 5), 0);
	{
		const struct raw_entry x1[] = {{"120000", "x", &link}};
		const struct raw_entry x2[] = {{"100644", "x", &plain}};
		const struct raw_entry e0[] = {{"100644", "a", &one}};
		const struct raw_entry e1[] = {{"100644", "a", &one}, {"40000", "d", &dl}};
		const struct raw_entry e2[] = {
			{"100644", "a", &one}, {"40000", "d", &dl}, {"40000", "d", &dp}};

		raw_tree(repo, x1, 1, &dl);
		raw_tree(repo, x2, 1, &dp);
		raw_tree(repo, e0, 1, &t0);
		raw_tree(repo, e1, 2, &t1);
		raw_tree(repo, e2, 3, &t2);
	}
	commit_tree_on(repo, &t0, NULL, 0, &base);
	commit_tree_on(repo, &t1, &base, 1, &old);
	commit_tree_on(repo, &t2, &old, 1, &tip);
	assert_int_equal(review_of(repo, &old, &base, NULL, NULL, &first), 0);
	assert_true(flags_of(&first.whole, "d/x") & SYNC_FLAG_SYMLINK_OUT);
	snprintf(first.memo.ref, sizeof(first.memo.ref), "refs/remotes/ai-dev/b");
	assert_int_equal(sync_rmemo_push(&ms, &first.memo), 0);
	assert_int_equal(review_of(repo, &tip, &base, &old, &ms.v[0], &composed), 0);
	assert_int_equal(review_of(repo, &tip, &base, &old, NULL, &scratch), 0);
	assert_true(flags_of(&scratch.whole, "d/x") & SYNC_FLAG_SYMLINK_OUT);
	assert_true(flags_of(&composed.whole, "d/x") & SYNC_FLAG_SYMLINK_OUT);
	assert_int_equal(composed.whole.n, scratch.whole.n);
	assert_int_equal(composed.diff_from_memo, 0);
	/*
	 * Nor is such a diff left in the memo to be taken again or composed later: the next
	 * pull pairs the entries its own way (corpus regress-composed-odd-base).
	 */
	assert_true(first.memo.have_base);
	assert_false(scratch.memo.have_base);
	sync_review_free(&first);
	sync_review_free(&composed);
	sync_review_free(&scratch);
	sync_rmemos_free(&ms);
	git_repository_free(repo);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(haves_handle, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(rmemo_lookup),
		cmocka_unit_test_setup_teardown(
			review_big_blobs, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			review_duplicate_names, unit_setup_dir, unit_teardown_dir),
	};

	return sync_unit_run(tests, sizeof(tests) / sizeof(tests[0]));
}
