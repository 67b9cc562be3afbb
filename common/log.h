/* SPDX-License-Identifier: MIT */
#ifndef OCSB_LOG_H
#define OCSB_LOG_H

#include <stdarg.h>
#include <stddef.h>

/*
 * Where messages go. Tools write plain lines to stderr ("prog: message").
 * The daemon writes "<N>message" lines when its stderr is the journal (systemd
 * reads the priority prefix), time-stamped lines on stderr otherwise; with
 * LOG_TARGET_SYSLOG, syslog(3).
 */
enum log_target {
	LOG_TARGET_STDERR,
	LOG_TARGET_DAEMON,
	LOG_TARGET_SYSLOG,
};

enum log_level {
	LOG_LVL_ERR = 3,
	LOG_LVL_WARN = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

void log_init(const char *prog, enum log_target target, int verbosity);
void log_setlevel(int verbosity);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(int level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/*
 * A message about a command, with what the command printed (out, may be NULL): one line
 * "MESSAGE: OUTPUT" when the output is one line, else "MESSAGE:" followed by the output's
 * lines (the last LOG_OUTPUT_LINES), each indented and escaped on its own, instead of one
 * line full of \n.
 */
#define LOG_OUTPUT_LINES 40
/* common/log_output.c */
void log_output(int level, const char *out, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

/*
 * Escape len bytes of s into out (n bytes, always NUL-terminated; stops before an escape
 * that does not fit): "\\" for a backslash, "\n" "\r" "\t", and "\xHH" for each byte of
 * another C0 or C1 control, DEL, a bidi or zero-width character, or invalid UTF-8. Valid
 * UTF-8 text stays as it is. Returns the length written. Every log_* line goes through it.
 */
size_t log_vis(const char *s, size_t len, char *out, size_t n);
/*
 * One UTF-8 sequence at s (n bytes available): its length with *cp set, or 0 for an
 * invalid, overlong, surrogate or truncated one. Shared with sync's name checks.
 */
size_t log_utf8_decode(const unsigned char *s, size_t n, unsigned *cp);
/*
 * Code points a terminal acts on or that make text read as something else: C0 and C1
 * controls, DEL, bidi embeddings, overrides and isolates, zero-width characters and marks.
 */
int log_cp_unsafe(unsigned cp);

/* Only during start-up and privilege setup. */
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* For log_output.c: 1 when a message of level is logged; one escaped line out (cont: a
 * continuation line under a message, indented). */
int log_enabled(int level);
void log_line(int level, int cont, const char *line);

#endif
