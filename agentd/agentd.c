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

#include "agentd.h"
#include "fileops.h"
#include "log.h"

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

#define OWNER_EGRESS_MS 10000 /* the owner's egress.conf, read by a child as the owner */
#define OWNER_EGRESS_MAX ((1 << 20) + 1) /* CONF_MAX_FILE, and one byte to see it exceeded */
#define OWNER_EGRESS_ERR 2048

/*
 * The owner's egress layer (~/.config/ocsb/egress.conf): we cannot read the owner's home,
 * so the warden runs `ocsb-agentd --owner-egress` as the owner (WP_KIND_OWNER_EGRESS),
 * which checks the file on its descriptor and prints it; we parse it. 0 with *ret (NULL:
 * no layer, or an empty one), or -1 logged (its stderr, escaped by the log like every
 * line: it is the owner's side talking).
 */
static int owner_egress_text(struct agentd *d, char **ret, size_t *ret_len)
{
	struct buf out = {0}, err = {0};
	struct wp_r_spawn rs;
	struct wp_e_exit ex;
	int po[2] = {-1, -1}, pe[2] = {-1, -1}, r = -1, open_n = 2;
	long deadline = mono_ms() + OWNER_EGRESS_MS;

	*ret = NULL;
	*ret_len = 0;
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		log_err("egress: pipe: %s", strerror(errno));
		goto out;
	}
	r = wc_spawn(d, WP_KIND_OWNER_EGRESS, 0, NULL, 0, 0, pe[1], po[1], &rs);
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	if (r < 0) {
		log_err("egress: reading %s's %s: %s", d->owner.name, EGRESS_OWNER_FILE,
			strerror(-r));
		r = -1;
		goto out;
	}
	/* Both pipes at once: a child that fills one while we wait on the other never ends. */
	while (open_n > 0 && mono_ms() < deadline) {
		struct pollfd pf[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
		char chunk[4096];

		if (poll(pf, 2, (int)(deadline - mono_ms())) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			struct buf *b = i ? &err : &out;
			size_t max = i ? OWNER_EGRESS_ERR : OWNER_EGRESS_MAX;
			ssize_t n;

			if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(pf[i].fd, chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(i ? pe[0] : po[0]);
				if (i)
					pe[0] = -1;
				else
					po[0] = -1;
				open_n--;
				continue;
			}
			if (b->len < max)
				buf_append(b, chunk, (size_t)n < max - b->len ? (size_t)n : max - b->len);
		}
	}
	/* Its pipes closed: its end is a moment away, whatever the deadline says. */
	r = wc_wait_exit(d, rs.slot, open_n ? 0 : 1000 + deadline - mono_ms(), &ex);
	if (r < 0) {
		/* Stuck (an NFS home, a FIFO): ended, and the layer is not guessed. */
		wc_signal(d, rs.slot, SIGKILL);
		r = wc_wait_exit(d, rs.slot, 3000, &ex);
		log_err("egress: reading %s's %s took more than %d ms: stopped", d->owner.name,
			EGRESS_OWNER_FILE, OWNER_EGRESS_MS);
		r = -1;
		goto out;
	}
	if (ex.cld != CLD_EXITED || ex.status != 0) {
		/* Its own words, the last line's newline off (log_* escapes what is left). */
		while (err.len && err.data[err.len - 1] == '\n')
			err.len--;
		log_err("egress: %s's %s: %.*s", d->owner.name, EGRESS_OWNER_FILE,
			err.len ? (int)err.len : 16, err.len ? err.data : "could not be read");
		r = -1;
		goto out;
	}
	if (out.len >= OWNER_EGRESS_MAX) {
		log_err("egress: %s/%s: file too large (limit 1 MiB)", d->owner.home,
			EGRESS_OWNER_FILE);
		r = -1;
		goto out;
	}
	r = 0;
	if (out.len) {
		buf_append(&out, "", 1); /* a NUL after the text, not counted */
		*ret_len = out.len - 1;
		*ret = out.data;
		out.data = NULL;
	}
out:
	for (int i = 0; i < 2; i++) {
		if (po[i] >= 0)
			close(po[i]);
		if (pe[i] >= 0)
			close(pe[i]);
	}
	buf_free(&out);
	buf_free(&err);
	return r;
}

static int load_config(struct agentd *d)
{
	char err[1024];
	int r;

	if (config_load_logged(&d->cfg, d->config_path) < 0)
		return -1;
	if (user_lookup(d->cfg.agent, &d->agent) < 0) {
		log_err("agent account %s does not exist: run ocsb-provision first", d->cfg.agent);
		return -1;
	}
	if (!d->cfg.owner[0] || user_lookup(d->cfg.owner, &d->owner) < 0) {
		log_err("owner '%s' in %s is not a user of this machine", d->cfg.owner,
			d->config_path);
		return -1;
	}
	{
		char *text = NULL;
		size_t len = 0;

		if (owner_egress_text(d, &text, &len) < 0)
			return -1;
		r = egress_load_text(&d->egress, &d->paths, d->owner.home, text, len, err,
			sizeof(err));
		free(text);
	}
	if (r < 0) {
		log_err("%s", err);
		snprintf(d->reload_error, sizeof(d->reload_error), "%.500s", err);
		return -1;
	}
	snprintf(d->opencode_bin, sizeof(d->opencode_bin), "%s", d->cfg.opencode_bin);
	if (proxy_init(&d->proxy, &d->paths, d->cfg.proxy_port) < 0 ||
		path_join(d->proxy.conf, sizeof(d->proxy.conf), d->paths.varlib, SQUID_CONF_REL) <
			0) {
		log_err("proxy: %s: path too long", d->paths.varlib);
		return -1;
	}
	return 0;
}

int agentd_send_egress(struct agentd *d)
{
	struct wp_egress e = {.off = d->egress.off ? 1 : 0, .dns_allow = d->egress.dns_allow ? 1 : 0};
	int r = wc_call_ok(d, WP_EGRESS, &e, sizeof(e), NULL, 0);

	if (r < 0)
		log_err("netlock: the warden did not apply the egress settings (egress %s, dns "
			"%s): %s",
			e.off ? "off" : "on", e.dns_allow ? "allow" : "off", strerror(-r));
	return r < 0 ? -1 : 0;
}

/*
 * squid's configuration, rendered from the rules in force, validated before use: in the
 * supervisor's directory, so root never parses what we render (squid reads it as proxy).
 */
static int write_proxy_config(struct agentd *d)
{
	struct buf conf = {0};
	char err[1024];
	int r = -1;

	if (proxy_render(&d->proxy, &d->egress, &conf) < 0)
		goto out;
	if (fo_same(d->proxy.conf, conf.data, conf.len, 0644, getuid(), getgid()) == 1) {
		r = 0;
		goto out;
	}
	if (proxy_check_text(&d->proxy, conf.data, err, sizeof(err)) < 0) {
		log_err("%s", err);
		goto out;
	}
	r = fo_write(d->proxy.conf, conf.data, conf.len, 0644, getuid(), getgid());
	if (r < 0)
		log_err("%s: %s (does ocsb-warden make its directory ours?)", d->proxy.conf,
			strerror(-r));
out:
	buf_free(&conf);
	return r;
}

static int init_children(struct agentd *d)
{
	struct child *px = &d->proxy_child;

	snprintf(px->name, sizeof(px->name), "proxy");
	px->kind = WP_KIND_PROXY;
	px->timerfd = px->probe_fd = -1;
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
		c->kind = WP_KIND_OPENCODE;
		c->index = (uint32_t)i; /* the warden finds its argv and clone by it */
		c->prepare = opencode_prepare;
		c->probe_fd = -1;
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

/*
 * wfd, ctlfd: the warden's protocol socket and the control socket it bound (fds 3 and 4).
 * No root operation here: the netlock, the cgroup and the children's privileges are the
 * warden's; we ask for them over wfd.
 */
int agentd_setup(struct agentd *d)
{
	sigset_t set;

	clock_gettime(CLOCK_MONOTONIC, &d->started);
	d->pcheck_fd = -1;
	d->ctl_timer = -1;
	for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++)
		d->clients[i].fd = -1;
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epfd < 0)
		fatal("epoll_create1: %s", strerror(errno));
	if (wc_open(d, d->wfd) < 0)
		return -1;
	/* First of all: the warden takes nothing else before it (state INIT). */
	if (wc_call_ok(d, WP_HELLO, NULL, 0, NULL, 0) < 0) {
		log_err("warden: HELLO refused");
		return -1;
	}
	/* A supervisor started again may find the agent frozen: its thaw comes as an event. */
	wc_status(d, &d->wstatus);
	d->frozen = (int)d->wstatus.frozen;
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
	 * The owner's egress bits before any child: the warden installed the netlock with
	 * the safe ones (proxy on, DNS off) and applies and verifies ours.
	 */
	if (agentd_send_egress(d) < 0)
		return -1;
	if (ctlsrv_open(d, d->ctlfd) < 0)
		return -1;
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
		/* A stale squid (ocsb-provision's) was stopped by the warden before we started. */
		if (write_proxy_config(d) < 0)
			return -1;
		child_start(d, &d->proxy_child);
	}
	d->egress_gen = d->proxy_gen = 1;
	for (size_t i = 0; i < d->n_oc; i++)
		child_start(d, &d->oc[i]);
	return 0;
}

/*
 * The warden re-read ocsb.conf (WP_E_RELOAD, after a SIGHUP to it or our WP_RELOAD):
 * re-read the rules; the egress bits to the warden; squid reloaded in place.
 */
void agentd_reload(struct agentd *d)
{
	struct ocsb_config old = d->cfg;
	struct egress olde = d->egress;
	struct user_info agent = d->agent, owner = d->owner;
	struct proxy px = d->proxy;
	char bin[sizeof(d->opencode_bin)];

	memcpy(bin, d->opencode_bin, sizeof(bin));
	d->reloads++;
	d->reload_error[0] = '\0';
	memset(&d->cfg, 0, sizeof(d->cfg));
	memset(&d->egress, 0, sizeof(d->egress));
	/*
	 * All or nothing. A new agent or owner is refused: running processes of the old
	 * uid would leave the netlock, and control rights would move; that needs a restart.
	 */
	if (load_config(d) < 0 || d->agent.uid != agent.uid || d->owner.uid != owner.uid ||
		strcmp(d->agent.name, agent.name) != 0) {
		if (d->agent.uid != agent.uid || d->owner.uid != owner.uid)
			log_err("reload: the agent or the owner changed: restart ocsb-warden (or the "
				"unit) for that");
		log_err("reload failed: keeping the running configuration");
		if (!d->reload_error[0])
			snprintf(d->reload_error, sizeof(d->reload_error),
				"ocsb.conf or the accounts (the supervisor's log says which)");
		config_free(&d->cfg);
		egress_free(&d->egress);
		d->cfg = old;
		d->egress = olde;
		d->agent = agent;
		d->owner = owner;
		d->proxy = px;
		memcpy(d->opencode_bin, bin, sizeof(bin));
		return;
	}
	config_free(&old);
	egress_free(&olde);
	d->egress_gen++;
	/* The limits and the rest of the netlock are the warden's, from its own reading. */
	agentd_send_egress(d);
	proxycheck_begin(d); /* squid gets the new rules once `squid -k parse` took them */
	mirrorwatch_reload(d);
	log_notice("configuration reloaded");
}

/* WP_E_FROZEN: no start while frozen; the thaw starts what could not start meanwhile. */
void agentd_frozen(struct agentd *d, int frozen)
{
	int was = d->frozen;

	d->frozen = frozen;
	if (frozen && !was)
		log_warn("the warden froze the agent (netlock lost): no child starts until the "
			 "thaw");
	if (frozen || !was)
		return;
	log_notice("the warden thawed the agent: starting what waited");
	for (size_t i = 0; i < d->n_oc; i++)
		if (d->oc[i].state == CH_BACKOFF && d->oc[i].pid == 0)
			child_start(d, &d->oc[i]);
	if (d->proxy_child.state == CH_BACKOFF && d->proxy_child.pid == 0)
		child_start(d, &d->proxy_child);
	/* The injector too: wanted while it has routes, whether it ran before or not. */
	{
		unsigned ports[WP_MAX_ROUTES];

		if (d->inject_child.pid == 0 &&
			(d->inject_child.state == CH_BACKOFF ||
				(d->inject_child.state == CH_STOPPED && injectd_ports(d, ports) > 0)))
			child_start(d, &d->inject_child);
	}
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
		case SIGHUP: {
			/*
			 * ocsb.conf is the warden's to read first: it re-reads, then tells us
			 * (WP_E_RELOAD), and that event alone reloads ours, so once.
			 */
			int r = wc_call_ok(d, WP_RELOAD, NULL, 0, NULL, 0);

			if (r < 0)
				log_err("reload: the warden refused (%s): keeping the running "
					"configuration",
					strerror(-r));
			break;
		}
		}
	}
}

static int any_running(struct child *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (v[i]->pid > 0)
			return 1;
	return 0;
}

/* Every child of v stopped by deadline, their WP_E_EXIT read meanwhile; SIGKILL after. */
static void stop_group(struct agentd *d, struct child *const *v, size_t n)
{
	long deadline = mono_ms() + CHILD_STOP_MS;

	for (size_t i = 0; i < n; i++)
		child_stop_begin(d, v[i]);
	while (any_running(v, n) && mono_ms() < deadline)
		wc_wait(d, deadline);
	for (size_t i = 0; i < n; i++)
		child_stop_wait(d, v[i], deadline);
}

static void shutdown_children(struct agentd *d)
{
	struct child *v[AGENTD_MAX_PROJECTS];
	struct child *last[] = {&d->inject_child, &d->proxy_child};
	int r;

	/* OpenCode first, all at once: it may still be talking through the proxy. */
	for (size_t i = 0; i < d->n_oc; i++)
		v[i] = &d->oc[i];
	stop_group(d, v, d->n_oc);
	/* Then the injector and the proxy, together. */
	stop_group(d, last, ARRAY_SIZE(last));
	/*
	 * What OpenCode left running (a dev server, a `sleep &`, its detached processes) and
	 * the agent's cgroup are the warden's to end once we are gone: it holds the rights.
	 */
	r = wc_call_ok(d, WP_BYE, NULL, 0, NULL, 0);
	if (r < 0)
		log_warn("warden: BYE: %s", strerror(-r));
}

static const char *const src_names[] = {"signal", "warden", "control-accept", "control-client",
	"timer", "probe", "log", "mirror", "control-timer", "proxy-check", "inject"};
/* One name per kind: SRC_INJECT is the last of enum src_kind (agentd.h). */
_Static_assert(sizeof(src_names) / sizeof(src_names[0]) == SRC_INJECT + 1,
	"src_names must name every enum src_kind");

/* The loop's promise is "no handler waits": one that takes long is logged (-v) with its kind. */
#define LOOP_SLOW_MS 10

int agentd_run(struct agentd *d)
{
	struct epoll_event evs[32];

	while (!d->stopping) {
		/* No timeout: with nothing to do the daemon does not wake up, unless learning. */
		int n = epoll_wait(d->epfd, evs, 32, agentd_learn_timeout(d));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			log_err("epoll_wait: %s", strerror(errno));
			return -1;
		}
		for (int i = 0; i < n && !d->stopping; i++) {
			struct src *s = evs[i].data.ptr;
			enum src_kind kind;
			long t0 = mono_ms(), took;

			kind = s->kind; /* s may be gone after its handler */
			switch (s->kind) {
			case SRC_SIGNAL:
				on_signal(d);
				break;
			case SRC_WARDEN:
				wc_event(d);
				break;
			case SRC_CTL_LISTEN:
				ctlsrv_accept(d);
				break;
			case SRC_CTL_CLIENT:
				ctlsrv_client(d, s->ptr, evs[i].events);
				break;
			case SRC_TIMER:
				child_timer(d, s->ptr);
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
			/* The warden's events that came during a request of that handler. */
			wc_drain(d);
			took = mono_ms() - t0;
			if (took >= LOOP_SLOW_MS)
				log_info("loop: a %s event held the loop %ld ms", src_names[kind], took);
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
	config_free(&d->cfg);
	egress_free(&d->egress);
	secretd_free(d);
	injectd_free(d);
	wc_close(d);
}
