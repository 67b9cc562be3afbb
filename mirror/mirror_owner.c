/* SPDX-License-Identifier: MIT */
/*
 * The mirror's reader (docs/mirror.md): runs in a child with the owner's rights, walks the
 * configured paths without following links, scans and streams records to root.
 */
#define _GNU_SOURCE
#include "mirror_int.h"

/* ---- the owner's side: walk, scan, stream (runs in a child with the owner's rights) ---- */

struct scan {
	struct mirror *m;
	int fd;
	struct buf out;
	uint64_t total;
	unsigned count;
	int limit_noted;
	int err;
	int64_t clean_before; /* ctime below this: the manifest's stat can be trusted */
	size_t next; /* manifest index after the last entry found */
};

static void put(struct buf *b, const void *p, size_t n)
{
	buf_append(b, p, n);
}

static void emit(struct scan *s, const struct rec *r)
{
	uint32_t pl = (uint32_t)strlen(r->path);

	put(&s->out, &r->kind, 1);
	put(&s->out, &r->state, 1);
	put(&s->out, &r->mode, 4);
	put(&s->out, &r->size, 8);
	put(&s->out, &r->ino, 8);
	put(&s->out, &r->mtime_ns, 8);
	put(&s->out, &r->ctime_ns, 8);
	put(&s->out, &pl, 4);
	put(&s->out, r->path, pl);
	put(&s->out, &r->detaillen, 4);
	if (r->detaillen)
		put(&s->out, r->detail, r->detaillen);
	put(&s->out, &r->datalen, 4);
	if (r->datalen)
		put(&s->out, r->data, r->datalen);
	if (s->out.len >= 65536) {
		const char *p = s->out.data;
		size_t left = s->out.len;

		while (left) {
			ssize_t w = write(s->fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				s->err = -EPIPE;
				break;
			}
			p += w;
			left -= (size_t)w;
		}
		s->out.len = 0;
	}
}

static void fill_stat(struct rec *r, const struct stat *st)
{
	r->mode = st->st_mode & 07777;
	r->size = (uint64_t)st->st_size;
	r->ino = (uint64_t)st->st_ino;
	r->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	r->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
}

static void emit_skip(struct scan *s, const char *path, const struct stat *st, int state,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void emit_skip(
	struct scan *s, const char *path, const struct stat *st, int state, const char *fmt, ...)
{
	struct rec r = {.kind = '-', .state = (unsigned char)state, .path = path};
	char why[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (st)
		fill_stat(&r, st);
	r.detail = why;
	r.detaillen = (uint32_t)strlen(why);
	emit(s, &r);
}

/*
 * The manifest's entry for `path` when its stat is what the source has now, and was
 * taken clearly after the entry's last change (not racy); else NULL.
 */
static const struct mirror_entry *same_stat(struct scan *s, const char *path, const struct stat *st)
{
	const struct mirror *m = s->m;
	const struct mirror_entry *e;
	struct rec r = {0};

	/*
	 * The manifest is sorted and the walk goes in nearly the same order: the entry after
	 * the last one found is usually the one (a sequential read, not a hash probe).
	 */
	if (s->next < m->n && !strcmp(m->e[s->next].path, path))
		e = &m->e[s->next];
	else
		e = mirror_entry_find(m, path);
	if (!e)
		return NULL;
	s->next = (size_t)(e - m->e) + 1;
	fill_stat(&r, st);
	if (e->size != r.size || e->ino != r.ino || e->mtime_ns != r.mtime_ns ||
		e->ctime_ns != r.ctime_ns || e->mode != r.mode || e->ctime_ns >= s->clean_before)
		return NULL;
	return e;
}

/*
 * Same file as the manifest says: nothing to read (the no-change refresh). In a quiet
 * directory (reported 'U') nothing is sent either: root counts it as unchanged.
 */
static int unchanged(struct scan *s, const char *path, char kind, const struct stat *st, int quiet)
{
	const struct mirror_entry *e = same_stat(s, path, st);
	struct rec r = {.kind = 'u', .path = path};

	if (!e || (e->kind != kind && !(e->kind == '-' && e->state != MS_SKIPPED)))
		return 0;
	if (!quiet)
		emit(s, &r);
	return 1;
}

static int noscan(const struct mirror *m, const char *path)
{
	for (size_t i = 0; i < m->spec->noscan.n; i++)
		if (mirror_path_under(path, m->spec->noscan.v[i]))
			return 1;
	return 0;
}

static int read_all(int fd, size_t want, char **ret, size_t *ret_len)
{
	char *d = malloc(want + 1);
	size_t len = 0;

	if (!d)
		return -ENOMEM;
	while (len <= want) {
		ssize_t n = read(fd, d + len, want + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int r = -errno;
			free(d);
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > want) {
		free(d);
		return -EFBIG; /* grew while we read */
	}
	d[len] = '\0';
	*ret = d;
	*ret_len = len;
	return 0;
}

static void join_notes(const struct strv *notes, struct buf *b)
{
	for (size_t i = 0; i < notes->n; i++)
		buf_printf(b, "%s%s", i ? "\n" : "", notes->v[i]);
}

static void owner_scan_file(struct scan *s, int dfd, const char *name, const char *path,
	const struct stat *st0, int quiet)
{
	struct rec r = {.kind = 'f', .path = path};
	struct buf red = {0}, det = {0};
	struct strv notes = {0};
	struct stat st;
	char *data = NULL;
	size_t len = 0;
	int fd, state = MS_MIRRORED;

	if (unchanged(s, path, 'f', st0, quiet))
		return;
	if (st0->st_size > MIRROR_MAX_FILE) {
		emit_skip(s, path, st0, MS_SKIPPED, "larger than %u KiB: not mirrored",
			MIRROR_MAX_FILE / 1024);
		return;
	}
	if (s->total + (uint64_t)st0->st_size > MIRROR_MAX_TOTAL) {
		emit_skip(s, path, st0, MS_SKIPPED, "the mirror's size limit (%u MiB) is reached",
			MIRROR_MAX_TOTAL / 1024 / 1024);
		return;
	}
	/* O_NONBLOCK|O_NOFOLLOW: a FIFO or link swapped in since the stat cannot hang or lead us. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		emit_skip(s, path, st0, MS_SKIPPED, "cannot be read by %s: %s", s->m->owner,
			strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_ino != st0->st_ino ||
		st.st_size > MIRROR_MAX_FILE) {
		close(fd);
		emit_skip(s, path, st0, MS_SKIPPED, "changed while being read: next refresh");
		return;
	}
	if (read_all(fd, (size_t)st.st_size, &data, &len) < 0) {
		close(fd);
		emit_skip(s, path, &st, MS_SKIPPED, "changed while being read: next refresh");
		return;
	}
	close(fd);
	fill_stat(&r, &st);
	if (!noscan(s->m, path))
		state = mirror_scan(name, data, len, &red, &notes);
	join_notes(&notes, &det);
	r.state = (unsigned char)state;
	r.detail = det.data;
	r.detaillen = (uint32_t)det.len;
	if (state == MS_WITHHELD) {
		r.kind = '-';
	} else if (state == MS_REDACTED) {
		r.data = red.data;
		r.datalen = (uint32_t)red.len;
	} else {
		r.data = data;
		r.datalen = (uint32_t)len;
	}
	s->total += r.datalen;
	emit(s, &r);
	free(data);
	buf_free(&red);
	buf_free(&det);
	strv_free(&notes);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *type_name(mode_t m)
{
	return S_ISFIFO(m)    ? "a FIFO"
		: S_ISSOCK(m) ? "a socket"
		: S_ISCHR(m)  ? "a character device"
		: S_ISBLK(m)  ? "a block device"
			      : "not a regular file";
}

static void owner_walk(struct scan *s, int dfd, const char *path, const char *root, int depth);

static void owner_scan_entry(struct scan *s, int dfd, const char *name, const char *path,
	const char *root, int depth, int quiet)
{
	struct stat st;

	if (s->count >= MIRROR_MAX_ENTRIES) {
		/* In a quiet directory silence would mean "unchanged": each one is named. */
		if (!s->limit_noted++ || quiet)
			emit_skip(s, path, NULL, MS_SKIPPED,
				"the mirror's entry limit (%u) is reached: this and later entries "
				"not mirrored",
				MIRROR_MAX_ENTRIES);
		return;
	}
	s->count++;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		emit_skip(s, path, NULL, MS_SKIPPED, "cannot be read by %s: %s", s->m->owner,
			strerror(errno));
		return;
	}
	/* The writer refuses the name of its temporaries: skipped, the rest is mirrored. */
	if (mirror_name_reserved(name)) {
		emit_skip(s, path, &st, MS_SKIPPED,
			"the name (" MIRROR_TMP_PREFIX "*) is kept for the mirror's temporary "
			"files: not mirrored");
		return;
	}
	if (S_ISDIR(st.st_mode)) {
		int sub;

		if (!strcmp(name, "node_modules")) {
			emit_skip(s, path, &st, MS_SKIPPED,
				"dependency folder: not mirrored (the agent installs its own)");
			return;
		}
		if (depth >= MIRROR_MAX_DEPTH) {
			emit_skip(s, path, &st, MS_SKIPPED, "nested deeper than %d: not mirrored",
				MIRROR_MAX_DEPTH);
			return;
		}
		sub = openat(dfd, name, DIR_FLAGS);
		if (sub < 0) {
			emit_skip(s, path, &st, MS_SKIPPED, "cannot be read by %s: %s", s->m->owner,
				strerror(errno));
			return;
		}
		owner_walk(s, sub, path, root, depth + 1);
		close(sub);
	} else if (S_ISREG(st.st_mode)) {
		owner_scan_file(s, dfd, name, path, &st, quiet);
	} else if (S_ISLNK(st.st_mode)) {
		char target[4096], fixed[4096], rootabs[PATH_MAX + 1100];
		ssize_t n = readlinkat(dfd, name, target, sizeof(target) - 1);
		struct rec r = {.kind = 'l', .path = path};
		struct buf esc = {0};

		if (n < 0) {
			emit_skip(s, path, &st, MS_SKIPPED, "unreadable link: %s", strerror(errno));
			return;
		}
		target[n] = '\0';
		snprintf(rootabs, sizeof(rootabs), "%s/%s", s->m->home, root);
		if (!mirror_link_inside(
			    path + strlen(root) + 1, target, rootabs, fixed, sizeof(fixed))) {
			mirror_escape(target, &esc);
			emit_skip(s, path, &st, MS_SKIPPED,
				"link to %s leaves the mirrored tree: not followed, not mirrored",
				esc.data ? esc.data : "");
			buf_free(&esc);
			return;
		}
		if (unchanged(s, path, 'l', &st, quiet))
			return;
		fill_stat(&r, &st);
		r.data = fixed;
		r.datalen = (uint32_t)strlen(fixed);
		emit(s, &r);
	} else {
		emit_skip(s, path, &st, MS_SKIPPED, "%s: not mirrored", type_name(st.st_mode));
	}
}

static void owner_walk(struct scan *s, int dfd, const char *path, const char *root, int depth)
{
	struct rec r = {.kind = 'd', .path = path};
	const struct mirror_entry *e = NULL;
	struct strv names = {0};
	struct dirent *de;
	struct stat st;
	DIR *d;
	int fd2, quiet;

	if (fstat(dfd, &st) == 0) {
		fill_stat(&r, &st);
		e = same_stat(s, path, &st);
	}
	/*
	 * A directory's mtime and ctime change with every name created, removed or renamed
	 * in it: the same stat means the same names. Its entries are still checked one by
	 * one (a file's content changes nothing in its directory); only the unchanged ones
	 * go unsaid, and root counts them from the manifest.
	 */
	quiet = e && e->kind == 'd';
	r.kind = quiet ? 'U' : 'd';
	emit(s, &r);
	fd2 = dup(dfd);
	if (fd2 < 0 || !(d = fdopendir(fd2))) {
		if (fd2 >= 0)
			close(fd2);
		return;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			strv_push(&names, de->d_name);
	closedir(d);
	if (names.n)
		qsort(names.v, names.n, sizeof(*names.v), cmp_str);
	for (size_t i = 0; i < names.n && !s->err; i++) {
		char *sub;

		if (asprintf(&sub, "%s/%s", path, names.v[i]) < 0)
			break;
		owner_scan_entry(s, dfd, names.v[i], sub, root, depth, quiet);
		free(sub);
	}
	strv_free(&names);
}

static void owner_scan_gitconfig(struct scan *s)
{
	struct rec r = {.kind = 'g', .path = MIRROR_GITCONFIG};
	struct buf out = {0}, det = {0};
	struct strv notes = {0};
	struct stat st;
	char *data = NULL;
	size_t len;
	int fd;

	/* The owner's own rights: a ~/.gitconfig linked into a dotfiles repo is fine. */
	fd = open(MIRROR_GITCONFIG, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		emit_skip(s, MIRROR_GITCONFIG, NULL, MS_SKIPPED, "%s",
			errno == ENOENT ? "not present" : strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > MIRROR_MAX_FILE) {
		close(fd);
		emit_skip(s, MIRROR_GITCONFIG, NULL, MS_SKIPPED,
			"not a regular file of at most %u KiB", MIRROR_MAX_FILE / 1024);
		return;
	}
	if (unchanged(s, MIRROR_GITCONFIG, 'g', &st, 0)) {
		close(fd);
		return;
	}
	if (read_all(fd, (size_t)st.st_size, &data, &len) < 0) {
		close(fd);
		emit_skip(s, MIRROR_GITCONFIG, NULL, MS_SKIPPED, "changed while being read");
		return;
	}
	close(fd);
	mirror_gitconfig(data, len, &out, &notes);
	join_notes(&notes, &det);
	fill_stat(&r, &st);
	r.state = MS_MIRRORED;
	r.detail = det.data;
	r.detaillen = (uint32_t)det.len;
	r.data = out.data;
	r.datalen = (uint32_t)out.len;
	emit(s, &r);
	free(data);
	buf_free(&out);
	buf_free(&det);
	strv_free(&notes);
}

/* In the child, as the owner, with the owner's home as the working directory. */
int owner_scan_child(void *arg, int outfd)
{
	struct scan s = {.m = arg, .fd = outfd};
	struct rec end = {.kind = 'E', .path = ""};
	struct timespec res;
	int64_t margin = 10000000;

	/*
	 * File times come from the coarse clock: a change within a tick or two of the read
	 * that recorded an entry can leave its ctime as it was. Those entries are read again.
	 */
	if (clock_getres(CLOCK_REALTIME_COARSE, &res) == 0 &&
		2 * ((int64_t)res.tv_sec * 1000000000 + res.tv_nsec) > margin)
		margin = 2 * ((int64_t)res.tv_sec * 1000000000 + res.tv_nsec);
	s.clean_before = s.m->scan_ns > margin ? s.m->scan_ns - margin : 0;

	for (size_t i = 0; i < s.m->spec->paths.n && !s.err; i++) {
		const char *root = s.m->spec->paths.v[i];
		struct stat st;
		int fd;

		if (!strcmp(root, MIRROR_GITCONFIG)) {
			owner_scan_gitconfig(&s);
			continue;
		}
		if (mirror_name_reserved(root)) {
			emit_skip(&s, root, NULL, MS_SKIPPED,
				"the name (" MIRROR_TMP_PREFIX "*) is kept for the mirror's "
				"temporary files: not mirrored");
			continue;
		}
		/*
		 * The root itself is opened with the owner's rights and may be a link (dotfile
		 * managers); below it nothing is followed.
		 */
		fd = open(root, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
		if (fd < 0) {
			emit_skip(&s, root, NULL, MS_SKIPPED, "%s",
				errno == ENOENT ? "not present" : strerror(errno));
			continue;
		}
		if (fstat(fd, &st) < 0) {
			close(fd);
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			owner_walk(&s, fd, root, root, 0);
		} else if (S_ISREG(st.st_mode)) {
			char *slash = strrchr(root, '/');
			char dir[PATH_MAX];
			int dfd;

			snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - root) : 1,
				slash ? root : ".");
			dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0) {
				owner_scan_file(&s, dfd, slash ? slash + 1 : root, root, &st, 0);
				close(dfd);
			}
		} else {
			emit_skip(&s, root, &st, MS_SKIPPED, "%s: not mirrored",
				type_name(st.st_mode));
		}
		close(fd);
	}
	emit(&s, &end);
	if (!s.err && s.out.len) {
		const char *p = s.out.data;
		size_t left = s.out.len;

		while (left) {
			ssize_t w = write(outfd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return 3;
			p += w;
			left -= (size_t)w;
		}
	}
	buf_free(&s.out);
	return s.err ? 3 : 0;
}

int mirror_read_here(struct mirror *m, int outfd)
{
	int fd;

	/* Only as the owner: the kernel's checks of the owner's rights are the point. */
	if (geteuid() != m->owner_uid || getuid() != m->owner_uid || geteuid() == 0) {
		log_err("mirror: the reader runs as %s (uid %u), not uid %u", m->owner,
			(unsigned)m->owner_uid, (unsigned)geteuid());
		return 2;
	}
	/* The manifest of the last refresh: the status file is readable by the owner's group. */
	if (mirror_load(m) < 0)
		return 1;
	fd = open(m->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fchdir(fd) < 0) {
		log_err("mirror: %s: %s", m->home, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	return owner_scan_child(m, outfd);
}
