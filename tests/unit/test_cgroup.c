/* SPDX-License-Identifier: MIT */
/*
 * Why the agent's cgroup gets no controllers, in words that fit the machine (issue 28): a
 * warden already under its unit is not told to run from its unit; in a container whose
 * manager delegates nothing the line says that none reaches it; controllers that reach
 * the cgroup but cannot be enabled are blamed on the processes in it.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "cgroup.h"

static const char *why(const char *controllers, const char *own)
{
	static char err[1024];

	if (controllers)
		unit_write(unit_path("cgroup.controllers"), controllers, strlen(controllers), 0644);
	cg_why_no_controllers(unit_dir, own, err, sizeof(err));
	return err;
}

static void under_the_unit_none_delegated(void **state)
{
	const char *e;

	(void)state;
	e = why("cpuset\n", "/system.slice/ocsb-agentd.service");
	assert_non_null(strstr(e, "no memory, pids or cpu controller is delegated to"));
	assert_non_null(strstr(e, "container"));
	/* the unit is already in use: no advice to use it */
	assert_null(strstr(e, "run ocsb-warden from its systemd unit"));
}

static void by_hand_none_delegated(void **state)
{
	const char *e;

	(void)state;
	e = why("", "/user.slice/user-1000.slice/session-3.scope");
	assert_non_null(strstr(e, "no memory, pids or cpu controller is delegated to"));
	assert_non_null(strstr(e, "run ocsb-warden from its systemd unit"));
	/* no cgroup.controllers readable at all: the same words */
	e = why(NULL, "");
	assert_non_null(strstr(e, "run ocsb-warden from its systemd unit"));
}

static void delegated_but_busy(void **state)
{
	const char *e;

	(void)state;
	e = why("cpuset cpu io memory pids\n", "/system.slice/ocsb-agentd.service");
	assert_non_null(strstr(e, "may hand cpu memory pids down"));
	assert_non_null(strstr(e, "other processes"));
	assert_null(strstr(e, "delegated to"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			under_the_unit_none_delegated, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			by_hand_none_delegated, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			delegated_but_busy, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
