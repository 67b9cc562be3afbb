/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CGROUP_H
#define OCSB_CGROUP_H

#include <stdint.h>
#include <sys/types.h>

/*
 * The agent's cgroup: what ocsb-agentd starts as the agent (OpenCode and everything it
 * runs) lives in one cgroup with memory, task and CPU limits, which agentd can freeze as
 * a whole and kill as a whole. Two layouts:
 *  - cgroup v2 (unified): <base>/ocsb-<agent>, where <base> is agentd's own cgroup (a
 *    systemd unit with Delegate=yes; agentd moves itself into <base>/supervisor first,
 *    the "no internal processes" rule) or /sys/fs/cgroup/ocsb when agentd runs in the
 *    root cgroup;
 *  - cgroup v1 (legacy or hybrid): <mount>/<controller>/<own path>/ocsb-<agent> in each of
 *    the memory, pids, cpu and freezer hierarchies.
 * Below agentd's own cgroup, never at the top of the tree: limits the machine puts on
 * agentd (a unit's, a CI runner's) stay over the agent.
 */

enum cg_mode { CG_NONE, CG_V1, CG_V2 };

enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_FREEZER, CG_NCTRL };

struct cg_limits {
	uint64_t memory_max; /* bytes; 0 = no limit */
	unsigned tasks_max; /* 0 = no limit */
	unsigned cpu_percent; /* 100 = one CPU; 0 = no limit */
};

struct cgroup {
	enum cg_mode mode;
	/* v2: dir[0] is the one cgroup; v1: one dir per controller ("" when absent). */
	char dir[CG_NCTRL][1024];
	/* "<dir>/cgroup.procs" per dir, ready for the child between fork and exec. */
	char procs[CG_NCTRL][1040];
	char what[1200]; /* one line for logs and `ocsb status` */
};

/*
 * <run>/ocsb/<agent>/cgroups: the agent cgroup's cgroup.procs files, one per line,
 * written by ocsb-agentd while it runs; the agent's ssh sessions join them (the
 * pam_namespace init script ocsb-provision writes).
 */
#define AGENT_CGROUPS_FILE "cgroups"

/* Where the cgroup file systems are mounted; tests point it elsewhere. */
#define CG_FS_ROOT "/sys/fs/cgroup"

/*
 * Creates (or re-uses, after a crash) the agent's cgroup and writes the limits. A stale
 * cgroup's processes are killed first: they belong to an agentd that died. Returns 0 on
 * success, -ENOTSUP when this machine offers no usable controller (cg->mode = CG_NONE;
 * agentd runs on without), another -errno with err set when setting it up failed.
 */
int cg_setup(struct cgroup *cg, const char *fs_root, const char *agent, const struct cg_limits *lim,
	char *err, size_t errlen);
/*
 * Why no memory, pids or cpu controller could be enabled below dir (cgroup v2), in one
 * line: none delegated to it (what its cgroup.controllers lists; under a unit, own ending
 * in ".service", the cgroups above hold them back, as in a container), or delegated but
 * refused because processes sit in dir. own: this process's cgroup path ("" for the root).
 */
void cg_why_no_controllers(const char *dir, const char *own, char *err, size_t errlen);
/* Rewrites the limits (SIGHUP). */
int cg_set_limits(const struct cgroup *cg, const struct cg_limits *lim, char *err, size_t errlen);
/*
 * Joining from a forked child: the cgroup.procs files are opened before the fork
 * (cg_open_procs: fds[i] = -1 where there is none), the child writes "0" to them
 * (cg_join_fds, a write per file: async-signal-safe), the parent closes its copies.
 */
int cg_open_procs(const struct cgroup *cg, int ret_fds[CG_NCTRL]);
int cg_join_fds(const int fds[CG_NCTRL]);
void cg_close_procs(int fds[CG_NCTRL]);
/* Moves pid (a whole thread group) into the cgroup. */
int cg_attach(const struct cgroup *cg, pid_t pid);
/* Freezes (on = 1) or thaws the cgroup. A process moved into a frozen cgroup freezes. */
int cg_freeze(const struct cgroup *cg, int on);
/* 1 when pid is in the cgroup (the first controller's), 0 otherwise. */
int cg_contains(const struct cgroup *cg, pid_t pid);
/* How many processes the cgroup holds, -errno on error. */
int cg_count(const struct cgroup *cg);
/*
 * SIGKILLs every process in the cgroup and waits (bounded) until it is empty. Thaws it
 * first: a frozen task cannot die. Returns the number killed or -EBUSY.
 */
int cg_kill_all(const struct cgroup *cg);
/* Kills what is left and removes the cgroup directories. */
int cg_remove(struct cgroup *cg);

#endif
