/* SPDX-License-Identifier: MIT */
/*
 * The handover from the pull's confined child (fetch.c) to the parent (pull.c): lines of
 * tab-separated fields on a pipe. The child has parsed what the agent sent and may have
 * been turned by it; the parent takes nothing on trust that it acts on: a branch name must
 * pass sync_ref_name_ok (the parent writes refs/remotes/NS/NAME), ids are 40 lowercase hex
 * digits, numbers plain decimal, a state agrees with the old and new ids, texts are what
 * sync_escape produces (no control byte, no bidi mark, a backslash only in "\xHH"), flags
 * are the gate's names, who records (who.c) at most SYNC_WHO_MAX per branch, records come
 * in their order and end with "end". Anything else fails the pull: a child that breaks the
 * format is not believed on anything.
 *
 * What the parent cannot check without reading the objects itself, it does not need to:
 * the review's numbers and flags are information for the owner (a turned child could hide
 * a flag, as it could hide a branch), and the parent writes a ref only from the old id
 * the child saw to the new one (git_reference_create_matching), nothing outside
 * refs/remotes/NS/.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sync.h"

#define HO_MAX_FIELDS 20

static const char *const states[] = {"new", "updated", "forced", "up to date"};

int sync_flag_by_name(const char *name, unsigned *ret_flag)
{
	for (unsigned f = 1; f < (1u << SYNC_FLAG_COUNT); f <<= 1)
		if (!strcmp(sync_flag_name(f), name)) {
			*ret_flag = f;
			return 1;
		}
	return 0;
}

/* --- the child's side */

int sync_ho_put_text(struct buf *b, const char *t)
{
	char esc[1024]; /* as the summary always showed them: at most 1023 bytes escaped */

	sync_escape(t, strlen(t), esc, sizeof(esc));
	return buf_puts(b, esc);
}

int sync_ho_put_branch(struct buf *b, const struct sync_branch *br)
{
	char tip[GIT_OID_HEXSZ + 1], old[GIT_OID_HEXSZ + 1] = "-", base[GIT_OID_HEXSZ + 1] = "-";

	git_oid_tostr(tip, sizeof(tip), &br->tip);
	if (br->have_old)
		git_oid_tostr(old, sizeof(old), &br->old);
	if (br->have_base)
		git_oid_tostr(base, sizeof(base), &br->base);
	return buf_printf(b,
		"branch\t%s\t%s\t%s\t%s\t%d\t%zu\t%zu\t%zu\t%s\t%zu\t%zu\t%zu\t%d\t%zu\t%zu\t%zu\t%"
		"zu\n",
		br->name, tip, old, br->state, br->have_local ? 1 : 0, br->ahead, br->behind,
		br->commits, base, br->files, br->ins, br->del, br->have_since ? 1 : 0,
		br->since_commits, br->since_files, br->since_ins, br->since_del);
}

int sync_ho_put_stat(struct buf *b, const struct sync_rfile *d)
{
	if (buf_puts(b, "stat\t") < 0 || sync_ho_put_text(b, d->path) < 0)
		return -1;
	return buf_printf(b, "\t%zu\t%zu\t%s\n", d->add, d->del,
		d->unreadable	    ? "unreadable"
			: d->binary ? "binary"
				    : "-");
}

int sync_ho_put_flag(struct buf *b, const char *path, unsigned flag, int is_new)
{
	if (buf_puts(b, "flag\t") < 0 || sync_ho_put_text(b, path) < 0)
		return -1;
	return buf_printf(b, "\t%s\t%d\n", sync_flag_name(flag), is_new ? 1 : 0);
}

int sync_ho_put_who(struct buf *b, const struct sync_whos *w)
{
	for (size_t i = 0; i < w->n; i++) {
		const struct sync_who *e = &w->v[i];

		if (buf_printf(b, "who\t%zu\t", e->commits) < 0 ||
			sync_ho_put_text(b, e->committer) < 0 || buf_puts(b, "\t") < 0)
			return -1;
		/* "-": the same person ("name <email>" always holds a '<'). */
		if (!strcmp(e->committer, e->author) ? buf_puts(b, "-") < 0
						     : sync_ho_put_text(b, e->author) < 0)
			return -1;
		if (buf_puts(b, "\n") < 0)
			return -1;
	}
	if (!w->other && !w->cut)
		return 0;
	return buf_printf(b, "whomore\t%zu\t%d\n", w->other, w->cut ? 1 : 0);
}

/* --- the parent's side */

/* What sync_escape writes: valid UTF-8, no unsafe code point, "\" only as "\xHH". */
static int ho_text_ok(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strlen(s);

	for (size_t i = 0; i < len;) {
		unsigned cp;
		size_t l = log_utf8_decode(u + i, len - i, &cp);

		if (!l || log_cp_unsafe(cp))
			return 0;
		if (cp == '\\') {
			if (i + 4 > len || u[i + 1] != 'x' ||
				!strchr("0123456789abcdef", u[i + 2]) ||
				!strchr("0123456789abcdef", u[i + 3]) || !u[i + 2] || !u[i + 3])
				return 0;
			l = 4;
		}
		i += l;
	}
	return 1;
}

static int ho_num(const char *s, unsigned long long *out)
{
	unsigned long long v = 0;

	if (!*s || strlen(s) > 18)
		return 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return 0;
		v = v * 10 + (unsigned)(*s - '0');
	}
	*out = v;
	return 1;
}

static int ho_size(const char *s, size_t *out)
{
	unsigned long long v;

	if (!ho_num(s, &v) || v > SIZE_MAX)
		return 0;
	*out = (size_t)v;
	return 1;
}

static int ho_bool(const char *s, int *out)
{
	if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0)
		return 0;
	*out = s[0] == '1';
	return 1;
}

/* 40 lowercase hex digits (or "-" when dash_ok: *ret_have 0). */
static int ho_oid(const char *s, git_oid *out, int dash_ok, int *ret_have)
{
	if (dash_ok && !strcmp(s, "-")) {
		*ret_have = 0;
		return 1;
	}
	if (strlen(s) != GIT_OID_HEXSZ || strspn(s, "0123456789abcdef") != GIT_OID_HEXSZ)
		return 0;
	if (git_oid_fromstr(out, s) < 0)
		return 0;
	if (ret_have)
		*ret_have = 1;
	return 1;
}

/* A branch name the parent may write under refs/remotes/NS/. */
static int ho_name_ok(const char *name)
{
	char full[SYNC_REF_MAX + 32], why[128];

	if (strlen(name) + 11 > SYNC_REF_MAX)
		return 0;
	snprintf(full, sizeof(full), "refs/heads/%s", name);
	return sync_ref_name_ok(full, why, sizeof(why));
}

static int ho_branch(struct sync_ho *h, char **f, size_t nf, char *err, size_t errlen)
{
	struct sync_branch b = {0};
	int have_tip = 0, st = -1;

	if (nf != 18) {
		snprintf(err, errlen, "a branch record with %zu fields", nf);
		return -1;
	}
	if (!ho_name_ok(f[1])) {
		snprintf(err, errlen, "a branch name that is not valid");
		return -1;
	}
	for (size_t i = 0; i < h->nb; i++)
		if (!strcmp(h->br[i].name, f[1])) {
			snprintf(err, errlen, "branch %s twice", f[1]);
			return -1;
		}
	if (h->nb >= SYNC_MAX_ADVERTISED) {
		snprintf(err, errlen, "more than %d branches", SYNC_MAX_ADVERTISED);
		return -1;
	}
	snprintf(b.name, sizeof(b.name), "%s", f[1]);
	for (size_t i = 0; i < ARRAY_SIZE(states); i++)
		if (!strcmp(f[4], states[i]))
			st = (int)i, b.state = states[i];
	if (!ho_oid(f[2], &b.tip, 0, &have_tip) || !ho_oid(f[3], &b.old, 1, &b.have_old) ||
		st < 0 || !ho_bool(f[5], &b.have_local) || !ho_size(f[6], &b.ahead) ||
		!ho_size(f[7], &b.behind) || !ho_size(f[8], &b.commits) ||
		!ho_oid(f[9], &b.base, 1, &b.have_base) || !ho_size(f[10], &b.files) ||
		!ho_size(f[11], &b.ins) || !ho_size(f[12], &b.del) ||
		!ho_bool(f[13], &b.have_since) || !ho_size(f[14], &b.since_commits) ||
		!ho_size(f[15], &b.since_files) || !ho_size(f[16], &b.since_ins) ||
		!ho_size(f[17], &b.since_del)) {
		snprintf(err, errlen, "a malformed field in branch %s", f[1]);
		return -1;
	}
	/* The state the ids imply: new without an old tip, up to date when it is the new. */
	if ((st == 0) != !b.have_old ||
		(b.have_old && (st == 3) != (git_oid_equal(&b.old, &b.tip) != 0))) {
		snprintf(err, errlen, "branch %s: state \"%s\" does not match its ids", f[1], f[4]);
		return -1;
	}
	if (h->nb == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct sync_branch *nb = realloc(h->br, cap * sizeof(*nb));
		struct buf *ns;
		unsigned *nn;

		if (!nb)
			goto oom;
		h->br = nb;
		ns = realloc(h->stat, cap * sizeof(*ns));
		if (!ns)
			goto oom;
		h->stat = ns;
		nn = realloc(h->nstat, cap * sizeof(*nn));
		if (!nn)
			goto oom;
		h->nstat = nn;
		h->cap = cap;
	}
	b.who_first = h->nwho;
	h->br[h->nb] = b;
	memset(&h->stat[h->nb], 0, sizeof(h->stat[h->nb]));
	h->nstat[h->nb] = 0;
	h->nb++;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

static int ho_stat(struct sync_ho *h, char **f, size_t nf, int more, char *err, size_t errlen)
{
	struct buf *s;
	size_t add = 0, del = 0;

	if (!h->nb) {
		snprintf(err, errlen, "a %s record before any branch", more ? "more" : "stat");
		return -1;
	}
	s = &h->stat[h->nb - 1];
	if (h->nstat[h->nb - 1] > SYNC_STAT_FILES) {
		snprintf(err, errlen, "more than %d diffstat lines for one branch",
			SYNC_STAT_FILES + 1);
		return -1;
	}
	if (more) {
		if (nf != 2 || !ho_size(f[1], &add)) {
			snprintf(err, errlen, "a malformed more record");
			return -1;
		}
		h->nstat[h->nb - 1] = SYNC_STAT_FILES + 1; /* the last line */
		return buf_printf(s, "    ... %zu more files\n", add) < 0 ? -1 : 0;
	}
	if (nf != 5 || !ho_text_ok(f[1]) || !ho_size(f[2], &add) || !ho_size(f[3], &del) ||
		(strcmp(f[4], "-") && strcmp(f[4], "binary") && strcmp(f[4], "unreadable"))) {
		snprintf(err, errlen, "a malformed stat record");
		return -1;
	}
	h->nstat[h->nb - 1]++;
	return buf_printf(s, "    %s | +%zu -%zu%s\n", f[1], add, del,
		       !strcmp(f[4], "-")		 ? ""
			       : !strcmp(f[4], "binary") ? " (binary)"
							 : " (unreadable)") < 0
		? -1
		: 0;
}

static int ho_flag(struct sync_ho *h, char **f, size_t nf, char *err, size_t errlen)
{
	struct sync_flagrec *r;
	unsigned flag;
	int is_new;

	if (!h->nb) {
		snprintf(err, errlen, "a flag record before any branch");
		return -1;
	}
	if (nf != 4 || !ho_text_ok(f[1]) || strlen(f[1]) >= sizeof(r->path) ||
		!sync_flag_by_name(f[2], &flag) || !ho_bool(f[3], &is_new)) {
		snprintf(err, errlen, "a malformed flag record");
		return -1;
	}
	if (h->nfl >= SYNC_HO_MAX_FLAGS) {
		snprintf(err, errlen, "more than %d flags", SYNC_HO_MAX_FLAGS);
		return -1;
	}
	if (h->nfl == h->flcap) {
		size_t cap = h->flcap ? h->flcap * 2 : 64;
		struct sync_flagrec *v = realloc(h->fl, cap * sizeof(*v));

		if (!v) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		h->fl = v;
		h->flcap = cap;
	}
	r = &h->fl[h->nfl++];
	snprintf(r->branch, sizeof(r->branch), "%s", h->br[h->nb - 1].name);
	snprintf(r->path, sizeof(r->path), "%s", f[1]);
	r->flag = flag;
	r->is_new = is_new;
	return 0;
}

/* An identity as sync_ho_put_who sends it: escaped, bounded, with its " <". */
static int ho_ident_ok(const char *s)
{
	return strlen(s) < SYNC_WHO_ESC && strstr(s, " <") && ho_text_ok(s);
}

/* who COUNT COMMITTER AUTHOR|-: at most SYNC_WHO_MAX for the last branch, before its whomore. */
static int ho_who(struct sync_ho *h, char **f, size_t nf, char *err, size_t errlen)
{
	struct sync_branch *b = h->nb ? &h->br[h->nb - 1] : NULL;
	struct sync_whorec r = {0};

	if (!b || nf != 4 || !ho_size(f[1], &r.commits) || !r.commits || !ho_ident_ok(f[2]) ||
		(strcmp(f[3], "-") && !ho_ident_ok(f[3])) || b->who_n >= SYNC_WHO_MAX ||
		b->who_other || b->who_cut) {
		snprintf(err, errlen, "a malformed or misplaced who record");
		return -1;
	}
	if (h->nwho == h->whocap) {
		size_t cap = h->whocap ? h->whocap * 2 : 16;
		struct sync_whorec *v = realloc(h->who, cap * sizeof(*v));

		if (!v)
			goto oom;
		h->who = v;
		h->whocap = cap;
	}
	r.committer = strdup(f[2]);
	r.author = strcmp(f[3], "-") ? strdup(f[3]) : NULL;
	if (!r.committer || (strcmp(f[3], "-") && !r.author)) {
		free(r.committer);
		free(r.author);
		goto oom;
	}
	h->who[h->nwho++] = r;
	b->who_n++;
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* whomore OTHER CUT: once per branch, saying something. */
static int ho_whomore(struct sync_ho *h, char **f, size_t nf, char *err, size_t errlen)
{
	struct sync_branch *b = h->nb ? &h->br[h->nb - 1] : NULL;
	size_t other;
	int cut;

	if (!b || nf != 3 || !ho_size(f[1], &other) || !ho_bool(f[2], &cut) || (!other && !cut) ||
		b->who_other || b->who_cut) {
		snprintf(err, errlen, "a malformed or misplaced whomore record");
		return -1;
	}
	b->who_other = other;
	b->who_cut = cut;
	return 0;
}

int sync_ho_who_text(const struct sync_ho *h, size_t i, struct buf *out)
{
	const struct sync_branch *b = &h->br[i];
	int r = 0;

	for (size_t k = b->who_first; k < b->who_first + b->who_n; k++) {
		const struct sync_whorec *w = &h->who[k];

		if (w->author)
			r |= buf_printf(out, "  %zu commit%s committed by %s, authored by %s\n",
				w->commits, w->commits == 1 ? "" : "s", w->committer, w->author);
		else
			r |= buf_printf(out, "  %zu commit%s committed and authored by %s\n",
				w->commits, w->commits == 1 ? "" : "s", w->committer);
	}
	if (b->who_other)
		r |= buf_printf(out, "  %zu more commit%s by other committers or authors\n",
			b->who_other, b->who_other == 1 ? "" : "s");
	if (b->who_cut)
		r |= buf_printf(out,
			"  (who committed: only the first %d commits from the tip read)\n",
			SYNC_WHO_WALK);
	return r ? -1 : 0;
}

int sync_ho_feed(struct sync_ho *h, const char *line, size_t len, char *err, size_t errlen)
{
	char buf[SYNC_HO_LINE_MAX + 1], *f[HO_MAX_FIELDS];
	size_t nf = 0;
	unsigned long long a, b, c;

	err[0] = '\0';
	if (h->ended) {
		snprintf(err, errlen, "a record after the end");
		return -1;
	}
	if (len > SYNC_HO_LINE_MAX || memchr(line, '\0', len)) {
		snprintf(err, errlen, "a record too long or with a NUL byte");
		return -1;
	}
	memcpy(buf, line, len);
	buf[len] = '\0';
	for (char *p = buf;;) {
		char *tab = strchr(p, '\t');

		if (nf == HO_MAX_FIELDS) {
			snprintf(err, errlen, "a record with too many fields");
			return -1;
		}
		f[nf++] = p;
		if (!tab)
			break;
		*tab = '\0';
		p = tab + 1;
	}
	if (!strcmp(f[0], "progress")) {
		if (nf != 4 || !ho_num(f[1], &a) || !ho_num(f[2], &b) || !ho_num(f[3], &c))
			goto bad;
		h->prog_objects = a, h->prog_total = b, h->prog_bytes = c;
		return SYNC_HO_PROGRESS;
	}
	if (!strcmp(f[0], "remote")) {
		if (nf != 2 || !ho_text_ok(f[1]))
			goto bad;
		snprintf(h->remote, sizeof(h->remote), "%s", f[1]);
		return SYNC_HO_REMOTE;
	}
	if (!strcmp(f[0], "skip")) {
		char rec[SYNC_HO_LINE_MAX];

		if (nf != 3 || !ho_text_ok(f[1]) || !ho_text_ok(f[2]))
			goto bad;
		snprintf(rec, sizeof(rec), "%s\t%s", f[1], f[2]);
		if (h->skipped.n >= SYNC_MAX_ADVERTISED || strv_push(&h->skipped, rec) < 0)
			goto bad;
		return SYNC_HO_RESULT;
	}
	if (!strcmp(f[0], "branch"))
		return ho_branch(h, f, nf, err, errlen) < 0 ? -1 : SYNC_HO_RESULT;
	if (!strcmp(f[0], "stat") || !strcmp(f[0], "more"))
		return ho_stat(h, f, nf, f[0][0] == 'm', err, errlen) < 0 ? -1 : SYNC_HO_RESULT;
	if (!strcmp(f[0], "flag"))
		return ho_flag(h, f, nf, err, errlen) < 0 ? -1 : SYNC_HO_RESULT;
	if (!strcmp(f[0], "who"))
		return ho_who(h, f, nf, err, errlen) < 0 ? -1 : SYNC_HO_RESULT;
	if (!strcmp(f[0], "whomore"))
		return ho_whomore(h, f, nf, err, errlen) < 0 ? -1 : SYNC_HO_RESULT;
	if (!strcmp(f[0], "deleted")) {
		char rec[SYNC_REF_MAX + 64];
		git_oid id;

		if (nf != 3 || !ho_name_ok(f[1]) || !ho_oid(f[2], &id, 0, NULL) ||
			h->deleted.n >= SYNC_MAX_ADVERTISED || strv_contains(&h->deleted, f[1]))
			goto bad;
		snprintf(rec, sizeof(rec), "%s\t%s", f[1], f[2]);
		if (strv_push(&h->deleted, rec) < 0)
			goto bad;
		return SYNC_HO_RESULT;
	}
	if (!strcmp(f[0], "memo")) {
		enum sync_ho_memo *m = nf != 3	     ? NULL
			: !strcmp(f[1], "review")    ? &h->memo_review
			: !strcmp(f[1], "unrelated") ? &h->memo_unrelated
						     : NULL;
		enum sync_ho_memo v = nf != 3	  ? SYNC_HO_MEMO_NONE
			: !strcmp(f[2], "write")  ? SYNC_HO_MEMO_WRITE
			: !strcmp(f[2], "keep")	  ? SYNC_HO_MEMO_KEEP
			: !strcmp(f[2], "remove") ? SYNC_HO_MEMO_REMOVE
						  : SYNC_HO_MEMO_NONE;

		if (!m || v == SYNC_HO_MEMO_NONE || *m != SYNC_HO_MEMO_NONE)
			goto bad;
		*m = v;
		return SYNC_HO_RESULT;
	}
	if (!strcmp(f[0], "end") && nf == 1) {
		h->ended = 1;
		return SYNC_HO_RESULT;
	}
bad:
	if (!err[0]) {
		char esc[64];

		sync_escape(f[0], strnlen(f[0], 16), esc, sizeof(esc));
		snprintf(err, errlen, "a malformed or unknown record \"%s\"", esc);
	}
	return -1;
}

int sync_ho_finish(struct sync_ho *h, char *err, size_t errlen)
{
	if (!h->ended) {
		snprintf(err, errlen, "no end record");
		return -1;
	}
	/* A branch the agent has is not one it deleted. */
	for (size_t i = 0; i < h->deleted.n; i++) {
		size_t l = strcspn(h->deleted.v[i], "\t");

		for (size_t k = 0; k < h->nb; k++)
			if (strlen(h->br[k].name) == l &&
				!strncmp(h->br[k].name, h->deleted.v[i], l)) {
				snprintf(err, errlen, "branch %s both fetched and deleted",
					h->br[k].name);
				return -1;
			}
	}
	return 0;
}

void sync_ho_free(struct sync_ho *h)
{
	for (size_t i = 0; i < h->nb; i++)
		buf_free(&h->stat[i]);
	free(h->stat);
	free(h->nstat);
	free(h->br);
	free(h->fl);
	for (size_t i = 0; i < h->nwho; i++) {
		free(h->who[i].committer);
		free(h->who[i].author);
	}
	free(h->who);
	strv_free(&h->skipped);
	strv_free(&h->deleted);
	memset(h, 0, sizeof(*h));
}
