/* SPDX-License-Identifier: MIT */
/*
 * For the fuzz targets that link mirror/: mirror_priv.c and mirror_agent.c also hold the
 * programs' way of running the reader as the owner, the writer as the account and the link
 * maker as the agent (common/spawn.c, mirror_owner.c). The targets never call it, and
 * spawn.c wants the install directories only a Makefile build defines: stubs, that abort.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "mirror_int.h"
#include "spawn.h"

int spawn_fn(int (*fn)(void *arg, int outfd), void *arg, const struct spawn_opts *o,
	struct spawn_result *ret)
{
	(void)fn, (void)arg, (void)o, (void)ret;
	fprintf(stderr, "spawn_fn is not for a fuzz target\n");
	abort();
}

void spawn_result_free(struct spawn_result *r)
{
	(void)r;
}

const char *spawn_describe(const struct spawn_result *r, char *buf, size_t n)
{
	(void)r;
	snprintf(buf, n, "stub");
	return buf;
}

int owner_scan_child(void *arg, int outfd)
{
	(void)arg, (void)outfd;
	fprintf(stderr, "owner_scan_child is not for a fuzz target\n");
	abort();
}
