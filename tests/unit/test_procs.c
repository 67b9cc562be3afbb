/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include <signal.h>
#include <sys/wait.h>

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

/* Pinned for a signal: the same answer as procs_pidfile, with a pidfd that reaches it. */
static void pidfile_pinned(void **state)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid = 0;
	int fd = -1;

	(void)state;
	assert_true(n > 0);
	self[n] = '\0';
	assert_int_equal(procs_pidfile_pin(own_pidfile(), self, &pid, &fd), 0);
	assert_int_equal(pid, getpid());
	assert_true(fd >= 0);
	assert_int_equal(procs_pidfd_signal(pid, fd, 0), 0);
	close(fd);
	assert_int_equal(procs_pidfile_pin(own_pidfile(), "/bin/true", &pid, &fd), -ENOENT);
	assert_int_equal(procs_pidfile_pin(unit_path("missing.pid"), self, &pid, &fd), -ENOENT);
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

struct seen {
	pid_t want[2];
	int hit[2];
};

static void note_pid(pid_t pid, int pidfd, void *ctx)
{
	struct seen *s = ctx;

	for (int i = 0; i < 2; i++)
		if (pid == s->want[i])
			s->hit[i] = 1;
}

/*
 * A zombie is not a process of the uid: it runs nothing and no signal removes it (issue 15:
 * under an init that does not reap, --remove gave up on them). A live child is, as control.
 */
static void zombies_do_not_count(void **state)
{
	struct seen s = {{0, 0}, {0, 0}};
	char who[512];
	siginfo_t si;
	pid_t live, dead;

	(void)state;
	live = fork();
	assert_true(live >= 0);
	if (live == 0) {
		/* Never outlive a failed test holding the runner's output open. */
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
		alarm(30);
		pause();
		_exit(0);
	}
	dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	/* Wait for the exit without reaping it: dead stays a zombie. */
	assert_int_equal(waitid(P_PID, (id_t)dead, &si, WEXITED | WNOWAIT), 0);
	s.want[0] = live;
	s.want[1] = dead;
	assert_true(procs_foreach_uid(getuid(), note_pid, &s) >= 1);
	assert_int_equal(s.hit[0], 1);
	assert_int_equal(s.hit[1], 0);
	assert_true(procs_describe_uid(getuid(), who, sizeof(who)) >= 1);
	assert_non_null(strchr(who, '('));
	kill(live, SIGKILL);
	waitpid(live, NULL, 0);
	waitpid(dead, NULL, 0);
}

/* A child that waits to be signalled (at most 30 s: never outlives a failed test). */
static pid_t sleeper(void)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

		dup2(nul, STDOUT_FILENO);
		dup2(nul, STDERR_FILENO);
		alarm(30);
		pause();
		_exit(0);
	}
	return pid;
}

static int term_signal(pid_t pid)
{
	int st = 0;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? WTERMSIG(st) : -1;
}

/* A live process of the uid is signalled through its pidfd; one of another uid is not. */
static void signal_pid_reaches_a_live_process(void **state)
{
	pid_t child = sleeper();

	(void)state;
	assert_int_equal(procs_signal_pid(child, getuid(), 0), 1);
	/* Not the uid's (pid 1 is root's; as root there is no other uid to ask about). */
	if (getuid() != 0)
		assert_int_equal(procs_signal_pid(1, getuid(), SIGKILL), 0);
	assert_int_equal(procs_signal_pid(child, getuid() + 1, SIGTERM), 0);
	assert_int_equal(procs_signal_pid(child, getuid(), SIGTERM), 1);
	assert_int_equal(term_signal(child), SIGTERM);
}

/* Exited and reaped: its pid is nobody's, or a newcomer's; nothing is signalled. */
static void signal_pid_of_an_exited_process(void **state)
{
	pid_t child = fork();
	siginfo_t si;

	(void)state;
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	/* A zombie first: it runs nothing, no signal ends it. */
	assert_int_equal(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(procs_signal_pid(child, getuid(), SIGKILL), 0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	assert_int_equal(procs_signal_pid(child, getuid(), SIGKILL), 0);
	assert_int_equal(procs_pidfd(child), -ESRCH);
}

/*
 * A pidfd names one process for good: once that process is gone, a signal through it
 * fails (ESRCH) instead of reaching whoever has the pid now. kill(pid) is the control:
 * it reaches the pid's current holder (here a second child, if the kernel gave it the
 * same pid; otherwise nothing).
 */
static void pidfd_outlives_its_pid(void **state)
{
	pid_t first = sleeper(), second;
	int fd = procs_pidfd(first);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(procs_pidfd_signal(first, fd, 0), 0);
	kill(first, SIGKILL);
	assert_int_equal(term_signal(first), SIGKILL);
	second = sleeper();
	assert_int_equal(procs_pidfd_signal(first, fd, SIGKILL), -ESRCH);
	assert_int_equal(procs_pidfd_signal(second, -1, 0), 0); /* untouched */
	close(fd);
	kill(second, SIGKILL);
	assert_int_equal(term_signal(second), SIGKILL);
}

/* The scan signals every process of the uid it finds, children included. */
static void signal_uid_counts_and_signals(void **state)
{
	pid_t a = sleeper(), b = sleeper();

	(void)state;
	if (getuid() == 0)
		skip(); /* root's processes are the machine's: the scan is test_priv_procs's */
	assert_true(procs_count_uid(getuid()) >= 2);
	/* SIGCONT harms nothing: the count is of live processes of the uid reached. */
	assert_true(procs_signal_uid(getuid(), SIGCONT, 0) >= 2);
	kill(a, SIGKILL);
	kill(b, SIGKILL);
	term_signal(a);
	term_signal(b);
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
		cmocka_unit_test_setup_teardown(pidfile_pinned, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(zombies_do_not_count),
		cmocka_unit_test(signal_pid_reaches_a_live_process),
		cmocka_unit_test(signal_pid_of_an_exited_process),
		cmocka_unit_test(pidfd_outlives_its_pid),
		cmocka_unit_test(signal_uid_counts_and_signals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
