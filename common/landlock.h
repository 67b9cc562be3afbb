/* SPDX-License-Identifier: MIT */
#ifndef OCSB_LANDLOCK_H
#define OCSB_LANDLOCK_H

#include <stdint.h>

/*
 * Landlock by raw system calls: Debian 12's headers predate the `scoped` field and the
 * network rights. Scopes (ABI 6, kernel 6.12) for ocsb-agentd (OpenCode: both scopes) and
 * ocsb-shell (the agent's ssh sessions: abstract Unix sockets only); filesystem and TCP
 * rulesets (any ABI; TCP from ABI 4) for ocsb sync pull's confined child
 * (sync/confine.c). System calls only: safe between fork and exec.
 */
#define OCSB_LANDLOCK_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define OCSB_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

/*
 * Filesystem access rights (linux/landlock.h), defined here for the same reason: a
 * ruleset handles every right its ABI knows, so a right no rule grants is denied.
 */
#define OCSB_LANDLOCK_FS_EXECUTE (1ULL << 0)
#define OCSB_LANDLOCK_FS_WRITE_FILE (1ULL << 1)
#define OCSB_LANDLOCK_FS_READ_FILE (1ULL << 2)
#define OCSB_LANDLOCK_FS_READ_DIR (1ULL << 3)
#define OCSB_LANDLOCK_FS_REMOVE_DIR (1ULL << 4)
#define OCSB_LANDLOCK_FS_REMOVE_FILE (1ULL << 5)
#define OCSB_LANDLOCK_FS_MAKE_CHAR (1ULL << 6)
#define OCSB_LANDLOCK_FS_MAKE_DIR (1ULL << 7)
#define OCSB_LANDLOCK_FS_MAKE_REG (1ULL << 8)
#define OCSB_LANDLOCK_FS_MAKE_SOCK (1ULL << 9)
#define OCSB_LANDLOCK_FS_MAKE_FIFO (1ULL << 10)
#define OCSB_LANDLOCK_FS_MAKE_BLOCK (1ULL << 11)
#define OCSB_LANDLOCK_FS_MAKE_SYM (1ULL << 12)
#define OCSB_LANDLOCK_FS_REFER (1ULL << 13) /* ABI 2 */
#define OCSB_LANDLOCK_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#define OCSB_LANDLOCK_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
/* TCP bind and connect (ABI 4). */
#define OCSB_LANDLOCK_NET_BIND_TCP (1ULL << 0)
#define OCSB_LANDLOCK_NET_CONNECT_TCP (1ULL << 1)

/* The kernel's Landlock ABI version; <= 0 when Landlock is absent or disabled. */
long landlock_abi(void);
/* Every filesystem right ABI abi knows (0 for abi <= 0). */
uint64_t landlock_fs_rights(long abi);
/*
 * A ruleset that handles every filesystem right of abi, TCP bind and connect from ABI 4
 * on (no rule ever grants them: no TCP at all) and `scoped` from ABI 6 on. The ruleset's
 * fd, or -errno.
 */
int landlock_ruleset_new(long abi, uint64_t scoped);
/*
 * Grant `access` beneath path (a directory), or on path itself (a file: only the rights a
 * file takes are kept), masked by what abi handles. Opened with O_PATH: a symbolic link
 * is followed, the rule is on its target. 0, or -errno (-ENOENT: no such path).
 */
int landlock_allow_path(int ruleset, const char *path, uint64_t access, long abi);
/*
 * Restrict the calling thread (and what it forks and execs) to the ruleset, and close it.
 * PR_SET_NO_NEW_PRIVS must be set. 0 or -errno.
 */
int landlock_enforce(int ruleset);
/*
 * Restricts the calling thread (and what it execs) to `scoped`. The caller must have set
 * PR_SET_NO_NEW_PRIVS (or hold CAP_SYS_ADMIN). 0 when applied, 1 when the kernel has no
 * ABI 6 (nothing applied), -errno on failure.
 */
int landlock_scope(uint64_t scoped);

#endif
