/* SPDX-License-Identifier: MIT */
/*
 * Who holds a loopback port (procs.h), and the proxy's pid (proxy.h): what provisioning,
 * the supervisor and ocsb doctor ask before they start or judge squid. The warden does
 * not ask it.
 */
#include <errno.h>
#include <sys/types.h>

#include "procs.h"
#include "proxy.h"

int proxy_pid(const struct proxy *px)
{
	return procs_pidfile(px->pidfile, px->squid);
}

int procs_port_holder(unsigned port, pid_t pid)
{
	int own;

	if (!procs_port_open(port))
		return 0;
	if (pid <= 0)
		return -EADDRINUSE;
	own = procs_port_owner_is(pid, port);
	if (own < 0)
		return own;
	return own ? 1 : -EADDRINUSE;
}
