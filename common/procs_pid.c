/* SPDX-License-Identifier: MIT */
/*
 * One process of a uid signalled, and a uid's processes counted (procs.h): no program
 * calls them (the warden signals the agent's processes by the walk of procs.c, its
 * children by their pidfds); the unit tests check the pin and the count through them.
 * Apart from procs.c so that the warden, root for its whole life, does not link them.
 */
#include <errno.h>
#include <unistd.h>

#include "procs.h"
#include "procs_int.h"

int procs_signal_pid(pid_t pid, uid_t uid, int sig)
{
	int fd, r = procs_pin_uid(pid, uid, &fd);

	if (r < 0)
		return r == -ESRCH ? 0 : r;
	r = procs_pidfd_signal(pid, fd, sig);
	if (fd >= 0)
		close(fd);
	if (r == -ESRCH)
		return 0;
	return r < 0 ? r : 1;
}

int procs_count_uid(uid_t uid)
{
	/* sig 0: each pinned process counted while still alive, none signalled. */
	return procs_signal_uid(uid, 0, 0);
}
