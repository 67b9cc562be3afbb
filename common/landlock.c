/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock.h"

#include "landlock_int.h"

long landlock_abi(void)
{
	return syscall(SYS_landlock_create_ruleset, NULL, 0, OCSB_LANDLOCK_CREATE_RULESET_VERSION);
}

int landlock_scope(uint64_t scoped)
{
	struct ocsb_landlock_attr attr = {.scoped = scoped};
	int fd;

	if (landlock_abi() < 6)
		return 1; /* kernel before 6.12: no scoping; ocsb doctor says so */
	fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (fd < 0)
		return -errno;
	if (syscall(SYS_landlock_restrict_self, fd, 0) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return 0;
}
