/* SPDX-License-Identifier: MIT */
/*
 * The supervisor: started here as its own account, spoken to over wproto.h. Every
 * request is checked against the state's list, its exact length and its descriptors;
 * anything else kills the supervisor (logged), and a new one starts after a pause. The
 * netlock, the guard and the cgroup stay the warden's meanwhile; the children the dead
 * supervisor asked for are stopped first, the new one starts them again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "sdnotify.h"
#include "warden.h"

#define STABLE_MS 60000 /* a supervisor that ran this long starts its successor at once */
#define BACKOFF_MIN_MS 1000

extern char **environ;

static const char *const state_names[] = {"none", "init", "run", "stop"};

#define BIT(t) (1ULL << (t))
/* The requests each state takes; everything else kills the supervisor. */
static const unsigned long long allowed[] = {
	[W_NONE] = 0,
	[W_INIT] = BIT(WP_HELLO),
	[W_RUN] = BIT(WP_SPAWN) | BIT(WP_SIGNAL) | BIT(WP_EGRESS) | BIT(WP_ROUTES) | BIT(WP_PORT) |
		BIT(WP_WRITE) | BIT(WP_STATUS) | BIT(WP_RELOAD) | BIT(WP_BYE),
	[W_STOP] = BIT(WP_SIGNAL) | BIT(WP_STATUS) | BIT(WP_WRITE) | BIT(WP_BYE),
};

static void arm(struct warden *w, long ms)
{
	struct itimerspec it = {
		.it_value = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}};

	if (ms <= 0)
		it.it_value.tv_nsec = 1;
	timerfd_settime(w->sup_timer, 0, &it, NULL);
}

static void close_channel(struct warden *w)
{
	if (w->sup_fd < 0)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->sup_fd, NULL);
	close(w->sup_fd);
	w->sup_fd = -1;
}

/* A request outside the protocol: logged, and the supervisor is gone. */
static void refuse(struct warden *w, const struct wp_hdr *h, const char *why)
{
	log_err("supervisor (pid %d, state %s): request type %u id %u refused: %s: killing it",
		(int)w->sup_pid, state_names[w->state], h ? h->type : 0, h ? h->id : 0, why);
	if (w->sup_pidfd >= 0)
		syscall(SYS_pidfd_send_signal, w->sup_pidfd, SIGKILL, NULL, 0);
	w->sup_killed = 1;
	w->state = W_NONE;
	close_channel(w);
}

void super_send_event(struct warden *w, uint32_t type, const void *p, size_t len)
{
	int r;

	if (w->sup_fd < 0 || w->state == W_NONE)
		return;
	r = wp_send(w->sup_fd, type, 0, p, len, NULL, 0, NULL, 0);
	if (r < 0)
		refuse(w, NULL, r == -EAGAIN ? "it does not read what it is sent" : strerror(-r));
}

static void reply(
	struct warden *w, const struct wp_hdr *h, uint32_t type, const void *p, size_t len)
{
	int r = wp_send(w->sup_fd, type, h->id, p, len, NULL, 0, NULL, 0);

	if (r < 0)
		refuse(w, h, r == -EAGAIN ? "it does not read its replies" : strerror(-r));
}

static void reply_ok(struct warden *w, const struct wp_hdr *h, int err)
{
	struct wp_r_ok ok = {.err = err};

	reply(w, h, WP_R_OK, &ok, sizeof(ok));
}

/* The netlock as the spec says now, and its guard; a failure freezes the agent. */
static int apply(struct warden *w, const char *why)
{
	char err[512];

	if (netlock_guard_apply(&w->nl, w->guard_sock, err, sizeof(err)) < 0)
		log_err("netlock guard: %s", err);
	return netwatch_update(w, why) < 0 ? -EIO : 0;
}

static int do_routes(struct warden *w, const struct wp_routes *r)
{
	if (r->n > WP_MAX_ROUTES || r->n > NETLOCK_MAX_INJECT)
		return -EINVAL;
	for (uint32_t i = 0; i < r->n; i++)
		if (r->port[i] < WP_ROUTE_LO || r->port[i] > WP_ROUTE_HI ||
			(i && r->port[i] <= r->port[i - 1]) || r->uport[i] < 1 ||
			r->uport[i] > 65535)
			return -EINVAL;
	w->nl.n_inject = w->nl.n_uports = 0;
	for (uint32_t i = 0; i < r->n; i++) {
		w->nl.inject_ports[w->nl.n_inject++] = r->port[i];
		w->nl.inject_uports[w->nl.n_uports++] = r->uport[i];
	}
	if (!w->inject.uid)
		w->nl.n_uports = 0;
	w->nl.inject_uid = w->inject.uid;
	return apply(w, "the injector's routes changed");
}

/* The two files the supervisor writes for others, root-written with fixed names and owners. */
static int do_write(struct warden *w, const struct wp_write *f, const char *data)
{
	char dir[4096];
	int dfd, r;

	switch (f->file) {
	case WP_FILE_AGENT_ENV:
		dfd = warden_run_dir(w, dir, sizeof(dir));
		if (dfd < 0)
			return -EIO;
		r = fo_write_at_nosync(dfd, "env", data, f->len, 0400, w->agent.uid, w->agent.gid);
		break;
	case WP_FILE_USAGE:
		if (path_join(dir, sizeof(dir), w->paths.varlib, "ocsb/inject") < 0)
			return -ENAMETOOLONG;
		dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
		if (dfd < 0)
			return dfd;
		/* The routes' names are the owner's secrets' names: the owner's to read alone. */
		r = fo_write_at_nosync(
			dfd, "usage", data, f->len, 0400, w->owner.uid, w->owner.gid);
		break;
	default:
		return -EINVAL;
	}
	close(dfd);
	return r;
}

static void status(struct warden *w, struct wp_r_status *s)
{
	memset(s, 0, sizeof(*s));
	s->restores = w->restores;
	s->last_restore_us = (uint32_t)(w->last_restore_ms * 1000);
	s->frozen = (uint32_t)w->frozen;
	s->cg_mode = (uint32_t)w->cg.mode;
	s->memory_max = w->limits.memory_max;
	s->tasks_max = w->limits.tasks_max;
	s->cpu_percent = w->limits.cpu_percent;
	s->cg_procs = w->cg.mode != CG_NONE ? cg_count(&w->cg) : 0;
	snprintf(s->cg_what, sizeof(s->cg_what), "%s", w->cg.what);
	snprintf(s->cg_error, sizeof(s->cg_error), "%s", w->cg_error);
	snprintf(s->netlock_error, sizeof(s->netlock_error), "%s", w->netlock_error);
	snprintf(s->stale_agents, sizeof(s->stale_agents), "%s", w->stale_agents);
}

/* Exactly len bytes of payload, and exactly nfds descriptors. */
#define EXPECT(cond, why)                  \
	do {                               \
		if (!(cond)) {             \
			refuse(w, h, why); \
			return;            \
		}                          \
	} while (0)

static void request(struct warden *w, const struct wp_hdr *h, const char *p, size_t len,
	const int *fds, size_t nfds)
{
	int r;

	EXPECT(h->type < 64 && (allowed[w->state] & BIT(h->type)), "not allowed in this state");
	EXPECT(h->type == WP_SPAWN || nfds == 0, "descriptors it does not take");
	switch (h->type) {
	case WP_HELLO:
		EXPECT(len == 0, "wrong length");
		w->state = W_RUN;
		log_info("supervisor (pid %d) is up", (int)w->sup_pid);
		if (!w->ready_sent) {
			/* Under the unit (Type=notify): ssh, cron and logins wait for this. */
			if ((r = sd_notify_send(w->notify,
				     "READY=1\nSTATUS=netlock verified; "
				     "supervising")) < 0)
				log_warn("telling systemd we are ready: %s", strerror(-r));
			w->ready_sent = 1;
		}
		reply_ok(w, h, 0);
		return;
	case WP_SPAWN: {
		struct wp_spawn sp;
		struct wp_r_spawn rs;
		char *env[WP_MAX_ENV + 1];
		int need1;

		EXPECT(len >= sizeof(sp), "wrong length");
		memcpy(&sp, p, sizeof(sp));
		EXPECT(len == sizeof(sp) + sp.envlen, "wrong length");
		EXPECT(sp.kind >= WP_KIND_PROXY && sp.kind <= WP_KIND_MIRROR_WATCH, "no such kind");
		need1 = sp.kind != WP_KIND_PROXY && sp.kind != WP_KIND_OPENCODE;
		EXPECT(nfds == (size_t)(1 + need1), "wrong descriptors for the kind");
		EXPECT(sp.kind == WP_KIND_OPENCODE || sp.nenv == 0, "an environment for this kind");
		EXPECT(wp_env_check(p + sizeof(sp), sp.envlen, sp.nenv, env, WP_MAX_ENV + 1) == 0,
			"malformed environment");
		r = children_spawn(w, &sp, env, fds[0], need1 ? fds[1] : -1, &rs);
		rs.err = r;
		reply(w, h, WP_R_SPAWN, &rs, sizeof(rs));
		return;
	}
	case WP_SIGNAL: {
		struct wp_signal s;

		EXPECT(len == sizeof(s), "wrong length");
		memcpy(&s, p, sizeof(s));
		r = children_signal(w, s.slot, s.sig);
		EXPECT(r != -EPERM, "a signal it may not send");
		reply_ok(w, h, r);
		return;
	}
	case WP_EGRESS: {
		struct wp_egress e;

		EXPECT(len == sizeof(e), "wrong length");
		memcpy(&e, p, sizeof(e));
		EXPECT(e.off <= 1 && e.dns_allow <= 1, "not a bit");
		w->nl.proxy_port = e.off ? 0 : w->cfg.proxy_port;
		w->nl.dns_allow = (int)e.dns_allow;
		reply_ok(w, h, apply(w, "the egress rules changed"));
		return;
	}
	case WP_ROUTES: {
		struct wp_routes rt;

		EXPECT(len == sizeof(rt), "wrong length");
		memcpy(&rt, p, sizeof(rt));
		r = do_routes(w, &rt);
		EXPECT(r != -EINVAL, "routes out of bounds");
		reply_ok(w, h, r);
		return;
	}
	case WP_PORT: {
		struct wp_port q;
		struct wp_r_port rp = {0};

		EXPECT(len == sizeof(q), "wrong length");
		memcpy(&q, p, sizeof(q));
		rp.err = children_port(w, q.slot, q.port, &rp.holder);
		reply(w, h, WP_R_PORT, &rp, sizeof(rp));
		return;
	}
	case WP_WRITE: {
		struct wp_write f;

		EXPECT(len >= sizeof(f), "wrong length");
		memcpy(&f, p, sizeof(f));
		EXPECT(f.len <= WP_MAX_FILE && len == sizeof(f) + f.len, "wrong length");
		EXPECT(f.file == WP_FILE_AGENT_ENV || f.file == WP_FILE_USAGE, "no such file");
		reply_ok(w, h, do_write(w, &f, p + sizeof(f)));
		return;
	}
	case WP_STATUS: {
		struct wp_r_status s;

		EXPECT(len == 0, "wrong length");
		status(w, &s);
		reply(w, h, WP_R_STATUS, &s, sizeof(s));
		return;
	}
	case WP_RELOAD:
		EXPECT(len == 0, "wrong length");
		reply_ok(w, h, 0);
		warden_reload(w); /* then WP_E_RELOAD */
		return;
	case WP_BYE:
		EXPECT(len == 0, "wrong length");
		w->state = W_STOP;
		reply_ok(w, h, 0);
		return;
	}
	refuse(w, h, "unknown type");
}

void super_event(struct warden *w)
{
	static char buf[WP_MAX_MSG];

	/* Bounded per wake-up: a flood of requests cannot keep the netlock's events waiting. */
	for (int i = 0; i < 64 && w->sup_fd >= 0; i++) {
		struct wp_hdr h;
		int fds[WP_MAX_FDS];
		size_t len = 0, nfds = 0;
		int r = wp_recv(w->sup_fd, &h, buf, &len, fds, &nfds);

		if (r == -EAGAIN)
			return;
		if (r == -ECONNRESET) {
			close_channel(w); /* its exit comes through the pidfd */
			return;
		}
		if (r < 0) {
			refuse(w, NULL, "a malformed message");
			return;
		}
		request(w, &h, buf, len, fds, nfds);
		for (size_t k = 0; k < nfds; k++)
			close(fds[k]);
		/* OpenCode's environment holds its password and the owner's secrets. */
		explicit_bzero(buf, len);
	}
}

static int sndbuf(int fd)
{
	int n = 4 * WP_MAX_MSG;

	return setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &n, sizeof(n)) < 0 &&
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n, sizeof(n)) < 0
		? -errno
		: 0;
}

int super_start(struct warden *w)
{
	char bin[4200], *argv[10], *envp[32];
	struct spawn_cred cred;
	size_t na = 0, ne = 0;
	int sv[2], r, nullfd;
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/%s", w->self_dir, SUPERVISOR_BIN);
	argv[na++] = bin;
	argv[na++] = "--supervise";
	for (int i = 0; i < w->verbose && i < 2; i++)
		argv[na++] = "-v";
	/* A terminal is not the supervisor's to write to (TIOCSTI): syslog then. */
	if (w->use_syslog || isatty(2))
		argv[na++] = "--syslog";
	argv[na++] = "--config";
	argv[na++] = w->config_path;
	argv[na] = NULL;
	envp[ne++] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	envp[ne++] = "LC_ALL=C.UTF-8";
#ifdef OCSB_TEST_BUILD
	/* Test builds: the tests' hooks reach the supervisor too. */
	for (char **e = environ; *e && ne < 30; e++)
		if (!strncmp(*e, "OCSB_TEST_", 10))
			envp[ne++] = *e;
#endif
	envp[ne] = NULL;
	r = spawn_cred_init(&cred, w->sup.uid, w->sup.gid, SUPERVISOR_USER);
	if (r < 0) {
		log_err("%s: %s", SUPERVISOR_USER, strerror(-r));
		return -1;
	}
	w->ctlfd = warden_ctl_bind(w);
	if (w->ctlfd < 0) {
		spawn_cred_free(&cred);
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 || sndbuf(sv[0]) < 0 ||
		sndbuf(sv[1]) < 0) {
		log_err("supervisor: socketpair: %s", strerror(errno));
		spawn_cred_free(&cred);
		close(w->ctlfd);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		log_err("supervisor: fork: %s", strerror(errno));
		spawn_cred_free(&cred);
		close(w->ctlfd);
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;

		setsid();
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(isatty(2) ? nullfd : 2, 1) < 0 ||
			(isatty(2) && dup2(nullfd, 2) < 0) || dup2(sv[1], WP_SUPERVISOR_FD) < 0 ||
			dup2(w->ctlfd, WP_CTL_FD) < 0)
			_exit(127);
		fcntl(WP_SUPERVISOR_FD, F_SETFD, 0);
		fcntl(WP_CTL_FD, F_SETFD, 0);
		if (syscall(SYS_close_range, 5U, ~0U, 0) < 0)
			for (int fd = 5; fd < 65536; fd++)
				close(fd);
		if (spawn_child_drop(&cred) < 0)
			_exit(SPAWN_EXIT_REGAIN);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		execve(bin, argv, envp);
		_exit(127);
	}
	spawn_cred_free(&cred);
	close(sv[1]);
	close(w->ctlfd); /* the supervisor's alone */
	w->ctlfd = -1;
	w->sup_pid = pid;
	w->sup_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	w->sup_fd = sv[0];
	w->sup_killed = 0;
	w->state = W_INIT;
	w->sup_started_ms = mono_ms();
	if (w->sup_pidfd < 0 || fcntl(w->sup_fd, F_SETFL, O_NONBLOCK) < 0 ||
		warden_watch(w, w->sup_pidfd, &w->sup_exit_src, WS_SUPER_EXIT, w) < 0 ||
		warden_watch(w, w->sup_fd, &w->sup_src, WS_SUPER, w) < 0) {
		log_err("supervisor: %s", strerror(errno));
		kill(pid, SIGKILL); /* ours and not reaped: the pid is still its */
		waitpid(pid, NULL, 0);
		w->sup_pid = 0;
		if (w->sup_pidfd >= 0)
			close(w->sup_pidfd);
		w->sup_pidfd = -1;
		close_channel(w);
		return -1;
	}
	log_info("supervisor: pid %d as %s", (int)pid, SUPERVISOR_USER);
	arm(w, SUPERVISOR_HELLO_MS); /* a supervisor that never says HELLO is replaced */
	return 0;
}

void super_exited(struct warden *w)
{
	siginfo_t info = {0};
	long ran;

	if (waitid((idtype_t)P_PIDFD, (id_t)w->sup_pidfd, &info, WEXITED | WNOHANG) < 0 ||
		info.si_pid == 0)
		return;
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, w->sup_pidfd, NULL);
	close(w->sup_pidfd);
	w->sup_pidfd = -1;
	w->sup_pid = 0;
	close_channel(w);
	w->state = W_NONE;
	ran = mono_ms() - w->sup_started_ms;
	if (w->stopping) {
		log_info("supervisor: stopped (%s %d)",
			info.si_code == CLD_EXITED ? "exit" : "signal", info.si_status);
		return;
	}
	log_err("supervisor: %s %d after %ld ms%s; the netlock stays; stopping its children and "
		"starting it again",
		info.si_code == CLD_EXITED ? "exit" : "signal", info.si_status, ran,
		w->sup_killed ? " (killed for a refused request)" : "");
	for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
		if (w->ch[i].kind)
			syscall(SYS_pidfd_send_signal, w->ch[i].pidfd, SIGTERM, NULL, 0);
	if (ran >= STABLE_MS)
		w->sup_backoff_ms = 0;
	w->sup_backoff_ms = w->sup_backoff_ms ? w->sup_backoff_ms * 2 : BACKOFF_MIN_MS;
	if (w->sup_backoff_ms > SUPERVISOR_BACKOFF_MAX_MS)
		w->sup_backoff_ms = SUPERVISOR_BACKOFF_MAX_MS;
	arm(w, (long)w->sup_backoff_ms);
}

void super_timer(struct warden *w)
{
	uint64_t ticks;

	if (read(w->sup_timer, &ticks, sizeof(ticks)) < 0)
		return;
	if (w->sup_pid > 0) {
		if (w->stopping) {
			log_warn("supervisor: did not stop within %d ms: killing it",
				SUPERVISOR_STOP_MS);
			syscall(SYS_pidfd_send_signal, w->sup_pidfd, SIGKILL, NULL, 0);
		} else if (w->state == W_INIT) {
			refuse(w, NULL, "no HELLO within its deadline");
		}
		return;
	}
	if (w->stopping)
		return;
	/* The old supervisor's children first: the new one starts its own. */
	if (children_running(w)) {
		for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
			if (w->ch[i].kind)
				syscall(SYS_pidfd_send_signal, w->ch[i].pidfd, SIGKILL, NULL, 0);
		arm(w, 200);
		return;
	}
	if (super_start(w) < 0)
		arm(w, SUPERVISOR_BACKOFF_MAX_MS);
}

void super_stop(struct warden *w)
{
	if (w->sup_pid <= 0)
		return;
	w->state = W_STOP;
	syscall(SYS_pidfd_send_signal, w->sup_pidfd, SIGTERM, NULL, 0);
	arm(w, SUPERVISOR_STOP_MS);
}
