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
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fileops.h"
#include "log.h"
#include "paths.h"
#include "sync.h"
#include "util.h"

/* --- output helpers */

const char *sync_short(const git_oid *id, char *buf)
{
	return git_oid_tostr(buf, 8, id);
}

/* One line for the failure of a git operation: the transport's root cause first. */
void sync_git_fail(struct sync_ctx *x, const char *what)
{
	const git_error *e = git_error_last();

	if (x->progress_shown)
		fputc('\n', stderr), x->progress_shown = 0;
	if (x->conn.err[0]) {
		char raw[sizeof(x->conn.err)];

		log_err("%s: %s", what, sync_unescape(x->conn.err, raw, sizeof(raw)));
	} else
		log_err("%s: %s", what, e && e->message ? e->message : "unknown libgit2 error");
}

/* --- callbacks (payload: struct sync_ctx, whose first member is the sync_conn) */

/* The pull's child: a record for the parent, which prints it (handover.c). */
static void sync_to_parent(struct sync_ctx *x, const char *rec, size_t len)
{
	(void)fo_write_all(x->rec_fd, rec, len);
}

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
	if (x->rec_fd >= 0) {
		char rec[sizeof(esc) + 16];
		int n = snprintf(rec, sizeof(rec), "remote\t%s\n", esc);

		sync_to_parent(x, rec, (size_t)n);
		return 0;
	}
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
	if (x->tty && !x->o->json && x->rec_fd >= 0) {
		/* Ten a second at most, and the last one: a pipe write per object is not free. */
		static struct timespec last;
		struct timespec now;
		char rec[96];
		int n;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if (st->received_objects < st->total_objects &&
			(now.tv_sec - last.tv_sec) * 1000 + (now.tv_nsec - last.tv_nsec) / 1000000 <
				100)
			return 0;
		last = now;
		n = snprintf(rec, sizeof(rec), "progress\t%u\t%u\t%zu\n", st->received_objects,
			st->total_objects, st->received_bytes);
		sync_to_parent(x, rec, (size_t)n);
	} else if (x->tty && !x->o->json) {
		fprintf(stderr, "\rreceiving objects: %u/%u, %.1f MiB\033[K", st->received_objects,
			st->total_objects, (double)st->received_bytes / (1024.0 * 1024.0));
		x->progress_shown = 1;
	}
	return 0;
}

void sync_callbacks(struct sync_ctx *x, git_remote_callbacks *cb)
{
	git_remote_init_callbacks(cb, GIT_REMOTE_CALLBACKS_VERSION);
	cb->transport = sync_transport_cb;
	cb->payload = x;
	cb->sideband_progress = sync_on_sideband;
	cb->transfer_progress = sync_on_transfer;
}

/* --- setup */

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
	char full[SYNC_REF_MAX + 40], port[32] = "",
				      agent[80] = ""; /* " --agent " and a 63-character name */
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
 * Load ocsb.conf, open the repository around the current directory, check it is a
 * configured project, and prepare the connection.
 */
static int sync_open(struct sync_ctx *x, struct sync_opts *o)
{
	struct paths p;
	char conf[PATH_MAX], err[1024], top[PATH_MAX], real[PATH_MAX];
	const char *wd;
	git_remote_create_options ro;
	int r;

	memset(x, 0, sizeof(*x));
	x->o = o;
	x->rec_fd = -1;
	x->tty = isatty(STDERR_FILENO);
	sync_conn_init(&x->conn);
	paths_default(&p);
	config_defaults(&x->cfg);
	if (o->host) {
		/* Another machine: its ocsb.conf is there, not here; nothing local is read. */
		snprintf(x->cfg.agent, sizeof(x->cfg.agent), "%s", o->agent ? o->agent : "ai-dev");
		x->cfg.ssh_port = o->port ? o->port : 22;
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
	r = git_repository_open_ext(&x->repo, ".", 0, NULL);
	if (r < 0) {
		const git_error *e = git_error_last();
		char cwd[PATH_MAX];

		log_err("%s: not inside a git repository (%s)",
			getcwd(cwd, sizeof(cwd)) ? cwd : ".", e ? e->message : "not found");
		/* Where to go instead: the projects this agent works on. */
		for (size_t i = 0; !o->host && i < x->cfg.projects.n; i++)
			log_err("  a project of %s: cd %s", x->cfg.agent, x->cfg.projects.v[i]);
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

/* --- entry points */

static int trace_on = -1, trace_statm = -1;

int sync_trace_reopen(void)
{
	if (trace_statm >= 0)
		close(trace_statm);
	trace_statm = -1;
	if (trace_on > 0)
		trace_statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	return trace_statm;
}

/*
 * OCSB_SYNC_TRACE=1: one line on stderr per phase, milliseconds since the process
 * started (its start time from /proc, 10 ms steps; then CLOCK_BOOTTIME). For profiling.
 */
void sync_trace(const char *fmt, ...)
{
	static double t0;
	struct timespec ts;
	va_list ap;

	if (trace_on < 0) {
		FILE *f = fopen("/proc/self/stat", "re");
		unsigned long long st = 0;
		char line[1024], *p = NULL;

		trace_on = getenv("OCSB_SYNC_TRACE") != NULL;
		if (trace_on && f && fgets(line, sizeof(line), f) && (p = strrchr(line, ')')))
			(void)sscanf(p + 2,
				"%*c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
				"%*s %*s %*s %*s %*s %llu",
				&st);
		if (f)
			fclose(f);
		t0 = (double)st * 1000.0 / (double)sysconf(_SC_CLK_TCK);
	}
	if (!trace_on)
		return;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	{
		/* Resident memory now (statm's second field, in pages): where a pull grows. */
		unsigned long size = 0, res = 0;
		char st[128];
		ssize_t n;

		if (trace_statm < 0)
			trace_statm = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
		n = trace_statm >= 0 ? pread(trace_statm, st, sizeof(st) - 1, 0) : -1;
		if (n > 0) {
			st[n] = '\0';
			if (sscanf(st, "%lu %lu", &size, &res) != 2)
				res = 0;
		}
		fprintf(stderr, "ocsb trace %8.1f ms %7lu KiB: ",
			(double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 - t0,
			res * (unsigned long)sysconf(_SC_PAGESIZE) / 1024);
	}
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void sync_lib_init(void)
{
	sync_trace("start");
	git_libgit2_init();
	/* Fetched content is hostile: refuse malformed objects and check every hash. */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 1);
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 1);
	sync_trace("libgit2 initialized");
}

void sync_opts_defaults(struct sync_opts *o)
{
	o->max_bytes = 512ull << 20;
	o->max_objects = 1000000;
	o->timeout_s = 300;
	o->connect_timeout_s = 15;
	o->io_timeout_s = 60;
}

int sync_run(const char *sub, struct sync_opts *o)
{
	struct sync_ctx x;
	int r;

	sync_lib_init();
	if (!strcmp(sub, "init")) {
		r = sync_do_init(o);
		git_libgit2_shutdown();
		return r < 0 ? 1 : 0;
	}
	r = sync_open(&x, o);
	sync_trace("opened");
	if (r == 0) {
		if (!strcmp(sub, "push"))
			r = sync_do_push(&x);
		else if (!strcmp(sub, "pull"))
			r = sync_do_pull(&x);
		else
			r = sync_do_status(&x);
	}
	sync_ctx_free(&x);
	git_libgit2_shutdown();
	return r < 0 ? 1 : r == 1 ? SYNC_EXIT_FLAGGED : 0;
}
