/* SPDX-License-Identifier: MIT */
/*
 * What ocsb-provision runs or hands out from beside itself (ocsb-shell, the owner's
 * `ocsb` that seeds a new clone): a root-owned regular file that neither group nor
 * others can write; and the directory it looks in is its own.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "../../provision/provision.h"

static void root_binary_rules(void **state)
{
	static const struct {
		mode_t mode;
		uid_t uid;
		int want;
	} cases[] = {
		/* positive controls: what make install leaves */
		{S_IFREG | 0755, 0, 1},
		{S_IFREG | 0555, 0, 1},
		/* someone else's, or writable by someone else: it would run as the owner */
		{S_IFREG | 0755, 1000, 0},
		{S_IFREG | 0775, 0, 0},
		{S_IFREG | 0757, 0, 0},
		/* not a program: a link, a directory, not executable by all */
		{S_IFLNK | 0755, 0, 0},
		{S_IFDIR | 0755, 0, 0},
		{S_IFREG | 0700, 0, 0},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct stat st;

		memset(&st, 0, sizeof(st));
		st.st_mode = cases[i].mode;
		st.st_uid = cases[i].uid;
		if (prov_root_binary(&st) != cases[i].want)
			fail_msg("mode %o uid %u: want %d", (unsigned)cases[i].mode,
				(unsigned)cases[i].uid, cases[i].want);
	}
}

static void self_dir_is_this_programs(void **state)
{
	char dir[PATH_MAX], exe[PATH_MAX], want[PATH_MAX];
	ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	(void)state;
	assert_true(l > 0);
	exe[l] = '\0';
	snprintf(want, sizeof(want), "%.*s", (int)(strrchr(exe, '/') - exe), exe);
	assert_int_equal(prov_self_dir(dir, sizeof(dir), "ocsb"), 0);
	assert_string_equal(dir, want);
	/* too small a buffer: refused, never cut short */
	assert_int_equal(prov_self_dir(dir, 4, "ocsb"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(root_binary_rules),
		cmocka_unit_test(self_dir_is_this_programs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
