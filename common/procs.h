/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROCS_H
#define OCSB_PROCS_H

#include <sys/types.h>

/*
 * Send sig to every process with uid among its real, effective, saved or filesystem
 * uids. With `until_none`, repeat (a process may fork between scan and signal) until a
 * scan finds none: for SIGKILL. Returns how many were signalled, or -errno (-EBUSY when
 * they keep coming back).
 */
int procs_signal_uid(uid_t uid, int sig, int until_none);
/* How many processes run with uid (any of the four). */
int procs_count_uid(uid_t uid);

#endif
