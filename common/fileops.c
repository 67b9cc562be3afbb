/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

void (*fo_test_race)(int dirfd, const char *name);

/*
 * A directory that appeared between our failed open and our mkdir is not ours: another
 * process made it, maybe a less privileged one that keeps a descriptor or filled it first.
 * It is adopted (given the owner and mode asked for, through its descriptor) only when it
 * already belongs to root or to the owner asked for; otherwise the walk stops.
 */
static int adopt(int fd, const char *name, uid_t uid)
{
	uid_t want = uid != (uid_t)-1 ? uid : geteuid();
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode) && (st.st_uid == 0 || st.st_uid == want))
		return 0;
	log_err("%s: appeared while it was being created, owned by uid %u (not root or %u): "
		"not adopting it; remove it and try again",
		name, (unsigned)st.st_uid, (unsigned)want);
	return -EPERM;
}

/* Walk `path` component by component; create missing ones when `create`. */
static int walk(int dirfd, const char *path, int create, mode_t mode, uid_t uid, gid_t gid)
{
	char comp[256];
	const char *p = path;
	int fd, r;

	fd = openat(*p == '/' ? AT_FDCWD : dirfd, *p == '/' ? "/" : ".", DIR_FLAGS);
	if (fd < 0)
		return -errno;
	while (*p) {
		const char *end;
		size_t len;
		int next;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchr(p, '/');
		len = end ? (size_t)(end - p) : strlen(p);
		if (len >= sizeof(comp)) {
			close(fd);
			return -ENAMETOOLONG;
		}
		memcpy(comp, p, len);
		comp[len] = '\0';
		p += len;
		/* ".." could climb out of a tree we just checked. */
		if (strcmp(comp, "..") == 0) {
			close(fd);
			return -EINVAL;
		}
		next = openat(fd, comp, DIR_FLAGS);
		if (next < 0 && errno == ENOENT && create) {
			int made;

			if (fo_test_race)
				fo_test_race(fd, comp);
			made = mkdirat(fd, comp, mode) == 0;
			if (!made && errno != EEXIST) {
				r = -errno;
				close(fd);
				return r;
			}
			next = openat(fd, comp, DIR_FLAGS);
			if (next >= 0 && !made && (r = adopt(next, comp, uid)) < 0) {
				close(next);
				close(fd);
				return r;
			}
			if (next >= 0 && (uid != (uid_t)-1 || gid != (gid_t)-1) &&
				fchown(next, uid, gid) < 0) {
				r = -errno;
				close(next);
				close(fd);
				return r;
			}
			/* mkdir's mode is filtered by the umask; set what was asked. */
			if (next >= 0 && fchmod(next, mode) < 0) {
				r = -errno;
				close(next);
				close(fd);
				return r;
			}
		}
		if (next < 0) {
			r = -errno;
			close(fd);
			return r;
		}
		close(fd);
		fd = next;
	}
	return fd;
}

int fo_open_dir(int dirfd, const char *path)
{
	return walk(dirfd, path, 0, 0, (uid_t)-1, (gid_t)-1);
}

int fo_mkdir_p(int dirfd, const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	return walk(dirfd, path, 1, mode, uid, gid);
}

int fo_open_parent(
	int dirfd, const char *path, int create, mode_t mode, char *ret_name, size_t namelen)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	size_t dl;

	if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	if (strlen(name) >= namelen)
		return -ENAMETOOLONG;
	if (!slash) {
		dir[0] = '.';
		dir[1] = '\0';
	} else {
		dl = (size_t)(slash - path);
		if (dl >= sizeof(dir))
			return -ENAMETOOLONG;
		memcpy(dir, path, dl);
		dir[dl] = '\0';
		if (dl == 0)
			strcpy(dir, "/");
	}
	strcpy(ret_name, name);
	return walk(dirfd, dir, create, mode, (uid_t)-1, (gid_t)-1);
}

int fo_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static int write_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
	uid_t uid, gid_t gid, int sync)
{
	char tmp[300];
	int fd, r;

	if (strchr(name, '/') || strlen(name) > 200)
		return -EINVAL;
	for (int attempt = 0;; attempt++) {
		snprintf(tmp, sizeof(tmp), ".%s.%ld.%d", name, (long)getpid(), attempt);
		/* O_EXCL|O_NOFOLLOW: never write through something already there. */
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			break;
		if (errno != EEXIST || attempt > 100)
			return -errno;
	}
	r = fo_write_all(fd, data, len);
	if (r == 0 && (uid != (uid_t)-1 || gid != (gid_t)-1) && fchown(fd, uid, gid) < 0)
		r = -errno;
	if (r == 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r == 0 && sync && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	if (!sync)
		return 0;
	/* The rename itself must survive a crash. */
	if (dirfd == AT_FDCWD) {
		int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (cwd < 0)
			return -errno;
		r = fsync(cwd) < 0 ? -errno : 0;
		close(cwd);
		return r;
	}
	return fsync(dirfd) < 0 ? -errno : 0;
}

int fo_write_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode, uid_t uid,
	gid_t gid)
{
	return write_at(dirfd, name, data, len, mode, uid, gid, 1);
}

int fo_write_at_nosync(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
	uid_t uid, gid_t gid)
{
	return write_at(dirfd, name, data, len, mode, uid, gid, 0);
}

int fo_read_fd(int fd, size_t max, char **ret_data, size_t *ret_len)
{
	struct stat st;
	char *data = NULL;
	size_t len = 0, cap = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((size_t)st.st_size > max)
		return -EFBIG;
	for (;;) {
		ssize_t n;

		if (len + 4097 > cap) {
			char *d;

			cap = cap ? cap * 2 : 8192;
			d = realloc(data, cap);
			if (!d) {
				free(data);
				return -ENOMEM;
			}
			data = d;
		}
		n = read(fd, data + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int r = -errno;
			free(data);
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) {
			free(data);
			return -EFBIG;
		}
	}
	data[len] = '\0';
	*ret_data = data;
	if (ret_len)
		*ret_len = len;
	return 0;
}

int fo_read_at(int dirfd, const char *name, size_t max, char **ret_data, size_t *ret_len)
{
	int fd, r;

	/* O_NONBLOCK: a FIFO put in place of the file must not hang us. */
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -errno;
	r = fo_read_fd(fd, max, ret_data, ret_len);
	close(fd);
	return r;
}

int fo_read(const char *path, size_t max, char **ret_data, size_t *ret_len)
{
	char name[256];
	int dfd, r;

	dfd = fo_open_parent(AT_FDCWD, path, 0, 0, name, sizeof(name));
	if (dfd < 0)
		return dfd;
	r = fo_read_at(dfd, name, max, ret_data, ret_len);
	close(dfd);
	return r;
}
