/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "paths.h"

void paths_default(struct paths *p)
{
	memset(p, 0, sizeof(*p));
	strcpy(p->etc, "/etc");
	strcpy(p->run, "/run");
	strcpy(p->varlib, "/var/lib");
	strcpy(p->home, "/home");
	strcpy(p->sshd, "/usr/sbin/sshd");
	strcpy(p->ctl_sock, PATHS_CTL_SOCK);
}

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

int path_join(char *out, size_t n, const char *base, const char *rel)
{
	size_t bl = strlen(base);
	int r;

	/* "/" + "usr/lib" is "/usr/lib", never "//usr/lib" (a path shown to the user). */
	while (bl > 0 && base[bl - 1] == '/')
		bl--;
	while (*rel == '/')
		rel++;
	r = snprintf(out, n, "%.*s/%s", (int)bl, base, rel);
	if (r < 0 || (size_t)r >= n) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

const char *path_base(const char *path)
{
	const char *s = strrchr(path, '/');

	return s && s[1] ? s + 1 : path;
}
