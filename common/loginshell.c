/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "loginshell.h"
#include "paths.h"

int loginshell_argv(const char *real, char **argv, char *arg0, size_t n)
{
	const char *base;
	int login, r;

	if (!real || real[0] != '/' || !real[1] || real[strlen(real) - 1] == '/')
		return -EINVAL;
	base = path_base(real);
	if (strcmp(base, OCSB_SHELL_NAME) == 0)
		return -ELOOP;
	login = argv[0] && argv[0][0] == '-';
	r = snprintf(arg0, n, "%s%s", login ? "-" : "", base);
	if (r < 0 || (size_t)r >= n)
		return -ENAMETOOLONG;
	argv[0] = arg0;
	return 0;
}
