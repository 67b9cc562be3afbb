/* SPDX-License-Identifier: MIT */
/*
 * The children the supervisor asks for (WP_SPAWN): the program, its argv, its uid, its
 * cgroup and its sandbox are the kind's, decided here from ocsb.conf; the supervisor
 * gives the output pipe, OpenCode's environment and the injector's socket. A child is a
 * slot: signalled by its pidfd (never a pid that may have been reused), reaped here, its
 * exec and its exit told to the supervisor as events.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "procs.h"
#include "warden.h"

/* What a child needs between fork and exec, built before the fork. */
struct plan {
	char *argv[10];
	char *env[WP_MAX_ENV + 1];
	char bin[4200], port[16], cfg[4200], project[4400], home[4200], user[160], path[64];
	struct spawn_cred cred;
	int cg_fds[CG_NCTRL];
	int sandbox; /* OpenCode: mounts and limits */
	int fd1_as; /* fds[1] becomes this descriptor (1: stdout, 4: the injector's), 0 none */
};

static const char *const kind_names[] = {"", "proxy", "opencode", "inject", "mirror-read",
	"mirror-link", "owner-egress", "mirror-watch"};

static pid_t warden_pid;
static enum child_step step;

static void plan_free(struct plan *p)
{
	spawn_cred_free(&p->cred);
	cg_close_procs(p->cg_fds);
}

/* The supervisor's program in a one-job mode, as user u. */
static int plan_mode(struct warden *w, struct plan *p, const char *mode, const struct user_info *u)
{
	snprintf(p->bin, sizeof(p->bin), "%s/%s", w->self_dir, SUPERVISOR_BIN);
	snprintf(p->cfg, sizeof(p->cfg), "%s", w->config_path);
	snprintf(p->home, sizeof(p->home), "HOME=%s", u->home);
	snprintf(p->user, sizeof(p->user), "USER=%s", u->name);
	p->argv[0] = p->bin;
	p->argv[1] = (char *)mode;
	p->argv[2] = "--config";
	p->argv[3] = p->cfg;
	p->argv[4] = NULL;
	p->env[0] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	p->env[1] = "LC_ALL=C";
	p->env[2] = p->home;
	p->env[3] = p->user;
	p->env[4] = NULL;
	p->fd1_as = 1;
	return spawn_cred_init(&p->cred, u->uid, u->gid, u->name);
}

static int plan(struct warden *w, const struct wp_spawn *sp, char **env, struct plan *p)
{
	size_t na = 0;
	int r;

	memset(p, 0, sizeof(*p));
	for (int i = 0; i < CG_NCTRL; i++)
		p->cg_fds[i] = -1;
	if (sp->kind != WP_KIND_OPENCODE && (sp->index || sp->nenv))
		return -EINVAL;
	switch (sp->kind) {
	case WP_KIND_PROXY:
		/* As `proxy` from the start: root never reads the supervisor's squid.conf. */
		if (!w->proxy_uid)
			return -ENOENT;
		path_join(p->cfg, sizeof(p->cfg), w->paths.varlib, "ocsb/squid/squid.conf");
		p->argv[0] = w->proxy.squid;
		p->argv[1] = "-N";
		p->argv[2] = "-f";
		p->argv[3] = p->cfg;
		p->env[0] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
		p->env[1] = "LC_ALL=C";
		return spawn_cred_init(&p->cred, w->proxy_uid, w->proxy_gid, PROXY_USER);
	case WP_KIND_OPENCODE:
		if (sp->index >= w->cfg.projects.n)
			return -EINVAL;
		if (priv_sandbox_prepare(w) < 0)
			return -EIO;
#ifdef OCSB_TEST_BUILD
		priv_sandbox_test_wrap(w);
		if (w->sb.test_wrap[0])
			p->argv[na++] = w->sb.test_wrap;
#endif
		snprintf(p->port, sizeof(p->port), "%u", w->cfg.opencode_port + sp->index);
		snprintf(p->project, sizeof(p->project), "%s/%s", w->agent.home,
			path_base(w->cfg.projects.v[sp->index]));
		p->argv[na++] = w->cfg.opencode_bin;
		p->argv[na++] = "serve";
		p->argv[na++] = "--hostname";
		p->argv[na++] = "127.0.0.1";
		p->argv[na++] = "--port";
		p->argv[na++] = p->port;
		p->argv[na] = NULL;
		for (size_t i = 0; env[i] && i < WP_MAX_ENV; i++)
			p->env[i] = env[i];
		p->sandbox = 1;
		r = spawn_cred_init(&p->cred, w->agent.uid, w->agent.gid, w->agent.name);
		if (r == 0 && w->cg.mode != CG_NONE)
			r = cg_open_procs(&w->cg, p->cg_fds);
		return r;
	case WP_KIND_INJECT:
		if (!w->inject.uid)
			return -ENOENT;
		snprintf(p->bin, sizeof(p->bin), "%s/ocsb-inject", w->self_dir);
		p->argv[0] = p->bin;
		p->argv[1] = "--fd";
		p->argv[2] = "4";
		p->env[0] = NULL;
		p->fd1_as = 4;
		return spawn_cred_init(&p->cred, w->inject.uid, w->inject.gid, w->inject.name);
	case WP_KIND_MIRROR_READ:
		return plan_mode(w, p, "--mirror-read", &w->owner);
	case WP_KIND_OWNER_EGRESS:
		return plan_mode(w, p, "--owner-egress", &w->owner);
	case WP_KIND_MIRROR_WATCH:
		return plan_mode(w, p, "--mirror-watch", &w->owner);
	case WP_KIND_MIRROR_LINK:
		r = plan_mode(w, p, "--mirror-link", &w->agent);
		if (r == 0 && w->cg.mode != CG_NONE)
			r = cg_open_procs(&w->cg, p->cg_fds);
		return r;
	}
	return -EINVAL;
}

/* ---- between fork and exec: system calls only ---- */

static int child(const struct warden *w, const struct plan *p, int fd0, int fd1, int errfd)
{
	sigset_t none;
	int nullfd, top = p->fd1_as == 4 ? 5 : 4, r;

	setsid(); /* no controlling terminal (spawn.h) */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	/* Into the agent's cgroup first, while root: from there it cannot move out. */
	step = STEP_CGROUP;
	r = cg_join_fds(p->cg_fds);
	if (r < 0)
		return r;
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(fd0 >= 0 ? fd0 : nullfd, 2) < 0 ||
		dup2(p->fd1_as == 1 && fd1 >= 0 ? fd1
				: fd0 >= 0	? fd0
						: nullfd,
			1) < 0 ||
		dup2(errfd, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	if (p->fd1_as == 4 && (fd1 < 0 || dup2(fd1, 4) < 0))
		return fd1 < 0 ? -EBADF : -errno;
	if (syscall(SYS_close_range, (unsigned)top, ~0U, 0) < 0)
		for (int fd = top; fd < 65536; fd++)
			close(fd);
	if (p->sandbox) {
		step = STEP_MOUNTS;
		if ((r = child_sandbox_mounts(&w->sb)) < 0)
			return r;
	}
	step = STEP_DROP;
	if ((r = spawn_child_drop(&p->cred)) < 0)
		return r;
	if (p->sandbox) {
		step = STEP_LIMITS;
		if ((r = child_sandbox_limits()) < 0)
			return r;
	}
	/* After the drop: a change of uid clears the parent-death signal (prctl(2)). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != warden_pid)
		return -ESRCH;
	if (p->sandbox) {
		umask(077);
		step = STEP_CHDIR;
		if (chdir(p->project) < 0 && chdir(w->agent.home) < 0)
			return -errno;
	} else if (chdir("/") < 0) {
		return -errno;
	}
	step = STEP_EXEC;
	execve(p->argv[0], p->argv, p->env);
	return -errno;
}

/* ---- the warden's side ---- */

static struct wchild *slot_free(struct warden *w)
{
	for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
		if (!w->ch[i].kind)
			return &w->ch[i];
	return NULL;
}

size_t children_running(const struct warden *w)
{
	size_t n = 0;

	for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
		n += w->ch[i].kind != 0;
	return n;
}

int children_spawn(struct warden *w, const struct wp_spawn *sp, char **env, int fd0, int fd1,
	struct wp_r_spawn *ret)
{
	struct wchild *c = slot_free(w);
	struct plan p;
	int errpipe[2], r;
	pid_t pid;

	memset(ret, 0, sizeof(*ret));
	if (!c)
		return -EAGAIN;
	/* One of each: one proxy, one injector, one OpenCode per project, one job per mode. */
	for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
		if (w->ch[i].kind == sp->kind && w->ch[i].index == sp->index)
			return -EBUSY;
	/* The owner's jobs run during a freeze: they are not the agent's. */
	if (w->frozen && sp->kind != WP_KIND_MIRROR_READ && sp->kind != WP_KIND_OWNER_EGRESS &&
		sp->kind != WP_KIND_MIRROR_WATCH)
		return -EAGAIN;
	r = plan(w, sp, env, &p);
	if (r < 0) {
		plan_free(&p);
		return r;
	}
	if (pipe2(errpipe, O_CLOEXEC) < 0) {
		r = -errno;
		plan_free(&p);
		return r;
	}
	warden_pid = getpid();
	pid = fork();
	if (pid < 0) {
		r = -errno;
		plan_free(&p);
		close(errpipe[0]);
		close(errpipe[1]);
		return r;
	}
	if (pid == 0) {
		unsigned code;
		ssize_t n;

		close(errpipe[0]);
		r = -child(w, &p, fd0, fd1, errpipe[1]);
		code = ((unsigned)step << 16) | ((unsigned)r & 0xffff);
		n = write(3, &code, sizeof(code));
		(void)n;
		_exit(r == SPAWN_EREGAIN ? SPAWN_EXIT_REGAIN : 127);
	}
	plan_free(&p);
	close(errpipe[1]);
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (c->pidfd < 0 || warden_watch(w, c->pidfd, &c->pid_src, WS_CHILD, c) < 0) {
		r = -errno;
		log_err("%s: pidfd_open: %s", kind_names[sp->kind], strerror(errno));
		kill(pid, SIGKILL); /* our child, not reaped: its pid cannot be reused yet */
		waitpid(pid, NULL, 0);
		if (c->pidfd >= 0)
			close(c->pidfd);
		c->pidfd = -1;
		close(errpipe[0]);
		return r < 0 ? r : -EIO;
	}
	c->kind = sp->kind;
	c->index = sp->index;
	c->pid = pid;
	c->exec_fd = errpipe[0];
	if (fcntl(c->exec_fd, F_SETFL, O_NONBLOCK) < 0 ||
		warden_watch(w, c->exec_fd, &c->exec_src, WS_EXEC, c) < 0) {
		close(c->exec_fd);
		c->exec_fd = -1;
		syscall(SYS_pidfd_send_signal, c->pidfd, SIGKILL, NULL, 0);
	}
	ret->pid = pid;
	ret->slot = (uint32_t)(c - w->ch);
	log_info("%s %u: pid %d (slot %u)", kind_names[sp->kind], sp->index, (int)pid, ret->slot);
	return 0;
}

static struct wchild *slot_get(struct warden *w, uint32_t slot)
{
	return slot < WP_MAX_CHILDREN && w->ch[slot].kind ? &w->ch[slot] : NULL;
}

int children_signal(struct warden *w, uint32_t slot, uint32_t sig)
{
	struct wchild *c = slot_get(w, slot);

	if (!c)
		return -ESRCH;
	if (sig != SIGTERM && sig != SIGKILL && !(sig == SIGHUP && c->kind == WP_KIND_PROXY))
		return -EPERM;
	/* The pidfd: the process we forked, not whoever has its pid now. */
	return syscall(SYS_pidfd_send_signal, c->pidfd, (int)sig, NULL, 0) < 0 ? -errno : 0;
}

int children_port(struct warden *w, uint32_t slot, uint32_t port, uint32_t *holder)
{
	struct wchild *c = slot_get(w, slot);
	int r;

	*holder = WP_PORT_FREE;
	if (port == 0 || port > 65535)
		return -EINVAL;
	if (procs_port_open(port) != 1)
		return 0;
	r = c ? procs_port_owner_is(c->pid, port) : 0;
	*holder = r == 1 ? WP_PORT_CHILD : WP_PORT_OTHER;
	return 0;
}

static void exec_done(struct warden *w, struct wchild *c)
{
	if (c->exec_fd < 0)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->exec_fd, NULL);
	close(c->exec_fd);
	c->exec_fd = -1;
}

void children_exec_event(struct warden *w, struct wchild *c)
{
	struct wp_e_exec e = {.slot = (uint32_t)(c - w->ch)};
	unsigned code = 0;
	ssize_t n;

	if (c->exec_fd < 0)
		return;
	n = read(c->exec_fd, &code, sizeof(code));
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	exec_done(w, c);
	e.code = n == (ssize_t)sizeof(code) ? code : 0;
	super_send_event(w, WP_E_EXEC, &e, sizeof(e));
}

void children_exited(struct warden *w, struct wchild *c)
{
	siginfo_t info = {0};
	struct wp_e_exit e = {.slot = (uint32_t)(c - w->ch)};

	if (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &info, WEXITED | WNOHANG) < 0 ||
		info.si_pid == 0)
		return;
	/* An exec error written just before the exit is told first. */
	children_exec_event(w, c);
	exec_done(w, c);
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->pidfd, NULL);
	close(c->pidfd);
	e.cld = info.si_code;
	e.status = info.si_status;
	log_info("%s: pid %d gone (%s %d)", kind_names[c->kind], (int)c->pid,
		info.si_code == CLD_EXITED ? "exit" : "signal", info.si_status);
	memset(c, 0, sizeof(*c));
	c->pidfd = c->exec_fd = -1;
	super_send_event(w, WP_E_EXIT, &e, sizeof(e));
}

void children_stop_all(struct warden *w)
{
	long deadline = mono_ms() + CHILD_STOP_MS;
	int killed = 0;

	for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
		if (w->ch[i].kind)
			syscall(SYS_pidfd_send_signal, w->ch[i].pidfd, SIGTERM, NULL, 0);
	while (children_running(w)) {
		for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
			if (w->ch[i].kind)
				children_exited(w, &w->ch[i]);
		if (!children_running(w))
			break;
		if (!killed && mono_ms() >= deadline) {
			for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
				if (w->ch[i].kind) {
					log_warn("%s: pid %d did not stop in time: killing it",
						kind_names[w->ch[i].kind], (int)w->ch[i].pid);
					syscall(SYS_pidfd_send_signal, w->ch[i].pidfd, SIGKILL,
						NULL, 0);
				}
			killed = 1;
		}
		usleep(10000);
	}
}
