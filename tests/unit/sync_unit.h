/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_SYNC_UNIT_H
#define OCSB_TEST_SYNC_UNIT_H

/*
 * For test_sync, test_sync_git and test_review: the includes and the libgit2 set-up they
 * need.
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

#endif
