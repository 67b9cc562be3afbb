/* SPDX-License-Identifier: MIT */
/* seterr (util.h): the parsers' and the clients' error text; the warden does without it. */
#include <stdarg.h>
#include <stdio.h>

#include "util.h"

int seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}
