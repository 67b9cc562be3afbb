/* SPDX-License-Identifier: MIT */
/*
 * struct paths: the one place system locations are spelled. The control socket follows
 * `run` (tests point it at a temp dir) and its default is the name the help texts print.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "paths.h"

static void ctl_sock_default(void **state)
{
	struct paths p;

	(void)state;
	paths_default(&p);
	assert_string_equal(p.ctl_sock, "/run/ocsb/agentd.sock");
	assert_string_equal(p.ctl_sock, PATHS_CTL_SOCK);
	assert_string_equal(p.run, "/run");
}

static void ctl_sock_follows_run(void **state)
{
	struct paths p;

	(void)state;
	assert_int_equal(paths_under(&p, "/tmp/x"), 0);
	assert_string_equal(p.run, "/tmp/x/run");
	assert_string_equal(p.ctl_sock, "/tmp/x/run/ocsb/agentd.sock");
	/* positive control: the other trees move the same way */
	assert_string_equal(p.etc, "/tmp/x/etc");
}

static void too_long_refused(void **state)
{
	struct paths p;
	char root[PATH_MAX];

	(void)state;
	memset(root, 'a', sizeof(root) - 20);
	root[0] = '/';
	root[sizeof(root) - 20] = '\0';
	/* run fits, run/ocsb/agentd.sock does not: refused, never cut short */
	assert_int_equal(paths_under(&p, root), -1);
}

/* One slash between the parts, whatever each brings: the root is no exception (issue 28). */
static void join_one_slash(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(path_join(out, sizeof(out), "/", "usr/lib/systemd/system"), 0);
	assert_string_equal(out, "/usr/lib/systemd/system");
	assert_int_equal(path_join(out, sizeof(out), "/", "/lib"), 0);
	assert_string_equal(out, "/lib");
	assert_int_equal(path_join(out, sizeof(out), "/tmp/x//", "/etc"), 0);
	assert_string_equal(out, "/tmp/x/etc");
	assert_int_equal(path_join(out, sizeof(out), "/tmp/x", "etc"), 0);
	assert_string_equal(out, "/tmp/x/etc");
	assert_int_equal(path_join(out, 8, "/tmp/x", "etc"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ctl_sock_default),
		cmocka_unit_test(ctl_sock_follows_run),
		cmocka_unit_test(too_long_refused),
		cmocka_unit_test(join_one_slash),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
