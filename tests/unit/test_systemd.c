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

	struct ocsb_config c;

	config_defaults(&c);
	assert_int_equal(systemd_render_slice(&c, &b), 0);
	deny = strstr(b.data, "\nIPAddressDeny=any\n");
	allow = strstr(b.data, "\nIPAddressAllow=localhost\n");
	assert_non_null(deny);
	assert_non_null(allow);
	assert_non_null(strstr(b.data, "\n[Slice]\n"));
	/* Nothing else is allowed. */
	assert_null(strstr(allow + strlen("\nIPAddressAllow=localhost\n"), "IPAddressAllow"));
	buf_free(&b);
	config_free(&c);
}

static void slice_carries_the_limits(void **state)
{
	struct buf b = {0};
	struct ocsb_config c;
	char err[256];
	const char *text = "limit-memory 2G\nlimit-tasks 500\nlimit-cpu 150\n";

	config_defaults(&c);
	assert_int_equal(config_parse_buf(&c, text, strlen(text), "t", err, sizeof(err)), 0);
	assert_int_equal(systemd_render_slice(&c, &b), 0);
	assert_non_null(strstr(b.data, "\nMemoryMax=2147483648\n"));
	assert_non_null(strstr(b.data, "\nTasksMax=500\n"));
	assert_non_null(strstr(b.data, "\nCPUQuota=150%\n"));
	buf_free(&b);
	config_free(&c);

	text = "limit-memory none\nlimit-tasks none\nlimit-cpu none\n";
	config_defaults(&c);
	assert_int_equal(config_parse_buf(&c, text, strlen(text), "t", err, sizeof(err)), 0);
	assert_int_equal(systemd_render_slice(&c, &b), 0);
	assert_non_null(strstr(b.data, "\nMemoryMax=infinity\n"));
	assert_non_null(strstr(b.data, "\nTasksMax=infinity\n"));
	assert_non_null(strstr(b.data, "\nCPUQuota=\n"));
	buf_free(&b);
	config_free(&c);
}

static void unit_delegates_cgroups(void **state)
{
	struct buf b = {0};

	assert_int_equal(systemd_render_unit(&b), 0);
	assert_non_null(strstr(b.data, "\nDelegate=yes\n"));
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unit_runs_agentd_in_foreground),
		cmocka_unit_test(slice_denies_all_but_loopback),
		cmocka_unit_test(slice_carries_the_limits),
		cmocka_unit_test(unit_delegates_cgroups),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
