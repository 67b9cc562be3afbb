/* SPDX-License-Identifier: MIT */
#ifndef OCSB_UTIL_H
#define OCSB_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Growable byte buffer, always NUL-terminated. */
struct buf {
	char *data; /* owned */
	size_t len;
	size_t cap;
	/*
	 * 1: the bytes are secret (a key, a head holding one): growth copies into a new
	 * block and wipes the old one before freeing it, buf_printf wipes its scratch, and
	 * buf_free wipes, so no copy is left in freed heap.
	 */
	int wipe;
};

int buf_append(struct buf *b, const void *p, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(struct buf *b);

/* NULL-terminated growable string vector. */
struct strv {
	char **v; /* owned, each element owned */
	size_t n;
	size_t cap;
};

int strv_push(struct strv *s, const char *str);
int strv_contains(const struct strv *s, const char *str);
void strv_free(struct strv *s);

/* Milliseconds of CLOCK_MONOTONIC: for deadlines. */
long mono_ms(void);
long long mono_us(void);

/* A name that useradd would accept and that is safe in paths and configs. */
int valid_user_name(const char *name);
/* Printable ASCII only, no spaces or shell/ssh metacharacters used by ocsb. */
int safe_token(const char *s);

struct user_info {
	char name[64];
	char home[4096];
	char shell[4096];
	char gecos[256];
	uid_t uid;
	gid_t gid;
};

/* 0 found, -ENOENT missing, other negative errno on lookup failure. */
int user_lookup(const char *name, struct user_info *ret);
int user_lookup_uid(uid_t uid, struct user_info *ret);

/* Formats into err (when given) and returns -1: `return seterr(err, n, "...", ...)`. */
int seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
