/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (b->wipe) {
			d = malloc(cap);
			if (!d)
				return -ENOMEM;
			if (b->data) {
				memcpy(d, b->data, b->len);
				explicit_bzero(b->data, b->cap);
				free(b->data);
			}
		} else {
			d = realloc(b->data, cap);
			if (!d)
				return -ENOMEM;
		}
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	char small[512], *big = NULL;
	va_list ap;
	int n, r;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n < sizeof(small)) {
		r = buf_append(b, small, (size_t)n);
		if (b->wipe)
			explicit_bzero(small, sizeof(small));
		return r;
	}
	big = malloc((size_t)n + 1);
	if (!big)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	r = buf_append(b, big, (size_t)n);
	if (b->wipe) {
		explicit_bzero(small, sizeof(small));
		explicit_bzero(big, (size_t)n + 1);
	}
	free(big);
	return r;
}

void buf_free(struct buf *b)
{
	if (b->wipe && b->data)
		explicit_bzero(b->data, b->cap);
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

int strv_push(struct strv *s, const char *str)
{
	char *dup;

	if (s->n + 2 > s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		char **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	dup = strdup(str);
	if (!dup)
		return -ENOMEM;
	s->v[s->n++] = dup;
	s->v[s->n] = NULL;
	return 0;
}

int strv_contains(const struct strv *s, const char *str)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], str) == 0)
			return 1;
	return 0;
}

void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

int valid_user_name(const char *name)
{
	size_t len = strlen(name);

	/* Debian's useradd default (NAME_REGEX) narrowed: no '$', no upper case, 1..32 chars. */
	if (len == 0 || len > 32)
		return 0;
	if (!(islower((unsigned char)name[0]) || name[0] == '_'))
		return 0;
	for (size_t i = 1; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!(islower(c) || isdigit(c) || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int safe_token(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '\\' || c == '$' ||
			c == '`' || c == '#')
			return 0;
	}
	return 1;
}

static int user_fill(struct passwd *pw, struct user_info *ret)
{
	if (strlen(pw->pw_name) >= sizeof(ret->name) || strlen(pw->pw_dir) >= sizeof(ret->home) ||
		strlen(pw->pw_shell) >= sizeof(ret->shell))
		return -ENAMETOOLONG;
	memset(ret, 0, sizeof(*ret));
	strcpy(ret->name, pw->pw_name);
	strcpy(ret->home, pw->pw_dir);
	strcpy(ret->shell, pw->pw_shell);
	snprintf(ret->gecos, sizeof(ret->gecos), "%s", pw->pw_gecos ? pw->pw_gecos : "");
	ret->uid = pw->pw_uid;
	ret->gid = pw->pw_gid;
	return 0;
}

/* getpwnam(3): these errno values all mean "no such user". */
static int lookup_errno(void)
{
	if (errno == 0 || errno == ENOENT || errno == ESRCH || errno == EBADF || errno == EPERM)
		return -ENOENT;
	return -errno;
}

int user_lookup(const char *name, struct user_info *ret)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwnam(name);
	if (!pw)
		return lookup_errno();
	return user_fill(pw, ret);
}

int user_lookup_uid(uid_t uid, struct user_info *ret)
{
	struct passwd *pw;

	errno = 0;
	pw = getpwuid(uid);
	if (!pw)
		return lookup_errno();
	return user_fill(pw, ret);
}

long mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

long long mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000LL;
}
