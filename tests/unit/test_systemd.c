/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "../../provision/provision.h"

static void unit_runs_agentd_in_foreground(void **state)
{
	struct buf b = {0};

	assert_int_equal(systemd_render_unit(&b), 0);
	assert_non_null(strstr(b.data, "\nExecStart=/"));
	assert_non_null(strstr(b.data, "/ocsb-agentd --foreground\n"));
	assert_non_null(strstr(b.data, "\nExecReload=/bin/kill -HUP $MAINPID\n"));
	assert_non_null(strstr(b.data, "\n[Install]\nWantedBy=multi-user.target\n"));
	buf_free(&b);
}

static void slice_denies_all_but_loopback(void **state)
{
	struct buf b = {0};
	const char *deny, *allow;

	assert_int_equal(systemd_render_slice(&b), 0);
	deny = strstr(b.data, "\nIPAddressDeny=any\n");
	allow = strstr(b.data, "\nIPAddressAllow=localhost\n");
	assert_non_null(deny);
	assert_non_null(allow);
	assert_non_null(strstr(b.data, "\n[Slice]\n"));
	/* Nothing else is allowed. */
	assert_null(strstr(allow + strlen("\nIPAddressAllow=localhost\n"), "IPAddressAllow"));
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unit_runs_agentd_in_foreground),
		cmocka_unit_test(slice_denies_all_but_loopback),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
