/* SPDX-License-Identifier: MIT */
/*
 * Landlock's system calls and structures (linux/landlock.h, ABI 6), for landlock.c (the ABI,
 * scoping: ocsb-warden's children) and landlock_fs.c (file rules: the sync pull's child).
 */
#ifndef OCSB_LANDLOCK_INT_H
#define OCSB_LANDLOCK_INT_H

#include <stdint.h>
#include <sys/syscall.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_restrict_self 446
#endif
/* From linux/landlock.h (ABI 6). */
struct ocsb_landlock_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};
#define OCSB_LANDLOCK_CREATE_RULESET_VERSION (1U << 0)

#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif
#define OCSB_LANDLOCK_RULE_PATH_BENEATH 1

struct ocsb_landlock_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#endif
