/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "fileops.h"

int conf_split(char *line, char **argv, int max, char *err, size_t errlen)
{
	char *r = line, *w = line;
	int argc = 0;

	for (;;) {
		while (*r == ' ' || *r == '\t')
			r++;
		if (*r == '\0' || *r == '#')
			return argc;
		if (argc == max) {
			snprintf(err, errlen, "too many values (at most %d)", max - 1);
			return -1;
		}
		argv[argc++] = w;
		/* A word may mix bare and quoted parts, as in a shell: a"b c"d is one word. */
		while (*r && *r != ' ' && *r != '\t') {
			if (*r == '"' || *r == '\'') {
				char q = *r++;
				while (*r && *r != q) {
					if (q == '"' && *r == '\\' && (r[1] == '"' || r[1] == '\\'))
						r++;
					*w++ = *r++;
				}
				if (*r != q) {
					snprintf(err, errlen, "unterminated %s quote",
						q == '"' ? "double" : "single");
					return -1;
				}
				r++;
			} else {
				*w++ = *r++;
			}
		}
		if (*r)
			r++;
		/* In place: w never passes r, and the NUL lands on a separator at most. */
		*w++ = '\0';
	}
}

static const struct conf_kw *find_kw(const struct conf_kw *kws, const char *name)
{
	for (; kws->name; kws++)
		if (strcmp(kws->name, name) == 0)
			return kws;
	return NULL;
}

static int check_bytes(const char *line, size_t len, char *err, size_t errlen)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)line[i];
		if (c == '\0') {
			snprintf(err, errlen, "NUL byte in line");
			return -1;
		}
		if (c < 0x20 && c != '\t' && c != '\r') {
			snprintf(err, errlen, "control character 0x%02x in line", c);
			return -1;
		}
		if (c == 0x7f) {
			snprintf(err, errlen, "control character 0x7f in line");
			return -1;
		}
	}
	return 0;
}

int conf_parse_buf(const char *buf, size_t len, const char *file, const struct conf_kw *kws,
	void *ctx, char *err, size_t errlen)
{
	unsigned seen[64] = {0};
	struct conf_loc loc = {.file = file, .line = 0};
	size_t nkw = 0, pos = 0;
	char line[CONF_MAX_LINE + 1];
	char msg[512];

	while (kws[nkw].name)
		nkw++;
	if (nkw > sizeof(seen) / sizeof(seen[0])) {
		snprintf(err, errlen, "%s: internal error: more than %zu keywords", file,
			sizeof(seen) / sizeof(seen[0]));
		return -1;
	}
	while (pos < len) {
		const char *nl = memchr(buf + pos, '\n', len - pos);
		size_t ll = nl ? (size_t)(nl - (buf + pos)) : len - pos;
		const struct conf_kw *kw;
		char *argv[CONF_MAX_ARGS + 1];
		int argc;

		loc.line++;
		msg[0] = '\0';
		if (ll > CONF_MAX_LINE) {
			snprintf(err, errlen, "%s:%u: line longer than %d bytes", file, loc.line,
				CONF_MAX_LINE);
			return -1;
		}
		if (check_bytes(buf + pos, ll, msg, sizeof(msg)) < 0)
			goto fail;
		memcpy(line, buf + pos, ll);
		line[ll] = '\0';
		if (ll && line[ll - 1] == '\r')
			line[ll - 1] = '\0';
		pos += ll + (nl ? 1 : 0);

		argc = conf_split(line, argv, CONF_MAX_ARGS, msg, sizeof(msg));
		if (argc < 0)
			goto fail;
		if (argc == 0)
			continue;
		kw = find_kw(kws, argv[0]);
		if (!kw) {
			snprintf(msg, sizeof(msg), "unknown keyword '%.64s'", argv[0]);
			goto fail;
		}
		if (argc - 1 < kw->min_args || argc - 1 > kw->max_args) {
			if (kw->min_args == kw->max_args)
				snprintf(msg, sizeof(msg), "'%s' takes %d value%s, got %d",
					kw->name, kw->min_args, kw->min_args == 1 ? "" : "s",
					argc - 1);
			else
				snprintf(msg, sizeof(msg), "'%s' takes %d to %d values, got %d",
					kw->name, kw->min_args, kw->max_args, argc - 1);
			goto fail;
		}
		if ((kw->flags & CONF_ONCE) && seen[kw - kws]) {
			snprintf(msg, sizeof(msg), "'%s' given twice (first on line %u)", kw->name,
				seen[kw - kws]);
			goto fail;
		}
		seen[kw - kws] = loc.line;
		argv[argc] = NULL;
		if (kw->handler && kw->handler(ctx, &loc, argc - 1, argv + 1, msg, sizeof(msg)) < 0)
			goto fail;
	}
	return 0;
fail:
	snprintf(err, errlen, "%s:%u: %s", file, loc.line, msg);
	return -1;
}

static int check_owner(const struct stat *st, uid_t owner, const char *what, const char *path,
	char *err, size_t errlen)
{
	if (st->st_uid != 0 && st->st_uid != owner) {
		snprintf(err, errlen,
			"%s: %s is owned by uid %u; it must belong to root%s (chown it or remove "
			"it)",
			path, what, (unsigned)st->st_uid, owner ? " or its user" : "");
		return -1;
	}
	if (st->st_mode & 022) {
		snprintf(err, errlen,
			"%s: %s is writable by group or others (mode %04o); run: chmod go-w on it",
			path, what, (unsigned)(st->st_mode & 07777));
		return -1;
	}
	return 0;
}

int conf_read_file(
	const char *path, uid_t owner, char **ret_data, size_t *ret_len, char *err, size_t errlen)
{
	char name[256];
	struct stat st;
	char *data = NULL;
	size_t len = 0;
	int dfd, fd, r;

	dfd = fo_open_parent(AT_FDCWD, path, 0, 0, name, sizeof(name));
	if (dfd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-dfd));
		return dfd;
	}
	if (owner != (uid_t)-1) {
		if (fstat(dfd, &st) < 0 ||
			check_owner(&st, owner, "its directory", path, err, errlen) < 0) {
			close(dfd);
			return -EPERM;
		}
	}
	/*
	 * Opened once, checked and read through the same descriptor: a file swapped in
	 * after the checks is never the one read. O_NONBLOCK: a FIFO cannot hang us.
	 */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	close(dfd);
	if (fd < 0) {
		r = -errno;
		if (errno == ELOOP) {
			snprintf(err, errlen,
				"%s: not a regular file (symbolic links are not followed)", path);
			return -EINVAL;
		}
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file (symbolic links are not followed)",
			path);
		close(fd);
		return -EINVAL;
	}
	if (owner != (uid_t)-1 && check_owner(&st, owner, "file", path, err, errlen) < 0) {
		close(fd);
		return -EPERM;
	}
	r = fo_read_fd(fd, CONF_MAX_FILE, &data, &len);
	close(fd);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path,
			r == -EFBIG ? "file too large (limit 1 MiB)" : strerror(-r));
		return r;
	}
	*ret_data = data;
	*ret_len = len;
	return 0;
}

int conf_parse_file(const char *path, uid_t owner, const struct conf_kw *kws, void *ctx, char *err,
	size_t errlen)
{
	char *data = NULL;
	size_t len = 0;
	int r = conf_read_file(path, owner, &data, &len, err, errlen);

	if (r < 0)
		return r;
	r = conf_parse_buf(data, len, path, kws, ctx, err, errlen);
	free(data);
	return r < 0 ? -EINVAL : 0;
}
