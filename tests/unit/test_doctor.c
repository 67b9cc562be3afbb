/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "../../cli/cli.h"
#include "util.h"

/* What sshd -T prints for the agent after provisioning (keys in lower case, one a line). */
static const char good_sshd[] = "port 22\n"
				"usepam yes\n"
				"permituserenvironment no\n"
				"permituserrc no\n"
				"disableforwarding yes\n"
				"allowagentforwarding no\n"
				"allowtcpforwarding no\n"
				"x11forwarding no\n"
				"permittunnel no\n"
				"authorizedkeysfile /etc/ocsb/keys/ai-dev\n";

static void sshd_good_settings_pass(void **state)
{
	char bad[512];

	(void)state;
	assert_int_equal(doctor_sshd_verdict(good_sshd, "ai-dev", bad, sizeof(bad)), 0);
	assert_string_equal(bad, "");
}

static void sshd_each_weakening_is_named(void **state)
{
	static const char *const weak[][2] = {
		{"permituserrc no", "permituserrc yes"},
		{"disableforwarding yes", "disableforwarding no"},
		{"permituserenvironment no", "permituserenvironment yes"},
		{"permittunnel no", "permittunnel point-to-point"},
		{"authorizedkeysfile /etc/ocsb/keys/ai-dev",
			"authorizedkeysfile .ssh/authorized_keys"},
		{"x11forwarding no\n", ""},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++) {
		char text[1024], bad[512], key[64], *at;

		snprintf(text, sizeof(text), "%s", good_sshd);
		at = strstr(text, weak[i][0]);
		assert_non_null(at);
		memmove(at + strlen(weak[i][1]), at + strlen(weak[i][0]),
			strlen(at + strlen(weak[i][0])) + 1);
		memcpy(at, weak[i][1], strlen(weak[i][1]));
		assert_int_equal(doctor_sshd_verdict(text, "ai-dev", bad, sizeof(bad)), 1);
		/* The key is named in the finding. */
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(weak[i][0], " "), weak[i][0]);
		assert_non_null(strstr(bad, key));
	}
}

static void deny_listing_is_exact(void **state)
{
	(void)state;
	assert_true(doctor_listed("daemon\nai-dev\n", "ai-dev"));
	assert_true(doctor_listed("ai-dev", "ai-dev"));
	assert_false(doctor_listed("ai-dev2\nxai-dev\n", "ai-dev"));
	assert_false(doctor_listed(NULL, "ai-dev"));
}

static void sensitive_paths(void **state)
{
	static const char *const yes[] = {".ssh/id_ed25519", ".aws/credentials", ".netrc",
		".git-credentials", ".docker/config.json", ".kube/config", "code/shop/.env",
		".env.local", ".config/gh/hosts.yml", ".config/some/api_token"};
	static const char *const no[] = {".ssh/id_ed25519.pub", ".ssh/known_hosts", ".bashrc",
		".config/Code/settings.json", "code/shop/README.md", ".environment"};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!doctor_sensitive(yes[i]))
			fail_msg("%s should count as a secret", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (doctor_sensitive(no[i]))
			fail_msg("%s should not count as a secret", no[i]);
}

static void json_strings_are_escaped(void **state)
{
	struct buf b = {0};

	(void)state;
	doctor_json_str(&b, "a\"b\\c\nd\x01");
	assert_string_equal(b.data, "\"a\\\"b\\\\c\\u000ad\\u0001\"");
	buf_free(&b);
	assert_string_equal(doctor_status_name(0), "OK");
	assert_string_equal(doctor_status_name(1), "WARN");
	assert_string_equal(doctor_status_name(2), "FAIL");
}

static void abstract_sockets_need_ocsb_shell_and_abi_6(void **state)
{
	(void)state;
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, 6), 0);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, 7), 0);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, 5), 2);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, -1), 2);
	/* Not ocsb-shell, or one the agent could replace: the fix is provisioning. */
	assert_int_equal(doctor_shell_verdict("/bin/bash", 1, 6), 1);
	assert_int_equal(doctor_shell_verdict("/bin/ocsb-shell2", 1, 6), 1);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 0, 6), 1);
	assert_int_equal(doctor_shell_verdict(NULL, 1, 6), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sshd_good_settings_pass),
		cmocka_unit_test(sshd_each_weakening_is_named),
		cmocka_unit_test(deny_listing_is_exact),
		cmocka_unit_test(sensitive_paths),
		cmocka_unit_test(json_strings_are_escaped),
		cmocka_unit_test(abstract_sockets_need_ocsb_shell_and_abi_6),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
