/* SPDX-License-Identifier: MIT */
/*
 * The owner's refs, read once per pull (sync/pull.c): the agent's remote-tracking refs,
 * the owner's branches, every ref's target for the download's negotiation (haves.c) and
 * the commits the history check trusts (diff.c).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "sync.h"

void sync_allrefs_free(struct sync_allrefs *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->names[i]);
	free(a->names);
	free(a->ids);
	memset(a, 0, sizeof(*a));
}

static int sync_allrefs_add(struct sync_allrefs *a, git_reference *ref)
{
	git_reference *res = NULL;
	int r = 0;

	if (git_reference_type(ref) != GIT_REFERENCE_DIRECT &&
		git_reference_resolve(&res, ref) < 0) {
		git_error_clear();
		return 0; /* dangling: libgit2's own walk skips it too */
	}
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 64;
		char **nn = realloc(a->names, cap * sizeof(*nn));
		git_oid *ni = nn ? realloc(a->ids, cap * sizeof(*ni)) : NULL;

		if (nn)
			a->names = nn;
		if (!ni) {
			git_reference_free(res);
			return -1;
		}
		a->ids = ni;
		a->cap = cap;
	}
	if (!(a->names[a->n] = strdup(git_reference_name(ref))))
		r = -1;
	else
		git_oid_cpy(&a->ids[a->n++], git_reference_target(res ? res : ref));
	git_reference_free(res);
	return r;
}

static int sync_refent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sync_refent *)a)->name, ((const struct sync_refent *)b)->name);
}

void sync_reftab_free(struct sync_reftab *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->v[i].name);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

static int sync_reftab_add(struct sync_reftab *t, size_t *cap, git_reference *ref, size_t plen)
{
	struct sync_refent *e;
	git_reference *res = NULL;

	if (t->n == *cap) {
		struct sync_refent *nv = realloc(t->v, (*cap ? 2 * *cap : 64) * sizeof(*nv));

		if (!nv)
			return -1;
		t->v = nv;
		*cap = *cap ? 2 * *cap : 64;
	}
	e = &t->v[t->n];
	memset(e, 0, sizeof(*e));
	e->name = strdup(git_reference_name(ref) + plen);
	if (!e->name)
		return -1;
	e->direct = git_reference_type(ref) == GIT_REFERENCE_DIRECT;
	if (e->direct)
		git_oid_cpy(&e->id, git_reference_target(ref));
	else if (git_reference_resolve(&res, ref) == 0)
		git_oid_cpy(&e->id, git_reference_target(res));
	git_reference_free(res);
	t->n++;
	return 0;
}

/* One pass over every ref (sync.h). */
int sync_refs_load(git_repository *repo, const char *prefix, struct sync_reftab *tracked,
	struct sync_reftab *locals, struct sync_allrefs *all, struct sync_oidset *known,
	int *known_ok)
{
	git_reference_iterator *it = NULL;
	git_reference *ref;
	size_t plen = strlen(prefix), tcap = 0, lcap = 0;
	int ret = 0;

	*known_ok = 1;
	if (git_reference_iterator_new(&it, repo) < 0) {
		git_error_clear();
		*known_ok = 0;
		return 0; /* no refs: lookups find nothing */
	}
	while (ret == 0 && git_reference_next(&ref, it) == 0) {
		const char *n = git_reference_name(ref);

		if (!strncmp(n, prefix, plen))
			ret = sync_reftab_add(tracked, &tcap, ref, plen);
		else if (!strncmp(n, "refs/heads/", 11))
			ret = sync_reftab_add(locals, &lcap, ref, 11);
		if (ret == 0)
			ret = sync_allrefs_add(all, ref);
		if (*known_ok && sync_trusted_add(known, ref) < 0)
			*known_ok = 0;
		git_reference_free(ref);
	}
	git_reference_iterator_free(it);
	git_error_clear();
	if (ret < 0) {
		log_err("out of memory");
		return -1;
	}
	qsort(tracked->v, tracked->n, sizeof(*tracked->v), sync_refent_cmp);
	qsort(locals->v, locals->n, sizeof(*locals->v), sync_refent_cmp);
	return 0;
}

const struct sync_refent *sync_reftab_find(const struct sync_reftab *t, const char *name)
{
	struct sync_refent key = {.name = (char *)name};

	return t->n ? bsearch(&key, t->v, t->n, sizeof(*t->v), sync_refent_cmp) : NULL;
}
