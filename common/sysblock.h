/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SYSBLOCK_H
#define OCSB_SYSBLOCK_H

#include <stddef.h>

/*
 * Why a system call ocsb needs failed, told apart for the user: a seccomp filter (a
 * container's: systemd-nspawn's, Docker's, LXC's) answers EPERM or ENOSYS, a kernel without
 * the call ENOSYS, a Landlock built in but not enabled at boot EOPNOTSUPP. The facts come
 * from /proc/self/status (Seccomp: 2 = a filter is active), uname and the container's
 * markers; the verdict is a pure function of them (tests/unit/test_sysblock.c). Not linked
 * by ocsb-warden.
 */
enum sysblock_call {
	SYSBLOCK_KEYCTL, /* keyctl: the session keyring of every dropped child (spawn) */
	SYSBLOCK_MLOCK, /* mlock: secrets in locked memory */
	SYSBLOCK_LANDLOCK, /* landlock_create_ruleset: OpenCode's and ocsb-shell's scopes */
	SYSBLOCK_NCALLS
};

enum sysblock_cause {
	SYSBLOCK_OTHER = 0, /* not a block: the call's own error (a limit, a capability) */
	SYSBLOCK_SECCOMP, /* refused by a seccomp filter */
	SYSBLOCK_KERNEL, /* the kernel has no such call */
	SYSBLOCK_LSM_OFF, /* Landlock is built in but not enabled at boot */
};

enum sysblock_ct {
	SYSBLOCK_CT_NONE = 0, /* no container found (or not said) */
	SYSBLOCK_CT_NSPAWN,
	SYSBLOCK_CT_DOCKER,
	SYSBLOCK_CT_PODMAN,
	SYSBLOCK_CT_LXC, /* LXC, LXD, Incus, Proxmox */
	SYSBLOCK_CT_OTHER,
};

struct sysblock_facts {
	int seccomp; /* Seccomp: of /proc/self/status; -1 unknown */
	int kernel_major, kernel_minor; /* 0.0 unknown */
	enum sysblock_ct ct;
};

/* The facts of this process: /proc/self/status, uname, the container markers. */
void sysblock_facts(struct sysblock_facts *out);
/* The Seccomp: field of a /proc/<pid>/status text; -1 when absent. */
int sysblock_parse_status(const char *status);
/* A container named as systemd and OCI runtimes name it ("systemd-nspawn", "docker", ...). */
enum sysblock_ct sysblock_ct_from_name(const char *name);
/* Why `call` failed with errno `err`, given the facts. */
enum sysblock_cause sysblock_classify(
	enum sysblock_call call, int err, const struct sysblock_facts *f);
/*
 * One line for the user: the call, the cause, and the setting that allows it (for the
 * container found, or for each kind when none is). Returns the cause; with
 * SYSBLOCK_OTHER, buf is left empty.
 */
enum sysblock_cause sysblock_explain(
	char *buf, size_t n, enum sysblock_call call, int err, const struct sysblock_facts *f);
/* The call's name as seccomp knows it. */
const char *sysblock_name(enum sysblock_call call);
/*
 * Makes a harmless call of that kind here (keyctl: the session keyring's id; mlock: one
 * page, unlocked again; Landlock: its ABI version): 0 when it works, else the errno.
 */
int sysblock_probe(enum sysblock_call call);

#endif
