/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROCS_H
#define OCSB_PROCS_H

#include <sys/types.h>

/*
 * Signals without pid reuse. A pid found in a scan (/proc, a cgroup.procs list) may name
 * another process by the time it is signalled: the found one exited, was reaped, and the
 * pid went to a newcomer. So each is pinned first (pidfd_open), checked again through
 * /proc by its pid, and signalled through the pidfd: a pidfd never names another
 * process, and a signal that reaches it proves the check was about it (a pid is not
 * reused before its process is reaped). Kernels before 5.3 have no pidfd_open: the pid
 * is used as it is, with one logged warning.
 */

/*
 * A pidfd for pid (close-on-exec): >= 0; -ENOSYS when this kernel has none (logged
 * once; the caller goes on with the pid); another -errno (-ESRCH: gone).
 */
int procs_pidfd(pid_t pid);
/*
 * Sends sig (0: a liveness check) to the process of pidfd, or to pid when pidfd < 0
 * (no pidfds here). 0 or -errno; -ESRCH: that process is gone, whoever has its pid now.
 */
int procs_pidfd_signal(pid_t pid, int pidfd, int sig);
/*
 * sig to pid if it is, once pinned, a live process of uid (any of the four ids).
 * 1 signalled, 0 not (gone, a zombie, another uid's), -errno.
 */
int procs_signal_pid(pid_t pid, uid_t uid, int sig);

/*
 * Send sig to every process with uid among its real, effective, saved or filesystem
 * uids (each as procs_signal_pid does). With `until_none`, repeat (a process may fork
 * between scan and signal) until a scan finds none: for SIGKILL. Zombies are not counted
 * (they run nothing and only their parent's wait removes them). Returns how many were
 * signalled, or -errno (-EBUSY when they keep coming back: procs_describe_uid names
 * them).
 */
int procs_signal_uid(uid_t uid, int sig, int until_none);
/*
 * The pid in pidfile when that process still runs `exe` (an absolute path, maybe a link to
 * the real binary as alternatives make it; a binary replaced by an upgrade,
 * "exe (deleted)", counts too). A stale file naming another program by now gives -ENOENT.
 */
int procs_pidfile(const char *pidfile, const char *exe);
/*
 * The same process pinned, for a signal (procs_pidfd_signal): 0 with *ret_pid and
 * *ret_pidfd (-1 without pidfds; the caller closes it), the check of exe made again
 * once pinned. -ENOENT as procs_pidfile, another -errno.
 */
int procs_pidfile_pin(const char *pidfile, const char *exe, pid_t *ret_pid, int *ret_pidfd);
/*
 * 1 when one of pid's open files is a socket listening on TCP port that takes 127.0.0.1
 * (bound to it, to the any address, IPv4 or IPv6 without IPV6_V6ONLY), 0 when pid holds
 * none, -errno when its descriptors cannot be taken (pidfd_getfd: root, or pid is the
 * caller's child).
 */
int procs_port_owner_is(pid_t pid, unsigned port);
/* 1 when something accepts TCP on 127.0.0.1:port. */
int procs_port_open(unsigned port);
/*
 * Who answers on TCP 127.0.0.1:port: 1 pid's own listening socket, 0 nothing listens,
 * -EADDRINUSE another process, -errno when pid's descriptors cannot be read (not root).
 */
int procs_port_holder(unsigned port, pid_t pid);

/*
 * Calls fn for every live process with uid (any of the four), pinned: pidfd is open on
 * it (-1 on a kernel without pidfds) and closed after fn returns. What fn does to the
 * process goes through the pidfd (procs_pidfd_signal); what it does by pid (a write to
 * cgroup.procs) holds if a check through the pidfd afterwards finds it alive. Returns
 * how many, or -errno.
 */
int procs_foreach_uid(uid_t uid, void (*fn)(pid_t pid, int pidfd, void *ctx), void *ctx);

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
