/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opencode.h"

#define MAX_LINKS 40 /* the kernel's own limit (MAXSYMLINKS) */

/* A directory on the way to the program. */
static int dir_ok(const char *dir, const struct stat *st, int hint, char *err, size_t errlen)
{
	unsigned mode = st->st_mode & 07777;

	if (st->st_uid != 0) {
		snprintf(err, errlen,
			"%s: directory not owned by root (uid %u): its owner could replace what "
			"runs; use a root-owned location%s",
			dir, (unsigned)st->st_uid,
			hint ? " (sudo ocsb-provision --install-opencode installs OpenCode "
			       "in " OCSB_OPENCODE_PREFIX ")"
			     : "");
		return -EPERM;
	}
	/*
	 * A root-owned sticky directory (/tmp) is safe to pass through: others cannot rename
	 * or remove entries they do not own, and the next entry must be root's.
	 */
	if ((mode & 022) && !(mode & S_ISVTX)) {
		snprintf(err, errlen,
			"%s: directory writable by group or others (mode %04o): anyone who can "
			"write there could replace the program; fix: sudo chmod go-w %s",
			dir, mode, dir);
		return -EPERM;
	}
	if (!(mode & S_IXOTH)) {
		snprintf(err, errlen,
			"%s: directory not searchable by others (mode %04o), so the agent cannot "
			"reach the program; fix: sudo chmod o+x %s",
			dir, mode, dir);
		return -EPERM;
	}
	return 0;
}

static int file_ok(const char *file, const struct stat *st, char *err, size_t errlen)
{
	unsigned mode = st->st_mode & 07777;

	if (!S_ISREG(st->st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", file);
		return -EPERM;
	}
	if (st->st_uid != 0) {
		snprintf(err, errlen,
			"%s: not owned by root (uid %u): its owner could change what runs; fix: "
			"sudo chown root:root %s",
			file, (unsigned)st->st_uid, file);
		return -EPERM;
	}
	if (mode & 022) {
		snprintf(err, errlen,
			"%s: writable by group or others (mode %04o); fix: sudo chmod go-w %s",
			file, mode, file);
		return -EPERM;
	}
	/* A setuid program the agent may execute would hand it someone else's rights. */
	if (mode & (S_ISUID | S_ISGID)) {
		snprintf(err, errlen, "%s: setuid or setgid (mode %04o); fix: sudo chmod ug-s %s",
			file, mode, file);
		return -EPERM;
	}
	if (!(mode & S_IXOTH)) {
		snprintf(err, errlen,
			"%s: not executable by others (mode %04o), so the agent cannot run it; "
			"fix: "
			"sudo chmod 755 %s",
			file, mode, file);
		return -EPERM;
	}
	return 0;
}

/* Drop the first component of `rest` into comp; rest keeps what follows (leading '/'). */
static int next_component(char *rest, char *comp, size_t n)
{
	char *p = rest, *end;
	size_t len;

	while (*p == '/')
		p++;
	if (!*p)
		return 0;
	end = strchrnul(p, '/');
	len = (size_t)(end - p);
	if (len >= n)
		return -ENAMETOOLONG;
	memcpy(comp, p, len);
	comp[len] = '\0';
	memmove(rest, end, strlen(end) + 1);
	return 1;
}

/*
 * Walk `path` from / as the kernel would, but with lstat() at each step, so that every
 * directory and link the lookup passes through is checked, not just the final file.
 */
static int path_check(const char *path, int hint, int want_dir, char *err, size_t errlen)
{
	char cur[PATH_MAX] = "", next[PATH_MAX], rest[PATH_MAX * 2], comp[NAME_MAX + 1];
	char target[PATH_MAX];
	struct stat st;
	int links = 0, r;

	if (!path || path[0] != '/') {
		snprintf(err, errlen, "'%s' is not an absolute path", path ? path : "");
		return -EINVAL;
	}
	if (strlen(path) >= PATH_MAX) {
		snprintf(err, errlen, "%.200s...: path too long", path);
		return -ENAMETOOLONG;
	}
	if (lstat("/", &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "/: %s", strerror(-r));
		return r;
	}
	r = dir_ok("/", &st, hint, err, errlen);
	if (r < 0)
		return r;
	snprintf(rest, sizeof(rest), "%s", path);
	for (;;) {
		r = next_component(rest, comp, sizeof(comp));
		if (r < 0) {
			snprintf(err, errlen, "%s: a path component is too long", path);
			return r;
		}
		if (r == 0 && want_dir)
			return 0;
		if (r == 0) {
			snprintf(err, errlen, "%s: is a directory, not a program",
				cur[0] ? cur : "/");
			return -EISDIR;
		}
		if (strcmp(comp, ".") == 0)
			continue;
		/* cur holds no links, so ".." is plain text surgery on it. */
		if (strcmp(comp, "..") == 0) {
			char *slash = strrchr(cur, '/');
			if (slash)
				*slash = '\0';
			continue;
		}
		if (snprintf(next, sizeof(next), "%s/%s", cur, comp) >= (int)sizeof(next)) {
			snprintf(err, errlen, "%s: path too long after resolving links", path);
			return -ENAMETOOLONG;
		}
		if (lstat(next, &st) < 0) {
			r = -errno;
			if (r == -ENOENT && hint && strcmp(next, path) != 0)
				snprintf(err, errlen, "%s: not found (%s is missing); %s", path,
					next, OCSB_OPENCODE_INSTALL_HINT);
			else if (r == -ENOENT && hint)
				snprintf(err, errlen, "%s: not found; %s", path,
					OCSB_OPENCODE_INSTALL_HINT);
			else
				snprintf(err, errlen, "%s: %s", next, strerror(-r));
			return r;
		}
		if (S_ISLNK(st.st_mode)) {
			ssize_t n;

			/* Its directory was checked already; the link itself must be root's too. */
			if (st.st_uid != 0) {
				snprintf(err, errlen,
					"%s: symbolic link not owned by root (uid %u): its owner "
					"could point it elsewhere; fix: replace it with a "
					"root-owned link",
					next, (unsigned)st.st_uid);
				return -EPERM;
			}
			if (++links > MAX_LINKS) {
				snprintf(
					err, errlen, "%s: too many levels of symbolic links", path);
				return -ELOOP;
			}
			n = readlink(next, target, sizeof(target) - 1);
			if (n < 0) {
				r = -errno;
				snprintf(err, errlen, "%s: %s", next, strerror(-r));
				return r;
			}
			target[n] = '\0';
			if ((size_t)n + strlen(rest) + 1 > sizeof(rest)) {
				snprintf(err, errlen, "%s: path too long after resolving links",
					path);
				return -ENAMETOOLONG;
			}
			/* The link's text replaces its name; rest is "" or starts with '/'. */
			memmove(rest + n, rest, strlen(rest) + 1);
			memcpy(rest, target, (size_t)n);
			if (target[0] == '/')
				cur[0] = '\0';
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			r = dir_ok(next, &st, hint, err, errlen);
			if (r < 0)
				return r;
			memcpy(cur, next, strlen(next) + 1);
			continue;
		}
		if (rest[0] || want_dir) {
			snprintf(err, errlen, "%s: not a directory (in %s)", next, path);
			return -ENOTDIR;
		}
		return file_ok(next, &st, err, errlen);
	}
}

int opencode_bin_check(const char *path, char *err, size_t errlen)
{
	return path_check(path, 1, 0, err, errlen);
}

int opencode_path_check(const char *path, char *err, size_t errlen)
{
	return path_check(path, 0, 0, err, errlen);
}

int opencode_dir_check(const char *path, char *err, size_t errlen)
{
	return path_check(path, 0, 1, err, errlen);
}

int opencode_probe_answer(const char *buf, size_t len, size_t cap)
{
	/* The status line, or a full buffer: the answer is judged on it. */
	if (!strchr(buf, '\n') && len < cap - 1)
		return 0;
	if (!strncmp(buf, "HTTP/1.1 200", 12) || !strncmp(buf, "HTTP/1.0 200", 12))
		return 1;
	return -1;
}
