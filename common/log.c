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

void log_vmsg(int level, const char *fmt, va_list ap)
{
	char line[2048];
	int saved = errno;

	if (level > log_max)
		return;
	vsnprintf(line, sizeof(line), fmt, ap);
	/* Never let a name from outside forge extra log lines. */
	for (char *c = line; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
	if (log_syslog) {
		syslog(level, "%s", line);
	} else if (log_journal) {
		fprintf(stderr, "<%d>%s\n", level, line);
	} else if (log_target == LOG_TARGET_DAEMON) {
		/* A daemon in the foreground: time-stamped lines, for a file or a terminal. */
		char when[32];
		time_t t = time(NULL);
		struct tm tm;

		localtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		fprintf(stderr, "%s %s[%ld]: %s\n", when, log_prog, (long)getpid(), line);
	} else {
		const char *tag = level == LOG_LVL_ERR ? "error: "
			: level == LOG_LVL_WARN	       ? "warning: "
						       : "";
		if (level <= LOG_LVL_WARN)
			fprintf(stderr, "%s: %s%s\n", log_prog, tag, line);
		else
			fprintf(stderr, "%s\n", line);
	}
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
