/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "dirs.h"
#include "log.h"
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

/* ---- between fork and exec: async-signal-safe calls only ---- */

/* Between fork and exec: report errno through the CLOEXEC pipe, never exit(). */
static void child_fail(int errfd, int err)
{
	ssize_t w = write(errfd, &err, sizeof(err));
	(void)w;
	_exit(err == SPAWN_EREGAIN ? SPAWN_EXIT_REGAIN : 127);
}

static void child_setup(const struct spawn_opts *o, const struct spawn_cred *cred, int in_fd,
	int out_fd, int err_fd, int errfd, int keepfd)
{
	int top = errfd > keepfd ? errfd : keepfd;
	sigset_t all;
	int nullfd, r;

	/* First: no controlling terminal from here on (see spawn.h). Never fails in a child. */
	if (setsid() < 0)
		child_fail(errfd, errno);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);

	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0)
		child_fail(errfd, errno);
	/* stderr: the capture pipe, else the relay pipe, else the caller's (spawn.h). */
	if (err_fd < 0)
		err_fd = 2;
	if (out_fd >= 0)
		err_fd = out_fd;
	if (dup2(in_fd >= 0 ? in_fd : nullfd, 0) < 0 ||
		dup2(out_fd >= 0 ? out_fd : nullfd, 1) < 0 || dup2(err_fd, 2) < 0)
		child_fail(errfd, errno);
	/* Leave only stdio, the error pipe (CLOEXEC, closes itself on exec) and keepfd. */
	for (int fd = 3; fd < top; fd++)
		if (fd != errfd && fd != keepfd)
			close(fd);
	if (syscall(SYS_close_range, (unsigned)top + 1, ~0U, 0) < 0)
		for (int fd = top + 1; fd < 65536; fd++)
			close(fd);
	if (o->drop && (r = spawn_child_drop(cred)) < 0)
		child_fail(errfd, -r);
	/* After the drop: a change of uid clears the parent-death signal (prctl(2)). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != o->parent)
		child_fail(errfd, ESRCH);
	if (chdir(o->cwd ? o->cwd : "/") < 0)
		child_fail(errfd, errno);
}

/*
 * spawn_opts.detach: the grandchild goes on alone. It keeps none of the pipes (the caller
 * waits for their end of file) and no parent-death signal (fork clears it); the error
 * pipe stays, so its exec error still reaches the caller. Async-signal-safe.
 */
static void child_detach(int errfd)
{
	int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid_t pid;

	if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(nullfd, 1) < 0 || dup2(nullfd, 2) < 0)
		child_fail(errfd, errno);
	pid = fork();
	if (pid < 0)
		child_fail(errfd, errno);
	if (pid > 0)
		_exit(0);
}

/* ---- parent side ---- */

/*
 * The child's stderr, onto ours: control bytes (escape sequences, \r, backspaces)
 * become \xNN, so a less-privileged child cannot drive the terminal or forge lines
 * that look like ours. Newlines, tabs and UTF-8 pass.
 */
static void relay(const char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	char out[4 * 4096];
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)p[i];

		if (o + 4 > sizeof(out)) {
			if (write(2, out, o) < 0)
				return;
			o = 0;
		}
		if (ch == '\n' || ch == '\t' || (ch >= 0x20 && ch != 0x7f)) {
			out[o++] = (char)ch;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	if (o && write(2, out, o) < 0)
		return;
}

/* Whatever the stderr pipe holds now, without waiting (the child is gone). */
static void relay_drain(int err_r)
{
	char tmp[4096];
	ssize_t r;

	for (int i = 0; i < 16 && (r = read(err_r, tmp, sizeof(tmp))) > 0; i++)
		relay(tmp, (size_t)r);
}

/* Feed input, collect output, relay stderr (err_r, non-blocking), wait with a deadline. */
static int parent_io(pid_t pid, int in_w, int out_r, int err_r, const struct spawn_opts *o,
	struct spawn_result *ret)
{
	size_t max = o->max_output ? o->max_output : 256 * 1024;
	long deadline = mono_ms() + (o->timeout_ms ? o->timeout_ms : 60000);
	const char *in = o->input;
	size_t in_left = in ? strlen(in) : 0;
	char *out = NULL;
	size_t len = 0;
	int st, reaped = 0;

	if (o->capture) {
		out = malloc(max + 1);
		if (!out)
			return -ENOMEM;
	}
	while (in_w >= 0 || out_r >= 0 || err_r >= 0) {
		struct pollfd pf[3];
		int n = 0, left = (int)(deadline - mono_ms());

		if (left <= 0) {
			ret->timed_out = 1;
			kill(pid, SIGKILL);
			break;
		}
		/*
		 * Only stderr left: its end of file is not waited for once the child is gone,
		 * since something it left behind may hold the pipe (the other pipes keep their
		 * old rule: output is complete at end of file or the deadline).
		 */
		if (in_w < 0 && out_r < 0) {
			pid_t w = waitpid(pid, &st, WNOHANG);

			if (w == pid) {
				reaped = 1;
				relay_drain(err_r);
				close(err_r);
				err_r = -1;
				break;
			}
			if (left > 50)
				left = 50;
		}
		if (in_w >= 0)
			pf[n++] = (struct pollfd){.fd = in_w, .events = POLLOUT};
		if (out_r >= 0)
			pf[n++] = (struct pollfd){.fd = out_r, .events = POLLIN};
		if (err_r >= 0)
			pf[n++] = (struct pollfd){.fd = err_r, .events = POLLIN};
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
			} else if (pf[i].fd == err_r) {
				char tmp[4096];
				ssize_t r = read(err_r, tmp, sizeof(tmp));

				if (r < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (r <= 0) {
					close(err_r);
					err_r = -1;
					continue;
				}
				relay(tmp, (size_t)r);
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
	if (err_r >= 0)
		close(err_r);
	/* A child that closed its output can still hang: keep the deadline. */
	while (!reaped) {
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
	int stderrpipe[2] = {-1, -1};
	struct spawn_cred cred = {0};
	struct termios tio;
	struct sigaction old_pipe;
	pid_t parent;
	int err = 0, r;
	ssize_t n;
	pid_t pid;

	memset(ret, 0, sizeof(*ret));
	if (argv && argv[0][0] != '/')
		return -EINVAL;
	/* NSS and malloc before the fork, never in the child (spawn.h). */
	if (o->drop && (r = spawn_cred_init(&cred, o->uid, o->gid, o->user)) < 0)
		return r;
	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	if ((o->input && pipe2(inpipe, O_CLOEXEC) < 0) ||
		((o->capture || fn) && pipe2(outpipe, O_CLOEXEC) < 0)) {
		r = -errno;
		goto out;
	}
	/*
	 * stderr that is not captured: a pipe we copy, escaped, for a child that drops (none
	 * of root's descriptors for it) and for any child when ours is a terminal.
	 */
	if (!(o->capture && !fn) && (o->drop || tcgetattr(2, &tio) == 0)) {
		if (pipe2(stderrpipe, O_CLOEXEC) < 0 ||
			fcntl(stderrpipe[0], F_SETFL, O_NONBLOCK) < 0) {
			r = -errno;
			goto out;
		}
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
		child_setup(o, &cred, inpipe[0], fn ? -1 : outpipe[1], stderrpipe[1], errpipe[1],
			fn ? outpipe[1] : -1);
		if (fn) {
			int rc = fn(arg, outpipe[1]);
			_exit(rc < 0 || rc > 125 ? 125 : rc);
		}
		if (o->detach)
			child_detach(errpipe[1]);
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
	if (stderrpipe[1] >= 0) {
		close(stderrpipe[1]);
		stderrpipe[1] = -1;
	}
	if (inpipe[1] >= 0)
		fcntl(inpipe[1], F_SETFL, O_NONBLOCK);
	/* A child that exits without reading must give us EPIPE, not a fatal SIGPIPE. */
	sigaction(SIGPIPE, &(struct sigaction){.sa_handler = SIG_IGN}, &old_pipe);
	r = parent_io(pid, inpipe[1], outpipe[0], stderrpipe[0], o, ret);
	sigaction(SIGPIPE, &old_pipe, NULL);
	inpipe[1] = outpipe[0] = stderrpipe[0] = -1;
	if (r < 0)
		goto out;
	/* The pipe closed at exec (success) or carries the child's errno. */
	n = read(errpipe[0], &err, sizeof(err));
	if (n == (ssize_t)sizeof(err) && err != 0) {
		if (err == SPAWN_EREGAIN)
			log_err("%s: the child dropped to uid %u gid %u could take back the ids it "
				"left (exit %d): not run; is something keeping capabilities?",
				argv ? argv[0] : "spawn", (unsigned)o->uid, (unsigned)o->gid,
				ret->status);
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
		if (stderrpipe[i] >= 0)
			close(stderrpipe[i]);
	}
	spawn_cred_free(&cred);
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
