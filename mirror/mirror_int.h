/* SPDX-License-Identifier: MIT */
/*
 * Internals of the mirror engine (mirror*.c), shared by its sides: mirror.c (manifest,
 * status file), mirror_owner.c (the reader, with the owner's rights), mirror_priv.c
 * (root's writer), mirror_agent.c (the links, as the agent). Callers outside use mirror.h.
 */
#ifndef OCSB_MIRROR_INT_H
#define OCSB_MIRROR_INT_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileops.h"
#include "json.h"
#include "log.h"
#include "mirror.h"
#include "spawn.h"

#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#define STATUS_MAGIC "ocsb-mirror 1"
#define STATUS_END "end" /* the last line: the file was written whole */
#define STATUS_TAIL "\n" STATUS_END "\n"
#define MAX_CHANGE_LINES 50

/*
 * One record of the reader's stream (mirror_owner.c writes it, mirror_priv.c reads and
 * checks it: the reader runs with the owner's rights and could be subverted).
 */
struct rec {
	/*
	 * 'd' 'f' 'l' 'g', '-' (nothing: skipped/withheld), 'u' unchanged, 'E' end;
	 * 'U': a directory unchanged, its unchanged entries (not directories) left out.
	 */
	char kind;
	unsigned char state;
	uint32_t mode;
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
	const char *path;
	uint32_t pathlen;
	const char *detail;
	uint32_t detaillen;
	const char *data;
	uint32_t datalen;
};

/* ---- the manifest and the status file (mirror.c) ---- */

int mirror_rehash(struct mirror *m, size_t nslot);
/* Drop the manifest: every entry is read and compared again. */
void mirror_forget(struct mirror *m);
struct mirror_entry *mirror_entry_find(const struct mirror *m, const char *path);
struct mirror_entry *mirror_entry_add(struct mirror *m, const char *path);
/* 1 for an entry the tree holds (a directory, file, link or the generated .gitconfig). */
int mirror_entry_on_disk(const struct mirror_entry *e);
/* 1 when `rel` is a mirror-writable path (a copy of the agent's own, not a link). */
int mirror_writable(const struct mirror *m, const char *rel);
/* 1 when the tree holds a directory at `rel` (mirror_reserve made it, or the owner has one). */
int mirror_reserved(const struct mirror *m, const char *rel);
int mirror_render_status(struct mirror *m, const char *by, struct buf *b);
/* `ocsb mirror status` for the manifest in m (loaded from the status file), text or JSON. */
void mirror_status_report(const struct mirror *m, int json, FILE *f);
/*
 * A status file's text (len bytes, data[len] == '\0', lines cut in place): the manifest's
 * entries into m when m (else only checked), the fingerprint and boot id into *ret_fp and
 * *ret_boot when asked (caller frees), *ret_complete whether it ends with its last line.
 * 0, -EINVAL (not a status file, a bad or repeated entry), -ENOMEM.
 */
int mirror_status_parse(struct mirror *m, char *data, size_t len, char **ret_fp, char **ret_boot,
	int *ret_complete);
/* Write the status file (in place when not root, see mirror.c). 0 or -errno. */
int mirror_status_write(struct mirror *m, const char *data, size_t len);

/* ---- the sides ---- */

/* The reader: a child with the owner's rights streams records to outfd (mirror_owner.c). */
int owner_scan_child(void *arg, int outfd);

/* Remove pfd/name and what is below it by descriptor, never following a link (mirror_priv.c). */
int mirror_rm_at(int pfd, const char *name, int own, int depth);
/*
 * The places to reserve for the agent's links in this process (and, unless dry, make them:
 * as the tree's owner); mirror_reserve runs it here or in a child as the account
 * (mirror_priv.c).
 */
int mirror_reserve_here(struct mirror *m, int dry, struct strv *changes);

#endif
