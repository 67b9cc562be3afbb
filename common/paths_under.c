/* SPDX-License-Identifier: MIT */
/* paths_under (paths.h): every path below another root, for the tests' trees. */
#include <stdio.h>

#include "paths.h"

int paths_under(struct paths *p, const char *root)
{
	paths_default(p);
	if (path_join(p->etc, sizeof(p->etc), root, "etc") < 0 ||
		path_join(p->run, sizeof(p->run), root, "run") < 0 ||
		path_join(p->varlib, sizeof(p->varlib), root, "var/lib") < 0 ||
		path_join(p->home, sizeof(p->home), root, "home") < 0 ||
		path_join(p->ctl_sock, sizeof(p->ctl_sock), p->run, PATHS_CTL_SOCK_REL) < 0 ||
		snprintf(p->pkgroot, sizeof(p->pkgroot), "%s", root) >= (int)sizeof(p->pkgroot))
		return -1;
	return 0;
}
