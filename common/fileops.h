/* SPDX-License-Identifier: MIT */
#ifndef OCSB_FILEOPS_H
#define OCSB_FILEOPS_H

#include <stddef.h>
#include <sys/types.h>

/*
 * File operations that never follow a symbolic link anywhere in the path and
 * replace files atomically (temp file + fsync + rename + fsync of the directory).
 * Paths are resolved one component at a time from a directory fd with O_NOFOLLOW:
 * a link planted by a less privileged user makes the call fail with ELOOP or
 * ENOTDIR instead of redirecting a write made by root.
 * All functions return 0 or a negative errno.
 */

/* All of data to fd, through EINTR and short writes: 0 or -errno. */
int fo_write_all(int fd, const void *data, size_t len);

/* Open directory `path` (absolute, or relative to dirfd) without following links. */
int fo_open_dir(int dirfd, const char *path);
/*
 * Like fo_open_dir, creating missing components with mode/uid/gid (uid -1: keep). A component
 * someone else creates at the same moment is adopted only if root or uid (or, with uid -1,
 * the caller) owns it; otherwise -EPERM, logged.
 */
int fo_mkdir_p(int dirfd, const char *path, mode_t mode, uid_t uid, gid_t gid);

/*
 * Open `rel` (relative, no "..") below dirfd with `flags` (O_NOFOLLOW is added), never
 * following a link on the way: openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS) when the kernel
 * has it, else one O_NOFOLLOW component at a time. A link as the last component is opened
 * itself only with O_PATH; otherwise ELOOP. Returns the fd or a negative errno.
 */
int fo_open_beneath(int dirfd, const char *rel, int flags);
/* For tests: 1 makes fo_open_beneath take the component walk, as on a kernel before 5.6. */
extern int fo_no_openat2;

/*
 * chmod the file an O_PATH descriptor holds (fchmod refuses O_PATH before Linux 6.6):
 * through /proc/self/fd, which names that very inode, never a path that could change.
 */
int fo_fchmod_path(int fd, mode_t mode);

/*
 * For tests: called between fo_mkdir_p's failed open of a component and its mkdir, to
 * play the process that creates the directory first.
 */
extern void (*fo_test_race)(int dirfd, const char *name);

/* Split an absolute or relative path into an opened parent dir and the last name. */
int fo_open_parent(
	int dirfd, const char *path, int create, mode_t mode, char *ret_name, size_t namelen);

/*
 * Atomically replace dirfd/name with `len` bytes. A symlink at dirfd/name is replaced
 * itself (rename does not follow it); its target is never written.
 */
/* Atomically replace dirfd/name with `len` bytes, owner uid:gid (-1: caller), mode. */
int fo_write_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode, uid_t uid,
	gid_t gid);
/*
 * The same without fsync of the file or the directory: still atomic for readers (temp
 * file, rename), but a crash may leave the old content. Only for files on tmpfs, or
 * records that may be lost (each costs a journal commit on a disk file system).
 */
int fo_write_at_nosync(int dirfd, const char *name, const void *data, size_t len, mode_t mode,
	uid_t uid, gid_t gid);
/* Same for a full path; parents must exist. */
int fo_write(const char *path, const void *data, size_t len, mode_t mode, uid_t uid, gid_t gid);

/* Read a regular file (no links, at most `max` bytes: -EFBIG beyond). Caller frees. */
int fo_read_at(int dirfd, const char *name, size_t max, char **ret_data, size_t *ret_len);
int fo_read(const char *path, size_t max, char **ret_data, size_t *ret_len);
/* The same from an open descriptor (a regular file, checked with fstat). */
int fo_read_fd(int fd, size_t max, char **ret_data, size_t *ret_len);

/*
 * 1 when dirfd/name is a regular file with exactly this content, mode and owner;
 * 0 when it differs or is missing; negative errno when it cannot be read.
 */
int fo_same_at(int dirfd, const char *name, const void *data, size_t len, mode_t mode, uid_t uid,
	gid_t gid);
int fo_same(const char *path, const void *data, size_t len, mode_t mode, uid_t uid, gid_t gid);

/* Remove a directory tree without following links; a missing one is success. */
int fo_rmtree(const char *path);

/* Remove a file; a missing one is success. */
int fo_unlink(const char *path);

#endif
