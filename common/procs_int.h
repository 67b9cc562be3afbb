/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROCS_INT_H
#define OCSB_PROCS_INT_H

/* procs.c's internals, shared with procs_pid.c. */

#include <sys/types.h>

/*
 * pid pinned while it is a live process of uid: 0 with *ret_pidfd (-1 without pidfds),
 * -ESRCH when it is gone, a zombie or not uid's, another -errno. The check reads /proc
 * by pid after the pin: whatever acts on the pidfd next learns whether it was about the
 * pinned process (it still runs, so its pid was not handed on).
 */
int procs_pin_uid(pid_t pid, uid_t uid, int *ret_pidfd);

#endif
