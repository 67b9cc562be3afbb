/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SDNOTIFY_H
#define OCSB_SDNOTIFY_H

#include <stddef.h>

/*
 * systemd's readiness protocol without libsystemd. sd_notify_take copies $NOTIFY_SOCKET
 * (a path, or "@name" for an abstract socket) into name and removes it from the
 * environment, so no child inherits it: name is "" when systemd did not set it. Returns 0,
 * or -EINVAL for a name that cannot be a socket's (name is "" then).
 */
int sd_notify_take(char *name, size_t n);
/*
 * One datagram with state (e.g. "READY=1\nSTATUS=...") to name. Returns 1 when sent, 0 when
 * name is "" (not started by systemd), -errno otherwise.
 */
int sd_notify_send(const char *name, const char *state);

#endif
