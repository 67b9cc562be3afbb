/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the mirror's writer (mirror/mirror_priv.c, mirror_apply): the stream
 * the reader (`ocsb-agentd --mirror-read`, run as the owner, so possibly subverted) sends
 * the account that owns the tree, applied to a real tree in a temporary directory. Each
 * input gets a new tree: one stream is applied, the manifest is read back from the status
 * file it left (mirror_load, as the writer child does), and a second stream is applied on
 * top of it (unchanged entries, deletions, an entry changing kind).
 *
 * An input starting with "#text\n" is records, one a line: KIND STATE PATH [TAB DATA [TAB
 * DETAIL]] (KIND one of d f l g - u U E, STATE a digit; escapes \n \t \0 \\ \xHH; mode,
 * size, inode and times follow from the line), "---" between the two streams, an E record
 * added at each end unless "!noend" says not to. Any other input is the raw streams: two
 * bytes of the first one's length, the first stream, the second.
 * Properties, abort() when broken (a failed apply too must leave a safe tree):
 *   - the tree holds nothing but the configured roots, their parent directories, and what
 *     lies below a root; no temporary file is left behind;
 *   - every link in the tree, resolved as the kernel would (through the tree's own links),
 *     stays inside its root: it never climbs out of the tree, nor ends outside the root;
 *   - after a stream applied: each file of the manifest holds the last data the stream
 *     gave it, mode 0444; each link its target; each directory is one; a withheld or
 *     skipped entry is absent; the status file reads back to the same manifest.
 * When run as root, the writer runs with the euid of nobody (it refuses root, as the
 * programs do); the temporary tree is under $TMPDIR. fsync is a no-op here: durability is
 * not what is tested, and a disk flush per input would be most of the time spent. The
 * programs' ways of running the reader and the writer (spawn) are stubs (stub_spawn.c).
 * Build and run: `make fuzz FUZZ_ONLY=mirror_stream` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fileops.h"
#include "mirror_int.h"
#include "fuzz_util.h"

#define NOBODY 65534

int fsync(int fd);
int fsync(int fd)
{
	(void)fd;
	return 0;
}

static char tmpbase[PATH_MAX];
static struct mirror_spec spec;
static int run_as_root; /* started as root: the writer runs as nobody */

static void as_account(int on)
{
	if (run_as_root)
		CHECK(seteuid(on ? NOBODY : 0) == 0);
}

static void cleanup(void)
{
	if (tmpbase[0])
		fo_rmtree(tmpbase);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");

	fuzz_quiet(argc, argv);
	run_as_root = geteuid() == 0;
	snprintf(
		tmpbase, sizeof(tmpbase), "%s/ocsb-fuzz-mirror.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	CHECK(mkdtemp(tmpbase) != NULL);
	CHECK(chmod(tmpbase, 0755) == 0);
	if (run_as_root)
		CHECK(chown(tmpbase, NOBODY, NOBODY) == 0);
	atexit(cleanup);
	mirror_spec_defaults(&spec);
	strv_push(&spec.paths, ".local/share/x");
	return 0;
}

/* --- the input as records */

struct rec_in {
	char kind;
	unsigned char state;
	char *path, *data, *detail; /* owned */
	size_t plen, dlen, tlen;
};

struct stream {
	struct buf b;
	int end; /* an E record is added at the end */
};

static size_t unescape(const char *s, size_t n, char **out)
{
	char *o = malloc(n + 1);
	size_t k = 0;

	CHECK(o != NULL);
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '\\' && i + 1 < n) {
			c = s[++i];
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == '0')
				c = '\0';
			else if (c == 'x' && i + 2 < n) {
				char h[3] = {s[i + 1], s[i + 2], 0};

				c = (char)strtoul(h, NULL, 16);
				i += 2;
			}
		}
		o[k++] = c;
	}
	o[k] = '\0';
	*out = o;
	return k;
}

static void put_rec(struct buf *b, char kind, unsigned char state, uint32_t mode, uint64_t size,
	uint64_t ino, const char *path, uint32_t pl, const char *detail, uint32_t dl,
	const char *data, uint32_t tl)
{
	int64_t t = 1700000000000000000LL;

	buf_append(b, &kind, 1);
	buf_append(b, &state, 1);
	buf_append(b, &mode, 4);
	buf_append(b, &size, 8);
	buf_append(b, &ino, 8);
	buf_append(b, &t, 8);
	buf_append(b, &t, 8);
	buf_append(b, &pl, 4);
	buf_append(b, path, pl);
	buf_append(b, &dl, 4);
	buf_append(b, detail, dl);
	buf_append(b, &tl, 4);
	buf_append(b, data, tl);
}

static void text_line(struct stream *s, const char *l, size_t n)
{
	const char *t1, *t2;
	char *path, *data = NULL, *detail = NULL;
	size_t pl, tl = 0, dl = 0;
	uint32_t mode;
	uint64_t ino = 0;
	unsigned char state;

	if (n < 3 || l[2] != ' ')
		return;
	state = (unsigned char)(l[1] >= '0' && l[1] <= '9' ? l[1] - '0' : (unsigned char)l[1]);
	t1 = memchr(l + 3, '\t', n - 3);
	t2 = t1 ? memchr(t1 + 1, '\t', (size_t)(l + n - t1 - 1)) : NULL;
	pl = unescape(l + 3, (size_t)((t1 ? t1 : l + n) - (l + 3)), &path);
	if (t1)
		tl = unescape(t1 + 1, (size_t)((t2 ? t2 : l + n) - (t1 + 1)), &data);
	if (t2)
		dl = unescape(t2 + 1, (size_t)(l + n - t2 - 1), &detail);
	mode = l[0] == 'd' ? 040755 : l[0] == 'l' ? 0120777 : 0100644;
	for (size_t i = 0; i < pl; i++)
		ino = ino * 31 + (unsigned char)path[i];
	put_rec(&s->b, l[0], state, mode, tl, ino, path, (uint32_t)pl, detail ? detail : "",
		(uint32_t)dl, data ? data : "", (uint32_t)tl);
	free(path);
	free(data);
	free(detail);
}

static void parse_text(const uint8_t *data, size_t size, struct stream st[2])
{
	struct fuzz_in in = {data, size};
	size_t len;
	const char *l;
	int k = 0;

	st[0].end = st[1].end = 1;
	while ((l = fuzz_until(&in, '\n', &len))) {
		if (len == 3 && !memcmp(l, "---", 3)) {
			k = 1;
			continue;
		}
		if (len == 6 && !memcmp(l, "!noend", 6)) {
			st[k].end = 0;
			continue;
		}
		text_line(&st[k], l, len);
	}
	for (int i = 0; i < 2; i++)
		if (st[i].end)
			put_rec(&st[i].b, 'E', 0, 0, 0, 0, "", 0, "", 0, "", 0);
}

/* --- what the stream says, as the writer should apply it */

struct expect {
	char kind;
	char *path; /* owned */
	char *data; /* owned: a file's content, a link's target */
	size_t len;
};

struct expects {
	struct expect *v;
	size_t n;
};

static uint32_t get32(const char **p)
{
	uint32_t v;

	memcpy(&v, *p, 4);
	*p += 4;
	return v;
}

/* The records of a stream that applied (so it is well-formed), the last one per path. */
static void expected(const struct buf *b, struct expects *ex)
{
	const char *p = b->data, *end = b->data + b->len;

	while (p && p < end) {
		char kind = *p;
		uint32_t pl, dl, tl;
		const char *path, *data;
		size_t i;

		p += 1 + 1 + 4 + 8 + 8 + 8 + 8;
		pl = get32(&p);
		path = p;
		p += pl;
		dl = get32(&p);
		p += dl;
		tl = get32(&p);
		data = p;
		p += tl;
		if (kind == 'E')
			break;
		if (kind == 'u' || kind == 'U')
			continue;
		for (i = 0; i < ex->n; i++)
			if (strlen(ex->v[i].path) == pl && !memcmp(ex->v[i].path, path, pl))
				break;
		if (i == ex->n) {
			ex->v = realloc(ex->v, (ex->n + 1) * sizeof(*ex->v));
			CHECK(ex->v != NULL);
			ex->n++;
		} else {
			free(ex->v[i].path);
			free(ex->v[i].data);
		}
		ex->v[i].kind = kind;
		ex->v[i].path = fuzz_strndup(path, pl);
		ex->v[i].data = fuzz_strndup(data, tl);
		ex->v[i].len = tl;
	}
}

static void expects_free(struct expects *ex)
{
	for (size_t i = 0; i < ex->n; i++) {
		free(ex->v[i].path);
		free(ex->v[i].data);
	}
	free(ex->v);
	memset(ex, 0, sizeof(*ex));
}

/* --- the tree, as found on disk */

static const char *root_of(const char *rel)
{
	for (size_t i = 0; i < spec.paths.n; i++)
		if (mirror_path_under(rel, spec.paths.v[i]))
			return spec.paths.v[i];
	return NULL;
}

static int is_root_parent(const char *rel)
{
	size_t n = strlen(rel);

	for (size_t i = 0; i < spec.paths.n; i++)
		if (strlen(spec.paths.v[i]) > n && !strncmp(spec.paths.v[i], rel, n) &&
			spec.paths.v[i][n] == '/')
			return 1;
	return 0;
}

/* A position in the tree: its components from the tree's root. */
struct pos {
	char c[256][256];
	size_t depth;
};

static void pos_path(const struct pos *p, char *out, size_t n)
{
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < p->depth && o < n; i++)
		o += (size_t)snprintf(out + o, n - o, "%s%s", i ? "/" : "", p->c[i]);
}

/*
 * Walk target from p as the kernel would, through the tree's own links: -1 when it climbs
 * above the tree (or a link is absolute), 1 when the kernel would stop (a component missing
 * or not a directory, too many links), 0 with p where it ends.
 */
static int resolve(const char *tree, struct pos *p, const char *target, int hops)
{
	char *t = strdup(target), *save = NULL;
	int r = 0;

	CHECK(t != NULL);
	if (hops > 40 || target[0] == '/') {
		free(t);
		return hops > 40 ? 1 : -1;
	}
	for (char *c = strtok_r(t, "/", &save); c && r == 0; c = strtok_r(NULL, "/", &save)) {
		char cur[PATH_MAX], full[PATH_MAX * 2], link[4096];
		struct stat st;
		ssize_t n;

		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			if (!p->depth)
				r = -1; /* above the tree */
			else
				p->depth--;
			continue;
		}
		if (p->depth >= 256) {
			r = 1;
			break;
		}
		snprintf(p->c[p->depth++], sizeof(p->c[0]), "%s", c);
		pos_path(p, cur, sizeof(cur));
		snprintf(full, sizeof(full), "%s/%s", tree, cur);
		if (lstat(full, &st) < 0) {
			r = 1; /* missing: the kernel stops here */
			break;
		}
		if (!S_ISLNK(st.st_mode))
			continue;
		/* A link: its target from its own directory, then on from where it leads. */
		n = readlink(full, link, sizeof(link) - 1);
		CHECK(n >= 0);
		link[n] = '\0';
		p->depth--;
		r = resolve(tree, p, link, hops + 1);
	}
	free(t);
	return r;
}

/* The link at rel (below the tree, in root), resolved: it must not leave its root. */
static void check_link(const char *tree, const char *rel, const char *root)
{
	struct pos *p = calloc(1, sizeof(*p));
	char full[PATH_MAX * 2], target[4096], *dir, *save = NULL, end[PATH_MAX];
	size_t rl = strlen(root);
	ssize_t n;
	int r;

	CHECK(p != NULL);
	snprintf(full, sizeof(full), "%s/%s", tree, rel);
	n = readlink(full, target, sizeof(target) - 1);
	CHECK(n >= 0);
	target[n] = '\0';
	dir = strdup(rel);
	CHECK(dir != NULL);
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	else
		dir[0] = '\0';
	for (char *c = strtok_r(dir, "/", &save); c; c = strtok_r(NULL, "/", &save))
		snprintf(p->c[p->depth++], sizeof(p->c[0]), "%s", c);
	free(dir);
	r = resolve(tree, p, target, 0);
	if (r < 0 && fuzz_err)
		fprintf(fuzz_err, "link %s -> %s climbs out of the tree\n", rel, target);
	CHECK(r >= 0);
	if (r == 0) {
		pos_path(p, end, sizeof(end));
		if (strncmp(end, root, rl) != 0 || (end[rl] != '/' && end[rl] != '\0')) {
			if (fuzz_err)
				fprintf(fuzz_err, "link %s -> %s ends at %s, outside %s\n", rel,
					target, end, root);
			CHECK(!"a link leads out of its root");
		}
	}
	free(p);
}

/* Every entry below dir (rel: its path in the tree) against the rules. */
static void walk(const char *tree, const char *rel, int depth)
{
	char full[PATH_MAX * 2];
	struct dirent *de;
	DIR *d;

	snprintf(full, sizeof(full), "%s%s%s", tree, rel[0] ? "/" : "", rel);
	d = opendir(full);
	CHECK(d != NULL);
	while ((de = readdir(d)) != NULL) {
		char sub[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
		snprintf(full, sizeof(full), "%s/%s", tree, sub);
		CHECK(lstat(full, &st) == 0);
		CHECK(strncmp(de->d_name, ".ocsb-tmp.", 10) != 0);
		if (!root_of(sub)) {
			/* Outside every root: only a root's parent directory. */
			CHECK(is_root_parent(sub) && S_ISDIR(st.st_mode));
		} else if (S_ISLNK(st.st_mode)) {
			check_link(tree, sub, root_of(sub));
		}
		if (S_ISDIR(st.st_mode) && depth < 64)
			walk(tree, sub, depth + 1);
	}
	closedir(d);
}

static void check_applied(const struct mirror *m, const struct expects *ex)
{
	for (size_t i = 0; i < ex->n; i++) {
		const struct expect *e = &ex->v[i];
		const struct mirror_entry *me = mirror_entry_find(m, e->path);
		char full[PATH_MAX * 2], *got = NULL;
		struct stat st;
		size_t len;

		CHECK(me && me->kind == e->kind);
		snprintf(full, sizeof(full), "%s/%s", m->tree, e->path);
		if (e->kind == 'f' || e->kind == 'g') {
			CHECK(lstat(full, &st) == 0 && S_ISREG(st.st_mode));
			CHECK((st.st_mode & 07777) == 0444);
			CHECK(fo_read(full, MIRROR_MAX_FILE + 65536, &got, &len) == 0);
			CHECK(len == e->len && !memcmp(got, e->data, len));
			free(got);
		} else if (e->kind == 'l') {
			char t[4096];
			ssize_t n = readlink(full, t, sizeof(t) - 1);

			CHECK(n >= 0 && (size_t)n == e->len && !memcmp(t, e->data, (size_t)n));
		} else if (e->kind == 'd') {
			CHECK(lstat(full, &st) == 0 && S_ISDIR(st.st_mode));
		} else if (e->kind == '-') {
			CHECK(lstat(full, &st) < 0 && errno == ENOENT);
		}
	}
}

/* The manifest read back from the status file the writer left is the one it holds. */
static void check_status(const struct mirror *m)
{
	struct mirror m2 = *m;

	m2.e = NULL;
	m2.n = m2.cap = 0;
	m2.slot = NULL;
	m2.nslot = 0;
	memset(&m2.changes, 0, sizeof(m2.changes));
	memset(&m2.notices, 0, sizeof(m2.notices));
	CHECK(mirror_load(&m2) == 0);
	CHECK(m2.n == m->n);
	for (size_t i = 0; i < m->n; i++) {
		const struct mirror_entry *a = &m->e[i], *b = mirror_entry_find(&m2, a->path);

		CHECK(b && a->kind == b->kind && a->state == b->state && a->mode == b->mode &&
			a->size == b->size && a->ino == b->ino);
		CHECK(!a->detail == !b->detail && (!a->detail || !strcmp(a->detail, b->detail)));
	}
	mirror_free(&m2);
}

static void mirror_setup(struct mirror *m)
{
	memset(m, 0, sizeof(*m));
	snprintf(m->base, sizeof(m->base), "%s", tmpbase);
	snprintf(m->dir, sizeof(m->dir), "%s/ai-dev", tmpbase);
	snprintf(m->tree, sizeof(m->tree), "%s/ai-dev/tree", tmpbase);
	snprintf(m->status, sizeof(m->status), "%s/ai-dev.status", tmpbase);
	snprintf(m->home, sizeof(m->home), "/nonexistent");
	snprintf(m->agent_home, sizeof(m->agent_home), "/nonexistent");
	snprintf(m->owner, sizeof(m->owner), "alice");
	snprintf(m->agent, sizeof(m->agent), "ai-dev");
	snprintf(m->fingerprint, sizeof(m->fingerprint), "fuzz");
	m->spec = &spec;
	m->dmode = 0755;
	m->tree_uid = (uid_t)-1;
	m->tree_gid = (gid_t)-1;
	m->by = "fuzz";
}

static int apply(struct mirror *m, const struct buf *s)
{
	struct mirror_stats st;
	int r;

	as_account(1);
	r = mirror_apply(m, s->data ? s->data : "", s->len, 0, 1, &st);
	as_account(0);
	CHECK(r == 0 || r == -1);
	walk(m->tree, "", 0);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stream st[2];
	struct mirror m;
	struct expects ex = {0};
	char path[PATH_MAX];

	memset(st, 0, sizeof(st));
	if (size >= 6 && !memcmp(data, "#text\n", 6)) {
		parse_text(data + 6, size - 6, st);
	} else {
		struct fuzz_in in = {data, size};
		size_t l1 = fuzz_u16(&in), n;
		const char *p = fuzz_take(&in, l1, &n);

		buf_append(&st[0].b, p, n);
		p = fuzz_take(&in, in.n, &n);
		buf_append(&st[1].b, p, n);
	}
	/* A new tree for each input: the account's directory, empty. */
	snprintf(path, sizeof(path), "%s/ai-dev", tmpbase);
	fo_rmtree(path);
	snprintf(path, sizeof(path), "%s/ai-dev.status", tmpbase);
	unlink(path);
	mirror_setup(&m);
	as_account(1);
	CHECK(mkdir(m.dir, 0750) == 0);
	as_account(0);
	if (apply(&m, &st[0].b) == 0) {
		expected(&st[0].b, &ex);
		check_applied(&m, &ex);
		check_status(&m);
		/* The next refresh: the manifest from the status file, as the writer child reads it. */
		mirror_free(&m);
		mirror_setup(&m);
		CHECK(mirror_load(&m) == 0);
		if (st[1].b.len && apply(&m, &st[1].b) == 0) {
			struct expects ex2 = {0};

			expected(&st[1].b, &ex2);
			check_applied(&m, &ex2);
			check_status(&m);
			expects_free(&ex2);
		}
	}
	expects_free(&ex);
	mirror_free(&m);
	buf_free(&st[0].b);
	buf_free(&st[1].b);
	return 0;
}
