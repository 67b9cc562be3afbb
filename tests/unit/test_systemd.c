/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "../../provision/provision.h"
#include "dirs.h"
#include "unit_text.h"

static void unit_runs_agentd_in_foreground(void **state)
{
	struct buf b = {0};

	assert_int_equal(systemd_render_unit(&b), 0);
	assert_non_null(strstr(b.data, "\nExecStart=/"));
	assert_non_null(strstr(b.data, "/ocsb-warden --foreground\n"));
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

/* The packaged file and the /etc copy are one text; only the copy carries the header. */
static void unit_is_the_packaged_text_with_a_header(void **state)
{
	struct buf b = {0};

	assert_int_equal(systemd_render_unit(&b), 0);
	assert_true(systemd_unit_is_ours(b.data, b.len));
	assert_false(systemd_unit_is_ours(unit_text, strlen(unit_text)));
	assert_string_equal(b.data + (b.len - strlen(unit_text)), unit_text);
	assert_ptr_equal(strchr(b.data, '\n') + 1, b.data + (b.len - strlen(unit_text)));
	assert_false(systemd_unit_is_ours("", 0));
	assert_false(systemd_unit_is_ours("[Unit]\n", 7));
	buf_free(&b);
}

/* ExecStart names this build's sbin directory: /usr/sbin in the package. */
static void unit_names_the_installed_supervisor(void **state)
{
	assert_non_null(
		strstr(unit_text, "\nExecStart=" OCSB_SBINDIR "/ocsb-warden --foreground\n"));
	assert_null(strstr(unit_text, "@SBINDIR@"));
}

/*
 * The boot order (issue 18, the reboot probe in tests/vm): agentd says ready only once its
 * tables are verified, and logins, sshd, cron and at start after that; nothing orders
 * agentd after sshd (the window the probe found).
 */
static void unit_orders_the_netlock_before_logins(void **state)
{
	const char *b = strstr(unit_text, "\nBefore=");
	char line[512];

	(void)state;
	assert_non_null(strstr(unit_text, "\nType=notify\n"));
	assert_non_null(b);
	snprintf(line, sizeof(line), "%.*s ", (int)strcspn(b + 8, "\n"), b + 8);
	assert_non_null(strstr(line, "systemd-user-sessions.service "));
	assert_non_null(strstr(line, "ssh.service "));
	assert_non_null(strstr(line, "cron.service "));
	assert_non_null(strstr(line, "atd.service "));
	assert_non_null(strstr(unit_text, "\nAfter=network.target\n"));
	assert_null(strstr(unit_text, "ssh.service\n[Service]"));
}

static void packaged_unit_found_in_usr_lib_or_lib(void **state)
{
	struct paths p;
	char got[4096];

	assert_int_equal(paths_under(&p, unit_dir), 0);
	/* None: a make install, provisioning writes the /etc copy. */
	assert_int_equal(systemd_packaged_unit(&p, got, sizeof(got)), 0);
	assert_string_equal(got, "");
	assert_int_equal(mkdir(unit_path("lib"), 0755), 0);
	assert_int_equal(mkdir(unit_path("lib/systemd"), 0755), 0);
	assert_int_equal(mkdir(unit_path("lib/systemd/system"), 0755), 0);
	/* A directory of that name is not a unit. */
	assert_int_equal(mkdir(unit_path("lib/systemd/system/ocsb-agentd.service"), 0755), 0);
	assert_int_equal(systemd_packaged_unit(&p, got, sizeof(got)), 0);
	assert_int_equal(rmdir(unit_path("lib/systemd/system/ocsb-agentd.service")), 0);
	/* Debian 12: /lib/systemd/system. */
	unit_write(unit_path("lib/systemd/system/ocsb-agentd.service"), unit_text,
		strlen(unit_text), 0644);
	assert_int_equal(systemd_packaged_unit(&p, got, sizeof(got)), 1);
	assert_string_equal(got, unit_path("lib/systemd/system/ocsb-agentd.service"));
	/* Debian 13: /usr/lib/systemd/system, looked at first. */
	assert_int_equal(mkdir(unit_path("usr"), 0755), 0);
	assert_int_equal(mkdir(unit_path("usr/lib"), 0755), 0);
	assert_int_equal(mkdir(unit_path("usr/lib/systemd"), 0755), 0);
	assert_int_equal(mkdir(unit_path("usr/lib/systemd/system"), 0755), 0);
	unit_write(unit_path("usr/lib/systemd/system/ocsb-agentd.service"), unit_text,
		strlen(unit_text), 0644);
	assert_int_equal(systemd_packaged_unit(&p, got, sizeof(got)), 1);
	assert_string_equal(got, unit_path("usr/lib/systemd/system/ocsb-agentd.service"));
}

/* The supervisor's unit goes with the last agent ocsb provisioned, not before. */
static void other_agents_counted_from_state_files(void **state)
{
	struct prov *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	assert_int_equal(paths_under(&p->paths, unit_dir), 0);
	snprintf(p->cfg.agent, sizeof(p->cfg.agent), "ai-dev");
	assert_int_equal(state_other_agents(p), 0);
	assert_int_equal(mkdir(unit_path("var"), 0755), 0);
	assert_int_equal(mkdir(unit_path("var/lib"), 0755), 0);
	assert_int_equal(mkdir(unit_path("var/lib/ocsb"), 0755), 0);
	assert_int_equal(mkdir(unit_path("var/lib/ocsb/agents"), 0700), 0);
	assert_int_equal(state_other_agents(p), 0);
	unit_write(unit_path("var/lib/ocsb/agents/ai-dev"), "agent ai-dev\n", 13, 0600);
	assert_int_equal(state_other_agents(p), 0);
	unit_write(unit_path("var/lib/ocsb/agents/ai-ops"), "agent ai-ops\n", 13, 0600);
	assert_int_equal(state_other_agents(p), 1);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(unit_runs_agentd_in_foreground),
		cmocka_unit_test(slice_denies_all_but_loopback),
		cmocka_unit_test(slice_carries_the_limits),
		cmocka_unit_test(unit_delegates_cgroups),
		cmocka_unit_test(unit_is_the_packaged_text_with_a_header),
		cmocka_unit_test(unit_names_the_installed_supervisor),
		cmocka_unit_test(unit_orders_the_netlock_before_logins),
		cmocka_unit_test_setup_teardown(
			packaged_unit_found_in_usr_lib_or_lib, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			other_agents_counted_from_state_files, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
