/* SPDX-License-Identifier: MIT */
/*
 * The mirror engine (docs/mirror.md): a child with the owner's rights reads
 * (mirror_owner.c), root writes a tree of its own (mirror_priv.c), a child with the agent's
 * rights links it into the agent's home (mirror_agent.c). This file: the spec, the manifest,
 * the status file and the API around them.
 */
#define _GNU_SOURCE
#include "mirror_int.h"

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

int mirror_rehash(struct mirror *m, size_t nslot)
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

struct mirror_entry *mirror_entry_find(const struct mirror *m, const char *path)
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

struct mirror_entry *mirror_entry_add(struct mirror *m, const char *path)
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
	if ((m->n + 1) * 2 > m->nslot && mirror_rehash(m, m->nslot ? m->nslot * 2 : 512) < 0)
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

void mirror_forget(struct mirror *m)
{
	me_clear(m);
	m->scan_ns = 0;
	m->scan_saved = 0;
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(
		((const struct mirror_entry *)a)->path, ((const struct mirror_entry *)b)->path);
}

int mirror_entry_on_disk(const struct mirror_entry *e)
{
	return e->kind == 'd' || e->kind == 'f' || e->kind == 'l' || e->kind == 'g';
}

int mirror_writable(const struct mirror *m, const char *rel)
{
	return strv_contains(&m->spec->writable, rel);
}

/* A directory mirror_reserve made for a source the owner does not have (yet). */
int mirror_reserved(const struct mirror *m, const char *rel)
{
	int tfd = fo_open_dir(AT_FDCWD, m->tree), fd;

	/* The tree is another account's: walked by descriptor, never through a link. */
	if (tfd < 0)
		return 0;
	fd = fo_open_beneath(tfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(tfd);
	if (fd < 0)
		return 0;
	close(fd);
	return 1;
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
	m->tree_uid = (uid_t)-1;
	m->tree_gid = (gid_t)-1;
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

int mirror_set_account(struct mirror *m, const struct user_info *acct)
{
	if (!acct || acct->uid == 0 || acct->uid == (uid_t)-1 || acct->gid == 0 ||
		snprintf(m->tree_user, sizeof(m->tree_user), "%s", acct->name) >=
			(int)sizeof(m->tree_user))
		return -EINVAL;
	m->tree_uid = acct->uid;
	m->tree_gid = acct->gid;
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

int mirror_render_status(struct mirror *m, const char *by, struct buf *b)
{
	time_t now = time(NULL);
	char boot[64];
	struct tm tm;
	int r = 0;

	gmtime_r(&now, &tm);
	strftime(m->last_built, sizeof(m->last_built), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (m->n) /* m->e is NULL before the first entry: no qsort(NULL, ...) */
		qsort(m->e, m->n, sizeof(*m->e), cmp_entry);
	mirror_rehash(m, m->nslot ? m->nslot : 512);
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
	/* Rewritten in place by the account (mirror_status_write): a file cut short says so. */
	r |= buf_puts(b, STATUS_END "\n");
	return r ? -ENOMEM : 0;
}

/*
 * The status file is in root's directory (base, shared by the agents), 0640
 * <account>:<owner's group> so that the owner can read it. The account cannot create
 * files there, nor give a new one the owner's group: root made the file
 * (mirror_prepare) and the account rewrites it in place, opened without following a
 * link and checked to be its own. Readers may see it half written: without its last
 * line (STATUS_END) it is not trusted (mirror_load rebuilds, as after a crash).
 * Root, and a unit test that can create it, replace it whole.
 */
int mirror_status_write(struct mirror *m, const char *data, size_t len)
{
	struct stat st;
	int fd, r = 0;

	if (geteuid() == 0)
		return fo_write(m->status, data, len, 0640, m->tree_uid, m->owner_gid);
	fd = open(m->status, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return fo_write(m->status, data, len, 0640, (uid_t)-1, (gid_t)-1);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
		close(fd);
		return -EPERM;
	}
	if (ftruncate(fd, 0) < 0)
		r = -errno;
	for (size_t off = 0; r == 0 && off < len;) {
		ssize_t w = pwrite(fd, data + off, len - off, (off_t)off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			r = w < 0 ? -errno : -EIO;
		else
			off += (size_t)w;
	}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
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
	if (mirror_entry_find(m, path.data)) {
		buf_free(&path);
		buf_free(&det);
		return -EINVAL;
	}
	e = mirror_entry_add(m, path.data);
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

int mirror_status_parse(
	struct mirror *m, char *data, size_t len, char **ret_fp, char **ret_boot, int *ret_complete)
{
	char *line, *save = NULL;
	int r = 0, first = 1;

	if (ret_complete)
		*ret_complete = len >= sizeof(STATUS_TAIL) - 1 &&
				!memcmp(data + len - (sizeof(STATUS_TAIL) - 1), STATUS_TAIL,
					sizeof(STATUS_TAIL) - 1);
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (first) {
			first = 0;
			if (strcmp(line, STATUS_MAGIC) != 0) {
				r = -EINVAL;
				break;
			}
			continue;
		}
		/* A line given twice: the last one counts (and the first is not leaked). */
		if (!strncmp(line, "fingerprint ", 12) && ret_fp) {
			free(*ret_fp);
			*ret_fp = strdup(line + 12);
		} else if (!strncmp(line, "boot ", 5) && ret_boot) {
			free(*ret_boot);
			*ret_boot = strdup(line + 5);
		} else if (!strncmp(line, "built ", 6) && m) {
			snprintf(m->last_built, sizeof(m->last_built), "%s", line + 6);
		} else if (!strncmp(line, "scanned ", 8) && m) {
			m->scan_ns = strtoll(line + 8, NULL, 10);
			m->scan_saved = 1;
		} else if (!strncmp(line, "E\t", 2) && m && (r = parse_entry(m, line)) < 0) {
			break;
		}
	}
	return r;
}

/* Read a status file; fills the manifest when `m`, else just validates. */
static int load_status(
	struct mirror *m, const char *path, char **ret_fp, char **ret_boot, int *ret_complete)
{
	char *data = NULL;
	size_t len;
	int r;

	r = fo_read(path, 256u * 1024 * 1024, &data, &len);
	if (r < 0)
		return r;
	r = mirror_status_parse(m, data, len, ret_fp, ret_boot, ret_complete);
	free(data);
	return r;
}

int mirror_load(struct mirror *m)
{
	char *fp = NULL, *boot = NULL, now[64];
	int r, complete = 0;

	me_clear(m);
	m->scan_ns = 0;
	m->scan_saved = 0;
	r = load_status(m, m->status, &fp, &boot, &complete);
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
	if (!fp || strcmp(fp, m->fingerprint) != 0 || !boot || strcmp(boot, now) != 0 ||
		!complete) {
		me_clear(m);
		m->scan_ns = 0;
	}
	free(fp);
	free(boot);
	return 0;
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

void mirror_linked(const struct mirror *m, char *out, size_t n)
{
	size_t i;

	for (i = 0; i < m->spec->paths.n && i + 1 < n; i++) {
		const struct mirror_entry *e = mirror_entry_find(m, m->spec->paths.v[i]);

		out[i] = (e && mirror_entry_on_disk(e)) || mirror_reserved(m, m->spec->paths.v[i])
				 ? '1'
				 : '0';
	}
	out[i] = '\0';
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
	int r;

	memset(&m, 0, sizeof(m));
	r = load_status(&m, status_path, &fp, NULL, NULL);
	if (r == 0)
		mirror_status_report(&m, json, f);
	free(fp);
	mirror_free(&m);
	return r;
}

void mirror_status_report(const struct mirror *m, int json, FILE *f)
{
	unsigned cnt[4] = {0};

	for (size_t i = 0; i < m->n; i++) {
		const char *w = state_word(&m->e[i]);
		cnt[!strcmp(w, "mirrored")		 ? 0
				: !strcmp(w, "redacted") ? 1
				: !strcmp(w, "withheld") ? 2
							 : 3]++;
	}
	if (json) {
		fprintf(f, "{\"built\":");
		json_str(f, m->last_built);
		fprintf(f,
			",\"mirrored\":%u,\"redacted\":%u,\"withheld\":%u,\"skipped\":%u,"
			"\"entries\":[",
			cnt[0], cnt[1], cnt[2], cnt[3]);
		for (size_t i = 0; i < m->n; i++) {
			const struct mirror_entry *e = &m->e[i];
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
		struct buf built = {0};

		/* The file is the account's: its date is text like the rest, escaped. */
		mirror_escape(m->last_built[0] ? m->last_built : "?", &built);
		fprintf(f, "built %s: %u mirrored, %u redacted, %u withheld, %u skipped\n",
			built.data ? built.data : "", cnt[0], cnt[1], cnt[2], cnt[3]);
		buf_free(&built);
		for (int pass = 0; pass < 2; pass++)
			for (size_t i = 0; i < m->n; i++) {
				const struct mirror_entry *e = &m->e[i];
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
}
