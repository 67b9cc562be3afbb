/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_SESSION_H
#define OCSB_TEST_SESSION_H

/*
 * For test_spawn and test_priv: the caller of spawn in a session of its own whose
 * controlling terminal (and stdin, stdout, stderr) is a fresh pty, as when root runs
 * `sudo ocsb-provision` in a terminal; and a probe, run in the spawned child, of what
 * that child can do to the terminal (CVE-2017-5226: TIOCSTI pushes input that the
 * shell reads once the program exits).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "spawn.h"

/*
 * In a forked copy of the test only (it changes session and stdio): returns the pty's
 * master, or -1. The slave is raw (no echo, no line buffering) and non-blocking.
 */
static inline int session_with_pty(void)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY), s;
	struct termios t;

	if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 || setsid() < 0)
		return -1;
	/* A session leader without a terminal acquires the first one it opens. */
	s = open(ptsname(m), O_RDWR);
	if (s < 0 || ioctl(s, TIOCSCTTY, 0) < 0 || tcgetattr(s, &t) < 0)
		return -1;
	cfmakeraw(&t);
	if (tcsetattr(s, TCSANOW, &t) < 0 || dup2(s, 0) < 0 || dup2(s, 1) < 0 || dup2(s, 2) < 0)
		return -1;
	if (s > 2)
		close(s);
	fcntl(0, F_SETFL, O_NONBLOCK);
	fcntl(m, F_SETFL, O_NONBLOCK);
	return m;
}

/* 1 when TIOCSTI works on one's own controlling terminal here (dev.tty.legacy_tiocsti). */
static inline int session_tiocsti_allowed(void)
{
	FILE *f = fopen("/proc/sys/dev/tty/legacy_tiocsti", "r");
	int v = 1; /* before Linux 6.2: always allowed */

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v == 1;
}

/* What was typed into the terminal (input queue of the slave, fd 0), drained. */
static inline size_t session_typed(char *buf, size_t n)
{
	ssize_t r = read(0, buf, n - 1);

	buf[r > 0 ? r : 0] = '\0';
	return r > 0 ? (size_t)r : 0;
}

/*
 * The probe, a spawn_fn function: "sid=S pid=P tty=T sti=N std=XYZ" where tty is 1 when
 * /dev/tty (the controlling terminal) opens, else -errno; sti counts the TIOCSTI calls
 * that worked (on /dev/tty and fds 0-2, each pushing '#'); std has 1 for each of fds
 * 0, 1, 2 that is a terminal.
 */
static inline int session_probe(void *arg, int outfd)
{
	int fds[4] = {open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC), 0, 1, 2};
	int tty = fds[0] >= 0 ? 1 : -errno, sti = 0;

	(void)arg;
	for (int i = 0; i < 4; i++)
		if (fds[i] >= 0 && ioctl(fds[i], TIOCSTI, "#") == 0)
			sti++;
	dprintf(outfd, "sid=%d pid=%d tty=%d sti=%d std=%d%d%d", (int)getsid(0), (int)getpid(), tty,
		sti, isatty(0), isatty(1), isatty(2));
	return 0;
}

/* Diagnostics of a forked check: its stdio is the pty, this is the test's stderr. */
static int session_diag = 2;

#define session_fail(code, ...)                          \
	do {                                             \
		dprintf(session_diag, "# " __VA_ARGS__); \
		dprintf(session_diag, "\n");             \
		return code;                             \
	} while (0)

#define session_note(rc, code, ...)                      \
	do {                                             \
		dprintf(session_diag, "# " __VA_ARGS__); \
		dprintf(session_diag, "\n");             \
		if (!(rc))                               \
			(rc) = (code);                   \
	} while (0)

/*
 * spawn_fn(session_probe) with the options o from a caller whose terminal is a fresh
 * pty: 0 when the child was in a session of its own, without a controlling terminal or
 * a terminal on fds 0-2, and nothing it pushed with TIOCSTI reached the terminal.
 */
static inline int session_check_spawn(const struct spawn_opts *o)
{
	struct spawn_result r;
	char typed[64], std[4] = "";
	int sid = 0, pid = 0, tty = 0, sti = -1, m, rc = 0;

	session_diag = dup(2);
	m = session_with_pty();
	if (m < 0)
		session_fail(
			1, "cannot set up a pty as the controlling terminal: %s", strerror(errno));
	/* Positive control: from the caller's own session the same push is typed. */
	if (session_tiocsti_allowed() &&
		(ioctl(0, TIOCSTI, "@") != 0 || session_typed(typed, sizeof(typed)) != 1 ||
			typed[0] != '@'))
		session_fail(2, "control: TIOCSTI from the caller's session did not type '@'");
	if (spawn_fn(session_probe, NULL, o, &r) != 0 || r.status != 0)
		session_fail(3, "the probe did not run");
	if (sscanf(r.output, "sid=%d pid=%d tty=%d sti=%d std=%3s", &sid, &pid, &tty, &sti, std) !=
		5)
		session_fail(4, "probe output: %s", r.output);
	spawn_result_free(&r);
	/* Every finding, not only the first: the report shows what the child could do. */
	if (sid == getsid(0))
		session_note(rc, 5, "the child is in the caller's session (sid %d)", sid);
	if (sid != pid)
		session_note(
			rc, 6, "the child (pid %d) does not lead its session (sid %d)", pid, sid);
	if (tty != -ENXIO)
		session_note(rc, 7, "the child has a controlling terminal (/dev/tty: %d)", tty);
	if (sti != 0 || session_typed(typed, sizeof(typed)) != 0)
		session_note(rc, 8,
			"the child typed into the caller's terminal (%d TIOCSTI worked)", sti);
	if (strcmp(std, "000") != 0)
		session_note(rc, 9, "the child's fds 0-2 are terminals: %s", std);
	return rc;
}

/* Run check() in a forked copy of the test, with a time limit; fail with its code. */
static inline void session_in_child(int (*check)(void), unsigned seconds, const char *what)
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
		fail_msg("%s: killed by signal %d", what, WTERMSIG(st));
	if (WEXITSTATUS(st) != 0)
		fail_msg("%s: check %d failed", what, WEXITSTATUS(st));
}

#endif
