/* SPDX-License-Identifier: MIT */
/* conf_bool (conf.h): yes/no values, which the egress rules take and ocsb.conf does not. */
#include <stdio.h>
#include <string.h>

#include "conf.h"

int conf_bool(const char *s, int *ret, char *err, size_t errlen)
{
	if (!strcmp(s, "yes") || !strcmp(s, "true") || !strcmp(s, "on")) {
		*ret = 1;
		return 0;
	}
	if (!strcmp(s, "no") || !strcmp(s, "false") || !strcmp(s, "off")) {
		*ret = 0;
		return 0;
	}
	snprintf(err, errlen, "'%.64s' is not yes or no", s);
	return -1;
}
