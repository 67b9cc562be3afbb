/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CTL_INT_H
#define OCSB_CTL_INT_H
/* Shared by ctl.c and ctl_connect.c: absolute CLOCK_MONOTONIC deadlines in ms, -1 none. */
long long ctl_deadline_in(int timeout_ms);
int ctl_remaining_ms(long long deadline);
/* poll() for events until the deadline: 0, -ETIMEDOUT, -errno. */
int ctl_wait_fd(int fd, short events, long long deadline);
/* ctl_connect with an absolute deadline (ctl_call shares its deadline). */
int ctl_connect_until(const char *path, long long deadline);
#endif
