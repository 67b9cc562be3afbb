/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "warden.h"
#include "fileops.h"
#include "log.h"
#include "procs.h"
#include "testhook.h"

#define FREEZE_TICK_MS 200

/*
 * Invariant 4, fail closed. The warden listens to every nftables change in its network
 * namespace; after each burst it reads the table back, and re-applies it when it is
 * gone or altered. If that fails, every process of the agent is stopped until it works.
 */

/*
 * Test hook, in a test build and off unless the warden was started with OCSB_TEST_HOOKS=1:
 * while the file <run>/ocsb/fault-netlock exists, restoring the table "fails" (-1, the
 * reason in err), so the tests can watch the freeze and the thaw. It can only make the warden
 * stricter. A release build has neither the check nor the file's name.
 */
#ifdef OCSB_TEST_BUILD
static int fault_netlock(struct warden *w, char *err, size_t errlen)
{
	char path[4096];

	if (!w->test_hooks ||
		path_join(path, sizeof(path), w->paths.run, "ocsb/fault-netlock") < 0 ||
		access(path, F_OK) < 0)
		return 0;
	snprintf(err, errlen, "apply refused (test hook OCSB_FAULT_NETLOCK)");
	return -1;
}
#else
static int fault_netlock(struct warden *w, char *err, size_t errlen)
{
	return 0;
}
#endif

int netwatch_open(struct warden *w)
{
	struct mnl_socket *nl;
	int group = NFNLGRP_NFTABLES, fd;

	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		log_err("netlink: %s", strerror(errno));
		return -1;
	}
	if (mnl_socket_setsockopt(nl, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group)) < 0) {
		log_err("netlink: subscribing to nftables events: %s (needs CAP_NET_ADMIN)",
			strerror(errno));
		mnl_socket_close(nl);
		return -1;
	}
	fd = mnl_socket_get_fd(nl);
	w->nft_sock = nl;
	w->nftfd = fd;
	return warden_watch(w, fd, &w->nft_src, WS_NFT, w);
}

int netwatch_agents(struct warden *w)
{
	struct netlock_spec s = w->nl;
	char stale[1024];
	int r = netlock_registry(&s, w->paths.varlib, NULL, stale, sizeof(stale));

	if (r < 0) {
		log_err("netlock: %s/ocsb/agents: %s", w->paths.varlib,
			r == -E2BIG ? "more agents than the netlock holds (64)" : strerror(-r));
		return -1;
	}
	/* Said once per change: a stale name stays until ocsb-provision forgets it. */
	if (stale[0] && strcmp(stale, w->stale_agents) != 0)
		log_warn("netlock: %s/ocsb/agents: %s", w->paths.varlib, stale);
	snprintf(w->stale_agents, sizeof(w->stale_agents), "%s", stale);
	/* An agent's range is the registry's as much as its uid: a changed one is a change. */
	if (s.n_others == w->nl.n_others &&
		memcmp(s.others, w->nl.others, s.n_others * sizeof(s.others[0])) == 0 &&
		memcmp(s.others_ports, w->nl.others_ports,
			s.n_others * sizeof(s.others_ports[0])) == 0)
		return 0;
	w->nl.n_others = s.n_others;
	memcpy(w->nl.others, s.others, sizeof(s.others));
	memcpy(w->nl.others_ports, s.others_ports, sizeof(s.others_ports));
	return 1;
}

/*
 * A table changed by ocsb-provision may hold an agent it just registered, or an agent's
 * new range: the registry is read again (it is root's), and the guard follows it.
 */
/* Re-read the agents registry; 1 when it changed (the guard then holds the new one). */
static int netwatch_registry(struct warden *w)
{
	char err[512];

	if (netwatch_agents(w) != 1)
		return 0;
	log_notice("netlock: the agents registry changed: %zu other agent%s", w->nl.n_others,
		w->nl.n_others == 1 ? "" : "s");
	if (w->guard_sock && netlock_guard_apply(&w->nl, w->guard_sock, err, sizeof(err)) < 0)
		log_err("netlock guard: %s", err);
	return 1;
}

/*
 * The last word of a burst on inet NETLOCK_TABLE: deleted (1) or created (0). A burst whose
 * last word is a delete needs no read-back to know the table is gone. Our own apply
 * replaces the table (delete, then create): its burst ends created.
 */
static int table_gone_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct nlattr *a;
	int type = NFNL_MSG_TYPE(nlh->nlmsg_type);

	if (NFNL_SUBSYS_ID(nlh->nlmsg_type) != NFNL_SUBSYS_NFTABLES ||
		(type != NFT_MSG_DELTABLE && type != NFT_MSG_NEWTABLE) ||
		nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nfgenmsg) ||
		((const struct nfgenmsg *)mnl_nlmsg_get_payload(nlh))->nfgen_family != NFPROTO_INET)
		return MNL_CB_OK;
	mnl_attr_for_each(a, nlh, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) == NFTA_TABLE_NAME &&
			mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0 &&
			strcmp(mnl_attr_get_str(a), NETLOCK_TABLE) == 0)
			*(int *)data = type == NFT_MSG_DELTABLE;
	}
	return MNL_CB_OK;
}

void netwatch_event(struct warden *w)
{
	char buf[16384]; /* MNL_SOCKET_BUFFER_SIZE is a sysconf() call: no VLA */
	char err[512];
	int overrun = 0, n = 0, gone = 0;
	long long t0;

	/* Drain the burst (a flush is a dozen messages), then look once. */
	for (;;) {
		ssize_t r = mnl_socket_recvfrom(w->nft_sock, buf, sizeof(buf));

		if (r < 0 && errno == ENOBUFS) {
			overrun = 1; /* events were lost: the read-back below resyncs */
			continue;
		}
		if (r <= 0)
			break;
		n++;
		mnl_cb_run(buf, (size_t)r, 0, 0, table_gone_cb, &gone);
	}
	if (!n && !overrun)
		return;
	/*
	 * Deleted (the usual attack, `nft flush ruleset`): put it back without looking first,
	 * with the set known; the registry (a directory and an account lookup per entry, NSS
	 * may be remote) is read after, and a changed set applied then.
	 */
	if (gone) {
		snprintf(err, sizeof(err), "table inet %s deleted", NETLOCK_TABLE);
		if (netwatch_enforce(w, err) == 0 && netwatch_registry(w))
			netwatch_enforce(w, "the agents registry changed");
		return;
	}
	if (netwatch_registry(w)) {
		netwatch_enforce(w, "the agents registry changed");
		return;
	}
	t0 = mono_us();
	if (netlock_snap_check(w->nl_sock, &w->snap, err, sizeof(err)) == 0)
		return;
	w->found_ms = (double)(mono_us() - t0) / 1e3;
	netwatch_enforce(w, err);
	w->found_ms = 0;
}

/* The table as w->nl says, installed and recorded (netlock_snap.c): 0, or -1 and err. */
static int install(struct warden *w, char *err, size_t errlen)
{
	if (fault_netlock(w, err, errlen) < 0)
		return -1;
	return netlock_apply_snap(&w->nl, w->nl_sock, &w->snap, err, errlen);
}

int netwatch_update(struct warden *w, const char *why)
{
	char err[512];

	if (install(w, err, sizeof(err)) == 0) {
		log_info("netlock: %s: applied", why);
		return 0;
	}
	snprintf(w->netlock_error, sizeof(w->netlock_error), "%s", err);
	log_err("%s; applying failed: %s: freezing every process of %s", why, err, w->agent.name);
	freeze_agent(w);
	return -1;
}

int netwatch_enforce(struct warden *w, const char *why)
{
	char err[512];
	long long t0 = mono_us();

	if (install(w, err, sizeof(err)) == 0) {
		double apply_ms = (double)(mono_us() - t0) / 1e3;

		w->last_restore_ms = apply_ms;
		w->restores++;
		w->netlock_error[0] = '\0';
		/* The parts: the read-back that found it altered, the apply and its record. */
		log_warn("%s: restored in %.2f ms (restore #%u; found %.2f, apply and record %.2f)",
			why, w->last_restore_ms, w->restores, w->found_ms, apply_ms);
		if (w->frozen)
			thaw_agent(w);
		return 0;
	}
	snprintf(w->netlock_error, sizeof(w->netlock_error), "%s", err);
	log_err("%s; restoring failed: %s: freezing every process of %s", why, err, w->agent.name);
	freeze_agent(w);
	return -1;
}

static void freeze_arm(struct warden *w, int on)
{
	struct itimerspec it = {0};

	if (on) {
		it.it_value.tv_nsec = FREEZE_TICK_MS * 1000000L;
		it.it_interval.tv_nsec = FREEZE_TICK_MS * 1000000L;
	}
	timerfd_settime(w->freeze_timer, 0, &it, NULL);
}

struct sweep {
	struct warden *w;
	int moved, stopped;
};

/*
 * A process of the agent outside its cgroup (an ssh session, or one the warden did not
 * start) is moved in: in a frozen cgroup it freezes at once. One that cannot be moved
 * gets SIGSTOP, the weaker fallback.
 */
static void sweep_one(pid_t pid, int pidfd, void *ctx)
{
	struct sweep *s = ctx;

	if (cg_contains(&s->w->cg, pid))
		return;
	if (cg_attach(&s->w->cg, pid) == 0) {
		/* Moved by pid: alive after it, it was the agent's process that moved. */
		if (procs_pidfd_signal(pid, pidfd, 0) < 0)
			log_warn("freeze: process %d of %s ended as it was moved into %s: a "
				 "process that took its pid since may have been moved instead",
				(int)pid, s->w->agent.name, s->w->cg.what);
		s->moved++;
	} else if (procs_pidfd_signal(pid, pidfd, SIGSTOP) == 0) {
		s->stopped++;
		s->w->sigstopped = 1;
	}
}

/* Moves every process of the agent into its (frozen) cgroup; repeats while forks race. */
static int sweep(struct warden *w, int *stopped)
{
	struct sweep s = {w, 0, 0};
	int moved = 0;

	for (int round = 0; round < 10; round++) {
		s.moved = 0;
		procs_foreach_uid(w->agent.uid, sweep_one, &s);
		moved += s.moved;
		if (!s.moved)
			break;
	}
	*stopped = s.stopped;
	return moved;
}

static int cgroup_freezer(const struct warden *w)
{
	return w->cg.mode == CG_V2 || (w->cg.mode == CG_V1 && w->cg.dir[CG_FREEZER][0]);
}

int freeze_agent(struct warden *w)
{
	int n, moved = 0, stopped = 0;

	if (cgroup_freezer(w) && cg_freeze(&w->cg, 1) == 0) {
		/*
		 * The cgroup freezer: frozen tasks cannot run at all, so no pair of them can
		 * SIGCONT each other, and forks of a frozen task do not happen.
		 */
		moved = sweep(w, &stopped);
		n = cg_count(&w->cg);
		if (!w->frozen)
			log_err("frozen: %d process%s of %s in %s (%d moved in, %d stopped by "
				"SIGSTOP) until the netlock is back",
				n, n == 1 ? "" : "es", w->agent.name, w->cg.what, moved, stopped);
		w->frozen = 2;
	} else {
		n = procs_signal_uid(w->agent.uid, SIGSTOP, 0);
		w->sigstopped = 1;
		if (!w->frozen)
			log_err("frozen: %d process%s of %s stopped (SIGSTOP) until the netlock is "
				"back",
				n, n == 1 ? "" : "es", w->agent.name);
		w->frozen = 1;
	}
	super_send_event(w, WP_E_FROZEN, &(struct wp_e_frozen){(uint32_t)w->frozen},
		sizeof(struct wp_e_frozen));
	/*
	 * The one timer of a frozen state: new logins would start unfrozen processes, and
	 * the obstacle to the table may go away. An idle warden has no timer running.
	 */
	freeze_arm(w, 1);
	return n;
}

int thaw_agent(struct warden *w)
{
	int n = 0;

	if (w->frozen == 2) {
		cg_freeze(&w->cg, 0);
		n = cg_count(&w->cg);
	}
	if (w->sigstopped)
		n += procs_signal_uid(w->agent.uid, SIGCONT, 0);
	w->sigstopped = 0;
	w->frozen = 0;
	freeze_arm(w, 0);
	log_notice("thawed: netlock verified again, %d process%s of %s continued", n,
		n == 1 ? "" : "es", w->agent.name);
	/* The supervisor starts what it could not while frozen. */
	super_send_event(w, WP_E_FROZEN, &(struct wp_e_frozen){0}, sizeof(struct wp_e_frozen));
	return n;
}

/*
 * <run>/ocsb/<agent>/cgroups lists the cgroup's procs files for the agent's ssh sessions
 * to join (the pam_namespace init script ocsb-provision writes runs as root). The
 * directory is root's, so the agent cannot point the list elsewhere; `on` 0 removes it.
 */
void agent_cgroup_publish(struct warden *w, int on)
{
	char dir[4096];
	struct buf b = {0};
	int dfd, r = 0;

	dfd = warden_run_dir(w, dir, sizeof(dir));
	if (dfd < 0)
		return;
	if (!on) {
		if (unlinkat(dfd, AGENT_CGROUPS_FILE, 0) < 0 && errno != ENOENT)
			log_warn("limits: %s/%s: %s", dir, AGENT_CGROUPS_FILE, strerror(errno));
		close(dfd);
		return;
	}
	for (int i = 0; i < CG_NCTRL && r == 0; i++)
		if (w->cg.procs[i][0] && (i == 0 || strcmp(w->cg.procs[i], w->cg.procs[0]) != 0))
			r = buf_printf(&b, "%s\n", w->cg.procs[i]);
	if (r == 0)
		r = fo_write_at_nosync(
			dfd, AGENT_CGROUPS_FILE, b.data ? b.data : "", b.len, 0644, 0, 0);
	if (r < 0)
		log_err("limits: %s/%s: %s (the agent's ssh sessions run outside its cgroup)", dir,
			AGENT_CGROUPS_FILE, strerror(-r));
	buf_free(&b);
	close(dfd);
}

int agent_cgroup_setup(struct warden *w)
{
	char err[1024];
	int r;

	w->limits.memory_max = w->cfg.memory_max;
	w->limits.tasks_max = w->cfg.tasks_max;
	w->limits.cpu_percent = w->cfg.cpu_percent;
	/*
	 * A list left by a warden that was killed names the cgroup cg_setup is about to
	 * empty and re-limit: no session joins it before the limits are written again.
	 */
	agent_cgroup_publish(w, 0);
	r = cg_setup(&w->cg, CG_FS_ROOT, w->agent.name, &w->limits, err, sizeof(err));
	if (r < 0) {
		snprintf(w->cg_error, sizeof(w->cg_error), "%.500s", err);
		/*
		 * Limits protect the owner's machine from exhaustion, not the owner's data:
		 * the agent runs without them, loudly (log, ocsb status, ocsb doctor).
		 */
		log_err("limits: %s: the agent runs WITHOUT memory, task and CPU limits", err);
		return -1;
	}
	w->cg_error[0] = '\0';
	agent_cgroup_publish(w, 1);
	log_info("limits: %s: memory %llu MiB, tasks %u, cpu %u%%", w->cg.what,
		(unsigned long long)(w->limits.memory_max >> 20), w->limits.tasks_max,
		w->limits.cpu_percent);
	return 0;
}

void freeze_tick(struct warden *w)
{
	uint64_t ticks;
	char err[512];

	if (read(w->freeze_timer, &ticks, sizeof(ticks)) < 0 || !w->frozen)
		return;
	if (w->frozen == 2) {
		int stopped;

		sweep(w, &stopped);
	} else {
		procs_signal_uid(w->agent.uid, SIGSTOP, 0);
	}
	if (install(w, err, sizeof(err)) == 0) {
		w->restores++;
		w->netlock_error[0] = '\0';
		log_warn("netlock: restored after a freeze");
		thaw_agent(w);
	}
}
