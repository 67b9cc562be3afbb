/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentd.h"
#include "fileops.h"
#include "log.h"
#include "procs.h"
#include "opencode.h"
#include "spawn.h"
#include "dirs.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define PROXY_WAIT_MS 5000 /* OpenCode waits while a foreign proxy holds the port */
#define STABLE_MS 60000 /* running this long resets the backoff */
#define CRASH_LOOP 5 /* this many crashes in a row is reported as a loop */
#define PROBE_EVERY_MS 250
#define PROBE_TIMEOUT_MS 1000 /* per request: early requests to OpenCode can hang */
#define READY_DEADLINE_MS 60000
#define LOG_MAX (10 * 1024 * 1024)
#define EXEC_TIMEOUT_MS 3000 /* fork to exec of a child */
#define STOP_TIMEOUT_MS CHILD_STOP_MS /* SIGTERM to SIGKILL of a restart */

long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000L + (now.tv_nsec - t->tv_nsec) / 1000000L;
}

static void arm(struct child *c, long ms)
{
	struct itimerspec it = {
		.it_value = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}};

	if (ms <= 0)
		it.it_value.tv_nsec = 1;
	timerfd_settime(c->timerfd, 0, &it, NULL);
}

static void disarm(struct child *c)
{
	struct itimerspec it = {0};

	timerfd_settime(c->timerfd, 0, &it, NULL);
}

static void backoff_grow(struct child *c)
{
	c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (c->backoff_ms > BACKOFF_MAX_MS)
		c->backoff_ms = BACKOFF_MAX_MS;
}

/* agentd's pid, for children to check that their parent is still the one that forked them. */
static pid_t supervisor_pid;
/* In the forked child: the step under way, sent with the errno when one fails. */
static enum child_step child_step;

static const char *const step_names[] = {
	[STEP_EXEC] = "",
	[STEP_CGROUP] = "joining the agent's cgroup: ",
	[STEP_MOUNTS] = "making its private mount namespace: ",
	[STEP_DROP] = "dropping to the agent's uid: ",
	[STEP_LIMITS] = "setting its limits: ",
	[STEP_CHDIR] = "entering the project: ",
};

/*
 * "cannot start: STEP: ERROR", with the way out where one is known. A plain chroot has
 * no mount point at /, so the mount namespace cannot be made private: say so.
 */
void child_start_error(unsigned code, char *out, size_t n)
{
	unsigned step = code >> 16, e = code & 0xffff;

	if (step >= sizeof(step_names) / sizeof(step_names[0]))
		step = STEP_EXEC;
	snprintf(out, n, "cannot start: %s%s%s", step_names[step], strerror((int)e),
		step == STEP_MOUNTS && e == EINVAL
			? " (is / a mount point? ocsb-agentd needs a machine or a container "
			  "with its own root mount; a plain chroot is not enough)"
			: "");
}

/* ---- before the fork, as root: everything that formats, allocates or opens ---- */

static void plan_init(struct child_plan *p)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < CG_NCTRL; i++)
		p->cg_fds[i] = -1;
	p->pass_fd = -1;
}

void child_plan_free(struct child_plan *p)
{
	spawn_cred_free(&p->cred);
	cg_close_procs(p->cg_fds);
	if (p->pass_fd >= 0)
		close(p->pass_fd);
	/* The OpenCode password and the pointers to the secrets. */
	sodium_memzero(p, sizeof(*p));
	for (int i = 0; i < CG_NCTRL; i++)
		p->cg_fds[i] = -1;
	p->pass_fd = -1;
}

int proxy_plan(struct agentd *d, struct child *c, struct child_plan *p)
{
	(void)c;
	plan_init(p);
	p->argv[0] = d->proxy.squid;
	p->argv[1] = "-N";
	p->argv[2] = "-f";
	p->argv[3] = d->proxy.conf;
	p->env[0] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	p->env[1] = "LC_ALL=C";
	return 0;
}

int opencode_plan(struct agentd *d, struct child *c, struct child_plan *p)
{
	char *const base[] = {p->home, p->user, p->logname, "SHELL=/bin/bash",
		"PATH=" OCSB_USER_PATH, "LANG=C.UTF-8", p->hp, p->hsp, p->HP, p->HSP,
		"no_proxy=localhost,127.0.0.1,::1", "NO_PROXY=localhost,127.0.0.1,::1", p->pw,
		"OPENCODE_DISABLE_AUTOUPDATE=1", OPENCODE_PERMISSION_ENV,
		"OPENCODE_DISABLE_MODELS_FETCH=1"};
	char *const *inj = injectd_child_env(d, strchr(c->name, '/') + 1);
	size_t ne = 0, na = 0;
	int r;

	_Static_assert(ARRAY_SIZE(base) + INJECT_ENV_MAX + SECRETS_ENV_MAX + 1 <= CHILD_PLAN_ENV,
		"env room");
	plan_init(p);
	snprintf(p->home, sizeof(p->home), "HOME=%s", d->agent.home);
	snprintf(p->user, sizeof(p->user), "USER=%s", d->agent.name);
	snprintf(p->logname, sizeof(p->logname), "LOGNAME=%s", d->agent.name);
	snprintf(p->port, sizeof(p->port), "%u", c->port);
	snprintf(p->pw, sizeof(p->pw), "OPENCODE_SERVER_PASSWORD=%s", c->password);
	snprintf(p->hp, sizeof(p->hp), "http_proxy=http://127.0.0.1:%u", d->cfg.proxy_port);
	snprintf(p->hsp, sizeof(p->hsp), "https_proxy=http://127.0.0.1:%u", d->cfg.proxy_port);
	snprintf(p->HP, sizeof(p->HP), "HTTP_PROXY=http://127.0.0.1:%u", d->cfg.proxy_port);
	snprintf(p->HSP, sizeof(p->HSP), "HTTPS_PROXY=http://127.0.0.1:%u", d->cfg.proxy_port);
	for (size_t i = 0; i < ARRAY_SIZE(base); i++)
		p->env[ne++] = base[i];
	/* The injector's routes: provider base URLs and git's insteadOf (injectd.c). */
	for (size_t i = 0; inj && inj[i] && i < INJECT_ENV_MAX; i++)
		p->env[ne++] = inj[i];
	/* The owner's secrets last (their names never collide with the ones above). */
	for (size_t i = 0; c->sec_env && c->sec_env[i] && i < SECRETS_ENV_MAX; i++)
		p->env[ne++] = c->sec_env[i];
	p->env[ne] = NULL;
#ifdef OCSB_TEST_BUILD
	/* The test hook's wrapper (sandbox.c) first, with OpenCode's argv after it. */
	if (d->sb.test_wrap[0])
		p->argv[na++] = d->sb.test_wrap;
#endif
	p->argv[na++] = d->opencode_bin;
	p->argv[na++] = "serve";
	p->argv[na++] = "--hostname";
	p->argv[na++] = "127.0.0.1";
	p->argv[na++] = "--port";
	p->argv[na++] = p->port;
	p->argv[na] = NULL;
	/* initgroups() in a forked child would read NSS: the groups are looked up here. */
	r = spawn_cred_init(&p->cred, d->agent.uid, d->agent.gid, d->agent.name);
	if (r == 0 && d->cg.mode != CG_NONE)
		r = cg_open_procs(&d->cg, p->cg_fds);
	if (r < 0)
		child_plan_free(p);
	return r;
}

/* ---- between fork and exec: async-signal-safe calls only ---- */

/* Session, signals and descriptors of a new child; errfd ends up as fd 3 (CLOEXEC). */
static void child_common(int logfd, int errfd, int passfd)
{
	sigset_t none;
	int nullfd;

	/* No controlling terminal, whoever started agentd (spawn.h). */
	setsid();
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	dup2(nullfd, 0);
	dup2(logfd >= 0 ? logfd : nullfd, 1);
	dup2(logfd >= 0 ? logfd : nullfd, 2);
	if (errfd != 3)
		dup2(errfd, 3);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	/* A descriptor the program is handed (the injector's socket) is fd 4, kept open. */
	if (passfd >= 0) {
		if (passfd != 4)
			dup2(passfd, 4);
		fcntl(4, F_SETFD, 0);
	}
	if (syscall(SYS_close_range, passfd >= 0 ? 5U : 4U, ~0U, 0) < 0)
		for (int fd = passfd >= 0 ? 5 : 4; fd < 65536; fd++)
			close(fd);
}

int proxy_exec(struct agentd *d, struct child *c, const struct child_plan *p)
{
	(void)d;
	(void)c;
	/* squid starts as root and drops to `proxy` itself, which clears the death signal:
	 * a stale squid is stopped by the next start through its pid file. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	execve(p->argv[0], p->argv, p->env);
	return -errno;
}

int opencode_exec(struct agentd *d, struct child *c, const struct child_plan *p)
{
	int r;

	/* Still root: the private mount namespace (sandbox.c); fail closed if it cannot be. */
	child_step = STEP_MOUNTS;
	r = child_sandbox_mounts(d);
	if (r < 0)
		return r;
	/* The same drop as spawn's: groups, gid, uid, proof it holds, no_new_privs, keyring. */
	child_step = STEP_DROP;
	r = spawn_child_drop(&p->cred);
	if (r < 0)
		return r;
	child_step = STEP_LIMITS;
	r = child_sandbox_limits();
	if (r < 0)
		return r;
	child_step = STEP_EXEC;
	/* After the drop: a change of uid clears the parent-death signal (prctl(2)). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* agentd may have died before that line: then nobody supervises us. */
	if (getppid() != supervisor_pid)
		return -ESRCH;
	umask(077);
	/* As the agent: the clone is the agent's; root does not walk into it. */
	child_step = STEP_CHDIR;
	if (chdir(c->project) < 0 && chdir(d->agent.home) < 0)
		return -errno;
	child_step = STEP_EXEC;
	execve(p->argv[0], p->argv, p->env);
	return -errno;
}

/* ---- supervisor side ---- */

/* "opencode/shop" logs to CHILD_LOG_DIR/opencode-shop.log. */
void child_log_name(const struct child *c, char *out, size_t n)
{
	snprintf(out, n, "%s.log", c->name);
	for (char *s = out; *s; s++)
		if (*s == '/')
			*s = '-';
}

/*
 * The log file, appended to by agentd only. Bounded: past LOG_MAX it becomes NAME.log.1
 * (the one older file kept) and a new one starts, so a chatty or hostile child cannot
 * fill the disk, between restarts either.
 */
static int log_file(struct child *c, int rotate)
{
	char name[128], old[160];
	struct stat st;
	int dfd;

	child_log_name(c, name, sizeof(name));
	dfd = fo_mkdir_p(AT_FDCWD, CHILD_LOG_DIR, 0750, 0, 0);
	if (dfd < 0)
		return -1;
	if (c->log_fd >= 0) {
		close(c->log_fd);
		c->log_fd = -1;
	}
	if (rotate || (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > LOG_MAX)) {
		snprintf(old, sizeof(old), "%s.1", name);
		renameat(dfd, name, dfd, old);
	}
	c->log_fd = openat(dfd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (c->log_fd >= 0 && fstat(c->log_fd, &st) == 0)
		c->log_size = st.st_size;
	close(dfd);
	return c->log_fd;
}

int child_log_open(struct agentd *d, struct child *c)
{
	int p[2];

	c->log_fd = -1;
	/* The child's end blocks (a full pipe slows it down); ours never does. */
	if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
		log_err("%s: pipe: %s", c->name, strerror(errno));
		return -1;
	}
	c->log_r = p[0];
	c->log_w = p[1];
	return agentd_watch(d, c->log_r, &c->log_src, SRC_LOG, c, EPOLLIN);
}

void child_log_event(struct agentd *d, struct child *c)
{
	char buf[65536];
	ssize_t n;

	(void)d;
	/* Bounded per wake-up, so one child's flood cannot starve the loop. */
	for (int round = 0; round < 16 && (n = read(c->log_r, buf, sizeof(buf))) > 0; round++) {
		if (c->log_fd < 0 || c->log_size + n > LOG_MAX) {
			if (log_file(c, c->log_fd >= 0) < 0)
				continue; /* dropped: nowhere to write */
		}
		if (write(c->log_fd, buf, (size_t)n) == n)
			c->log_size += n;
	}
}

static void exec_done(struct agentd *d, struct child *c)
{
	if (c->exec_fd < 0)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->exec_fd, NULL);
	close(c->exec_fd);
	c->exec_fd = -1;
}

int child_start(struct agentd *d, struct child *c)
{
	int errpipe[2], err = 0, logfd = c->log_w, plan_err;
	unsigned code;
	struct child_plan plan;
	char bin_err[480];
	pid_t pid;
	ssize_t n;

	if (c->pid > 0)
		return 0; /* still running or stopping: its exit schedules what follows */
	if (d->stopping || d->frozen)
		return 0;
	if (c->is_opencode && opencode_bin_check(d->opencode_bin, bin_err, sizeof(bin_err)) < 0) {
		/* Not a crash: nothing to restart until an operator installs it (SIGHUP). */
		snprintf(c->last_error, sizeof(c->last_error), "%s", bin_err);
		log_err("%s: %s", c->name, bin_err);
		c->state = CH_STOPPED;
		return -1;
	}
	if (c->is_opencode && !d->egress.off &&
		procs_port_holder(d->cfg.proxy_port, d->proxy_child.pid) == -EADDRINUSE) {
		/*
		 * OpenCode's only way out is the proxy port: a proxy there that is not ours
		 * (Debian's squid.service) would carry its traffic without ocsb's rules.
		 */
		snprintf(c->last_error, sizeof(c->last_error),
			"127.0.0.1:%u, the agent's proxy port, is held by another process, not "
			"ocsb's squid: OpenCode not started (systemctl disable --now squid)",
			d->cfg.proxy_port);
		log_err("%s: %s", c->name, c->last_error);
		c->state = CH_BACKOFF;
		arm(c, PROXY_WAIT_MS);
		return -1;
	}
	if (c->is_opencode) {
		if (priv_sandbox_prepare(d) < 0) {
			snprintf(c->last_error, sizeof(c->last_error),
				"cannot prepare the sandbox (see the log)");
			c->state = CH_BACKOFF;
			arm(c, BACKOFF_MAX_MS);
			return -1;
		}
#ifdef OCSB_TEST_BUILD
		priv_sandbox_test_wrap(d);
#endif
	}
	if (pipe2(errpipe, O_CLOEXEC) < 0)
		return -1;
	/* Decrypted into locked memory for this fork only; without them OpenCode still runs. */
	if (c->is_opencode && secretd_child_env(d, c) < 0)
		log_err("%s: starting without the owner's secrets (see above)", c->name);
	plan_err = c->plan_child(d, c, &plan);
	if (plan_err < 0) {
		/* Nothing forked: retried like a start that failed in the child. */
		snprintf(c->last_error, sizeof(c->last_error), "cannot start: %s",
			strerror(-plan_err));
		log_err("%s: %s", c->name, c->last_error);
		secretd_child_env_free(c);
		close(errpipe[0]);
		close(errpipe[1]);
		c->crashes_in_row++;
		backoff_grow(c);
		c->state = CH_BACKOFF;
		arm(c, c->backoff_ms);
		return -1;
	}
	supervisor_pid = getpid();
	pid = fork();
	if (pid < 0) {
		log_err("%s: fork: %s", c->name, strerror(errno));
		child_plan_free(&plan);
		secretd_child_env_free(c);
		close(errpipe[0]);
		close(errpipe[1]);
		c->state = CH_BACKOFF;
		arm(c, BACKOFF_MIN_MS);
		return -1;
	}
	if (pid == 0) {
		int r;

		close(errpipe[0]);
		/*
		 * Into the agent's cgroup first, while still root: from there it cannot move
		 * out. Before child_common, which closes the descriptors the plan opened.
		 */
		child_step = STEP_CGROUP;
		r = cg_join_fds(plan.cg_fds);
		child_common(logfd, errpipe[1], plan.pass_fd);
		if (r == 0) {
			child_step = STEP_EXEC;
			r = c->exec_child(d, c, &plan);
		}
		err = -r;
		code = ((unsigned)child_step << 16) | ((unsigned)err & 0xffff);
		n = write(3, &code, sizeof(code));
		(void)n;
		_exit(err == SPAWN_EREGAIN ? SPAWN_EXIT_REGAIN : 127);
	}
	/* The child has its copies (gone at exec); ours are wiped now. */
	child_plan_free(&plan);
	secretd_child_env_free(c);
	close(errpipe[1]);
	c->pid = pid;
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	clock_gettime(CLOCK_MONOTONIC, &c->started);
	/* Exits are retried with backoff from here on, whatever happens next. */
	c->state = CH_BACKOFF;
	if (c->pidfd < 0 || agentd_watch(d, c->pidfd, &c->pid_src, SRC_CHILD, c, EPOLLIN) < 0) {
		log_err("%s: pidfd_open: %s", c->name, strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		if (c->pidfd >= 0)
			close(c->pidfd);
		c->pidfd = -1;
		c->pid = 0;
		close(errpipe[0]);
		arm(c, BACKOFF_MIN_MS);
		return -1;
	}
	/*
	 * The exec (the pipe closes) or its error arrives as an event, bounded by the timer:
	 * the child is the agent's before it execs, and the agent could stop it there.
	 */
	c->exec_fd = errpipe[0];
	if (fcntl(c->exec_fd, F_SETFL, O_NONBLOCK) < 0 ||
		agentd_watch(d, c->exec_fd, &c->exec_src, SRC_EXEC, c, EPOLLIN) < 0) {
		log_err("%s: exec pipe: %s", c->name, strerror(errno));
		exec_done(d, c);
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		return -1; /* the exit arrives through the pidfd and schedules the retry */
	}
	arm(c, EXEC_TIMEOUT_MS);
	return 0;
}

/* The pipe of the exec: its end of file is the exec, 4 bytes an errno before exiting. */
void child_exec_event(struct agentd *d, struct child *c)
{
	int err = 0;
	ssize_t n;

	if (c->exec_fd < 0)
		return;
	n = read(c->exec_fd, &err, sizeof(err));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	exec_done(d, c);
	if (n == (ssize_t)sizeof(err) && err) {
		child_start_error((unsigned)err, c->last_error, sizeof(c->last_error));
		log_err("%s: %s", c->name, c->last_error);
		if (c->state != CH_STOPPING)
			disarm(c);
		return; /* its exit arrives through the pidfd and schedules the retry */
	}
	if (c->state == CH_STOPPING || c->pid <= 0)
		return; /* stopped before it ran: the stop's timer stays armed */
	c->state = c->is_opencode ? CH_STARTING : CH_RUNNING;
	log_notice("%s: started (pid %d)", c->name, (int)c->pid);
	if (c->is_opencode)
		arm(c, PROBE_EVERY_MS);
	else
		disarm(c);
}

static void restart_now(struct agentd *d, struct child *c);

static void probe_close(struct agentd *d, struct child *c)
{
	if (c->probe_fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->probe_fd, NULL);
		close(c->probe_fd);
		c->probe_fd = -1;
	}
	c->probe_len = 0;
	c->probe_sent = 0;
}

void child_exited(struct agentd *d, struct child *c)
{
	siginfo_t info = {0};
	char how[64];
	long ran;

	if (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &info, WEXITED | WNOHANG) < 0 ||
		info.si_pid == 0)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
	close(c->pidfd);
	c->pidfd = -1;
	c->pid = 0;
	probe_close(d, c);
	/* An exec error written just before the exit: read it first, for last_error. */
	child_exec_event(d, c);
	exec_done(d, c);
	if (info.si_code == CLD_EXITED)
		snprintf(how, sizeof(how), "exit %d", info.si_status);
	else
		snprintf(how, sizeof(how), "signal %d", info.si_status);
	ran = ms_since(&c->started);
	if (c->state == CH_STOPPING && c->restart_after && !d->stopping) {
		log_info("%s: stopped (%s)", c->name, how);
		disarm(c);
		restart_now(d, c);
		return;
	}
	if (d->stopping || c->state == CH_STOPPED || c->state == CH_STOPPING) {
		log_info("%s: stopped (%s)", c->name, how);
		disarm(c);
		c->state = CH_STOPPED;
		return;
	}
	if (ran >= STABLE_MS) {
		c->crashes_in_row = 0;
		c->backoff_ms = 0;
	}
	c->crashes_in_row++;
	backoff_grow(c);
	if (c->is_opencode && procs_port_open(c->port))
		/* Our child is gone: whoever answers on its port is not OpenCode. */
		snprintf(c->last_error, sizeof(c->last_error),
			"%s after %ld ms; 127.0.0.1:%u is held by another process, not OpenCode",
			how, ran, c->port);
	else if (!c->last_error[0] || strncmp(c->last_error, "cannot start", 12) != 0)
		snprintf(c->last_error, sizeof(c->last_error), "%s after %ld ms", how, ran);
	if (c->crashes_in_row >= CRASH_LOOP)
		log_err("%s: crash loop: %u exits in a row, last %s; next try in %u ms", c->name,
			c->crashes_in_row, c->last_error, c->backoff_ms);
	else
		log_warn("%s: %s; restarting in %u ms", c->name, c->last_error, c->backoff_ms);
	c->state = CH_BACKOFF;
	arm(c, c->backoff_ms);
}

/* A non-blocking HTTP request with the password: the first answer that is not a
 * connection error means OpenCode serves. */
static void probe_begin(struct agentd *d, struct child *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = &c->probe_src};
	int fd, own;

	/*
	 * Only OpenCode's own socket is asked: the agent could listen on the port first
	 * and answer 200, and status would say "running" over a crash loop.
	 */
	own = procs_port_owner_is(c->pid, c->port);
	if (own <= 0) {
		if (own == 0 && procs_port_open(c->port)) {
			if (!strstr(c->last_error, "held by another process"))
				log_err("%s: 127.0.0.1:%u is held by another process, not OpenCode "
					"(pid %d): not probed",
					c->name, c->port, (int)c->pid);
			snprintf(c->last_error, sizeof(c->last_error),
				"127.0.0.1:%u is held by another process, not OpenCode (pid %d)",
				c->port, (int)c->pid);
		}
		return;
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return;
	}
	c->probe_src.kind = SRC_PROBE;
	c->probe_src.ptr = c;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		return;
	}
	c->probe_fd = fd;
	c->probe_len = 0;
	c->probe_sent = 0;
	clock_gettime(CLOCK_MONOTONIC, &c->probe_deadline);
}

void child_probe_event(struct agentd *d, struct child *c, uint32_t events)
{
	if (c->probe_fd < 0)
		return;
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		probe_close(d, c);
		return;
	}
	if (!c->probe_sent && (events & EPOLLOUT)) {
		char req[512], cred[128], b64[200];
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->probe_src};
		int len;

		snprintf(cred, sizeof(cred), "opencode:%s", c->password);
		sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)cred, strlen(cred),
			sodium_base64_VARIANT_ORIGINAL);
		len = snprintf(req, sizeof(req),
			"GET " OPENCODE_PROBE_PATH " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			"Authorization: Basic %s\r\nConnection: close\r\n\r\n",
			c->port, b64);
		if (send(c->probe_fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
			probe_close(d, c);
			return;
		}
		c->probe_sent = 1;
		epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->probe_fd, &ev);
		return;
	}
	if (events & EPOLLIN) {
		ssize_t n = recv(c->probe_fd, c->probe_buf + c->probe_len,
			sizeof(c->probe_buf) - 1 - c->probe_len, 0);

		if (n <= 0) {
			probe_close(d, c);
			return;
		}
		c->probe_len += (size_t)n;
		c->probe_buf[c->probe_len] = '\0';
		if (!strchr(c->probe_buf, '\n') && c->probe_len < sizeof(c->probe_buf) - 1)
			return;
		if (strncmp(c->probe_buf, "HTTP/1.1 200", 12) == 0 ||
			strncmp(c->probe_buf, "HTTP/1.0 200", 12) == 0) {
			c->state = CH_RUNNING;
			clock_gettime(CLOCK_MONOTONIC, &c->ready_at);
			c->last_error[0] = '\0';
			log_notice("%s: ready on http://127.0.0.1:%u after %ld ms", c->name,
				c->port, ms_since(&c->started));
			disarm(c);
		}
		probe_close(d, c);
	}
}

void child_timer(struct agentd *d, struct child *c)
{
	uint64_t ticks;

	if (read(c->timerfd, &ticks, sizeof(ticks)) < 0)
		return;
	if (c->exec_fd >= 0 && c->state != CH_STOPPING) {
		snprintf(c->last_error, sizeof(c->last_error), "did not exec within %d ms: killed",
			EXEC_TIMEOUT_MS);
		log_err("%s: %s", c->name, c->last_error);
		exec_done(d, c);
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		return; /* the exit arrives through the pidfd and schedules the retry */
	}
	switch (c->state) {
	case CH_BACKOFF:
		child_start(d, c);
		break;
	case CH_STARTING:
		/* A request still pending past its deadline is dropped and tried again. */
		if (c->probe_fd >= 0 && ms_since(&c->probe_deadline) >= PROBE_TIMEOUT_MS)
			probe_close(d, c);
		if (c->probe_fd < 0)
			probe_begin(d, c);
		if (ms_since(&c->started) > READY_DEADLINE_MS && !c->last_error[0])
			snprintf(c->last_error, sizeof(c->last_error),
				"not answering %ld s after start", ms_since(&c->started) / 1000);
		arm(c, PROBE_EVERY_MS);
		break;
	case CH_STOPPING:
		log_warn("%s: did not stop within %d ms: killing it", c->name, STOP_TIMEOUT_MS);
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
		break; /* the exit arrives through the pidfd */
	default:
		break;
	}
}

/*
 * At shutdown only, after the loop. child_stop_begin sends SIGTERM; child_stop_wait reaps
 * it by the deadline (mono_ms) or kills it then: every OpenCode gets its SIGTERM at once,
 * so N instances take as long to stop as the slowest, not the sum.
 */
void child_stop_begin(struct agentd *d, struct child *c)
{
	disarm(c);
	probe_close(d, c);
	exec_done(d, c);
	c->state = CH_STOPPED;
	if (c->pid > 0)
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGTERM, NULL, 0);
}

void child_stop_wait(struct agentd *d, struct child *c, long deadline)
{
	siginfo_t info = {0};

	if (c->pid <= 0)
		return;
	while (mono_ms() < deadline) {
		if (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &info, WEXITED | WNOHANG) == 0 &&
			info.si_pid != 0)
			goto reaped;
		usleep(10000);
	}
	log_warn("%s: did not stop in time: killing it", c->name);
	syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &info, WEXITED);
reaped:
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
	close(c->pidfd);
	c->pidfd = -1;
	log_info("%s: stopped", c->name);
	c->pid = 0;
}

static void restart_now(struct agentd *d, struct child *c)
{
	c->restart_after = 0;
	c->crashes_in_row = 0;
	c->backoff_ms = 0;
	c->restarts++;
	/* While frozen, child_start waits: the thaw starts what is in backoff. */
	c->state = CH_BACKOFF;
	child_start(d, c);
}

/*
 * SIGTERM now, SIGKILL when the timer fires first, the start when the pidfd says it is
 * gone: the loop goes on meanwhile (a netlock event is not held up by a slow exit).
 */
static void stop_begin(struct agentd *d, struct child *c, int restart)
{
	c->restart_after = restart;
	if (c->state == CH_STOPPING)
		return;
	probe_close(d, c);
	c->state = CH_STOPPING;
	syscall(SYS_pidfd_send_signal, c->pidfd, SIGTERM, NULL, 0);
	arm(c, STOP_TIMEOUT_MS);
}

void child_restart(struct agentd *d, struct child *c)
{
	if (c->pid <= 0) {
		disarm(c);
		probe_close(d, c);
		restart_now(d, c);
		return;
	}
	stop_begin(d, c, 1);
}

/* The same without the start: the child stays stopped once the pidfd says it is gone. */
void child_stop_soon(struct agentd *d, struct child *c)
{
	if (c->pid <= 0) {
		disarm(c);
		probe_close(d, c);
		c->state = CH_STOPPED;
		return;
	}
	stop_begin(d, c, 0);
}

/* The OpenCode password: generated once, kept root-only, survives restarts of agentd. */
int opencode_password(struct agentd *d, struct child *c)
{
	char dir[4096], name[128], *data = NULL;
	unsigned char raw[24];
	int dfd, r;

	if (path_join(dir, sizeof(dir), d->paths.varlib, "ocsb/agentd") < 0)
		return -1;
	snprintf(name, sizeof(name), "%s.password", strchr(c->name, '/') + 1);
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return -1;
	}
	r = fo_read_at(dfd, name, 256, &data, NULL);
	if (r == 0 && strlen(data) >= 16 && strlen(data) < sizeof(c->password)) {
		snprintf(c->password, sizeof(c->password), "%.*s", (int)strcspn(data, "\n"), data);
		free(data);
		close(dfd);
		return 0;
	}
	free(data);
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(c->password, sizeof(c->password), raw, sizeof(raw),
		sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
	r = fo_write_at(dfd, name, c->password, strlen(c->password), 0600, 0, 0);
	close(dfd);
	if (r < 0)
		log_err("%s/%s: %s", dir, name, strerror(-r));
	return r;
}
