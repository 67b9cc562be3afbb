/* SPDX-License-Identifier: MIT */
/*
 * The warden's side of wconf.h: the record ocsb-provision --warden-config prints, read
 * line by line in its fixed order, each value bounded again. Pure (no system calls), so
 * that the unit tests and the config fuzz target hold it to what the renderer writes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"
#include "wconf.h"

void wconf_free(struct wconf *c)
{
	strv_free(&c->projects);
	memset(c, 0, sizeof(*c));
}

/* "KEY rest": rest, when line is that key's. */
static const char *item(const char *line, const char *key)
{
	size_t n = strlen(key);

	return strncmp(line, key, n) == 0 && line[n] == ' ' ? line + n + 1 : NULL;
}

/* Exactly `n` decimal numbers separated by single spaces, each at most max. */
static int nums(const char *s, unsigned long long max, int n, unsigned long long *out)
{
	for (int i = 0; i < n; i++) {
		char *end;

		if (*s < '0' || *s > '9')
			return -1;
		errno = 0;
		out[i] = strtoull(s, &end, 10);
		if (errno || out[i] > max || *end != (i == n - 1 ? '\0' : ' '))
			return -1;
		s = end + (i < n - 1);
	}
	return 0;
}

static int copy(char *dst, size_t n, const char *v, int path)
{
	if (strlen(v) >= n || (path ? v[0] != '/' : !valid_user_name(v)))
		return -1;
	memcpy(dst, v, strlen(v) + 1);
	return 0;
}

int wconf_parse(const char *buf, size_t len, struct wconf *ret, char *err, size_t errlen)
{
	static const char *const keys[] = {"agent", "owner", "proxy-port", "agent-ports",
		"opencode-bin", "opencode-port", "limits", "mirror"};
	unsigned long long v[3] = {0};
	char *text, *pos, *line;
	int r = 0, n = 0, end = 0;
	const char *base;

	memset(ret, 0, sizeof(*ret));
	if (len > 6 && !memcmp(buf, "error ", 6)) {
		snprintf(err, errlen, "%.*s", (int)strcspn(buf + 6, "\n"), buf + 6);
		return -1;
	}
	text = len < WCONF_MAX && !memchr(buf, '\0', len) ? strndup(buf, len) : NULL;
	if (!text) {
		snprintf(err, errlen, "not a record");
		return -1;
	}
	pos = text;
	for (; r == 0 && !end && (line = strsep(&pos, "\n")) != NULL; n++) {
		const char *val = n >= 1 && n <= 8 ? item(line, keys[n - 1]) : NULL;

		if (n >= 1 && n <= 8 && !val) {
			r = -1;
			continue; /* counted: the line's number is said */
		}
		switch (n) {
		case 0:
			r = strcmp(line, WCONF_MAGIC) ? -1 : 0;
			break;
		case 1:
			r = copy(ret->agent, sizeof(ret->agent), val, 0);
			break;
		case 2:
			r = copy(ret->owner, sizeof(ret->owner), val, 0);
			break;
		case 3:
			r = nums(val, 65535, 1, v) < 0 || !v[0] ? -1 : 0;
			ret->proxy_port = (unsigned)v[0];
			break;
		case 4:
			r = nums(val, 65535, 2, v) < 0 || v[0] > v[1] ? -1 : 0;
			ret->ports_lo = (unsigned)v[0];
			ret->ports_hi = (unsigned)v[1];
			break;
		case 5:
			r = copy(ret->opencode_bin, sizeof(ret->opencode_bin), val, 1);
			break;
		case 6:
			r = nums(val, 65535, 1, v) < 0 || !v[0] ? -1 : 0;
			ret->opencode_port = (unsigned)v[0];
			break;
		case 7:
			r = nums(val, ~0ULL, 3, v) < 0 || v[1] > 1U << 30 || v[2] > 1U << 30 ? -1
											     : 0;
			ret->memory_max = v[0];
			ret->tasks_max = (unsigned)v[1];
			ret->cpu_percent = (unsigned)v[2];
			break;
		case 8:
			r = nums(val, 1, 1, v);
			ret->mirror = (int)v[0];
			break;
		default:
			if (!strcmp(line, "end")) {
				end = pos && *pos == '\0';
				r = end ? 0 : -1;
				break;
			}
			/* A project is ~agent/<its base name>: a plain one, as config.c checks. */
			val = item(line, "project");
			base = val ? path_base(val) : "";
			r = val && val[0] == '/' && strlen(val) < 1024 && safe_token(base) &&
					base[0] != '.'
				? strv_push(&ret->projects, val)
				: -1;
		}
	}
	if (r < 0 || !end)
		snprintf(err, errlen, "malformed record, line %d: '%.80s'", n, r < 0 ? line : "");
	free(text);
	if (r < 0 || !end)
		wconf_free(ret);
	return r < 0 || !end ? -1 : 0;
}
