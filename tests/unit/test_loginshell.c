/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "loginshell.h"

/* sshd's login session: argv[0] "-ocsb-shell" becomes "-bash", nothing else. */
static void login_mark_follows_the_real_shell(void **state)
{
	char a0[] = "-ocsb-shell", arg0[64];
	char *argv[] = {a0, NULL};

	(void)state;
	assert_int_equal(loginshell_argv("/bin/bash", argv, arg0, sizeof(arg0)), 0);
	assert_string_equal(argv[0], "-bash");
	assert_null(argv[1]);
	assert_int_equal(loginshell_argv("/usr/local/bin/zsh", argv, arg0, sizeof(arg0)), 0);
	assert_string_equal(argv[0], "-zsh");
}

/* `ssh host cmd`, scp, sftp: "ocsb-shell -c COMMAND" -> "bash -c COMMAND", arguments kept. */
static void command_arguments_are_kept(void **state)
{
	char a0[] = "ocsb-shell", c[] = "-c", cmd[] = "echo $0; exit 3", extra[] = "-x";
	char *argv[] = {a0, c, cmd, extra, NULL}, arg0[64];

	(void)state;
	assert_int_equal(loginshell_argv("/bin/bash", argv, arg0, sizeof(arg0)), 0);
	assert_string_equal(argv[0], "bash");
	assert_ptr_equal(argv[1], c);
	assert_ptr_equal(argv[2], cmd);
	assert_string_equal(argv[2], "echo $0; exit 3");
	assert_ptr_equal(argv[3], extra);
	assert_null(argv[4]);
}

/* A "-" inside argv[0] (not first) is no login mark. */
static void only_a_leading_dash_marks_login(void **state)
{
	char a0[] = "/usr/local/sbin/ocsb-shell", arg0[64];
	char *argv[] = {a0, NULL};

	(void)state;
	assert_int_equal(loginshell_argv("/bin/sh", argv, arg0, sizeof(arg0)), 0);
	assert_string_equal(argv[0], "sh");
}

/* The real shell may not be ocsb-shell itself, nor a relative or empty path. */
static void loops_and_bad_paths_are_refused(void **state)
{
	char a0[] = "-ocsb-shell", arg0[64];
	char *argv[] = {a0, NULL};
	static const char *const bad[] = {"", "bash", "/", "/bin/", "bin/bash"};

	(void)state;
	assert_int_equal(
		loginshell_argv("/usr/local/sbin/ocsb-shell", argv, arg0, sizeof(arg0)), -ELOOP);
	assert_int_equal(loginshell_argv("/opt/x/ocsb-shell", argv, arg0, sizeof(arg0)), -ELOOP);
	assert_ptr_equal(argv[0], a0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(loginshell_argv(bad[i], argv, arg0, sizeof(arg0)), -EINVAL);
		assert_ptr_equal(argv[0], a0);
	}
	assert_int_equal(loginshell_argv(NULL, argv, arg0, sizeof(arg0)), -EINVAL);
	/* A shell whose name merely contains ocsb-shell is not a loop. */
	assert_int_equal(loginshell_argv("/bin/ocsb-shell2", argv, arg0, sizeof(arg0)), 0);
	assert_string_equal(argv[0], "-ocsb-shell2");
}

static void small_buffer_is_refused(void **state)
{
	char a0[] = "-ocsb-shell", arg0[5];
	char *argv[] = {a0, NULL};

	(void)state;
	assert_int_equal(loginshell_argv("/bin/bash", argv, arg0, sizeof(arg0)), -ENAMETOOLONG);
	assert_ptr_equal(argv[0], a0);
	assert_int_equal(loginshell_argv("/bin/sh", argv, arg0, sizeof(arg0)), 0);
	assert_string_equal(argv[0], "-sh");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(login_mark_follows_the_real_shell),
		cmocka_unit_test(command_arguments_are_kept),
		cmocka_unit_test(only_a_leading_dash_marks_login),
		cmocka_unit_test(loops_and_bad_paths_are_refused),
		cmocka_unit_test(small_buffer_is_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
