/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CONF_H
#define OCSB_CONF_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Declarative "keyword value..." files: one statement a line, '#' starts a
 * comment, values may be "double quoted" (\" and \\ escapes) or 'single quoted'.
 * Nothing is expanded or executed. Errors are "file:line: message".
 */

#define CONF_MAX_ARGS 32
#define CONF_MAX_LINE 4096
#define CONF_MAX_FILE (1024 * 1024)

struct conf_loc {
	const char *file;
	unsigned line;
};

struct conf_kw {
	const char *name;
	int min_args;
	int max_args;
	/* 0 ok; -1 with a message in err (the location is added by the parser). */
	int (*handler)(void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err,
		size_t errlen);
	unsigned flags;
};

#define CONF_ONCE 0x1 /* a second occurrence is an error */

/* Split one line into words. Returns argc (0 for blank/comment), -1 with err set. */
int conf_split(char *line, char **argv, int max, char *err, size_t errlen);

/*
 * Parse a buffer. On error returns -1 and err holds "file:line: message".
 * `kws` ends with a {NULL} entry.
 */
int conf_parse_buf(const char *buf, size_t len, const char *file, const struct conf_kw *kws,
	void *ctx, char *err, size_t errlen);

/*
 * Refuses files a less privileged user could have written: when `owner` is not
 * -1 the file and its directory must belong to `owner` or root and must not be
 * group/world-writable. Symlinks are not followed. -ENOENT passes through so
 * callers can treat a missing file as "defaults".
 */
int conf_parse_file(const char *path, uid_t owner, const struct conf_kw *kws, void *ctx, char *err,
	size_t errlen);
/*
 * conf_parse_file's reading without the parsing: the same checks on the same descriptor,
 * the content (at most 1 MiB) in *ret_data (caller frees). -ENOENT passes through.
 */
int conf_read_file(
	const char *path, uid_t owner, char **ret_data, size_t *ret_len, char *err, size_t errlen);

/* Parsers for common value types; -1 with err on bad input. */
int conf_uint(const char *s, unsigned long min, unsigned long max, unsigned long *ret, char *err,
	size_t errlen);
int conf_bool(const char *s, int *ret, char *err, size_t errlen);

#endif
