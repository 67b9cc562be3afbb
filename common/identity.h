/* SPDX-License-Identifier: MIT */
#ifndef OCSB_IDENTITY_H
#define OCSB_IDENTITY_H

#include <stddef.h>

/* <varlib>/ocsb/identity/<agent> into ret_dir; 0 or -ENAMETOOLONG. */
int identity_dir(const char *varlib, const char *agent, char *ret_dir, size_t n);
/*
 * ocsb-provision's (identity_make.c): create the agent's fake identity files once
 * (machine-id, boot_id, cmdline, the dmi/ files), all root-owned 0444; existing ones are
 * kept. ret_dir gets the directory. 0 or -errno.
 */
int identity_ensure(const char *varlib, const char *agent, char *ret_dir, size_t n);
/* 1 when every identity file the sandbox mounts exists, root-owned. */
int identity_complete(const char *varlib, const char *agent);

#endif
