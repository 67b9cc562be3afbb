/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/keyctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dirs.h"
#include "spawn.h"
#include "util.h"

static char *const default_env[] = {
	"PATH=" OCSB_ROOT_PATH,
	"LC_ALL=C",
	NULL,
};

void spawn_result_free(struct spawn_result *r)
{
	free(r->output);
	r->output = NULL;
	r->output_len = 0;
}

int spawn_drop_privileges(uid_t uid, gid_t gid, const char *user)
{
	if (user ? initgroups(user, gid) < 0 : setgroups(0, NULL) < 0)
		return -errno;
	if (setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return -errno;
	/* Paranoia from OpenSSH's permanently_set_uid(): prove the way back is closed. */
	if (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
		return -EPERM;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/* A session keyring of its own: nothing of root's keys stays reachable. */
	syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL);
	return 0;
}

/* Between fork and exec: report errno through the CLOEXEC pipe, never exit(). */
static void child_fail(int errfd, int err)
{
	ssize_t w = write(errfd, &err, sizeof(err));
	(void)w;
	_exit(127);
}

static void child_setup(const struct spawn_opts *o, int in_fd, int out_fd, int errfd, int keepfd)
{
	int top = errfd > keepfd ? errfd : keepfd;
	sigset_t all;
	int nullfd, r;

	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0)
		child_fail(errfd, errno);
	if (dup2(in_fd >= 0 ? in_fd : nullfd, 0) < 0 ||
		dup2(out_fd >= 0 ? out_fd : nullfd, 1) < 0 || dup2(out_fd >= 0 ? out_fd : 2, 2) < 0)
		child_fail(errfd, errno);
	/* Leave only stdio, the error pipe (CLOEXEC, closes itself on exec) and keepfd. */
	for (int fd = 3; fd < top; fd++)
		if (fd != errfd && fd != keepfd)
			close(fd);
	if (syscall(SYS_close_range, (unsigned)top + 1, ~0U, 0) < 0)
		for (int fd = top + 1; fd < 65536; fd++)
			close(fd);
	if (o->drop && (r = spawn_drop_privileges(o->uid, o->gid, o->user)) < 0)
		child_fail(errfd, -r);
	/* After the drop: a change of uid clears the parent-death signal (prctl(2)). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != o->parent)
		child_fail(errfd, ESRCH);
	if (chdir(o->cwd ? o->cwd : "/") < 0)
		child_fail(errfd, errno);
}

/* Feed input, collect output, wait with a deadline. */
static int parent_io(
	pid_t pid, int in_w, int out_r, const struct spawn_opts *o, struct spawn_result *ret)
{
	size_t max = o->max_output ? o->max_output : 256 * 1024;
	long deadline = mono_ms() + (o->timeout_ms ? o->timeout_ms : 60000);
	const char *in = o->input;
	size_t in_left = in ? strlen(in) : 0;
	char *out = NULL;
	size_t len = 0;
	int st;

	if (o->capture) {
		out = malloc(max + 1);
		if (!out)
			return -ENOMEM;
	}
	while (in_w >= 0 || out_r >= 0) {
		struct pollfd pf[2];
		int n = 0, left = (int)(deadline - mono_ms());

		if (left <= 0) {
			ret->timed_out = 1;
			kill(pid, SIGKILL);
			break;
		}
		if (in_w >= 0)
			pf[n++] = (struct pollfd){.fd = in_w, .events = POLLOUT};
		if (out_r >= 0)
			pf[n++] = (struct pollfd){.fd = out_r, .events = POLLIN};
		if (poll(pf, (nfds_t)n, left) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == in_w) {
				/* Non-blocking: a child that echoes its input must not deadlock us. */
				ssize_t w = in_left ? write(in_w, in, in_left) : 0;
				if (w < 0 && (errno == EAGAIN || errno == EINTR))
					continue;
				if (w > 0) {
					in += w;
					in_left -= (size_t)w;
				}
				/* EPIPE: the child stopped reading; its input is done. */
				if (w <= 0 || in_left == 0) {
					close(in_w);
					in_w = -1;
				}
			} else {
				/* Straight into the result, a pipe's worth at a time. */
				char tmp[4096];
				int direct = out && len < max;
				size_t want = direct ? max - len : sizeof(tmp);
				ssize_t r;

				if (want > 65536)
					want = 65536;
				r = read(out_r, direct ? out + len : tmp, want);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0) {
					close(out_r);
					out_r = -1;
					continue;
				}
				if (direct)
					len += (size_t)r;
			}
		}
	}
	if (in_w >= 0)
		close(in_w);
	if (out_r >= 0)
		close(out_r);
	/* A child that closed its output can still hang: keep the deadline. */
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			free(out);
			return -errno;
		}
		if (mono_ms() >= deadline) {
			ret->timed_out = 1;
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		usleep(2000);
	}
	ret->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	if (out) {
		out[len] = '\0';
		ret->output = out;
		ret->output_len = len;
	}
	return 0;
}

static int spawn_common(const char *const argv[], int (*fn)(void *, int), void *arg,
	const struct spawn_opts *o, struct spawn_result *ret)
{
	int errpipe[2] = {-1, -1}, inpipe[2] = {-1, -1}, outpipe[2] = {-1, -1};
	struct sigaction old_pipe;
	pid_t parent;
	int err = 0, r;
	ssize_t n;
	pid_t pid;

	memset(ret, 0, sizeof(*ret));
	if (argv && argv[0][0] != '/')
		return -EINVAL;
	if (pipe2(errpipe, O_CLOEXEC) < 0)
		return -errno;
	if ((o->input && pipe2(inpipe, O_CLOEXEC) < 0) ||
		((o->capture || fn) && pipe2(outpipe, O_CLOEXEC) < 0)) {
		r = -errno;
		goto out;
	}
	parent = getpid();
	pid = fork();
	if (pid < 0) {
		r = -errno;
		goto out;
	}
	if (pid == 0) {
		struct spawn_opts mine = *o;

		/* The parent may die before PR_SET_PDEATHSIG: compare with who forked us. */
		mine.parent = parent;
		o = &mine;
		close(errpipe[0]);
		child_setup(o, inpipe[0], fn ? -1 : outpipe[1], errpipe[1], fn ? outpipe[1] : -1);
		if (fn) {
			int rc = fn(arg, outpipe[1]);
			_exit(rc < 0 || rc > 125 ? 125 : rc);
		}
		execve(argv[0], (char *const *)argv, o->envp ? o->envp : default_env);
		child_fail(errpipe[1], errno);
	}
	close(errpipe[1]);
	errpipe[1] = -1;
	if (inpipe[0] >= 0) {
		close(inpipe[0]);
		inpipe[0] = -1;
	}
	if (outpipe[1] >= 0) {
		close(outpipe[1]);
		outpipe[1] = -1;
	}
	if (inpipe[1] >= 0)
		fcntl(inpipe[1], F_SETFL, O_NONBLOCK);
	/* A child that exits without reading must give us EPIPE, not a fatal SIGPIPE. */
	sigaction(SIGPIPE, &(struct sigaction){.sa_handler = SIG_IGN}, &old_pipe);
	r = parent_io(pid, inpipe[1], outpipe[0], o, ret);
	sigaction(SIGPIPE, &old_pipe, NULL);
	inpipe[1] = outpipe[0] = -1;
	if (r < 0)
		goto out;
	/* The pipe closed at exec (success) or carries the child's errno. */
	n = read(errpipe[0], &err, sizeof(err));
	if (n == (ssize_t)sizeof(err) && err != 0) {
		spawn_result_free(ret);
		r = -err;
	}
out:
	for (int i = 0; i < 2; i++) {
		if (errpipe[i] >= 0)
			close(errpipe[i]);
		if (inpipe[i] >= 0)
			close(inpipe[i]);
		if (outpipe[i] >= 0)
			close(outpipe[i]);
	}
	return r;
}

int spawn_run(const char *const argv[], const struct spawn_opts *o, struct spawn_result *ret)
{
	if (!argv || !argv[0])
		return -EINVAL;
	return spawn_common(argv, NULL, NULL, o, ret);
}

int spawn_fn(int (*fn)(void *arg, int outfd), void *arg, const struct spawn_opts *o,
	struct spawn_result *ret)
{
	struct spawn_opts copy = *o;

	copy.capture = 1;
	return spawn_common(NULL, fn, arg, &copy, ret);
}

const char *spawn_describe(const struct spawn_result *r, char *buf, size_t n)
{
	if (r->timed_out)
		snprintf(buf, n, "timed out");
	else if (r->status > 128)
		snprintf(buf, n, "killed by signal %d", r->status - 128);
	else
		snprintf(buf, n, "exit %d", r->status);
	return buf;
}
