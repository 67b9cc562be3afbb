/* SPDX-License-Identifier: MIT */
/*
 * The pull's review base for a branch the owner has no branch of the same name for is
 * its merge base with the owner's HEAD. When the two histories share nothing (an agent
 * branch started from scratch), finding that out walks both whole histories: 20,000
 * commits cost more than the one-commit fetch itself. So a pull remembers "tip T and
 * HEAD H share no commit" in <gitdir>/ocsb-sync.unrelated, and the next pull carries
 * the fact forward cheaply:
 *
 *   if T and H share no commit, then T2 and H2 share none either when neither
 *   T2 ^T nor H2 ^H contains a root commit.
 *
 * A common ancestor of T2 and H2 would have a root that is common too; that root is not
 * an ancestor of both T and H, so it must be among the commits new on one side. Every
 * doubt (a new root, a long walk, a walk error, a shallow repository, an unreadable or
 * malformed memo) falls back to the full merge base: the memo can make a pull faster,
 * never its review smaller.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "sync.h"

#define MEMO_NAME "ocsb-sync.unrelated"
#define MEMO_MAX_BYTES (1u << 20)

/*
 * 1 if no root commit is reachable from `from` without passing through `stop`, looking
 * at no more than limit commits. That set holds every commit of from ^stop (a path to
 * one of those cannot pass through stop), so "no root here" covers them; it may hold
 * more (a merge of an older commit), which at worst makes the answer 0. libgit2's own
 * hide walk would mark stop's whole history first: the cost this file exists to avoid.
 */
static int no_new_root(git_repository *repo, const git_oid *from, const git_oid *stop, size_t limit)
{
	struct sync_oidset seen;
	int ok = sync_walk_onto_set(repo, from, stop, limit, &seen);

	sync_oidset_free(&seen);
	return ok;
}

int sync_still_unrelated(git_repository *repo, const git_oid *t, const git_oid *t2,
	const git_oid *h, const git_oid *h2, size_t limit)
{
	if (git_repository_is_shallow(repo) != 0)
		return 0; /* cut history: a missing parent looks like a root, or fails */
	return no_new_root(repo, t2, t, limit) && no_new_root(repo, h2, h, limit);
}

int sync_gitdir_path(const char *gitdir, const char *name, const char *suffix, char *out, size_t n)
{
	size_t l = strlen(gitdir);
	int w = snprintf(
		out, n, "%s%s%s%s", gitdir, l && gitdir[l - 1] == '/' ? "" : "/", name, suffix);

	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

static int memo_path(const char *gitdir, const char *suffix, char *out, size_t n)
{
	return sync_gitdir_path(gitdir, MEMO_NAME, suffix, out, n);
}

/* One line "<ref> <tip hex> <against hex>": 0, or -1 when it is not one. */
static int memo_parse_line(char *line, struct sync_memo *m)
{
	char *a, *t;

	a = strrchr(line, ' ');
	if (!a)
		return -1;
	*a++ = '\0';
	t = strrchr(line, ' ');
	if (!t)
		return -1;
	*t++ = '\0';
	if (strlen(a) != GIT_OID_HEXSZ || strlen(t) != GIT_OID_HEXSZ ||
		git_oid_fromstr(&m->tip, t) < 0 || git_oid_fromstr(&m->against, a) < 0) {
		git_error_clear();
		return -1;
	}
	if (strncmp(line, "refs/remotes/", 13) != 0 || strlen(line) >= sizeof(m->ref) ||
		strpbrk(line, " \t"))
		return -1;
	memcpy(m->ref, line, strlen(line) + 1);
	return 0;
}

int sync_memo_load(const char *gitdir, struct sync_memos *ms)
{
	char path[4096], *buf = NULL;
	size_t got = 0;
	int fd, r = 0;

	ms->v = NULL;
	ms->n = 0;
	if (memo_path(gitdir, "", path, sizeof(path)) < 0)
		return 0;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0; /* none yet, or a link: no memo */
	/* Not a regular file, or too big: no memo either. */
	if (fo_read_fd(fd, MEMO_MAX_BYTES, &buf, &got) == 0)
		r = sync_memo_parse(buf, ms);
	free(buf);
	close(fd);
	return r;
}

int sync_memo_parse(char *buf, struct sync_memos *ms)
{
	char *line, *save = NULL;

	ms->v = NULL;
	ms->n = 0;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct sync_memo m, *nv;

		if (memo_parse_line(line, &m) < 0)
			continue; /* a damaged line only costs its shortcut */
		nv = realloc(ms->v, (ms->n + 1) * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		ms->v = nv;
		ms->v[ms->n++] = m;
	}
	return 0;
}

const struct sync_memo *sync_memo_find(const struct sync_memos *ms, const char *ref)
{
	for (size_t i = 0; i < ms->n; i++)
		if (!strcmp(ms->v[i].ref, ref))
			return &ms->v[i];
	return NULL;
}

int sync_memo_add(
	struct sync_memos *ms, const char *ref, const git_oid *tip, const git_oid *against)
{
	struct sync_memo *nv;

	if (strlen(ref) >= sizeof(nv->ref))
		return -ENAMETOOLONG;
	nv = realloc(ms->v, (ms->n + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	ms->v = nv;
	snprintf(nv[ms->n].ref, sizeof(nv[ms->n].ref), "%s", ref);
	git_oid_cpy(&nv[ms->n].tip, tip);
	git_oid_cpy(&nv[ms->n].against, against);
	ms->n++;
	return 0;
}

FILE *sync_memo_begin(
	const char *gitdir, const char *name, int empty, char *path, char *tmp, size_t n, int *err)
{
	FILE *f;
	int fd;

	*err = 0;
	if (sync_gitdir_path(gitdir, name, "", path, n) < 0 ||
		sync_gitdir_path(gitdir, name, ".tmp", tmp, n) < 0) {
		*err = -ENAMETOOLONG;
		return NULL;
	}
	if (empty) {
		if (unlink(path) < 0 && errno != ENOENT)
			*err = -errno;
		return NULL;
	}
	/* Under the pull's lock; O_NOFOLLOW: a planted link is not written through. */
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		*err = -errno;
		return NULL;
	}
	f = fdopen(fd, "w");
	if (!f) {
		*err = -errno;
		close(fd);
		unlink(tmp);
	}
	return f;
}

int sync_memo_commit(FILE *f, const char *tmp, const char *path)
{
	int bad = fflush(f) != 0 || ferror(f);

	if (fclose(f) != 0 || bad) {
		unlink(tmp);
		return -EIO;
	}
	if (rename(tmp, path) < 0) {
		int e = errno;

		unlink(tmp);
		return -e;
	}
	return 0;
}

int sync_memo_save(const char *gitdir, const struct sync_memos *ms)
{
	char path[4096], tmp[4096];
	FILE *f;
	int r;

	f = sync_memo_begin(gitdir, MEMO_NAME, !ms->n, path, tmp, sizeof(path), &r);
	if (!f)
		return r;
	sync_memo_write(f, ms);
	return sync_memo_commit(f, tmp, path);
}

void sync_memo_write(FILE *f, const struct sync_memos *ms)
{
	for (size_t i = 0; i < ms->n; i++) {
		char t[GIT_OID_HEXSZ + 1], a[GIT_OID_HEXSZ + 1];

		fprintf(f, "%s %s %s\n", ms->v[i].ref, git_oid_tostr(t, sizeof(t), &ms->v[i].tip),
			git_oid_tostr(a, sizeof(a), &ms->v[i].against));
	}
}

int sync_memos_equal(const struct sync_memos *a, const struct sync_memos *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i].ref, b->v[i].ref) ||
			!git_oid_equal(&a->v[i].tip, &b->v[i].tip) ||
			!git_oid_equal(&a->v[i].against, &b->v[i].against))
			return 0;
	return 1;
}

void sync_memos_free(struct sync_memos *ms)
{
	free(ms->v);
	ms->v = NULL;
	ms->n = 0;
}
