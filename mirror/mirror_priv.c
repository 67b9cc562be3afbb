/* SPDX-License-Identifier: MIT */
/*
 * The mirror's writer (docs/mirror.md): the account ocsb-agentd (issue 26: the supervisor
 * itself, or a child of ocsb-provision running as it) applies the reader's stream to a
 * tree of its own, opened and walked by descriptor, and reserves places for the agent's
 * links. Root only prepares the directories the account cannot make (mirror_prepare).
 */
#define _GNU_SOURCE
#include "mirror_int.h"

/* ---- the account's side: apply the stream to the tree ---- */

struct apply {
	struct mirror *m;
	int dry;
	int treefd;
	int pfd; /* cached parent directory */
	char ppath[PATH_MAX];
	unsigned tmpseq;
	long pid; /* for temporary names */
	uid_t euid; /* who the tree's files belong to */
	/*
	 * The writer owns the tree but is not root: a 0555 directory gets u+w while it
	 * is changed (listed in `opened`) and its mode back at the end (wr_restore).
	 */
	int own;
	struct strv opened;
	unsigned dropped; /* manifest entries gone from the source */
	int dirty; /* the manifest changed: rewrite the status file */
	struct mirror_stats *st;
};

static void note_change(struct mirror *m, const char *verb, const char *path)
{
	struct buf b = {0};

	if (m->changes.n >= MAX_CHANGE_LINES)
		return;
	buf_printf(&b, "%s ", verb);
	mirror_escape(path, &b);
	strv_push(&m->changes, b.data);
	buf_free(&b);
}

/* Open the parent of `path` below the tree, one component at a time, never following links. */
static int parent_fd(struct apply *a, const char *path, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX];
	int fd;

	*ret_name = slash ? slash + 1 : path;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (a->pfd >= 0 && !strcmp(a->ppath, dir))
		return a->pfd;
	fd = fo_open_dir(a->treefd, dir);
	if (fd < 0)
		return fd;
	if (a->pfd >= 0)
		close(a->pfd);
	a->pfd = fd;
	snprintf(a->ppath, sizeof(a->ppath), "%s", dir);
	return fd;
}

static void forget_parent(struct apply *a)
{
	if (a->pfd >= 0)
		close(a->pfd);
	a->pfd = -1;
	a->ppath[0] = '\0';
}

/* Before a change in directory fd (`path` in the tree): writable by us while we work. */
static int wr_dir(struct apply *a, int fd, const char *path)
{
	struct stat st;

	if (!a->own)
		return 0;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_mode & S_IWUSR)
		return 0;
	if (fchmod(fd, (st.st_mode & 07777) | S_IWUSR) < 0)
		return -errno;
	return strv_push(&a->opened, path) < 0 ? -ENOMEM : 0;
}

/* The modes of the directories wr_dir opened, back (a directory removed since is skipped). */
static void wr_restore(struct apply *a)
{
	for (size_t i = 0; i < a->opened.n; i++) {
		int fd = fo_open_dir(a->treefd, a->opened.v[i]);

		if (fd < 0)
			continue;
		if (fchmod(fd, a->m->dmode) < 0)
			log_warn("mirror: %s/%s: mode %o: %s", a->m->tree, a->opened.v[i],
				(unsigned)a->m->dmode, strerror(errno));
		close(fd);
	}
	strv_free(&a->opened);
}

/*
 * Remove pfd/name and what is below it, by descriptor, never following a link. own: the
 * directories are ours and may be 0555: each gets u+w before its entries go.
 */
int mirror_rm_at(int pfd, const char *name, int own, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth > MIRROR_MAX_DEPTH + 8)
		return -ELOOP;
	fd = openat(pfd, name, DIR_FLAGS);
	if (fd < 0)
		return -errno;
	if (own && fchmod(fd, 0700) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((de = readdir(d)) != NULL) {
		int rr;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rr = mirror_rm_at(dirfd(d), de->d_name, own, depth + 1);
		if (rr < 0)
			r = rr;
	}
	closedir(d);
	if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	return r;
}

/* Remove whatever is at `path` in the tree (file, link or whole directory). */
static int priv_remove_path(struct apply *a, const char *path)
{
	const char *name;
	int pfd, r;

	if (a->dry)
		return 0;
	pfd = parent_fd(a, path, &name);
	if (pfd == -ENOENT || pfd == -ENOTDIR)
		return 0;
	if (pfd < 0)
		return pfd;
	r = wr_dir(a, pfd, a->ppath);
	return r < 0 ? r : mirror_rm_at(pfd, name, a->own, 0);
}

static int same_file(struct apply *a, int pfd, const char *name, const char *data, size_t len)
{
	return fo_same_at(pfd, name, data, len, 0444, a->euid, (gid_t)-1) == 1;
}

static int priv_write_file(struct apply *a, const char *path, const char *data, size_t len)
{
	const char *name;
	char tmp[64];
	int pfd, fd, r = 0;

	pfd = parent_fd(a, path, &name);
	if (pfd < 0)
		return pfd;
	if (same_file(a, pfd, name, data, len))
		return 0;
	a->st->written++;
	note_change(a->m, "update", path);
	if (a->dry)
		return 0;
	if ((r = wr_dir(a, pfd, a->ppath)) < 0)
		return r;
	snprintf(tmp, sizeof(tmp), ".ocsb-tmp.%ld.%u", a->pid, a->tmpseq++);
	/* Created 0444 (the umask is 0 while applying): the fd still writes. */
	fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0)
		return -errno;
	for (size_t off = 0; off < len && r == 0;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			r = -errno;
		else
			off += (size_t)w;
	}
	/*
	 * No fsync: the tree is rebuilt from the sources after a crash. The rename still makes
	 * a reader see the old or the new file, never half of one.
	 */
	close(fd);
	if (r == 0 && renameat(pfd, tmp, pfd, name) < 0)
		r = -errno;
	if (r < 0)
		unlinkat(pfd, tmp, 0);
	return r;
}

static int priv_write_link(struct apply *a, const char *path, const char *target)
{
	const char *name;
	char cur[4096], tmp[64];
	ssize_t n;
	int pfd;

	pfd = parent_fd(a, path, &name);
	if (pfd < 0)
		return pfd;
	n = readlinkat(pfd, name, cur, sizeof(cur) - 1);
	if (n >= 0) {
		cur[n] = '\0';
		if (!strcmp(cur, target))
			return 0;
	}
	a->st->written++;
	note_change(a->m, "link", path);
	if (a->dry)
		return 0;
	n = wr_dir(a, pfd, a->ppath);
	if (n < 0)
		return (int)n;
	snprintf(tmp, sizeof(tmp), ".ocsb-tmp.%ld.%u", a->pid, a->tmpseq++);
	if (symlinkat(target, pfd, tmp) < 0)
		return -errno;
	if (renameat(pfd, tmp, pfd, name) < 0) {
		int r = -errno;
		unlinkat(pfd, tmp, 0);
		return r;
	}
	return 0;
}

static int priv_make_dir(struct apply *a, const char *path)
{
	const char *name;
	struct stat st;
	int pfd, fd;

	pfd = parent_fd(a, path, &name);
	if (pfd < 0)
		return pfd;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
		(st.st_mode & 07777) == a->m->dmode)
		return 0;
	a->st->written++;
	note_change(a->m, "mkdir", path);
	if (a->dry)
		return 0;
	if ((fd = wr_dir(a, pfd, a->ppath)) < 0)
		return fd;
	/* The umask is 0 while applying: a new directory has its mode. */
	if (mkdirat(pfd, name, a->m->dmode) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	fd = openat(pfd, name, DIR_FLAGS);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, a->m->dmode) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	close(fd);
	return 0;
}

/* A path from the child: plain components, below one of the configured roots. */
static int priv_path_valid(const struct mirror *m, const char *path, size_t len)
{
	int under = 0;

	if (!len || strlen(path) != len || path[0] == '/')
		return 0;
	for (const char *p = path; *p;) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == 0 || l > 255 || (l == 1 && *p == '.') || (l == 2 && !strncmp(p, "..", 2)))
			return 0;
		p += l;
		if (*p)
			p++;
	}
	for (size_t i = 0; i < m->spec->paths.n; i++)
		under |= mirror_path_under(path, m->spec->paths.v[i]);
	return under;
}

/*
 * The reader names each directory (d, or U when unchanged) before what it holds. A record
 * whose directory below a root went unnamed would outlive it: the directory is removed as
 * gone from the source, with what was just written in it, and the manifest would still
 * say the tree holds that. The roots' own parents are the writer's, never named.
 */
static int priv_parent_seen(const struct mirror *m, const char *path)
{
	const char *slash = strrchr(path, '/');
	const struct mirror_entry *e;
	char dir[8193];
	int under = 0;

	if (!slash)
		return 1;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	for (size_t i = 0; i < m->spec->paths.n; i++)
		under |= mirror_path_under(dir, m->spec->paths.v[i]);
	if (!under)
		return 1;
	e = mirror_entry_find(m, dir);
	return e && e->seen && e->kind == 'd';
}

static int get(const char **p, const char *end, void *dst, size_t n)
{
	if ((size_t)(end - *p) < n)
		return -1;
	memcpy(dst, *p, n);
	*p += n;
	return 0;
}

/* One record; -EPROTO for anything malformed (a broken or hostile child). */
static int priv_next_rec(const char **p, const char *end, struct rec *r)
{
	memset(r, 0, sizeof(*r));
	if (get(p, end, &r->kind, 1) || get(p, end, &r->state, 1) || get(p, end, &r->mode, 4) ||
		get(p, end, &r->size, 8) || get(p, end, &r->ino, 8) ||
		get(p, end, &r->mtime_ns, 8) || get(p, end, &r->ctime_ns, 8) ||
		get(p, end, &r->pathlen, 4) || r->pathlen > 8192 || (size_t)(end - *p) < r->pathlen)
		return -EPROTO;
	r->path = *p;
	*p += r->pathlen;
	if (get(p, end, &r->detaillen, 4) || r->detaillen > 65536 ||
		(size_t)(end - *p) < r->detaillen)
		return -EPROTO;
	r->detail = *p;
	*p += r->detaillen;
	if (get(p, end, &r->datalen, 4) || r->datalen > MIRROR_MAX_FILE + 65536 ||
		(size_t)(end - *p) < r->datalen)
		return -EPROTO;
	r->data = *p;
	*p += r->datalen;
	return 0;
}

static int priv_apply_rec(struct apply *a, const struct rec *r)
{
	struct mirror *m = a->m;
	char path[8193], *detail = NULL;
	struct mirror_entry *e;
	int rc = 0;

	memcpy(path, r->path, r->pathlen);
	path[r->pathlen] = '\0';
	if (!priv_path_valid(m, path, r->pathlen) || !strchr("dflg-uU", r->kind) ||
		r->kind == '\0' || r->state > MS_SKIPPED ||
		(r->kind == 'l' && memchr(r->data, '\0', r->datalen)) || !priv_parent_seen(m, path))
		return -EPROTO;
	e = mirror_entry_find(m, path);
	if (r->kind == 'u' || r->kind == 'U') {
		/* Only what the manifest holds, once: the tree has it as recorded. */
		if (!e || e->seen || (r->kind == 'U' && e->kind != 'd'))
			return -EPROTO;
		e->seen = 1;
		e->quiet = r->kind == 'U';
		a->st->unchanged++;
		return 0;
	}
	if (e && e->seen)
		return -EPROTO; /* the same path twice */
	/* Something else is there now (file -> dir, mirrored -> withheld): it goes first. */
	if (e && mirror_entry_on_disk(e) && (e->kind != r->kind || r->kind == '-')) {
		rc = priv_remove_path(a, path);
		a->st->removed++;
		note_change(m, "remove", path);
	}
	if (rc == 0) {
		if (r->kind == 'd') {
			rc = priv_make_dir(a, path);
		} else if (r->kind == 'f' || r->kind == 'g') {
			rc = priv_write_file(a, path, r->data, r->datalen);
		} else if (r->kind == 'l') {
			char target[4096];

			if (r->datalen == 0 || r->datalen >= sizeof(target))
				return -EPROTO;
			memcpy(target, r->data, r->datalen);
			target[r->datalen] = '\0';
			/*
			 * The reader runs with the owner's rights: its promise (relative, inside
			 * the root, in normal form) is checked again here before root makes it.
			 */
			if (!mirror_link_ok(&m->spec->paths, path, target)) {
				struct buf esc = {0};

				mirror_escape(target, &esc);
				log_err("mirror: the reader sent a link %s/%s -> %s that leaves "
					"its tree: nothing created",
					m->tree, path, esc.data ? esc.data : "");
				buf_free(&esc);
				return -EPROTO;
			}
			rc = priv_write_link(a, path, target);
		}
	}
	if (rc < 0) {
		log_err("mirror: %s/%s: %s", m->tree, path, strerror(-rc));
		return rc;
	}
	if (r->kind == '-') {
		if (r->state == MS_WITHHELD)
			a->st->withheld++;
		else
			a->st->skipped++;
	} else if (r->state == MS_REDACTED) {
		a->st->redacted++;
	}
	/* Text up to a NUL: one that starts with it is none, as the status file keeps it. */
	if (r->detaillen && r->detail[0]) {
		detail = strndup(r->detail, r->detaillen);
		if (!detail)
			return -ENOMEM;
		/* What the owner should hear about: only when it is news. */
		if (!e || !e->detail || strcmp(e->detail, detail) || e->state != r->state) {
			struct buf b = {0};

			mirror_escape(path, &b);
			buf_printf(&b, ": %s", detail);
			for (char *c = b.data; c && *c; c++)
				if (*c == '\n')
					*c = ';';
			strv_push(&m->notices, b.data);
			buf_free(&b);
		}
	}
	/* Anything the manifest does not know yet: the status file must be rewritten. */
	if (!e || e->kind != r->kind || e->state != r->state || e->mode != r->mode ||
		e->size != r->size || e->ino != r->ino || e->mtime_ns != r->mtime_ns ||
		e->ctime_ns != r->ctime_ns || !e->detail != !detail ||
		(detail && strcmp(e->detail, detail)))
		a->dirty = 1;
	if (!e && !(e = mirror_entry_add(m, path))) {
		free(detail);
		return -ENOMEM;
	}
	free(e->detail);
	e->detail = detail;
	e->kind = r->kind;
	e->state = r->state;
	e->mode = r->mode;
	e->size = r->size;
	e->ino = r->ino;
	e->mtime_ns = r->mtime_ns;
	e->ctime_ns = r->ctime_ns;
	e->seen = 1;
	return 0;
}

static int cmp_desc(const void *x, const void *y)
{
	return strcmp(*(char *const *)y, *(char *const *)x);
}

/*
 * Entries left unsaid in a quiet directory are unchanged; directories are always named.
 * A directory's entries sit next to each other in the sorted manifest: one lookup each
 * time the parent changes.
 */
static void count_quiet(struct apply *a)
{
	struct mirror *m = a->m;
	const struct mirror_entry *parent = NULL;
	size_t plen = 0;

	for (size_t i = 0; i < m->n; i++) {
		struct mirror_entry *e = &m->e[i];
		const char *slash;

		if (e->seen || e->kind == 'd')
			continue;
		slash = strrchr(e->path, '/');
		if (!slash)
			continue;
		if (!parent || plen != (size_t)(slash - e->path) ||
			strncmp(parent->path, e->path, plen) != 0) {
			char dir[8193];

			plen = (size_t)(slash - e->path);
			if (plen >= sizeof(dir))
				continue;
			memcpy(dir, e->path, plen);
			dir[plen] = '\0';
			parent = mirror_entry_find(m, dir);
			if (!parent) {
				plen = 0;
				continue;
			}
		}
		if (parent->quiet) {
			e->seen = 1;
			a->st->unchanged++;
		}
	}
}

/* Entries the scan did not see are gone from the source: remove them, deepest first. */
static int priv_apply_deletions(struct apply *a)
{
	struct mirror *m = a->m;
	struct strv gone = {0};
	size_t keep = 0;
	int r = 0;

	count_quiet(a);
	for (size_t i = 0; i < m->n; i++) {
		if (m->e[i].seen)
			continue;
		a->dropped++;
		if (mirror_entry_on_disk(&m->e[i]))
			strv_push(&gone, m->e[i].path);
	}
	if (gone.n)
		qsort(gone.v, gone.n, sizeof(*gone.v), cmp_desc);
	for (size_t i = 0; i < gone.n; i++) {
		int rc = priv_remove_path(a, gone.v[i]);

		a->st->removed++;
		note_change(m, "remove", gone.v[i]);
		if (rc < 0) {
			log_err("mirror: remove %s/%s: %s", m->tree, gone.v[i], strerror(-rc));
			r = rc;
		}
	}
	strv_free(&gone);
	if (a->dry)
		return r;
	for (size_t i = 0; i < m->n; i++) {
		if (m->e[i].seen) {
			m->e[keep++] = m->e[i];
		} else {
			free(m->e[i].path);
			free(m->e[i].detail);
		}
	}
	if (keep != m->n) {
		m->n = keep;
		mirror_rehash(m, m->nslot);
	}
	return r;
}

/* Each component of `path` below the tree, made when missing (quietly: no change line). */
static int ensure_dirs(struct apply *a, const char *path)
{
	char sub[PATH_MAX];

	for (const char *e = path;; e++) {
		const char *name;
		struct stat st;
		int pfd, r;

		e = strchr(e, '/');
		snprintf(sub, sizeof(sub), "%.*s", e ? (int)(e - path) : (int)strlen(path), path);
		pfd = parent_fd(a, sub, &name);
		if (pfd < 0)
			return pfd;
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if ((r = wr_dir(a, pfd, a->ppath)) < 0)
				return r;
			if (mkdirat(pfd, name, a->m->dmode) < 0 && errno != EEXIST)
				return -errno;
		} else if (!S_ISDIR(st.st_mode)) {
			return -ENOTDIR;
		}
		if (!e)
			return 0;
	}
}

/*
 * The writer's tree: <dir> (root made it the account's: mirror_prepare, or the warden)
 * and <dir>/tree, the caller's own. Root never writes it (invariant 7: only the account
 * does, through a child of root's when root runs): a dry run only reads.
 */
static int open_tree(struct mirror *m, int dry)
{
	struct stat st;
	int dfd, fd;

	if (dry) {
		fd = fo_open_dir(AT_FDCWD, m->tree);
		return fd == -ENOENT ? -ENOENT : fd;
	}
	if (geteuid() == 0) {
		log_err("mirror: %s is written by its account, not by root", m->tree);
		return -EPERM;
	}
	/* Unit tests make <dir> themselves; in the programs root did (base is root's). */
	dfd = fo_mkdir_p(AT_FDCWD, m->dir, 0750, (uid_t)-1, (gid_t)-1);
	if (dfd < 0) {
		log_err("mirror: %s: %s", m->dir, strerror(-dfd));
		return dfd;
	}
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid()) {
		log_err("mirror: %s belongs to uid %u, not to this account (uid %u): run "
			"ocsb-provision",
			m->dir, (unsigned)st.st_uid, (unsigned)geteuid());
		close(dfd);
		return -EPERM;
	}
	/* Only the agent (its group) may see the owner's configs: root set the group. */
	if ((st.st_mode & 07777) != 0750 && fchmod(dfd, 0750) < 0)
		log_warn("mirror: %s: mode 0750: %s", m->dir, strerror(errno));
	if (mkdirat(dfd, "tree", m->dmode) < 0 && errno != EEXIST) {
		fd = -errno;
		log_err("mirror: %s: %s", m->tree, strerror(errno));
		close(dfd);
		return fd;
	}
	fd = openat(dfd, "tree", DIR_FLAGS);
	close(dfd);
	if (fd < 0) {
		fd = -errno;
		log_err("mirror: %s: %s", m->tree, strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		log_err("mirror: %s belongs to uid %u: set aside first (mirror_own_tree) or run "
			"ocsb-provision",
			m->tree, (unsigned)st.st_uid);
		close(fd);
		return -EPERM;
	}
	if ((st.st_mode & 07777) != m->dmode)
		fchmod(fd, m->dmode);
	return fd;
}

int64_t mirror_scan_start(void)
{
	struct timespec now;

	if (clock_gettime(CLOCK_REALTIME, &now) < 0)
		return 0;
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

int mirror_apply(struct mirror *m, const char *stream, size_t len, int dry, int64_t scan_ns,
	struct mirror_stats *ret)
{
	struct apply a = {.m = m, .dry = dry, .pfd = -1, .pid = (long)getpid()};
	struct mirror_stats st = {0};
	const char *p = stream, *end = stream + len;
	long t0 = mono_ms();
	mode_t old_umask;
	int r = 0, ended = 0, fresh;
	struct stat sb;

	/* A dry run of root's reads a tree whose files are the account's. */
	a.euid = geteuid() == 0 && m->tree_uid != (uid_t)-1 ? m->tree_uid : geteuid();
	a.own = geteuid() != 0 && !(m->dmode & S_IWUSR);
	a.st = &st;
	strv_free(&m->changes);
	strv_free(&m->notices);
	a.treefd = open_tree(m, dry);
	if (a.treefd < 0 && !(dry && a.treefd == -ENOENT))
		return -1;
	/* Missing or empty (made by root, never written): the report must be written. */
	fresh = stat(m->status, &sb) < 0 || sb.st_size == 0;
	for (size_t i = 0; i < m->n; i++)
		m->e[i].seen = m->e[i].quiet = 0;
	/* Modes are given at each creation (0444 files): no fchmod per file. */
	old_umask = umask(0);
	/* The roots' parents (".config" for ".config/opencode") belong to the tree. */
	for (size_t i = 0; i < m->spec->paths.n && a.treefd >= 0 && !dry; i++) {
		char parent[PATH_MAX];
		const char *slash = strrchr(m->spec->paths.v[i], '/');

		if (!slash)
			continue;
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - m->spec->paths.v[i]),
			m->spec->paths.v[i]);
		if ((r = ensure_dirs(&a, parent)) < 0) {
			log_err("mirror: %s/%s: %s", m->tree, parent, strerror(-r));
			goto out;
		}
	}
	while (p < end) {
		struct rec rec;

		if (priv_next_rec(&p, end, &rec) < 0) {
			r = -EPROTO;
			break;
		}
		if (rec.kind == 'E') {
			ended = p == end;
			break;
		}
		if (a.treefd < 0) {
			/* A dry run before the first build: every entry is new. */
			if (strchr("dflg", rec.kind)) {
				char path[256];

				snprintf(path, sizeof(path), "%.*s", (int)rec.pathlen, rec.path);
				st.written++;
				note_change(m, "create", path);
			}
			continue;
		}
		r = priv_apply_rec(&a, &rec);
		if (r < 0)
			break;
	}
	if (r == 0 && !ended)
		r = -EPROTO;
	if (r == -EPROTO)
		log_err("mirror: malformed or truncated answer from the reader (%zu bytes): "
			"nothing removed",
			len);
	if (r == 0)
		r = priv_apply_deletions(&a);
	st.entries = (unsigned)m->n;
	if (r == 0 && !dry)
		m->scan_ns = scan_ns;
	/* Skips and withheld files change nothing in the tree, but the report must say so. */
	if (r == 0 && !dry &&
		(st.written || st.removed || fresh || a.dropped || a.dirty || m->notices.n ||
			!m->scan_saved)) {
		struct buf b = {0};

		if (mirror_render_status(m, m->by, &b) < 0)
			r = -ENOMEM;
		else
			r = mirror_status_write(m, b.data, b.len);
		if (r == 0)
			m->scan_saved = 1;
		if (r < 0)
			log_err("mirror: %s: %s", m->status, strerror(-r));
		buf_free(&b);
	}
out:
	umask(old_umask);
	forget_parent(&a);
	if (a.treefd >= 0) {
		wr_restore(&a);
		close(a.treefd);
	}
	strv_free(&a.opened);
	st.ms = mono_ms() - t0;
	if (ret)
		*ret = st;
	return r < 0 ? -1 : 0;
}

/* mirror_int.h */
int mirror_reserve_here(struct mirror *m, int dry, struct strv *changes)
{
	struct apply a = {.m = m, .pfd = -1, .pid = (long)getpid()};
	mode_t old_umask = 0;
	int r = 0;

	a.own = geteuid() != 0 && !(m->dmode & S_IWUSR);
	a.treefd = -1;
	for (size_t i = 0; i < m->spec->paths.n; i++) {
		const char *rel = m->spec->paths.v[i];
		const struct mirror_entry *e = mirror_entry_find(m, rel);
		char line[PATH_MAX + 128];

		if ((e && mirror_entry_on_disk(e)) || !strcmp(rel, MIRROR_GITCONFIG) ||
			mirror_writable(m, rel) || mirror_reserved(m, rel))
			continue;
		snprintf(line, sizeof(line),
			"reserve ~/%s: an empty mirror directory until %s has one", rel, m->owner);
		if (strv_push(changes, line) < 0) {
			r = -ENOMEM;
			break;
		}
		if (dry)
			continue;
		if (a.treefd < 0) {
			a.treefd = open_tree(m, 0);
			if (a.treefd < 0) {
				r = a.treefd;
				break;
			}
			old_umask = umask(0);
		}
		/* The account's own tree, walked without following links. */
		r = ensure_dirs(&a, rel);
		if (r < 0) {
			log_err("mirror: %s/%s: %s", m->tree, rel, strerror(-r));
			break;
		}
	}
	forget_parent(&a);
	if (a.treefd >= 0) {
		umask(old_umask);
		wr_restore(&a);
		close(a.treefd);
	}
	strv_free(&a.opened);
	return r < 0 ? -1 : 0;
}
