/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
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
 * (inject/listen.c), so no other account can take one while the injector is down. The
 * injector itself is the warden's child (WP_KIND_INJECT, our end of the socketpair kept),
 * and the netlock's rules for the routes are the warden's to apply (WP_ROUTES).
 * Everything here is non-blocking: the hand-over is a few KiB into an empty socket.
 */

/* config.c refuses an agent-ports range over the route ports by these numbers. */
_Static_assert(OCSB_ROUTE_PORT_LO == INJ_PORT_BASE &&
		OCSB_ROUTE_PORT_HI == INJ_PORT_BASE + INJ_MAX_ROUTES - 1,
	"config.h's route ports are inject.h's");

/* The route listeners and the warden's table agree on this range. */
_Static_assert(WP_ROUTE_LO == INJ_PORT_BASE && WP_ROUTE_HI == INJ_PORT_BASE + INJ_MAX_ROUTES - 1 &&
		WP_MAX_ROUTES == INJ_MAX_ROUTES,
	"wproto.h's route ports are inject.h's");

/* The usage summed across restarts: the supervisor's own copy, in its directory. */
#define USAGE_OWN_REL "ocsb/agentd/inject-usage"

/* What one project's OpenCode is started with (injectd_child_env). */
struct proj_env {
	char oc[8192]; /* "OPENCODE_CONFIG_CONTENT={...}" */
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
	int routes_sent; /* WP_ROUTES went once: the warden's table holds ours, not a last run's */
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
 * One project's OpenCode: the built-in routes as the providers' base URLs in its
 * OPENCODE_CONFIG_CONTENT (no key; no file: the supervisor may write none the agent reads
 * beside its root-owned run directory), and git's insteadOf for the generic ones. The
 * signature of both tells a push whether the instance must restart.
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
	buf_puts(&b, "}}");
	crypto_generichash_init(&st, NULL, 0, sizeof(pe->sig));
	if (any && b.data) {
		if (snprintf(pe->oc, sizeof(pe->oc), "OPENCODE_CONFIG_CONTENT=%s", b.data) >=
			(int)sizeof(pe->oc))
			log_err("inject: %s: the providers' settings are too long: OpenCode gets "
				"no route for them",
				project);
		else
			pe->env[ne++] = pe->oc;
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

size_t injectd_ports(struct agentd *d, unsigned *ports)
{
	struct injectd *x = d->inject;
	size_t n = 0;

	/* Route i is on INJ_PORT_BASE + its position: x->r is in ascending port order. */
	for (size_t i = 0; x && i < x->n && i < WP_MAX_ROUTES; i++)
		ports[n++] = x->r[i].port;
	return n;
}

/*
 * The netlock with exactly the routes' ports (their upstream ports for the injector's
 * chain): the warden applies and verifies them, and freezes the agent if it cannot.
 */
static void routes_send(struct agentd *d, struct injectd *x)
{
	struct wp_routes rt = {0};
	int r;

	for (size_t i = 0; i < x->n && i < WP_MAX_ROUTES; i++) {
		rt.port[rt.n] = x->r[i].port;
		rt.uport[rt.n++] = x->r[i].uport;
	}
	r = wc_call_ok(d, WP_ROUTES, &rt, sizeof(rt), NULL, 0);
	x->routes_sent = 1;
	d->routes_ok = r == 0;
	d->n_routes_sent = 0;
	if (r < 0) {
		log_err("inject: the warden did not apply the routes' rules: %s", strerror(-r));
		return;
	}
	for (size_t i = 0; i < rt.n; i++)
		d->routes_sent[d->n_routes_sent++] = rt.port[i];
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

/*
 * Before each WP_SPAWN of the injector: a new socketpair, our end loaded with the
 * listeners and the routes with their keys (buffered until it reads them), its end the
 * warden's fds[1], which becomes the injector's fd 4. Its argv, account and limits (no
 * core file, not dumpable) are the warden's.
 */
int inject_prepare(struct agentd *d, struct child *c, struct child_spawn *sp)
{
	struct injectd *x = d->inject;
	struct secret_set *s = NULL;
	int sv[2], r;

	(void)c;
	if (secretd_load(d, &s) < 0)
		return -EIO;
	sock_close(d, x);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		secrets_set_free(s);
		return -errno;
	}
	x->sock = sv[0];
	sp->pass_fd = sv[1];
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
	if (r < 0) {
		sock_close(d, x);
		return -EIO;
	}
	return 0;
}

/* One request's usage: "ROUTE\tDAY\tSTATUS\tREQ\tRESP\tIN\tOUT" (inject/daemon.c). */
static void injectd_usage(struct agentd *d, const char *line)
{
	struct injectd *x = d->inject;
	char path[4096], dir[4096], *old = NULL;
	struct buf b = {0};
	size_t len;
	int dfd, r;

	if (path_join(path, sizeof(path), d->paths.varlib, USAGE_OWN_REL) < 0)
		return;
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = 0;
	/* What earlier runs summed, once: our copy (the owner's file is not ours to read). */
	if (!x->usage_loaded && fo_read(path, 1 << 20, &old, &len) == 0 &&
		inj_usage_parse(old, x->usage, &x->n_usage, INJ_USAGE_MAX_ROWS) < 0)
		x->n_usage = 0;
	free(old);
	x->usage_loaded = 1;
	if (inj_usage_add(x->usage, &x->n_usage, INJ_USAGE_MAX_ROWS, line) < 0) {
		log_warn("inject: malformed usage line dropped");
		return;
	}
	if (inj_usage_render(x->usage, x->n_usage, &b) < 0) {
		buf_free(&b);
		return;
	}
	/* Ours, to sum on after a restart; the supervisor's directory, nobody else's. */
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, getuid(), getgid());
	if (dfd < 0 || fo_write_at_nosync(dfd, strrchr(path, '/') + 1, b.data, b.len, 0600,
			       getuid(), getgid()) < 0)
		log_warn("inject: %s not written", path);
	if (dfd >= 0)
		close(dfd);
	/*
	 * Counts only, no key nor request content; but the routes' names are the owner's
	 * secrets' names: the owner's to read (`ocsb usage`), nobody else's. The warden
	 * writes it, in a directory of root's, as the owner's 0400 file.
	 */
	r = wc_write(d, WP_FILE_USAGE, b.data ? b.data : "", b.len);
	if (r < 0)
		log_warn("inject: %s/%s not written: %s", d->paths.varlib, INJ_USAGE_REL,
			strerror(-r));
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
			sock_close(d, x); /* its exit (WP_E_EXIT) schedules the restart */
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
	/* Without its account or binary nothing is routed (logged at start). */
	if (!d->inject_uid || !x->bin[0])
		c.n = 0;
	memcpy(x->r, c.r, sizeof(x->r));
	x->n = c.n;
	routes_send(d, x);
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
 * Every route port (unprivileged: no root needed), bound before any child of ours runs
 * and held until agentd exits: a route's baseURL or insteadOf then always reaches this agentd's injector (or
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
	c->kind = WP_KIND_INJECT;
	c->prepare = inject_prepare;
	c->probe_fd = -1;
	c->state = CH_STOPPED;
	if (child_log_open(d, c) < 0)
		return -1;
	c->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (c->timerfd < 0 || agentd_watch(d, c->timerfd, &c->timer_src, SRC_TIMER, c, EPOLLIN) < 0)
		return -1;
	/* Test builds only: the fake provider's CA, trusted instead of the system's. */
	if (ca)
		snprintf(x->ca_file, sizeof(x->ca_file), "%s", ca);
	if (d->sec_sk && secretd_load(d, &s) == 0) {
		if (user_lookup(INJ_USER, &u) < 0 || u.uid == 0)
			log_err("inject: no account %s (run ocsb-provision): injected secrets are "
				"not routed",
				INJ_USER);
		else if (find_bin(x) == 0)
			d->inject_uid = u.uid;
		injectd_update(d, s);
		secrets_set_free(s);
	}
	/*
	 * The warden's table holds no route of a supervisor before us (it may have kept one
	 * when the last one died): exactly ours, none when nothing is routed.
	 */
	if (!x->routes_sent)
		routes_send(d, x);
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
