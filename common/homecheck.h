/* SPDX-License-Identifier: MIT */
#ifndef OCSB_HOMECHECK_H
#define OCSB_HOMECHECK_H

#include <stddef.h>

#include "util.h"

/*
 * ~agent/name looked at as the agent, following nothing (root only: it drops to the
 * agent): 0 when absent or the regular file (want_dir: directory) the agent can open, 1
 * when the agent broke it (what, in ret_why), -1 on error (logged).
 */
int home_entry_check(
	const struct user_info *agent, const char *name, int want_dir, char *ret_why, size_t n);

/* ~agent/name is a link to target (looked at as the agent): 0 yes, 1 no (why), -1 error. */
int home_link_check(const struct user_info *agent, const char *name, const char *target,
	char *ret_why, size_t n);

#endif
