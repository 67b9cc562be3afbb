/* SPDX-License-Identifier: MIT */
/*
 * Privilege drop of spawn: needs root. tests/run-unit.sh runs binaries named test_priv*
 * as root (all others as nobody); without root the whole binary is one skip, with why.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "unit.h"

#include "spawn.h"

static void drop_id(void **state)
{
	const char *argv[] = {"/usr/bin/id", "-u", NULL};
	const char *gargv[] = {"/usr/bin/id", "-G", NULL};
	struct spawn_opts o = {.capture = 1, .drop = 1, .uid = 65534, .gid = 65534};
	struct spawn_result r;

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_string_equal(r.output, "65534\n");
	spawn_result_free(&r);
	/* No supplementary groups kept from root. */
	assert_int_equal(spawn_run(gargv, &o, &r), 0);
	assert_string_equal(r.output, "65534\n");
	spawn_result_free(&r);
}

static int fn_regain_root(void *arg, int outfd)
{
	uid_t ru, eu, su;

	getresuid(&ru, &eu, &su);
	dprintf(outfd, "uid %u %u %u nnp %d setuid %d seteuid %d", ru, eu, su,
		prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), setuid(0), seteuid(0));
	return 0;
}

static void drop_cannot_regain_root(void **state)
{
	struct spawn_opts o = {.drop = 1, .uid = 65534, .gid = 65534};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_regain_root, NULL, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.output, "uid 65534 65534 65534 nnp 1 setuid -1 seteuid -1");
	spawn_result_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(drop_id),
		cmocka_unit_test(drop_cannot_regain_root),
	};

	if (geteuid() != 0) {
		printf("1..1\nok 1 - privilege drop # SKIP needs root (sudo make test-unit)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
