/* SPDX-License-Identifier: MIT */
/*
 * File operations inside a tree (fileops.h) that only the programs which replace or remove
 * files use: an open beneath a directory, a write by path, the comparison before a
 * rewrite, removal. The walk, the writes at a directory and the reads are in fileops.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileops.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) /* as fileops.c's */

int fo_no_openat2;

int fo_open_beneath(int dirfd, const char *rel, int flags)
{
	char name[256];
	int pfd, fd;

	if (!*rel || rel[0] == '/')
		return -EINVAL;
	flags |= O_NOFOLLOW | O_CLOEXEC;
#ifdef SYS_openat2
	if (!fo_no_openat2) {
		struct open_how how = {
			.flags = (unsigned)flags,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS)
			return -errno;
	}
#endif
	/* No openat2: every directory on the way opened O_NOFOLLOW, ".." refused. */
	pfd = fo_open_parent(dirfd, rel, 0, 0, name, sizeof(name));
	if (pfd < 0)
		return pfd;
	fd = openat(pfd, name, flags);
	if (fd < 0)
		fd = -errno;
	close(pfd);
	return fd;
}

int fo_fchmod_path(int fd, mode_t mode)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return chmod(proc, mode) < 0 ? -errno : 0;
}

int fo_write(const char *path, const void *data, size_t len, mode_t mode, uid_t uid, gid_t gid)
{
	char name[256];
	int dfd, r;

	dfd = fo_open_parent(AT_FDCWD, path, 0, 0, name, sizeof(name));
	if (dfd < 0)
		return dfd;
	r = fo_write_at(dfd, name, data, len, mode, uid, gid);
	close(dfd);
	return r;
}

int fo_same_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode, uid_t uid,
	gid_t gid)
{
	struct stat st;
	char *cur = NULL;
	size_t curlen = 0;
	int r;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode) || (st.st_mode & 07777) != mode ||
		(uid != (uid_t)-1 && st.st_uid != uid) || (gid != (gid_t)-1 && st.st_gid != gid) ||
		(size_t)st.st_size != len)
		return 0;
	r = fo_read_at(dirfd, name, len + 1, &cur, &curlen);
	if (r < 0)
		return r == -EFBIG ? 0 : r;
	r = curlen == len && memcmp(cur, data, len) == 0;
	free(cur);
	return r;
}

int fo_same(const char *path, const void *data, size_t len, mode_t mode, uid_t uid, gid_t gid)
{
	char name[256];
	int dfd, r;

	dfd = fo_open_parent(AT_FDCWD, path, 0, 0, name, sizeof(name));
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	r = fo_same_at(dfd, name, data, len, mode, uid, gid);
	close(dfd);
	return r;
}

int fo_unlink(const char *path)
{
	char name[256];
	int dfd, r = 0;

	dfd = fo_open_parent(AT_FDCWD, path, 0, 0, name, sizeof(name));
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return dfd;
	if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
		r = -errno;
	else if (fsync(dfd) < 0)
		r = -errno;
	close(dfd);
	return r;
}

/* Empty the directory dfd (consumed), descending with O_NOFOLLOW: links are removed, never followed. */
static int rm_contents(int dfd, int depth)
{
	DIR *d;
	struct dirent *e;
	int r = 0;

	if (depth > 64) {
		close(dfd);
		return -ELOOP;
	}
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((e = readdir(d)) != NULL) {
		int sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			r = -errno;
			continue;
		}
		sub = openat(dirfd(d), e->d_name, DIR_FLAGS);
		if (sub < 0) {
			r = -errno;
			continue;
		}
		if (rm_contents(sub, depth + 1) < 0)
			r = -EIO;
		if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) < 0)
			r = -errno;
	}
	closedir(d);
	return r;
}

int fo_rmtree(const char *path)
{
	char name[256];
	int pfd, dfd, r;

	pfd = fo_open_parent(AT_FDCWD, path, 0, 0, name, sizeof(name));
	if (pfd == -ENOENT)
		return 0;
	if (pfd < 0)
		return pfd;
	dfd = openat(pfd, name, DIR_FLAGS);
	if (dfd < 0) {
		r = errno == ENOENT ? 0 : -errno;
		/* Not a directory (or a link to one): remove the entry itself. */
		if (errno == ENOTDIR || errno == ELOOP)
			r = unlinkat(pfd, name, 0) < 0 ? -errno : 0;
		close(pfd);
		return r;
	}
	r = rm_contents(dfd, 0);
	if (r == 0 && unlinkat(pfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	close(pfd);
	return r;
}
