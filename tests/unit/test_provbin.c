/* SPDX-License-Identifier: MIT */
/*
 * What ocsb-provision runs or hands out from beside itself (ocsb-shell, the owner's
 * `ocsb` that seeds a new clone): a root-owned regular file that neither group nor
 * others can write; and the directory it looks in is its own.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "../../provision/provision.h"

static struct stat st_of(mode_t type, uid_t uid, mode_t perm)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_mode = type | perm;
	st.st_uid = uid;
	return st;
}

static void root_binary_rules(void **state)
{
	struct stat st;

	(void)state;
	/* positive control: what make install leaves */
	st = st_of(S_IFREG, 0, 0755);
	assert_true(prov_root_binary(&st));
	st = st_of(S_IFREG, 0, 0555);
	assert_true(prov_root_binary(&st));
	/* someone else's, or writable by someone else: it would run with the owner's rights */
	st = st_of(S_IFREG, 1000, 0755);
	assert_false(prov_root_binary(&st));
	st = st_of(S_IFREG, 0, 0775);
	assert_false(prov_root_binary(&st));
	st = st_of(S_IFREG, 0, 0757);
	assert_false(prov_root_binary(&st));
	/* not a program: a link, a directory, not executable by all */
	st = st_of(S_IFLNK, 0, 0755);
	assert_false(prov_root_binary(&st));
	st = st_of(S_IFDIR, 0, 0755);
	assert_false(prov_root_binary(&st));
	st = st_of(S_IFREG, 0, 0700);
	assert_false(prov_root_binary(&st));
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
