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
