/* SPDX-License-Identifier: MIT */
/*
 * Keeps the mirror of the owner's configs fresh: inotify on the source directories,
 * a short debounce, then an incremental refresh (docs/mirror.md).
 *
 * The supervisor runs as the account ocsb-agentd (issue 26): the tree is its own, and it
 * has no right to the owner's home or the agent's. A refresh asks the warden for the
 * supervisor's program in a one-job mode:
 *
 *   1. the reader, `ocsb-agentd --mirror-read` as the owner (WP_KIND_MIRROR_READ): its
 *      stdout (the stream) and stderr are read here as they come, never holding the loop;
 *   2. once its stream ended and the warden reported a clean exit, the writer: a fork of
 *      this process (the same account, nothing to drop) applies the stream to the tree
 *      (mirror_apply) and sends back NUL-terminated records, read as they come:
 *      "S written removed entries ms", "N notice", "L flags" (which configured paths the
 *      tree holds);
 *   3. when that set changed (and at start), the link maker, `ocsb-agentd --mirror-link`
 *      as the agent (WP_KIND_MIRROR_LINK), makes the links in the agent's home.
 *
 * At start (before OpenCode: it reads its configuration once) the same steps run with
 * the loop not yet turning: the reader's output is read to its end and its exit waited
 * for, the writer runs in this process.
 *
 * The watches are the owner's: this account may not watch a directory of mode 0700 (a
 * home, ~/.config), so the warden runs `ocsb-agentd --mirror-watch` as the owner
 * (WP_KIND_MIRROR_WATCH, mirrorwatch_watcher in mirror_watcher.c) for as long as the supervisor runs. It
 * writes one byte to its stdout per burst of changes; a byte here starts a refresh. It
 * learns the directories of each refresh from the status file (the manifest, which the
 * owner's group reads): the writer rewrites it when the tree changed. It reads no content
 * and sends nothing else: a byte is all an owner's process can make the supervisor do,
 * which a change of a file does too. While it is not running (it failed, it is restarted
 * with a growing pause), a refresh every 30 s stands in.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentd.h"
#include "log.h"
#include "mirror.h"
#include "wproto.h"

#define MW_POLL_MS 30000 /* a refresh this often while the watcher does not run */
#define MW_RESTART_MS 1000 /* the watcher's first restart after this, doubling each time */
#define MW_RESTART_MAX_MS 60000 /* up to this; a watcher that ran this long starts it over */
#define MW_JOB_MS 60000 /* the reader's and the link maker's time (spawn's timeout before) */
#define MW_MAX_ANSWER (64u * 1024 * 1024) /* bytes from the writer child */
#define MW_MAX_STREAM (MIRROR_MAX_TOTAL + 32u * 1024 * 1024) /* bytes from the reader */
#define MW_MAX_LINES (1024 * 1024) /* bytes from the link maker */
#define MW_MAX_ERR 65536 /* bytes of a job's stderr logged */

struct mirrorwatch;

/*
 * The warden's report on a job comes through wc_on_slot with this as its argument: it
 * outlives the mirrorwatch that started the job (a reload or a stop), mw NULL then.
 */
struct mw_token {
	struct mirrorwatch *mw; /* borrowed; NULL: orphaned, freed at the job's exit */
	uint32_t kind; /* which of its jobs */
};

/* A child of the warden's: the reader or the link maker (one job), or the watcher. */
struct mw_job {
	uint32_t kind; /* WP_KIND_MIRROR_READ, _LINK, _WATCH; 0: none */
	uint32_t slot;
	int out_fd, err_fd; /* owned: the read ends of its stdout and stderr */
	struct src out_src, err_src;
	struct buf out, err; /* owned */
	size_t max_out;
	int out_eof, err_eof, exited, ok, too_long;
	long deadline; /* mono_ms */
	struct mw_token *tok; /* owned until the exit, then freed by the callback */
	int dfd; /* borrowed: mw->dfd, the deadline's timer; -1 (the watcher) none */
};

struct mirrorwatch {
	struct mirror m;
	int ok; /* initialised */
	int tfd, dfd; /* the timer (refresh, periodic, the watcher's restart); a job's deadline */
	struct src tsrc, dsrc;
	long refresh_ms; /* a refresh due then (changes came during the last one); 0 none */
	long next_poll_ms; /* no watcher: the next periodic refresh */
	struct mw_job wt; /* the watcher (kind 0: not running) */
	long restart_ms; /* no watcher: its next start; 0 none planned */
	long started_ms;
	int backoff_ms;
	unsigned refreshes;
	char why[64];
	int again; /* more changes came meanwhile: another refresh after this one */
	int reopen; /* a reload came meanwhile: reopen after this one */
	int busy; /* a refresh is somewhere between its reader and its link maker */
	int64_t scan_ns; /* before the reader started */
	struct mw_job job;
	/* the writer child */
	pid_t pid; /* 0: none running */
	int rfd; /* owned: its answer, read as it comes */
	struct src rsrc;
	struct buf in; /* owned */
	char linked[64]; /* "L" of the last refresh: '1' per configured path the tree holds */
};

static void arm(struct mirrorwatch *mw);

static void report(struct mirrorwatch *mw, const char *why, const struct mirror_stats *st,
	const struct strv *notices)
{
	mw->refreshes++;
	if (st->written || st->removed)
		log_notice("mirror: %s: %u written, %u removed in %ld ms", why, st->written,
			st->removed, st->ms);
	else
		log_debug("mirror: %s: no change (%u entries, %ld ms)", why, st->entries, st->ms);
	for (size_t i = 0; i < notices->n; i++) {
		char vis[2048];

		/* The reader's words (it runs as the owner): escaped before the log. */
		log_vis(notices->v[i], strlen(notices->v[i]), vis, sizeof(vis));
		log_notice("mirror: %s", vis);
	}
}

/* ---- the one-job children (the warden's) ---- */

static void job_close(struct agentd *d, struct mw_job *j)
{
	if (j->out_fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, j->out_fd, NULL);
		close(j->out_fd);
	}
	if (j->err_fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, j->err_fd, NULL);
		close(j->err_fd);
	}
	j->out_fd = j->err_fd = -1;
	buf_free(&j->out);
	buf_free(&j->err);
	if (j->dfd >= 0) {
		struct itimerspec off = {0};

		timerfd_settime(j->dfd, 0, &off, NULL);
	}
	if (j->tok && !j->exited) {
		/* Still running: the callback frees the token when the warden reports its end. */
		j->tok->mw = NULL;
	} else {
		free(j->tok);
	}
	j->tok = NULL;
	j->kind = 0;
}

static const char *job_name(uint32_t kind)
{
	return kind == WP_KIND_MIRROR_READ     ? "the reader"
		: kind == WP_KIND_MIRROR_WATCH ? "the watcher"
					       : "the link maker";
}

static struct mw_job *job_of(struct mirrorwatch *mw, uint32_t kind)
{
	return kind == WP_KIND_MIRROR_WATCH ? &mw->wt : &mw->job;
}

/* The job's stderr, whole lines, escaped (it runs as the owner or the agent). */
static void job_log_err(struct mw_job *j, int all)
{
	char *nl, vis[2048];

	while (j->err.len) {
		size_t n;

		nl = memchr(j->err.data, '\n', j->err.len);
		if (!nl && !all)
			break;
		n = nl ? (size_t)(nl - j->err.data) : j->err.len;
		log_vis(j->err.data, n, vis, sizeof(vis));
		log_warn("mirror: %s: %s", job_name(j->kind), vis);
		n += nl ? 1 : 0;
		memmove(j->err.data, j->err.data + n, j->err.len - n);
		j->err.len -= n;
	}
}

/* Read what is there (bounded per call): 1 at end of file. */
static int job_read_fd(struct agentd *d, struct mw_job *j, int err, int rounds)
{
	int fd = err ? j->err_fd : j->out_fd;
	struct buf *b = err ? &j->err : &j->out;
	size_t max = err ? MW_MAX_ERR : j->max_out;
	char chunk[65536];

	for (int round = 0; round < rounds; round++) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 0; /* EAGAIN: more later */
		if (n == 0)
			return 1;
		if (b->len + (size_t)n > max) {
			if (!err && !j->too_long++) {
				log_err("mirror: %s's output is longer than %zu bytes: stopped",
					job_name(j->kind), max);
				wc_signal(d, j->slot, SIGKILL);
			}
			continue; /* dropped; its end of file follows */
		}
		if (buf_append(b, chunk, (size_t)n) < 0 && !err) {
			j->too_long++;
			wc_signal(d, j->slot, SIGKILL);
		}
		if (err)
			job_log_err(j, 0);
	}
	return 0;
}

static void job_event(struct agentd *d, const struct wc_event *e, void *arg);

/*
 * Ask the warden for a child of the supervisor's program: its stdout and stderr are pipes
 * of ours (read ends non-blocking). 0, or -1 logged.
 *
 * async: the loop reads the pipes and the warden's report comes through wc_on_slot (and a
 * deadline on mw->dfd, but for the watcher, which runs until stopped); else job_run_sync
 * collects both, the loop not turning.
 */
static int job_start(struct agentd *d, struct mirrorwatch *mw, uint32_t kind, int async)
{
	struct mw_job *j = job_of(mw, kind);
	struct wp_r_spawn rs;
	int out[2] = {-1, -1}, err[2] = {-1, -1}, r;

	memset(j, 0, sizeof(*j));
	j->out_fd = j->err_fd = -1;
	j->dfd = kind == WP_KIND_MIRROR_WATCH ? -1 : mw->dfd;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		log_err("mirror: pipe: %s", strerror(errno));
		goto fail;
	}
	j->tok = calloc(1, sizeof(*j->tok));
	if (!j->tok)
		goto fail;
	j->tok->mw = mw;
	j->tok->kind = kind;
	j->kind = kind;
	j->max_out = kind == WP_KIND_MIRROR_READ ? MW_MAX_STREAM : MW_MAX_LINES;
	/* One-job modes: fd0 its stderr, fd1 its stdout (wproto.h). */
	r = wc_spawn(d, kind, 0, NULL, 0, 0, err[1], out[1], &rs);
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	if (r == 0)
		r = rs.err;
	if (r == -EBUSY && kind == WP_KIND_MIRROR_WATCH) {
		/* The last one (a reload stopped it) is not reaped yet: started again later. */
		log_info("mirror: the last watcher has not exited yet");
		goto fail;
	}
	if (r < 0) {
		log_err("mirror: the warden did not start %s: %s", job_name(kind), strerror(-r));
		goto fail;
	}
	j->slot = rs.slot;
	j->out_fd = out[0];
	j->err_fd = err[0];
	j->deadline = mono_ms() + MW_JOB_MS;
	if (fcntl(j->out_fd, F_SETFL, O_NONBLOCK) < 0 ||
		fcntl(j->err_fd, F_SETFL, O_NONBLOCK) < 0) {
		log_err("mirror: %s: %s", job_name(kind), strerror(errno));
		goto kill;
	}
	if (!async)
		return 0;
	if (agentd_watch(d, j->out_fd, &j->out_src, SRC_MIRROR, mw, EPOLLIN) < 0 ||
		agentd_watch(d, j->err_fd, &j->err_src, SRC_MIRROR, mw, EPOLLIN) < 0) {
		log_err("mirror: watching %s: %s", job_name(kind), strerror(errno));
		goto kill;
	}
	if (wc_on_slot(d, j->slot, job_event, j->tok) < 0) {
		log_err("mirror: watching %s: too many children", job_name(kind));
		goto kill;
	}
	if (j->dfd >= 0) {
		struct itimerspec its = {.it_value = {.tv_sec = MW_JOB_MS / 1000}};

		timerfd_settime(j->dfd, 0, &its, NULL);
	}
	return 0;
kill:
	/* Nobody listens for its end: the warden's report of it finds no handler. */
	wc_signal(d, j->slot, SIGKILL);
	j->exited = 1;
	job_close(d, j);
	return -1;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	free(j->tok);
	j->tok = NULL;
	j->kind = 0;
	return -1;
}

/* At start, the loop not turning: read both pipes to their end, then wait for the exit. */
static int job_run_sync(struct agentd *d, struct mirrorwatch *mw)
{
	struct mw_job *j = &mw->job;
	struct wp_e_exit ex;

	while (!j->out_eof || !j->err_eof) {
		struct pollfd pf[2] = {{.fd = j->out_eof ? -1 : j->out_fd, .events = POLLIN},
			{.fd = j->err_eof ? -1 : j->err_fd, .events = POLLIN}};
		long left = j->deadline - mono_ms();

		if (left <= 0) {
			log_err("mirror: %s took more than %d s: stopped", job_name(j->kind),
				MW_JOB_MS / 1000);
			wc_signal(d, j->slot, SIGKILL);
			break;
		}
		if (poll(pf, 2, (int)left) < 0 && errno != EINTR)
			break;
		if (!j->out_eof && (pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			j->out_eof = job_read_fd(d, j, 0, 64);
		if (!j->err_eof && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			j->err_eof = job_read_fd(d, j, 1, 64);
	}
	job_log_err(j, 1);
	if (wc_wait_exit(d, j->slot, 10000, &ex) < 0) {
		log_err("mirror: %s: no exit reported by the warden", job_name(j->kind));
		wc_signal(d, j->slot, SIGKILL);
		return -1;
	}
	/* Taken out of the queue: the callback will never run, the token is ours. */
	j->exited = 1;
	j->ok = ex.cld == CLD_EXITED && ex.status == 0 && !j->too_long;
	if (!j->ok)
		log_err("mirror: %s failed (%s %d)", job_name(j->kind),
			ex.cld == CLD_EXITED ? "exit" : "signal", (int)ex.status);
	return j->ok ? 0 : -1;
}

static void log_link_line(void *arg, const char *text, int problem)
{
	char vis[2048];

	(void)arg;
	/* The agent's words: escaped before the log. */
	log_vis(text, strlen(text), vis, sizeof(vis));
	if (problem)
		log_warn("mirror: %s", vis);
	else
		log_notice("mirror: %s", vis);
}

/* The link maker's lines: what it changed in the agent's home ("! ..." a problem). */
static void log_links(struct mw_job *j)
{
	if (!j->out.len || buf_append(&j->out, "", 1) < 0)
		return;
	mirror_link_output(j->out.data, log_link_line, NULL);
}

static void refresh_done(struct agentd *d, struct mirrorwatch *mw);
static void writer_begin(struct agentd *d, struct mirrorwatch *mw);

/* Both pipes at their end and the exit reported: the job's next step. */
static void job_maybe_done(struct agentd *d, struct mirrorwatch *mw)
{
	struct mw_job *j = &mw->job;
	uint32_t kind = j->kind;

	if (!kind || !j->out_eof || !j->err_eof || !j->exited)
		return;
	job_log_err(j, 1);
	if (kind == WP_KIND_MIRROR_READ) {
		if (!j->ok) {
			log_err("mirror: refresh (%s) failed: the reader did not finish; the tree "
				"keeps its last state",
				mw->why);
			job_close(d, j);
			refresh_done(d, mw);
			return;
		}
		writer_begin(d, mw); /* takes j->out */
		job_close(d, j);
		return;
	}
	log_links(j);
	if (!j->ok)
		log_err("mirror: the link maker failed: the agent's places may be unlinked");
	job_close(d, j);
	refresh_done(d, mw);
}

static void watcher_exited(struct agentd *d, struct mirrorwatch *mw, const struct wp_e_exit *ex);

static void job_event(struct agentd *d, const struct wc_event *e, void *arg)
{
	struct mw_token *tok = arg;
	struct mirrorwatch *mw = tok->mw;
	char why[128];

	if (e->type == WP_E_EXEC) {
		if (e->u.exec.code && mw) {
			child_start_error(e->u.exec.code, why, sizeof(why));
			log_err("mirror: %s did not start: %s", job_name(tok->kind), why);
		}
		return;
	}
	if (e->type != WP_E_EXIT)
		return;
	if (!mw) {
		free(tok); /* orphaned by a reload or a stop */
		return;
	}
	if (tok->kind == WP_KIND_MIRROR_WATCH) {
		watcher_exited(d, mw, &e->u.exit);
		return;
	}
	mw->job.exited = 1;
	mw->job.ok = e->u.exit.cld == CLD_EXITED && e->u.exit.status == 0 && !mw->job.too_long;
	if (!mw->job.ok)
		log_err("mirror: %s %s %d", job_name(mw->job.kind),
			e->u.exit.cld == CLD_EXITED ? "exit" : "killed by signal",
			(int)e->u.exit.status);
	job_maybe_done(d, mw);
}

/* ---- the writer: this account's own fork ---- */

static int put_rec(struct buf *b, char tag, const char *text)
{
	return buf_printf(b, "%c %s", tag, text) < 0 || buf_append(b, "", 1) < 0 ? -1 : 0;
}

/* The writer child: the same account, the stream in its memory (inherited). */
static int child_write(struct mirrorwatch *mw, const struct buf *stream, int out, pid_t parent)
{
	struct mirror_stats st;
	struct strv res = {0};
	struct buf b = {0};
	char line[128], flags[64];
	const char *p;
	size_t left;

	/* Gone with the supervisor; the pipe is fd 3, the rest of its descriptors closed. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != parent)
		return 1;
	if (dup2(out, 3) < 0 || syscall(SYS_close_range, 4U, ~0U, 0) < 0)
		return 1;
	/* The manifest on disk is the last refresh's (the loop keeps none). */
	mirror_load(&mw->m);
	if (mirror_apply(&mw->m, stream->data, stream->len, 0, mw->scan_ns, &st) < 0)
		return 1;
	/* A configured path the owner has not made yet: its place reserved (mirror.h). */
	mirror_reserve(&mw->m, 0, &res);
	strv_free(&res);
	snprintf(line, sizeof(line), "%u %u %u %ld", st.written, st.removed, st.entries, st.ms);
	put_rec(&b, 'S', line);
	for (size_t i = 0; i < mw->m.notices.n; i++)
		put_rec(&b, 'N', mw->m.notices.v[i]);
	mirror_linked(&mw->m, flags, sizeof(flags));
	put_rec(&b, 'L', flags);
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

static void writer_begin(struct agentd *d, struct mirrorwatch *mw)
{
	pid_t parent = getpid(), pid;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		log_err("mirror: pipe: %s", strerror(errno));
		refresh_done(d, mw);
		return;
	}
	pid = fork();
	if (pid < 0) {
		log_err("mirror: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		refresh_done(d, mw);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		_exit(child_write(mw, &mw->job.out, p[1], parent));
	}
	close(p[1]);
	mw->pid = pid;
	mw->rfd = p[0];
	if (fcntl(mw->rfd, F_SETFL, O_NONBLOCK) < 0 ||
		agentd_watch(d, mw->rfd, &mw->rsrc, SRC_MIRROR, mw, EPOLLIN) < 0) {
		log_err("mirror: watching the writer: %s", strerror(errno));
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(mw->rfd);
		mw->rfd = -1;
		mw->pid = 0;
		refresh_done(d, mw);
	}
}

/* The writer's answer is complete (end of file): report it, maybe link. */
static void writer_end(struct agentd *d, struct mirrorwatch *mw)
{
	struct strv notices = {0};
	struct mirror_stats st = {0};
	char flags[64] = "";
	int status = 0, have = 0, link = 0;

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
			have = sscanf(r + 2, "%u %u %u %ld", &st.written, &st.removed, &st.entries,
				       &st.ms) == 4;
		else if (r[0] == 'L')
			snprintf(flags, sizeof(flags), "%s", r + 2);
		else if (r[0] == 'N')
			strv_push(&notices, r + 2);
	}
	if (!have || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		log_err("mirror: refresh (%s) failed; the tree keeps its last state", mw->why);
	} else {
		report(mw, mw->why, &st, &notices);
		/* A configured path the tree holds now, or no more: the agent's places. */
		link = strcmp(flags, mw->linked) != 0;
		snprintf(mw->linked, sizeof(mw->linked), "%s", flags);
	}
	strv_free(&notices);
	buf_free(&mw->in);
	if (link && job_start(d, mw, WP_KIND_MIRROR_LINK, 1) == 0)
		return; /* refresh_done follows its end */
	refresh_done(d, mw);
}

static void writer_read(struct agentd *d, struct mirrorwatch *mw)
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
			writer_end(d, mw);
			return;
		}
		if (mw->in.len + (size_t)n > MW_MAX_ANSWER) {
			log_err("mirror: the writer's answer is too long: stopped");
			kill(mw->pid, SIGKILL);
			buf_free(&mw->in);
			continue; /* its end of file follows */
		}
		if (buf_append(&mw->in, buf, (size_t)n) < 0)
			kill(mw->pid, SIGKILL);
	}
}

/* ---- a refresh ---- */

static void refresh_begin(struct agentd *d, struct mirrorwatch *mw, const char *why)
{
	if (mw->busy) {
		mw->again = 1;
		return;
	}
	snprintf(mw->why, sizeof(mw->why), "%s", why);
	/* Before the reader's first stat: every entry it checks is checked after this. */
	mw->scan_ns = mirror_scan_start();
	if (job_start(d, mw, WP_KIND_MIRROR_READ, 1) < 0)
		return;
	mw->busy = 1;
}

/* The refresh is over (done or failed): what came meanwhile. */
static void refresh_done(struct agentd *d, struct mirrorwatch *mw)
{
	mw->busy = 0;
	if (mw->reopen) {
		mirrorwatch_reload(d); /* frees mw */
		return;
	}
	if (mw->again) {
		mw->again = 0;
		mw->refresh_ms = mono_ms() + MIRROR_DEBOUNCE_MS;
		arm(mw);
	}
}

/* At start, before OpenCode: the whole refresh with the loop not turning yet. */
static void refresh_sync(struct agentd *d, struct mirrorwatch *mw)
{
	struct mirror_stats st;
	struct strv res = {0};

	snprintf(mw->why, sizeof(mw->why), "start");
	mirror_load(&mw->m);
	/* A tree of root's (an earlier version): set aside, a new one is built. */
	mirror_own_tree(&mw->m);
	mw->scan_ns = mirror_scan_start();
	if (job_start(d, mw, WP_KIND_MIRROR_READ, 0) < 0)
		goto out;
	if (job_run_sync(d, mw) < 0 ||
		mirror_apply(&mw->m, mw->job.out.data, mw->job.out.len, 0, mw->scan_ns, &st) < 0) {
		log_err("mirror: refresh (start) failed; the tree keeps its last state");
		job_close(d, &mw->job);
		goto out;
	}
	job_close(d, &mw->job);
	report(mw, "start", &st, &mw->m.notices);
	mirror_reserve(&mw->m, 0, &res);
	strv_free(&res);
	mirror_linked(&mw->m, mw->linked, sizeof(mw->linked));
	/* The agent's places (ocsb-provision made them; a new configured path since). */
	if (job_start(d, mw, WP_KIND_MIRROR_LINK, 0) == 0) {
		job_run_sync(d, mw);
		log_links(&mw->job);
		job_close(d, &mw->job);
	}
out:
	/*
	 * Later refreshes run in a child that loads the manifest from disk: the loop needs
	 * none of it (10,000 entries are about 1.3 MiB that glibc keeps unless trimmed).
	 */
	mirror_free(&mw->m);
	malloc_trim(0);
}

/* ---- the watcher's control: its start, its end, its restart ---- */

static long earliest(long a, long b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/*
 * The one timer: a refresh due again; while the watcher does not run, the periodic
 * refresh and the watcher's next start.
 */
static void arm(struct mirrorwatch *mw)
{
	struct itimerspec its = {0};
	long now = mono_ms(), due = mw->refresh_ms;

	if (mw->wt.kind) {
		mw->next_poll_ms = 0;
	} else {
		if (!mw->next_poll_ms)
			mw->next_poll_ms = now + MW_POLL_MS;
		due = earliest(earliest(due, mw->next_poll_ms), mw->restart_ms);
	}
	if (due) {
		if (due <= now)
			due = now + 1;
		its.it_value.tv_sec = (due - now) / 1000;
		its.it_value.tv_nsec = ((due - now) % 1000) * 1000000;
	}
	timerfd_settime(mw->tfd, 0, &its, NULL);
}

/* No watcher: the next start after a pause that doubles while it keeps failing. */
static void watcher_later(struct mirrorwatch *mw)
{
	long now = mono_ms();

	if (!mw->backoff_ms || (mw->started_ms && now - mw->started_ms >= MW_RESTART_MAX_MS))
		mw->backoff_ms = MW_RESTART_MS;
	else if ((mw->backoff_ms *= 2) > MW_RESTART_MAX_MS)
		mw->backoff_ms = MW_RESTART_MAX_MS;
	mw->started_ms = 0;
	mw->restart_ms = now + mw->backoff_ms;
	arm(mw);
}

/*
 * After the first refresh (the watcher reads the directories from its status file). Its
 * first byte comes once its watches are in place: the refresh that follows covers what
 * changed before.
 */
static void watcher_start(struct agentd *d, struct mirrorwatch *mw)
{
	mw->restart_ms = 0;
	if (job_start(d, mw, WP_KIND_MIRROR_WATCH, 1) < 0) {
		watcher_later(mw);
		return;
	}
	mw->started_ms = mono_ms();
	arm(mw);
}

static void watcher_exited(struct agentd *d, struct mirrorwatch *mw, const struct wp_e_exit *ex)
{
	struct mw_job *j = &mw->wt;

	j->exited = 1;
	/* Its last words, when they came before the warden's report. */
	if (!j->err_eof)
		job_read_fd(d, j, 1, 4);
	job_log_err(j, 1);
	job_close(d, j);
	watcher_later(mw);
	log_warn("mirror: the watcher (as %s) %s %d: started again in %d s; until then "
		 "changes are mirrored every %d s",
		d->owner.name, ex->cld == CLD_EXITED ? "exit" : "killed by signal", (int)ex->status,
		mw->backoff_ms / 1000, MW_POLL_MS / 1000);
}

/* Its bytes: one per burst of changes (or of new watches), each worth a refresh. */
static void watcher_read(struct agentd *d, struct mirrorwatch *mw)
{
	char buf[512];
	int got = 0;

	/* Bounded per wake-up; the count does not matter, only that one came. */
	for (int round = 0; round < 16; round++) {
		ssize_t n = read(mw->wt.out_fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break; /* EAGAIN */
		if (n == 0) {
			/* Its end: the warden's report of the exit follows. */
			mw->wt.out_eof = 1;
			epoll_ctl(d->epfd, EPOLL_CTL_DEL, mw->wt.out_fd, NULL);
			break;
		}
		got = 1;
	}
	if (got)
		refresh_begin(d, mw, "source changed");
}

/* at_start: refresh before returning (setup); else in the loop. */
static int open_watch(struct agentd *d, int at_start)
{
	struct mirrorwatch *mw;

	if (!d->cfg.mirror.paths.n)
		return 0;
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return -1;
	mw->tfd = mw->dfd = mw->rfd = -1;
	mw->job.out_fd = mw->job.err_fd = mw->job.dfd = -1;
	mw->wt.out_fd = mw->wt.err_fd = mw->wt.dfd = -1;
	d->mirror = mw;
	if (mirror_init(&mw->m, &d->paths, &d->owner, &d->agent, &d->cfg.mirror) < 0) {
		log_err("mirror: path too long");
		return -1;
	}
	mw->m.by = "ocsb-agentd";
	/* The tree's owner, not root: 0555 directories, u+w only while it changes one. */
	mw->m.dmode = 0555;
	mw->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	mw->dfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (mw->tfd < 0 || mw->dfd < 0) {
		log_err("mirror: timerfd: %s", strerror(errno));
		return -1;
	}
	if (agentd_watch(d, mw->tfd, &mw->tsrc, SRC_MIRROR, mw, EPOLLIN) < 0 ||
		agentd_watch(d, mw->dfd, &mw->dsrc, SRC_MIRROR, mw, EPOLLIN) < 0)
		return -1;
	mw->ok = 1;
	if (at_start)
		refresh_sync(d, mw);
	else
		refresh_begin(d, mw, "configuration reloaded");
	watcher_start(d, mw);
	return 0;
}

int mirrorwatch_open(struct agentd *d)
{
	return open_watch(d, 1);
}

void mirrorwatch_event(struct agentd *d, struct src *s)
{
	struct mirrorwatch *mw = s->ptr;

	if (s == &mw->rsrc) {
		writer_read(d, mw);
		return;
	}
	if (s == &mw->wt.out_src) {
		watcher_read(d, mw);
		return;
	}
	if (s == &mw->job.out_src || s == &mw->job.err_src || s == &mw->wt.err_src) {
		struct mw_job *j = s == &mw->wt.err_src ? &mw->wt : &mw->job;
		int err = s != &mw->job.out_src;
		int *eof = err ? &j->err_eof : &j->out_eof;

		if (!*eof && job_read_fd(d, j, err, 16)) {
			*eof = 1;
			epoll_ctl(d->epfd, EPOLL_CTL_DEL, err ? j->err_fd : j->out_fd, NULL);
			if (j == &mw->job)
				job_maybe_done(d, mw);
		}
		return;
	}
	if (s == &mw->dsrc) {
		uint64_t x;

		if (read(mw->dfd, &x, sizeof(x)) < 0) {
			/* spurious wake-up */
		}
		/* A job that outlived its time: the warden ends it, its exit follows. */
		if (mw->job.kind && !mw->job.exited && mono_ms() >= mw->job.deadline) {
			log_err("mirror: %s took more than %d s: stopped", job_name(mw->job.kind),
				MW_JOB_MS / 1000);
			wc_signal(d, mw->job.slot, SIGKILL);
		}
		return;
	}
	if (s == &mw->tsrc) {
		uint64_t x;
		long now;

		if (read(mw->tfd, &x, sizeof(x)) < 0) {
			/* spurious wake-up */
		}
		now = mono_ms();
		if (!mw->wt.kind && mw->restart_ms && now >= mw->restart_ms)
			watcher_start(d, mw);
		if (mw->refresh_ms && now >= mw->refresh_ms) {
			mw->refresh_ms = 0;
			refresh_begin(d, mw, "source changed");
		} else if (!mw->wt.kind && mw->next_poll_ms && now >= mw->next_poll_ms) {
			mw->next_poll_ms = 0;
			refresh_begin(d, mw, "periodic, no watcher");
		}
		arm(mw);
	}
}

void mirrorwatch_reload(struct agentd *d)
{
	struct mirrorwatch *mw = d->mirror;

	/* A refresh running is not cut short: the reopen follows its end. */
	if (mw && mw->busy) {
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
	if (mw->job.kind) {
		/* A reader or link maker of the warden's: ended; its exit frees the token. */
		if (!mw->job.exited)
			wc_signal(d, mw->job.slot, SIGKILL);
		job_close(d, &mw->job);
	}
	if (mw->wt.kind) {
		/* The watcher: stopped (it also ends when its stdout, closed here, fails it). */
		if (!mw->wt.exited)
			wc_signal(d, mw->wt.slot, SIGTERM);
		job_close(d, &mw->wt);
	}
	if (mw->pid > 0) {
		/* Shutting down: the writer replaces files by rename, so none is left half. */
		kill(mw->pid, SIGKILL);
		while (waitpid(mw->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (mw->rfd >= 0)
		close(mw->rfd);
	buf_free(&mw->in);
	if (mw->tfd >= 0)
		close(mw->tfd);
	if (mw->dfd >= 0)
		close(mw->dfd);
	mirror_free(&mw->m);
	free(mw);
	d->mirror = NULL;
}
