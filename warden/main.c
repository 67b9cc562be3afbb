/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "fileops.h"
#include "log.h"
#include "procs.h"
#include "sdnotify.h"
#include "testhook.h"
#include "warden.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb-warden [--foreground] [--config FILE] [-v] [--syslog]\n"
		"The root part of the ocsb supervisor: installs and keeps the netlock and the\n"
		"agent's cgroup, and runs ocsb-agentd (the supervisor, as the account "
		"ocsb-agentd),\n"
		"which asks it to start OpenCode, the egress proxy and the injector.\n"
		"\n"
		"  --foreground     run in the foreground (the only mode; for clarity in scripts)\n"
		"  --config FILE    read FILE instead of /etc/ocsb/ocsb.conf\n"
		"  -v, --verbose    more detail in the log (the supervisor's too)\n"
		"      --syslog     log to syslog instead of stderr\n"
		"  -h, --help       this text\n"
		"      --version    the version\n"
		"Signals: TERM/INT stop (the supervisor stops its children, then the warden\n"
		"empties the agent's cgroup), HUP reloads ocsb.conf and the rules.\n"
		"See ocsb-warden(8).\n");
}

int warden_watch(struct warden *w, int fd, struct wsrc *s, enum wsrc_kind kind, void *ptr)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};

	s->kind = kind;
	s->ptr = ptr;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_err("epoll_ctl: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int warden_run_dir(struct warden *w, char *dir, size_t n)
{
	char rel[128];
	struct stat st;
	int dfd;

	snprintf(rel, sizeof(rel), "ocsb/%s", w->agent.name);
	if (path_join(dir, n, w->paths.run, rel) < 0) {
		log_err("%s/%s: path too long", w->paths.run, rel);
		return -1;
	}
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return -1;
	}
	/* Nobody else may plant a link or a file in it. */
	if (fstat(dfd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		log_err("%s must be a root-owned directory not writable by others", dir);
		close(dfd);
		return -1;
	}
	return dfd;
}

#define WCONF_TIMEOUT_MS 10000

/*
 * ocsb.conf, as the warden takes it: the record of wconf.h, which a one-shot run of
 * `ocsb-provision --warden-config` prints after reading and checking the file (and what
 * provisioning made for the supervisor). The warden has no reader of the file: it runs
 * that program (root's, as the file is) and hands its output, bounded and within the
 * deadline, to common/wconf.c's reader.
 */
static int wconf_run(struct warden *w, int start, char *out, size_t *len, char *err, size_t errlen)
{
	char bin[4200];
	char *const argv[] = {bin, start ? "--warden-config=start" : "--warden-config", "--config",
		w->config_path, NULL};
	char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C.UTF-8", NULL};
	long deadline = mono_ms() + WCONF_TIMEOUT_MS;
	int pfd[2], status = 0, nullfd;
	pid_t pid;

	snprintf(bin, sizeof(bin), "%s/ocsb-provision", w->self_dir);
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		snprintf(err, errlen, "%.900s: %s", bin, strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "%.900s: fork: %s", bin, strerror(errno));
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(pfd[1], 1) < 0 || setsid() < 0)
			_exit(127);
		execve(bin, argv, envp);
		dprintf(1, "error cannot run %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	*len = 0;
	for (;;) {
		/* A reload's wait holds no restore: the netlock's events are served meanwhile. */
		struct pollfd p[2] = {
			{.fd = pfd[0], .events = POLLIN}, {.fd = w->nftfd, .events = POLLIN}};
		long left = deadline - mono_ms();
		int ready = left > 0 ? poll(p, w->nft_sock ? 2 : 1, (int)left) : 0;
		ssize_t n;

		if (ready > 0 && !p[0].revents)
			netwatch_event(w);
		if ((ready < 0 && errno == EINTR) || (ready > 0 && !p[0].revents))
			continue;
		if (ready <= 0) {
			snprintf(err, errlen, "%.900s --warden-config: no answer within %d s", bin,
				WCONF_TIMEOUT_MS / 1000);
			kill(pid, SIGKILL); /* our child, not reaped: the pid is still its */
			break;
		}
		n = read(pfd[0], out + *len, WCONF_MAX - 1 - *len);
		if (n <= 0)
			break;
		*len += (size_t)n;
	}
	close(pfd[0]);
	waitpid(pid, &status, 0);
	/* A refusal is a record too ("error ..."); anything else must come with status 0. */
	if (!err[0] && status != 0 && !(*len > 6 && !memcmp(out, "error ", 6)))
		snprintf(err, errlen, "%.900s --warden-config ended with status %d and no record",
			bin, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	return err[0] ? -1 : 0;
}

/* ocsb.conf's values in force, or -1 (logged: the file, its line, what to do). */
static int wconf_load(struct warden *w, struct wconf *ret, int start)
{
	static char out[WCONF_MAX];
	char err[1024] = "";
	size_t len = 0;

	if (wconf_run(w, start, out, &len, err, sizeof(err)) < 0 ||
		wconf_parse(out, len, ret, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	return 0;
}

static int lookup(const char *name, struct user_info *u, const char *what)
{
	if (user_lookup(name, u) == 0 && u->uid != 0)
		return 0;
	log_err("%s account %s does not exist: run ocsb-provision first", what, name);
	return -1;
}

/* ocsb.conf (root's), the accounts and the netlock's spec: at start and on SIGHUP. */
int warden_load(struct warden *w, int start)
{
	struct user_info pu;
	int r;

	if (wconf_load(w, &w->cfg, start) < 0)
		return -1;
	if (lookup(w->cfg.agent, &w->agent, "agent") < 0 ||
		lookup(SUPERVISOR_USER, &w->sup, "the supervisor's") < 0)
		return -1;
	if (!w->cfg.owner[0] || user_lookup(w->cfg.owner, &w->owner) < 0) {
		log_err("owner '%s' in %s is not a user of this machine", w->cfg.owner,
			w->config_path);
		return -1;
	}
	memset(&w->inject, 0, sizeof(w->inject));
	if (user_lookup("ocsb-inject", &w->inject) < 0 || w->inject.uid == 0)
		memset(&w->inject, 0, sizeof(w->inject));
	w->proxy_uid = w->proxy_gid = 0;
	if (user_lookup(PROXY_USER, &pu) == 0 && pu.uid != 0) {
		w->proxy_uid = pu.uid;
		w->proxy_gid = pu.gid;
	}
	memset(&w->nl, 0, sizeof(w->nl));
	w->nl.uid = w->agent.uid;
	/* Until the supervisor sends the owner's egress bits: the proxy, no DNS. */
	w->nl.proxy_port = w->cfg.proxy_port;
	w->nl.ports_lo = w->cfg.ports_lo;
	w->nl.ports_hi = w->cfg.ports_hi;
	w->nl.proxy_uid = netlock_proxy_uid();
	r = netlock_inject_host(&w->nl, w->paths.etc);
	if (r < 0)
		log_warn("netlock: %s/resolv.conf: %s: no nameserver for ocsb-inject", w->paths.etc,
			strerror(-r));
	if (netwatch_agents(w) < 0)
		return -1;
	return proxy_init(&w->proxy, &w->paths, w->cfg.proxy_port);
}

/* A live supervisor answers on the control socket; a stale socket file refuses. */
static int another_running(struct warden *w)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd, r = 0;

	if (strlen(w->paths.ctl_sock) >= sizeof(a.sun_path))
		return 0;
	strcpy(a.sun_path, w->paths.ctl_sock);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		log_err("another ocsb-warden is running (its supervisor listens on %s)",
			a.sun_path);
		r = 1;
	}
	if (fd >= 0)
		close(fd);
	return r;
}

/*
 * The control socket, bound and listening, for each supervisor anew: the warden keeps no
 * copy, so the supervisor alone serves it (ss -xlp names it alone).
 */
int warden_ctl_bind(struct warden *w)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char dir[sizeof(a.sun_path)];
	int fd, dfd;

	if (strlen(w->paths.ctl_sock) >= sizeof(a.sun_path) || !strrchr(w->paths.ctl_sock, '/')) {
		log_err("%s: path too long", w->paths.ctl_sock);
		return -1;
	}
	snprintf(dir, sizeof(dir), "%s", w->paths.ctl_sock);
	*strrchr(dir, '/') = '\0';
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return -1;
	}
	strcpy(a.sun_path, w->paths.ctl_sock);
	unlinkat(dfd, path_base(w->paths.ctl_sock), 0);
	close(dfd);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		chmod(a.sun_path, 0666) < 0 || listen(fd, 16) < 0) {
		log_err("%s: %s", a.sun_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int setup(struct warden *w)
{
	sigset_t set;
	char err[1024], self[4096];
	struct netlock_snap guard = {0}; /* proof it was installed; nobody else can change it */
	ssize_t n;

	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->epfd < 0)
		fatal("epoll_create1: %s", strerror(errno));
	w->sup_fd = w->sup_pidfd = w->ctlfd = -1;
	for (size_t i = 0; i < WP_MAX_CHILDREN; i++)
		w->ch[i].pidfd = w->ch[i].exec_fd = -1;
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0 || (self[n] = '\0', !strrchr(self, '/'))) {
		log_err("/proc/self/exe: %s", strerror(errno));
		return -1;
	}
	*strrchr(self, '/') = '\0';
	snprintf(w->self_dir, sizeof(w->self_dir), "%s", self);
	if (another_running(w) || warden_load(w, 1) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	w->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (w->sigfd < 0 || warden_watch(w, w->sigfd, &w->sig_src, WS_SIGNAL, w) < 0)
		return -1;
	/* Fail closed: watch first, then install and verify. Nothing of the agent runs before. */
	if (netwatch_open(w) < 0)
		return -1;
	/* Kept: a restore must not wait for the kernel's cleanup when a socket closes. */
	w->nl_sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (w->nl_sock && mnl_socket_bind(w->nl_sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(w->nl_sock);
		w->nl_sock = NULL;
	}
	if (!w->nl_sock)
		log_warn("netlock: no kept netfilter socket (%s): each restore opens its own",
			strerror(errno));
	if (netlock_apply_snap(&w->nl, w->nl_sock, &w->snap, err, sizeof(err)) < 0) {
		log_err("netlock: %s: nothing of the agent is started", err);
		return -1;
	}
	/* The guard: the same rules in a table only our socket may touch (design.md, 4). */
	w->guard_sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!w->guard_sock || mnl_socket_bind(w->guard_sock, 0, MNL_SOCKET_AUTOPID) < 0 ||
		netlock_guard_apply_snap(&w->nl, w->guard_sock, &guard, err, sizeof(err)) < 0) {
		log_err("netlock guard: %s: nothing of the agent is started",
			w->guard_sock ? err : strerror(errno));
		netlock_snap_free(&guard);
		return -1;
	}
	netlock_snap_free(&guard);
	log_info("netlock: tables inet %s and %s verified for uid %u", NETLOCK_TABLE,
		NETLOCK_GUARD_TABLE, (unsigned)w->agent.uid);
	w->freeze_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	w->sup_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (w->freeze_timer < 0 || w->sup_timer < 0 ||
		warden_watch(w, w->freeze_timer, &w->freeze_src, WS_TIMER, NULL) < 0 ||
		warden_watch(w, w->sup_timer, &w->sup_timer_src, WS_TIMER, w) < 0)
		return -1;
	agent_cgroup_setup(w);
	return super_start(w);
}

void warden_reload(struct warden *w)
{
	struct wconf old = w->cfg;
	struct user_info agent = w->agent, owner = w->owner;
	struct netlock_spec nl = w->nl;
	struct proxy px = w->proxy;
	char err[512];

	memset(&w->cfg, 0, sizeof(w->cfg));
	/* All or nothing; a new agent or owner needs a restart (running processes, rights). */
	if (warden_load(w, 0) < 0 || w->agent.uid != agent.uid || w->owner.uid != owner.uid ||
		strcmp(w->agent.name, agent.name) != 0) {
		if (w->agent.uid != agent.uid || w->owner.uid != owner.uid)
			log_err("reload: the agent or the owner changed: restart ocsb-warden for "
				"that");
		log_err("reload failed: keeping the running configuration");
		wconf_free(&w->cfg);
		w->cfg = old;
		w->agent = agent;
		w->owner = owner;
		w->nl = nl;
		w->proxy = px;
		return;
	}
	wconf_free(&old);
	/* The supervisor's bits stay until it sends them again. */
	w->nl.proxy_port = nl.proxy_port ? w->cfg.proxy_port : 0;
	w->nl.dns_allow = nl.dns_allow;
	memcpy(w->nl.inject_ports, nl.inject_ports, sizeof(nl.inject_ports));
	w->nl.n_inject = nl.n_inject;
	memcpy(w->nl.inject_uports, nl.inject_uports, sizeof(nl.inject_uports));
	w->nl.n_uports = nl.n_uports;
	if (netlock_guard_apply(&w->nl, w->guard_sock, err, sizeof(err)) < 0)
		log_err("netlock guard: %s", err);
	netwatch_update(w, "configuration reloaded");
	if (w->cg.mode != CG_NONE) {
		w->limits.memory_max = w->cfg.memory_max;
		w->limits.tasks_max = w->cfg.tasks_max;
		w->limits.cpu_percent = w->cfg.cpu_percent;
		if (cg_set_limits(&w->cg, &w->limits, err, sizeof(err)) < 0)
			log_err("limits: %s", err);
	}
	log_notice("configuration reloaded");
	super_send_event(w, WP_E_RELOAD, NULL, 0);
}

static void on_signal(struct warden *w)
{
	struct signalfd_siginfo si;

	while (read(w->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			warden_reload(w);
		} else if (!w->stopping) {
			log_notice("signal %u: stopping", si.ssi_signo);
			w->stopping = 1;
			super_stop(w);
		}
	}
}

/* After the supervisor: what it left, and whatever of the agent is still running. */
static void shutdown_agent(struct warden *w)
{
	int n;

	children_stop_all(w);
	if (w->cg.mode != CG_NONE) {
		agent_cgroup_publish(w, 0); /* no new ssh session joins a cgroup about to go */
		n = cg_count(&w->cg);
		if (n > 0)
			log_notice("stopping %d process%s left in %s", n, n == 1 ? "" : "es",
				w->cg.what);
		if (cg_remove(&w->cg) < 0)
			log_err("the agent's cgroup could not be emptied and removed");
	}
	/* The agent stops with its supervisor: what it detached would run unwatched. */
	n = procs_signal_uid(w->agent.uid, SIGKILL, 1);
	if (n > 0)
		log_notice("stopped %d leftover process%s of %s", n, n == 1 ? "" : "es",
			w->agent.name);
	else if (n < 0)
		log_err("cannot stop the processes of %s: %s (ps -u %s lists them)", w->agent.name,
			n == -EBUSY ? "they keep coming back" : strerror(-n), w->agent.name);
}

static int run(struct warden *w)
{
	struct epoll_event evs[32];

	while (!(w->stopping && w->sup_pid <= 0)) {
		int n = epoll_wait(w->epfd, evs, 32, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("epoll_wait: %s", strerror(errno));
			return -1;
		}
		/* The netlock first: nothing else in this batch runs before its restore. */
		for (int i = 0; i < n; i++) {
			if (((struct wsrc *)evs[i].data.ptr)->kind == WS_NFT) {
				netwatch_event(w);
				evs[i].data.ptr = NULL;
			}
		}
		for (int i = 0; i < n; i++) {
			struct wsrc *s = evs[i].data.ptr;

			if (!s)
				continue;
			switch (s->kind) {
			case WS_SIGNAL:
				on_signal(w);
				break;
			case WS_NFT:
				break;
			case WS_SUPER:
				super_event(w);
				break;
			case WS_SUPER_EXIT:
				super_exited(w);
				break;
			case WS_CHILD:
				children_exited(w, s->ptr);
				break;
			case WS_EXEC:
				children_exec_event(w, s->ptr);
				break;
			case WS_TIMER:
				if (s->ptr)
					super_timer(w);
				else
					freeze_tick(w);
				break;
			}
		}
	}
	shutdown_agent(w);
	return 0;
}

/* Ahead of the agent's load (nice -10); nothing it starts inherits that. */
static void raise_priority(void)
{
	struct sched_param sp = {0};

	if (sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp) < 0 ||
		setpriority(PRIO_PROCESS, 0, WARDEN_NICE) < 0)
		log_warn("cannot raise the scheduling priority (%s): the netlock watchdog shares "
			 "the CPU with the agent's load on equal terms",
			strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"foreground", no_argument, NULL, 'f'},
		{"config", required_argument, NULL, 'c'},
		{"verbose", no_argument, NULL, 'v'},
		{"syslog", no_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	static struct warden w;
	const char *config = NULL;
	int c, r;

	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			break;
		case 'c':
			config = optarg;
			break;
		case 'v':
			w.verbose++;
			break;
		case 's':
			w.use_syslog = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ocsb-warden %s\n", OCSB_VERSION);
			return 0;
		default:
			/* getopt said what is wrong; the root program links no speller (args.h). */
			fputs("ocsb-warden: see ocsb-warden --help\n", stderr);
			return 2;
		}
	}
	log_init("ocsb-warden", w.use_syslog ? LOG_TARGET_SYSLOG : LOG_TARGET_DAEMON, w.verbose);
	if (optind < argc) {
		log_err("unexpected argument '%s'; see ocsb-warden --help", argv[optind]);
		return 2;
	}
	if (geteuid() != 0) {
		log_err("must run as root");
		return 2;
	}
	paths_default(&w.paths);
	if (config)
		snprintf(w.config_path, sizeof(w.config_path), "%s", config);
	else
		path_join(w.config_path, sizeof(w.config_path), w.paths.etc, "ocsb/ocsb.conf");
	/* systemd's notify socket: ours, not our children's; READY once the supervisor is up. */
	if (sd_notify_take(w.notify, sizeof(w.notify)) < 0)
		log_warn(
			"NOTIFY_SOCKET is not a socket's name: systemd will not hear we are ready");
#ifdef OCSB_TEST_BUILD
	w.test_hooks = TESTHOOK_ON();
#endif
	raise_priority();
	if (setup(&w) < 0) {
		log_err("start-up failed; nothing of the agent runs");
		return 1;
	}
	r = run(&w);
	log_notice("stopped");
	if (w.guard_sock)
		mnl_socket_close(w.guard_sock); /* the guard goes; the plain table stays */
	return r < 0 ? 1 : 0;
}
