/* SPDX-License-Identifier: MIT */
/*
 * Loading the egress rules: one buffer, one file, the drop-in directory, then the system's
 * and the owner's files in order; a file that fails leaves the rules as they were.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "conf.h"
#include "egress.h"
#include "fileops.h"
#include "egress_int.h"

/* ---- loading ---- */

/* What a failed file must not leave behind: its rules, its settings, its name. */
struct snapshot {
	size_t n;
	size_t nfiles;
	enum egress_policy policy;
	int off;
	int dns_allow;
	time_t learn_from, learn_until;
	const char *learn_file;
};

static int begin(struct egress *e, const char *file, struct parse_ctx *c, struct snapshot *s,
	char *err, size_t errlen)
{
	s->n = e->n;
	s->nfiles = e->files.n;
	s->policy = e->policy;
	s->off = e->off;
	s->dns_allow = e->dns_allow;
	s->learn_from = e->learn_from;
	s->learn_until = e->learn_until;
	s->learn_file = e->learn_file;
	if (strv_push(&e->files, file) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->e = e;
	c->re_weight = 0;
	c->start_n = e->n;
	c->setting = 0;
	c->proposal = 0;
	c->file = e->files.v[e->files.n - 1];
	return 0;
}

/*
 * A file parsed whole: a proposal's rules were checked and are dropped now (its name is
 * kept: `ocsb status` and `egress render` say which proposals wait).
 */
static int end(struct egress *e, const struct parse_ctx *c, char *err, size_t errlen)
{
	if (!c->proposal)
		return 0;
	while (e->n > c->start_n)
		egress_rule_free(&e->rules[--e->n]);
	if (strv_push(&e->proposals, c->file) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

static void rollback(struct egress *e, const struct snapshot *s)
{
	while (e->n > s->n)
		egress_rule_free(&e->rules[--e->n]);
	while (e->files.n > s->nfiles) {
		free(e->files.v[--e->files.n]);
		e->files.v[e->files.n] = NULL;
	}
	e->policy = s->policy;
	e->off = s->off;
	e->dns_allow = s->dns_allow;
	e->learn_from = s->learn_from;
	e->learn_until = s->learn_until;
	e->learn_file = s->learn_file;
}

int egress_parse_buf(
	struct egress *e, const char *buf, size_t len, const char *file, char *err, size_t errlen)
{
	struct parse_ctx c;
	struct snapshot s;

	if (begin(e, file, &c, &s, err, errlen) < 0)
		return -1;
	if (conf_parse_buf(buf, len, c.file, egress_keywords, &c, err, errlen) < 0 ||
		end(e, &c, err, errlen) < 0) {
		rollback(e, &s);
		return -1;
	}
	egress_learn_update(e, time(NULL));
	return 0;
}

/* One file; its error in err. -ENOENT passes through for the caller to decide. */
static int load_file(struct egress *e, const char *path, uid_t owner, char *err, size_t errlen)
{
	struct parse_ctx c;
	struct snapshot s;
	int r;

	if (begin(e, path, &c, &s, err, errlen) < 0)
		return -ENOMEM;
	r = conf_parse_file(c.file, owner, egress_keywords, &c, err, errlen);
	if (r == 0 && end(e, &c, err, errlen) < 0)
		r = -ENOMEM;
	if (r < 0)
		rollback(e, &s);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Drop-in names go into messages and into squid.conf notes: keep them plain. Hidden files
 * and names not ending in ".conf" (editor backups, dpkg leftovers) are skipped, like
 * run-parts does; a ".conf" file with another name is an error rather than silently unread.
 */
static int dropin_name(const char *name, const char *dir, char *err, size_t errlen)
{
	size_t n = strlen(name);

	if (name[0] == '.' || n <= 5 || strcmp(name + n - 5, ".conf") != 0)
		return 0;
	for (const char *p = name; *p; p++)
		if (!egress_is_name_char(*p) && *p != '.' && *p != '_') {
			snprintf(err, errlen,
				"%s/%.200s: unsupported file name; use letters, digits, '.', "
				"'_' and '-'",
				dir, name);
			return -1;
		}
	return 1;
}

static int load_dropins(struct egress *e, const char *dir, uid_t owner, char *err, size_t errlen)
{
	struct strv names = {0};
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	fd = fo_open_dir(AT_FDCWD, dir);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-fd));
		return fd;
	}
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		int ok = dropin_name(de->d_name, dir, err, errlen);

		if (ok < 0) {
			r = -EINVAL;
			goto out;
		}
		if (!ok)
			continue;
		if (names.n == EGRESS_MAX_DROPINS) {
			snprintf(err, errlen, "%s: more than %d files", dir, EGRESS_MAX_DROPINS);
			r = -E2BIG;
			goto out;
		}
		if (strv_push(&names, de->d_name) < 0) {
			snprintf(err, errlen, "out of memory");
			r = -ENOMEM;
			goto out;
		}
	}
	if (names.n)
		qsort(names.v, names.n, sizeof(*names.v), cmp_names);
	for (size_t i = 0; i < names.n; i++) {
		char path[PATH_MAX];

		if (path_join(path, sizeof(path), dir, names.v[i]) < 0) {
			snprintf(err, errlen, "%s/%s: path too long", dir, names.v[i]);
			r = -ENAMETOOLONG;
			goto out;
		}
		r = load_file(e, path, owner, err, errlen);
		if (r < 0)
			goto out;
	}
out:
	closedir(d);
	strv_free(&names);
	return r;
}

/* The system's layers: <etc>/ocsb/egress.conf, then egress.d. */
static int load_system(struct egress *tmp, const struct paths *p, uid_t sys_uid, char *err,
	size_t errlen)
{
	char path[PATH_MAX];
	int r;

	if (path_join(path, sizeof(path), p->etc, "ocsb/egress.conf") < 0) {
		snprintf(err, errlen, "%s: path too long", p->etc);
		return -ENAMETOOLONG;
	}
	/* Root-written files: only root (sys_uid in tests) may own them. */
	r = load_file(tmp, path, sys_uid, err, errlen);
	if (r < 0)
		return r;
	if (path_join(path, sizeof(path), p->etc, "ocsb/egress.d") < 0) {
		snprintf(err, errlen, "%s: path too long", p->etc);
		return -ENAMETOOLONG;
	}
	return load_dropins(tmp, path, sys_uid, err, errlen);
}

static int owner_file(const char *owner_home, char *path, size_t n, char *err, size_t errlen)
{
	if (path_join(path, n, owner_home, EGRESS_OWNER_FILE) < 0) {
		snprintf(err, errlen, "%s: path too long", owner_home);
		return -ENAMETOOLONG;
	}
	return 0;
}

int egress_load_as(struct egress *e, const struct paths *p, uid_t sys_uid, const char *owner_home,
	uid_t owner_uid, char *err, size_t errlen)
{
	struct egress tmp = {0};
	char path[PATH_MAX];
	int r;

	memset(e, 0, sizeof(*e));
	/* (uid_t)-1 would switch conf_parse_file's ownership checks off. */
	if (sys_uid == (uid_t)-1)
		sys_uid = 0;
	if (owner_home && owner_uid == (uid_t)-1) {
		snprintf(err, errlen, "%s: the owner's uid is unknown", owner_home);
		return -EINVAL;
	}
	r = load_system(&tmp, p, sys_uid, err, errlen);
	if (r < 0)
		goto fail;
	if (owner_home) {
		r = owner_file(owner_home, path, sizeof(path), err, errlen);
		if (r < 0)
			goto fail;
		/* The owner's own layer: the owner (or root) wrote it, nobody else could. */
		r = load_file(&tmp, path, owner_uid, err, errlen);
		if (r == -ENOENT)
			r = 0;
		if (r < 0)
			goto fail;
	}
	egress_learn_update(&tmp, time(NULL));
	*e = tmp;
	return 0;
fail:
	egress_free(&tmp);
	return r;
}

int egress_load(struct egress *e, const struct paths *p, const char *owner_home, uid_t owner_uid,
	char *err, size_t errlen)
{
	return egress_load_as(e, p, 0, owner_home, owner_uid, err, errlen);
}

int egress_load_text_as(struct egress *e, const struct paths *p, uid_t sys_uid,
	const char *owner_home, const char *owner_text, size_t len, char *err, size_t errlen)
{
	struct egress tmp = {0};
	char path[PATH_MAX];
	int r;

	memset(e, 0, sizeof(*e));
	if (sys_uid == (uid_t)-1)
		sys_uid = 0;
	if (owner_text && !owner_home) {
		snprintf(err, errlen, "the owner's egress rules came without the owner's home");
		return -EINVAL;
	}
	if (owner_text && len > CONF_MAX_FILE) {
		snprintf(err, errlen, "%s/%s: file too large (limit 1 MiB)", owner_home,
			EGRESS_OWNER_FILE);
		return -EFBIG;
	}
	r = load_system(&tmp, p, sys_uid, err, errlen);
	if (r < 0)
		goto fail;
	/*
	 * The owner's layer, read by a child running as the owner (the file's checks were
	 * made there, on its descriptor): parsed here by the same code, under the file's own
	 * name, so errors and squid's notes read as when the file is read directly.
	 */
	if (owner_text) {
		r = owner_file(owner_home, path, sizeof(path), err, errlen);
		if (r < 0)
			goto fail;
		if (egress_parse_buf(&tmp, owner_text, len, path, err, errlen) < 0) {
			r = -EINVAL;
			goto fail;
		}
	}
	egress_learn_update(&tmp, time(NULL));
	*e = tmp;
	return 0;
fail:
	egress_free(&tmp);
	return r;
}

int egress_load_text(struct egress *e, const struct paths *p, const char *owner_home,
	const char *owner_text, size_t len, char *err, size_t errlen)
{
	return egress_load_text_as(e, p, 0, owner_home, owner_text, len, err, errlen);
}

int egress_owner_read(const char *owner_home, uid_t owner_uid, char **ret_data, size_t *ret_len,
	char *err, size_t errlen)
{
	char path[PATH_MAX];
	int r;

	*ret_data = NULL;
	*ret_len = 0;
	if (owner_uid == (uid_t)-1) {
		snprintf(err, errlen, "%s: the owner's uid is unknown", owner_home);
		return -EINVAL;
	}
	r = owner_file(owner_home, path, sizeof(path), err, errlen);
	if (r < 0)
		return r;
	/* conf_parse_file's checks, without its parsing (the supervisor parses). */
	return conf_read_file(path, owner_uid, ret_data, ret_len, err, errlen);
}
