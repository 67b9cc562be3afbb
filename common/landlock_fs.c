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

uint64_t landlock_fs_rights(long abi)
{
	if (abi <= 0)
		return 0;
	if (abi == 1)
		return (OCSB_LANDLOCK_FS_MAKE_SYM << 1) - 1;
	if (abi == 2)
		return (OCSB_LANDLOCK_FS_REFER << 1) - 1;
	if (abi <= 4)
		return (OCSB_LANDLOCK_FS_TRUNCATE << 1) - 1;
	return (OCSB_LANDLOCK_FS_IOCTL_DEV << 1) - 1;
}

int landlock_ruleset_new(long abi, uint64_t scoped)
{
	struct ocsb_landlock_attr attr = {.handled_access_fs = landlock_fs_rights(abi)};
	size_t len = sizeof(attr.handled_access_fs);
	int fd;

	if (abi <= 0)
		return -EOPNOTSUPP;
	/* Older kernels refuse a longer struct with fields they do not know set. */
	if (abi >= 4) {
		attr.handled_access_net =
			OCSB_LANDLOCK_NET_BIND_TCP | OCSB_LANDLOCK_NET_CONNECT_TCP;
		len = offsetof(struct ocsb_landlock_attr, scoped);
	}
	if (abi >= 6) {
		attr.scoped = scoped;
		len = sizeof(attr);
	}
	fd = (int)syscall(SYS_landlock_create_ruleset, &attr, len, 0);
	return fd < 0 ? -errno : fd;
}

int landlock_allow_path(int ruleset, const char *path, uint64_t access, long abi)
{
	/* What a rule on a file (not a directory) may carry; the kernel refuses the rest. */
	const uint64_t file_rights = OCSB_LANDLOCK_FS_EXECUTE | OCSB_LANDLOCK_FS_WRITE_FILE |
		OCSB_LANDLOCK_FS_READ_FILE | OCSB_LANDLOCK_FS_TRUNCATE | OCSB_LANDLOCK_FS_IOCTL_DEV;
	struct ocsb_landlock_path_beneath pb;
	struct stat st;
	int fd, e = 0;

	fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		e = -errno;
		goto out;
	}
	access &= landlock_fs_rights(abi);
	if (!S_ISDIR(st.st_mode))
		access &= file_rights;
	pb.allowed_access = access;
	pb.parent_fd = fd;
	if (access &&
		syscall(SYS_landlock_add_rule, ruleset, OCSB_LANDLOCK_RULE_PATH_BENEATH, &pb, 0) <
			0)
		e = -errno;
out:
	close(fd);
	return e;
}

int landlock_enforce(int ruleset)
{
	int e = 0;

	if (syscall(SYS_landlock_restrict_self, ruleset, 0) < 0)
		e = -errno;
	close(ruleset);
	return e;
}
