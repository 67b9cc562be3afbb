/* SPDX-License-Identifier: MIT */
/*
 * The refs a download negotiates with, from memory. libgit2 1.5 sends "have" lines for
 * the tips of every ref of the fetching repository, found with a revwalk push of every
 * name under refs/: an iteration over the refs and then a lookup of each (a stat of
 * packed-refs and an open per loose ref). 500 loose remote-tracking refs cost 20-35 ms
 * there (7 ms when packed), and the pull reads the same refs once more itself. The
 * download runs on a second repository handle that shares the owner's object database
 * (the pack is written into the owner's objects/pack as before) and whose refdb is this
 * backend: the names and targets the pull read in its one pass, read-only.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include <git2/sys/refdb_backend.h>
#include <git2/sys/refs.h>
#include <git2/sys/repository.h>

#include "sync.h"

struct haves_ref {
	char *name;
	git_oid id;
};

struct haves_db {
	git_refdb_backend parent; /* first: libgit2 casts */
	struct haves_ref *v; /* sorted by name */
	size_t n;
};

struct haves_iter {
	git_reference_iterator parent; /* first */
	struct haves_db *db;
	char *glob; /* NULL: every ref */
	size_t i;
};

static int haves_cmp(const void *a, const void *b)
{
	return strcmp(((const struct haves_ref *)a)->name, ((const struct haves_ref *)b)->name);
}

static const struct haves_ref *haves_find(const struct haves_db *db, const char *name)
{
	struct haves_ref key = {.name = (char *)name};

	return db->n ? bsearch(&key, db->v, db->n, sizeof(*db->v), haves_cmp) : NULL;
}

static int haves_exists(int *exists, git_refdb_backend *b, const char *name)
{
	*exists = haves_find((struct haves_db *)b, name) != NULL;
	return 0;
}

static int haves_lookup(git_reference **out, git_refdb_backend *b, const char *name)
{
	const struct haves_ref *r = haves_find((struct haves_db *)b, name);

	if (!r) {
		git_error_set_str(GIT_ERROR_REFERENCE, "reference not found");
		return GIT_ENOTFOUND;
	}
	*out = git_reference__alloc(r->name, &r->id, NULL);
	return *out ? 0 : -1;
}

/* The next ref the glob matches (libgit2's globs: '*' matches '/' too), or NULL. */
static const struct haves_ref *haves_iter_step(struct haves_iter *it)
{
	while (it->i < it->db->n) {
		const struct haves_ref *r = &it->db->v[it->i++];

		if (!it->glob || fnmatch(it->glob, r->name, 0) == 0)
			return r;
	}
	return NULL;
}

static int haves_next(git_reference **out, git_reference_iterator *gi)
{
	const struct haves_ref *r = haves_iter_step((struct haves_iter *)gi);

	if (!r)
		return GIT_ITEROVER;
	*out = git_reference__alloc(r->name, &r->id, NULL);
	return *out ? 0 : -1;
}

static int haves_next_name(const char **out, git_reference_iterator *gi)
{
	const struct haves_ref *r = haves_iter_step((struct haves_iter *)gi);

	if (!r)
		return GIT_ITEROVER;
	*out = r->name;
	return 0;
}

static void haves_iter_free(git_reference_iterator *gi)
{
	struct haves_iter *it = (struct haves_iter *)gi;

	free(it->glob);
	free(it);
}

static int haves_iterator(git_reference_iterator **out, git_refdb_backend *b, const char *glob)
{
	struct haves_iter *it = calloc(1, sizeof(*it));

	if (!it || (glob && !(it->glob = strdup(glob)))) {
		free(it);
		git_error_set_oom();
		return -1;
	}
	it->db = (struct haves_db *)b;
	it->parent.next = haves_next;
	it->parent.next_name = haves_next_name;
	it->parent.free = haves_iter_free;
	*out = &it->parent;
	return 0;
}

/* Nothing is ever written through this handle: every write is refused. */
static int haves_readonly(void)
{
	git_error_set_str(GIT_ERROR_REFERENCE, "ocsb: the download's refs are read-only");
	return -1;
}

static int haves_write(git_refdb_backend *b, const git_reference *ref, int force,
	const git_signature *who, const char *message, const git_oid *old, const char *old_target)
{
	return haves_readonly();
}

static int haves_rename(git_reference **out, git_refdb_backend *b, const char *old_name,
	const char *new_name, int force, const git_signature *who, const char *message)
{
	return haves_readonly();
}

static int haves_del(
	git_refdb_backend *b, const char *name, const git_oid *old_id, const char *old_target)
{
	return haves_readonly();
}

static int haves_compress(git_refdb_backend *b)
{
	return haves_readonly();
}

static int haves_has_log(git_refdb_backend *b, const char *name)
{
	return 0;
}

static int haves_ensure_log(git_refdb_backend *b, const char *name)
{
	return haves_readonly();
}

static int haves_reflog_read(git_reflog **out, git_refdb_backend *b, const char *name)
{
	return haves_readonly();
}

static int haves_reflog_write(git_refdb_backend *b, git_reflog *reflog)
{
	return haves_readonly();
}

static int haves_reflog_rename(git_refdb_backend *b, const char *old_name, const char *new_name)
{
	return haves_readonly();
}

static int haves_reflog_delete(git_refdb_backend *b, const char *name)
{
	return haves_readonly();
}

static int haves_lock(void **payload, git_refdb_backend *b, const char *name)
{
	return haves_readonly();
}

static int haves_unlock(git_refdb_backend *b, void *payload, int success, int update_reflog,
	const git_reference *ref, const git_signature *sig, const char *message)
{
	return haves_readonly();
}

static void haves_free(git_refdb_backend *b)
{
	struct haves_db *db = (struct haves_db *)b;

	for (size_t i = 0; i < db->n; i++)
		free(db->v[i].name);
	free(db->v);
	free(db);
}

int sync_haves_repo(git_repository **out, git_repository *repo, const char *const *names,
	const git_oid *ids, size_t n)
{
	struct haves_db *db = calloc(1, sizeof(*db));
	git_refdb *refdb = NULL;
	git_odb *odb = NULL;
	int r = -1;

	*out = NULL;
	if (!db || (n && !(db->v = calloc(n, sizeof(*db->v))))) {
		free(db);
		git_error_set_oom();
		return -1;
	}
	if (git_refdb_init_backend(&db->parent, GIT_REFDB_BACKEND_VERSION) < 0) {
		free(db->v);
		free(db);
		return -1;
	}
	db->parent.exists = haves_exists;
	db->parent.lookup = haves_lookup;
	db->parent.iterator = haves_iterator;
	db->parent.write = haves_write;
	db->parent.rename = haves_rename;
	db->parent.del = haves_del;
	db->parent.compress = haves_compress;
	db->parent.has_log = haves_has_log;
	db->parent.ensure_log = haves_ensure_log;
	db->parent.free = haves_free;
	db->parent.reflog_read = haves_reflog_read;
	db->parent.reflog_write = haves_reflog_write;
	db->parent.reflog_rename = haves_reflog_rename;
	db->parent.reflog_delete = haves_reflog_delete;
	db->parent.lock = haves_lock;
	db->parent.unlock = haves_unlock;
	for (size_t i = 0; i < n; i++) {
		if (!(db->v[db->n].name = strdup(names[i]))) {
			haves_free(&db->parent);
			git_error_set_oom();
			return -1;
		}
		git_oid_cpy(&db->v[db->n++].id, &ids[i]);
	}
	qsort(db->v, db->n, sizeof(*db->v), haves_cmp);
	if (git_repository_odb(&odb, repo) < 0 || git_repository_wrap_odb(out, odb) < 0 ||
		git_refdb_new(&refdb, *out) < 0) {
		haves_free(&db->parent);
		goto out;
	}
	if (git_refdb_set_backend(refdb, &db->parent) < 0) {
		haves_free(&db->parent);
		goto out;
	}
	if (git_repository_set_refdb(*out, refdb) < 0)
		goto out;
	r = 0;
out:
	git_refdb_free(refdb);
	git_odb_free(odb);
	if (r < 0) {
		git_repository_free(*out);
		*out = NULL;
	}
	return r;
}
