/* SPDX-License-Identifier: MIT */
/*
 * An interrupted fetch (SIGKILL, dropped connection) leaves libgit2's temporary pack
 * objects/pack/pack_git2_XXXXXX behind: the repository stays consistent (no ref points
 * into it) but the file can be hundreds of MiB. The next pull removes such files, under
 * a lock of our own so that two ocsb pulls never delete each other's download, and only
 * when no process we can see still has the file open (another libgit2 program).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync.h"

#define SYNC_TMP_PREFIX "pack_git2_"
#define SYNC_TMP_MAX 64 /* candidates looked at per run */

int sync_repo_lock(const char *gitdir, int *ret_fd)
{
	char path[4096];
	int fd;

	if (snprintf(path, sizeof(path), "%s/ocsb-sync.lock", gitdir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	/* O_NOFOLLOW: a planted symlink cannot make us create or truncate anything else. */
	fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;

		close(fd);
		return e == EWOULDBLOCK ? -EBUSY : -e;
	}
	*ret_fd = fd;
	return 0;
}

struct sync_tmp {
	dev_t dev;
	ino_t ino;
	char name[NAME_MAX + 1];
	int busy;
};

/* Mark the candidates some process has open: /proc/PID/fd of every process we may read. */
static void sync_tmp_mark_open(struct sync_tmp *t, size_t n)
{
	DIR *proc = opendir("/proc");
	struct dirent *pe;

	if (!proc) {
		/* Cannot tell: keep everything (a leftover is better than a broken download). */
		for (size_t i = 0; i < n; i++)
			t[i].busy = 1;
		return;
	}
	while ((pe = readdir(proc))) {
		char fdpath[300];
		DIR *fds;
		struct dirent *fe;

		if (pe->d_name[0] < '1' || pe->d_name[0] > '9')
			continue;
		snprintf(fdpath, sizeof(fdpath), "/proc/%s/fd", pe->d_name);
		fds = opendir(fdpath);
		if (!fds)
			continue; /* another user's process, or gone */
		while ((fe = readdir(fds))) {
			struct stat st;

			if (fe->d_name[0] == '.')
				continue;
			if (fstatat(dirfd(fds), fe->d_name, &st, 0) < 0 || !S_ISREG(st.st_mode))
				continue;
			for (size_t i = 0; i < n; i++)
				if (t[i].dev == st.st_dev && t[i].ino == st.st_ino)
					t[i].busy = 1;
		}
		closedir(fds);
	}
	closedir(proc);
}

int sync_clean_tmp_packs(
	const char *objects_dir, const struct timespec *before, unsigned *ret_removed)
{
	struct sync_tmp t[SYNC_TMP_MAX];
	size_t n = 0;
	char path[4096];
	DIR *d;
	struct dirent *e;
	int dfd, r = 0;

	*ret_removed = 0;
	if (snprintf(path, sizeof(path), "%s/pack", objects_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(dfd);
	if (!d) {
		r = -errno;
		close(dfd);
		return r;
	}
	while ((e = readdir(d)) && n < SYNC_TMP_MAX) {
		struct stat st;

		if (strncmp(e->d_name, SYNC_TMP_PREFIX, strlen(SYNC_TMP_PREFIX)) != 0)
			continue;
		/* Only regular files; a symlink or directory of that name is left alone. */
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		/* Written since this run started: someone else's live download. */
		if (st.st_mtim.tv_sec > before->tv_sec ||
			(st.st_mtim.tv_sec == before->tv_sec &&
				st.st_mtim.tv_nsec >= before->tv_nsec))
			continue;
		t[n].dev = st.st_dev;
		t[n].ino = st.st_ino;
		t[n].busy = 0;
		snprintf(t[n].name, sizeof(t[n].name), "%s", e->d_name);
		n++;
	}
	if (n)
		sync_tmp_mark_open(t, n);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (t[i].busy)
			continue;
		/* The same file we looked at (not replaced meanwhile), then gone. */
		if (fstatat(dfd, t[i].name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
			st.st_ino != t[i].ino || st.st_dev != t[i].dev)
			continue;
		if (unlinkat(dfd, t[i].name, 0) == 0)
			(*ret_removed)++;
		else if (errno != ENOENT && !r)
			r = -errno;
	}
	closedir(d);
	return r;
}

/*
 * The pull's quarantine (objects/ocsb-incoming, its packs in pack/): the confined child
 * writes its download there and nowhere else (git's receive-pack does the same with
 * objects/tmp_objdir-incoming-*). Each pull empties it first: under the lock, whatever is
 * there is an interrupted pull's.
 */
static int sync_empty_dir(int dfd, unsigned *ret_removed)
{
	int fd = dup(dfd), r = 0;
	DIR *d;
	struct dirent *e;

	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		close(fd);
		return r;
	}
	rewinddir(d);
	while ((e = readdir(d))) {
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		/* Anything but a directory: a file, or a link the child could not have made. */
		if (!S_ISDIR(st.st_mode) && unlinkat(dfd, e->d_name, 0) == 0 && ret_removed)
			(*ret_removed)++;
	}
	closedir(d);
	return r;
}

/* dir/name as a directory of ours (made 0700 if missing), never through a link. */
static int sync_own_dir(int dirfd, const char *name)
{
	int fd;

	if (mkdirat(dirfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* <objects_dir>/name/pack, made and emptied; its descriptor, or -errno. */
static int sync_work_dir(const char *objects_dir, const char *name, unsigned *ret_removed)
{
	int ofd, ifd, pfd;

	ofd = open(objects_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (ofd < 0)
		return -errno;
	ifd = sync_own_dir(ofd, name);
	close(ofd);
	if (ifd < 0)
		return ifd;
	pfd = sync_own_dir(ifd, "pack");
	close(ifd);
	if (pfd < 0)
		return pfd;
	sync_empty_dir(pfd, ret_removed);
	return pfd;
}

int sync_incoming_prepare(
	const char *objects_dir, char *ret_path, size_t n, int *ret_packfd, unsigned *ret_removed)
{
	int pfd;

	*ret_removed = 0;
	if (snprintf(ret_path, n, "%s/%s", objects_dir, SYNC_INCOMING) >= (int)n)
		return -ENAMETOOLONG;
	pfd = sync_work_dir(objects_dir, SYNC_INCOMING, ret_removed);
	if (pfd < 0)
		return pfd;
	*ret_packfd = pfd;
	return 0;
}

int sync_verified_prepare(const char *objects_dir, char *ret_path, size_t n, int *ret_fd)
{
	int pfd;

	if (snprintf(ret_path, n, "%s/%s", objects_dir, SYNC_VERIFIED) >= (int)n)
		return -ENAMETOOLONG;
	pfd = sync_work_dir(objects_dir, SYNC_VERIFIED, NULL);
	if (pfd < 0)
		return pfd;
	*ret_fd = pfd;
	return 0;
}

/* pack-<40 hex>.<ext>: the names libgit2's indexer gives what it kept. */
static int sync_pack_name(const char *name, const char *ext)
{
	size_t el = strlen(ext);

	return strlen(name) == 5 + GIT_OID_HEXSZ + 1 + el && !strncmp(name, "pack-", 5) &&
		strspn(name + 5, "0123456789abcdef") == GIT_OID_HEXSZ &&
		name[5 + GIT_OID_HEXSZ] == '.' && !strcmp(name + 6 + GIT_OID_HEXSZ, ext);
}

/* Move one regular file, never over an existing one. 0, 1 (one is there), -errno. */
static int sync_move_new(int from, int to, const char *name)
{
	struct stat st;

	if (fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	/*
	 * The mode git and libgit2 give a pack (0444 less the umask): the child's chmod
	 * changed nothing (sync/confine.c). On our descriptor, not by name.
	 */
	{
		int fd = openat(from, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		mode_t mask = umask(0);
		int e = 0;

		umask(mask);
		if (fd < 0)
			return -errno;
		if (fstat(fd, &st) < 0 || fchmod(fd, 0444 & ~mask) < 0)
			e = -errno;
		else if (!S_ISREG(st.st_mode))
			e = -EINVAL;
		close(fd);
		if (e < 0)
			return e;
	}
	if (renameat2(from, name, to, name, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno == EEXIST)
		return 1;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* A file system without RENAME_NOREPLACE: a link fails on an existing name too. */
	if (linkat(from, name, to, name, 0) < 0)
		return errno == EEXIST ? 1 : -errno;
	unlinkat(from, name, 0);
	return 0;
}

int sync_incoming_commit(int packfd, const char *objects_dir, unsigned *ret_moved)
{
	char path[4096];
	DIR *d;
	struct dirent *e;
	int dfd, fd, r = 0;

	*ret_moved = 0;
	if (snprintf(path, sizeof(path), "%s/pack", objects_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = dup(packfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		close(dfd);
		return r;
	}
	rewinddir(d);
	/*
	 * Each pack whose index is there too: the pack first, its index last (git looks for
	 * a pack through its index). A name the owner's store has already is not replaced
	 * (the same name is the same content; a child lying about that must not overwrite a
	 * pack of the owner's): the incoming copy is dropped below.
	 */
	while (r == 0 && (e = readdir(d))) {
		char idx[NAME_MAX + 1];
		struct stat st;
		int m;

		if (!sync_pack_name(e->d_name, "pack"))
			continue;
		snprintf(idx, sizeof(idx), "%.*s.idx", 5 + GIT_OID_HEXSZ, e->d_name);
		if (fstatat(packfd, idx, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		m = sync_move_new(packfd, dfd, e->d_name);
		if (m == 0) {
			/* git 2.41+ writes a reverse index (.rev) too: before the index, as git. */
			char rev[NAME_MAX + 1];

			snprintf(rev, sizeof(rev), "%.*s.rev", 5 + GIT_OID_HEXSZ, e->d_name);
			if (fstatat(packfd, rev, &st, AT_SYMLINK_NOFOLLOW) == 0)
				m = sync_move_new(packfd, dfd, rev);
			if (m >= 0)
				m = sync_move_new(packfd, dfd, idx);
			if (m == 0)
				(*ret_moved)++;
		}
		if (m < 0)
			r = m;
	}
	closedir(d);
	close(dfd);
	sync_empty_dir(packfd, NULL);
	return r;
}

void sync_incoming_clear(int packfd)
{
	sync_empty_dir(packfd, NULL);
}
