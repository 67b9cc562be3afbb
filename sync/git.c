/* SPDX-License-Identifier: MIT */
/*
 * git itself, for the two jobs libgit2 1.5 does slowly: building a pack with delta reuse
 * (push) and the connectivity check of fetched history (pull). Always the owner's own
 * process on the owner's own repository: /usr/bin/git by absolute path, no shell, a built
 * environment, only stdin/stdout/stderr open in it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sync.h"

#define SYNC_GIT_PATH "/usr/bin/git"
#define SYNC_GIT_MAX_ARGS 16

/* Between fork and exec: errno goes back through the CLOEXEC pipe, never exit(). */
__attribute__((noreturn)) static void sync_git_child(
	const char *const *argv, char *const *envp, int infd, int outfd, int errfd, int reportfd)
{
	sigset_t none;
	int e, nullfd;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	/*
	 * git dies with its parent: the pull's confined child may not signal anything but
	 * itself, so its way of stopping git is to end.
	 */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		goto fail;
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0 || dup2(infd >= 0 ? infd : nullfd, 0) < 0 ||
		dup2(outfd >= 0 ? outfd : nullfd, 1) < 0 || (errfd >= 0 && dup2(errfd, 2) < 0))
		goto fail;
	/* Only stdio reaches git: not the SSH socket or anything else this process holds. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		for (int fd = 3; fd < 4096; fd++)
			if (fd != reportfd)
				close(fd);
	execve(argv[0], (char *const *)argv, envp);
fail:
	e = errno;
	if (write(reportfd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

int sync_git_check(void)
{
	if (access(SYNC_GIT_PATH, X_OK) == 0)
		return 0;
	log_err("cannot run %s: %s (ocsb sync needs git: install it, see "
		"tools/install-deps.sh)",
		SYNC_GIT_PATH, strerror(errno));
	return -1;
}

static void sync_close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]), p[i] = -1;
}

int sync_git_start(struct sync_git *g, const char *gitdir, const char *home,
	const char *const *args, const char *const *env, unsigned flags)
{
	/*
	 * A built environment: no inherited GIT_DIR, GIT_OBJECT_DIRECTORY, GIT_ALTERNATE_*
	 * or GIT_CONFIG_* that could point git at other objects or settings. HOME is the
	 * owner's (their ~/.gitconfig is theirs to set), LC_ALL=C for stable messages.
	 */
	char gitdir_arg[4200], home_env[4200];
	const char *argv[SYNC_GIT_MAX_ARGS + 3];
	char *envp[SYNC_GIT_MAX_ARGS + 4] = {"PATH=/usr/bin:/bin", "LC_ALL=C", home_env};
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, rep[2] = {-1, -1};
	int k = 0, r, cerr = 0;

	memset(g, 0, sizeof(*g));
	g->pid = -1;
	g->in = g->out = g->err = -1;
	if (snprintf(gitdir_arg, sizeof(gitdir_arg), "--git-dir=%s", gitdir) >=
			(int)sizeof(gitdir_arg) ||
		snprintf(home_env, sizeof(home_env), "HOME=%s", home ? home : "/") >=
			(int)sizeof(home_env)) {
		log_err("path too long");
		return -1;
	}
	argv[k++] = SYNC_GIT_PATH;
	argv[k++] = gitdir_arg;
	for (int i = 0; args[i]; i++) {
		if (k >= SYNC_GIT_MAX_ARGS + 2)
			return -1;
		argv[k++] = args[i];
	}
	argv[k] = NULL;
	for (int i = 0, e = 3; env && env[i]; i++) {
		if (e >= SYNC_GIT_MAX_ARGS + 3)
			return -1;
		envp[e++] = (char *)env[i];
	}
	if (pipe2(rep, O_CLOEXEC) < 0 || ((flags & SYNC_GIT_STDIN) && pipe2(in, O_CLOEXEC) < 0) ||
		((flags & SYNC_GIT_STDOUT) && pipe2(out, O_CLOEXEC) < 0) ||
		((flags & SYNC_GIT_STDERR) && pipe2(err, O_CLOEXEC) < 0)) {
		log_err("pipe: %s", strerror(errno));
		goto fail;
	}
	g->pid = fork();
	if (g->pid < 0) {
		log_err("fork: %s", strerror(errno));
		goto fail;
	}
	if (g->pid == 0)
		sync_git_child(argv, envp, in[0], out[1], err[1], rep[1]);
	close(rep[1]);
	rep[1] = -1;
	/* The exec error, if any, arrives through the CLOEXEC pipe; EOF means exec worked. */
	while ((r = (int)read(rep[0], &cerr, sizeof(cerr))) < 0 && errno == EINTR)
		;
	if (r == (int)sizeof(cerr)) {
		while (waitpid(g->pid, NULL, 0) < 0 && errno == EINTR)
			;
		g->pid = -1;
		log_err("cannot run %s: %s (ocsb sync needs git: install it, see "
			"tools/install-deps.sh)",
			SYNC_GIT_PATH, strerror(cerr));
		goto fail;
	}
	close(rep[0]);
	rep[0] = -1;
	if (in[0] >= 0)
		close(in[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (err[1] >= 0)
		close(err[1]);
	g->in = in[1];
	g->out = out[0];
	g->err = err[0];
	return 0;
fail:
	sync_close_pair(in);
	sync_close_pair(out);
	sync_close_pair(err);
	sync_close_pair(rep);
	return -1;
}

int sync_git_finish(struct sync_git *g, int kill_it)
{
	int st = 0;

	if (g->in >= 0)
		close(g->in), g->in = -1;
	if (g->out >= 0)
		close(g->out), g->out = -1;
	if (g->err >= 0)
		close(g->err), g->err = -1;
	if (g->pid <= 0)
		return -1;
	/*
	 * The pull's confined child may signal only itself: git is then left to die with
	 * it (PR_SET_PDEATHSIG), which happens as soon as the child reports the failure.
	 */
	if (kill_it && kill(g->pid, SIGKILL) < 0 && errno != ESRCH) {
		g->pid = -1;
		return -1;
	}
	while (waitpid(g->pid, &st, 0) < 0 && errno == EINTR)
		;
	g->pid = -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

int sync_git_read_err(struct sync_git *g, char *out, size_t n, time_t deadline)
{
	size_t len = 0;
	char sink[4096];

	out[0] = '\0';
	for (;;) {
		struct pollfd pfd = {.fd = g->err, .events = POLLIN};
		int ms = 1000, r;
		ssize_t got;

		if (deadline && time(NULL) > deadline)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			continue;
		/* Keep the first part (git's first message is the reason), drop the rest. */
		if (len + 1 < n)
			got = read(g->err, out + len, n - 1 - len);
		else
			got = read(g->err, sink, sizeof(sink));
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -errno;
		if (got == 0)
			break;
		if (len + 1 < n)
			len += (size_t)got;
	}
	out[len] = '\0';
	return 0;
}
