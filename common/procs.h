/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROCS_H
#define OCSB_PROCS_H

#include <sys/types.h>

/*
 * Send sig to every process with uid among its real, effective, saved or filesystem
 * uids. With `until_none`, repeat (a process may fork between scan and signal) until a
 * scan finds none: for SIGKILL. Zombies are not counted (they run nothing and only their
 * parent's wait removes them). Returns how many were signalled, or -errno (-EBUSY when
 * they keep coming back: procs_describe_uid names them).
 */
int procs_signal_uid(uid_t uid, int sig, int until_none);
/*
 * The pid in pidfile when that process still runs `exe` (an absolute path, maybe a link to
 * the real binary as alternatives make it; a binary replaced by an upgrade,
 * "exe (deleted)", counts too). A stale file naming another program by now gives -ENOENT.
 */
int procs_pidfile(const char *pidfile, const char *exe);
/*
 * 1 when the socket listening on TCP 127.0.0.1:port (or any address) is one of pid's
 * open files, 0 when another process holds it or nothing listens, -errno on error.
 */
int procs_port_owner_is(pid_t pid, unsigned port);
/* 1 when something accepts TCP on 127.0.0.1:port. */
int procs_port_open(unsigned port);
/*
 * Who answers on TCP 127.0.0.1:port: 1 pid's own listening socket, 0 nothing listens,
 * -EADDRINUSE another process (an IPv6 any-address socket taking 127.0.0.1 too), -errno
 * when pid's descriptors cannot be read (not root).
 */
int procs_port_holder(unsigned port, pid_t pid);

/* Calls fn for every process with uid (any of the four); returns how many, or -errno. */
int procs_foreach_uid(uid_t uid, void (*fn)(pid_t pid, void *ctx), void *ctx);

/*
 * procs_signal_uid(uid, SIGKILL, 1), and on failure one error naming what is left
 * ("name" is the account, for the message). Returns how many were killed, or -errno.
 */
int procs_kill_uid(uid_t uid, const char *name);
/*
 * The processes of uid as "PID (comm), ..." (at most five named) in out, for an error a
 * person can act on. Returns how many there are, or -errno.
 */
int procs_describe_uid(uid_t uid, char *out, size_t n);

/* How many processes run with uid (any of the four); zombies do not count. */
int procs_count_uid(uid_t uid);

#endif
