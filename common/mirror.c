/* SPDX-License-Identifier: MIT */
/*
 * The mirror engine (docs/mirror.md): a child with the owner's rights reads, root writes
 * a tree of its own, a child with the agent's rights links it into the agent's home.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileops.h"
#include "json.h"
#include "log.h"
#include "mirror.h"
#include "spawn.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#define STATUS_MAGIC "ocsb-mirror 1"
#define MAX_CHANGE_LINES 50

/* ---- spec ---- */

void mirror_spec_defaults(struct mirror_spec *s)
{
	strv_free(&s->paths);
	strv_free(&s->writable);
	strv_free(&s->noscan);
	s->set = 0;
	/* OpenCode's agents, commands, skills and plugin config; shared skills; git identity. */
	strv_push(&s->paths, ".config/opencode");
	strv_push(&s->paths, ".agents");
	strv_push(&s->paths, MIRROR_GITCONFIG);
}

void mirror_spec_free(struct mirror_spec *s)
{
	strv_free(&s->paths);
	strv_free(&s->writable);
	strv_free(&s->noscan);
}

/* ---- manifest: entries in an open-addressing table keyed by path ---- */

static size_t hash_path(const char *s)
{
	size_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	/* A multiply never moves differences downwards: fold the high bits into the slot bits. */
	h ^= h >> 32;
	h ^= h >> 16;
	return h;
}

static int rehash(struct mirror *m, size_t nslot)
{
	size_t *slot = calloc(nslot, sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	for (size_t i = 0; i < m->n; i++) {
		size_t h = hash_path(m->e[i].path) & (nslot - 1);

		while (slot[h])
			h = (h + 1) & (nslot - 1);
		slot[h] = i + 1;
	}
	free(m->slot);
	m->slot = slot;
	m->nslot = nslot;
	return 0;
}

static struct mirror_entry *me_find(const struct mirror *m, const char *path)
{
	size_t h;

	if (!m->nslot)
		return NULL;
	h = hash_path(path) & (m->nslot - 1);
	while (m->slot[h]) {
		struct mirror_entry *e = &m->e[m->slot[h] - 1];

		if (!strcmp(e->path, path))
			return e;
		h = (h + 1) & (m->nslot - 1);
	}
	return NULL;
}

static struct mirror_entry *me_add(struct mirror *m, const char *path)
{
	struct mirror_entry *e;

	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		struct mirror_entry *ne = realloc(m->e, cap * sizeof(*ne));

		if (!ne)
			return NULL;
		m->e = ne;
		m->cap = cap;
	}
	if ((m->n + 1) * 2 > m->nslot && rehash(m, m->nslot ? m->nslot * 2 : 512) < 0)
		return NULL;
	e = &m->e[m->n];
	memset(e, 0, sizeof(*e));
	e->path = strdup(path);
	if (!e->path)
		return NULL;
	m->n++;
	{
		size_t h = hash_path(path) & (m->nslot - 1);

		while (m->slot[h])
			h = (h + 1) & (m->nslot - 1);
		m->slot[h] = m->n;
	}
	return e;
}

static void me_clear(struct mirror *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].path);
		free(m->e[i].detail);
	}
	m->n = 0;
	if (m->slot)
		memset(m->slot, 0, m->nslot * sizeof(*m->slot));
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(
		((const struct mirror_entry *)a)->path, ((const struct mirror_entry *)b)->path);
}

/* ---- setup ---- */

int mirror_init(struct mirror *m, const struct paths *p, const struct user_info *owner,
	const struct user_info *agent, const struct mirror_spec *spec)
{
	struct buf fp = {0};
	char name[80];
	size_t h;
	int r = 0;

	memset(m, 0, sizeof(*m));
	snprintf(name, sizeof(name), "%s.status", agent->name);
	if (path_join(m->base, sizeof(m->base), p->varlib, "ocsb/mirror") < 0 ||
		path_join(m->dir, sizeof(m->dir), m->base, agent->name) < 0 ||
		path_join(m->tree, sizeof(m->tree), m->dir, "tree") < 0 ||
		path_join(m->status, sizeof(m->status), m->base, name) < 0 ||
		snprintf(m->home, sizeof(m->home), "%s", owner->home) >= (int)sizeof(m->home) ||
		snprintf(m->agent_home, sizeof(m->agent_home), "%s", agent->home) >=
			(int)sizeof(m->agent_home))
		return -ENAMETOOLONG;
	snprintf(m->owner, sizeof(m->owner), "%s", owner->name);
	snprintf(m->agent, sizeof(m->agent), "%s", agent->name);
	m->owner_uid = owner->uid;
	m->owner_gid = owner->gid;
	m->agent_uid = agent->uid;
	m->agent_gid = agent->gid;
	m->spec = spec;
	m->drop = geteuid() == 0;
	m->dmode = m->drop ? 0555 : 0755;
	m->by = "ocsb";
	/* Anything that changes what a file becomes invalidates the manifest. */
	for (size_t i = 0; i < spec->paths.n; i++)
		r |= buf_printf(&fp, "m %s\n", spec->paths.v[i]);
	for (size_t i = 0; i < spec->writable.n; i++)
		r |= buf_printf(&fp, "w %s\n", spec->writable.v[i]);
	for (size_t i = 0; i < spec->noscan.n; i++)
		r |= buf_printf(&fp, "n %s\n", spec->noscan.v[i]);
	r |= buf_printf(&fp, "home %s limits %u %u\n", owner->home, (unsigned)MIRROR_MAX_FILE,
		MIRROR_MAX_TOTAL);
	if (r) {
		buf_free(&fp);
		return -ENOMEM;
	}
	h = hash_path(fp.data);
	snprintf(m->fingerprint, sizeof(m->fingerprint), "%016zx-%zu", h, fp.len);
	buf_free(&fp);
	return 0;
}

void mirror_free(struct mirror *m)
{
	me_clear(m);
	free(m->e);
	free(m->slot);
	strv_free(&m->changes);
	strv_free(&m->notices);
	m->e = NULL;
	m->slot = NULL;
	m->cap = m->nslot = 0;
}

/* ---- status file: the manifest and the report in one, for root and the owner ---- */

/*
 * The tree is written without fsync. After a crash a file of the tree may be empty or
 * old while the status file (written with fsync) says it is current: a manifest from
 * another boot is not trusted, every file is read again and compared with the tree.
 */
static void boot_id(char *ret, size_t n)
{
	char *d = NULL;
	size_t len = 0;

	snprintf(ret, n, "unknown");
	if (fo_read("/proc/sys/kernel/random/boot_id", 64, &d, &len) == 0) {
		while (len && (d[len - 1] == '\n' || d[len - 1] == ' '))
			len--;
		snprintf(ret, n, "%.*s", (int)len, d);
	}
	free(d);
}

static void unescape(const char *s, struct buf *out)
{
	for (; *s; s++) {
		char c = *s;

		if (c == '\\' && s[1]) {
			s++;
			if (*s == 'n')
				c = '\n';
			else if (*s == 't')
				c = '\t';
			else if (*s == 'x' && s[1] && s[2]) {
				char hex[3] = {s[1], s[2], 0};
				c = (char)strtoul(hex, NULL, 16);
				s += 2;
			} else
				c = *s;
		}
		buf_append(out, &c, 1);
	}
	if (!out->data)
		buf_puts(out, "");
}

static int render_status(struct mirror *m, const char *by, struct buf *b)
{
	time_t now = time(NULL);
	char boot[64];
	struct tm tm;
	int r = 0;

	gmtime_r(&now, &tm);
	strftime(m->last_built, sizeof(m->last_built), "%Y-%m-%dT%H:%M:%SZ", &tm);
	qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
	rehash(m, m->nslot ? m->nslot : 512);
	boot_id(boot, sizeof(boot));
	r |= buf_printf(b,
		"%s\n# Written by %s; read by 'ocsb mirror status'. Do not edit.\n"
		"fingerprint %s\nbuilt %s\nscanned %lld\nboot %s\nby %s\nowner %s\nagent %s\n"
		"tree %s\n",
		STATUS_MAGIC, by, m->fingerprint, m->last_built, (long long)m->scan_ns, boot, by,
		m->owner, m->agent, m->tree);
	for (size_t i = 0; i < m->n; i++) {
		const struct mirror_entry *e = &m->e[i];

		r |= buf_printf(b, "E\t%c\t%u\t%o\t%llu\t%llu\t%lld\t%lld\t", e->kind, e->state,
			e->mode, (unsigned long long)e->size, (unsigned long long)e->ino,
			(long long)e->mtime_ns, (long long)e->ctime_ns);
		mirror_escape(e->path, b);
		r |= buf_puts(b, "\t");
		if (e->detail)
			mirror_escape(e->detail, b);
		r |= buf_puts(b, "\n");
	}
	return r ? -ENOMEM : 0;
}

/* Parse one "E" line into a new manifest entry. */
static int parse_entry(struct mirror *m, char *line)
{
	char *f[10];
	int n = 0;
	struct buf path = {0}, det = {0};
	struct mirror_entry *e;

	for (char *s = line; n < 10; n++) {
		f[n] = s;
		s = strchr(s, '\t');
		if (!s) {
			n++;
			break;
		}
		*s++ = '\0';
	}
	if (n != 10 || strlen(f[1]) != 1)
		return -EINVAL;
	unescape(f[8], &path);
	unescape(f[9], &det);
	if (me_find(m, path.data)) {
		buf_free(&path);
		buf_free(&det);
		return -EINVAL;
	}
	e = me_add(m, path.data);
	buf_free(&path);
	if (!e) {
		buf_free(&det);
		return -ENOMEM;
	}
	e->kind = f[1][0];
	e->state = (unsigned char)strtoul(f[2], NULL, 10);
	e->mode = (uint32_t)strtoul(f[3], NULL, 8);
	e->size = strtoull(f[4], NULL, 10);
	e->ino = strtoull(f[5], NULL, 10);
	e->mtime_ns = strtoll(f[6], NULL, 10);
	e->ctime_ns = strtoll(f[7], NULL, 10);
	e->detail = det.len ? det.data : NULL;
	if (!det.len)
		buf_free(&det);
	return 0;
}

/* Read a status file; fills the manifest when `m`, else just validates. */
static int load_status(struct mirror *m, const char *path, char **ret_fp, char **ret_boot)
{
	char *data = NULL, *line, *save = NULL;
	size_t len;
	int r, first = 1;

	r = fo_read(path, 256u * 1024 * 1024, &data, &len);
	if (r < 0)
		return r;
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (first) {
			first = 0;
			if (strcmp(line, STATUS_MAGIC) != 0) {
				r = -EINVAL;
				break;
			}
			continue;
		}
		if (!strncmp(line, "fingerprint ", 12) && ret_fp)
			*ret_fp = strdup(line + 12);
		else if (!strncmp(line, "boot ", 5) && ret_boot)
			*ret_boot = strdup(line + 5);
		else if (!strncmp(line, "built ", 6) && m)
			snprintf(m->last_built, sizeof(m->last_built), "%s", line + 6);
		else if (!strncmp(line, "scanned ", 8) && m) {
			m->scan_ns = strtoll(line + 8, NULL, 10);
			m->scan_saved = 1;
		} else if (!strncmp(line, "E\t", 2) && m && (r = parse_entry(m, line)) < 0)
			break;
	}
	free(data);
	return r;
}

int mirror_load(struct mirror *m)
{
	char *fp = NULL, *boot = NULL, now[64];
	int r;

	me_clear(m);
	m->scan_ns = 0;
	m->scan_saved = 0;
	r = load_status(m, m->status, &fp, &boot);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		log_warn("%s: %s: rebuilding the mirror from scratch", m->status, strerror(-r));
		me_clear(m);
		m->scan_ns = 0;
		free(fp);
		free(boot);
		return 0;
	}
	/* Other paths or options, or another boot: every file must be read again. */
	boot_id(now, sizeof(now));
	if (!fp || strcmp(fp, m->fingerprint) != 0 || !boot || strcmp(boot, now) != 0) {
		me_clear(m);
		m->scan_ns = 0;
	}
	free(fp);
	free(boot);
	return 0;
}

/* ---- the owner's side: walk, scan, stream (runs in a child with the owner's rights) ---- */

struct rec {
	/*
	 * 'd' 'f' 'l' 'g', '-' (nothing: skipped/withheld), 'u' unchanged, 'E' end;
	 * 'U': a directory unchanged, its unchanged entries (not directories) left out.
	 */
	char kind;
	unsigned char state;
	uint32_t mode;
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
	const char *path;
	uint32_t pathlen;
	const char *detail;
	uint32_t detaillen;
	const char *data;
	uint32_t datalen;
};

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
		e = me_find(m, path);
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

static void scan_file(struct scan *s, int dfd, const char *name, const char *path,
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

static void walk(struct scan *s, int dfd, const char *path, const char *root, int depth);

static void scan_entry(struct scan *s, int dfd, const char *name, const char *path,
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
		walk(s, sub, path, root, depth + 1);
		close(sub);
	} else if (S_ISREG(st.st_mode)) {
		scan_file(s, dfd, name, path, &st, quiet);
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

static void walk(struct scan *s, int dfd, const char *path, const char *root, int depth)
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
		scan_entry(s, dfd, names.v[i], sub, root, depth, quiet);
		free(sub);
	}
	strv_free(&names);
}

static void scan_gitconfig(struct scan *s)
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
static int scan_child(void *arg, int outfd)
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
			scan_gitconfig(&s);
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
			walk(&s, fd, root, root, 0);
		} else if (S_ISREG(st.st_mode)) {
			char *slash = strrchr(root, '/');
			char dir[PATH_MAX];
			int dfd;

			snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - root) : 1,
				slash ? root : ".");
			dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (dfd >= 0) {
				scan_file(&s, dfd, slash ? slash + 1 : root, root, &st, 0);
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

/* ---- root's side: apply the stream to the tree ---- */

struct apply {
	struct mirror *m;
	int dry;
	int treefd;
	int pfd; /* cached parent directory */
	char ppath[PATH_MAX];
	unsigned tmpseq;
	long pid; /* for temporary names */
	uid_t euid;
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

/* Remove whatever is at `path` in the tree (file, link or whole directory). */
static int remove_path(struct apply *a, const char *path)
{
	const char *name;
	char full[PATH_MAX * 2];
	int pfd, r = 0;

	if (a->dry)
		return 0;
	pfd = parent_fd(a, path, &name);
	if (pfd == -ENOENT || pfd == -ENOTDIR)
		return 0;
	if (pfd < 0)
		return pfd;
	if (unlinkat(pfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (unlinkat(pfd, name, AT_REMOVEDIR) == 0)
		return 0;
	snprintf(full, sizeof(full), "%s/%s", a->m->tree, path);
	forget_parent(a);
	r = fo_rmtree(full);
	return r;
}

static int same_file(struct apply *a, int pfd, const char *name, const char *data, size_t len)
{
	return fo_same_at(pfd, name, data, len, 0444, a->euid, (gid_t)-1) == 1;
}

static int write_file(struct apply *a, const char *path, const char *data, size_t len)
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

static int write_link(struct apply *a, const char *path, const char *target)
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

static int make_dir(struct apply *a, const char *path)
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
static int path_valid(const struct mirror *m, const char *path, size_t len)
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

static int get(const char **p, const char *end, void *dst, size_t n)
{
	if ((size_t)(end - *p) < n)
		return -1;
	memcpy(dst, *p, n);
	*p += n;
	return 0;
}

/* One record; -EPROTO for anything malformed (a broken or hostile child). */
static int next_rec(const char **p, const char *end, struct rec *r)
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

static int on_disk(const struct mirror_entry *e)
{
	return e->kind == 'd' || e->kind == 'f' || e->kind == 'l' || e->kind == 'g';
}

static int apply_rec(struct apply *a, const struct rec *r)
{
	struct mirror *m = a->m;
	char path[8193], *detail = NULL;
	struct mirror_entry *e;
	int rc = 0;

	memcpy(path, r->path, r->pathlen);
	path[r->pathlen] = '\0';
	if (!path_valid(m, path, r->pathlen) || !strchr("dflg-uU", r->kind) || r->kind == '\0' ||
		r->state > MS_SKIPPED || (r->kind == 'l' && memchr(r->data, '\0', r->datalen)))
		return -EPROTO;
	e = me_find(m, path);
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
	if (e && on_disk(e) && (e->kind != r->kind || r->kind == '-')) {
		rc = remove_path(a, path);
		a->st->removed++;
		note_change(m, "remove", path);
	}
	if (rc == 0) {
		if (r->kind == 'd') {
			rc = make_dir(a, path);
		} else if (r->kind == 'f' || r->kind == 'g') {
			rc = write_file(a, path, r->data, r->datalen);
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
			rc = write_link(a, path, target);
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
	if (r->detaillen) {
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
	if (!e && !(e = me_add(m, path))) {
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
			parent = me_find(m, dir);
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
static int apply_deletions(struct apply *a)
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
		if (on_disk(&m->e[i]))
			strv_push(&gone, m->e[i].path);
	}
	if (gone.n)
		qsort(gone.v, gone.n, sizeof(*gone.v), cmp_desc);
	for (size_t i = 0; i < gone.n; i++) {
		int rc = remove_path(a, gone.v[i]);

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
		rehash(m, m->nslot);
	}
	return r;
}

/* base 0755 root, dir 0750 root:<agent group>, tree 0555 root. */
static int open_tree(struct mirror *m, int dry)
{
	uid_t root = m->drop ? 0 : (uid_t)-1;
	struct stat st;
	int fd;

	if (dry) {
		fd = fo_open_dir(AT_FDCWD, m->tree);
		return fd == -ENOENT ? -ENOENT : fd;
	}
	fd = fo_mkdir_p(AT_FDCWD, m->base, 0755, root, root);
	if (fd >= 0)
		close(fd);
	fd = fd < 0 ? fd
		    : fo_mkdir_p(AT_FDCWD, m->dir, 0750, root, m->drop ? m->agent_gid : (gid_t)-1);
	if (fd < 0) {
		log_err("mirror: %s: %s", m->dir, strerror(-fd));
		return fd;
	}
	/* Only the agent (and root) may see the owner's configs. */
	if (fstat(fd, &st) < 0 ||
		(m->drop && (st.st_uid != 0 || st.st_gid != m->agent_gid) &&
			fchown(fd, 0, m->agent_gid) < 0) ||
		((st.st_mode & 07777) != 0750 && fchmod(fd, 0750) < 0)) {
		log_err("mirror: %s: cannot set owner and mode: %s", m->dir, strerror(errno));
		close(fd);
		return -EPERM;
	}
	close(fd);
	fd = fo_mkdir_p(AT_FDCWD, m->tree, m->dmode, root, root);
	if (fd < 0) {
		log_err("mirror: %s: %s", m->tree, strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & 07777) != m->dmode)
		fchmod(fd, m->dmode);
	return fd;
}

int mirror_refresh(struct mirror *m, int dry, struct mirror_stats *ret)
{
	struct spawn_opts o = {.drop = m->drop,
		.uid = m->owner_uid,
		.gid = m->owner_gid,
		.user = m->drop ? m->owner : NULL,
		.cwd = m->home,
		.timeout_ms = 60000,
		.max_output = MIRROR_MAX_TOTAL + 32u * 1024 * 1024};
	struct apply a = {.m = m, .dry = dry, .pfd = -1, .pid = (long)getpid(), .euid = geteuid()};
	struct mirror_stats st = {0};
	struct timespec now;
	int64_t scan_ns = 0;
	mode_t old_umask;
	struct spawn_result res;
	const char *p, *end;
	long t0 = mono_ms();
	char how[64];
	int r, ended = 0, fresh;
	struct stat sb;

	a.st = &st;
	strv_free(&m->changes);
	strv_free(&m->notices);
	a.treefd = open_tree(m, dry);
	if (a.treefd < 0 && !(dry && a.treefd == -ENOENT))
		return -1;
	fresh = stat(m->status, &sb) < 0;
	for (size_t i = 0; i < m->n; i++)
		m->e[i].seen = m->e[i].quiet = 0;
	/* Before the reader's first stat: every entry it checks is checked after this. */
	if (clock_gettime(CLOCK_REALTIME, &now) == 0)
		scan_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
	r = spawn_fn(m->reader ? m->reader : scan_child, m, &o, &res);
	if (r < 0) {
		log_err("mirror: cannot start the reader as %s: %s", m->owner, strerror(-r));
		goto out;
	}
	if (res.status != 0 || res.timed_out) {
		log_err("mirror: the reader running as %s failed (%s): nothing changed", m->owner,
			spawn_describe(&res, how, sizeof(how)));
		r = -EIO;
		goto out_res;
	}
	/* The roots' parents (".config" for ".config/opencode") belong to the tree. */
	for (size_t i = 0; i < m->spec->paths.n && a.treefd >= 0 && !dry; i++) {
		char parent[PATH_MAX];
		const char *slash = strrchr(m->spec->paths.v[i], '/');
		int fd;

		if (!slash)
			continue;
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - m->spec->paths.v[i]),
			m->spec->paths.v[i]);
		fd = fo_mkdir_p(a.treefd, parent, m->dmode, m->drop ? 0 : (uid_t)-1,
			m->drop ? 0 : (gid_t)-1);
		if (fd >= 0)
			close(fd);
	}
	p = res.output;
	end = res.output + res.output_len;
	/* Modes are given at each creation (0444 files): no fchmod per file. */
	old_umask = umask(0);
	while (p < end) {
		struct rec rec;

		if (next_rec(&p, end, &rec) < 0) {
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
		r = apply_rec(&a, &rec);
		if (r < 0)
			break;
	}
	umask(old_umask);
	if (r == 0 && !ended)
		r = -EPROTO;
	if (r == -EPROTO)
		log_err("mirror: malformed or truncated answer from the reader (%zu bytes): "
			"nothing removed",
			res.output_len);
	if (r == 0)
		r = apply_deletions(&a);
	st.entries = (unsigned)m->n;
	if (r == 0 && !dry)
		m->scan_ns = scan_ns;
	/* Skips and withheld files change nothing in the tree, but the report must say so. */
	if (r == 0 && !dry &&
		(st.written || st.removed || fresh || a.dropped || a.dirty || m->notices.n ||
			!m->scan_saved)) {
		struct buf b = {0};

		if (render_status(m, m->by, &b) < 0)
			r = -ENOMEM;
		else
			r = fo_write(m->status, b.data, b.len, 0640, m->drop ? 0 : (uid_t)-1,
				m->drop ? m->owner_gid : (gid_t)-1);
		if (r == 0)
			m->scan_saved = 1;
		if (r < 0)
			log_err("mirror: %s: %s", m->status, strerror(-r));
		buf_free(&b);
	}
out_res:
	spawn_result_free(&res);
out:
	forget_parent(&a);
	if (a.treefd >= 0)
		close(a.treefd);
	st.ms = mono_ms() - t0;
	if (ret)
		*ret = st;
	return r < 0 ? -1 : 0;
}

/* ---- the agent's side: links in its home (a child running as the agent) ---- */

struct linkjob {
	struct mirror *m;
	int dry;
	int remove;
};

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0) {
		/* the parent is gone; nothing to do */
	}
}

static int is_writable(const struct mirror *m, const char *rel)
{
	return strv_contains(&m->spec->writable, rel);
}

/* Copy the tree entry src (fd-relative) into the agent's dst, as the agent. */
static int copy_tree(int sfd, const char *sname, int dfd, const char *dname, int depth)
{
	struct stat st;
	int r = 0;

	if (depth > MIRROR_MAX_DEPTH || fstatat(sfd, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -ELOOP;
	if (S_ISLNK(st.st_mode)) {
		char t[4096];
		ssize_t n = readlinkat(sfd, sname, t, sizeof(t) - 1);

		if (n < 0)
			return -errno;
		t[n] = '\0';
		return symlinkat(t, dfd, dname) < 0 ? -errno : 0;
	}
	if (S_ISREG(st.st_mode)) {
		char *data = NULL;
		size_t len = 0;

		r = fo_read_at(sfd, sname, MIRROR_MAX_FILE + 65536, &data, &len);
		if (r == 0)
			r = fo_write_at(dfd, dname, data, len, 0600, (uid_t)-1, (gid_t)-1);
		free(data);
		return r;
	}
	if (S_ISDIR(st.st_mode)) {
		int s2, d2, fd2;
		DIR *d;
		struct dirent *de;

		if (mkdirat(dfd, dname, 0700) < 0 && errno != EEXIST)
			return -errno;
		s2 = openat(sfd, sname, DIR_FLAGS);
		d2 = openat(dfd, dname, DIR_FLAGS);
		if (s2 < 0 || d2 < 0) {
			r = -errno;
			goto out;
		}
		fd2 = dup(s2);
		d = fd2 >= 0 ? fdopendir(fd2) : NULL;
		if (!d) {
			r = -errno;
			goto out;
		}
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
				copy_tree(s2, de->d_name, d2, de->d_name, depth + 1) < 0)
				r = -EIO;
		closedir(d);
	out:
		if (s2 >= 0)
			close(s2);
		if (d2 >= 0)
			close(d2);
		return r;
	}
	return 0;
}

static const char writable_note[] =
	"This is the agent's own writable copy of the owner's configuration, made by\n"
	"ocsb-provision (mirror-writable). Changes stay here and are not copied back;\n"
	"the owner's later changes are not applied. Delete this folder and run\n"
	"'sudo ocsb-provision' for a fresh copy.\n";

/*
 * ~/.gitconfig is the agent's own file (git writes it for `git config --global`, and
 * would follow a link into the read-only tree and fail): it includes the mirrored subset.
 */
static void gitconfig_render(const struct mirror *m, struct buf *b)
{
	buf_printf(b,
		"# Written by ocsb-provision for %s. The owner's name, email, aliases and editor\n"
		"# come from the read-only mirror below; settings of your own (git config\n"
		"# --global) are added after it and win.\n"
		"[include]\n\tpath = %s/%s\n",
		m->agent, m->tree, MIRROR_GITCONFIG);
}

static int link_gitconfig(struct linkjob *j, int out, int pfd, int have, const struct stat *st,
	const char *cur, ssize_t n)
{
	struct buf want = {0}, inc = {0};
	char *data = NULL;
	size_t len = 0;
	int ours = 0;

	gitconfig_render(j->m, &want);
	buf_printf(&inc, "path = %s/%s", j->m->tree, MIRROR_GITCONFIG);
	if (have && S_ISREG(st->st_mode) &&
		fo_read_at(pfd, MIRROR_GITCONFIG, 1024 * 1024, &data, &len) == 0) {
		ours = len == want.len && !memcmp(data, want.data, len);
		if (!ours && !memmem(data, len, inc.data, inc.len) && !j->remove)
			say(out,
				"! ~/.gitconfig is the agent's own and does not include the "
				"mirror: add "
				"'[include] %s' to it",
				inc.data);
	}
	if (j->remove) {
		if (ours || (n >= 0 && mirror_path_under(cur, j->m->tree))) {
			say(out, "remove ~/.gitconfig (the include of the mirror)");
			if (!j->dry)
				unlinkat(pfd, MIRROR_GITCONFIG, 0);
		}
	} else if (!have || (n >= 0 && mirror_path_under(cur, j->m->tree))) {
		/* Missing, or a link of an earlier version into the tree: the agent's file. */
		say(out, "write ~/.gitconfig (includes the owner's git identity from the mirror)");
		if (!j->dry &&
			fo_write_at(pfd, MIRROR_GITCONFIG, want.data, want.len, 0600, (uid_t)-1,
				(gid_t)-1) < 0)
			say(out, "! ~/.gitconfig: %s", strerror(errno));
	} else if (n >= 0) {
		say(out, "! ~/.gitconfig is a link of the agent's: left alone");
	}
	free(data);
	buf_free(&want);
	buf_free(&inc);
	return 0;
}

static int link_one(struct linkjob *j, int out, const char *rel)
{
	struct mirror *m = j->m;
	char target[PATH_MAX * 2], cur[PATH_MAX * 2], name[256], tmp[64], pdir[PATH_MAX];
	const char *slash = strrchr(rel, '/');
	struct stat st;
	ssize_t n;
	int pfd, have;

	snprintf(target, sizeof(target), "%s/%s", m->tree, rel);
	snprintf(name, sizeof(name), "%s", slash ? slash + 1 : rel);
	snprintf(pdir, sizeof(pdir), "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".");
	/* The agent's own directories: created 0700 by the agent, never through a link. */
	pfd = j->dry || j->remove ? fo_open_dir(AT_FDCWD, pdir)
				  : fo_mkdir_p(AT_FDCWD, pdir, 0700, (uid_t)-1, (gid_t)-1);
	if (pfd < 0) {
		if (!(j->dry || j->remove) || pfd != -ENOENT)
			say(out, "! ~/%s: %s: not linked", rel, strerror(-pfd));
		else if (!j->remove)
			say(out, "link ~/%s -> %s", rel, target);
		return 0;
	}
	have = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	n = have && S_ISLNK(st.st_mode) ? readlinkat(pfd, name, cur, sizeof(cur) - 1) : -1;
	if (n >= 0)
		cur[n] = '\0';
	if (!strcmp(rel, MIRROR_GITCONFIG) && !is_writable(m, rel)) {
		link_gitconfig(j, out, pfd, have, &st, cur, n);
		close(pfd);
		return 0;
	}
	if (j->remove) {
		/* Only our own links; a writable copy is the agent's data and stays. */
		if (n >= 0 && mirror_path_under(cur, m->tree)) {
			say(out, "remove link ~/%s", rel);
			if (!j->dry)
				unlinkat(pfd, name, 0);
		}
		close(pfd);
		return 0;
	}
	if (is_writable(m, rel)) {
		int tfd;

		/* A copy made earlier, or the agent's own file: the agent's data, left alone. */
		if (have && !(n >= 0 && mirror_path_under(cur, m->tree))) {
			close(pfd);
			return 0;
		}
		say(out, "copy %s to ~/%s (writable, the agent's own)", target, rel);
		if (j->dry) {
			close(pfd);
			return 0;
		}
		tfd = fo_open_dir(AT_FDCWD, m->tree);
		snprintf(tmp, sizeof(tmp), ".ocsb-copy.%ld", (long)getpid());
		if (tfd < 0 || copy_tree(tfd, rel, pfd, tmp, 0) < 0) {
			say(out, "! ~/%s: copy failed", rel);
		} else {
			int cfd = openat(pfd, tmp, DIR_FLAGS);

			if (cfd >= 0) {
				fo_write_at(cfd, MIRROR_WRITABLE_MARK, writable_note,
					sizeof(writable_note) - 1, 0600, (uid_t)-1, (gid_t)-1);
				close(cfd);
			}
			/* Our link makes way (a directory cannot be renamed over a link). */
			if (n >= 0)
				unlinkat(pfd, name, 0);
			if (renameat(pfd, tmp, pfd, name) < 0)
				say(out, "! ~/%s: %s", rel, strerror(errno));
		}
		if (tfd >= 0)
			close(tfd);
		close(pfd);
		return 0;
	}
	if (n >= 0 && !strcmp(cur, target)) {
		close(pfd);
		return 0;
	}
	if (have && n < 0) {
		say(out,
			"! ~/%s exists and is not ocsb's link: left alone (remove it to get the "
			"mirror)",
			rel);
		close(pfd);
		return 0;
	}
	say(out, "link ~/%s -> %s", rel, target);
	if (!j->dry) {
		/* A link of the agent's (to /etc, anywhere) is replaced, never followed. */
		snprintf(tmp, sizeof(tmp), ".ocsb-link.%ld", (long)getpid());
		unlinkat(pfd, tmp, 0);
		if (symlinkat(target, pfd, tmp) < 0 || renameat(pfd, tmp, pfd, name) < 0) {
			say(out, "! ~/%s: %s", rel, strerror(errno));
			unlinkat(pfd, tmp, 0);
		}
	}
	close(pfd);
	return 0;
}

/* A directory mirror_reserve made for a source the owner does not have (yet). */
static int reserved(const struct mirror *m, const char *rel)
{
	char path[PATH_MAX * 2];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", m->tree, rel);
	return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int link_child(void *arg, int out)
{
	struct linkjob *j = arg;
	const struct mirror *m = j->m;

	umask(077);
	for (size_t i = 0; i < m->spec->paths.n; i++) {
		const char *rel = m->spec->paths.v[i];
		const struct mirror_entry *e = me_find(m, rel);

		/* Only what the tree holds (or reserves): no dangling links. */
		if (!j->remove && (!e || !on_disk(e)) && !reserved(m, rel))
			continue;
		link_one(j, out, rel);
	}
	return 0;
}

int mirror_reserve(struct mirror *m, int dry, struct strv *changes)
{
	uid_t root = m->drop ? 0 : (uid_t)-1;

	for (size_t i = 0; i < m->spec->paths.n; i++) {
		const char *rel = m->spec->paths.v[i];
		const struct mirror_entry *e = me_find(m, rel);
		char line[PATH_MAX + 128];
		int fd;

		if ((e && on_disk(e)) || !strcmp(rel, MIRROR_GITCONFIG) || is_writable(m, rel) ||
			reserved(m, rel))
			continue;
		snprintf(line, sizeof(line),
			"reserve ~/%s: an empty mirror directory until %s has one", rel, m->owner);
		if (strv_push(changes, line) < 0)
			return -1;
		if (dry)
			continue;
		/* Root's own tree, walked without following links. */
		fd = fo_mkdir_p(AT_FDCWD, m->tree, m->dmode, root, root);
		if (fd >= 0) {
			int d = fo_mkdir_p(fd, rel, m->dmode, root, root);

			close(fd);
			fd = d;
		}
		if (fd < 0) {
			log_err("mirror: %s/%s: %s", m->tree, rel, strerror(-fd));
			return -1;
		}
		close(fd);
	}
	return 0;
}

static int run_as_agent(struct mirror *m, int dry, int remove, struct strv *changes)
{
	struct spawn_opts o = {.drop = m->drop,
		.uid = m->agent_uid,
		.gid = m->agent_gid,
		.user = m->drop ? m->agent : NULL,
		.cwd = m->agent_home,
		.timeout_ms = 60000};
	struct linkjob j = {.m = m, .dry = dry, .remove = remove};
	struct spawn_result res;
	char how[64];
	int r;

	r = spawn_fn(link_child, &j, &o, &res);
	if (r < 0) {
		log_err("mirror: cannot run as %s in %s: %s", m->agent, m->agent_home,
			strerror(-r));
		return -1;
	}
	if (res.status != 0) {
		log_err("mirror: linking as %s failed (%s)", m->agent,
			spawn_describe(&res, how, sizeof(how)));
		spawn_result_free(&res);
		return -1;
	}
	r = 0;
	for (char *save = NULL, *l = strtok_r(res.output, "\n", &save); l;
		l = strtok_r(NULL, "\n", &save)) {
		if (l[0] == '!') {
			log_warn("mirror: %s", l + 2);
			/* --check and --dry-run count a place that is not linked as a difference. */
			if (dry)
				strv_push(changes, l + 2);
			continue;
		}
		strv_push(changes, l);
	}
	spawn_result_free(&res);
	return r;
}

int mirror_link(struct mirror *m, int dry, struct strv *changes)
{
	return run_as_agent(m, dry, 0, changes);
}

int mirror_unlink(struct mirror *m, int dry, struct strv *changes)
{
	return run_as_agent(m, dry, 1, changes);
}

int mirror_remove(struct mirror *m)
{
	int r = fo_rmtree(m->dir), r2 = fo_unlink(m->status);

	if (r < 0)
		log_err("mirror: remove %s: %s", m->dir, strerror(-r));
	if (r2 < 0)
		log_err("mirror: remove %s: %s", m->status, strerror(-r2));
	/* The shared parent goes when no other agent's mirror lives there. */
	rmdir(m->base);
	return r < 0 || r2 < 0 ? -1 : 0;
}

int mirror_watch_dirs(const struct mirror *m, struct strv *ret_ancestors, struct strv *ret_dirs)
{
	char path[PATH_MAX * 2];

	strv_push(ret_ancestors, m->home);
	for (size_t i = 0; i < m->spec->paths.n; i++) {
		const char *rel = m->spec->paths.v[i];

		for (const char *s = strchr(rel, '/'); s; s = strchr(s + 1, '/')) {
			snprintf(path, sizeof(path), "%s/%.*s", m->home, (int)(s - rel), rel);
			if (!strv_contains(ret_ancestors, path))
				strv_push(ret_ancestors, path);
		}
	}
	for (size_t i = 0; i < m->n; i++)
		if (m->e[i].kind == 'd') {
			snprintf(path, sizeof(path), "%s/%s", m->home, m->e[i].path);
			strv_push(ret_dirs, path);
		}
	return 0;
}

/* ---- ocsb mirror status ---- */

static void json_str(FILE *f, const char *s)
{
	json_fput_str(f, s);
}

static const char *state_word(const struct mirror_entry *e)
{
	if (e->state == MS_WITHHELD)
		return "withheld";
	if (e->state == MS_REDACTED)
		return "redacted";
	if (e->state == MS_SKIPPED || e->kind == '-')
		return "skipped";
	return "mirrored";
}

int mirror_status_print(const char *status_path, int json, FILE *f)
{
	struct mirror m;
	char *fp = NULL;
	unsigned cnt[4] = {0};
	int r;

	memset(&m, 0, sizeof(m));
	r = load_status(&m, status_path, &fp, NULL);
	if (r < 0) {
		mirror_free(&m);
		return r;
	}
	for (size_t i = 0; i < m.n; i++) {
		const char *w = state_word(&m.e[i]);
		cnt[!strcmp(w, "mirrored")		 ? 0
				: !strcmp(w, "redacted") ? 1
				: !strcmp(w, "withheld") ? 2
							 : 3]++;
	}
	if (json) {
		fprintf(f, "{\"built\":");
		json_str(f, m.last_built);
		fprintf(f,
			",\"mirrored\":%u,\"redacted\":%u,\"withheld\":%u,\"skipped\":%u,"
			"\"entries\":[",
			cnt[0], cnt[1], cnt[2], cnt[3]);
		for (size_t i = 0; i < m.n; i++) {
			const struct mirror_entry *e = &m.e[i];
			char k[2] = {e->kind, 0};

			fprintf(f, "%s{\"path\":", i ? "," : "");
			json_str(f, e->path);
			fprintf(f, ",\"kind\":");
			json_str(f, e->kind == '-' ? "" : k);
			fprintf(f, ",\"state\":\"%s\",\"size\":%llu,\"detail\":", state_word(e),
				(unsigned long long)e->size);
			json_str(f, e->detail ? e->detail : "");
			fprintf(f, "}");
		}
		fprintf(f, "]}\n");
	} else {
		fprintf(f, "built %s: %u mirrored, %u redacted, %u withheld, %u skipped\n",
			m.last_built[0] ? m.last_built : "?", cnt[0], cnt[1], cnt[2], cnt[3]);
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < m.n; i++) {
				const struct mirror_entry *e = &m.e[i];
				const char *w = state_word(e);
				int plain = !strcmp(w, "mirrored") && !e->detail;
				struct buf b = {0};

				/* Problems first, then the plain list. */
				if ((pass == 0) == plain)
					continue;
				mirror_escape(e->path, &b);
				fprintf(f, "%-9s %s%s\n", w, b.data ? b.data : "",
					e->kind == 'd'		 ? "/"
						: e->kind == 'g' ? " (generated subset)"
								 : "");
				buf_free(&b);
				if (e->detail) {
					struct buf d = {0};
					char *save = NULL;

					buf_puts(&d, e->detail);
					for (char *l = strtok_r(d.data, "\n", &save); l;
						l = strtok_r(NULL, "\n", &save)) {
						struct buf x = {0};

						mirror_escape(l, &x);
						fprintf(f, "          %s\n", x.data ? x.data : "");
						buf_free(&x);
					}
					buf_free(&d);
				}
			}
	}
	free(fp);
	mirror_free(&m);
	return 0;
}
