/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "procs.h"
#include "proxy.h"
#include "util.h"

int proxy_init(struct proxy *px, const struct paths *p, unsigned port)
{
	memset(px, 0, sizeof(*px));
	snprintf(px->squid, sizeof(px->squid), "/usr/sbin/squid");
	px->port = port;
	if (path_join(px->dir, sizeof(px->dir), p->varlib, "ocsb/proxy") < 0 ||
		path_join(px->conf, sizeof(px->conf), px->dir, "squid.conf") < 0 ||
		path_join(px->state, sizeof(px->state), px->dir, "state") < 0 ||
		path_join(px->pidfile, sizeof(px->pidfile), px->state, "squid.pid") < 0 ||
		path_join(px->access_log, sizeof(px->access_log), px->state, "access.log") < 0 ||
		path_join(px->cache_log, sizeof(px->cache_log), px->state, "cache.log") < 0)
		return -ENAMETOOLONG;
	return 0;
}
