/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets share: the CHECK macro (a broken property aborts with its line),
 * quiet logs, and a reader of the input in pieces.
 */
#ifndef OCSB_FUZZ_UTIL_H
#define OCSB_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Where CHECK writes: the real stderr, also once libFuzzer has closed fd 2. */
static FILE *fuzz_err;

#define CHECK(cond)                                                                           \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(fuzz_err ? fuzz_err : stderr, "%s:%d: property broken: %s\n", \
				__FILE__, __LINE__, #cond);                                   \
			abort();                                                              \
		}                                                                             \
	} while (0)

/*
 * The code under test logs its refusals, one line per malformed input, thousands a second:
 * for LLVMFuzzerInitialize, adds -close_fd_mask=2 to libFuzzer's flags (read after this
 * call), so that fd 2 is closed while libFuzzer's own output and the sanitizers' reports go
 * to a copy of stderr; CHECK keeps a copy of its own. FUZZ_VERBOSE=1 keeps the logs (to
 * replay one input).
 */
static inline void fuzz_quiet(int *argc, char ***argv)
{
	static char flag[] = "-close_fd_mask=2";
	static char **v;
	int fd = fcntl(2, F_DUPFD_CLOEXEC, 3);

	if (fd >= 0 && (fuzz_err = fdopen(fd, "w")))
		setvbuf(fuzz_err, NULL, _IONBF, 0);
	if (getenv("FUZZ_VERBOSE"))
		return;
	for (int i = 1; i < *argc; i++)
		if (!strncmp((*argv)[i], "-close_fd_mask=", 15))
			return;
	v = calloc((size_t)*argc + 2, sizeof(*v));
	if (!v)
		return;
	memcpy(v, *argv, (size_t)*argc * sizeof(*v));
	v[(*argc)++] = flag;
	*argv = v;
}

/* The input, taken in pieces: bytes run out into zeros, never past the end. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline unsigned fuzz_byte(struct fuzz_in *in)
{
	unsigned b;

	if (!in->n)
		return 0;
	b = in->p[0];
	in->p++;
	in->n--;
	return b;
}

static inline unsigned fuzz_u16(struct fuzz_in *in)
{
	unsigned hi = fuzz_byte(in);

	return hi << 8 | fuzz_byte(in);
}

/* Up to max bytes (fewer when the input ends); *ret_len set. */
static inline const char *fuzz_take(struct fuzz_in *in, size_t max, size_t *ret_len)
{
	const char *p = (const char *)in->p;
	size_t n = max < in->n ? max : in->n;

	in->p += n;
	in->n -= n;
	*ret_len = n;
	return p;
}

/* The next piece up to a separator byte (not included, skipped); NULL when none is left. */
static inline const char *fuzz_until(struct fuzz_in *in, uint8_t sep, size_t *ret_len)
{
	const uint8_t *e;
	const char *p = (const char *)in->p;

	if (!in->n)
		return NULL;
	e = memchr(in->p, sep, in->n);
	*ret_len = e ? (size_t)(e - in->p) : in->n;
	in->p += *ret_len + (e ? 1 : 0);
	in->n -= *ret_len + (e ? 1 : 0);
	return p;
}

/* A NUL-terminated copy of n bytes (malloc'd; aborts when out of memory). */
static inline char *fuzz_strndup(const char *p, size_t n)
{
	char *s = malloc(n + 1);

	CHECK(s != NULL);
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

#endif
