/* SPDX-License-Identifier: MIT */
/*
 * ocsb sync pull: fetch the agent's branches into refs/remotes/<agent>/, review each one
 * (review.c) and report it as text or JSON. Nothing but objects and those refs (with
 * their reflogs) is written to the owner's repository (invariant 5).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "fileops.h"
#include "sync.h"
#include "util.h"

#define SYNC_STAT_FILES 20 /* files listed per branch in the diffstat */

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

/* Say why the review of branch b failed: r from sync_review_run, msg libgit2's error then. */
static void sync_review_failed(
	struct sync_ctx *x, const struct sync_branch *b, int r, const char *msg)
{
	if (r == SYNC_DIFF_TOO_BIG)
		/* log_err escapes the name (the agent's) itself. */
		log_err("%s/%s changes more than %d paths, or nests trees too deep, to be reviewed "
			"(%s): look at it with git before you check it out",
			x->ns, b->name, SYNC_REVIEW_MAX_PATHS, msg);
	else
		log_err("reviewing the fetched branch: %s", msg[0] ? msg : "unknown libgit2 error");
}

/*
 * Review branch b (review.c): its base, counts, diffstat and flags, the whole branch and
 * what is new since the last pull. Says nothing: a failure (r < 0 from sync_review_run,
 * -1 out of memory) is reported by the caller once the history is known to be complete.
 */
static int sync_review_branch(struct sync_ctx *x, struct sync_branch *b,
	const struct sync_review_in *in, struct sync_review *rv, struct sync_flagrec **fl,
	size_t *nfl, struct buf *stat)
{
	size_t pos = 0;
	int r;

	r = sync_review_run(x->repo, in, rv);
	if (r < 0)
		return r;
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
			git_error_set_oom();
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
/* The incomplete-history error, once: what, for which branch, and what to do. */
static void sync_incomplete(struct sync_ctx *x, const char *bad, const char *why)
{
	char raw[300];

	log_err("%s sent an incomplete history%s%s%s: %s; no ref was written (a broken or "
		"hostile agent repository: check it with 'git fsck' on the agent's side; "
		"the unreferenced objects received go with 'git gc --prune=now')",
		x->cfg.agent, bad ? " for branch \"" : "", bad ? bad : "", bad ? "\"" : "",
		sync_unescape(why, raw, sizeof(raw)));
}

/*
 * Start the check: 0 with *g running git rev-list (sync_check_finish gives its verdict),
 * 0 with g->pid < 0 when it is decided already (complete), -1 when it failed (said).
 * known: what the owner's refs name (sync_refs_load); NULL leaves the check to git.
 */
static int sync_check_start(struct sync_ctx *x, const struct sync_branch *br, size_t nb,
	const struct sync_oidset *known, struct sync_git *g)
{
	static const char *const args[] = {"rev-list", "--objects", "--quiet", "--stdin", "--not",
		"--branches", "--tags", "--remotes", NULL};
	struct buf tips = {0};
	char why[300] = "", hex[GIT_OID_HEXSZ + 1];
	const char *bad = NULL;
	int r, ret = -1;

	g->pid = -1;
	g->in = g->out = g->err = -1;
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
	/*
	 * A few new commits on top of the owner's refs (known: the commits they name, read
	 * before this pull wrote any ref): checked here, without running git.
	 */
	if (known) {
		git_oid *ids = calloc(nb, sizeof(*ids));
		char raw[600];

		if (!ids) {
			log_err("out of memory");
			goto out;
		}
		for (size_t i = 0; i < nb; i++)
			git_oid_cpy(&ids[i], &br[i].tip);
		r = sync_fast_connected_known(x->repo, ids, nb, known, raw, sizeof(raw));
		free(ids);
		if (r != 0) {
			if (r < 0)
				sync_escape(raw, strlen(raw), why, sizeof(why));
			ret = r > 0 ? 0 : -1;
			goto out;
		}
	}
	if (sync_git_start(g, git_repository_path(x->repo), x->me.home, args,
		    SYNC_GIT_STDIN | SYNC_GIT_STDERR) < 0) {
		log_err("cannot check the fetched history: no ref was written");
		goto out;
	}
	/* A few KiB of ids: rev-list reads them all before it writes anything. */
	if (fo_write_all(g->in, tips.data, tips.len) < 0) {
		log_err("writing to git rev-list: %s", strerror(errno));
		sync_git_finish(g, 1);
		g->pid = -1;
		goto out;
	}
	close(g->in);
	g->in = -1;
	ret = 0;
out:
	if (ret < 0 && why[0])
		sync_incomplete(x, bad, why);
	buf_free(&tips);
	return ret;
}

/* rev-list's verdict (g from sync_check_start): 0 complete, -1 not (said). */
static int sync_check_finish(struct sync_ctx *x, struct sync_git *g)
{
	char why[300], msg[1024];
	int r, st;

	if (g->pid < 0)
		return 0;
	r = sync_git_read_err(g, msg, sizeof(msg), x->conn.deadline);
	st = sync_git_finish(g, r < 0);
	g->pid = -1;
	if (r == -ETIMEDOUT) {
		log_err("time limit reached while checking the fetched history (raise it with "
			"--timeout): no ref was written");
		return -1;
	}
	if (r == 0 && st == 0)
		return 0;
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
	sync_incomplete(x, NULL, why);
	return -1;
}

int sync_do_pull(struct sync_ctx *x)
{
	const git_remote_head **heads;
	size_t nheads, nb = 0, nfl = 0, nskipped = 0;
	struct sync_branch *br = NULL;
	struct sync_flagrec *fl = NULL;
	struct strv specs = {0}, skipped = {0}, deleted = {0};
	struct buf *bstat = NULL;
	git_remote_callbacks cb;
	git_fetch_options fo;
	git_reference *ref;
	char prefix[SYNC_REF_MAX + 20], objects[PATH_MAX];
	const char *common = git_repository_commondir(x->repo);
	struct timespec start;
	struct sync_memos memo = {0}, memo2 = {0};
	struct sync_rmemos rmemo = {0}, rmemo2 = {0};
	struct sync_reftab tracked = {0}, locals = {0};
	struct sync_oidset known = {0};
	struct sync_allrefs all = {0};
	git_repository *dlrepo = NULL;
	git_remote *dlremote = NULL, *rem = x->remote;
	int known_ok = 0;
	git_oid head_id;
	int have_head = 0;
	int rmemo_dirty = 0, review_r = 0;
	struct sync_git check = {.pid = -1, .in = -1, .out = -1, .err = -1};
	const struct sync_branch *review_bad = NULL;
	char review_err[512];
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
	/*
	 * The SSH handshake and the agent's upload-pack start (200-300 ms, the other side's
	 * work mostly) overlap reading this repository's refs and memos.
	 */
	(void)sync_preconnect(&x->conn, "git-upload-pack");
	snprintf(objects, sizeof(objects), "%sobjects", common);
	r = sync_clean_tmp_packs(objects, &start, &removed);
	if (r < 0)
		log_warn("%s/pack: cannot remove temporary packs: %s", objects, strerror(-r));
	if (removed)
		log_info("removed %u temporary pack%s left by an interrupted pull", removed,
			removed == 1 ? "" : "s");

	if (sync_memo_load(common, &memo) < 0 || sync_rmemo_load(common, &rmemo) < 0)
		goto out;
	sync_rmemos_sort(&rmemo);
	sync_trace("locked, temporary packs checked, memos loaded");

	/* The connectivity check runs git: fail before downloading anything without it. */
	if (sync_git_check() < 0)
		goto out;
	snprintf(prefix, sizeof(prefix), "refs/remotes/%s/", x->ns);
	if (sync_refs_load(x->repo, prefix, &tracked, &locals, &all, &known, &known_ok) < 0)
		goto out;
	have_head = git_reference_name_to_id(&head_id, x->repo, "HEAD") == 0;
	git_error_clear();
	/*
	 * The download negotiates with the refs just read, from memory (haves.c); should
	 * that handle not be made, the ordinary remote does the same, reading them again.
	 */
	if (sync_haves_repo(&dlrepo, x->repo, (const char *const *)all.names, all.ids, all.n) ==
		0) {
		git_remote_create_options ro;

		git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION);
		ro.repository = dlrepo;
		ro.flags =
			GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
		if (git_remote_create_with_opts(&dlremote, x->url, &ro) == 0)
			rem = dlremote;
	}
	git_error_clear();
	sync_trace("refs read (%zu), download handle %s", all.n,
		rem == dlremote ? "in memory" : "the repository");
	sync_callbacks(x, &cb);
	if (git_remote_connect(rem, GIT_DIRECTION_FETCH, &cb, NULL, NULL) < 0) {
		sync_git_fail(x, "connecting to the agent");
		goto out;
	}
	sync_trace("connected, advertisement read");
	if (git_remote_ls(&heads, &nheads, rem) < 0) {
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
		if (git_remote_download(rem, &arr, &fo) < 0) {
			sync_git_fail(x, "fetching from the agent");
			goto out;
		}
		/* A transport error libgit2 recovered from is not the cause of a later failure. */
		x->conn.err[0] = '\0';
		if (x->progress_shown)
			fputc('\n', stderr), x->progress_shown = 0;
	}
	sync_trace("downloaded (%zu branches)", nb);
	git_remote_disconnect(rem);
	x->conn.err[0] = '\0';
	sync_trace("disconnected");
	/*
	 * Before any ref is written the fetched history must be complete (git rev-list, or
	 * the in-process check for a few commits). The review reads the same objects and
	 * runs meanwhile, on the other core: what it finds is used, and any ref written,
	 * only once the history is known complete; a review that fails on an incomplete
	 * history is reported as that.
	 */
	if (sync_check_start(x, br, nb, known_ok ? &known : NULL, &check) < 0)
		goto out;
	sync_trace(
		"history check started (%s)", check.pid >= 0 ? "git rev-list" : "in-process, done");
	for (size_t i = 0; i < nb; i++) {
		struct sync_branch *b = &br[i];
		char track[SYNC_REF_MAX + 160];
		const struct sync_refent *te, *le;

		snprintf(track, sizeof(track), "refs/remotes/%s/%s", x->ns, b->name);
		if ((te = sync_reftab_find(&tracked, b->name)) && te->direct) {
			git_oid_cpy(&b->old, &te->id);
			b->have_old = 1;
		}
		if (!b->have_old)
			b->state = "new";
		else if (git_oid_equal(&b->old, &b->tip))
			b->state = "up to date";
		else if (git_graph_descendant_of(x->repo, &b->tip, &b->old) == 1)
			b->state = "updated";
		else
			b->state = "forced";
		/*
		 * Review base: where the agent's work starts from the owner's point of view,
		 * the owner's branch of that name; without one, the owner's HEAD, so a second
		 * pull still shows what the branch carries; without common history, what
		 * changed since the last pull.
		 */
		{
			struct sync_review_in in = {.tip = &b->tip,
				.old = b->have_old ? &b->old : NULL,
				.memo = sync_rmemo_bsearch(&rmemo, track),
				.walk_limit = SYNC_HISTORY_WALK};
			struct sync_review rv;

			if ((le = sync_reftab_find(&locals, b->name)) &&
				!git_oid_is_zero(&le->id)) {
				b->have_local = 1;
				in.against = &le->id;
				in.have_local = 1;
			} else if (have_head) {
				const struct sync_memo *m = sync_memo_find(&memo, track);

				in.against = &head_id;
				in.unrelated_hint = m &&
					sync_still_unrelated(x->repo, &m->tip, &b->tip, &m->against,
						&head_id, SYNC_MEMO_WALK) == 1;
			}
			git_error_clear();
			r = sync_review_branch(x, b, &in, &rv, &fl, &nfl, &bstat[i]);
			if (r < 0) {
				const git_error *e = git_error_last();

				snprintf(review_err, sizeof(review_err), "%s",
					e && e->message ? e->message : "");
				review_r = r;
				review_bad = b;
				sync_review_free(&rv);
				break;
			}
			if (!in.have_local && in.against && (in.unrelated_hint || rv.unrelated))
				(void)sync_memo_add(&memo2, track, &b->tip, in.against);
			if (rv.have_memo) {
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
		}
	}
	sync_trace("reviewed");
	if (sync_check_finish(x, &check) < 0)
		goto out;
	sync_trace("history checked");
	if (review_bad) {
		sync_review_failed(x, review_bad, review_r, review_err);
		goto out;
	}
	for (size_t i = 0; i < nb; i++) {
		struct sync_branch *b = &br[i];
		char track[SYNC_REF_MAX + 160], msg[128];
		git_reference *nref = NULL;

		if (!strcmp(b->state, "up to date"))
			continue;
		snprintf(track, sizeof(track), "refs/remotes/%s/%s", x->ns, b->name);
		snprintf(msg, sizeof(msg), "ocsb sync pull: %s",
			!strcmp(b->state, "forced") ? "forced-update" : b->state);
		if (git_reference_create(&nref, x->repo, track, &b->tip, 1, msg) < 0) {
			sync_git_fail(x, track);
			goto out;
		}
		git_reference_free(nref);
		sync_ensure_reflog(x, track, &b->tip, msg);
	}
	sync_trace("refs written");

	/* What this pull learnt replaces its namespace's memo; other agents' entries stay. */
	for (size_t i = 0; i < memo.n; i++)
		if (strncmp(memo.v[i].ref, prefix, strlen(prefix)) != 0)
			(void)sync_memo_add(
				&memo2, memo.v[i].ref, &memo.v[i].tip, &memo.v[i].against);
	{
		/* rmemo2 holds this pull's branches so far: found by bisection over their order. */
		size_t n2 = rmemo2.n, *ord = sync_rmemos_order(&rmemo2);

		for (size_t i = 0; i < rmemo.n; i++) {
			if (strncmp(rmemo.v[i].ref, prefix, strlen(prefix)) != 0) {
				if (sync_rmemo_push(&rmemo2, &rmemo.v[i]) < 0)
					rmemo_dirty = 1;
			} else if (!ord || !sync_rmemos_has(&rmemo2, ord, n2, rmemo.v[i].ref)) {
				rmemo_dirty = 1; /* a branch gone (or no memory): rewritten */
			}
		}
		free(ord);
	}
	if (rmemo_dirty) {
		r = sync_rmemo_save(common, &rmemo2);
		if (r < 0)
			log_warn("%s%s: %s (the next pull may be slower)", common,
				"ocsb-sync.review", strerror(-r));
	}
	/* Unchanged: not rewritten (an empty one is saved: that removes a stale file). */
	r = memo2.n && sync_memos_equal(&memo, &memo2) ? 0 : sync_memo_save(common, &memo2);
	if (r < 0)
		log_warn("%s%s: %s (the next pull may be slower)", common, "ocsb-sync.unrelated",
			strerror(-r));
	sync_trace("memos saved%s", rmemo_dirty ? " (review memo rewritten)" : "");
	/*
	 * Agent branches that disappeared: remove their remote-tracking refs, and say so
	 * (the table was read before this pull wrote refs: it has no new name).
	 */
	for (size_t k = 0; k < tracked.n; k++) {
		const struct sync_refent *e = &tracked.v[k];
		char full[SYNC_REF_MAX + 200], hex[GIT_OID_HEXSZ + 1], line[SYNC_REF_MAX + 200];
		int found = 0;

		if (!e->direct)
			continue;
		for (size_t i = 0; i < nb && !found; i++)
			found = !strcmp(e->name, br[i].name);
		if (found)
			continue;
		snprintf(full, sizeof(full), "%s%s", prefix, e->name);
		if (git_reference_lookup(&ref, x->repo, full) == 0) {
			if (git_reference_type(ref) == GIT_REFERENCE_DIRECT) {
				git_oid_tostr(hex, sizeof(hex), git_reference_target(ref));
				snprintf(line, sizeof(line), "%s\t%s", e->name, hex);
				if (git_reference_delete(ref) == 0)
					strv_push(&deleted, line);
			}
			git_reference_free(ref);
		}
	}
	git_error_clear();

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
	sync_trace("deleted refs checked, printed");
	ret = x->o->strict && nfl ? 1 : 0;
out:
	sync_memos_free(&memo);
	sync_memos_free(&memo2);
	sync_rmemos_free(&rmemo);
	sync_rmemos_free(&rmemo2);
	sync_reftab_free(&tracked);
	sync_reftab_free(&locals);
	sync_oidset_free(&known);
	sync_allrefs_free(&all);
	git_remote_free(dlremote);
	git_repository_free(dlrepo);
	if (bstat)
		for (size_t i = 0; i < nheads; i++)
			buf_free(&bstat[i]);
	free(bstat);
	free(br);
	free(fl);
	strv_free(&specs);
	strv_free(&skipped);
	strv_free(&deleted);
	if (check.pid >= 0)
		sync_git_finish(&check, 1);
	sync_preconnect_drop(&x->conn);
	if (lockfd >= 0)
		close(lockfd);
	return ret;
}
