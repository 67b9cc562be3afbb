/* SPDX-License-Identifier: MIT */
/*
 * The agent's stable fake host identity (seed 001's hardware-identity hiding): a
 * machine-id, a boot_id, a neutral kernel command line and DMI values, generated once per
 * agent and kept root-owned under <varlib>/ocsb/identity/<agent>/. ocsb-warden bind-mounts
 * them over the real ones in OpenCode's mount namespace, and pam_namespace's init script
 * (written by ocsb-provision) does the same for the agent's ssh sessions. ocsb-provision
 * writes them (identity_make.c); the warden only finds them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "identity.h"
#include "paths.h"

int identity_dir(const char *varlib, const char *agent, char *ret_dir, size_t n)
{
	char rel[128];

	if (snprintf(rel, sizeof(rel), "ocsb/identity/%s", agent) >= (int)sizeof(rel))
		return -ENAMETOOLONG;
	return path_join(ret_dir, n, varlib, rel) < 0 ? -ENAMETOOLONG : 0;
}

/* Every file present: what --check and doctor look at. */
int identity_complete(const char *varlib, const char *agent)
{
	char dir[4096], path[4200];
	static const char *const files[] = {"machine-id", "boot_id", "cmdline", "dmi/product_uuid"};
	struct stat st;

	if (identity_dir(varlib, agent, dir, sizeof(dir)) < 0)
		return 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0)
			return 0;
	}
	return 1;
}
