/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROVISION_OCPIN_H
#define OCSB_PROVISION_OCPIN_H

#include <stddef.h>

/*
 * The OpenCode tree this build pins (conf/opencode/manifest-linux-x64.txt, made by
 * tools/opencode-lock.sh), and root's takeover of a tree npm staged as another user:
 * copied without following links and checked entry by entry against the manifest.
 *
 * Manifest lines, sorted by path (strcmp), every parent directory listed before its
 * entries:  d MODE - PATH | f MODE SHA256 PATH | l 0777 TARGET PATH
 */
struct ocpin_entry {
	char type; /* 'd', 'f' or 'l' */
	unsigned mode; /* permission bits, 07777 */
	char *val; /* owned; sha256 hex (f), link target (l), NULL (d) */
	char *path; /* owned; relative, no "." or ".." components */
};

struct ocpin_manifest {
	struct ocpin_entry *e; /* owned */
	size_t n;
};

/* npm's own record of what it installed: not taken over, not in the manifest. */
#define OCPIN_SKIP "node_modules/.package-lock.json"
#define OCPIN_MAX_ENTRIES 10000
#define OCPIN_MAX_FILE (512ULL << 20) /* one file (OpenCode's binary: ~180 MB) */
#define OCPIN_MAX_TOTAL (2ULL << 30) /* the whole tree */

/* 0, or -EINVAL with "line N: what" in why. */
int ocpin_parse(const char *text, struct ocpin_manifest *ret, char *why, size_t n);
void ocpin_free(struct ocpin_manifest *m);

/*
 * Walk the tree below srcfd (borrowed) without following links and compare it with m.
 * dstfd >= 0 (borrowed, an empty directory root made): copy it there as it is read, so
 * what is checked is the copy, whatever the source does meanwhile; files are created by
 * root, never with set-id bits, and their hash is taken of the bytes written. dstfd < 0:
 * only check. 1 when the tree is exactly m; 0 when not, with the first offender and what
 * is wrong in why; negative errno on errors (why says on what). Refused whatever m says:
 * anything but directories, regular files and links; hard links; set-id files; links
 * that are absolute or leave the tree; names with control bytes; more than the bounds
 * above.
 */
int ocpin_take(int srcfd, int dstfd, const struct ocpin_manifest *m, char *why, size_t n);

/* 1 when link target `target` of the entry at `path` stays inside the tree, else 0. */
int ocpin_link_inside(const char *path, const char *target);

#endif
