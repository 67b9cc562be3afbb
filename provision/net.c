/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress_defaults.h"
#include "fileops.h"
#include "log.h"
#include "netlock.h"
#include "procs.h"
#include "provision.h"
#include "spawn.h"

/*
 * The network side: /etc/ocsb/egress.conf, the squid configuration rendered from it, the
 * squid process (until ocsb-agentd supervises it), and the nftables table that makes the
 * proxy the agent's only way out.
 */

static int egress_conf_path(struct prov *p, char *out, size_t n)
{
	return path_join(out, n, p->paths.etc, "ocsb/egress.conf");
}

/* "1001, 1002": the uids of the set, for a message. */
static void netlock_uids_text(const struct netlock_spec *s, char *out, size_t n)
{
	size_t len = 0;

	out[0] = '\0';
	for (size_t i = 0; i <= s->n_others && len < n; i++) {
		uid_t u = i == 0 ? s->uid : s->others[i - 1];
		int dup = u == s->uid && i > 0;

		for (size_t k = 1; k < i && !dup; k++)
			dup = s->others[k - 1] == u;
		if (!dup)
			len += (size_t)snprintf(out + len, n - len, "%s%u", len ? ", " : "", (unsigned)u);
	}
}

/*
 * The table of this machine: this configuration's proxy, this agent's ports, every agent of
 * the registry but `skip` (an agent being removed) with the range its entry records,
 * ocsb-inject's chain, and ocsb-agentd's route ports while its guard holds them. The uid is this agent's, or with
 * `skip` the last remaining one (with its entry's range); 0 then when none remains. 0, or
 * -1 (said).
 */
static int netlock_spec_of(struct prov *p, struct netlock_spec *s, const char *skip)
{
	char stale[1024];
	int r;

	memset(s, 0, sizeof(*s));
	s->uid = skip ? 0 : p->agent.uid;
	s->proxy_port = p->egress.off ? 0 : p->cfg.proxy_port;
	if (!skip) {
		s->ports_lo = p->cfg.ports_lo;
		s->ports_hi = p->cfg.ports_hi;
	}
	s->dns_allow = p->egress.dns_allow;
	s->proxy_uid = netlock_proxy_uid();
	r = netlock_registry(s, p->paths.varlib, skip, stale, sizeof(stale));
	if (r < 0) {
		log_err("%s/ocsb/agents: %s", p->paths.varlib,
			r == -E2BIG ? "more agents than the netlock holds (64)" : strerror(-r));
		return -1;
	}
	if (stale[0])
		log_warn("%s/ocsb/agents: %s (sudo ocsb-provision --config <its configuration> "
			 "--remove --purge forgets an entry)",
			p->paths.varlib, stale);
	if (s->uid == 0) {
		struct netlock_range pr;

		if (s->n_others == 0)
			return 0;
		s->uid = s->others[s->n_others - 1];
		pr = netlock_others_range(s, s->uid);
		s->ports_lo = pr.lo;
		s->ports_hi = pr.hi;
		s->n_others--;
	}
	/* ocsb-inject's account (made before the netlock, prov.c) and its nameservers. */
	r = netlock_inject_host(s, p->paths.etc);
	if (r < 0)
		log_warn("%s/resolv.conf: %s: no nameserver for " NETLOCK_INJECT_USER, p->paths.etc,
			strerror(-r));
	/*
	 * The routes are agentd's: kept as its guard has them, not taken away by this run;
	 * so are ocsb-inject's upstream ports and the nameservers agentd read.
	 */
	r = netlock_guard_routes(s);
	if (r < 0) {
		log_err("reading ocsb-agentd's routes from table inet " NETLOCK_GUARD_TABLE ": %s",
			strerror(-r));
		return -1;
	}
	return 0;
}

/* /etc/ocsb/egress.conf into p->egress: 0, or -1 (said). */
static int net_egress_load(struct prov *p)
{
	char path[4096], err[1024];
	int r;

	if (p->egress_loaded)
		return 0;
	if (egress_conf_path(p, path, sizeof(path)) < 0)
		return -1;
	/* The shipped defaults stand in for a file not written yet, under its future name. */
	r = egress_load(&p->egress, &p->paths, p->have_owner ? p->owner.home : NULL,
		p->have_owner ? p->owner.uid : (uid_t)-1, err, sizeof(err));
	if (r == -ENOENT) {
		const struct buf *first = NULL;

		egress_free(&p->egress);
		memset(&p->egress, 0, sizeof(p->egress));
		/* --remove needs only the settings: the template, no scan of the projects. */
		if (p->mode != PROV_REMOVE && net_first_rules(p, &first) < 0)
			return -1;
		r = egress_parse_buf(&p->egress, first ? first->data : egress_defaults,
			first ? first->len : strlen(egress_defaults), path, err, sizeof(err));
	}
	if (r < 0) {
		log_err("%s", err);
		return -1;
	}
	p->egress_loaded = 1;
	return 0;
}

int net_preflight(struct prov *p)
{
	char err[1024];
	struct buf conf = {0};
	int r;

	if (proxy_init(&p->proxy, &p->paths, p->cfg.proxy_port) < 0 || net_egress_load(p) < 0)
		return -1;
	if (access(p->proxy.squid, X_OK) < 0) {
		log_err("%s not found: install the egress proxy (apt-get install squid)",
			p->proxy.squid);
		return -1;
	}
	if (access("/usr/sbin/nft", X_OK) < 0)
		log_debug("nft(8) not installed: fine, ocsb talks to nftables directly");
	if (!getpwnam(PROXY_USER)) {
		log_err("user '%s' missing: reinstall squid (apt-get install --reinstall squid)",
			PROXY_USER);
		return -1;
	}
	/*
	 * A configuration squid refuses must be found before anything changes. One that
	 * equals the installed file passed this check when it was written: squid's parse
	 * costs a few hundred milliseconds, so a no-change run skips it.
	 */
	if (proxy_render(&p->proxy, &p->egress, &conf) < 0)
		return -1;
	r = 0;
	if (fo_same(p->proxy.conf, conf.data, conf.len, 0644, 0, 0) != 1)
		r = proxy_check_text(&p->proxy, conf.data, err, sizeof(err));
	buf_free(&conf);
	if (r < 0) {
		log_err("%s", err);
		return -1;
	}
	return 0;
}

static unsigned count_allow(const struct buf *b)
{
	unsigned n = 0;

	for (const char *l = b->data; l && l < b->data + b->len; l = strchr(l, '\n') + 1) {
		n += !strncmp(l, "allow ", 6);
		if (!strchr(l, '\n'))
			break;
	}
	return n;
}

/*
 * An existing install keeps its policy (its file is never rewritten): under the
 * blocklist, one line says where to switch. The line number is the main file's `policy`
 * line, when it has one.
 */
static void policy_note(struct prov *p, const char *path)
{
	char *data = NULL, at[32] = "";
	size_t len = 0;
	unsigned line = 1;

	if (p->egress.policy != EGRESS_BLOCKLIST || p->egress.off)
		return;
	if (fo_read(path, 1024 * 1024, &data, &len) == 0) {
		for (const char *l = data; *l; line++) {
			if (!strncmp(l + strspn(l, " \t"), "policy", 6)) {
				snprintf(at, sizeof(at), " line %u", line);
				break;
			}
			if (!strchr(l, '\n'))
				break;
			l = strchr(l, '\n') + 1;
		}
	}
	free(data);
	printf("ocsb-provision: egress policy blocklist (any public host passes, names are "
	       "resolved): for an allowlist, set `policy allowlist` in %s%s%s with allow lines "
	       "for what the agent needs, then run ocsb-provision again\n",
		path, at[0] ? " at" : "", at);
}

static int ensure_egress_conf(struct prov *p)
{
	const struct buf *first = NULL;
	char path[4096];
	struct stat st;

	if (egress_conf_path(p, path, sizeof(path)) < 0)
		return -1;
	if (lstat(path, &st) == 0) {
		policy_note(p, path);
		return 0;
	}
	if (net_first_rules(p, &first) < 0)
		return -1;
	if (!prov_change(p,
		    "write %s (policy allowlist: %u allow lines for what the projects "
		    "use, each with its reason)",
		    path, count_allow(first)))
		return 0;
	if (fo_write(path, first->data, first->len, 0644, 0, 0) < 0) {
		log_err("%s: cannot write", path);
		return -1;
	}
	prov_done(p);
	/* Read as a later run reads it: with the drop-ins and the owner's layer after it. */
	egress_free(&p->egress);
	p->egress_loaded = 0;
	return net_egress_load(p);
}

static int ensure_netlock(struct prov *p)
{
	struct netlock_spec s;
	char err[1024], uids[512];
	int r;

	if (!p->agent_exists) {
		prov_change(p,
			"install the nftables table inet " NETLOCK_TABLE
			" (the agent's sockets reach only the proxy)");
		return 0;
	}
	if (netlock_spec_of(p, &s, NULL) < 0)
		return -1;
	r = netlock_verify(&s, err, sizeof(err));
	if (r < 0) {
		log_err("%s", err);
		return -1;
	}
	if (r == 0)
		return 0;
	netlock_uids_text(&s, uids, sizeof(uids));
	if (!prov_change(p, "install the nftables table inet " NETLOCK_TABLE " for uids %s (%s)",
		    uids, err))
		return 0;
	if (netlock_apply(&s, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return -1;
	}
	/* Read it back: what the kernel holds is what counts. */
	if (netlock_verify(&s, err, sizeof(err)) != 0) {
		log_err("the table was installed but does not read back as built: %s", err);
		return -1;
	}
	prov_done(p);
	return 0;
}

/* 0 when `systemctl VERB --quiet unit` says yes. */
static int systemctl_yes(const char *verb, const char *unit)
{
	const char *argv[] = {"/usr/bin/systemctl", verb, "--quiet", unit, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 20000};
	struct spawn_result res;
	int r = spawn_run(argv, &o, &res);

	if (r < 0)
		return r;
	r = res.status == 0 ? 0 : -1;
	spawn_result_free(&res);
	return r;
}

/*
 * Debian's squid package enables squid.service, which listens on *:3128: ocsb's default
 * proxy port, and the port the netlock lets the agent reach whoever listens on it. A
 * squid with Debian's rules (localhost allowed) there would be the agent's way around
 * ocsb's, and ocsb's own squid could not listen. ocsb needs only the squid binary: where
 * that service holds the port, or would take it at the next boot (the default port),
 * it is stopped and disabled. Another holder is an error naming the fix.
 */
/*
 * What squid.service was when ocsb stopped it ("enabled active", either word or neither):
 * the removal of the last agent puts it back (issue 28, item 8). Root's, in <varlib>/ocsb.
 */
#define SQUID_FOUND "squid.service.found"

static int squid_found_path(struct prov *p, char *out, size_t n)
{
	return path_join(out, n, p->paths.varlib, "ocsb/" SQUID_FOUND);
}

static int ensure_no_squid_service(struct prov *p)
{
	const char *disable[] = {"/usr/bin/systemctl", "disable", "--now", "squid.service", NULL};
	char found[4096];
	struct stat st;
	int held, on, en = 0, act = 0;

	held = procs_port_holder(p->cfg.proxy_port, proxy_pid(&p->proxy)) == -EADDRINUSE;
	on = stat("/run/systemd/system", &st) == 0 &&
		((en = systemctl_yes("is-enabled", "squid.service") == 0) |
			(act = systemctl_yes("is-active", "squid.service") == 0));
	if (on && (held || p->cfg.proxy_port == SQUID_DEFAULT_PORT)) {
		struct buf b = {0};
		int r;

		if (!prov_change(p,
			    "stop and disable squid.service (Debian's own squid, on 127.0.0.1:%u, "
			    "the agent's proxy port; ocsb runs its own squid)",
			    p->cfg.proxy_port))
			return 0;
		/* The first state found is the one to restore: a record is never replaced. */
		if (squid_found_path(p, found, sizeof(found)) < 0 || state_root(p) < 0)
			return -1;
		buf_printf(&b, "%s%s%s\n", en ? "enabled" : "", en && act ? " " : "",
			act ? "active" : "");
		r = lstat(found, &st) == 0 ? 0 : fo_write(found, b.data, b.len, 0644, 0, 0);
		buf_free(&b);
		if (r < 0) {
			log_err("%s: %s", found, strerror(-r));
			return -1;
		}
		if (prov_exec(p, disable, NULL) < 0)
			return -1;
		for (int i = 0; i < 100 &&
			procs_port_holder(p->cfg.proxy_port, proxy_pid(&p->proxy)) == -EADDRINUSE;
			i++)
			usleep(50000);
		prov_done(p);
		held = procs_port_holder(p->cfg.proxy_port, proxy_pid(&p->proxy)) == -EADDRINUSE;
	}
	if (held && p->mode == PROV_APPLY) {
		log_err("127.0.0.1:%u, the agent's proxy port, is held by another process, not "
			"ocsb's squid: stop it, or set another proxy-port in %s/ocsb/ocsb.conf",
			p->cfg.proxy_port, p->paths.etc);
		return -1;
	}
	return 0;
}

static int ensure_proxy(struct prov *p)
{
	struct passwd *pw = getpwnam(PROXY_USER);
	struct buf conf = {0};
	char err[1024];
	int dfd, same, pid, r = -1;

	if (p->egress.off) {
		if (proxy_pid(&p->proxy) > 0 &&
			prov_change(p, "stop the egress proxy (egress off)")) {
			if (proxy_stop(&p->proxy, 3000) < 0)
				return -1;
			prov_done(p);
		}
		return 0;
	}
	if (ensure_no_squid_service(p) < 0)
		return -1;
	if (proxy_render(&p->proxy, &p->egress, &conf) < 0)
		return -1;
	same = fo_same(p->proxy.conf, conf.data, conf.len, 0644, 0, 0) == 1;
	if (!same && prov_change(p, "write %s", p->proxy.conf)) {
		if (state_root(p) < 0)
			goto out;
		dfd = fo_mkdir_p(AT_FDCWD, p->proxy.dir, 0755, 0, 0);
		if (dfd < 0) {
			log_err("%s: %s", p->proxy.dir, strerror(-dfd));
			goto out;
		}
		r = fo_write_at(dfd, "squid.conf", conf.data, conf.len, 0644, 0, 0);
		close(dfd);
		if (r < 0) {
			log_err("%s: %s", p->proxy.conf, strerror(-r));
			goto out;
		}
		/* squid writes its pid and logs as its own user, into a directory of its own. */
		dfd = fo_mkdir_p(AT_FDCWD, p->proxy.state, 0750, pw->pw_uid, pw->pw_gid);
		if (dfd < 0) {
			log_err("%s: %s", p->proxy.state, strerror(-dfd));
			r = -1;
			goto out;
		}
		close(dfd);
		prov_done(p);
	}
	pid = proxy_pid(&p->proxy);
	r = 0;
	/*
	 * A running supervisor starts its own squid (ocsb-warden runs it as proxy, with the
	 * supervisor's rules): one that is starting, or restarting squid, has no pid file
	 * for a moment, and a second squid here would hold the port against it.
	 */
	if (pid < 0 && p->agent_exists && prov_agentd_running(p))
		goto out;
	if (pid < 0) {
		/* Once provisioned, ocsb-agentd runs the proxy: its absence is the news. */
		if (!prov_change(p, "start the egress proxy (squid on 127.0.0.1:%u)%s",
			    p->cfg.proxy_port,
			    p->mode == PROV_CHECK && p->agent_exists && !prov_agentd_running(p)
				    ? ": ocsb-agentd is not running (it runs the proxy; start it: "
				      "systemctl start ocsb-agentd, or sudo ocsb-warden "
				      "--foreground)"
				    : ""))
			goto out;
		if (proxy_start(&p->proxy, 5000, err, sizeof(err)) < 0) {
			log_err("%s", err);
			r = -1;
			goto out;
		}
		prov_done(p);
	} else if (!same && p->mode == PROV_APPLY) {
		/* Counted with the configuration change above. */
		if (proxy_reconfigure(&p->proxy) < 0) {
			log_err("reloading squid (pid %d) failed", pid);
			r = -1;
		}
	}
out:
	buf_free(&conf);
	return r;
}

int net_ensure(struct prov *p)
{
	if (ensure_egress_conf(p) < 0 || ensure_netlock(p) < 0 || ensure_proxy(p) < 0)
		return -1;
	return 0;
}

/*
 * One agent of several goes: the table stays for the others, without its uid. 0, or -1;
 * 1 when no other agent's account is left, so the table goes too.
 */
static int netlock_without(struct prov *p)
{
	struct netlock_spec s;
	char err[1024], uids[512];
	int r;

	/* The others' table: this configuration's egress rules, as a run for them reads them. */
	if (net_egress_load(p) < 0 || netlock_spec_of(p, &s, p->cfg.agent) < 0)
		return -1;
	if (s.uid == 0)
		return 1;
	r = netlock_verify(&s, err, sizeof(err));
	if (r < 0) {
		log_err("%s", err);
		return -1;
	}
	netlock_uids_text(&s, uids, sizeof(uids));
	if (r == 1) {
		prov_change(p, "install the nftables table inet " NETLOCK_TABLE
			       " for uids %s, without %s's (%s)",
			uids, p->cfg.agent, err);
		if (netlock_apply(&s, err, sizeof(err)) < 0 ||
			netlock_verify(&s, err, sizeof(err)) != 0) {
			log_err("%s", err);
			return -1;
		}
		prov_done(p);
	}
	return 0;
}

/* The last agent gone: squid.service as ocsb found it, enabled and started again or not. */
static int squid_service_restore(struct prov *p)
{
	const char *enable[] = {"/usr/bin/systemctl", "enable", "squid.service", NULL};
	const char *start[] = {"/usr/bin/systemctl", "start", "squid.service", NULL};
	char path[4096], *was = NULL;
	int r;

	if (squid_found_path(p, path, sizeof(path)) < 0)
		return -1;
	r = fo_read(path, 64, &was, NULL);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	was[strcspn(was, "\n")] = '\0';
	if (prov_change(p, "put squid.service back as ocsb found it (%s)",
		    was[0] ? was : "disabled, inactive")) {
		if ((strstr(was, "enabled") && prov_exec(p, enable, NULL) < 0) ||
			(strstr(was, "active") && prov_exec(p, start, NULL) < 0)) {
			free(was);
			return -1;
		}
		r = fo_unlink(path);
		if (r < 0)
			log_err("%s: %s", path, strerror(-r));
		prov_done(p);
	}
	free(was);
	return r < 0 ? -1 : 0;
}

int net_remove(struct prov *p)
{
	char err[1024], path[4096];
	int r, e;

	/*
	 * The table, the proxy and the egress rules are the machine's, not one agent's:
	 * removing one agent while others remain must not leave them without their netlock.
	 */
	r = p->others ? netlock_without(p) : 1;
	if (r < 0)
		return -1;
	if (r == 0) {
		printf("kept the nftables table inet " NETLOCK_TABLE
		       ", the egress proxy and its rules: %d other agent%s remain%s\n",
			p->others, p->others == 1 ? "" : "s", p->others == 1 ? "s" : "");
		return 0;
	}
	e = netlock_exists();
	if (e == 1) {
		prov_change(p, "remove the nftables table inet " NETLOCK_TABLE);
		if (netlock_remove(err, sizeof(err)) < 0) {
			log_err("%s", err);
			return -1;
		}
		prov_done(p);
	}
	if (p->others)
		return 0; /* their state stays; only the table had nobody left to lock */
	if (proxy_init(&p->proxy, &p->paths, p->cfg.proxy_port) < 0)
		return -1;
	if (proxy_pid(&p->proxy) > 0) {
		prov_change(p, "stop the egress proxy");
		if (proxy_stop(&p->proxy, 3000) < 0) {
			log_err("squid did not stop");
			return -1;
		}
		prov_done(p);
	}
	if (squid_service_restore(p) < 0)
		return -1;
	if (!p->purge)
		return 0;
	if (access(p->proxy.dir, F_OK) == 0) {
		prov_change(p, "remove %s (squid configuration and logs)", p->proxy.dir);
		r = fo_rmtree(p->proxy.dir);
		if (r < 0) {
			log_err("%s: %s", p->proxy.dir, strerror(-r));
			return -1;
		}
	}
	if (egress_conf_path(p, path, sizeof(path)) == 0 && access(path, F_OK) == 0) {
		prov_change(p, "remove %s", path);
		r = fo_unlink(path);
		if (r < 0) {
			log_err("%s: %s", path, strerror(-r));
			return -1;
		}
	}
	return 0;
}
