/* SPDX-License-Identifier: MIT */
/*
 * ocsb sync pull, the owner's side. Least authority for what the agent wrote (issue 27):
 * this process holds every right the owner has (the sync key, ssh-agent, the home, the
 * terminal) and never parses a byte the agent sent. It
 *
 * 1. takes the pull's lock, empties the quarantine (objects/ocsb-incoming/pack) and makes
 *    the files the memos' new content will go to;
 * 2. forks the child (fetch.c), which confines itself (confine.c: Landlock, seccomp,
 *    no_new_privs) before it reads anything, then reads the refs and memos;
 * 3. meanwhile opens the SSH session (pinned host key, the sync key or ssh-agent: the key
 *    is read here, after the fork, so no copy of it is ever in the child's memory), starts
 *    git-upload-pack, and relays the channel's bytes to the child over a socket pair,
 *    keeping the time limit and the byte bound itself;
 * 4. reads the child's stderr (each line escaped before it reaches the terminal) and its
 *    handover (handover.c: every field checked);
 * 5. when the child ended well and the handover checks: moves the quarantine's packs into
 *    objects/pack (never over an existing name), writes refs/remotes/NS/BRANCH from the
 *    old id the child saw to the new one (git_reference_create_matching: nothing else is
 *    overwritten), renames the memo files over the memos, removes the refs of deleted
 *    branches that still name what the child saw, and prints the summary or the JSON.
 *
 * Nothing but objects, those refs (with their reflogs) and ocsb's own files is written to
 * the owner's repository (invariant 5).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "json.h"
#include "log.h"
#include "fileops.h"
#include "sync.h"
#include "util.h"

#define PULL_MAX_ALTERNATES 16
#define PULL_GRACE_S 30 /* past the deadline, the child is killed */

/* What the parent reads from the child while it runs. */
struct pull_io {
	struct sync_ctx *x;
	int rec, err;
	struct buf recbuf, errbuf; /* partial lines */
	struct sync_ho ho;
	char ho_err[256]; /* the first handover error */
	int said; /* the child wrote an error line */
	/* The pack's check (verify.c), fed upload-pack's band 1 while the child downloads. */
	struct sync_band band;
	struct sync_verifier ver;
	const struct sync_verify_in *vin; /* borrowed */
	int vstarted, vfailed;
	char vwhy[640];
};

/* Band 1's bytes: the pack, to git index-pack (started with the first of them). */
static void pull_pack_bytes(void *arg, const char *s, size_t n)
{
	struct pull_io *p = arg;

	if (p->vfailed)
		return;
	if (!p->vstarted) {
		if (sync_verify_start(&p->ver, p->vin, p->vwhy, sizeof(p->vwhy)) < 0) {
			p->vfailed = 1;
			return;
		}
		p->vstarted = 1;
		sync_trace("pack check started (git index-pack, confined)");
	}
	sync_verify_feed(&p->ver, s, n);
}

/* What the remote sent, as the parent relays it to the child. */
static void pull_on_remote(void *arg, const char *s, size_t n)
{
	struct pull_io *p = arg;

	sync_band_feed(&p->band, s, n, pull_pack_bytes, p);
}

/*
 * A line of the child's stderr for the terminal: the child's log lines are escaped by the
 * child, but the child is not trusted; every unsafe code point is escaped again (a
 * backslash is left as it is, so an honest line reads the same).
 */
static void pull_print_line(struct pull_io *p, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	char out[4 * 2048 + 1];
	size_t o = 0;

	if (p->x->progress_shown)
		fputc('\n', stderr), p->x->progress_shown = 0;
	for (size_t i = 0; i < len && o + 5 < sizeof(out);) {
		unsigned cp;
		size_t l = log_utf8_decode(u + i, len - i, &cp);

		if (!l || log_cp_unsafe(cp)) {
			o += (size_t)snprintf(out + o, sizeof(out) - o, "\\x%02x", u[i]);
			i++;
			continue;
		}
		if (o + l >= sizeof(out))
			break;
		memcpy(out + o, s + i, l);
		o += l;
		i += l;
	}
	out[o] = '\0';
	if (strstr(out, "error: "))
		p->said = 1;
	fprintf(stderr, "%s\n", out);
}

static void pull_record(struct pull_io *p, const char *line, size_t len)
{
	struct sync_ctx *x = p->x;
	int k;

	if (p->ho_err[0])
		return;
	k = sync_ho_feed(&p->ho, line, len, p->ho_err, sizeof(p->ho_err));
	if (k < 0)
		return;
	if (k == SYNC_HO_PROGRESS && x->tty && !x->o->json) {
		fprintf(stderr, "\rreceiving objects: %llu/%llu, %.1f MiB\033[K",
			p->ho.prog_objects, p->ho.prog_total,
			(double)p->ho.prog_bytes / (1024.0 * 1024.0));
		x->progress_shown = 1;
	} else if (k == SYNC_HO_REMOTE && x->tty && !x->o->json) {
		fprintf(stderr, "\rremote: %s\033[K\n", p->ho.remote);
	}
}

/*
 * Read what fd has: complete lines are handled, a partial one kept (a line longer than
 * the bound is an error on the handover, cut in two on stderr). 0, 1 at its end, -1 when
 * the handover broke.
 */
static int pull_on_input(void *arg, int fd)
{
	struct pull_io *p = arg;
	int is_rec = fd == p->rec;
	struct buf *b = is_rec ? &p->recbuf : &p->errbuf;
	char chunk[65536];
	ssize_t r = read(fd, chunk, sizeof(chunk));
	size_t start = 0;

	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r <= 0) {
		if (!is_rec && b->len)
			pull_print_line(p, b->data, b->len);
		if (is_rec && b->len && !p->ho_err[0])
			snprintf(p->ho_err, sizeof(p->ho_err), "a record without its newline");
		b->len = 0;
		return 1;
	}
	if (buf_append(b, chunk, (size_t)r) < 0) {
		snprintf(p->ho_err, sizeof(p->ho_err), "out of memory");
		return -1;
	}
	for (size_t i = 0; i < b->len; i++) {
		if (b->data[i] != '\n')
			continue;
		if (is_rec)
			pull_record(p, b->data + start, i - start);
		else
			pull_print_line(p, b->data + start, i - start);
		start = i + 1;
	}
	memmove(b->data, b->data + start, b->len - start);
	b->len -= start;
	if (b->len > SYNC_HO_LINE_MAX) {
		if (is_rec) {
			snprintf(p->ho_err, sizeof(p->ho_err), "a record over %d bytes",
				SYNC_HO_LINE_MAX);
		} else {
			pull_print_line(p, b->data, b->len);
			b->len = 0;
		}
	}
	return is_rec && p->ho_err[0] ? -1 : 0;
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
	struct sync_ctx *x, const struct sync_branch *b, const char *stat, const char *who)
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
	fputs(who, stdout);
}

/* Who committed (handover.c's who records): texts escaped already, JSON-quoted here. */
static void sync_print_who_json(const struct sync_ho *h, const struct sync_branch *b)
{
	printf(",\"committers\":[");
	for (size_t k = b->who_first; k < b->who_first + b->who_n; k++) {
		const struct sync_whorec *w = &h->who[k];

		printf("%s{\"commits\":%zu,\"committer\":", k == b->who_first ? "" : ",",
			w->commits);
		json_fput_str(stdout, w->committer);
		printf(",\"author\":");
		json_fput_str(stdout, w->author ? w->author : w->committer);
		printf("}");
	}
	printf("],\"other_commits\":%zu,\"committers_cut\":%s", b->who_other,
		b->who_cut ? "true" : "false");
}

static void sync_print_branch_json(
	struct sync_ctx *x, const struct sync_ho *h, const struct sync_branch *b, int first)
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
	sync_print_who_json(h, b);
	if (b->have_since)
		printf(",\"since_last_pull\":{\"commits\":%zu,\"files\":%zu,\"insertions\":%zu,"
		       "\"deletions\":%zu}}",
			b->since_commits, b->since_files, b->since_ins, b->since_del);
	else
		printf(",\"since_last_pull\":null}");
}

static void sync_print(struct sync_ctx *x, const struct sync_ho *h, const struct strv *deleted)
{
	if (x->o->json) {
		printf("{\"agent\":");
		json_fput_str(stdout, x->cfg.agent);
		printf(",\"project\":");
		json_fput_str(stdout, x->project);
		printf(",\"branches\":[");
		for (size_t i = 0; i < h->nb; i++)
			sync_print_branch_json(x, h, &h->br[i], i == 0);
		printf("],\"deleted\":[");
		for (size_t i = 0; i < deleted->n; i++) {
			const char *tab = strchr(deleted->v[i], '\t');

			char name[SYNC_HO_LINE_MAX];

			snprintf(name, sizeof(name), "%.*s", (int)(tab - deleted->v[i]),
				deleted->v[i]);
			printf("%s{\"name\":", i ? "," : "");
			json_fput_str(stdout, name);
			printf(",\"old\":\"%s\"}", tab + 1);
		}
		printf("],\"skipped\":[");
		for (size_t i = 0; i < h->skipped.n; i++) {
			const char *tab = strchr(h->skipped.v[i], '\t');

			char name[SYNC_HO_LINE_MAX];

			snprintf(name, sizeof(name), "%.*s", (int)(tab - h->skipped.v[i]),
				h->skipped.v[i]);
			printf("%s{\"name\":", i ? "," : "");
			json_fput_str(stdout, name);
			printf(",\"reason\":");
			json_fput_str(stdout, tab + 1);
			printf("}");
		}
		printf("],\"review\":[");
		for (size_t i = 0; i < h->nfl; i++) {
			printf("%s{\"branch\":", i ? "," : "");
			json_fput_str(stdout, h->fl[i].branch);
			printf(",\"path\":");
			json_fput_str(stdout, h->fl[i].path);
			printf(",\"flag\":\"%s\",\"why\":", sync_flag_name(h->fl[i].flag));
			json_fput_str(stdout, sync_flag_text(h->fl[i].flag));
			printf(",\"new\":%s}", h->fl[i].is_new ? "true" : "false");
		}
		printf("]}\n");
		return;
	}
	if (!h->nb && !deleted->n)
		printf("%s has no branches to fetch\n", x->cfg.agent);
	for (size_t i = 0; i < h->nb; i++) {
		struct buf who = {0};

		if (sync_ho_who_text(h, i, &who) < 0)
			log_warn("who committed on %s: out of memory", h->br[i].name);
		sync_print_branch_text(x, &h->br[i], h->stat[i].data ? h->stat[i].data : "",
			who.data ? who.data : "");
		buf_free(&who);
	}
	for (size_t i = 0; i < deleted->n; i++) {
		const char *tab = strchr(deleted->v[i], '\t');

		printf("%s/%.*s: deleted (the agent removed it; was %.7s)\n", x->ns,
			(int)(tab - deleted->v[i]), deleted->v[i], tab + 1);
	}
	for (size_t i = 0; i < h->skipped.n; i++) {
		const char *tab = strchr(h->skipped.v[i], '\t');

		printf("skipped: \"%.*s\" (%s)\n", (int)(tab - h->skipped.v[i]), h->skipped.v[i],
			tab + 1);
	}
	if (!h->nfl) {
		printf("REVIEW GATE: nothing flagged\n");
	} else {
		printf("REVIEW GATE: %zu risky change%s: read them before you check out, "
		       "merge, build or open the branch in an editor\n",
			h->nfl, h->nfl == 1 ? "" : "s");
		for (size_t i = 0; i < h->nfl; i++)
			printf("  [%s] %s/%s: %s: %s%s\n", sync_flag_name(h->fl[i].flag), x->ns,
				h->fl[i].branch, h->fl[i].path, sync_flag_text(h->fl[i].flag),
				h->fl[i].is_new ? " (new since your last pull)" : "");
	}
}

/*
 * The object stores objects/info/alternates names (the child reads objects there too):
 * absolute, or relative to the objects directory. At most PULL_MAX_ALTERNATES.
 */
static void pull_alternates(const char *objects, struct strv *out)
{
	char path[PATH_MAX + 32], *text = NULL;

	if (snprintf(path, sizeof(path), "%s/info/alternates", objects) >= (int)sizeof(path) ||
		fo_read(path, 1 << 16, &text, NULL) < 0)
		return;
	for (char *s = text, *save = NULL, *l; (l = strtok_r(s, "\n", &save)); s = NULL) {
		char full[PATH_MAX + 1];

		if (!l[0] || l[0] == '#' || out->n >= PULL_MAX_ALTERNATES)
			continue;
		if (l[0] == '/')
			snprintf(full, sizeof(full), "%s", l);
		else if (snprintf(full, sizeof(full), "%s/%s", objects, l) >= (int)sizeof(full))
			continue;
		strv_push(out, full);
	}
	free(text);
}

/* A fresh file for a memo's new content, written by the child. -1 when it cannot be made. */
static int pull_memo_file(const char *common, const char *name, char *tmp, size_t n)
{
	int fd;

	if (sync_gitdir_path(common, name, ".tmp", tmp, n) < 0)
		return -1;
	(void)unlink(tmp);
	/* Under the pull's lock; O_NOFOLLOW: a planted link is not written through. */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd;
}

/* What the child decided for a memo: its file renamed over it, removed, or left. */
static void pull_memo_apply(
	const char *common, const char *name, const char *tmp, enum sync_ho_memo what)
{
	char path[PATH_MAX + 64];
	int r = 0;

	if (sync_gitdir_path(common, name, "", path, sizeof(path)) < 0)
		return;
	if (what == SYNC_HO_MEMO_WRITE && rename(tmp, path) < 0)
		r = -errno;
	else if (what == SYNC_HO_MEMO_REMOVE && unlink(path) < 0 && errno != ENOENT)
		r = -errno;
	if (what != SYNC_HO_MEMO_WRITE || r < 0)
		(void)unlink(tmp);
	if (r < 0)
		log_warn("%s%s: %s (the next pull may be slower)", common, name, strerror(-r));
}

/* Wait for the child until deadline (then kill it): its wait status, or -1. */
static int pull_reap(pid_t pid, int pidfd, time_t deadline)
{
	int st = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		struct pollfd p = {.fd = pidfd, .events = POLLIN};

		if (r == pid)
			return st;
		if (r < 0 && errno != EINTR)
			return -1;
		if (time(NULL) > deadline) {
			kill(pid, SIGKILL);
			deadline = time(NULL) + 3600;
		}
		/* The pidfd says when it has exited; without one, short naps. */
		if (pidfd < 0 || poll(&p, 1, 1000) < 0)
			usleep(1000);
	}
}

/* 1 if the quarantine holds a pack the child kept. */
static int pull_child_has_pack(int packfd)
{
	int fd = dup(packfd), found = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return 1; /* unknown: as if there were one */
	}
	rewinddir(d);
	while (!found && (e = readdir(d))) {
		size_t l = strlen(e->d_name);

		found = l > 5 && !strcmp(e->d_name + l - 5, ".pack");
	}
	closedir(d);
	return found;
}

/*
 * The pack's check's verdict (verify.c): git index-pack, fed upload-pack's pack as the
 * parent relayed it, wrote its own pack and index into <objects>/ocsb-verified/pack;
 * those, never the child's, are moved in. 0 or -1 (said).
 */
static int pull_check_pack(struct sync_ctx *x, struct pull_io *p, int packfd)
{
	char id[GIT_OID_HEXSZ + 1], why[640];

	if (p->vfailed) {
		log_err("checking the fetched pack: %s; no ref was written", p->vwhy);
		return -1;
	}
	if (p->band.bad) {
		log_err("checking the fetched pack: the agent's answer is not in pkt-lines; no "
			"ref was written");
		return -1;
	}
	if (!p->vstarted) {
		/* Nothing was downloaded; a pack the child kept all the same is not used. */
		if (pull_child_has_pack(packfd)) {
			log_err("checking the fetched pack: the download's pack was not in the "
				"agent's answer as the parent relayed it; no ref was written");
			return -1;
		}
		return 0;
	}
	if (sync_verify_finish(&p->ver, x->conn.deadline + PULL_GRACE_S, id, sizeof(id), why,
		    sizeof(why)) < 0) {
		log_err("checking the fetched pack: %s; no ref was written", why);
		return -1;
	}
	sync_trace("pack verified by git index-pack (%zu bytes)", p->ver.fed);
	return 0;
}

/* Write the refs, move the pack in, apply the memos, remove deleted branches' refs. */
static int pull_apply(struct sync_ctx *x, struct pull_io *p, int verfd, const char *objects,
	const char *tmps[2], struct strv *deleted)
{
	const char *common = git_repository_commondir(x->repo);
	char prefix[SYNC_REF_MAX + 20];
	unsigned moved = 0;
	int r;

	r = sync_incoming_commit(verfd, objects, &moved);
	if (r < 0) {
		log_err("moving the fetched pack into %s/pack: %s; no ref was written", objects,
			strerror(-r));
		return -1;
	}
	sync_trace("pack moved in (%u)", moved);
	/*
	 * The ids were checked by the child (every object there, the history complete) and
	 * the pack moved in is git index-pack's (pull_verify): a check here would parse what
	 * the agent sent in the owner's process. Refs are written without looking at objects.
	 */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
	for (size_t i = 0; i < p->ho.nb; i++) {
		struct sync_branch *b = &p->ho.br[i];
		char track[SYNC_REF_MAX + 160], msg[128];
		git_reference *nref = NULL;

		if (!strcmp(b->state, "up to date"))
			continue;
		snprintf(track, sizeof(track), "refs/remotes/%s/%s", x->ns, b->name);
		snprintf(msg, sizeof(msg), "ocsb sync pull: %s",
			!strcmp(b->state, "forced") ? "forced-update" : b->state);
		/* From what the child saw to the new tip, nothing else: a new ref is new. */
		r = b->have_old ? git_reference_create_matching(
					  &nref, x->repo, track, &b->tip, 1, &b->old, msg)
				: git_reference_create(&nref, x->repo, track, &b->tip, 0, msg);
		if (r < 0) {
			sync_git_fail(x, track);
			return -1;
		}
		git_reference_free(nref);
		sync_ensure_reflog(x, track, &b->tip, msg);
	}
	sync_trace("refs written");
	pull_memo_apply(common, "ocsb-sync.review", tmps[0], p->ho.memo_review);
	pull_memo_apply(common, "ocsb-sync.unrelated", tmps[1], p->ho.memo_unrelated);
	sync_trace("memos saved");
	/* Branches the agent deleted: their refs go if they still name what the child saw. */
	snprintf(prefix, sizeof(prefix), "refs/remotes/%s/", x->ns);
	for (size_t k = 0; k < p->ho.deleted.n; k++) {
		const char *line = p->ho.deleted.v[k], *tab = strchr(line, '\t');
		char full[SYNC_REF_MAX + 200];
		git_reference *ref;
		git_oid id;

		snprintf(full, sizeof(full), "%s%.*s", prefix, (int)(tab - line), line);
		if (git_oid_fromstr(&id, tab + 1) < 0 ||
			git_reference_lookup(&ref, x->repo, full) < 0)
			continue;
		if (git_reference_type(ref) == GIT_REFERENCE_DIRECT &&
			git_oid_equal(git_reference_target(ref), &id) &&
			git_reference_delete(ref) == 0)
			strv_push(deleted, line);
		git_reference_free(ref);
	}
	git_error_clear();
	return 0;
}

int sync_do_pull(struct sync_ctx *x)
{
	const char *common = git_repository_commondir(x->repo);
	const char *gitdir = git_repository_path(x->repo);
	char objects[PATH_MAX], incoming[PATH_MAX + 64], inpack[PATH_MAX + 80],
		tmp_review[PATH_MAX + 64], tmp_unrel[PATH_MAX + 64];
	const char *tmps[2] = {tmp_review, tmp_unrel};
	struct strv reads = {0}, deleted = {0};
	struct sync_confine_in conf = {0}, vconf;
	struct sync_verify_in vin;
	char verdir[PATH_MAX + 32], verpack[PATH_MAX + 40];
	struct sync_fetch_io io;
	struct sync_relay rl = {.data = -1, .ctl = -1, .extra = {-1, -1}};
	struct pull_io p = {
		.x = x, .rec = -1, .err = -1, .ver = {.pid = -1, .in = -1, .out = -1, .err = -1}};
	struct sync_link *link = NULL;
	struct timespec start;
	int data[2] = {-1, -1}, ctl[2] = {-1, -1}, rec[2] = {-1, -1}, err[2] = {-1, -1};
	int memo_fd[2] = {-1, -1}, lockfd = -1, packfd = -1, verfd = -1, relay_failed = 0, st = -1,
	    pidfd = -1;
	unsigned removed = 0;
	pid_t pid = -1, parent = getpid();
	int ret = -1, r;

	tmp_review[0] = tmp_unrel[0] = '\0';
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
	r = sync_incoming_prepare(objects, incoming, sizeof(incoming), &packfd, &removed);
	if (r < 0) {
		log_err("%s/%s: %s", objects, SYNC_INCOMING, strerror(-r));
		goto out;
	}
	if (removed)
		log_info("removed %u temporary file%s left by an interrupted pull", removed,
			removed == 1 ? "" : "s");
	/* The pack's check writes here; the child cannot (its Landlock rules). */
	r = sync_verified_prepare(objects, verdir, sizeof(verdir), &verfd);
	if (r < 0) {
		log_err("%s/%s: %s", objects, SYNC_VERIFIED, strerror(-r));
		goto out;
	}
	/* The connectivity check runs git: fail before downloading anything without it. */
	if (sync_git_check() < 0)
		goto out;
	memo_fd[0] = pull_memo_file(common, "ocsb-sync.review", tmp_review, sizeof(tmp_review));
	memo_fd[1] = pull_memo_file(common, "ocsb-sync.unrelated", tmp_unrel, sizeof(tmp_unrel));
	if (memo_fd[0] < 0 || memo_fd[1] < 0) {
		log_err("%s: cannot make the memo files: %s", common, strerror(errno));
		goto out;
	}
	/* What the child may read: the git directories and the alternates' stores. */
	strv_push(&reads, common);
	if (strcmp(gitdir, common) != 0)
		strv_push(&reads, gitdir);
	pull_alternates(objects, &reads);
	conf.read = (const char *const *)reads.v;
	conf.nread = reads.n;
	snprintf(inpack, sizeof(inpack), "%s/pack", incoming);
	conf.incoming = inpack;
	/* The pack's check: confined the same, writing only its own directory, no fork. */
	vconf = conf;
	snprintf(verpack, sizeof(verpack), "%s/pack", verdir);
	vconf.incoming = verpack;
	vconf.no_fork = 1;
	vin = (struct sync_verify_in){.gitdir = gitdir,
		.objects = objects,
		.home = x->me.home,
		.inpackfd = packfd,
		.outdir = verdir,
		.confine = &vconf,
		.deadline = x->conn.deadline + PULL_GRACE_S};
	p.vin = &vin;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, data) < 0 ||
		pipe2(ctl, O_CLOEXEC) < 0 || pipe2(rec, O_CLOEXEC) < 0 ||
		pipe2(err, O_CLOEXEC) < 0) {
		log_err("pipe: %s", strerror(errno));
		goto out;
	}
	fflush(stdout);
	fflush(stderr);
	/*
	 * The child may close its end while the remote still sends (a last flush after the
	 * pack): that is EPIPE on the relay's write, not a signal that ends the pull.
	 */
	signal(SIGPIPE, SIG_IGN);
	sync_trace("locked, quarantine ready; forking the confined child");
	pid = fork();
	if (pid < 0) {
		log_err("fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		io = (struct sync_fetch_io){.data = data[1],
			.ctl = ctl[0],
			.rec = rec[1],
			.err = err[1],
			.memo_review = memo_fd[0],
			.memo_unrelated = memo_fd[1],
			.lockfd = lockfd,
			.incoming = incoming,
			.confine = &conf};
		sync_fetch_child(x, &io, parent);
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	close(data[1]), data[1] = -1;
	close(ctl[0]), ctl[0] = -1;
	close(rec[1]), rec[1] = -1;
	close(err[1]), err[1] = -1;
	close(memo_fd[0]), memo_fd[0] = -1;
	close(memo_fd[1]), memo_fd[1] = -1;
	p.rec = rec[0];
	p.err = err[0];
	rl.data = data[0];
	rl.ctl = ctl[1];
	rl.extra[0] = rec[0];
	rl.extra[1] = err[0];
	rl.on_extra = pull_on_input;
	rl.on_remote = pull_on_remote;
	rl.arg = &p;
	/*
	 * The SSH session, in this process (the key or ssh-agent are the owner's): while it
	 * opens, the child reads the refs and memos.
	 */
	sync_trace("ssh: git-upload-pack: connection opening meanwhile");
	link = sync_link_new(&x->conn);
	if (!link || sync_link_open(link, "git-upload-pack") < 0) {
		/* The child reports it ("connecting to the agent: ..."), as before. */
		snprintf(rl.why, sizeof(rl.why), "%s",
			x->conn.err[0] ? x->conn.err : "out of memory");
		ssize_t w = write(rl.ctl, rl.why, strlen(rl.why));

		(void)w; /* a child already gone has nothing to report */
		shutdown(rl.data, SHUT_RDWR);
		relay_failed = 1;
	} else {
		relay_failed = sync_link_relay(link, &rl) < 0;
	}
	sync_link_free(link);
	link = NULL;
	if (rl.ctl >= 0)
		close(rl.ctl), rl.ctl = -1;
	close(rl.data), rl.data = -1;
	sync_trace("relay ended%s", relay_failed ? " (by the parent)" : "");
	/* The pack is whole: git index-pack resolves it while the child checks and reviews. */
	if (p.ver.in >= 0)
		close(p.ver.in), p.ver.in = -1;
	/* While the child checks and reviews: what earlier versions' downloads left. */
	r = sync_clean_tmp_packs(objects, &start, &removed);
	if (r < 0)
		log_warn("%s/pack: cannot remove temporary packs: %s", objects, strerror(-r));
	if (removed)
		log_info("removed %u temporary pack%s left by an interrupted pull", removed,
			removed == 1 ? "" : "s");
	/* The child's last words and its handover, until both pipes end. */
	while (rl.extra[0] >= 0 || rl.extra[1] >= 0) {
		struct pollfd pf[2];
		int n = 0;

		for (int i = 0; i < 2; i++)
			if (rl.extra[i] >= 0)
				pf[n++] = (struct pollfd){.fd = rl.extra[i], .events = POLLIN};
		if (time(NULL) > x->conn.deadline + PULL_GRACE_S) {
			kill(pid, SIGKILL);
			if (!p.said)
				log_err("time limit reached: the confined child did not finish "
					"(raise "
					"it with --timeout); no ref was written");
			p.said = 1;
			break;
		}
		if (poll(pf, (nfds_t)n, 1000) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			int k = pf[i].fd == rl.extra[0] ? 0 : 1;

			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = pull_on_input(&p, pf[i].fd);
			if (r < 0) {
				kill(pid, SIGKILL); /* a child that breaks the format is done */
				rl.extra[0] = rl.extra[1] = -1;
				break;
			}
			if (r > 0)
				rl.extra[k] = -1;
		}
	}
	/*
	 * A complete handover is the child's success (its exit status says no more: a
	 * turned child can exit 0 too); it is reaped at the end, its teardown meanwhile.
	 * Without one, its end says what happened.
	 */
	if (!p.ho.ended || p.ho_err[0]) {
		st = pull_reap(pid, pidfd, x->conn.deadline + PULL_GRACE_S);
		pid = -1;
	} else {
		st = 0;
	}
	if (x->progress_shown)
		fputc('\n', stderr), x->progress_shown = 0;
	sync_trace("child done (%s)", pid > 0 ? "handover complete" : "ended");
	if (p.ho_err[0]) {
		log_err("the confined process that read the agent's data broke the handover (%s): "
			"nothing was written",
			p.ho_err);
		goto out;
	}
	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (st >= 0 && WIFSIGNALED(st))
			log_err("the confined process that read the agent's data died (signal %d): "
				"nothing was written",
				WTERMSIG(st));
		else if (!p.said)
			log_err("the confined process that read the agent's data failed: nothing "
				"was written");
		goto out;
	}
	if (relay_failed) {
		log_err("%s", rl.why);
		goto out;
	}
	if (sync_ho_finish(&p.ho, p.ho_err, sizeof(p.ho_err)) < 0) {
		log_err("the confined process that read the agent's data broke the handover (%s): "
			"nothing was written",
			p.ho_err);
		goto out;
	}
	if (pull_check_pack(x, &p, packfd) < 0)
		goto out;
	sync_incoming_clear(packfd); /* the child's pack and index: git's copy goes in */
	if (pull_apply(x, &p, verfd, objects, tmps, &deleted) < 0)
		goto out;
	tmp_review[0] = tmp_unrel[0] = '\0'; /* renamed or removed */
	sync_print(x, &p.ho, &deleted);
	/* For scripts and hooks: a flag is a distinct outcome, not a failure of the pull. */
	sync_trace("deleted refs checked, printed");
	ret = x->o->strict && p.ho.nfl ? 1 : 0;
out:
	if (pid > 0 && ret < 0) {
		kill(pid, SIGKILL);
		pull_reap(pid, pidfd, time(NULL) + 5);
	} else if (pid > 0) {
		/*
		 * It handed over and is exiting (it closed the lock first), while this process
		 * wrote the refs and printed: reaped now (its resources, git rev-list's
		 * included, are counted as this process's children's).
		 */
		pull_reap(pid, pidfd, time(NULL) + 5);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (ret < 0 && packfd >= 0)
		sync_incoming_clear(packfd); /* a failed pull keeps nothing the agent sent */
	for (int i = 0; i < 2; i++) {
		if (tmps[i][0])
			(void)unlink(tmps[i]);
		if (memo_fd[i] >= 0)
			close(memo_fd[i]);
		if (data[i] >= 0)
			close(data[i]);
		if (ctl[i] >= 0)
			close(ctl[i]);
		if (rec[i] >= 0)
			close(rec[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	if (packfd >= 0)
		close(packfd);
	if (p.vstarted)
		sync_verify_kill(&p.ver); /* reaped already when it finished */
	if (verfd >= 0) {
		if (ret < 0)
			sync_incoming_clear(verfd);
		close(verfd);
	}
	sync_ho_free(&p.ho);
	buf_free(&p.recbuf);
	buf_free(&p.errbuf);
	strv_free(&reads);
	strv_free(&deleted);
	if (lockfd >= 0)
		close(lockfd);
	return ret;
}
