/* SPDX-License-Identifier: MIT */
/*
 * ocsb sync pull, the confined child's part (pull.c forks it; confine.c confines it before
 * it reads a byte from the agent): download the agent's branches into a quarantine
 * (objects/ocsb-incoming/pack), check the history is complete, review each branch
 * (review.c), write the memos' new content into files the parent made, and hand the parent
 * what it needs to write refs and print the summary (handover.c). It writes no ref, no
 * config and nothing outside the quarantine: the parent does, after checking every field.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <git2/sys/odb_backend.h>
#include <git2/sys/repository.h>

#include "fileops.h"
#include "log.h"
#include "sync.h"
#include "testhook.h"
#include "util.h"

/*
 * The records a branch adds after its branch record: diffstat lines (SYNC_STAT_FILES, then
 * "more") and a flag record per flag a path raises.
 */
static int sync_branch_records(
	const struct sync_review *rv, const struct sync_branch *b, struct buf *out)
{
	size_t pos = 0;

	for (size_t i = 0; i < rv->whole.n && i <= SYNC_STAT_FILES; i++) {
		if (i == SYNC_STAT_FILES) {
			if (buf_printf(out, "more\t%zu\n", rv->whole.n - i) < 0)
				return -1;
			break;
		}
		if (sync_ho_put_stat(out, &rv->whole.v[i]) < 0)
			return -1;
	}
	for (size_t i = 0; i < rv->whole.n; i++) {
		const struct sync_rfile *d = &rv->whole.v[i];
		unsigned nf = 0;

		if (!d->flags)
			continue;
		/* New since the last pull: the same path raises the same flag in old -> tip. */
		if (!rv->have_since) {
			nf = b->have_old ? 0 : d->flags;
		} else {
			while (pos < rv->since.n && strcmp(rv->since.v[pos].path, d->path) < 0)
				pos++;
			for (size_t k = pos;
				k < rv->since.n && !strcmp(rv->since.v[k].path, d->path); k++)
				nf |= rv->since.v[k].flags;
		}
		for (unsigned f = 1; f < (1u << SYNC_FLAG_COUNT); f <<= 1)
			if ((d->flags & f) && sync_ho_put_flag(out, d->path, f, (nf & f) != 0) < 0)
				return -1;
	}
	return 0;
}

/*
 * Who committed the commits new since the last pull (old -> tip), or on a first pull the
 * commits to review (base -> tip). A commit that cannot be read ends the list there (the
 * history check says why): "only the first commits read".
 */
static int sync_branch_who(struct sync_ctx *x, const struct sync_branch *b,
	const struct sync_review *rv, struct buf *out)
{
	const git_oid *hide = b->have_old ? &b->old : rv->have_base ? &rv->base : NULL;
	struct sync_whos w;

	if (sync_who_collect(x->repo, &b->tip, hide, &w) < 0) {
		w.cut = 1;
		git_error_clear();
	}
	return sync_ho_put_who(out, &w);
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
 * what is new since the last pull, as records into out. Says nothing: a failure (r < 0
 * from sync_review_run, -1 out of memory) is reported by the caller once the history is
 * known to be complete.
 */
static int sync_review_branch(struct sync_ctx *x, struct sync_branch *b,
	const struct sync_review_in *in, struct sync_review *rv, struct buf *out)
{
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
	if (sync_branch_records(rv, b, out) < 0 || sync_branch_who(x, b, rv, out) < 0) {
		git_error_set_oom();
		return -1;
	}
	return 0;
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
 * rev-list marking every ref's whole tree. git runs here, in the confined child (it
 * inherits the confinement), and sees the quarantine as an alternate object store.
 */
/* The incomplete-history error, once: what, for which branch, and what to do. */
static void sync_incomplete(struct sync_ctx *x, const char *bad, const char *why)
{
	char raw[300];

	log_err("%s sent an incomplete history%s%s%s: %s; no ref was written and nothing it "
		"sent was kept (a broken or hostile agent repository: check it with 'git fsck' "
		"on the agent's side)",
		x->cfg.agent, bad ? " for branch \"" : "", bad ? bad : "", bad ? "\"" : "",
		sync_unescape(why, raw, sizeof(raw)));
}

/*
 * Start the check: 0 with *g running git rev-list (sync_check_finish gives its verdict),
 * 0 with g->pid < 0 when it is decided already (complete), -1 when it failed (said).
 * known: what the owner's refs name (sync_refs_load); NULL leaves the check to git.
 */
static int sync_check_start(struct sync_ctx *x, const struct sync_branch *br, size_t nb,
	const struct sync_oidset *known, const char *incoming, struct sync_git *g)
{
	static const char *const args[] = {"rev-list", "--objects", "--quiet", "--stdin", "--not",
		"--branches", "--tags", "--remotes", NULL};
	/*
	 * The quarantine as an alternate; no configuration but the repository's (the
	 * owner's ~/.gitconfig is out of the child's reach, and nothing there matters here).
	 */
	char alt[PATH_MAX + 64];
	const char *env[] = {alt, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", NULL};
	struct buf tips = {0};
	char why[300] = "", hex[GIT_OID_HEXSZ + 1];
	const char *bad = NULL;
	int r, ret = -1;

	g->pid = -1;
	g->in = g->out = g->err = -1;
	if (!nb)
		return 0;
	snprintf(alt, sizeof(alt), "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s", incoming);
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
	if (sync_git_start(g, git_repository_path(x->repo), x->me.home, args, env,
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

/* A memo's new content into the file the parent made: 0, or -1 (the memo is kept). */
static int sync_memo_fill(int fd, const struct sync_rmemos *rm, const struct sync_memos *m)
{
	FILE *f = fdopen(fd, "w");
	int bad;

	if (!f)
		return -1;
	if (rm)
		sync_rmemo_write(f, rm);
	else
		sync_memo_write(f, m);
	bad = fflush(f) != 0 || ferror(f);
	return fclose(f) != 0 || bad ? -1 : 0;
}

/*
 * The download's objects go to the quarantine: a pack backend there, consulted first, so
 * libgit2's indexer writes its pack into it (git_odb_write_pack takes the first backend
 * that can) and the checks and the review read the new objects from it too. The owner's
 * object store stays read-only to this process; the parent moves the pack in.
 */
static int sync_quarantine(git_repository *repo, const char *incoming)
{
	git_odb *odb = NULL;
	git_odb_backend *be = NULL;
	int r = -1;

	if (git_repository_odb(&odb, repo) < 0 || git_odb_backend_pack(&be, incoming) < 0)
		goto out;
	if (git_odb_add_backend(odb, be, 1000) < 0) {
		be->free(be);
		goto out;
	}
	r = 0;
out:
	git_odb_free(odb);
	return r;
}

/* The pull itself, after the confinement: on success it hands over and exits; -1 said. */
static int sync_fetch_run(struct sync_ctx *x, const struct sync_fetch_io *io)
{
	const git_remote_head **heads;
	size_t nheads = 0, nb = 0, nskipped = 0;
	struct sync_branch *br = NULL;
	struct strv specs = {0};
	struct buf *recs = NULL, out = {0};
	git_remote_callbacks cb;
	git_fetch_options fo;
	char prefix[SYNC_REF_MAX + 20];
	const char *common = git_repository_commondir(x->repo);
	struct sync_memos memo = {0}, memo2 = {0};
	struct sync_rmemos rmemo = {0}, rmemo2 = {0};
	struct sync_reftab tracked = {0}, locals = {0};
	struct sync_oidset known = {0};
	struct sync_allrefs all = {0};
	git_repository *dlrepo = NULL;
	git_remote *dlremote = NULL, *rem = NULL;
	git_remote_create_options ro;
	int known_ok = 0;
	git_oid head_id;
	int have_head = 0;
	int rmemo_dirty = 0, review_r = 0;
	struct sync_git check = {.pid = -1, .in = -1, .out = -1, .err = -1};
	const struct sync_branch *review_bad = NULL;
	char review_err[512];
	int ret = -1, r;

	if (sync_memo_load(common, &memo) < 0 || sync_rmemo_load(common, &rmemo) < 0)
		goto out;
	sync_rmemos_sort(&rmemo);
	sync_trace("memos loaded");
	if (sync_quarantine(x->repo, io->incoming) < 0) {
		sync_git_fail(x, "preparing the download's quarantine");
		goto out;
	}
	snprintf(prefix, sizeof(prefix), "refs/remotes/%s/", x->ns);
	if (sync_refs_load(x->repo, prefix, &tracked, &locals, &all, &known, &known_ok) < 0)
		goto out;
	have_head = git_reference_name_to_id(&head_id, x->repo, "HEAD") == 0;
	git_error_clear();
	git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION);
	ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
	/*
	 * The download negotiates with the refs just read, from memory (haves.c). Its handle
	 * has no git directory: the repository's own would have libgit2 >= 1.7 write
	 * .git/shallow, which this process may not (it works in the quarantine instead).
	 */
	if (sync_haves_repo(&dlrepo, x->repo, (const char *const *)all.names, all.ids, all.n) <
		0) {
		sync_git_fail(x, "preparing the download's handle");
		goto out;
	}
	{
		git_config *cfg = NULL;

		/* Its configuration: the repository's snapshot, not a read of ~/.gitconfig. */
		if (git_repository_config_snapshot(&cfg, x->repo) == 0)
			git_repository_set_config(dlrepo, cfg);
		git_config_free(cfg);
	}
	ro.repository = dlrepo;
	if (git_remote_create_with_opts(&dlremote, x->url, &ro) < 0) {
		sync_git_fail(x, "creating the in-memory remote");
		goto out;
	}
	rem = dlremote;
	git_error_clear();
	sync_trace("refs read (%zu), download handle in memory", all.n);
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
	recs = calloc(nheads ? nheads : 1, sizeof(*recs));
	if (!br || !recs)
		goto oom;
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
			log_warn("skipped the agent's ref \"%s\": %s", n, why);
			if (buf_puts(&out, "skip\t") < 0 || sync_ho_put_text(&out, n) < 0 ||
				buf_puts(&out, "\t") < 0 || sync_ho_put_text(&out, why) < 0 ||
				buf_puts(&out, "\n") < 0)
				goto oom;
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
		 * skipped, one glob wants exactly the same objects (refs are written by the
		 * parent, by name, either way).
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
		/* Objects only: the parent writes the refs, one by one, after the checks. */
		if (git_remote_download(rem, &arr, &fo) < 0) {
			sync_git_fail(x, "fetching from the agent");
			goto out;
		}
		/* A transport error libgit2 recovered from is not the cause of a later failure. */
		x->conn.err[0] = '\0';
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
	if (sync_check_start(x, br, nb, known_ok ? &known : NULL, io->incoming, &check) < 0)
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
			r = sync_review_branch(x, b, &in, &rv, &recs[i]);
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
	for (size_t i = 0; i < nb; i++)
		if (sync_ho_put_branch(&out, &br[i]) < 0 ||
			buf_append(&out, recs[i].data ? recs[i].data : "", recs[i].len) < 0)
			goto oom;

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
	/* The parent renames the files it made over the memos once the refs are written. */
	{
		const char *rv = "keep", *uv = "keep";

		if (rmemo_dirty) {
			rv = !rmemo2.n						      ? "remove"
				: sync_memo_fill(io->memo_review, &rmemo2, NULL) == 0 ? "write"
										      : "keep";
		}
		/* Unchanged: not rewritten (an empty one is "removed": a stale file goes). */
		if (!(memo2.n && sync_memos_equal(&memo, &memo2)))
			uv = !memo2.n							? "remove"
				: sync_memo_fill(io->memo_unrelated, NULL, &memo2) == 0 ? "write"
											: "keep";
		if (buf_printf(&out, "memo\treview\t%s\nmemo\tunrelated\t%s\n", rv, uv) < 0)
			goto oom;
	}
	sync_trace("memos written%s", rmemo_dirty ? " (review memo rewritten)" : "");
	/*
	 * Agent branches that disappeared: the parent removes their remote-tracking refs if
	 * they still name the same commit (the table was read before anything was written).
	 */
	for (size_t k = 0; k < tracked.n; k++) {
		const struct sync_refent *e = &tracked.v[k];
		char hex[GIT_OID_HEXSZ + 1], full[SYNC_REF_MAX + 32], why[128];
		int found = 0;

		if (!e->direct)
			continue;
		for (size_t i = 0; i < nb && !found; i++)
			found = !strcmp(e->name, br[i].name);
		snprintf(full, sizeof(full), "refs/heads/%s", e->name);
		if (found || strlen(e->name) + 11 > SYNC_REF_MAX ||
			!sync_ref_name_ok(full, why, sizeof(why)))
			continue;
		if (buf_printf(&out, "deleted\t%s\t%s\n", e->name,
			    git_oid_tostr(hex, sizeof(hex), &e->id)) < 0)
			goto oom;
	}
#ifdef OCSB_TEST_BUILD
	{
		/* Test hook (t-93): a record a turned child might add; the parent must refuse it. */
		const char *extra = TESTHOOK_ENV("OCSB_TEST_SYNC_HANDOVER");

		if (extra && buf_printf(&out, "%s\n", extra) < 0)
			goto oom;
	}
#endif
	if (buf_puts(&out, "end\n") < 0 || fo_write_all(io->rec, out.data, out.len) < 0) {
		log_err("handing the result to the parent: %s", strerror(errno));
		goto out;
	}
	sync_trace("handed over");
	/*
	 * Done: the parent goes on at the end of the pipes, and may start the next pull at
	 * once (the lock is released here). Nothing is freed: the process ends.
	 */
	close(io->lockfd);
	close(io->rec);
	close(STDERR_FILENO);
	_exit(0);
oom:
	log_err("out of memory");
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
	if (recs)
		for (size_t i = 0; i < nheads; i++)
			buf_free(&recs[i]);
	free(recs);
	buf_free(&out);
	free(br);
	strv_free(&specs);
	if (check.pid >= 0)
		sync_git_finish(&check, 1);
	return ret;
}

/* Keep only the descriptors in keep[] (sorted, distinct) above stderr. */
static void sync_close_others(const int *keep, size_t n)
{
	unsigned lo = 3;

	for (size_t i = 0; i <= n; i++) {
		unsigned hi = i < n ? (unsigned)keep[i] : ~0U;

		if (hi > lo && close_range(lo, hi - 1, 0) < 0)
			for (unsigned fd = lo; fd < hi && fd < 4096; fd++)
				close((int)fd);
		lo = hi + 1;
		if (i < n && keep[i] < 3)
			lo = 3;
	}
}

static int int_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

void sync_fetch_child(struct sync_ctx *x, struct sync_fetch_io *io, pid_t parent)
{
	struct sync_confined conf;
	git_config *snap = NULL;
	char err[512], desc[200];
	int keep[8], nk = 0, nullfd, st = 1;

	/* The child dies with the pull; its git rev-list dies with it. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(1);
	/*
	 * stdin and stdout: nothing; stderr: a pipe the parent reads line by line and
	 * escapes before it reaches the terminal. The child keeps its channel, its pipes, the
	 * memo files the parent made, and the lock (until it has handed over).
	 */
	nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0 || dup2(nullfd, 0) < 0 || dup2(nullfd, 1) < 0 || dup2(io->err, 2) < 0)
		_exit(1);
	keep[nk++] = io->data;
	keep[nk++] = io->ctl;
	keep[nk++] = io->rec;
	keep[nk++] = io->memo_review;
	keep[nk++] = io->memo_unrelated;
	keep[nk++] = io->lockfd;
	if ((keep[nk] = sync_trace_reopen()) >= 0)
		nk++;
	qsort(keep, (size_t)nk, sizeof(keep[0]), int_cmp);
	sync_close_others(keep, (size_t)nk);
	signal(SIGPIPE, SIG_IGN);
	x->conn.relay_fd = io->data;
	x->conn.relay_ctl = io->ctl;
	x->rec_fd = io->rec;
	/*
	 * libgit2 reads configuration files again when they change: the child works on a
	 * snapshot taken now, before it loses access to ~/.gitconfig.
	 */
	if (git_repository_config_snapshot(&snap, x->repo) == 0)
		git_repository_set_config(x->repo, snap);
	git_config_free(snap);
	git_error_clear();
	/*
	 * The download's handle (haves.c) has no git directory, and libgit2 >= 1.7 writes the
	 * shallow roots after every download to "shallow" under it: a path relative to the
	 * working directory (shallow.lock made, then removed when there are no roots). The
	 * quarantine is the one place this process may make files, so it works there; the
	 * repository's own directory stays read-only to it.
	 */
	if (chdir(io->confine->incoming) < 0) {
		log_err("cannot enter the download's quarantine %s: %s; nothing was fetched",
			io->confine->incoming, strerror(errno));
		_exit(1);
	}
	sync_confine_probe("before confinement");
	if (sync_confine(io->confine, &conf, err, sizeof(err)) < 0) {
		log_err("cannot confine the process that reads the agent's data: %s; nothing "
			"was fetched",
			err);
		_exit(1);
	}
	sync_confine_probe("confined");
	sync_confined_describe(&conf, desc, sizeof(desc));
	sync_trace("sync: confined child: %s", desc);
	if (!conf.abi)
		log_warn("this kernel has no Landlock: the process that reads the agent's data "
			 "runs with seccomp and no_new_privs only, with access to every file you "
			 "can read and write (ocsb doctor; a kernel >= 5.13 confines it)");
	(void)sync_fetch_run(x, io); /* returns on failure only (said) */
	close(io->rec);
	close(STDERR_FILENO);
	_exit(st);
}
