/* SPDX-License-Identifier: MIT */
/*
 * ocsb sync push|pull|status, run by the owner inside a configured project.
 *
 * The owner's repository is opened only by this process, with the owner's rights.
 * Pull writes nothing but objects and refs/remotes/<agent>/... (with their reflogs):
 * no local branch, index, work tree, .git/config, FETCH_HEAD or hook is touched,
 * and the remote is an in-memory anonymous one (invariant 5).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "json.h"
#include "log.h"
#include "paths.h"
#include "sync.h"
#include "util.h"

#define SYNC_MAX_ADVERTISED 10000
#define SYNC_STAT_FILES 20 /* files listed per branch in the diffstat */

struct sync_opts {
	int agent_auth, json, force, all, strict;
	const char *to;
	const char *host, *agent, *accept_fp; /* --host, --agent, --accept-host-key */
	unsigned port;
	uint64_t max_bytes, max_objects;
	int timeout_s, connect_timeout_s, io_timeout_s;
	struct strv branches;
};

/* `sync pull --strict`: the pull went through and the review gate flagged something. */
#define SYNC_EXIT_FLAGGED 3

/* The transport payload must be the struct sync_conn: keep it first. */
struct sync_ctx {
	struct sync_conn conn;
	struct sync_opts *o; /* borrowed */
	struct ocsb_config cfg;
	struct user_info me, agent;
	git_repository *repo; /* owned */
	git_remote *remote; /* owned */
	const char *project; /* borrowed from cfg */
	char remote_path[PATH_MAX], key[PATH_MAX], pin[PATH_MAX], url[PATH_MAX + 128];
	char project_buf[PATH_MAX]; /* --host: the work tree */
	char ns[128]; /* refs/remotes/<ns>/: the agent, or AGENT@HOST */
	char pin_fix[600], key_fix[600];
	int tty;
	int progress_shown;
};

struct sync_flagrec {
	char branch[SYNC_REF_MAX + 1];
	char path[1024]; /* escaped */
	unsigned flag;
	int is_new; /* also raised by what is new since the last pull */
};

struct sync_branch {
	char name[SYNC_REF_MAX + 1]; /* after refs/heads/, validated */
	git_oid tip, old;
	int have_old;
	const char *state; /* new, updated, forced, up to date */
	size_t ahead, behind; /* against the owner's branch of the same name */
	int have_local;
	size_t commits; /* since the review base */
	int have_base;
	git_oid base;
	size_t files, ins, del;
	int have_since; /* since the last pull: old -> tip */
	size_t since_commits, since_files, since_ins, since_del;
};

/* --- output helpers */

static const char *sync_short(const git_oid *id, char *buf)
{
	return git_oid_tostr(buf, 8, id);
}

/* One line for the failure of a git operation: the transport's root cause first. */
static void sync_git_fail(struct sync_ctx *x, const char *what)
{
	const git_error *e = git_error_last();

	if (x->progress_shown)
		fputc('\n', stderr), x->progress_shown = 0;
	if (x->conn.err[0]) {
		char raw[sizeof(x->conn.err)];

		log_err("%s: %s", what, sync_unescape(x->conn.err, raw, sizeof(raw)));
	}
	else
		log_err("%s: %s", what, e && e->message ? e->message : "unknown libgit2 error");
}

/* --- callbacks (payload: struct sync_ctx, whose first member is the sync_conn) */

static int sync_on_sideband(const char *str, int len, void *payload)
{
	struct sync_ctx *x = payload;
	char esc[1024];

	/* Remote text is the agent's: escaped, and only on a terminal or when it matters. */
	if (!x->tty || x->o->json || len <= 0)
		return 0;
	while (len > 0 && (str[len - 1] == '\n' || str[len - 1] == '\r'))
		len--;
	sync_escape(str, (size_t)len, esc, sizeof(esc));
	fprintf(stderr, "\rremote: %s\033[K\n", esc);
	return 0;
}

static int sync_on_transfer(const git_indexer_progress *st, void *payload)
{
	struct sync_ctx *x = payload;
	struct sync_conn *c = &x->conn;

	if (c->max_bytes && st->received_bytes > c->max_bytes) {
		snprintf(c->err, sizeof(c->err),
			"%s sent more than %llu bytes: aborted (raise the bound with --max-bytes)",
			c->user, (unsigned long long)c->max_bytes);
		return -1;
	}
	if (c->max_objects &&
		(st->total_objects > c->max_objects || st->received_objects > c->max_objects)) {
		snprintf(c->err, sizeof(c->err),
			"%s sent %u objects, more than %llu: aborted (raise the bound with "
			"--max-objects)",
			c->user, st->total_objects, (unsigned long long)c->max_objects);
		return -1;
	}
	if (c->deadline && time(NULL) > c->deadline) {
		snprintf(c->err, sizeof(c->err),
			"time limit reached while receiving from %s: aborted (raise it with "
			"--timeout)",
			c->user);
		return -1;
	}
	if (x->tty && !x->o->json) {
		fprintf(stderr, "\rreceiving objects: %u/%u, %.1f MiB\033[K", st->received_objects,
			st->total_objects, (double)st->received_bytes / (1024.0 * 1024.0));
		x->progress_shown = 1;
	}
	return 0;
}

static void sync_callbacks(struct sync_ctx *x, git_remote_callbacks *cb)
{
	git_remote_init_callbacks(cb, GIT_REMOTE_CALLBACKS_VERSION);
	cb->transport = sync_transport_cb;
	cb->payload = x;
	cb->sideband_progress = sync_on_sideband;
	cb->transfer_progress = sync_on_transfer;
}

/* --- setup */

static int sync_parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10, end++;
		break;
	case 'm':
	case 'M':
		v <<= 20, end++;
		break;
	case 'g':
	case 'G':
		v <<= 30, end++;
		break;
	default:
		break;
	}
	if (*end)
		return -1;
	*ret = v;
	return 0;
}

static int sync_parse_secs(const char *s, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 86400)
		return -1;
	*ret = (int)v;
	return 0;
}

static void sync_usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb sync push [--to NAME] [--force] [--all] [BRANCH...]\n"
		"       ocsb sync pull [--json] [--strict] [--max-bytes N[KMG]] [--max-objects N]\n"
		"       ocsb sync status\n"
		"       ocsb sync init --host HOST [--accept-host-key SHA256:FP]\n"
		"Common: [--agent-auth] [--timeout SECS] [--connect-timeout SECS]\n"
		"        [--host HOST [--port N] [--agent NAME]]   (an agent on another machine)\n"
		"Run inside a project listed in /etc/ocsb/ocsb.conf. See ocsb(1), SYNC.\n"
		"Exit status: 0 done, 1 failed, 2 usage; pull --strict: %d when the review gate\n"
		"flags anything (the refs are fetched all the same).\n",
		SYNC_EXIT_FLAGGED);
}

/* 0, or 2 (usage error, already reported). */
static int sync_parse_opts(struct sync_opts *o, int argc, char **argv)
{
	o->max_bytes = 512ull << 20;
	o->max_objects = 1000000;
	o->timeout_s = 300;
	o->connect_timeout_s = 15;
	o->io_timeout_s = 60;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "--agent-auth"))
			o->agent_auth = 1;
		else if (!strcmp(a, "--json"))
			o->json = 1;
		else if (!strcmp(a, "--strict"))
			o->strict = 1;
		else if (!strcmp(a, "--force") || !strcmp(a, "-f"))
			o->force = 1;
		else if (!strcmp(a, "--all"))
			o->all = 1;
		else if (!strcmp(a, "--to") && v)
			o->to = v, i++;
		else if (!strcmp(a, "--host") && v)
			bad = !sync_host_name_ok(v), o->host = v, i++;
		else if (!strcmp(a, "--agent") && v)
			bad = !valid_user_name(v), o->agent = v, i++;
		else if (!strcmp(a, "--accept-host-key") && v)
			o->accept_fp = v, i++;
		else if (!strcmp(a, "--port") && v) {
			int port;

			bad = sync_parse_secs(v, &port) < 0 || port > 65535;
			o->port = bad ? 0 : (unsigned)port;
			i++;
		} else if (!strcmp(a, "--max-bytes") && v)
			bad = sync_parse_size(v, &o->max_bytes), i++;
		else if (!strcmp(a, "--max-objects") && v)
			bad = sync_parse_size(v, &o->max_objects), i++;
		else if (!strcmp(a, "--timeout") && v)
			bad = sync_parse_secs(v, &o->timeout_s), i++;
		else if (!strcmp(a, "--connect-timeout") && v)
			bad = sync_parse_secs(v, &o->connect_timeout_s), i++;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			sync_usage(stdout);
			return 3;
		} else if (a[0] == '-') {
			log_err("sync: unknown option '%s' (or missing value)", a);
			sync_usage(stderr);
			return 2;
		} else if (strv_push(&o->branches, a) < 0) {
			return 1;
		}
		if (bad) {
			log_err("sync: bad value '%s' for %s", v, a);
			return 2;
		}
	}
	return 0;
}

static void sync_ctx_free(struct sync_ctx *x)
{
	git_remote_free(x->remote);
	git_repository_free(x->repo);
	config_free(&x->cfg);
}

/*
 * --host: the agent's clone is ~AGENT/<project name> there (relative to the agent's home,
 * where sshd starts git-shell), the owner's remote key and pin file are their own (never
 * rewritten by ocsb-provision), and the remote-tracking refs are refs/remotes/AGENT@HOST/
 * so that they never mix with a local agent of the same name.
 */
static int sync_remote_paths(struct sync_ctx *x)
{
	const char *host = x->o->host;
	char full[SYNC_REF_MAX + 40], port[32] = "", agent[64] = "";
	int valid = 0;

	if (snprintf(x->remote_path, sizeof(x->remote_path), "%s", path_base(x->project)) >=
			(int)sizeof(x->remote_path) ||
		snprintf(x->key, sizeof(x->key), "%s/.config/ocsb/remote_sync_ed25519",
			x->me.home) >= (int)sizeof(x->key) ||
		snprintf(x->pin, sizeof(x->pin), "%s/.config/ocsb/remote_known_hosts",
			x->me.home) >= (int)sizeof(x->pin) ||
		snprintf(x->ns, sizeof(x->ns), "%s@%s", x->cfg.agent, host) >= (int)sizeof(x->ns)) {
		log_err("path too long");
		return -1;
	}
	/* An IPv6 literal's ':' cannot be in a ref name. */
	for (char *p = x->ns; *p; p++)
		if (*p == ':')
			*p = '_';
	snprintf(full, sizeof(full), "refs/remotes/%s/x", x->ns);
	if (git_reference_name_is_valid(&valid, full) < 0 || !valid) {
		log_err("--host %s: cannot name remote-tracking refs after it", host);
		return -1;
	}
	if (x->o->port)
		snprintf(port, sizeof(port), " --port %u", x->o->port);
	if (strcmp(x->cfg.agent, "ai-dev") != 0)
		snprintf(agent, sizeof(agent), " --agent %s", x->cfg.agent);
	snprintf(x->pin_fix, sizeof(x->pin_fix),
		"check the host key's fingerprint on %s (ssh-keygen -lf "
		"/etc/ssh/ssh_host_ed25519_key.pub there) and pin it with 'ocsb sync init --host "
		"%s%s --accept-host-key SHA256:...'",
		host, host, port);
	snprintf(x->key_fix, sizeof(x->key_fix),
		"'ocsb sync init --host %s%s%s' creates it and prints it; on %s the administrator "
		"authorizes it with 'sudo ocsb-provision --sync-key FILE'",
		host, port, agent, host);
	x->conn.pin_fix = x->pin_fix;
	x->conn.key_fix = x->key_fix;
	return 0;
}

/*
 * Load ocsb.conf, open the repository (project_path, or the one around the current
 * directory), check it is a configured project, and prepare the connection.
 */
static int sync_open(struct sync_ctx *x, struct sync_opts *o, const char *project_path,
	const char *agent_override, unsigned port_override)
{
	struct paths p;
	char conf[PATH_MAX], err[1024], top[PATH_MAX], real[PATH_MAX];
	const char *wd;
	git_remote_create_options ro;
	int r;

	memset(x, 0, sizeof(*x));
	x->o = o;
	x->tty = isatty(STDERR_FILENO);
	sync_conn_init(&x->conn);
	paths_default(&p);
	config_defaults(&x->cfg);
	if (o->host) {
		/* Another machine: its ocsb.conf is there, not here; nothing local is read. */
		snprintf(x->cfg.agent, sizeof(x->cfg.agent), "%s", o->agent ? o->agent : "ai-dev");
		x->cfg.ssh_port = o->port ? o->port : 22;
	} else if (agent_override) {
		/* Seeding from ocsb-provision: the caller already holds the validated config. */
		snprintf(x->cfg.agent, sizeof(x->cfg.agent), "%s", agent_override);
		x->cfg.ssh_port = port_override;
		if (strv_push(&x->cfg.projects, project_path) < 0)
			return -1;
	} else {
		if (path_join(conf, sizeof(conf), p.etc, "ocsb/ocsb.conf") < 0)
			return -1;
		r = config_load(&x->cfg, conf, err, sizeof(err));
		if (r == -ENOENT) {
			log_err("%s missing: run 'sudo ocsb-provision --project PATH' first", conf);
			return -1;
		}
		if (r < 0) {
			log_err("%s", err);
			return -1;
		}
	}
	if (user_lookup_uid(getuid(), &x->me) < 0) {
		log_err("cannot look up uid %u", (unsigned)getuid());
		return -1;
	}
	if (!o->host && !strcmp(x->me.name, x->cfg.agent)) {
		log_err("ocsb sync runs as the owner, not as the agent %s", x->cfg.agent);
		return -1;
	}
	if (!o->host && user_lookup(x->cfg.agent, &x->agent) < 0) {
		log_err("agent account %s does not exist: run 'sudo ocsb-provision'", x->cfg.agent);
		return -1;
	}
	r = git_repository_open_ext(&x->repo, project_path ? project_path : ".",
		project_path ? GIT_REPOSITORY_OPEN_NO_SEARCH : 0, NULL);
	if (r < 0) {
		const git_error *e = git_error_last();
		log_err("%s: not inside a git repository (%s)", project_path ? project_path : ".",
			e ? e->message : "not found");
		return -1;
	}
	wd = git_repository_workdir(x->repo);
	if (!wd) {
		log_err("%s is a bare repository: ocsb sync works in a project's work tree",
			git_repository_path(x->repo));
		return -1;
	}
	snprintf(top, sizeof(top), "%s", wd);
	if (strlen(top) > 1 && top[strlen(top) - 1] == '/')
		top[strlen(top) - 1] = '\0';
	if (!realpath(top, real))
		snprintf(real, sizeof(real), "%s", top);
	if (o->host) {
		snprintf(x->project_buf, sizeof(x->project_buf), "%s", real);
		x->project = x->project_buf;
	}
	for (size_t i = 0; !o->host && i < x->cfg.projects.n; i++) {
		char pr[PATH_MAX];

		if (realpath(x->cfg.projects.v[i], pr) && !strcmp(pr, real)) {
			x->project = x->cfg.projects.v[i];
			break;
		}
	}
	if (!x->project) {
		log_err("%s is not a project of agent %s (add 'project %s' to /etc/ocsb/ocsb.conf "
			"and run 'sudo ocsb-provision')",
			real, x->cfg.agent, real);
		return -1;
	}
	if (o->host) {
		if (sync_remote_paths(x) < 0)
			return -1;
	} else if (snprintf(x->remote_path, sizeof(x->remote_path), "%s/%s", x->agent.home,
			   path_base(x->project)) >= (int)sizeof(x->remote_path) ||
		snprintf(x->key, sizeof(x->key), "%s/.config/ocsb/%s_sync_ed25519", x->me.home,
			x->cfg.agent) >= (int)sizeof(x->key) ||
		snprintf(x->pin, sizeof(x->pin), "%s/.config/ocsb/known_hosts", x->me.home) >=
			(int)sizeof(x->pin)) {
		log_err("path too long");
		return -1;
	}
	/* Informational only: the subtransport uses remote_path, never a parsed URL. */
	snprintf(x->url, sizeof(x->url), "ssh://%s@%s:%u/%s", x->cfg.agent,
		o->host ? o->host : "localhost", x->cfg.ssh_port,
		x->remote_path[0] == '/' ? x->remote_path + 1 : x->remote_path);
	if (!x->ns[0])
		snprintf(x->ns, sizeof(x->ns), "%s", x->cfg.agent);
	if (o->host)
		x->conn.host = o->host;
	x->conn.port = x->cfg.ssh_port;
	x->conn.user = x->cfg.agent;
	x->conn.key_path = x->key;
	x->conn.known_hosts = x->pin;
	x->conn.remote_path = x->remote_path;
	x->conn.agent_auth = o->agent_auth;
	x->conn.connect_timeout_s = o->connect_timeout_s;
	x->conn.io_timeout_s = o->io_timeout_s;
	x->conn.max_bytes = o->max_bytes;
	x->conn.max_objects = o->max_objects;
	x->conn.deadline = time(NULL) + o->timeout_s;

	/* In memory only: nothing is written to .git/config, insteadOf rewriting is skipped. */
	git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	ro.repository = x->repo;
	ro.name = NULL;
	ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	if (git_remote_create_with_opts(&x->remote, x->url, &ro) < 0) {
		sync_git_fail(x, "creating the in-memory remote");
		return -1;
	}
	return 0;
}

/* --- push */

static int sync_do_push(struct sync_ctx *x)
{
	struct sync_opts *o = x->o;
	struct strv names = {0};
	struct sync_push_cmd *cmds = NULL;
	struct sync_push_opts po = {0};
	int r, ret = -1, refused = 0;

	if (o->all) {
		git_branch_iterator *it;
		git_reference *ref;
		git_branch_t type;

		if (git_branch_iterator_new(&it, x->repo, GIT_BRANCH_LOCAL) < 0) {
			sync_git_fail(x, "listing branches");
			goto out;
		}
		while (git_branch_next(&ref, &type, it) == 0) {
			strv_push(&names, git_reference_shorthand(ref));
			git_reference_free(ref);
		}
		git_branch_iterator_free(it);
	} else if (o->branches.n) {
		for (size_t i = 0; i < o->branches.n; i++)
			strv_push(&names, o->branches.v[i]);
	} else {
		git_reference *head = NULL;

		if (git_repository_head(&head, x->repo) < 0 || !git_reference_is_branch(head)) {
			log_err("no current branch (detached HEAD or no commit yet): name the "
				"branch "
				"to push");
			git_reference_free(head);
			goto out;
		}
		strv_push(&names, git_reference_shorthand(head));
		git_reference_free(head);
	}
	if (!names.n) {
		log_err("nothing to push: %s has no branch with a commit", x->project);
		goto out;
	}
	if (o->to && names.n != 1) {
		log_err("--to takes exactly one branch to push");
		goto out;
	}
	cmds = calloc(names.n, sizeof(*cmds));
	if (!cmds) {
		log_err("out of memory");
		goto out;
	}
	for (size_t i = 0; i < names.n; i++) {
		char why[128], src[SYNC_REF_MAX + 20];
		const char *dst = o->to ? o->to : names.v[i];

		snprintf(cmds[i].dst, sizeof(cmds[i].dst), "refs/heads/%s", dst);
		if (!sync_ref_name_ok(cmds[i].dst, why, sizeof(why))) {
			log_err("cannot push to '%s': %s", dst, why);
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(cmds[j].dst, cmds[i].dst)) {
				log_err("'%s' is pushed twice: name each branch once", dst);
				goto out;
			}
		if (snprintf(src, sizeof(src), "refs/heads/%s", names.v[i]) >= (int)sizeof(src) ||
			git_reference_name_to_id(&cmds[i].new_id, x->repo, src) < 0) {
			log_err("no local branch '%s' in %s", names.v[i], x->project);
			goto out;
		}
	}
	po.gitdir = git_repository_path(x->repo);
	po.home = x->me.home;
	po.force = o->force;
	po.progress = x->tty;
	r = sync_push(&x->conn, x->repo, cmds, names.n, &po);
	if (r == SYNC_PUSH_NONFF) {
		log_err("push to %s refused: the agent's branch has commits yours does not (run "
			"'ocsb sync pull' and merge %s/BRANCH first, push with --force to "
			"overwrite it, or use --to NEWNAME)",
			x->cfg.agent, x->ns);
		goto out;
	}
	if (r < 0)
		goto out;
	for (size_t i = 0; i < names.n; i++) {
		const char *m = cmds[i].why;

		if (cmds[i].state != 2)
			continue;
		refused = 1;
		char raw[sizeof(cmds[i].why)];

		log_err("%s refused %s: %s", x->cfg.agent, cmds[i].dst,
			sync_unescape(m, raw, sizeof(raw)));
		if (strstr(m, "nstaged") || strstr(m, "ncommitted") ||
			strstr(m, "orking directory") || strstr(m, "checked out") ||
			strstr(m, "not clean") || strstr(m, "dirty"))
			log_err("the agent has uncommitted changes on that checked-out branch: "
				"push "
				"to a branch it has not checked out instead (ocsb sync push --to "
				"NEWNAME)");
		/*
		 * The pack leaves out what the agent's refs say it has. A clone with a ref to
		 * an object it lacks (damaged, or tampered with) then refuses the pack; git
		 * push fails the same way there (issue 16 item 5).
		 */
		if (strstr(m, "missing necessary objects"))
			log_err("the agent's clone advertises refs to objects it does not have "
				"(damaged or tampered with; git push fails there too): on the "
				"agent's side, 'git fsck' names them");
	}
	if (refused)
		goto out;
	for (size_t i = 0; i < names.n; i++)
		printf("pushed %s -> %s:%s\n", names.v[i], x->cfg.agent,
			o->to ? o->to : names.v[i]);
	ret = 0;
out:
	free(cmds);
	strv_free(&names);
	return ret;
}

/* --- pull */

static int sync_push_flag(struct sync_flagrec **v, size_t *n, const char *branch, const char *path,
	unsigned flags, unsigned newflags)
{
	for (unsigned f = 1; f < (1u << SYNC_FLAG_COUNT); f <<= 1) {
		struct sync_flagrec *nv;

		if (!(flags & f))
			continue;
		nv = realloc(*v, (*n + 1) * sizeof(**v));
		if (!nv)
			return -1;
		*v = nv;
		snprintf(nv[*n].branch, sizeof(nv[*n].branch), "%s", branch);
		sync_escape(path, strlen(path), nv[*n].path, sizeof(nv[*n].path));
		nv[*n].flag = f;
		nv[*n].is_new = (newflags & f) != 0;
		(*n)++;
	}
	return 0;
}

/* The flags the since-last-pull diff raises on path (both parts are in path order). */
static unsigned sync_since_flags(const struct sync_rpart *since, size_t *pos, const char *path)
{
	unsigned f = 0;

	while (*pos < since->n && strcmp(since->v[*pos].path, path) < 0)
		(*pos)++;
	for (size_t k = *pos; k < since->n && !strcmp(since->v[k].path, path); k++)
		f |= since->v[k].flags;
	return f;
}

static void sync_stat_lines(const struct sync_rpart *p, struct buf *stat)
{
	for (size_t i = 0; i < p->n && i <= SYNC_STAT_FILES; i++) {
		const struct sync_rfile *d = &p->v[i];
		char esc[1024];

		if (i == SYNC_STAT_FILES) {
			buf_printf(stat, "    ... %zu more files\n", p->n - i);
			break;
		}
		sync_escape(d->path, strlen(d->path), esc, sizeof(esc));
		buf_printf(stat, "    %s | +%zu -%zu%s\n", esc, d->add, d->del,
			d->unreadable	    ? " (unreadable)"
				: d->binary ? " (binary)"
					    : "");
	}
}

/*
 * Review branch b (review.c): its base, counts, diffstat and flags, the whole branch and
 * what is new since the last pull. -2: too big to review (said), -1: failed (said).
 */
static int sync_review_branch(struct sync_ctx *x, struct sync_branch *b,
	const struct sync_review_in *in, struct sync_review *rv, struct sync_flagrec **fl,
	size_t *nfl, struct buf *stat)
{
	size_t pos = 0;
	int r;

	r = sync_review_run(x->repo, in, rv);
	if (r == SYNC_DIFF_TOO_BIG) {
		/* log_err escapes the name (the agent's) itself. */
		log_err("%s/%s changes more than %d paths, or nests trees too deep, to be reviewed "
			"(%s): look at it with git before you check it out",
			x->ns, b->name, SYNC_REVIEW_MAX_PATHS,
			git_error_last() ? git_error_last()->message : "");
		return -2;
	}
	if (r < 0) {
		sync_git_fail(x, "reviewing the fetched branch");
		return -1;
	}
	b->have_base = rv->have_base;
	if (rv->have_base)
		git_oid_cpy(&b->base, &rv->base);
	b->commits = rv->commits;
	b->ahead = rv->ahead;
	b->behind = rv->behind;
	b->files = rv->whole.n;
	b->ins = rv->whole.ins;
	b->del = rv->whole.del;
	b->have_since = rv->have_since;
	b->since_commits = rv->since_commits;
	b->since_files = rv->since.n;
	b->since_ins = rv->since.ins;
	b->since_del = rv->since.del;
	for (size_t i = 0; i < rv->whole.n; i++) {
		const struct sync_rfile *d = &rv->whole.v[i];
		unsigned nf;

		if (!d->flags)
			continue;
		/* New since the last pull: the same path raises the same flag in old -> tip. */
		nf = !rv->have_since ? (b->have_old ? 0 : d->flags)
				     : sync_since_flags(&rv->since, &pos, d->path);
		if (sync_push_flag(fl, nfl, b->name, d->path, d->flags, nf & d->flags) < 0) {
			log_err("out of memory");
			return -1;
		}
	}
	if (stat)
		sync_stat_lines(&rv->whole, stat);
	return 0;
}

/*
 * Keep the previous tip reachable after a forced update: libgit2 logs refs/remotes/...
 * by default, but core.logAllRefUpdates=false would drop the entry, so check it.
 */
static void sync_ensure_reflog(
	struct sync_ctx *x, const char *ref, const git_oid *id, const char *msg)
{
	git_reflog *rl = NULL;
	git_signature *sig = NULL;

	if (git_reflog_read(&rl, x->repo, ref) < 0)
		return;
	if (git_reflog_entrycount(rl) > 0 &&
		git_oid_equal(git_reflog_entry_id_new(git_reflog_entry_byindex(rl, 0)), id))
		goto out;
	if (git_signature_default(&sig, x->repo) < 0 &&
		git_signature_now(&sig, "ocsb", "ocsb@localhost") < 0)
		goto out;
	if (git_reflog_append(rl, id, sig, msg) < 0 || git_reflog_write(rl) < 0)
		log_warn("%s: could not write the reflog entry", ref);
out:
	git_signature_free(sig);
	git_reflog_free(rl);
}

static void sync_print_branch_text(
	struct sync_ctx *x, const struct sync_branch *b, const char *stat)
{
	char t[GIT_OID_HEXSZ + 1], o[GIT_OID_HEXSZ + 1];

	printf("%s/%s: %s", x->ns, b->name, b->state);
	if (!strcmp(b->state, "new"))
		printf(" (%s)", sync_short(&b->tip, t));
	else if (!strcmp(b->state, "up to date"))
		printf(" (%s)", sync_short(&b->tip, t));
	else
		printf(" (%s -> %s%s)", sync_short(&b->old, o), sync_short(&b->tip, t),
			!strcmp(b->state, "forced") ? ", old tip kept in the reflog" : "");
	if (b->have_local)
		printf(", %zu commit%s ahead of your %s, %zu behind", b->ahead,
			b->ahead == 1 ? "" : "s", b->name, b->behind);
	else
		printf(", %zu commit%s to review", b->commits, b->commits == 1 ? "" : "s");
	printf("\n  %zu file%s changed, %zu insertion%s(+), %zu deletion%s(-)\n%s", b->files,
		b->files == 1 ? "" : "s", b->ins, b->ins == 1 ? "" : "s", b->del,
		b->del == 1 ? "" : "s", stat);
	if (b->have_since)
		printf("  new since your last pull: %zu commit%s, %zu file%s changed, %zu "
		       "insertion%s(+), %zu deletion%s(-)\n",
			b->since_commits, b->since_commits == 1 ? "" : "s", b->since_files,
			b->since_files == 1 ? "" : "s", b->since_ins, b->since_ins == 1 ? "" : "s",
			b->since_del, b->since_del == 1 ? "" : "s");
}

static void sync_print_branch_json(struct sync_ctx *x, const struct sync_branch *b, int first)
{
	char t[GIT_OID_HEXSZ + 1], o[GIT_OID_HEXSZ + 1], base[GIT_OID_HEXSZ + 1], ref[512];

	git_oid_tostr(t, sizeof(t), &b->tip);
	snprintf(ref, sizeof(ref), "refs/remotes/%s/%s", x->ns, b->name);
	printf("%s{\"name\":", first ? "" : ",");
	json_fput_str(stdout, b->name);
	printf(",\"ref\":");
	json_fput_str(stdout, ref);
	printf(",\"state\":\"%s\",\"new\":\"%s\",\"old\":", b->state, t);
	if (b->have_old)
		printf("\"%s\"", git_oid_tostr(o, sizeof(o), &b->old));
	else
		printf("null");
	if (b->have_local)
		printf(",\"local\":true,\"ahead\":%zu,\"behind\":%zu", b->ahead, b->behind);
	else
		printf(",\"local\":false,\"ahead\":null,\"behind\":null");
	printf(",\"base\":");
	if (b->have_base)
		printf("\"%s\"", git_oid_tostr(base, sizeof(base), &b->base));
	else
		printf("null");
	printf(",\"commits\":%zu,\"files\":%zu,\"insertions\":%zu,\"deletions\":%zu", b->commits,
		b->files, b->ins, b->del);
	if (b->have_since)
		printf(",\"since_last_pull\":{\"commits\":%zu,\"files\":%zu,\"insertions\":%zu,"
		       "\"deletions\":%zu}}",
			b->since_commits, b->since_files, b->since_ins, b->since_del);
	else
		printf(",\"since_last_pull\":null}");
}

/*
 * Connectivity: libgit2 neither checks that a fetched pack is complete nor fetches a tip
 * whose commit object it already has, so a hostile agent can send a commit without its
 * tree (or send it once, then advertise it again). Before any ref is written, every
 * object a fetched tip reaches must be in the store, the owner's own refs trusted:
 * `git rev-list --objects --quiet --stdin --not --branches --tags --remotes`, the check
 * git fetch itself runs (it fails on a missing commit, tree or blob). git rather than a
 * libgit2 walk: libgit2 1.5 rebuilds every tree from the whole of its delta chain (it
 * caches no intermediate base), 8 s against about 1 s for 20,000 commits. A small fetch
 * on top of the owner's refs is checked without git first (sync_fast_connected: the
 * subtrees and blobs that differ from each commit's parent), which saves the ~70 ms of
 * rev-list marking every ref's whole tree.
 */
static int sync_check_complete(struct sync_ctx *x, const struct sync_branch *br, size_t nb)
{
	static const char *const args[] = {"rev-list", "--objects", "--quiet", "--stdin", "--not",
		"--branches", "--tags", "--remotes", NULL};
	struct sync_git g = {.pid = -1, .in = -1, .out = -1, .err = -1};
	struct buf tips = {0};
	char why[300] = "", hex[GIT_OID_HEXSZ + 1], msg[1024];
	const char *bad = NULL;
	int r, st, ret = -1;

	if (!nb)
		return 0;
	for (size_t i = 0; i < nb; i++) {
		git_commit *c;

		/* The tip itself: a commit (not a blob or tree under a branch name). */
		if (git_commit_lookup(&c, x->repo, &br[i].tip) < 0) {
			bad = br[i].name;
			snprintf(why, sizeof(why), "missing commit %s",
				git_oid_tostr(hex, sizeof(hex), &br[i].tip));
			goto out;
		}
		git_commit_free(c);
		if (buf_printf(&tips, "%s\n", git_oid_tostr(hex, sizeof(hex), &br[i].tip)) < 0) {
			log_err("out of memory");
			goto out;
		}
	}
	git_error_clear();
	/* A few new commits on top of the owner's refs: checked here, without running git. */
	{
		git_oid *ids = calloc(nb, sizeof(*ids));
		char raw[600];

		if (!ids) {
			log_err("out of memory");
			goto out;
		}
		for (size_t i = 0; i < nb; i++)
			git_oid_cpy(&ids[i], &br[i].tip);
		r = sync_fast_connected(x->repo, ids, nb, raw, sizeof(raw));
		free(ids);
		if (r != 0) {
			if (r < 0)
				sync_escape(raw, strlen(raw), why, sizeof(why));
			ret = r > 0 ? 0 : -1;
			goto out;
		}
	}
	if (sync_git_start(&g, git_repository_path(x->repo), x->me.home, args,
		    SYNC_GIT_STDIN | SYNC_GIT_STDERR) < 0) {
		log_err("cannot check the fetched history: no ref was written");
		goto out;
	}
	/* A few KiB of ids: rev-list reads them all before it writes anything. */
	if (sync_git_write_all(g.in, tips.data, tips.len) < 0) {
		log_err("writing to git rev-list: %s", strerror(errno));
		sync_git_finish(&g, 1);
		goto out;
	}
	close(g.in);
	g.in = -1;
	r = sync_git_read_err(&g, msg, sizeof(msg), x->conn.deadline);
	st = sync_git_finish(&g, r < 0);
	if (r == -ETIMEDOUT) {
		log_err("time limit reached while checking the fetched history (raise it with "
			"--timeout): no ref was written");
		goto out;
	}
	if (r == 0 && st == 0) {
		ret = 0;
		goto out;
	}
	/* git's first line ("fatal: bad tree object ...", "missing blob object ..."). */
	{
		char *line = msg, *nl = strchr(msg, '\n');

		if (nl)
			*nl = '\0';
		if (!strncmp(line, "fatal: ", 7) || !strncmp(line, "error: ", 7))
			line += 7;
		if (!line[0]) {
			snprintf(msg, sizeof(msg), "git rev-list failed (status %d)", st);
			line = msg;
		}
		sync_escape(line, strlen(line), why, sizeof(why));
	}
out:
	if (ret < 0 && why[0]) {
		char raw[sizeof(why)];

		log_err("%s sent an incomplete history%s%s%s: %s; no ref was written (a broken or "
			"hostile agent repository: check it with 'git fsck' on the agent's side; "
			"the unreferenced objects received go with 'git gc --prune=now')",
			x->cfg.agent, bad ? " for branch \"" : "", bad ? bad : "", bad ? "\"" : "",
			sync_unescape(why, raw, sizeof(raw)));
	}
	buf_free(&tips);
	return ret;
}

static int sync_do_pull(struct sync_ctx *x)
{
	const git_remote_head **heads;
	size_t nheads, nb = 0, nfl = 0, nskipped = 0;
	struct sync_branch *br = NULL;
	struct sync_flagrec *fl = NULL;
	struct strv specs = {0}, skipped = {0}, deleted = {0};
	struct buf *bstat = NULL;
	git_remote_callbacks cb;
	git_fetch_options fo;
	git_reference_iterator *it = NULL;
	git_reference *ref;
	char prefix[SYNC_REF_MAX + 20], objects[PATH_MAX];
	const char *common = git_repository_commondir(x->repo);
	struct timespec start;
	struct sync_memos memo = {0}, memo2 = {0};
	struct sync_rmemos rmemo = {0}, rmemo2 = {0};
	int rmemo_dirty = 0;
	unsigned removed = 0;
	int ret = -1, lockfd = -1, r;

	/* One pull at a time: the clean-up below must not remove a live download. */
	clock_gettime(CLOCK_REALTIME, &start);
	r = sync_repo_lock(common, &lockfd);
	if (r == -EBUSY) {
		log_err("another ocsb sync pull is running in %s (it holds %socsb-sync.lock): wait "
			"for it to finish",
			x->project, common);
		goto out;
	}
	if (r < 0) {
		log_err("%socsb-sync.lock: %s", common, strerror(-r));
		goto out;
	}
	snprintf(objects, sizeof(objects), "%sobjects", common);
	r = sync_clean_tmp_packs(objects, &start, &removed);
	if (r < 0)
		log_warn("%s/pack: cannot remove temporary packs: %s", objects, strerror(-r));
	if (removed)
		log_info("removed %u temporary pack%s left by an interrupted pull", removed,
			removed == 1 ? "" : "s");

	if (sync_memo_load(common, &memo) < 0 || sync_rmemo_load(common, &rmemo) < 0)
		goto out;

	/* The connectivity check runs git: fail before downloading anything without it. */
	if (sync_git_check() < 0)
		goto out;
	sync_callbacks(x, &cb);
	if (git_remote_connect(x->remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL) < 0) {
		sync_git_fail(x, "connecting to the agent");
		goto out;
	}
	if (git_remote_ls(&heads, &nheads, x->remote) < 0) {
		sync_git_fail(x, "listing the agent's branches");
		goto out;
	}
	if (nheads > SYNC_MAX_ADVERTISED) {
		log_err("%s advertises %zu refs, more than %d: refusing", x->cfg.agent, nheads,
			SYNC_MAX_ADVERTISED);
		goto out;
	}
	br = calloc(nheads ? nheads : 1, sizeof(*br));
	bstat = calloc(nheads ? nheads : 1, sizeof(*bstat));
	if (!br || !bstat)
		goto out;
	/*
	 * Every advertised branch name is checked before anything is fetched. A bad name is
	 * skipped loudly (named, escaped, on stderr and in the JSON), the good ones are
	 * still fetched: one hostile ref must not hold the owner's review hostage.
	 */
	for (size_t i = 0; i < nheads; i++) {
		const char *n = heads[i]->name;
		char why[128], spec[2 * SYNC_REF_MAX + 64];

		if (strncmp(n, "refs/heads/", 11) != 0)
			continue; /* HEAD, tags, other namespaces: not exchanged */
		if (!sync_ref_name_ok(n, why, sizeof(why))) {
			char esc[1100], line[1300];

			sync_escape(n, strlen(n), esc, sizeof(esc));
			log_warn("skipped the agent's ref \"%s\": %s", n, why);
			snprintf(line, sizeof(line), "%s\t%s", esc, why);
			strv_push(&skipped, line);
			nskipped++;
			continue;
		}
		snprintf(br[nb].name, sizeof(br[nb].name), "%s", n + 11);
		git_oid_cpy(&br[nb].tip, &heads[i]->oid);
		snprintf(spec, sizeof(spec), "+%s:refs/remotes/%s/%s", n, x->ns, n + 11);
		strv_push(&specs, spec);
		nb++;
	}
	if (nb) {
		char glob[SYNC_REF_MAX + 64], *globv[1] = {glob};
		git_strarray arr = {.strings = specs.v, .count = specs.n};

		/*
		 * libgit2 matches every advertised ref against every refspec: 500 branches
		 * among 3,500 refs made 1.75 million matches. When no branch name was
		 * skipped, one glob wants exactly the same objects (refs are written below,
		 * by name, either way).
		 */
		if (!nskipped && nb > 1) {
			snprintf(glob, sizeof(glob), "+refs/heads/*:refs/remotes/%s/*", x->ns);
			arr.strings = globv;
			arr.count = 1;
		}

		git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
		fo.callbacks = cb;
		fo.prune = GIT_FETCH_NO_PRUNE;
		fo.update_fetchhead = 0;
		fo.download_tags = GIT_REMOTE_DOWNLOAD_TAGS_NONE;
		/* Objects only: refs are written below, one by one, after the checks. */
		if (git_remote_download(x->remote, &arr, &fo) < 0) {
			sync_git_fail(x, "fetching from the agent");
			goto out;
		}
		/* A transport error libgit2 recovered from is not the cause of a later failure. */
		x->conn.err[0] = '\0';
		if (x->progress_shown)
			fputc('\n', stderr), x->progress_shown = 0;
	}
	git_remote_disconnect(x->remote);
	x->conn.err[0] = '\0';
	/* Before any ref is written: the fetched history must be complete. */
	if (sync_check_complete(x, br, nb) < 0)
		goto out;

	for (size_t i = 0; i < nb; i++) {
		struct sync_branch *b = &br[i];
		char track[SYNC_REF_MAX + 160], local[SYNC_REF_MAX + 20], msg[128];
		git_reference *old = NULL, *nref = NULL;
		git_oid lid;

		snprintf(track, sizeof(track), "refs/remotes/%s/%s", x->ns, b->name);
		snprintf(local, sizeof(local), "refs/heads/%s", b->name);
		if (git_reference_lookup(&old, x->repo, track) == 0 && git_reference_target(old)) {
			git_oid_cpy(&b->old, git_reference_target(old));
			b->have_old = 1;
		}
		git_reference_free(old);
		if (!b->have_old)
			b->state = "new";
		else if (git_oid_equal(&b->old, &b->tip))
			b->state = "up to date";
		else if (git_graph_descendant_of(x->repo, &b->tip, &b->old) == 1)
			b->state = "updated";
		else
			b->state = "forced";
		snprintf(msg, sizeof(msg), "ocsb sync pull: %s",
			!strcmp(b->state, "forced") ? "forced-update" : b->state);
		if (strcmp(b->state, "up to date") != 0) {
			if (git_reference_create(&nref, x->repo, track, &b->tip, 1, msg) < 0) {
				sync_git_fail(x, track);
				goto out;
			}
			git_reference_free(nref);
			sync_ensure_reflog(x, track, &b->tip, msg);
		}
		/*
		 * Review base: where the agent's work starts from the owner's point of view,
		 * the owner's branch of that name; without one, the owner's HEAD, so a second
		 * pull still shows what the branch carries; without common history, what
		 * changed since the last pull.
		 */
		{
			struct sync_review_in in = {.tip = &b->tip,
				.old = b->have_old ? &b->old : NULL,
				.memo = sync_rmemo_find(&rmemo, track),
				.walk_limit = SYNC_HISTORY_WALK};
			struct sync_review rv;
			git_oid hid;

			if (git_reference_name_to_id(&lid, x->repo, local) == 0) {
				b->have_local = 1;
				in.against = &lid;
				in.have_local = 1;
			} else if (git_reference_name_to_id(&hid, x->repo, "HEAD") == 0) {
				const struct sync_memo *m = sync_memo_find(&memo, track);

				in.against = &hid;
				in.unrelated_hint = m &&
					sync_still_unrelated(x->repo, &m->tip, &b->tip, &m->against,
						&hid, SYNC_MEMO_WALK) == 1;
			}
			git_error_clear();
			r = sync_review_branch(x, b, &in, &rv, &fl, &nfl, &bstat[i]);
			if (r == 0 && !in.have_local && in.against &&
				(in.unrelated_hint || rv.unrelated))
				(void)sync_memo_add(&memo2, track, &b->tip, in.against);
			if (r == 0 && rv.have_memo) {
				const struct sync_rmemo *om = in.memo;

				snprintf(rv.memo.ref, sizeof(rv.memo.ref), "%s", track);
				if (!om || !git_oid_equal(&om->tip, &rv.memo.tip) ||
					!git_oid_equal(&om->against, &rv.memo.against) ||
					om->have_base != rv.memo.have_base ||
					(om->have_base && !git_oid_equal(&om->base, &rv.memo.base)))
					rmemo_dirty = 1;
				if (sync_rmemo_push(&rmemo2, &rv.memo) < 0)
					rmemo_dirty = 1; /* a missing entry costs speed only */
			}
			sync_review_free(&rv);
			if (r < 0)
				goto out;
		}
	}

	/* Agent branches that disappeared: remove their remote-tracking refs, and say so. */
	snprintf(prefix, sizeof(prefix), "refs/remotes/%s/*", x->ns);
	/* What this pull learnt replaces its namespace's memo; other agents' entries stay. */
	for (size_t i = 0; i < memo.n; i++)
		if (strncmp(memo.v[i].ref, prefix, strlen(prefix) - 1) != 0)
			(void)sync_memo_add(
				&memo2, memo.v[i].ref, &memo.v[i].tip, &memo.v[i].against);
	for (size_t i = 0; i < rmemo.n; i++) {
		if (strncmp(rmemo.v[i].ref, prefix, strlen(prefix) - 1) != 0) {
			if (sync_rmemo_push(&rmemo2, &rmemo.v[i]) < 0)
				rmemo_dirty = 1;
		} else {
			size_t k;

			for (k = 0; k < rmemo2.n && strcmp(rmemo2.v[k].ref, rmemo.v[i].ref); k++)
				;
			if (k == rmemo2.n)
				rmemo_dirty = 1; /* a branch gone: its entry goes */
		}
	}
	if (rmemo_dirty) {
		r = sync_rmemo_save(common, &rmemo2);
		if (r < 0)
			log_warn("%s%s: %s (the next pull may be slower)", common,
				"ocsb-sync.review", strerror(-r));
	}
	r = sync_memo_save(common, &memo2);
	if (r < 0)
		log_warn("%s%s: %s (the next pull may be slower)", common, "ocsb-sync.unrelated",
			strerror(-r));
	if (git_reference_iterator_glob_new(&it, x->repo, prefix) == 0) {
		size_t plen = strlen(prefix) - 1;

		while (git_reference_next(&ref, it) == 0) {
			const char *name = git_reference_name(ref);
			int found = 0;

			for (size_t i = 0; i < nb && !found; i++)
				found = !strcmp(name + plen, br[i].name);
			if (!found && git_reference_type(ref) == GIT_REFERENCE_DIRECT) {
				char hex[GIT_OID_HEXSZ + 1], line[SYNC_REF_MAX + 200];

				git_oid_tostr(hex, sizeof(hex), git_reference_target(ref));
				snprintf(line, sizeof(line), "%s\t%s", name + plen, hex);
				if (git_reference_delete(ref) == 0)
					strv_push(&deleted, line);
			}
			git_reference_free(ref);
		}
		git_reference_iterator_free(it);
	}

	if (x->o->json) {
		printf("{\"agent\":");
		json_fput_str(stdout, x->cfg.agent);
		printf(",\"project\":");
		json_fput_str(stdout, x->project);
		printf(",\"branches\":[");
		for (size_t i = 0; i < nb; i++)
			sync_print_branch_json(x, &br[i], i == 0);
		printf("],\"deleted\":[");
		for (size_t i = 0; i < deleted.n; i++) {
			char *tab = strchr(deleted.v[i], '\t');
			*tab = '\0';
			printf("%s{\"name\":", i ? "," : "");
			json_fput_str(stdout, deleted.v[i]);
			printf(",\"old\":\"%s\"}", tab + 1);
		}
		printf("],\"skipped\":[");
		for (size_t i = 0; i < skipped.n; i++) {
			char *tab = strchr(skipped.v[i], '\t');
			*tab = '\0';
			printf("%s{\"name\":", i ? "," : "");
			json_fput_str(stdout, skipped.v[i]);
			printf(",\"reason\":");
			json_fput_str(stdout, tab + 1);
			printf("}");
		}
		printf("],\"review\":[");
		for (size_t i = 0; i < nfl; i++) {
			printf("%s{\"branch\":", i ? "," : "");
			json_fput_str(stdout, fl[i].branch);
			printf(",\"path\":");
			json_fput_str(stdout, fl[i].path);
			printf(",\"flag\":\"%s\",\"why\":", sync_flag_name(fl[i].flag));
			json_fput_str(stdout, sync_flag_text(fl[i].flag));
			printf(",\"new\":%s}", fl[i].is_new ? "true" : "false");
		}
		printf("]}\n");
	} else {
		if (!nb && !deleted.n)
			printf("%s has no branches to fetch\n", x->cfg.agent);
		for (size_t i = 0; i < nb; i++)
			sync_print_branch_text(x, &br[i], bstat[i].data ? bstat[i].data : "");
		for (size_t i = 0; i < deleted.n; i++) {
			char *tab = strchr(deleted.v[i], '\t');
			*tab = '\0';
			printf("%s/%s: deleted (the agent removed it; was %.7s)\n", x->ns,
				deleted.v[i], tab + 1);
		}
		for (size_t i = 0; i < skipped.n; i++) {
			char *tab = strchr(skipped.v[i], '\t');
			*tab = '\0';
			printf("skipped: \"%s\" (%s)\n", skipped.v[i], tab + 1);
		}
		if (!nfl) {
			printf("REVIEW GATE: nothing flagged\n");
		} else {
			printf("REVIEW GATE: %zu risky change%s: read them before you check out, "
			       "merge, build or open the branch in an editor\n",
				nfl, nfl == 1 ? "" : "s");
			for (size_t i = 0; i < nfl; i++)
				printf("  [%s] %s/%s: %s: %s%s\n", sync_flag_name(fl[i].flag),
					x->ns, fl[i].branch, fl[i].path, sync_flag_text(fl[i].flag),
					fl[i].is_new ? " (new since your last pull)" : "");
		}
	}
	/* For scripts and hooks: a flag is a distinct outcome, not a failure of the pull. */
	ret = x->o->strict && nfl ? 1 : 0;
out:
	sync_memos_free(&memo);
	sync_memos_free(&memo2);
	sync_rmemos_free(&rmemo);
	sync_rmemos_free(&rmemo2);
	if (bstat)
		for (size_t i = 0; i < nheads; i++)
			buf_free(&bstat[i]);
	free(bstat);
	free(br);
	free(fl);
	strv_free(&specs);
	strv_free(&skipped);
	strv_free(&deleted);
	if (lockfd >= 0)
		close(lockfd);
	return ret;
}

/* --- status */

static int sync_do_status(struct sync_ctx *x)
{
	const git_remote_head **heads;
	size_t nheads;
	git_remote_callbacks cb;
	git_odb *odb = NULL;
	struct strv seen = {0};
	git_branch_iterator *bit = NULL;
	git_reference *ref;
	git_branch_t type;
	int ret = -1;

	sync_callbacks(x, &cb);
	/* ls-remote: the advertisement only, no object is fetched. */
	if (git_remote_connect(x->remote, GIT_DIRECTION_FETCH, &cb, NULL, NULL) < 0) {
		sync_git_fail(x, "connecting to the agent");
		goto out;
	}
	if (git_remote_ls(&heads, &nheads, x->remote) < 0 ||
		git_repository_odb(&odb, x->repo) < 0) {
		sync_git_fail(x, "listing the agent's branches");
		goto out;
	}
	printf("%-24s %-8s %-8s %s\n", "BRANCH", "AGENT", "YOURS", "STATE");
	for (size_t i = 0; i < nheads && i < SYNC_MAX_ADVERTISED; i++) {
		const char *n = heads[i]->name;
		char why[128], esc[600], a[GIT_OID_HEXSZ + 1], l[GIT_OID_HEXSZ + 1] = "-";
		char local[SYNC_REF_MAX + 20], track[SYNC_REF_MAX + 80], state[160];
		git_oid lid, tid;
		int have_local;

		if (strncmp(n, "refs/heads/", 11) != 0)
			continue;
		if (!sync_ref_name_ok(n, why, sizeof(why))) {
			sync_escape(n, strlen(n), esc, sizeof(esc));
			printf("%-24s %-8s %-8s %s\n", esc, "?", "?",
				"invalid name, never fetched");
			continue;
		}
		strv_push(&seen, n + 11);
		snprintf(local, sizeof(local), "refs/heads/%s", n + 11);
		snprintf(track, sizeof(track), "refs/remotes/%s/%s", x->ns, n + 11);
		have_local = git_reference_name_to_id(&lid, x->repo, local) == 0;
		if (have_local)
			sync_short(&lid, l);
		if (!git_odb_exists(odb, &heads[i]->oid)) {
			snprintf(state, sizeof(state), "not fetched (ocsb sync pull)");
		} else if (have_local) {
			size_t ahead = 0, behind = 0;

			git_graph_ahead_behind(&ahead, &behind, x->repo, &heads[i]->oid, &lid);
			if (!ahead && !behind)
				snprintf(state, sizeof(state), "same");
			else
				snprintf(state, sizeof(state), "agent %zu ahead, %zu behind", ahead,
					behind);
		} else {
			snprintf(state, sizeof(state), "agent only");
		}
		if (git_odb_exists(odb, &heads[i]->oid) &&
			!(git_reference_name_to_id(&tid, x->repo, track) == 0 &&
				git_oid_equal(&tid, &heads[i]->oid)))
			strncat(state, "; pull to update the remote-tracking ref",
				sizeof(state) - strlen(state) - 1);
		printf("%-24s %-8s %-8s %s\n", n + 11, sync_short(&heads[i]->oid, a), l, state);
	}
	if (git_branch_iterator_new(&bit, x->repo, GIT_BRANCH_LOCAL) == 0) {
		while (git_branch_next(&ref, &type, bit) == 0) {
			char l[GIT_OID_HEXSZ + 1] = "-";
			const char *name = git_reference_shorthand(ref);

			if (!strv_contains(&seen, name)) {
				if (git_reference_target(ref))
					sync_short(git_reference_target(ref), l);
				printf("%-24s %-8s %-8s %s\n", name, "-", l,
					"yours only (ocsb sync push)");
			}
			git_reference_free(ref);
		}
		git_branch_iterator_free(bit);
	}
	ret = 0;
out:
	git_remote_disconnect(x->remote);
	git_odb_free(odb);
	strv_free(&seen);
	return ret;
}

/* --- init: pin a remote agent's host and create the owner's remote sync key */

static int sync_do_init(struct sync_opts *o)
{
	struct sync_conn c;
	struct user_info me;
	char key[PATH_MAX], pin[PATH_MAX], dir[PATH_MAX], where[300], fp[128], type[64];
	char host[64] = "localhost", comment[160], *pub = NULL;
	int r;

	if (!o->host) {
		log_err("sync init needs --host HOST (the machine where the agent is provisioned; "
			"a local agent is set up by 'sudo ocsb-provision')");
		return -1;
	}
	if (user_lookup_uid(getuid(), &me) < 0) {
		log_err("cannot look up uid %u", (unsigned)getuid());
		return -1;
	}
	if (snprintf(dir, sizeof(dir), "%s/.config/ocsb", me.home) >= (int)sizeof(dir) ||
		snprintf(key, sizeof(key), "%s/remote_sync_ed25519", dir) >= (int)sizeof(key) ||
		snprintf(pin, sizeof(pin), "%s/remote_known_hosts", dir) >= (int)sizeof(pin)) {
		log_err("path too long");
		return -1;
	}
	sync_conn_init(&c);
	c.host = o->host;
	c.port = o->port ? o->port : 22;
	c.user = o->agent ? o->agent : "ai-dev";
	c.known_hosts = pin;
	c.connect_timeout_s = o->connect_timeout_s;
	if (c.port == 22)
		snprintf(where, sizeof(where), "%s", c.host);
	else
		snprintf(where, sizeof(where), "[%s]:%u", c.host, c.port);
	r = sync_host_pin(&c, o->accept_fp, fp, sizeof(fp), type, sizeof(type));
	if (r < 0) {
		log_err("%s", c.err);
		return -1;
	}
	if (r == 2) {
		/* No trust on first use: the owner compares with what the other machine says. */
		log_err("%s is not pinned yet; it shows the %s host key   %s nothing was "
			"written. "
			"On %s, run 'ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub': if it prints "
			"the "
			"same fingerprint, run this again with --accept-host-key %s",
			where, type, fp, c.host,
			!strcmp(type, "ssh-ed25519")	     ? "ed25519"
				: !strncmp(type, "ecdsa", 5) ? "ecdsa"
							     : "rsa",
			fp);
		return -1;
	}
	printf("%s %s (%s %s) in %s\n", r == 0 ? "pinned" : "already pinned:", where, type, fp,
		pin);
	gethostname(host, sizeof(host) - 1);
	snprintf(comment, sizeof(comment), "ocsb-sync-%s@%s", me.name, host);
	for (char *p = comment; *p; p++)
		if (*p <= ' ' || *p > '~')
			*p = '_';
	r = sync_keygen(dir, "remote_sync_ed25519", comment, &pub);
	if (r < 0) {
		log_err("%s: %s (remove it and its .pub to create a new one)", key, strerror(-r));
		return -1;
	}
	printf("sync key: %s.pub\n%s", key, pub);
	if (pub[0] && pub[strlen(pub) - 1] != '\n')
		putchar('\n');
	printf("On %s, the administrator authorizes it for git only (copy the line above into "
	       "a file there):\n  sudo ocsb-provision --sync-key FILE\n"
	       "then, in the project: ocsb sync pull|push|status --host %s%s%s%s%s\n",
		c.host, c.host, o->port ? " --port " : "", o->port ? strchr(where, ']') + 2 : "",
		o->agent ? " --agent " : "", o->agent ? o->agent : "");
	free(pub);
	return 0;
}

/* --- entry points */

static void sync_lib_init(void)
{
	git_libgit2_init();
	/* Fetched content is hostile: refuse malformed objects and check every hash. */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 1);
}

int sync_push_as_current_user(const char *project_path, const char *agent, unsigned ssh_port)
{
	struct sync_opts o = {0};
	struct sync_ctx x;
	int r = -1;

	sync_parse_opts(&o, 0, NULL);
	o.all = 1;
	sync_lib_init();
	if (sync_open(&x, &o, project_path, agent, ssh_port) == 0)
		r = sync_do_push(&x);
	sync_ctx_free(&x);
	git_libgit2_shutdown();
	return r;
}

int cmd_sync(int argc, char **argv)
{
	struct sync_opts o = {0};
	struct sync_ctx x;
	const char *sub = argc > 1 ? argv[1] : NULL;
	int r;

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		sync_usage(sub ? stdout : stderr);
		return sub ? 0 : 2;
	}
	if (strcmp(sub, "push") && strcmp(sub, "pull") && strcmp(sub, "status") &&
		strcmp(sub, "init")) {
		log_err("sync: unknown subcommand '%s'", sub);
		sync_usage(stderr);
		return 2;
	}
	r = sync_parse_opts(&o, argc - 2, argv + 2);
	if (r) {
		strv_free(&o.branches);
		return r == 3 ? 0 : r;
	}
	if (o.strict && strcmp(sub, "pull")) {
		log_err("--strict is for 'ocsb sync pull'");
		strv_free(&o.branches);
		return 2;
	}
	if (strcmp(sub, "push") && (o.branches.n || o.to || o.force || o.all)) {
		log_err("sync %s takes no branch names, --to, --force or --all", sub);
		strv_free(&o.branches);
		return 2;
	}
	if ((o.port || o.agent || o.accept_fp) && !o.host) {
		log_err("--port, --agent and --accept-host-key go with --host HOST");
		strv_free(&o.branches);
		return 2;
	}
	if (o.accept_fp && strcmp(sub, "init")) {
		log_err("--accept-host-key is for 'ocsb sync init --host HOST'");
		strv_free(&o.branches);
		return 2;
	}
	sync_lib_init();
	if (!strcmp(sub, "init")) {
		r = sync_do_init(&o);
		strv_free(&o.branches);
		git_libgit2_shutdown();
		return r < 0 ? 1 : 0;
	}
	r = sync_open(&x, &o, NULL, NULL, 0);
	if (r == 0) {
		if (!strcmp(sub, "push"))
			r = sync_do_push(&x);
		else if (!strcmp(sub, "pull"))
			r = sync_do_pull(&x);
		else
			r = sync_do_status(&x);
	}
	sync_ctx_free(&x);
	strv_free(&o.branches);
	git_libgit2_shutdown();
	return r < 0 ? 1 : r == 1 ? SYNC_EXIT_FLAGGED : 0;
}
