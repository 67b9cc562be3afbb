/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "ocsb";
static enum log_target log_target = LOG_TARGET_STDERR;
static int log_max = LOG_LVL_NOTICE;
static int log_journal;
static int log_syslog;

void log_init(const char *prog, enum log_target target, int verbosity)
{
	log_prog = prog;
	log_target = target;
	log_setlevel(verbosity);
	if (target == LOG_TARGET_SYSLOG) {
		log_syslog = 1;
		openlog(prog, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	}
	/* systemd sets JOURNAL_STREAM when stderr is connected to the journal. */
	if (target == LOG_TARGET_DAEMON)
		log_journal = getenv("JOURNAL_STREAM") != NULL;
}

void log_setlevel(int verbosity)
{
	log_max = LOG_LVL_NOTICE + verbosity;
	if (log_max > LOG_LVL_DEBUG)
		log_max = LOG_LVL_DEBUG;
	if (log_max < LOG_LVL_ERR)
		log_max = LOG_LVL_ERR;
}

/*
 * Decode one UTF-8 sequence at s (n bytes available): its length with *cp set, or 0 for
 * an invalid, overlong, surrogate or truncated sequence.
 */
size_t log_utf8_decode(const unsigned char *s, size_t n, unsigned *cp)
{
	unsigned c = s[0], min;
	size_t len;

	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if ((c & 0xe0) == 0xc0)
		len = 2, c &= 0x1f, min = 0x80;
	else if ((c & 0xf0) == 0xe0)
		len = 3, c &= 0x0f, min = 0x800;
	else if ((c & 0xf8) == 0xf0)
		len = 4, c &= 0x07, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/*
 * Code points a terminal acts on, or that make text read as something else: C0 and C1
 * controls (ESC, CSI 0x9b, OSC 0x9d...), DEL, bidi embeddings, overrides and isolates
 * (Trojan Source), zero-width characters and marks.
 */
int log_cp_unsafe(unsigned cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
		(cp >= 0x2066 && cp <= 0x2069) || cp == 0x200e || cp == 0x200f || cp == 0x061c ||
		(cp >= 0x200b && cp <= 0x200d) || cp == 0x2060 || cp == 0xfeff;
}

size_t log_vis(const char *str, size_t len, char *out, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;

	if (!n)
		return 0;
	for (size_t i = 0; i < len;) {
		unsigned cp = 0;
		size_t l = log_utf8_decode(s + i, len - i, &cp);
		char esc[32];
		size_t el = 0;

		if (l == 1 && (cp == '\\' || cp == '\n' || cp == '\r' || cp == '\t')) {
			esc[0] = '\\';
			esc[1] = cp == '\\' ? '\\' : cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
			el = 2;
		} else if (!l || log_cp_unsafe(cp)) {
			/* Every byte of the sequence (one, for invalid UTF-8): \xHH, never raw. */
			if (!l)
				l = 1;
			for (size_t k = 0; k < l; k++)
				el += (size_t)snprintf(esc + el, sizeof(esc) - el, "\\x%02x", s[i + k]);
		} else {
			memcpy(esc, s + i, l);
			el = l;
		}
		/* Whole units only: a truncated line never ends in half an escape. */
		if (o + el + 1 > n)
			break;
		memcpy(out + o, esc, el);
		o += el;
		i += l;
	}
	out[o] = '\0';
	return o;
}

/*
 * One escaped line out. A continuation line (the lines of a command's output under our
 * message, log_output) is indented: it cannot pass for a message of ours.
 */
void log_line(int level, int cont, const char *line)
{
	const char *ind = cont ? "  " : "";

	if (log_syslog) {
		syslog(level, "%s%s", ind, line);
	} else if (log_journal) {
		fprintf(stderr, "<%d>%s%s\n", level, ind, line);
	} else if (log_target == LOG_TARGET_DAEMON) {
		/* A daemon in the foreground: time-stamped lines, for a file or a terminal. */
		char when[32];
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		fprintf(stderr, "%s %s[%ld]: %s%s\n", when, log_prog, (long)getpid(), ind, line);
	} else if (cont) {
		fprintf(stderr, "%s%s\n", ind, line);
	} else {
		const char *tag = level == LOG_LVL_ERR ? "error: "
			: level == LOG_LVL_WARN	       ? "warning: "
						       : "";
		if (level <= LOG_LVL_WARN)
			fprintf(stderr, "%s: %s%s\n", log_prog, tag, line);
		else
			fprintf(stderr, "%s\n", line);
	}
}

int log_enabled(int level)
{
	return level <= log_max;
}

void log_vmsg(int level, const char *fmt, va_list ap)
{
	char raw[2048], line[4 * sizeof(raw)];
	int saved = errno, w;

	if (level > log_max)
		return;
	w = vsnprintf(raw, sizeof(raw), fmt, ap);
	if (w < 0)
		w = 0;
	if ((size_t)w >= sizeof(raw))
		w = sizeof(raw) - 1;
	/* Output of a command often ends its last line: that is the end of ours, not text. */
	while (w > 0 && (raw[w - 1] == '\n' || raw[w - 1] == '\r'))
		w--;
	/*
	 * Names, git output and errors often come from the agent: every control byte is
	 * escaped (like OpenSSH's strnvis), so no line is forged and no escape sequence
	 * reaches root's terminal or log. A backslash is doubled: the output reads one way.
	 */
	log_vis(raw, (size_t)w, line, sizeof(line));
	log_line(level, 0, line);
	errno = saved;
}

void log_msg(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_LVL_ERR, fmt, ap);
	va_end(ap);
	exit(1);
}
