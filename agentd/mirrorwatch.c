/* SPDX-License-Identifier: MIT */
/*
 * Keeps the mirror of the owner's configs fresh: inotify on the source directories,
 * a short debounce, then an incremental refresh (common/mirror_priv.c). The watches are
 * root's, by path; a watch reads no content, and every byte is still read by a child
 * with the owner's rights (docs/mirror.md).
 *
 * Once the loop runs, a refresh runs in a forked root child (the writer, which starts the
 * owner-rights reader as before) so that a refresh of many files never holds the loop:
 * the child loads the manifest, refreshes, and sends back NUL-terminated records that the
 * loop reads as they come: "S written removed entries ms", "N notice", and the
 * directories to watch, "A path" (an ancestor) and "D path".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentd.h"
#include "log.h"
#include "mirror.h"

#define MW_MAX_WATCHES 8192
#define MW_DEBOUNCE_MS 100 /* quiet time after the last event */
#define MW_MAX_DELAY_MS 500 /* a steady stream of events still refreshes this often */
#define MW_MAX_ANSWER (64u * 1024 * 1024) /* bytes from the refresh child */

#define MW_EVENTS                                                                           \
	(IN_CREATE | IN_DELETE | IN_CLOSE_WRITE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | \
		IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

struct mw_watch {
	int wd;
	int ancestor; /* the home or a root's parent: only names leading to a root matter */
	char *path; /* owned; absolute */
};

struct mirrorwatch {
	struct mirror m;
	int ok; /* initialised */
	int ifd, tfd;
	struct src isrc, tsrc;
	struct mw_watch *w; /* owned */
	size_t nw, capw;
	int limit_logged;
	long first_event_ms; /* 0: nothing pending */
	unsigned refreshes;
	/* the refresh child */
	pid_t pid; /* 0: none running */
	int rfd; /* owned: its answer, read as it comes */
	struct src rsrc;
	struct buf in; /* owned */
	char why[64];
	int again; /* more changes came meanwhile: another refresh after this one */
	int reopen; /* a reload came meanwhile: reopen after this one */
};

static struct mw_watch *find_wd(struct mirrorwatch *mw, int wd)
{
	for (size_t i = 0; i < mw->nw; i++)
		if (mw->w[i].wd == wd)
			return &mw->w[i];
	return NULL;
}

/* 1 when a directory is watched that was not before. */
static int add_watch(struct mirrorwatch *mw, const char *path, int ancestor)
{
	struct mw_watch *w;
	int wd;

	if (mw->nw >= MW_MAX_WATCHES) {
		if (!mw->limit_logged++)
			log_warn("mirror: more than %d directories to watch: changes below %s and "
				 "others are picked up only by 'sudo ocsb-provision'",
				MW_MAX_WATCHES, path);
		return 0;
	}
	wd = inotify_add_watch(mw->ifd, path, MW_EVENTS);
	if (wd < 0)
		return 0; /* gone meanwhile, or not a directory: the next scan tells */
	if ((w = find_wd(mw, wd)) != NULL) {
		w->ancestor &= ancestor;
		return 0;
	}
	if (mw->nw == mw->capw) {
		size_t cap = mw->capw ? mw->capw * 2 : 64;
		struct mw_watch *n = realloc(mw->w, cap * sizeof(*n));

		if (!n)
			return 0;
		mw->w = n;
		mw->capw = cap;
	}
	w = &mw->w[mw->nw];
	w->wd = wd;
	w->ancestor = ancestor;
	w->path = strdup(path);
	if (!w->path) {
		inotify_rm_watch(mw->ifd, wd);
		return 0;
	}
	mw->nw++;
	return 1;
}

static void drop_watch(struct mirrorwatch *mw, int wd)
{
	for (size_t i = 0; i < mw->nw; i++)
		if (mw->w[i].wd == wd) {
			free(mw->w[i].path);
			mw->w[i] = mw->w[--mw->nw];
			return;
		}
}

static void arm(struct mirrorwatch *mw);

/*
 * After each scan: watch every directory the manifest knows (new ones included). A file
 * created in a new directory between the scan and the watch makes no event: when a new
 * directory is watched, one more refresh follows (it costs a no-change refresh).
 */
static void update_watches(struct mirrorwatch *mw, struct strv *anc, struct strv *dirs)
{
	int added = 0;

	for (size_t i = 0; i < anc->n; i++)
		added |= add_watch(mw, anc->v[i], 1);
	for (size_t i = 0; i < dirs->n; i++)
		added |= add_watch(mw, dirs->v[i], 0);
	if (added)
		arm(mw);
}

static void report(struct mirrorwatch *mw, const char *why, const struct mirror_stats *st,
	const struct strv *notices)
{
	mw->refreshes++;
	if (st->written || st->removed)
		log_notice("mirror: %s: %u written, %u removed in %ld ms", why, st->written,
			st->removed, st->ms);
	else
		log_debug("mirror: %s: no change (%u entries, %ld ms)", why, st->entries, st->ms);
	for (size_t i = 0; i < notices->n; i++)
		log_notice("mirror: %s", notices->v[i]);
}

/* In the loop's process, before the loop: the refresh at start. */
static void refresh(struct agentd *d, struct mirrorwatch *mw, const char *why)
{
	struct mirror_stats st;
	struct strv anc = {0}, dirs = {0};

	if (mirror_refresh(&mw->m, 0, &st) < 0) {
		log_err("mirror: refresh (%s) failed; the tree keeps its last state", why);
		return;
	}
	report(mw, why, &st, &mw->m.notices);
	mirror_watch_dirs(&mw->m, &anc, &dirs);
	update_watches(mw, &anc, &dirs);
	strv_free(&anc);
	strv_free(&dirs);
	/*
	 * Later refreshes run in a child that loads the manifest from disk: the loop needs
	 * none of it (10,000 entries are about 1.3 MiB that glibc keeps unless trimmed).
	 */
	mirror_free(&mw->m);
	malloc_trim(0);
}

static int put_rec(struct buf *b, char tag, const char *text)
{
	return buf_printf(b, "%c %s", tag, text) < 0 || buf_append(b, "", 1) < 0 ? -1 : 0;
}

/* The refresh child: root, the writer; its reader drops to the owner (mirror_refresh). */
static int child_refresh(struct mirrorwatch *mw, int out, pid_t parent)
{
	struct mirror_stats st;
	struct strv anc = {0}, dirs = {0};
	struct buf b = {0};
	char line[128];
	const char *p;
	size_t left;

	/* Gone with agentd; the pipe is fd 3, the rest of agentd's descriptors are closed. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		return 1;
	if (dup2(out, 3) < 0 || syscall(SYS_close_range, 4U, ~0U, 0) < 0)
		return 1;
	/* The manifest on disk is the last refresh's (the loop's copy is the start's). */
	mirror_load(&mw->m);
	if (mirror_refresh(&mw->m, 0, &st) < 0)
		return 1;
	snprintf(line, sizeof(line), "%u %u %u %ld", st.written, st.removed, st.entries, st.ms);
	put_rec(&b, 'S', line);
	for (size_t i = 0; i < mw->m.notices.n; i++)
		put_rec(&b, 'N', mw->m.notices.v[i]);
	mirror_watch_dirs(&mw->m, &anc, &dirs);
	for (size_t i = 0; i < anc.n; i++)
		put_rec(&b, 'A', anc.v[i]);
	for (size_t i = 0; i < dirs.n; i++)
		put_rec(&b, 'D', dirs.v[i]);
	for (p = b.data, left = b.len; left;) {
		ssize_t w = write(3, p, left);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 1;
		p += w;
		left -= (size_t)w;
	}
	return 0;
}

static void refresh_begin(struct agentd *d, struct mirrorwatch *mw, const char *why)
{
	pid_t parent = getpid(), pid;
	int p[2];

	if (mw->pid > 0) {
		mw->again = 1;
		return;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		log_err("mirror: pipe: %s", strerror(errno));
		return;
	}
	pid = fork();
	if (pid < 0) {
		log_err("mirror: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		_exit(child_refresh(mw, p[1], parent));
	}
	close(p[1]);
	mw->pid = pid;
	mw->rfd = p[0];
	snprintf(mw->why, sizeof(mw->why), "%s", why);
	if (fcntl(mw->rfd, F_SETFL, O_NONBLOCK) < 0 ||
		agentd_watch(d, mw->rfd, &mw->rsrc, SRC_MIRROR, mw, EPOLLIN) < 0) {
		log_err("mirror: watching the refresh: %s", strerror(errno));
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(mw->rfd);
		mw->rfd = -1;
		mw->pid = 0;
	}
}

/* The answer is complete (end of file): report it, watch its directories. */
static void refresh_end(struct agentd *d, struct mirrorwatch *mw)
{
	struct strv notices = {0}, anc = {0}, dirs = {0};
	struct mirror_stats st = {0};
	int status = 0, have = 0;

	epoll_ctl(d->epfd, EPOLL_CTL_DEL, mw->rfd, NULL);
	close(mw->rfd);
	mw->rfd = -1;
	/* Its end of the pipe closed as it exited: the wait is for a zombie. */
	while (waitpid(mw->pid, &status, 0) < 0 && errno == EINTR)
		;
	mw->pid = 0;
	for (size_t off = 0; off < mw->in.len;) {
		const char *r = mw->in.data + off;
		size_t n = strnlen(r, mw->in.len - off);

		if (off + n == mw->in.len || n < 2)
			break; /* not terminated: a truncated answer */
		off += n + 1;
		if (r[0] == 'S')
			have = sscanf(r + 2, "%u %u %u %ld", &st.written, &st.removed,
					   &st.entries, &st.ms) == 4;
		else
			strv_push(r[0] == 'N' ? &notices : r[0] == 'A' ? &anc : &dirs, r + 2);
	}
	if (!have || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		log_err("mirror: refresh (%s) failed; the tree keeps its last state", mw->why);
	else
		report(mw, mw->why, &st, &notices);
	update_watches(mw, &anc, &dirs);
	strv_free(&notices);
	strv_free(&anc);
	strv_free(&dirs);
	buf_free(&mw->in);
	if (mw->reopen) {
		mirrorwatch_reload(d); /* frees mw */
		return;
	}
	if (mw->again) {
		mw->again = 0;
		arm(mw);
	}
}

static void refresh_read(struct agentd *d, struct mirrorwatch *mw)
{
	char buf[65536];

	/* Bounded per wake-up: the loop turns between chunks. */
	for (int round = 0; round < 16; round++) {
		ssize_t n = read(mw->rfd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return; /* EAGAIN: more later */
		if (n == 0) {
			refresh_end(d, mw);
			return;
		}
		if (mw->in.len + (size_t)n > MW_MAX_ANSWER) {
			log_err("mirror: the refresh child's answer is too long: stopped");
			kill(mw->pid, SIGKILL);
			buf_free(&mw->in);
			continue; /* its end of file follows */
		}
		if (buf_append(&mw->in, buf, (size_t)n) < 0)
			kill(mw->pid, SIGKILL);
	}
}

/* at_start: refresh before returning (setup); else in a child, the loop running. */
static int open_watch(struct agentd *d, int at_start)
{
	struct mirrorwatch *mw;

	if (!d->cfg.mirror.paths.n)
		return 0;
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -1;
	mw->ifd = mw->tfd = mw->rfd = -1;
	d->mirror = mw;
	if (mirror_init(&mw->m, &d->paths, &d->owner, &d->agent, &d->cfg.mirror) < 0) {
		log_err("mirror: path too long");
		return -1;
	}
	mw->m.by = "ocsb-agentd";
	mw->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	mw->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (mw->ifd < 0 || mw->tfd < 0) {
		log_err("mirror: inotify/timerfd: %s", strerror(errno));
		return -1;
	}
	if (agentd_watch(d, mw->ifd, &mw->isrc, SRC_MIRROR, mw, EPOLLIN) < 0 ||
		agentd_watch(d, mw->tfd, &mw->tsrc, SRC_MIRROR, mw, EPOLLIN) < 0)
		return -1;
	mw->ok = 1;
	if (!at_start) {
		refresh_begin(d, mw, "configuration reloaded");
		return 0;
	}
	mirror_load(&mw->m);
	/* Before OpenCode starts: it reads its configuration once, at start. */
	refresh(d, mw, "start");
	return 0;
}

int mirrorwatch_open(struct agentd *d)
{
	return open_watch(d, 1);
}

static void arm(struct mirrorwatch *mw)
{
	long now = mono_ms(), due;
	struct itimerspec its = {0};

	if (!mw->first_event_ms)
		mw->first_event_ms = now;
	due = now + MW_DEBOUNCE_MS;
	if (due > mw->first_event_ms + MW_MAX_DELAY_MS)
		due = mw->first_event_ms + MW_MAX_DELAY_MS;
	if (due <= now)
		due = now + 1;
	its.it_value.tv_sec = (due - now) / 1000;
	its.it_value.tv_nsec = ((due - now) % 1000) * 1000000;
	timerfd_settime(mw->tfd, 0, &its, NULL);
}

/* Does `name` in an ancestor directory lead to one of the mirrored roots? */
static int leads_to_root(const struct mirrorwatch *mw, const struct mw_watch *w, const char *name)
{
	size_t hl = strlen(mw->m.home);
	const char *rel = w->path + hl; /* "" for the home, "/.config" ... */

	if (strncmp(w->path, mw->m.home, hl) != 0)
		return 1;
	if (*rel == '/')
		rel++;
	for (size_t i = 0; i < mw->m.spec->paths.n; i++) {
		const char *p = mw->m.spec->paths.v[i];
		size_t rl = strlen(rel), nl = strlen(name);

		if (rl && (strncmp(p, rel, rl) != 0 || p[rl] != '/'))
			continue;
		p += rl ? rl + 1 : 0;
		if (!strncmp(p, name, nl) && (p[nl] == '/' || p[nl] == '\0'))
			return 1;
	}
	return 0;
}

void mirrorwatch_event(struct agentd *d, struct src *s)
{
	struct mirrorwatch *mw = s->ptr;
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	int relevant = 0;

	if (s == &mw->rsrc) {
		refresh_read(d, mw);
		return;
	}
	if (s == &mw->tsrc) {
		uint64_t x;

		if (read(mw->tfd, &x, sizeof(x)) < 0) {
			/* spurious wake-up */
		}
		mw->first_event_ms = 0;
		refresh_begin(d, mw, "source changed");
		return;
	}
	for (;;) {
		ssize_t n = read(mw->ifd, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			struct inotify_event *ev = (struct inotify_event *)p;
			struct mw_watch *w = find_wd(mw, ev->wd);

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				relevant = 1;
				continue;
			}
			if (ev->mask & IN_IGNORED) {
				drop_watch(mw, ev->wd);
				continue;
			}
			/* The home sees every write of the owner's shell history: filter. */
			if (w && w->ancestor && ev->len && !leads_to_root(mw, w, ev->name))
				continue;
			relevant = 1;
		}
	}
	if (relevant)
		arm(mw);
}

void mirrorwatch_reload(struct agentd *d)
{
	struct mirrorwatch *mw = d->mirror;

	/* A refresh running is not cut short: the reopen follows its end. */
	if (mw && mw->pid > 0) {
		mw->reopen = 1;
		return;
	}
	mirrorwatch_close(d);
	if (open_watch(d, 0) < 0) {
		log_err("mirror: not watching after the reload");
		mirrorwatch_close(d);
	}
}

void mirrorwatch_close(struct agentd *d)
{
	struct mirrorwatch *mw = d->mirror;

	if (!mw)
		return;
	if (mw->pid > 0) {
		/* Shutting down: the writer replaces files by rename, so none is left half. */
		kill(mw->pid, SIGKILL);
		while (waitpid(mw->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (mw->rfd >= 0)
		close(mw->rfd);
	buf_free(&mw->in);
	if (mw->ifd >= 0)
		close(mw->ifd); /* closing removes it from epoll and drops every watch */
	if (mw->tfd >= 0)
		close(mw->tfd);
	for (size_t i = 0; i < mw->nw; i++)
		free(mw->w[i].path);
	free(mw->w);
	mirror_free(&mw->m);
	free(mw);
	d->mirror = NULL;
}
