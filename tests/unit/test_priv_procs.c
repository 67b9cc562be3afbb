/* SPDX-License-Identifier: MIT */
/*
 * Signals by pidfd against real pid reuse: needs root (a pid namespace of its own, where
 * /proc/sys/kernel/ns_last_pid hands a dead process's pid to a newcomer on purpose).
 * tests/run-unit.sh runs binaries named test_priv* as root; without root the whole
 * binary is one skip, with why.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>

#include "unit.h"

#include "procs.h"

#define AGENT_UID 61234 /* no account needed: a uid is a number */
#define SKIP_CODE 77

/* A child that runs as uid (0: stays root), told to its parent through a pipe, then waits. */
static pid_t child_as(uid_t uid)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		if (uid &&
			(setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
				setresuid(uid, uid, uid) < 0))
			_exit(1);
		c = 'r';
		if (write(p[1], &c, 1) != 1)
			_exit(1);
		alarm(30);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1) {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return pid;
}

static int write_last_pid(pid_t last)
{
	char b[32];
	int fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC), n, r;

	if (fd < 0)
		return -1;
	n = snprintf(b, sizeof(b), "%d", (int)last);
	r = write(fd, b, (size_t)n) == n ? 0 : -1;
	close(fd);
	return r;
}

static int died_of(pid_t pid, int sig)
{
	int st = 0;

	return waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == sig;
}

/*
 * As PID 1 of a new pid namespace with its own /proc. The agent's process A is found
 * and pinned; A dies and root's process B gets A's pid. Returns 0, SKIP_CODE when the
 * kernel did not hand out the pid, or the number of the check that failed.
 */
static int reuse_scenario(void)
{
	pid_t a, b, c;
	int fd, live;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return SKIP_CODE;
	a = child_as(AGENT_UID);
	if (a < 0)
		return 1;
	if (procs_count_uid(AGENT_UID) != 1)
		return 2;
	fd = procs_pidfd(a);
	if (fd < 0)
		return 3;
	kill(a, SIGKILL);
	if (!died_of(a, SIGKILL))
		return 4;
	if (write_last_pid(a - 1) < 0)
		return SKIP_CODE;
	b = child_as(0);
	if (b != a) {
		kill(b, SIGKILL);
		return SKIP_CODE;
	}
	/* Control: by pid, the agent's old pid now reaches root's process. */
	if (kill(a, 0) != 0)
		return 5;
	/* Through the pin: the agent's process is gone, B is not touched. */
	if (procs_pidfd_signal(a, fd, SIGKILL) != -ESRCH)
		return 6;
	close(fd);
	/* Found by pid again: B is not the agent's. */
	if (procs_signal_pid(a, AGENT_UID, SIGKILL) != 0)
		return 7;
	if (procs_kill_uid(AGENT_UID, "agent") != 0)
		return 8;
	live = waitpid(b, NULL, WNOHANG) == 0;
	kill(b, SIGKILL);
	died_of(b, SIGKILL);
	if (!live)
		return 9;
	/* And the agent's processes are still reached: a new one is killed. */
	c = child_as(AGENT_UID);
	if (c < 0 || procs_kill_uid(AGENT_UID, "agent") != 1 || !died_of(c, SIGKILL))
		return 10;
	return 0;
}

static void reused_pid_is_not_signalled(void **state)
{
	int st = 0;
	pid_t outer;

	(void)state;
	outer = fork();
	assert_true(outer >= 0);
	if (outer == 0) {
		pid_t init;
		int ist = 0;

		if (unshare(CLONE_NEWPID | CLONE_NEWNS) < 0)
			_exit(SKIP_CODE);
		init = fork();
		if (init == 0)
			_exit(reuse_scenario());
		if (init < 0 || waitpid(init, &ist, 0) != init || !WIFEXITED(ist))
			_exit(100);
		_exit(WEXITSTATUS(ist));
	}
	assert_int_equal(waitpid(outer, &st, 0), outer);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == SKIP_CODE)
		skip();
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reused_pid_is_not_signalled),
	};

	if (geteuid() != 0) {
		printf("1..1\nok 1 - pid reuse # SKIP needs root (sudo make test-unit)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
