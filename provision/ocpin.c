/* SPDX-License-Identifier: MIT */
/*
 * Root's takeover of the OpenCode tree npm staged as an unprivileged user: the tree is
 * that user's until root has copied it, so every entry is opened relative to its
 * directory without following links, copied by root, hashed as it is written and only
 * then compared with the manifest this build pins. npm checked the lockfile's sha512s,
 * but it ran as the user: root relies on its own hashes only.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "log.h"
#include "ocpin.h"

#define MAX_DEPTH 32
#define HEX_LEN (crypto_hash_sha256_BYTES * 2)

struct walk {
	struct ocpin_entry *e; /* owned: what the tree holds, in walk order */
	size_t n, cap;
	unsigned long long total;
	char *why; /* borrowed */
	size_t whylen;
};

static int has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* "a/b/c": relative, no empty, "." or ".." component, no control byte. */
static int path_ok(const char *p)
{
	const char *c = p;

	if (!*p || *p == '/' || has_ctl(p))
		return 0;
	while (*c) {
		size_t len = strcspn(c, "/");

		if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)))
			return 0;
		c += len;
		if (*c == '/' && !*++c)
			return 0;
	}
	return 1;
}

int ocpin_link_inside(const char *path, const char *target)
{
	long depth = 0;
	const char *c;

	if (!*target || *target == '/' || has_ctl(target))
		return 0;
	/* The link's directory is as deep as the path has slashes. */
	for (c = path; *c; c++)
		depth += *c == '/';
	for (c = target; *c;) {
		size_t len = strcspn(c, "/");

		if (len == 2 && !strncmp(c, "..", 2)) {
			if (--depth < 0)
				return 0;
		} else if (len && !(len == 1 && *c == '.')) {
			depth++;
		}
		c += len;
		c += *c == '/';
	}
	return 1;
}

void ocpin_free(struct ocpin_manifest *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].val);
		free(m->e[i].path);
	}
	free(m->e);
	m->e = NULL;
	m->n = 0;
}

static int hex_ok(const char *s)
{
	return strlen(s) == HEX_LEN && strspn(s, "0123456789abcdef") == HEX_LEN;
}

/* Is the parent directory of path listed, as a directory, among the first n entries? */
static int parent_listed(const struct ocpin_entry *e, size_t n, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t len;

	if (!slash)
		return 1;
	len = (size_t)(slash - path);
	for (size_t i = n; i-- > 0;)
		if (e[i].type == 'd' && strlen(e[i].path) == len && !strncmp(e[i].path, path, len))
			return 1;
	return 0;
}

/* One line "T MODE VAL PATH" into e; a message in why when it is wrong. */
static int parse_line(char *line, struct ocpin_entry *e, char *why, size_t n)
{
	char *type = strtok(line, " "), *mode = strtok(NULL, " "), *val = strtok(NULL, " ");
	char *path = strtok(NULL, ""), *end;

	if (!type || !mode || !val || !path || strlen(type) != 1 || !strchr("dfl", *type)) {
		snprintf(why, n, "not 'd|f|l MODE VALUE PATH'");
		return -1;
	}
	e->type = *type;
	e->mode = (unsigned)strtoul(mode, &end, 8);
	if (strlen(mode) != 4 || *end || e->mode > 07777) {
		snprintf(why, n, "mode '%.16s' is not four octal digits", mode);
		return -1;
	}
	if (!path_ok(path)) {
		snprintf(why, n, "path '%.200s' is not relative to the tree (empty, /, . or ..)",
			path);
		return -1;
	}
	if ((e->type == 'd' && strcmp(val, "-")) || (e->type == 'f' && !hex_ok(val)) ||
		(e->type == 'l' && !ocpin_link_inside(path, val))) {
		snprintf(why, n, "%s: bad %s '%.100s'", path,
			e->type == 'l' ? "link target (absolute or leaving the tree)" : "value",
			val);
		return -1;
	}
	if (e->type == 'l' && e->mode != 0777) {
		snprintf(why, n, "%s: a link's mode is 0777", path);
		return -1;
	}
	e->path = strdup(path);
	e->val = e->type == 'd' ? NULL : strdup(val);
	if (!e->path || (e->type != 'd' && !e->val)) {
		free(e->path);
		free(e->val);
		snprintf(why, n, "out of memory");
		return -1;
	}
	return 0;
}

int ocpin_parse(const char *text, struct ocpin_manifest *ret, char *why, size_t n)
{
	struct ocpin_manifest m = {0};
	char *copy = strdup(text), *line, *next;
	char msg[512];
	size_t cap = 0;
	int lineno = 0, r = -EINVAL;

	if (!copy)
		return -ENOMEM;
	for (line = copy; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		lineno++;
		if (m.n == OCPIN_MAX_ENTRIES) {
			snprintf(
				why, n, "line %d: more than %d entries", lineno, OCPIN_MAX_ENTRIES);
			goto out;
		}
		if (m.n == cap) {
			struct ocpin_entry *e = reallocarray(m.e, cap ? cap * 2 : 64, sizeof(*e));

			if (!e) {
				r = -ENOMEM;
				goto out;
			}
			m.e = e;
			cap = cap ? cap * 2 : 64;
		}
		if (parse_line(line, &m.e[m.n], msg, sizeof(msg)) < 0) {
			snprintf(why, n, "line %d: %s", lineno, msg);
			goto out;
		}
		m.n++;
		/* Sorted and unique: the comparison below walks both lists once. */
		if (m.n > 1 && strcmp(m.e[m.n - 2].path, m.e[m.n - 1].path) >= 0) {
			snprintf(why, n, "line %d: %.200s: out of order or listed twice", lineno,
				m.e[m.n - 1].path);
			goto out;
		}
		if (!parent_listed(m.e, m.n - 1, m.e[m.n - 1].path)) {
			snprintf(why, n, "line %d: %.200s: its directory is not listed", lineno,
				m.e[m.n - 1].path);
			goto out;
		}
	}
	*ret = m;
	m = (struct ocpin_manifest){0};
	r = 0;
out:
	free(copy);
	ocpin_free(&m);
	return r;
}

/* Escaped for messages: names come from the unprivileged side. */
static const char *vis(const char *s, char *buf, size_t n)
{
	log_vis(s, strlen(s), buf, n);
	return buf;
}

static struct ocpin_entry *walk_add(struct walk *w, const char *path, char type, unsigned mode)
{
	struct ocpin_entry *e;

	if (w->n == OCPIN_MAX_ENTRIES) {
		snprintf(w->why, w->whylen, "more than %d entries in the tree", OCPIN_MAX_ENTRIES);
		return NULL;
	}
	if (w->n == w->cap) {
		e = reallocarray(w->e, w->cap ? w->cap * 2 : 64, sizeof(*e));
		if (!e)
			return NULL;
		w->e = e;
		w->cap = w->cap ? w->cap * 2 : 64;
	}
	e = &w->e[w->n];
	*e = (struct ocpin_entry){.type = type, .mode = mode, .path = strdup(path)};
	if (!e->path)
		return NULL;
	w->n++;
	return e;
}

/* Read src (and write dst when >= 0) to the end, bounded; the hex sha256 of the bytes. */
static int copy_file(int src, int dst, const char *path, struct walk *w, char hex[HEX_LEN + 1])
{
	crypto_hash_sha256_state h;
	unsigned char buf[1 << 16], sum[crypto_hash_sha256_BYTES];
	unsigned long long size = 0;
	char v[256];
	ssize_t got;

	crypto_hash_sha256_init(&h);
	while ((got = read(src, buf, sizeof(buf))) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			snprintf(w->why, w->whylen, "%s: %s", vis(path, v, sizeof(v)),
				strerror(errno));
			return -errno;
		}
		size += (size_t)got;
		w->total += (size_t)got;
		/* Checked on what was read, not on st_size: the file may grow meanwhile. */
		if (size > OCPIN_MAX_FILE || w->total > OCPIN_MAX_TOTAL) {
			snprintf(w->why, w->whylen, "%s: %s larger than %llu MiB",
				vis(path, v, sizeof(v)), size > OCPIN_MAX_FILE ? "file" : "tree",
				(size > OCPIN_MAX_FILE ? OCPIN_MAX_FILE : OCPIN_MAX_TOTAL) >> 20);
			return -EFBIG;
		}
		crypto_hash_sha256_update(&h, buf, (size_t)got);
		for (ssize_t off = 0; dst >= 0 && off < got;) {
			ssize_t put = write(dst, buf + off, (size_t)(got - off));

			if (put < 0 && errno == EINTR)
				continue;
			if (put <= 0) {
				snprintf(w->why, w->whylen, "copying %s: %s",
					vis(path, v, sizeof(v)),
					put < 0 ? strerror(errno) : "short write");
				return put < 0 ? -errno : -EIO;
			}
			off += put;
		}
	}
	crypto_hash_sha256_final(&h, sum);
	sodium_bin2hex(hex, HEX_LEN + 1, sum, sizeof(sum));
	return 0;
}

static int take_file(int sdir, int ddir, const char *name, const struct stat *st, const char *path,
	struct walk *w)
{
	struct ocpin_entry *e;
	struct stat now;
	char hex[HEX_LEN + 1], v[256];
	int src, dst = -1, r;

	/* A second name elsewhere would let the file change under a path root checked. */
	if (st->st_nlink != 1) {
		snprintf(w->why, w->whylen, "%s: a hard link (%ju names)", vis(path, v, sizeof(v)),
			(uintmax_t)st->st_nlink);
		return 0;
	}
	src = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (src < 0) {
		snprintf(w->why, w->whylen, "%s: %s", vis(path, v, sizeof(v)), strerror(errno));
		return -errno;
	}
	/* What was opened must be what was looked at: not swapped for a fifo or a link. */
	if (fstat(src, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino ||
		now.st_dev != st->st_dev) {
		snprintf(w->why, w->whylen, "%s: replaced while being read",
			vis(path, v, sizeof(v)));
		close(src);
		return 0;
	}
	if (ddir >= 0) {
		dst = openat(
			ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (dst < 0) {
			r = -errno;
			snprintf(w->why, w->whylen, "creating %s: %s", vis(path, v, sizeof(v)),
				strerror(errno));
			close(src);
			return r;
		}
	}
	r = copy_file(src, dst, path, w, hex);
	close(src);
	/* Never a set-id bit on root's copy: the mode is compared, not granted. */
	if (r == 0 && dst >= 0 && fchmod(dst, now.st_mode & 0777) < 0) {
		r = -errno;
		snprintf(w->why, w->whylen, "chmod %s: %s", vis(path, v, sizeof(v)),
			strerror(errno));
	}
	if (dst >= 0 && close(dst) < 0 && r == 0) {
		r = -errno;
		snprintf(w->why, w->whylen, "%s: %s", vis(path, v, sizeof(v)), strerror(errno));
	}
	if (r < 0)
		return r;
	e = walk_add(w, path, 'f', now.st_mode & 07777);
	if (!e || !(e->val = strdup(hex)))
		return e ? -ENOMEM : w->n == OCPIN_MAX_ENTRIES ? 0 : -ENOMEM;
	return 1;
}

static int take_link(int sdir, int ddir, const char *name, const char *path, struct walk *w)
{
	struct ocpin_entry *e;
	char target[PATH_MAX], v[256], t[256];
	ssize_t len = readlinkat(sdir, name, target, sizeof(target));

	if (len < 0 || len >= (ssize_t)sizeof(target)) {
		snprintf(w->why, w->whylen, "%s: %s", vis(path, v, sizeof(v)),
			len < 0 ? strerror(errno) : "link target too long");
		return len < 0 ? -errno : 0;
	}
	target[len] = '\0';
	if (!ocpin_link_inside(path, target)) {
		snprintf(w->why, w->whylen, "%s: a link to '%s', outside the tree",
			vis(path, v, sizeof(v)), vis(target, t, sizeof(t)));
		return 0;
	}
	if (ddir >= 0 && symlinkat(target, ddir, name) < 0) {
		snprintf(w->why, w->whylen, "creating %s: %s", vis(path, v, sizeof(v)),
			strerror(errno));
		return -errno;
	}
	e = walk_add(w, path, 'l', 0777);
	if (!e || !(e->val = strdup(target)))
		return e ? -ENOMEM : w->n == OCPIN_MAX_ENTRIES ? 0 : -ENOMEM;
	return 1;
}

static int walk_dir(int sdir, int ddir, char *path, size_t cap, int depth, struct walk *w);

static int take_dir(int sdir, int ddir, const char *name, const struct stat *st, char *path,
	size_t cap, int depth, struct walk *w)
{
	int sub, dsub = -1, r;
	char v[256];

	if (!walk_add(w, path, 'd', st->st_mode & 07777))
		return w->n == OCPIN_MAX_ENTRIES ? 0 : -ENOMEM;
	sub = openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0) {
		snprintf(w->why, w->whylen, "%s: %s", vis(path, v, sizeof(v)), strerror(errno));
		return -errno;
	}
	if (ddir >= 0) {
		/* Root's only until the whole tree matched: the caller opens it up then. */
		if (mkdirat(ddir, name, 0700) < 0 ||
			(dsub = openat(ddir, name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
			r = -errno;
			snprintf(w->why, w->whylen, "creating %s: %s", vis(path, v, sizeof(v)),
				strerror(errno));
			close(sub);
			return r;
		}
	}
	r = walk_dir(sub, dsub, path, cap, depth + 1, w);
	if (r == 1 && dsub >= 0 && fchmod(dsub, st->st_mode & 0777) < 0) {
		r = -errno;
		snprintf(w->why, w->whylen, "chmod %s: %s", vis(path, v, sizeof(v)),
			strerror(errno));
	}
	if (dsub >= 0)
		close(dsub);
	return r;
}

/* sdir is consumed. 1 when every entry was taken, 0 when one was refused, < 0 errors. */
static int walk_dir(int sdir, int ddir, char *path, size_t cap, int depth, struct walk *w)
{
	size_t len = strlen(path);
	struct dirent *d;
	struct stat st;
	char v[256];
	DIR *dir;
	int r = 1;

	if (depth > MAX_DEPTH) {
		close(sdir);
		snprintf(w->why, w->whylen, "%s: more than %d directories deep",
			vis(path, v, sizeof(v)), MAX_DEPTH);
		return 0;
	}
	dir = fdopendir(sdir);
	if (!dir) {
		r = -errno;
		close(sdir);
		return r;
	}
	while (r == 1 && (errno = 0, d = readdir(dir)) != NULL) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		if (snprintf(path + len, cap - len, "%s%s", len ? "/" : "", d->d_name) >=
			(int)(cap - len)) {
			path[len] = '\0';
			snprintf(w->why, w->whylen, "%s: a name too long", vis(path, v, sizeof(v)));
			r = 0;
			break;
		}
		if (!strcmp(path, OCPIN_SKIP))
			goto next;
		if (has_ctl(d->d_name)) {
			snprintf(w->why, w->whylen, "%s: a control character in a name",
				vis(path, v, sizeof(v)));
			r = 0;
			break;
		}
		if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			snprintf(w->why, w->whylen, "%s: %s", vis(path, v, sizeof(v)),
				strerror(errno));
			break;
		}
		if (st.st_mode & (S_ISUID | S_ISGID)) {
			snprintf(w->why, w->whylen, "%s: setuid or setgid (mode %04o)",
				vis(path, v, sizeof(v)), (unsigned)st.st_mode & 07777);
			r = 0;
		} else if (S_ISDIR(st.st_mode)) {
			r = take_dir(dirfd(dir), ddir, d->d_name, &st, path, cap, depth, w);
		} else if (S_ISREG(st.st_mode)) {
			r = take_file(dirfd(dir), ddir, d->d_name, &st, path, w);
		} else if (S_ISLNK(st.st_mode)) {
			r = take_link(dirfd(dir), ddir, d->d_name, path, w);
		} else {
			snprintf(w->why, w->whylen, "%s: a device, fifo or socket",
				vis(path, v, sizeof(v)));
			r = 0;
		}
	next:
		path[len] = '\0';
	}
	if (r == 1 && errno != 0)
		r = -errno;
	closedir(dir);
	return r;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ocpin_entry *)a)->path, ((const struct ocpin_entry *)b)->path);
}

static const char *kind(char type)
{
	return type == 'd' ? "a directory" : type == 'f' ? "a file" : "a symbolic link";
}

/* The first difference between the sorted lists got and want, in why; 1 when none. */
static int compare(const struct ocpin_entry *got, size_t ngot, const struct ocpin_manifest *want,
	char *why, size_t n)
{
	char v[256];
	size_t i = 0, j = 0;

	while (i < ngot || j < want->n) {
		int c = i == ngot ? 1 : j == want->n ? -1 : strcmp(got[i].path, want->e[j].path);
		const struct ocpin_entry *g = &got[i], *m = &want->e[j];

		if (c < 0) {
			snprintf(why, n, "%s: not in the pinned tree (an extra %s)",
				vis(g->path, v, sizeof(v)), kind(g->type) + 2);
			return 0;
		}
		if (c > 0) {
			snprintf(why, n, "%s: missing (the pinned tree has %s there)", m->path,
				kind(m->type));
			return 0;
		}
		if (g->type != m->type) {
			snprintf(why, n, "%s: %s where the pinned tree has %s", m->path,
				kind(g->type), kind(m->type));
			return 0;
		}
		if (g->mode != m->mode) {
			snprintf(why, n, "%s: mode %04o, pinned %04o", m->path, g->mode, m->mode);
			return 0;
		}
		if (g->type == 'f' && strcmp(g->val, m->val)) {
			snprintf(why, n, "%s: content differs (sha256 %.16s..., pinned %.16s...)",
				m->path, g->val, m->val);
			return 0;
		}
		if (g->type == 'l' && strcmp(g->val, m->val)) {
			snprintf(why, n, "%s: links to '%s', pinned '%s'", m->path,
				vis(g->val, v, sizeof(v)), m->val);
			return 0;
		}
		i++;
		j++;
	}
	return 1;
}

int ocpin_take(int srcfd, int dstfd, const struct ocpin_manifest *m, char *why, size_t n)
{
	struct walk w = {.why = why, .whylen = n};
	char path[PATH_MAX] = "";
	/* A description of its own: the caller's descriptor keeps its offset. */
	int fd = openat(srcfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), r;

	if (fd < 0) {
		snprintf(why, n, "%s", strerror(errno));
		return -errno;
	}
	r = walk_dir(fd, dstfd, path, sizeof(path), 0, &w);
	if (r == -ENOMEM)
		snprintf(why, n, "out of memory");
	if (r == 1) {
		qsort(w.e, w.n, sizeof(*w.e), entry_cmp);
		r = compare(w.e, w.n, m, why, n);
	}
	ocpin_free(&(struct ocpin_manifest){.e = w.e, .n = w.n});
	return r;
}
