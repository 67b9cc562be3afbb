/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_UNIT_H
#define OCSB_TEST_UNIT_H

/*
 * Shared by the unit test binaries: cmocka, a scratch directory per test and
 * small file helpers. Everything is static inline so each binary takes only
 * what it uses.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* The scratch directory of the running test: a resolved path (fileops refuses links). */
static char unit_dir[PATH_MAX];

static inline int unit_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* cmocka setup: a fresh directory under $TMPDIR (or /tmp). */
static inline int unit_setup_dir(void **state)
{
	const char *base = getenv("TMPDIR");
	char tmpl[PATH_MAX];

	(void)state;
	snprintf(tmpl, sizeof(tmpl), "%s/ocsb-unit.XXXXXX", base && *base ? base : "/tmp");
	if (!mkdtemp(tmpl) || !realpath(tmpl, unit_dir)) {
		fprintf(stderr, "# cannot create a scratch directory from %s: %s\n", tmpl,
			strerror(errno));
		return -1;
	}
	return 0;
}

static inline int unit_teardown_dir(void **state)
{
	(void)state;
	/* Tests may leave a directory read-only or world-writable: put it back first. */
	chmod(unit_dir, 0700);
	return nftw(unit_dir, unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* unit_dir "/" rel, in one of 8 rotating buffers: a call may use several. */
static inline const char *unit_path(const char *rel)
{
	static char paths[8][PATH_MAX];
	static unsigned next;
	char *p = paths[next++ % 8];

	if (snprintf(p, PATH_MAX, "%s/%s", unit_dir, rel) >= PATH_MAX)
		fail_msg("path too long: %s/%s", unit_dir, rel);
	return p;
}

/* Write a file with exactly this content and mode (the umask does not apply). */
static inline void unit_write(const char *path, const char *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, len), (ssize_t)len);
	assert_int_equal(fchmod(fd, mode), 0);
	assert_int_equal(close(fd), 0);
}

/* The whole content of a small file, NUL-terminated, into buf; its length. */
static inline size_t unit_read(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	assert_true(fd >= 0);
	r = read(fd, buf, n - 1);
	close(fd);
	assert_true(r >= 0);
	buf[r] = '\0';
	return (size_t)r;
}

/* Does `text` hold `line` as a whole line (ignoring leading blanks)? Its offset, or -1. */
static inline long unit_line_at(const char *text, const char *line)
{
	size_t ll = strlen(line);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *s = l + strspn(l, " \t");

		if (strncmp(s, line, ll) == 0 && (s[ll] == '\n' || s[ll] == '\0'))
			return (long)(l - text);
	}
	return -1;
}

#define assert_has_line(text, line) assert_true(unit_line_at((text), (line)) >= 0)

/* err must begin with `want` (the rest is explanation that may be reworded). */
#define assert_err_prefix(err, want)                                                    \
	do {                                                                            \
		if (strncmp((err), (want), strlen(want)) != 0)                          \
			fail_msg("error '%s' does not start with '%s'", (err), (want)); \
	} while (0)

#endif
