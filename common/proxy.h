/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROXY_H
#define OCSB_PROXY_H

#include <limits.h>
#include <stddef.h>

#include "paths.h"
#include "util.h"

/*
 * The egress proxy process (squid, a real engine run as its own `proxy` user). Until
 * ocsb-agentd supervises it, ocsb-provision starts it detached; both run it the same way:
 * `squid -N -f CONF` in the foreground of its own session, never daemonizing itself.
 */
struct proxy {
	char squid[PATH_MAX]; /* /usr/sbin/squid */
	char dir[PATH_MAX]; /* <varlib>/ocsb/proxy: root-owned, holds the configuration */
	char conf[PATH_MAX]; /* dir/squid.conf, root-owned: squid's own user cannot change it */
	char state[PATH_MAX]; /* dir/state: pid and logs, owned by `proxy` */
	char pidfile[PATH_MAX];
	char access_log[PATH_MAX];
	char cache_log[PATH_MAX];
	unsigned port;
};

#define PROXY_USER "proxy"
/* The port of Debian's squid.service (squid.conf: http_port 3128), ocsb's default too. */
#define SQUID_DEFAULT_PORT 3128

struct egress;

/* common/proxy.c */
int proxy_init(struct proxy *px, const struct paths *p, unsigned port);
/* The running squid's pid, or -ENOENT (a stale pid file is ignored). */
int proxy_pid(const struct proxy *px);
/* SIGTERM, then SIGKILL after timeout_ms; 0 when it is gone (or was not running). */
int proxy_stop(const struct proxy *px, int timeout_ms);

/* egress/egress_proxy.c (libegress) */
/* squid.conf for these rules, for this proxy's port and state directory. */
int proxy_render(const struct proxy *px, const struct egress *e, struct buf *out);
/* Validate a configuration text with `squid -k parse`; err holds squid's complaint. */
int proxy_check_text(const struct proxy *px, const char *text, char *err, size_t errlen);
/* Start detached and wait until the port accepts (at most timeout_ms). */
int proxy_start(const struct proxy *px, int timeout_ms, char *err, size_t errlen);
/* Re-read the configuration without dropping the listener (SIGHUP). */
int proxy_reconfigure(const struct proxy *px);

#endif
