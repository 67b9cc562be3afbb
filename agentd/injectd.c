/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <signal.h>
#include <unistd.h>

#include "agentd.h"
#include "fileops.h"
#include "log.h"
#include "sockdiag.h"
#include "testhook.h"
#include "../inject/inject.h"
#include "../secrets/secrets.h"

#include <sodium.h>

/*
 * ocsb-inject under the supervisor (issue 17): started as its own account when some
 * secret is injected, stopped when none is, restarted with backoff like every child. The
 * routes and keys go over a socketpair made for each incarnation (fd 4 in the injector):
 * never argv, the environment or a file. A push sends the new set to the running
 * injector; connections in flight keep the keys they started with (inject/daemon.c).
 * The route ports are agentd's: bound once at start and handed to each incarnation
 * (inject/listen.c), so no other account can take one while the injector is down.
 * Everything here is non-blocking: the hand-over is a few KiB into an empty socket.
 */

/* config.c refuses an agent-ports range over the route ports by these numbers. */
_Static_assert(OCSB_ROUTE_PORT_LO == INJ_PORT_BASE &&
		OCSB_ROUTE_PORT_HI == INJ_PORT_BASE + INJ_MAX_ROUTES - 1,
	"config.h's route ports are inject.h's");

/* OpenCode's provider settings for one project, in the agent's root-owned run directory. */
#define OC_CONFIG_FMT "opencode-inject.%s.json"

/* What one project's OpenCode is started with (injectd_child_env). */
struct proj_env {
	char oc[4420]; /* "OPENCODE_CONFIG=..." */
	char count[48]; /* "GIT_CONFIG_COUNT=N" */
	char key[INJ_MAX_ROUTES][352]; /* "GIT_CONFIG_KEY_i=url.http://127.0.0.1:PORT/.insteadOf" */
	char val[INJ_MAX_ROUTES][576]; /* "GIT_CONFIG_VALUE_i=https://HOST/" */
	char *env[INJECT_ENV_MAX + 1];
	unsigned char sig[crypto_generichash_BYTES]; /* of what it would be started with now */
	unsigned char started[crypto_generichash_BYTES]; /* of what it was started with */
};

struct injectd {
	int sock; /* owned: agentd's end of the hand-over socket, -1 */
	int lfd[INJ_MAX_ROUTES]; /* owned: listener of INJ_PORT_BASE + i, -1 when in use */
	struct src src;
	struct inj_route r[INJ_MAX_ROUTES]; /* without keys */
	char provider[INJ_MAX_ROUTES][16]; /* the built-in provider of route i, "" generic */
	size_t n;
	char bin[4096];
	struct proj_env pe[AGENTD_MAX_PROJECTS]; /* as d->oc */
	char ca_file[4096]; /* test hook: a CA file trusted instead of the system's */
	char rbuf[4096];
	size_t rlen;
	pid_t supervisor; /* agentd's pid: the injector checks its parent is still it */
	struct inj_usage_row usage[INJ_USAGE_MAX_ROWS];
	size_t n_usage;
	int usage_loaded;
};

static const char *project_of(struct agentd *d, size_t i)
{
	return strchr(d->oc[i].name, '/') + 1;
}

/*
 * The injected entries with a route, route i on INJ_PORT_BASE + i: every project's
 * overrides get their own, the first project's set first (secrets_routed). quiet: the
 * same computation again, already logged.
 */
static size_t routed(struct agentd *d, const struct secret_set *s, size_t idx[], int quiet)
{
	const char *pr[AGENTD_MAX_PROJECTS];
	size_t np = 0, n;

	for (; np < d->n_oc && np < AGENTD_MAX_PROJECTS; np++)
		pr[np] = project_of(d, np);
	n = secrets_routed(s, pr, np, idx, INJ_MAX_ROUTES);
	if (n > INJ_MAX_ROUTES && !quiet)
		log_err("inject: more than %d injected secrets across the projects: the rest are "
			"not routed",
			INJ_MAX_ROUTES);
	return n > INJ_MAX_ROUTES ? INJ_MAX_ROUTES : n;
}

/* A project's own key is counted apart from the global one: NAME@project in `ocsb usage`. */
static void route_name(char name[65], const struct secret *e)
{
	size_t a = strlen(e->name), b = strlen(e->scope);

	if (a > 64)
		a = 64;
	memcpy(name, e->name, a);
	name[a] = 0;
	if (b && a + 1 + b <= 64) {
		name[a] = '@';
		memcpy(name + a + 1, e->scope, b + 1);
	}
}

/* The routes of the injected secrets in s, keys copied only when with_keys. */
static int routes_of(struct agentd *d, const struct secret_set *s, int with_keys,
	struct inj_conf *c, char provider[][16], int quiet)
{
	size_t idx[INJ_MAX_ROUTES], n = routed(d, s, idx, quiet);
	struct injectd *x = d->inject;
	char err[256];

	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < n; i++) {
		const struct secret *e = &s->e[idx[i]];
		struct inj_route *r = &c->r[c->n];

		/* A port agentd could not hold (logged at start): never advertised. */
		if (!x || x->lfd[i] < 0) {
			if (!quiet)
				log_err("inject: %s: 127.0.0.1:%u is not agentd's (not routed)",
					e->name, INJ_PORT_BASE + (unsigned)i);
			continue;
		}
		if (inj_route_spec(r, e->route, err, sizeof(err)) < 0) {
			if (!quiet)
				log_err("inject: %s: %s (not routed)", e->name, err);
			memset(r, 0, sizeof(*r));
			continue;
		}
		route_name(r->name, e);
		/* The position in the list, not in c: a bad route never moves the others. */
		r->port = INJ_PORT_BASE + (unsigned)i;
		snprintf(provider[c->n], 16, "%s",
			inj_provider_find(e->route) ? e->route : "");
		if (with_keys && e->value) {
			r->key = inj_key_dup(e->value, strlen(e->value));
			if (!r->key) {
				inj_conf_free(c);
				return -1;
			}
		}
		c->n++;
	}
	return 0;
}

/* The routes project uses (its effective set's injected entries): indices into c. */
static size_t project_routes(struct agentd *d, const struct secret_set *s,
	const struct inj_conf *c, const char *project, size_t out[INJ_MAX_ROUTES])
{
	size_t idx[INJ_MAX_ROUTES], n = routed(d, s, idx, 1), eff[SECRETS_MAX_COUNT], k = 0;
	size_t ne = secrets_effective(s, project, eff);

	for (size_t i = 0; i < ne; i++)
		for (size_t pos = 0; pos < n; pos++) {
			if (idx[pos] != eff[i])
				continue;
			for (size_t j = 0; j < c->n && k < INJ_MAX_ROUTES; j++)
				if (c->r[j].port == INJ_PORT_BASE + pos)
					out[k++] = j;
		}
	return k;
}

struct git_pair {
	char base[300], url[540];
};

/*
 * git over HTTPS to a generic route's host goes to the route: url.<route>.insteadOf.
 * Given as git's GIT_CONFIG_COUNT/KEY/VALUE environment (git >= 2.31), not written into
 * the agent's ~/.gitconfig: root never writes in the agent's home, and the agent's own
 * config stays its own. Pointing it elsewhere only loses the route: the key never
 * leaves the injector. Built-in providers are APIs, not git hosts: none for them.
 */
static size_t git_pairs(const struct inj_conf *c, char provider[][16], const size_t use[],
	size_t nu, struct git_pair out[INJ_MAX_ROUTES])
{
	size_t n = 0;

	for (size_t i = 0; i < nu; i++) {
		const struct inj_route *r = &c->r[use[i]];

		if (provider[use[i]][0] ||
			inj_git_insteadof(r, r->port, out[n].base, sizeof(out[n].base), out[n].url,
				sizeof(out[n].url)) < 0)
			continue;
		/* Quoted in the env file: a route with a quote gets none. */
		if (!strchr(out[n].base, '\'') && !strchr(out[n].url, '\''))
			n++;
	}
	return n;
}

int injectd_env_lines(struct agentd *d, const struct secret_set *s, const char *project,
	struct buf *out)
{
	char provider[INJ_MAX_ROUTES][16];
	struct git_pair g[INJ_MAX_ROUTES];
	struct inj_conf c;
	size_t use[INJ_MAX_ROUTES], nu, ng;
	int r = 0;

	if (routes_of(d, s, 0, &c, provider, 1) < 0)
		return -ENOMEM;
	nu = project_routes(d, s, &c, project, use);
	ng = git_pairs(&c, provider, use, nu, g);
	if (ng)
		r |= buf_printf(out, "export GIT_CONFIG_COUNT=%zu\n", ng);
	for (size_t i = 0; i < ng; i++)
		r |= buf_printf(out, "export GIT_CONFIG_KEY_%zu='url.%s.insteadOf'\n"
				     "export GIT_CONFIG_VALUE_%zu='%s'\n",
			i, g[i].base, i, g[i].url);
	inj_conf_free(&c);
	return r < 0 ? -ENOMEM : 0;
}

/*
 * One project's OpenCode: the built-in routes as the providers' base URLs in a file root
 * writes in the agent's root-owned run directory (no key), and git's insteadOf for the
 * generic ones. The signature of both tells a push whether the instance must restart.
 */
static void project_env(struct agentd *d, struct injectd *x, const struct secret_set *s,
	const struct inj_conf *c, size_t pi)
{
	struct proj_env *pe = &x->pe[pi];
	const char *project = project_of(d, pi);
	struct git_pair g[INJ_MAX_ROUTES];
	size_t use[INJ_MAX_ROUTES], nu = project_routes(d, s, c, project, use), ne = 0, ng;
	crypto_generichash_state st;
	struct buf b = {0};
	char dir[4096], name[300];
	int any = 0;

	buf_puts(&b, "{\"provider\":{");
	for (size_t i = 0; i < nu; i++) {
		const struct inj_route *r = &c->r[use[i]];

		if (!x->provider[use[i]][0])
			continue;
		buf_printf(&b, "%s\"%s\":{\"options\":{\"baseURL\":\"http://127.0.0.1:%u%s\"}}",
			any ? "," : "", x->provider[use[i]], r->port, r->prefix);
		any = 1;
	}
	buf_puts(&b, "}}\n");
	crypto_generichash_init(&st, NULL, 0, sizeof(pe->sig));
	if (any) {
		int dfd = agent_run_dir(d, dir, sizeof(dir), "inject"), w = -1;

		snprintf(name, sizeof(name), OC_CONFIG_FMT, project);
		if (dfd >= 0) {
			w = fo_write_at_nosync(dfd, name, b.data, b.len, 0644, 0, 0);
			close(dfd);
			if (w < 0)
				log_err("inject: %s/%s: %s", dir, name, strerror(-w));
		}
		if (w == 0) {
			snprintf(pe->oc, sizeof(pe->oc), "OPENCODE_CONFIG=%s/%s", dir, name);
			pe->env[ne++] = pe->oc;
			crypto_generichash_update(&st, (unsigned char *)b.data, b.len);
		}
	}
	buf_free(&b);
	ng = git_pairs(c, x->provider, use, nu, g);
	if (ng) {
		snprintf(pe->count, sizeof(pe->count), "GIT_CONFIG_COUNT=%zu", ng);
		pe->env[ne++] = pe->count;
	}
	for (size_t i = 0; i < ng; i++) {
		snprintf(pe->key[i], sizeof(pe->key[i]), "GIT_CONFIG_KEY_%u=url.%.299s.insteadOf",
			(unsigned)i, g[i].base);
		snprintf(pe->val[i], sizeof(pe->val[i]), "GIT_CONFIG_VALUE_%u=%.539s", (unsigned)i,
			g[i].url);
		pe->env[ne++] = pe->key[i];
		pe->env[ne++] = pe->val[i];
	}
	pe->env[ne] = NULL;
	for (size_t i = 0; i < ne; i++)
		crypto_generichash_update(
			&st, (unsigned char *)pe->env[i], strlen(pe->env[i]) + 1);
	crypto_generichash_final(&st, pe->sig, sizeof(pe->sig));
}

static struct proj_env *proj_find(struct agentd *d, const char *project)
{
	struct injectd *x = d->inject;

	for (size_t i = 0; x && i < d->n_oc && i < AGENTD_MAX_PROJECTS; i++)
		if (!strcmp(project_of(d, i), project))
			return &x->pe[i];
	return NULL;
}

char *const *injectd_child_env(struct agentd *d, const char *project)
{
	struct proj_env *pe = proj_find(d, project);

	if (!pe)
		return NULL;
	memcpy(pe->started, pe->sig, sizeof(pe->sig));
	return pe->env[0] ? pe->env : NULL;
}

int injectd_changed(struct agentd *d, const char *project)
{
	struct proj_env *pe = proj_find(d, project);

	return pe && sodium_memcmp(pe->started, pe->sig, sizeof(pe->sig)) != 0;
}

void injectd_netlock(struct agentd *d)
{
	struct injectd *x = d->inject;
	size_t n = x ? x->n : 0;

	d->nl.n_inject = d->nl.n_uports = 0;
	for (size_t i = 0; i < n && i < NETLOCK_MAX_INJECT; i++) {
		d->nl.inject_ports[d->nl.n_inject++] = x->r[i].port;
		d->nl.inject_uports[d->nl.n_uports++] = x->r[i].uport;
	}
}

size_t injectd_ports(struct agentd *d, unsigned *ports)
{
	struct injectd *x = d->inject;
	size_t n = 0;

	/* Route i is on INJ_PORT_BASE + its position: x->r is in ascending port order. */
	for (size_t i = 0; x && i < x->n && i < NETLOCK_MAX_INJECT; i++)
		ports[n++] = x->r[i].port;
	return n;
}

/* The netlock with exactly the routes' ports; fail closed if it cannot be applied. */
static void routes_netlock(struct agentd *d, struct injectd *x)
{
	char err[512];

	injectd_netlock(d);
	if (netlock_verify(&d->nl, err, sizeof(err)) == 0)
		return;
	if (netlock_guard_apply(&d->nl, d->guard_sock, err, sizeof(err)) < 0)
		log_err("netlock guard: %s", err);
	if (netlock_apply(&d->nl, err, sizeof(err)) < 0 ||
		netlock_verify(&d->nl, err, sizeof(err)) != 0)
		netwatch_enforce(d, "inject: routes changed");
	else
		log_info("inject: netlock has %zu route port%s", x->n, x->n == 1 ? "" : "s");
}

static void sock_close(struct agentd *d, struct injectd *x)
{
	if (x->sock < 0)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, x->sock, NULL);
	close(x->sock);
	x->sock = -1;
	x->rlen = 0;
}

/* Routes and keys of s to the injector: "ocsb-inject LEN\n" and the hand-over text. */
static int handover(struct agentd *d, struct injectd *x, const struct secret_set *s)
{
	struct inj_conf c;
	struct buf text = {.wipe = 1};
	char head[64], provider[INJ_MAX_ROUTES][16];
	int r = -1;

	if (routes_of(d, s, 1, &c, provider, 1) < 0)
		return -1;
	/* The injector serves this account's connections alone (its second wall). */
	c.peer = d->agent.uid;
	c.have_peer = 1;
	if (x->ca_file[0]) {
		size_t len = 0;
		if (fo_read(x->ca_file, INJ_CA_MAX, &c.ca_pem, &len) < 0)
			log_err("inject: test CA %s unreadable", x->ca_file);
		c.ca_len = len;
	}
	if (inj_conf_render(&c, &text) == 0) {
		int hl = snprintf(head, sizeof(head), "ocsb-inject %zu\n", text.len);
		struct iovec iov[2] = {{head, (size_t)hl}, {text.data, text.len}};
		ssize_t w = writev(x->sock, iov, 2);
		r = w == (ssize_t)(hl + (int)text.len) ? 0 : -1;
		if (r < 0)
			log_err("inject: hand-over not written whole (%s)",
				w < 0 ? strerror(errno) : "short write");
	}
	if (text.data)
		explicit_bzero(text.data, text.cap);
	buf_free(&text);
	inj_conf_free(&c);
	return r;
}

int inject_plan(struct agentd *d, struct child *c, struct child_plan *p)
{
	struct injectd *x = d->inject;
	struct secret_set *s = NULL;
	int sv[2], r;

	(void)c;
	memset(p, 0, sizeof(*p));
	p->pass_fd = -1;
	for (int i = 0; i < CG_NCTRL; i++)
		p->cg_fds[i] = -1;
	if (secretd_load(d, &s) < 0)
		return -EIO;
	sock_close(d, x);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		secrets_set_free(s);
		return -errno;
	}
	x->sock = sv[0];
	p->pass_fd = sv[1];
	fcntl(x->sock, F_SETFL, O_NONBLOCK);
	r = agentd_watch(d, x->sock, &x->src, SRC_INJECT, x, EPOLLIN);
	/* Buffered in the socket until the injector reads it: the listeners, then the routes. */
	if (r == 0 && inj_send_listeners(x->sock, x->lfd) < 0) {
		log_err("inject: route listeners not handed over: %s", strerror(errno));
		r = -1;
	}
	if (r == 0)
		r = handover(d, x, s);
	secrets_set_free(s);
	p->argv[0] = x->bin;
	p->argv[1] = "--fd";
	p->argv[2] = "4";
	p->argv[3] = NULL;
	p->env[0] = NULL; /* nothing of agentd's environment */
	if (r == 0)
		r = spawn_cred_init(&p->cred, d->inject_uid, d->inject_gid, INJ_USER);
	if (r < 0) {
		sock_close(d, x);
		child_plan_free(p);
		return r == -1 ? -EIO : r;
	}
	x->supervisor = getpid();
	return 0;
}

int inject_exec(struct agentd *d, struct child *c, const struct child_plan *p)
{
	struct rlimit core = {0, 0};
	int r;

	(void)c;
	/* No core file of a process that holds keys, from before the drop on. */
	setrlimit(RLIMIT_CORE, &core);
	r = spawn_child_drop(&p->cred);
	if (r < 0)
		return r;
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != ((struct injectd *)d->inject)->supervisor)
		return -ESRCH;
	umask(077);
	if (chdir("/") < 0)
		return -errno;
	execve(p->argv[0], p->argv, p->env);
	return -errno;
}

/* One request's usage: "ROUTE\tDAY\tSTATUS\tREQ\tRESP\tIN\tOUT" (inject/daemon.c). */
static void injectd_usage(struct agentd *d, const char *line)
{
	struct injectd *x = d->inject;
	char path[4096], dir[4096], *old = NULL;
	struct buf b = {0};
	size_t len;
	int dfd;

	if (path_join(path, sizeof(path), d->paths.varlib, INJ_USAGE_REL) < 0)
		return;
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = 0;
	/* What earlier runs summed, once. */
	if (!x->usage_loaded && fo_read(path, 1 << 20, &old, &len) == 0 &&
		inj_usage_parse(old, x->usage, &x->n_usage, INJ_USAGE_MAX_ROWS) < 0)
		x->n_usage = 0;
	free(old);
	x->usage_loaded = 1;
	if (inj_usage_add(x->usage, &x->n_usage, INJ_USAGE_MAX_ROWS, line) < 0) {
		log_warn("inject: malformed usage line dropped");
		return;
	}
	/*
	 * Counts only, no key nor request content; but the routes' names are the owner's
	 * secrets' names: the owner's to read (`ocsb usage`), nobody else's. The directory
	 * is root's, so the owner cannot put anything in its place.
	 */
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd >= 0 && inj_usage_render(x->usage, x->n_usage, &b) == 0 &&
		fo_write_at_nosync(dfd, strrchr(path, '/') + 1, b.data, b.len, 0400, d->owner.uid,
			d->owner.gid) < 0)
		log_warn("inject: %s not written", path);
	if (dfd >= 0)
		close(dfd);
	buf_free(&b);
}

/* Lines from the injector: its state and one usage line per request. */
void injectd_event(struct agentd *d, uint32_t events)
{
	struct injectd *x = d->inject;
	ssize_t n;
	char *nl;

	if (!x || x->sock < 0)
		return;
	n = read(x->sock, x->rbuf + x->rlen, sizeof(x->rbuf) - 1 - x->rlen);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			sock_close(d, x); /* its exit (pidfd) schedules the restart */
		return;
	}
	x->rlen += (size_t)n;
	x->rbuf[x->rlen] = 0;
	while ((nl = memchr(x->rbuf, '\n', x->rlen))) {
		*nl = 0;
		if (!strncmp(x->rbuf, "usage\t", 6))
			injectd_usage(d, x->rbuf + 6);
		else if (!strncmp(x->rbuf, "error\t", 6))
			log_err("inject: %s", x->rbuf + 6);
		else
			log_info("inject: %s", x->rbuf);
		x->rlen -= (size_t)(nl + 1 - x->rbuf);
		memmove(x->rbuf, nl + 1, x->rlen);
	}
	/* A line longer than the buffer is not the injector's: dropped. */
	if (x->rlen == sizeof(x->rbuf) - 1)
		x->rlen = 0;
	(void)events;
}

/* The routes of s become the running ones: netlock, OpenCode's settings, the injector. */
void injectd_update(struct agentd *d, const struct secret_set *s)
{
	struct injectd *x = d->inject;
	struct inj_conf c;

	if (!x || routes_of(d, s, 0, &c, x->provider, 0) < 0)
		return;
	/* Never as root: without its account or binary nothing is routed (logged at start). */
	if (!d->inject_uid || !x->bin[0])
		c.n = 0;
	memcpy(x->r, c.r, sizeof(x->r));
	x->n = c.n;
	routes_netlock(d, x);
	for (size_t i = 0; i < d->n_oc && i < AGENTD_MAX_PROJECTS; i++)
		project_env(d, x, s, &c, i);
	if (!x->n) {
		/* SIGTERM now, SIGKILL by the child's timer: the loop does not wait. */
		child_stop_soon(d, &d->inject_child);
		return;
	}
	if (d->inject_child.state == CH_STOPPING) {
		/* Stopping (the routes had gone): it starts again, with these, once it is gone. */
		child_restart(d, &d->inject_child);
		return;
	}
	if (d->inject_child.pid > 0 && x->sock >= 0) {
		/* In place: new connections get the new keys. */
		if (handover(d, x, s) < 0)
			child_restart(d, &d->inject_child);
		return;
	}
	child_start(d, &d->inject_child);
}

/* The injector beside agentd's own binary, root's and not writable by others. */
static int find_bin(struct injectd *x)
{
	char self[4000];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct stat st;
	char *slash;

	if (n <= 0)
		return -1;
	self[n] = 0;
	slash = strrchr(self, '/');
	if (!slash)
		return -1;
	*slash = 0;
	snprintf(x->bin, sizeof(x->bin), "%s/ocsb-inject", self);
	if (stat(x->bin, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
		(st.st_mode & 022)) {
		log_err("inject: %s missing, not root's or writable by others: injected secrets "
			"are not routed",
			x->bin);
		return -1;
	}
	return 0;
}

/*
 * Every route port, bound as root before any agent process runs and held until agentd
 * exits: a route's baseURL or insteadOf then always reaches this agentd's injector (or
 * waits in the backlog while it restarts), never another account's listener.
 */
int injectd_hold_ports(struct agentd *d)
{
	struct injectd *x = calloc(1, sizeof(*x));

	if (!x)
		return -1;
	x->sock = -1;
	d->inject = x;
	for (unsigned i = 0; i < INJ_MAX_ROUTES; i++) {
		unsigned port = INJ_PORT_BASE + i;
		struct sockdiag_sock held;
		int err;

		x->lfd[i] = inj_listen(port);
		if (x->lfd[i] >= 0)
			continue;
		err = errno;
		if (sockdiag_listener(-1, port, &held) == 0)
			log_err("inject: 127.0.0.1:%u: %s, held by uid %u (`ss -ltnp 'sport = "
				":%u'` names the process): route %u is not served",
				port, strerror(err), (unsigned)held.uid, port, i);
		else
			log_err("inject: 127.0.0.1:%u: %s (`ss -tanp 'sport = :%u'` names the "
				"process): route %u is not served",
				port, strerror(err), port, i);
	}
	return 0;
}

int injectd_init(struct agentd *d)
{
	struct child *c = &d->inject_child;
	struct injectd *x = d->inject;
	struct secret_set *s = NULL;
	struct user_info u;
	const char *ca = TESTHOOK_ENV("OCSB_TEST_INJECT_CA");

	if (!x)
		return -1;
	snprintf(c->name, sizeof(c->name), "inject");
	c->plan_child = inject_plan;
	c->exec_child = inject_exec;
	c->pidfd = c->probe_fd = c->exec_fd = -1;
	c->state = CH_STOPPED;
	if (child_log_open(d, c) < 0)
		return -1;
	c->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timerfd < 0 || agentd_watch(d, c->timerfd, &c->timer_src, SRC_TIMER, c, EPOLLIN) < 0)
		return -1;
	/* Test builds only: the fake provider's CA, trusted instead of the system's. */
	if (ca)
		snprintf(x->ca_file, sizeof(x->ca_file), "%s", ca);
	if (!d->sec_sk || secretd_load(d, &s) < 0)
		return 0;
	if (user_lookup(INJ_USER, &u) < 0 || u.uid == 0) {
		log_err("inject: no account %s (run ocsb-provision): injected secrets are not "
			"routed",
			INJ_USER);
		secrets_set_free(s);
		return 0;
	}
	if (find_bin(x) < 0) {
		secrets_set_free(s);
		return 0;
	}
	d->inject_uid = u.uid;
	d->inject_gid = u.gid;
	injectd_update(d, s);
	secrets_set_free(s);
	return 0;
}

void injectd_free(struct agentd *d)
{
	struct injectd *x = d->inject;

	if (!x)
		return;
	sock_close(d, x);
	for (size_t i = 0; i < INJ_MAX_ROUTES; i++)
		if (x->lfd[i] >= 0)
			close(x->lfd[i]);
	free(x);
	d->inject = NULL;
}
