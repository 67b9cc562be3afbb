/* SPDX-License-Identifier: MIT */
/*
 * log_output: a message with the output of a command under it, line by line (log.h). Apart
 * from log.c so that a program that runs no command (ocsb-warden) does not link it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

void log_output(int level, const char *out, const char *fmt, ...)
{
	char head[2048], vis[4 * 1024];
	size_t len = out ? strlen(out) : 0, lines, skip, i = 0;
	const char *p, *end;
	int saved = errno;
	va_list ap;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	/* Blank lines around the output say nothing. */
	while (len && strchr("\r\n \t", out[len - 1]))
		len--;
	while (len && (out[0] == '\n' || out[0] == '\r'))
		out++, len--;
	if (!len || !memchr(out, '\n', len)) {
		if (len)
			log_msg(level, "%s: %.*s", head, (int)len, out);
		else
			log_msg(level, "%s", head);
		errno = saved;
		return;
	}
	end = out + len;
	/* The last line has no newline (trimmed above): one line more than newlines. */
	for (p = out, lines = 1; p < end; p++)
		lines += *p == '\n';
	/* A tool's conclusion comes last (npm's, git's): the last lines are kept. */
	skip = lines > LOG_OUTPUT_LINES ? lines - LOG_OUTPUT_LINES : 0;
	log_msg(level, "%s:", head);
	if (skip) {
		snprintf(vis, sizeof(vis), "(%zu lines before these not shown)", skip);
		log_line(level, 1, vis);
	}
	for (p = out; p < end; i++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (i >= skip) {
			/* Each line escaped on its own: a \r or an escape sequence stays visible. */
			log_vis(p, n && p[n - 1] == '\r' ? n - 1 : n, vis, sizeof(vis));
			log_line(level, 1, vis);
		}
		p += n + 1;
	}
	errno = saved;
}
