/* SPDX-License-Identifier: MIT */
#ifndef OCSB_MIRROR_H
#define OCSB_MIRROR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "config.h"
#include "paths.h"
#include "util.h"

/*
 * The read-only mirror of the owner's tool configs (docs/mirror.md).
 *
 * A child that has dropped to the owner walks the configured paths of the owner's home
 * without following links, scans each file for credentials and streams the result to
 * root over a pipe; root writes it into a root-owned tree it opened itself
 * (<varlib>/ocsb/mirror/<agent>/tree, files 0444, dirs 0555) and keeps a manifest so a
 * refresh without changes writes nothing. The agent's home gets symbolic links to the
 * tree, made by a child running as the agent.
 */

#define MIRROR_MAX_FILE (1024 * 1024) /* bytes; larger files are skipped */
#define MIRROR_MAX_TOTAL (64u * 1024 * 1024) /* bytes of content in one tree */
#define MIRROR_MAX_ENTRIES 50000
#define MIRROR_MAX_DEPTH 32
/* Marker file in a writable copy (mirror-writable). */
#define MIRROR_WRITABLE_MARK ".ocsb-writable-copy"

/*
 * What the configuration asks for: struct mirror_spec, config.h, with MIRROR_GITCONFIG and
 * mirror_path_under.
 */

enum mirror_state {
	MS_MIRRORED = 0,
	MS_REDACTED, /* mirrored with values replaced: detail names the keys */
	MS_WITHHELD, /* not mirrored: looks like a credential file */
	MS_SKIPPED, /* not mirrored: type, size, link leaving the tree, error */
};

struct mirror_entry {
	char *path; /* owned; relative to the owner's home */
	char kind; /* 'd' dir, 'f' file, 'l' link, 'g' generated .gitconfig, '-' nothing */
	unsigned char state; /* enum mirror_state */
	uint32_t mode;
	uint64_t size, ino;
	int64_t mtime_ns, ctime_ns;
	char *detail; /* owned; reasons, one per line; NULL = none */
	unsigned char seen; /* reported by the reader in this refresh */
	unsigned char quiet; /* 'd' reported unchanged with its unchanged entries left out */
};

struct mirror_stats {
	unsigned written, removed, unchanged, skipped, withheld, redacted;
	unsigned entries;
	long ms;
};

struct mirror {
	char base[PATH_MAX]; /* <varlib>/ocsb/mirror */
	char dir[PATH_MAX]; /* base/<agent>: root, 0750 root:<agent group> */
	char tree[PATH_MAX]; /* dir/tree */
	char status[PATH_MAX]; /* base/<agent>.status: 0640 root:<owner group> */
	char home[PATH_MAX]; /* the owner's home (source) */
	char agent_home[PATH_MAX];
	char owner[64], agent[64];
	uid_t owner_uid, agent_uid;
	gid_t owner_gid, agent_gid;
	/*
	 * The account the tree belongs to (ocsb-agentd, issue 26): root's callers
	 * (ocsb-provision) set it with mirror_set_account and write through a child running
	 * as it; tree_user[0] == 0 (the supervisor, which is that account, and unit tests):
	 * the writer runs in the caller.
	 */
	char tree_user[64];
	uid_t tree_uid;
	gid_t tree_gid;
	const struct mirror_spec *spec; /* borrowed */
	char fingerprint[80]; /* of the spec: a change forces a full rebuild */
	int drop; /* 0 in unit tests run as the owner themselves */
	/*
	 * 0555 in the programs. The writer is the tree's owner, not root: it gives a directory
	 * u+w while it changes it and 0555 back at the end. 0755 by default when not root
	 * (unit tests: their temporary directories are removed without that dance).
	 */
	mode_t dmode;

	struct mirror_entry *e; /* owned */
	size_t n, cap;
	size_t *slot; /* owned; open addressing, index+1 into e */
	size_t nslot;
	char last_built[32];
	/*
	 * Start (CLOCK_REALTIME, ns) of the last refresh that checked every entry. An entry
	 * whose ctime is not clearly older is "racy" (changed again within one timestamp tick
	 * of being read, git's problem) and is read again, whatever its stat says.
	 */
	int64_t scan_ns;
	int scan_saved; /* the status file holds scan_ns (else it is written next time) */
	const char *by; /* borrowed; the program named in the status file */
	/* For tests: run instead of the reader (a forged answer); NULL in the programs. */
	int (*reader)(void *m, int outfd);
	struct strv changes; /* owned; what the last refresh changed (first 50) */
	struct strv notices; /* owned; new skips, withheld files and redactions */
};

/* Fill paths and identities; no I/O. owner/agent from user_lookup(). */
int mirror_init(struct mirror *m, const struct paths *p, const struct user_info *owner,
	const struct user_info *agent, const struct mirror_spec *spec);
void mirror_free(struct mirror *m);
/* Load the manifest of the last build (missing file: empty, 0). */
int mirror_load(struct mirror *m);
/* The account the tree belongs to (root's callers): 0, or -EINVAL for root or none. */
int mirror_set_account(struct mirror *m, const struct user_info *acct);

/*
 * Root's part (ocsb-provision; the warden at start may call it too): base 0755 root,
 * base/<agent> 0750 <account>:<agent's group>, the status file 0640
 * <account>:<owner's group> (created empty when missing: the account cannot create
 * files in base), all by descriptor; a tree of an earlier version (root's) is given to
 * the account, entry by entry by descriptor, children before their directory, so the
 * tree is root's own until its last step (nothing in it can have been swapped). Needs
 * mirror_set_account. What it changed (dry: would change) in `changes`. 0, or -1 logged.
 */
int mirror_prepare(struct mirror *m, int dry, struct strv *changes);
/*
 * The tree owner's part, before the first reader of a process runs (the supervisor at
 * start): a tree that is not the caller's (root's, of an earlier version, where the
 * provisioning that converts it has not run yet) cannot be changed by the caller; it is
 * renamed aside (<dir>/tree.old-<n>, removed by root: ocsb-provision, the warden) and
 * the manifest dropped, in memory and in the status file, so the reader sends every
 * entry and the next refresh builds a new tree. 1 set aside, 0 nothing to do, -1 logged.
 */
int mirror_own_tree(struct mirror *m);
/* CLOCK_REALTIME in ns: taken before a reader starts, handed to mirror_apply. */
int64_t mirror_scan_start(void);
/*
 * The writer: apply one reader stream (the output of mirror_read_here, whole) to the
 * tree, as the tree's owner: entries, deletions, the status file (rewritten in place,
 * keeping the group root gave it). scan_ns: mirror_scan_start() before the reader ran.
 * m->changes and m->notices are filled. 0, or -1 (logged) with nothing removed.
 */
int mirror_apply(struct mirror *m, const char *stream, size_t len, int dry, int64_t scan_ns,
	struct mirror_stats *ret);
/*
 * The reader, in the calling process, which must already be the owner (ocsb-agentd
 * --mirror-read): the manifest from the status file (mirror_load), the walk from the
 * owner's home, the stream to outfd. 0, or an exit code.
 */
int mirror_read_here(struct mirror *m, int outfd);
/*
 * The link maker, in the calling process, which must already be the agent (ocsb-agentd
 * --mirror-link): links (or writable copies) in the agent's home for each configured
 * path the tree holds, one line each to outfd ("! ..." for a problem). 0 or an exit code.
 */
int mirror_link_here(struct mirror *m, int dry, int remove, int outfd);
/*
 * Read the link maker's output (the agent's: NUL-terminated, lines cut in place): fn gets
 * each line's text, after "! " with problem 1 for a problem line. ocsb-provision and
 * ocsb-agentd both read it through this.
 */
void mirror_link_output(char *out, void (*fn)(void *arg, const char *text, int problem), void *arg);

/*
 * Scan the sources and bring the tree up to date (dry: only count what would change).
 * Writes the status file when anything changed. 0, or -1 with the reason logged.
 */
int mirror_refresh(struct mirror *m, int dry, struct mirror_stats *ret);

/*
 * Make the links in the agent's home (or a writable copy for mirror-writable paths),
 * as a child running as the agent. Each change is described in `changes` (one line each).
 * dry: only describe. 0 or -1.
 */
int mirror_link(struct mirror *m, int dry, struct strv *changes);
/*
 * Root's side, before mirror_link: a configured directory the owner does not have yet gets
 * an empty, root-owned one in the tree, so the agent's place is linked (reserved) from the
 * first run and a real directory the agent's tools would make there never takes it
 * (.gitconfig and writable paths excepted). One line per reservation in changes.
 */
int mirror_reserve(struct mirror *m, int dry, struct strv *changes);
/*
 * One character per configured path, '1' when the tree holds it (or reserves it): a
 * change of this string means the agent's links need the link maker. NUL-terminated.
 */
void mirror_linked(const struct mirror *m, char *out, size_t n);
/* Remove links (only those pointing into our tree) as the agent. */
int mirror_unlink(struct mirror *m, int dry, struct strv *changes);
/* Remove the tree and the status file. */
int mirror_remove(struct mirror *m);

/*
 * Directories to watch for changes (absolute paths): the home and the roots' parents
 * (where a root may appear), and every directory of the last refresh.
 */
int mirror_watch_dirs(const struct mirror *m, struct strv *ret_ancestors, struct strv *ret_dirs);

/* ---- the parts that read the owner's bytes; pure, unit tested (mirror_scan.c) ---- */

/*
 * Secret scan of one file. JSON/JSONC (by name or content) gets credential values replaced
 * by "{env:NAME}" (OpenCode reads them from the environment, where `ocsb secrets` puts
 * them); other files that contain credentials are withheld whole. Returns the state
 * (MS_MIRRORED, MS_REDACTED with `out` set, MS_WITHHELD); notes get one line per finding,
 * naming the key, never the value.
 */
int mirror_scan(
	const char *name, const char *data, size_t len, struct buf *out, struct strv *notes);
/* The .gitconfig subset: user.name, user.email, alias.*, core.editor. Notes: what was dropped. */
int mirror_gitconfig(const char *data, size_t len, struct buf *out, struct strv *notes);
/*
 * 1 when a link at `linkpath` (relative to a tree root, e.g. "agent/x.md") with `target`
 * resolves, lexically, inside the tree; the target rewritten relative in ret (absolute
 * targets below `root_abs` are accepted). 0 otherwise.
 */
int mirror_link_inside(
	const char *linkpath, const char *target, const char *root_abs, char *ret, size_t n);
/*
 * Root's side of the same rule, for a link record from the reader (which runs with the
 * owner's rights and could be subverted): 1 only when `path` lies strictly below one of
 * `roots` and `target` is exactly what mirror_link_inside makes of it there (relative,
 * inside that root, normal form). 0 otherwise: root creates nothing.
 */
int mirror_link_ok(const struct strv *roots, const char *path, const char *target);
/* Printable form of a name: control characters and '\\' escaped (\n, \t, \xNN). */
void mirror_escape(const char *s, struct buf *out);

/* `ocsb mirror status`: print the status file (text or JSON). 0, or -errno. */
int mirror_status_print(const char *status_path, int json, FILE *f);

#endif
