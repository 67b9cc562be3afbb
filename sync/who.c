/* SPDX-License-Identifier: MIT */
/*
 * Who committed what a pull brings (issue 28): the agent's commits name the agent as
 * committer (gitident.h) and, by default, the owner as author, whose mirrored user.name
 * and user.email git takes. The summary says both, so code the agent wrote does not pass
 * for the owner's, and a commit whose committer is not the agent stands out. These are
 * the commits' own words: the agent can write any name into a commit. Read in the
 * confined child like the rest of the review; the parent gets the texts escaped.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "sync.h"

/* "name <email>", each part cut to its bound (a cut UTF-8 sequence is escaped later). */
static void who_ident(const git_signature *s, char *out, size_t n)
{
	snprintf(out, n, "%.*s <%.*s>", SYNC_WHO_NAME, s && s->name ? s->name : "", SYNC_WHO_EMAIL,
		s && s->email ? s->email : "");
}

static void who_add(struct sync_whos *w, const char *committer, const char *author)
{
	for (size_t i = 0; i < w->n; i++)
		if (!strcmp(w->v[i].committer, committer) && !strcmp(w->v[i].author, author)) {
			w->v[i].commits++;
			return;
		}
	if (w->n == SYNC_WHO_MAX) {
		w->other++;
		return;
	}
	snprintf(w->v[w->n].committer, SYNC_WHO_TEXT, "%s", committer);
	snprintf(w->v[w->n].author, SYNC_WHO_TEXT, "%s", author);
	w->v[w->n++].commits = 1;
}

int sync_who_collect(
	git_repository *repo, const git_oid *tip, const git_oid *hide, struct sync_whos *out)
{
	git_revwalk *walk = NULL;
	git_oid id;
	size_t seen = 0;
	int r;

	memset(out, 0, sizeof(*out));
	if (git_revwalk_new(&walk, repo) < 0 || git_revwalk_push(walk, tip) < 0 ||
		(hide && git_revwalk_hide(walk, hide) < 0)) {
		git_revwalk_free(walk);
		return -1;
	}
	while ((r = git_revwalk_next(&id, walk)) == 0) {
		char committer[SYNC_WHO_TEXT], author[SYNC_WHO_TEXT];
		git_commit *c = NULL;

		if (seen == SYNC_WHO_WALK) {
			out->cut = 1;
			break;
		}
		if (git_commit_lookup(&c, repo, &id) < 0) {
			git_revwalk_free(walk);
			return -1;
		}
		who_ident(git_commit_committer(c), committer, sizeof(committer));
		who_ident(git_commit_author(c), author, sizeof(author));
		who_add(out, committer, author);
		git_commit_free(c);
		seen++;
	}
	git_revwalk_free(walk);
	return r == 0 || r == GIT_ITEROVER ? 0 : -1;
}
