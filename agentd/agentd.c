/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

#include "agentd.h"
#include "fileops.h"
#include "log.h"
#include "procs.h"

int agentd_watch(
	struct agentd *d, int fd, struct src *s, enum src_kind kind, void *ptr, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = s};

	s->kind = kind;
	s->ptr = ptr;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_err("epoll_ctl: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int agent_run_dir(struct agentd *d, char *dir, size_t n, const char *what)
{
	char rel[128];
	struct stat st;
	int dfd;

	snprintf(rel, sizeof(rel), "ocsb/%s", d->agent.name);
	if (path_join(dir, n, d->paths.run, rel) < 0) {
		log_err("%s: %s/%s: path too long", what, d->paths.run, rel);
		return -1;
	}
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s: %s", what, dir, strerror(-dfd));
		return -1;
	}
	/* The agent must not be able to plant a link or file in it. */
	if (fstat(dfd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		log_err("%s: %s must be a root-owned directory not writable by others", what, dir);
		close(dfd);
		return -1;
	}
	return dfd;
}

static int load_config(struct agentd *d)
{
	char err[1024];
	int r;

	config_defaults(&d->cfg);
	r = config_load(&d->cfg, d->config_path, err, sizeof(err));
	if (r < 0) {
		log_err("%s%s", err, r == -ENOENT ? " (run ocsb-provision first)" : "");
		return -1;
	}
	if (config_validate(&d->cfg, err, sizeof(err)) < 0) {
		log_err("%s: %s", d->config_path, err);
		return -1;
	}
	if (user_lookup(d->cfg.agent, &d->agent) < 0) {
		log_err("agent account %s does not exist: run ocsb-provision first", d->cfg.agent);
		return -1;
	}
	if (!d->cfg.owner[0] || user_lookup(d->cfg.owner, &d->owner) < 0) {
		log_err("owner '%s' in %s is not a user of this machine", d->cfg.owner,
			d->config_path);
		return -1;
	}
	r = egress_load(&d->egress, &d->paths, d->owner.home, d->owner.uid, err, sizeof(err));
	if (r < 0) {
		log_err("%s", err);
		return -1;
	}
	memset(&d->nl, 0, sizeof(d->nl));
	d->nl.uid = d->agent.uid;
	d->nl.proxy_port = d->egress.off ? 0 : d->cfg.proxy_port;
	d->nl.ports_lo = d->cfg.ports_lo;
	d->nl.ports_hi = d->cfg.ports_hi;
	d->nl.dns_allow = d->egress.dns_allow;
	d->nl.proxy_uid = netlock_proxy_uid();
	/* Unreadable: ocsb-inject gets no local nameserver, DNS off the machine still. */
	r = netlock_inject_host(&d->nl, d->paths.etc);
	if (r < 0)
		log_warn("netlock: %s/resolv.conf: %s: no nameserver for %s", d->paths.etc,
			strerror(-r), NETLOCK_INJECT_USER);
	/*
	 * The routes are the injector's, not the configuration's: a reload (SIGHUP) rebuilds
	 * the rest and keeps the ones it serves (none at start), or the tables would lose
	 * their rules while it goes on serving.
	 */
	injectd_netlock(d);
	if (netwatch_agents(d) < 0)
		return -1;
	snprintf(d->opencode_bin, sizeof(d->opencode_bin), "%s", d->cfg.opencode_bin);
	return proxy_init(&d->proxy, &d->paths, d->cfg.proxy_port);
}

/* squid's configuration, rendered from the rules in force, validated before use. */
static int write_proxy_config(struct agentd *d)
{
	struct buf conf = {0};
	char err[1024];
	int r = -1;

	if (proxy_render(&d->proxy, &d->egress, &conf) < 0)
		goto out;
	if (fo_same(d->proxy.conf, conf.data, conf.len, 0644, 0, 0) == 1) {
		r = 0;
		goto out;
	}
	if (proxy_check_text(&d->proxy, conf.data, err, sizeof(err)) < 0) {
		log_err("%s", err);
		goto out;
	}
	r = fo_write(d->proxy.conf, conf.data, conf.len, 0644, 0, 0);
	if (r < 0)
		log_err("%s: %s (has ocsb-provision run?)", d->proxy.conf, strerror(-r));
out:
	buf_free(&conf);
	return r;
}

static int init_children(struct agentd *d)
{
	struct child *px = &d->proxy_child;

	snprintf(px->name, sizeof(px->name), "proxy");
	px->plan_child = proxy_plan;
	px->exec_child = proxy_exec;
	px->pidfd = px->timerfd = px->probe_fd = px->exec_fd = -1;
	if (child_log_open(d, px) < 0)
		return -1;
	px->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (px->timerfd < 0 ||
		agentd_watch(d, px->timerfd, &px->timer_src, SRC_TIMER, px, EPOLLIN) < 0)
		return -1;
	d->n_oc = 0;
	for (size_t i = 0; i < d->cfg.projects.n && i < AGENTD_MAX_PROJECTS; i++) {
		struct child *c = &d->oc[d->n_oc++];
		const char *name = path_base(d->cfg.projects.v[i]);

		snprintf(c->name, sizeof(c->name), "opencode/%s", name);
		snprintf(c->project, sizeof(c->project), "%s/%s", d->agent.home, name);
		c->is_opencode = 1;
		c->port = d->cfg.opencode_port + (unsigned)i;
		c->plan_child = opencode_plan;
		c->exec_child = opencode_exec;
		c->pidfd = c->probe_fd = c->exec_fd = -1;
		if (child_log_open(d, c) < 0)
			return -1;
		c->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		if (c->timerfd < 0 ||
			agentd_watch(d, c->timerfd, &c->timer_src, SRC_TIMER, c, EPOLLIN) < 0)
			return -1;
		if (opencode_password(d, c) < 0)
			return -1;
	}
	return 0;
}

int agentd_setup(struct agentd *d)
{
	sigset_t set;
	char err[1024];

	clock_gettime(CLOCK_MONOTONIC, &d->started);
	d->pcheck_fd = -1;
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epfd < 0)
		fatal("epoll_create1: %s", strerror(errno));
	if (load_config(d) < 0)
		return -1;
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	d->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (d->sigfd < 0 || agentd_watch(d, d->sigfd, &d->sig_src, SRC_SIGNAL, d, EPOLLIN) < 0)
		return -1;

	/*
	 * Fail closed: watch first, then install and verify the netlock. Nothing of the
	 * agent starts before the table reads back as built.
	 */
	if (netwatch_open(d) < 0)
		return -1;
	/* Kept: a restore must not wait for the kernel's cleanup when a socket closes. */
	d->nl_sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (d->nl_sock && mnl_socket_bind(d->nl_sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(d->nl_sock);
		d->nl_sock = NULL;
	}
	if (!d->nl_sock)
		log_warn("netlock: no kept netfilter socket (%s): each restore opens its own",
			strerror(errno));
	if (netlock_apply(&d->nl, err, sizeof(err)) < 0 ||
		netlock_verify(&d->nl, err, sizeof(err)) != 0) {
		log_err("netlock: %s: nothing of the agent is started", err);
		return -1;
	}
	/*
	 * The guard: the same rules in a table only our socket may touch. A flush of the
	 * ruleset takes the plain table away for the milliseconds until we restore it; the
	 * guard stays, so the agent is never without a netlock.
	 */
	d->guard_sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!d->guard_sock || mnl_socket_bind(d->guard_sock, 0, MNL_SOCKET_AUTOPID) < 0 ||
		netlock_guard_apply(&d->nl, d->guard_sock, err, sizeof(err)) < 0 ||
		netlock_guard_verify(&d->nl, err, sizeof(err)) != 0) {
		log_err("netlock guard: %s: nothing of the agent is started",
			d->guard_sock ? err : strerror(errno));
		return -1;
	}
	log_info("netlock: tables inet %s and %s verified for uid %u", NETLOCK_TABLE,
		NETLOCK_GUARD_TABLE, (unsigned)d->agent.uid);
	d->freeze_timer = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (d->freeze_timer < 0 ||
		agentd_watch(d, d->freeze_timer, &d->freeze_src, SRC_TIMER, NULL, EPOLLIN) < 0)
		return -1;
	if (ctlsrv_open(d) < 0)
		return -1;
	agent_cgroup_setup(d);
	if (init_children(d) < 0)
		return -1;
	if (injectd_hold_ports(d) < 0 || secretd_init(d) < 0)
		return -1;
	if (injectd_init(d) < 0)
		return -1;
	/* Not fatal: the agent works without the owner's configs; the log says why. */
	if (mirrorwatch_open(d) < 0)
		mirrorwatch_close(d);
	if (!d->egress.off) {
		/* A proxy started by ocsb-provision (no supervisor then) makes way for ours. */
		if (proxy_stop(&d->proxy, 3000) < 0)
			log_warn("a stale squid (pid file %s) did not stop", d->proxy.pidfile);
		if (write_proxy_config(d) < 0)
			return -1;
		child_start(d, &d->proxy_child);
	}
	for (size_t i = 0; i < d->n_oc; i++)
		child_start(d, &d->oc[i]);
	return 0;
}

/* SIGHUP: re-read the rules; reload squid in place; re-apply the netlock if it changed. */
static void reload(struct agentd *d)
{
	struct ocsb_config old = d->cfg;
	struct egress olde = d->egress;
	struct user_info agent = d->agent, owner = d->owner;
	struct netlock_spec nl = d->nl;
	struct proxy px = d->proxy;
	char bin[sizeof(d->opencode_bin)], err[512];

	memcpy(bin, d->opencode_bin, sizeof(bin));
	memset(&d->cfg, 0, sizeof(d->cfg));
	memset(&d->egress, 0, sizeof(d->egress));
	/*
	 * All or nothing. A new agent or owner is refused: running processes of the old
	 * uid would leave the netlock, and control rights would move; that needs a restart.
	 */
	if (load_config(d) < 0 || d->agent.uid != agent.uid || d->owner.uid != owner.uid ||
		strcmp(d->agent.name, agent.name) != 0) {
		if (d->agent.uid != agent.uid || d->owner.uid != owner.uid)
			log_err("reload: the agent or the owner changed: restart ocsb-agentd for "
				"that");
		log_err("reload failed: keeping the running configuration");
		config_free(&d->cfg);
		egress_free(&d->egress);
		d->cfg = old;
		d->egress = olde;
		d->agent = agent;
		d->owner = owner;
		d->nl = nl;
		d->proxy = px;
		memcpy(d->opencode_bin, bin, sizeof(bin));
		return;
	}
	config_free(&old);
	egress_free(&olde);
	if (netlock_guard_apply(&d->nl, d->guard_sock, err, sizeof(err)) < 0)
		log_err("netlock guard: %s", err);
	if (netlock_verify(&d->nl, err, sizeof(err)) != 0)
		netwatch_enforce(d, "configuration reloaded");
	proxycheck_begin(d); /* squid gets the new rules once `squid -k parse` took them */
	if (d->cg.mode != CG_NONE) {
		config_limits(&d->cfg, &d->limits.memory_max, &d->limits.tasks_max,
			&d->limits.cpu_percent);
		if (cg_set_limits(&d->cg, &d->limits, err, sizeof(err)) < 0)
			log_err("limits: %s", err);
	}
	mirrorwatch_reload(d);
	log_notice("configuration reloaded");
}

static void on_signal(struct agentd *d)
{
	struct signalfd_siginfo si;

	while (read(d->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGTERM:
		case SIGINT:
			log_notice("signal %u: stopping", si.ssi_signo);
			d->stopping = 1;
			break;
		case SIGHUP:
			reload(d);
			break;
		}
	}
}

static void shutdown_children(struct agentd *d)
{
	/* OpenCode first, all at once: it may still be talking through the proxy. */
	long deadline = mono_ms() + CHILD_STOP_MS;

	for (size_t i = 0; i < d->n_oc; i++)
		child_stop_begin(d, &d->oc[i]);
	for (size_t i = 0; i < d->n_oc; i++)
		child_stop_wait(d, &d->oc[i], deadline);
	/* Then the injector and the proxy, together. */
	deadline = mono_ms() + CHILD_STOP_MS;
	child_stop_begin(d, &d->inject_child);
	child_stop_begin(d, &d->proxy_child);
	child_stop_wait(d, &d->inject_child, deadline);
	child_stop_wait(d, &d->proxy_child, deadline);
	/* What OpenCode left running (a dev server, a `sleep &`) does not outlive agentd. */
	if (d->cg.mode != CG_NONE) {
		int n;

		agent_cgroup_publish(d, 0); /* no new ssh session joins a cgroup about to go */
		n = cg_count(&d->cg);

		if (n > 0)
			log_notice("stopping %d process%s left in %s", n, n == 1 ? "" : "es",
				d->cg.what);
		if (cg_remove(&d->cg) < 0)
			log_err("the agent's cgroup could not be emptied and removed");
	}
	/*
	 * The agent stops with its supervisor: whatever it detached (setsid, nohup, a
	 * double fork, its ssh sessions' leftovers) would otherwise run unwatched, with no
	 * netlock watchdog. The cgroup held what agentd started; ssh sessions are outside it
	 * (without systemd), so the uid is the handle for the rest.
	 */
	{
		/* Names what is left when it fails (zombies do not count: no signal ends them). */
		int n = procs_kill_uid(d->agent.uid, d->agent.name);

		if (n > 0)
			log_notice("stopped %d leftover process%s of %s", n, n == 1 ? "" : "es",
				d->agent.name);
	}
}

static const char *const src_names[] = {"signal", "nftables", "control-accept", "control-client",
	"child-exit", "timer", "probe", "log", "mirror", "exec", "control-timer", "proxy-check", "inject"};
/* One name per kind: SRC_INJECT is the last of enum src_kind (agentd.h). */
_Static_assert(sizeof(src_names) / sizeof(src_names[0]) == SRC_INJECT + 1,
	"src_names must name every enum src_kind");

/* The loop's promise is "no handler waits": one that takes long is logged (-v) with its kind. */
#define LOOP_SLOW_MS 10

static int nft_pending(struct agentd *d)
{
	struct pollfd p = {.fd = d->nftfd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

static void nft_event(struct agentd *d)
{
	long t0 = mono_ms(), took;

	netwatch_event(d);
	took = mono_ms() - t0;
	if (took >= LOOP_SLOW_MS)
		log_info("loop: a %s event held the loop %ld ms", src_names[SRC_NFT], took);
}

int agentd_run(struct agentd *d)
{
	struct epoll_event evs[32];

	while (!d->stopping) {
		/* No timeout: with nothing to do the daemon does not wake up. */
		int n = epoll_wait(d->epfd, evs, 32, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("epoll_wait: %s", strerror(errno));
			return -1;
		}
		/* The netlock first: nothing else in this batch runs before its restore. */
		for (int i = 0; i < n; i++) {
			if (((struct src *)evs[i].data.ptr)->kind == SRC_NFT) {
				nft_event(d);
				evs[i].data.ptr = NULL;
			}
		}
		for (int i = 0; i < n && !d->stopping; i++) {
			struct src *s = evs[i].data.ptr;
			enum src_kind kind;
			long t0 = mono_ms(), took;

			if (!s)
				continue;
			kind = s->kind; /* s may be gone after its handler */
			switch (s->kind) {
			case SRC_SIGNAL:
				on_signal(d);
				break;
			case SRC_NFT:
				netwatch_event(d);
				break;
			case SRC_CTL_LISTEN:
				ctlsrv_accept(d);
				break;
			case SRC_CTL_CLIENT:
				ctlsrv_client(d, s->ptr, evs[i].events);
				break;
			case SRC_CHILD:
				child_exited(d, s->ptr);
				break;
			case SRC_TIMER:
				if (s->ptr)
					child_timer(d, s->ptr);
				else
					freeze_tick(d);
				break;
			case SRC_PROBE:
				child_probe_event(d, s->ptr, evs[i].events);
				break;
			case SRC_LOG:
				child_log_event(d, s->ptr);
				break;
			case SRC_MIRROR:
				mirrorwatch_event(d, s);
				break;
			case SRC_EXEC:
				child_exec_event(d, s->ptr);
				break;
			case SRC_CTL_TIMER:
				ctlsrv_timer(d);
				break;
			case SRC_PROXYCHECK:
				proxycheck_event(d);
				break;
			case SRC_INJECT:
				injectd_event(d, evs[i].events);
				break;
			}
			took = mono_ms() - t0;
			if (took >= LOOP_SLOW_MS)
				log_info("loop: a %s event held the loop %ld ms", src_names[kind], took);
			/* Nor does the rest of it: an event that came meanwhile is handled now. */
			if (nft_pending(d))
				nft_event(d);
		}
	}
	shutdown_children(d);
	return 0;
}

void agentd_free(struct agentd *d)
{
	ctlsrv_close(d);
	mirrorwatch_close(d);
	proxycheck_close(d);
	/* The guard goes with its socket; the plain table stays and keeps the agent locked. */
	if (d->guard_sock)
		mnl_socket_close(d->guard_sock);
	if (d->nft_sock)
		mnl_socket_close(d->nft_sock);
	if (d->nl_sock)
		mnl_socket_close(d->nl_sock);
	config_free(&d->cfg);
	egress_free(&d->egress);
	secretd_free(d);
	injectd_free(d);
}
