/* SPDX-License-Identifier: MIT */
/*
 * The mirror's watcher, `ocsb-agentd --mirror-watch`: the owner's process (the warden runs
 * it as the owner, WP_KIND_MIRROR_WATCH), apart from the supervisor's side in
 * mirrorwatch.c. It watches the mirrored paths with inotify (a 0700 home the supervisor
 * cannot watch) and writes one byte to its stdout per burst of changes; the supervisor
 * reads that pipe and refreshes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "agentd.h"
#include "log.h"
#include "mirror.h"

#define MW_MAX_DELAY_MS 500 /* a steady stream of events still refreshes this often */
#define MW_MAX_WATCHES 8192
#define MW_EVENTS                                                                           \
	(IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | \
		IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct mw_watch {
	int wd;
	int ancestor; /* the home or a root's parent: only names leading to a root matter */
	char *path; /* owned; absolute */
};

/* The watcher's state (the owner's process, --mirror-watch). */
struct mw_watcher {
	struct mirror *m; /* borrowed; its manifest loaded only while the watches are updated */
	int ifd;
	int base_wd; /* the status file's directory; -1 none */
	const char *status_name; /* borrowed: the status file's name in it */
	struct mw_watch *w; /* owned */
	size_t nw, capw;
	int limit_logged, denied_logged;
};

/* ---- the watcher: `ocsb-agentd --mirror-watch`, the owner's process ---- */

/* A burst's byte is due once it has been quiet a while, or has lasted too long. */
static long burst_due(long first, long last)
{
	long quiet = last + MIRROR_DEBOUNCE_MS, longest = first + MW_MAX_DELAY_MS;

	return quiet < longest ? quiet : longest;
}

static struct mw_watch *find_wd(struct mw_watcher *wt, int wd)
{
	for (size_t i = 0; i < wt->nw; i++)
		if (wt->w[i].wd == wd)
			return &wt->w[i];
	return NULL;
}

/* 1 when a directory is watched that was not before. */
static int add_watch(struct mw_watcher *wt, const char *path, int ancestor)
{
	struct mw_watch *w;
	int wd;

	if (wt->nw >= MW_MAX_WATCHES) {
		if (!wt->limit_logged++)
			log_warn("more than %d directories to watch: changes below %s and others "
				 "are picked up only by 'sudo ocsb-provision'",
				MW_MAX_WATCHES, path);
		return 0;
	}
	wd = inotify_add_watch(wt->ifd, path, MW_EVENTS);
	if (wd < 0 && errno == ENOSPC) {
		if (!wt->limit_logged++)
			log_warn("%s: %s (fs.inotify.max_user_watches): changes below it and "
				 "others are picked up only by 'sudo ocsb-provision'",
				path, strerror(errno));
		return 0;
	}
	if (wd < 0)
		return 0; /* gone meanwhile, or not a directory: the next scan tells */
	if ((w = find_wd(wt, wd)) != NULL) {
		w->ancestor &= ancestor;
		return 0;
	}
	if (wt->nw == wt->capw) {
		size_t cap = wt->capw ? wt->capw * 2 : 64;
		struct mw_watch *n = realloc(wt->w, cap * sizeof(*n));

		if (!n)
			return 0;
		wt->w = n;
		wt->capw = cap;
	}
	w = &wt->w[wt->nw];
	w->wd = wd;
	w->ancestor = ancestor;
	w->path = strdup(path);
	if (!w->path) {
		inotify_rm_watch(wt->ifd, wd);
		return 0;
	}
	wt->nw++;
	return 1;
}

static void drop_watch(struct mw_watcher *wt, int wd)
{
	for (size_t i = 0; i < wt->nw; i++)
		if (wt->w[i].wd == wd) {
			free(wt->w[i].path);
			wt->w[i] = wt->w[--wt->nw];
			return;
		}
}

/*
 * Watch the home and the roots' parents (where a root may appear) and, with the manifest,
 * every directory of the last refresh. 1 when a directory is watched that was not before:
 * a file made in it before its watch makes no event, so one more refresh is due.
 */
static int watcher_update(struct mw_watcher *wt, int manifest)
{
	struct strv anc = {0}, dirs = {0};
	int added = 0;

	if (manifest)
		mirror_load(wt->m);
	mirror_watch_dirs(wt->m, &anc, &dirs);
	if (manifest) {
		/* Kept only for this (10,000 entries are about 1.3 MiB). */
		mirror_free(wt->m);
		malloc_trim(0);
	}
	for (size_t i = 0; i < anc.n; i++)
		added |= add_watch(wt, anc.v[i], 1);
	for (size_t i = 0; i < dirs.n; i++)
		added |= add_watch(wt, dirs.v[i], 0);
	strv_free(&anc);
	strv_free(&dirs);
	return added;
}

/* Does `name` in an ancestor directory lead to one of the mirrored roots? */
static int leads_to_root(const struct mw_watcher *wt, const struct mw_watch *w, const char *name)
{
	size_t hl = strlen(wt->m->home);
	const char *rel = w->path + hl; /* "" for the home, "/.config" ... */

	if (strncmp(w->path, wt->m->home, hl) != 0)
		return 1;
	if (*rel == '/')
		rel++;
	for (size_t i = 0; i < wt->m->spec->paths.n; i++) {
		const char *p = wt->m->spec->paths.v[i];
		size_t rl = strlen(rel), nl = strlen(name);

		if (rl && (strncmp(p, rel, rl) != 0 || p[rl] != '/'))
			continue;
		p += rl ? rl + 1 : 0;
		if (!strncmp(p, name, nl) && (p[nl] == '/' || p[nl] == '\0'))
			return 1;
	}
	return 0;
}

/* The events that are there: 1 when one is a change of the sources. */
static int watcher_read_events(struct mw_watcher *wt, int *ret_reload)
{
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	int relevant = 0;

	for (;;) {
		ssize_t n = read(wt->ifd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			struct mw_watch *w;

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				relevant = *ret_reload = 1;
				continue;
			}
			if (ev->wd == wt->base_wd) {
				/* The status file rewritten: the tree changed, maybe its directories. */
				if (ev->mask & IN_IGNORED)
					wt->base_wd = -1;
				else if (ev->len && !strcmp(ev->name, wt->status_name))
					*ret_reload = 1;
				continue;
			}
			if (ev->mask & IN_IGNORED) {
				drop_watch(wt, ev->wd);
				continue;
			}
			w = find_wd(wt, ev->wd);
			/* The home sees every write of the owner's shell history: filter. */
			if (w && w->ancestor && ev->len && !leads_to_root(wt, w, ev->name))
				continue;
			relevant = 1;
		}
	}
	return relevant;
}

static int put_byte(int fd)
{
	ssize_t w;

	while ((w = write(fd, "c", 1)) < 0 && errno == EINTR)
		;
	return w == 1 ? 0 : -1;
}

int mirrorwatch_watcher(struct mirror *m, int outfd)
{
	struct mw_watcher wt = {.m = m, .base_wd = -1};
	const char *slash = strrchr(m->status, '/');
	long first = 0, last = 0;
	int r = 1, reload = 0;

	wt.status_name = slash ? slash + 1 : m->status;
	wt.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (wt.ifd < 0) {
		log_err("--mirror-watch: inotify: %s", strerror(errno));
		return 1;
	}
	/* The status file is rewritten in place (mirror_status_write), or replaced by root. */
	wt.base_wd = inotify_add_watch(wt.ifd, m->base, IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR);
	if (wt.base_wd < 0)
		log_warn("--mirror-watch: %s: %s: a new directory is watched only from the next "
			 "start",
			m->base, strerror(errno));
	watcher_update(&wt, 1);
	/* Ready: the refresh it starts covers what changed before the watches were there. */
	if (put_byte(outfd) < 0) {
		r = errno == EPIPE ? 0 : 1;
		goto out;
	}
	for (;;) {
		struct pollfd pf[2] = {{.fd = wt.ifd, .events = POLLIN}, {.fd = outfd}};
		long now, due = first ? burst_due(first, last) : 0;
		int relevant = 0, timeout = -1;

		if (due) {
			now = mono_ms();
			timeout = due > now ? (int)(due - now) : 0;
		}
		if (poll(pf, 2, timeout) < 0 && errno != EINTR) {
			log_err("--mirror-watch: poll: %s", strerror(errno));
			break;
		}
		/* The supervisor closed its end (it stopped): nobody to tell. */
		if (pf[1].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			r = 0;
			break;
		}
		if (pf[0].revents & POLLIN)
			relevant = watcher_read_events(&wt, &reload);
		if (reload) {
			reload = 0;
			relevant |= watcher_update(&wt, 1);
		}
		now = mono_ms();
		if (relevant) {
			first = first ? first : now;
			last = now;
		}
		if (!first || now < burst_due(first, last))
			continue;
		/* A root's parent made since: watched before the refresh reads. */
		watcher_update(&wt, 0);
		first = 0;
		if (put_byte(outfd) < 0) {
			r = errno == EPIPE ? 0 : 1;
			break;
		}
	}
out:
	close(wt.ifd);
	for (size_t i = 0; i < wt.nw; i++)
		free(wt.w[i].path);
	free(wt.w);
	return r;
}
