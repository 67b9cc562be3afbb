/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "unit.h"

#include "spawn.h"
#include "util.h"

#include "session.h"

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/*
 * Run check() in a forked copy of the test with a time limit, so that a hang or
 * a signal (SIGPIPE) in the code under test fails this test instead of the binary.
 */
static void in_child(int (*check)(void), unsigned seconds, const char *what)
{
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		alarm(seconds);
		_exit(check());
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		fail_msg("%s: killed by signal %d (%s)", what, WTERMSIG(st),
			WTERMSIG(st) == SIGALRM ? "hung" : strsignal(WTERMSIG(st)));
	if (WEXITSTATUS(st) != 0)
		fail_msg("%s: check %d failed", what, WEXITSTATUS(st));
}

static void captures_output_and_status(void **state)
{
	const char *argv[] = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r;

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 3);
	assert_false(r.timed_out);
	assert_string_equal(r.output, "out\nerr\n");
	assert_int_equal(r.output_len, 8);
	spawn_result_free(&r);
	assert_null(r.output);
}

static void no_capture(void **state)
{
	const char *argv[] = {"/bin/sh", "-c", "echo lost; exit 0", NULL};
	struct spawn_opts o = {0};
	struct spawn_result r;

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_null(r.output);
}

static void relative_program(void **state)
{
	const char *argv[] = {"sh", "-c", "exit 0", NULL};
	const char *dot[] = {"./sh", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r;

	assert_int_equal(spawn_run(argv, &o, &r), -EINVAL);
	assert_int_equal(spawn_run(dot, &o, &r), -EINVAL);
}

static void missing_program(void **state)
{
	const char *argv[] = {"/nonexistent/ocsb-test-program", NULL};
	const char *dir[] = {"/", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r;

	/* The exec errno itself, not "exit 127". */
	assert_int_equal(spawn_run(argv, &o, &r), -ENOENT);
	assert_null(r.output);
	assert_int_equal(spawn_run(dir, &o, &r), -EACCES);
	o.capture = 0;
	assert_int_equal(spawn_run(argv, &o, &r), -ENOENT);
}

static void input_to_stdin(void **state)
{
	const char *argv[] = {"/bin/cat", NULL};
	struct spawn_opts o = {.capture = 1, .input = "line one\nline two\n"};
	struct spawn_result r;

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.output, "line one\nline two\n");
	spawn_result_free(&r);
	/* Without input, stdin is /dev/null: cat ends at once. */
	o.input = NULL;
	o.timeout_ms = 5000;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_false(r.timed_out);
	assert_string_equal(r.output, "");
	spawn_result_free(&r);
}

/* More input than a pipe holds, to a child that echoes it: both pipes fill up. */
static int check_large_input(void)
{
	const char *argv[] = {"/bin/cat", NULL};
	size_t n = 1024 * 1024;
	char *in = malloc(n + 1);
	struct spawn_opts o = {.capture = 1, .timeout_ms = 5000, .max_output = 1000};
	struct spawn_result r;
	int ok;

	if (!in)
		return 1;
	memset(in, 'x', n);
	in[n] = '\0';
	o.input = in;
	if (spawn_run(argv, &o, &r) != 0)
		return 2;
	ok = r.status == 0 && !r.timed_out && r.output_len == 1000;
	spawn_result_free(&r);
	free(in);
	return ok ? 0 : 3;
}

static void large_input(void **state)
{
	in_child(check_large_input, 10, "1 MiB of input to /bin/cat");
}

/* A child that exits without reading its input must not kill the caller (SIGPIPE). */
static int check_unread_input(void)
{
	const char *argv[] = {"/bin/true", NULL};
	size_t n = 1024 * 1024;
	char *in = malloc(n + 1);
	struct spawn_opts o = {.capture = 1, .timeout_ms = 5000};
	struct spawn_result r;
	int ok;

	if (!in)
		return 1;
	memset(in, 'x', n);
	in[n] = '\0';
	o.input = in;
	if (spawn_run(argv, &o, &r) != 0)
		return 2;
	ok = r.status == 0 && !r.timed_out;
	spawn_result_free(&r);
	free(in);
	return ok ? 0 : 3;
}

static void unread_input(void **state)
{
	in_child(check_unread_input, 10, "1 MiB of input to /bin/true");
}

static void environment_not_inherited(void **state)
{
	const char *argv[] = {"/usr/bin/env", NULL};
	char *const envp[] = {"A=1", "B=two words", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r;

	assert_int_equal(setenv("OCSB_TEST_CANARY", "leaked", 1), 0);
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	unsetenv("OCSB_TEST_CANARY");
	assert_int_equal(r.status, 0);
	assert_null(strstr(r.output, "OCSB_TEST_CANARY"));
	assert_non_null(strstr(r.output, "PATH=/"));
	spawn_result_free(&r);

	o.envp = envp;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_string_equal(r.output, "A=1\nB=two words\n");
	spawn_result_free(&r);
}

static void timeout_kills(void **state)
{
	const char *argv[] = {"/bin/sleep", "10", NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 200};
	struct spawn_result r;
	long t0 = now_ms();

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_true(now_ms() - t0 < 3000);
	assert_true(r.timed_out);
	assert_int_equal(r.status, 128 + SIGKILL);
	spawn_result_free(&r);

	/* Without captured output the deadline still holds. */
	o.capture = 0;
	t0 = now_ms();
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_true(now_ms() - t0 < 3000);
	assert_true(r.timed_out);
}

static void timeout_output_closed(void **state)
{
	/* The child closes its output and keeps running. */
	const char *argv[] = {"/bin/sh", "-c", "exec >&- 2>&-; exec /bin/sleep 10", NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 300};
	struct spawn_result r;
	long t0 = now_ms();

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_true(now_ms() - t0 < 3000);
	assert_true(r.timed_out);
	spawn_result_free(&r);
}

static void max_output(void **state)
{
	const char *small[] = {"/bin/sh", "-c", "printf 0123456789", NULL};
	const char *big[] = {
		"/bin/sh", "-c", "head -c 300000 /dev/zero | tr '\\0' y; exit 4", NULL};
	struct spawn_opts o = {.capture = 1, .max_output = 4, .timeout_ms = 10000};
	struct spawn_result r;

	assert_int_equal(spawn_run(small, &o, &r), 0);
	assert_int_equal(r.output_len, 4);
	assert_string_equal(r.output, "0123");
	spawn_result_free(&r);

	/* The rest is read and dropped: the child is not left blocked on a full pipe. */
	o.max_output = 1000;
	assert_int_equal(spawn_run(big, &o, &r), 0);
	assert_false(r.timed_out);
	assert_int_equal(r.status, 4);
	assert_int_equal(r.output_len, 1000);
	assert_int_equal(strspn(r.output, "y"), 1000);
	spawn_result_free(&r);
}

static void no_fd_leak(void **state)
{
	const char *argv[] = {"/bin/ls", "-l", "/proc/self/fd", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r;
	int fd = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
	int high = dup2(fd, 200);
	unsigned others = 0;

	assert_true(fd >= 3);
	assert_int_equal(high, 200);
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	close(fd);
	close(high);
	assert_int_equal(r.status, 0);
	/* Lines "... N -> target": only 0, 1, 2 and the directory ls itself reads. */
	for (char *l = r.output; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		char *arrow = strstr(l, " -> ");
		char *eol = strchr(l, '\n');
		char *num;
		long n;

		if (!arrow || (eol && arrow > eol))
			continue;
		for (num = arrow; num > l && num[-1] != ' '; num--)
			;
		n = strtol(num, NULL, 10);
		if (n <= 2)
			continue;
		if (strncmp(arrow + 4, "/proc/", 6) != 0)
			fail_msg("fd %ld leaked into the child:\n%s", n, r.output);
		others++;
	}
	assert_true(others <= 1);
	/* Positive control: the listing had the standard descriptors. */
	assert_non_null(strstr(r.output, " 0 -> "));
	assert_non_null(strstr(r.output, " 2 -> "));
	spawn_result_free(&r);
}

static void cwd_honoured(void **state)
{
	const char *argv[] = {"/bin/sh", "-c", "pwd -P", NULL};
	struct spawn_opts o = {.capture = 1, .cwd = unit_dir};
	struct spawn_result r;
	char want[PATH_MAX + 2];

	snprintf(want, sizeof(want), "%s\n", unit_dir);
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_string_equal(r.output, want);
	spawn_result_free(&r);
	o.cwd = NULL;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_string_equal(r.output, "/\n");
	spawn_result_free(&r);
	o.cwd = unit_path("missing");
	assert_int_equal(spawn_run(argv, &o, &r), -ENOENT);
}

static int touched;

static int fn_writes(void *arg, int outfd)
{
	char cwd[PATH_MAX];

	touched = 1; /* in the child's copy only */
	dprintf(outfd, "%s in %s", (const char *)arg, getcwd(cwd, sizeof(cwd)));
	return 7;
}

static int fn_negative(void *arg, int outfd)
{
	return -5;
}

static void spawn_fn_output(void **state)
{
	struct spawn_opts o = {.cwd = unit_dir};
	struct spawn_result r;
	char want[PATH_MAX + 32];

	snprintf(want, sizeof(want), "hello in %s", unit_dir);
	assert_int_equal(spawn_fn(fn_writes, "hello", &o, &r), 0);
	assert_int_equal(r.status, 7);
	assert_string_equal(r.output, want);
	assert_int_equal(touched, 0);
	spawn_result_free(&r);
	assert_int_equal(spawn_fn(fn_negative, NULL, &o, &r), 0);
	assert_int_equal(r.status, 125);
	spawn_result_free(&r);
}

static void describe(void **state)
{
	struct spawn_result r = {0};
	char buf[64];

	r.status = 3;
	assert_string_equal(spawn_describe(&r, buf, sizeof(buf)), "exit 3");
	r.status = 0;
	assert_string_equal(spawn_describe(&r, buf, sizeof(buf)), "exit 0");
	r.status = 128 + 9;
	assert_string_equal(spawn_describe(&r, buf, sizeof(buf)), "killed by signal 9");
	r.timed_out = 1;
	assert_string_equal(spawn_describe(&r, buf, sizeof(buf)), "timed out");
	assert_ptr_equal(spawn_describe(&r, buf, sizeof(buf)), buf);
}

static void describe_real_signal(void **state)
{
	const char *argv[] = {"/bin/sh", "-c", "kill -TERM $$", NULL};
	struct spawn_opts o = {0};
	struct spawn_result r;
	char buf[64];

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 128 + SIGTERM);
	assert_string_equal(spawn_describe(&r, buf, sizeof(buf)), "killed by signal 15");
}

/*
 * Issue 14: a spawned child shared the session of the terminal that ran the caller, and
 * could push input into it (TIOCSTI). No drop here (unprivileged): the session is the
 * child's whoever it runs as; test_priv checks the same for a child that drops.
 */
static int check_session(void)
{
	struct spawn_opts o = {.timeout_ms = 5000};

	return session_check_spawn(&o);
}

static void own_session_no_terminal(void **state)
{
	session_in_child(check_session, 10, "a spawned child and the caller's terminal");
}

/* Read what the terminal shows (the pty master), for up to ms milliseconds. */
static size_t screen(int m, char *buf, size_t n, int ms)
{
	size_t len = 0;

	for (long end = now_ms() + ms; len < n - 1 && now_ms() < end;) {
		ssize_t r = read(m, buf + len, n - 1 - len);

		if (r > 0)
			len += (size_t)r;
		else
			usleep(10000);
	}
	buf[len] = '\0';
	return len;
}

/*
 * With the caller's stderr a terminal, the child's stderr is a pipe: what it writes
 * reaches the terminal through the caller, escape sequences escaped.
 */
static int check_stderr_relay(void)
{
	const char *argv[] = {"/bin/sh", "-c",
		"printf 'spawn-err \\033[31mred\\n' >&2; [ -t 2 ] && exit 3; exit 0", NULL};
	struct spawn_opts o = {.timeout_ms = 5000};
	struct spawn_result r;
	char buf[512];
	int m;

	session_diag = dup(2);
	m = session_with_pty();
	if (m < 0)
		session_fail(1, "cannot set up a pty: %s", strerror(errno));
	if (spawn_run(argv, &o, &r) != 0)
		session_fail(2, "spawn_run failed");
	if (r.status == 3)
		session_fail(3, "the child's stderr is the caller's terminal");
	if (r.status != 0)
		session_fail(4, "exit %d", r.status);
	screen(m, buf, sizeof(buf), 1000);
	if (!strstr(buf, "spawn-err \\x1b[31mred\n"))
		session_fail(5, "the terminal shows \"%s\", not the escaped line", buf);
	if (strchr(buf, '\033'))
		session_fail(6, "an escape sequence reached the terminal");
	return 0;
}

static void stderr_relayed_escaped(void **state)
{
	session_in_child(check_stderr_relay, 10, "stderr of a child, caller on a terminal");
}

/* Something the child leaves behind holds the stderr pipe: spawn returns at the exit. */
static int check_relay_left_behind(void)
{
	const char *argv[] = {"/bin/sh", "-c", "/bin/sleep 3 & exit 0", NULL};
	struct spawn_opts o = {.timeout_ms = 10000};
	struct spawn_result r;
	long t0;

	session_diag = dup(2);
	if (session_with_pty() < 0)
		session_fail(1, "cannot set up a pty: %s", strerror(errno));
	t0 = now_ms();
	if (spawn_run(argv, &o, &r) != 0 || r.status != 0 || r.timed_out)
		session_fail(2, "spawn_run: status %d timed out %d", r.status, r.timed_out);
	if (now_ms() - t0 > 2000)
		session_fail(
			3, "returned after %ld ms: waited for the background sleep", now_ms() - t0);
	return 0;
}

static void stderr_relay_left_behind(void **state)
{
	session_in_child(check_relay_left_behind, 10, "stderr held by a left-behind process");
}

/*
 * detach (squid started by ocsb-provision): spawn_run returns while the program still
 * runs, with stdout and stderr on /dev/null even when capture was asked (the caller
 * would otherwise wait for it), not as our child; an exec error still comes back.
 */
static void detach_runs_on_alone(void **state)
{
	const char *missing[] = {"/nonexistent/ocsb-test-program", NULL};
	char script[3 * PATH_MAX + 200], done[PATH_MAX], buf[64] = "";
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	struct spawn_opts o = {.capture = 1, .detach = 1};
	struct spawn_result r;
	long t0 = mono_ms();
	int i;

	(void)state;
	snprintf(done, sizeof(done), "%s", unit_path("done"));
	snprintf(script, sizeof(script),
		"echo to-stdout; echo to-stderr >&2; sleep 0.5; echo $PPID >%s.tmp && "
		"mv %s.tmp %s",
		done, done, done);
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_true(r.output == NULL || r.output_len == 0);
	spawn_result_free(&r);
	assert_true(mono_ms() - t0 < 450);
	assert_int_equal(access(done, F_OK), -1);
	for (i = 0; i < 100 && access(done, F_OK) < 0; i++)
		usleep(50000);
	assert_true(unit_read(done, buf, sizeof(buf)) > 0);
	assert_int_not_equal(atoi(buf), (int)getpid());
	assert_int_equal(spawn_run(missing, &o, &r), -ENOENT);
}

#define T(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(captures_output_and_status),
		cmocka_unit_test(no_capture),
		cmocka_unit_test(relative_program),
		cmocka_unit_test(missing_program),
		cmocka_unit_test(input_to_stdin),
		cmocka_unit_test(large_input),
		cmocka_unit_test(unread_input),
		cmocka_unit_test(environment_not_inherited),
		cmocka_unit_test(timeout_kills),
		cmocka_unit_test(timeout_output_closed),
		cmocka_unit_test(max_output),
		cmocka_unit_test(no_fd_leak),
		T(cwd_honoured),
		T(spawn_fn_output),
		cmocka_unit_test(describe),
		cmocka_unit_test(describe_real_signal),
		cmocka_unit_test(own_session_no_terminal),
		cmocka_unit_test(stderr_relayed_escaped),
		cmocka_unit_test(stderr_relay_left_behind),
		T(detach_runs_on_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
