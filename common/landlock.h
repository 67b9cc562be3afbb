/* SPDX-License-Identifier: MIT */
#ifndef OCSB_LANDLOCK_H
#define OCSB_LANDLOCK_H

#include <stdint.h>

/*
 * Landlock scopes (ABI 6, kernel 6.12), by raw system calls: Debian 12's headers predate
 * the `scoped` field. Shared by ocsb-agentd (OpenCode: both scopes) and ocsb-shell (the
 * agent's ssh sessions: abstract Unix sockets only). System calls only: safe between fork
 * and exec.
 */
#define OCSB_LANDLOCK_SCOPE_ABSTRACT_UNIX (1ULL << 0)
#define OCSB_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

/* The kernel's Landlock ABI version; <= 0 when Landlock is absent or disabled. */
long landlock_abi(void);
/*
 * Restricts the calling thread (and what it execs) to `scoped`. The caller must have set
 * PR_SET_NO_NEW_PRIVS (or hold CAP_SYS_ADMIN). 0 when applied, 1 when the kernel has no
 * ABI 6 (nothing applied), -errno on failure.
 */
int landlock_scope(uint64_t scoped);

#endif
