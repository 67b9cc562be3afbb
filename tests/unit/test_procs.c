/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "procs.h"

/* A pid file naming this test binary itself, as squid's names squid. */
static const char *own_pidfile(void)
{
	char pid[32];
	const char *path = unit_path("x.pid");

	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	unit_write(path, pid, strlen(pid), 0644);
	return path;
}

/* The plain case: the configured path is the running binary. */
static void pidfile_names_the_binary(void **state)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)state;
	assert_true(n > 0);
	self[n] = '\0';
	assert_int_equal(procs_pidfile(own_pidfile(), self), (int)getpid());
}

/*
 * Debian 13: /usr/sbin/squid is an alternatives link (to /etc/alternatives/squid, then
 * squid-gnutls); /proc/PID/exe names the real file. The link must count as the binary,
 * else provisioning waits for a squid that is long up, and agentd misjudges its pid file.
 */
static void pidfile_through_alternatives_links(void **state)
{
	char self[PATH_MAX], alt[PATH_MAX], link[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	(void)state;
	assert_true(n > 0);
	self[n] = '\0';
	snprintf(alt, sizeof(alt), "%s", unit_path("alternatives-squid"));
	snprintf(link, sizeof(link), "%s", unit_path("squid"));
	assert_int_equal(symlink(self, alt), 0);
	assert_int_equal(symlink(alt, link), 0);
	assert_int_equal(procs_pidfile(own_pidfile(), link), (int)getpid());
}

/* Another program under that pid, a dead pid, garbage: not ours. */
static void pidfile_of_another_program_is_stale(void **state)
{
	const char *path;

	(void)state;
	assert_int_equal(procs_pidfile(own_pidfile(), "/bin/true"), -ENOENT);
	assert_int_equal(procs_pidfile(own_pidfile(), unit_path("no-such-binary")), -ENOENT);
	path = unit_path("bad.pid");
	unit_write(path, "1\n", 2, 0644);
	assert_int_equal(procs_pidfile(path, "/sbin/init"), -ENOENT);
	unit_write(path, "junk\n", 5, 0644);
	assert_int_equal(procs_pidfile(path, "/bin/true"), -ENOENT);
	assert_int_equal(procs_pidfile(unit_path("missing.pid"), "/bin/true"), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			pidfile_names_the_binary, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			pidfile_through_alternatives_links, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			pidfile_of_another_program_is_stale, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
