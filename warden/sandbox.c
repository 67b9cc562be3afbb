/* SPDX-License-Identifier: MIT */
/*
 * What the uid alone leaves open, closed for OpenCode (docs/escape.md):
 *  - a private mount namespace, set up by the forked child while it is still root:
 *    private /tmp and /dev/shm (no sockets or files of other users there), /proc mounted
 *    again with hidepid=invisible (other users' command lines and processes vanish),
 *    and the host's identifiers (machine-id, boot_id, kernel command line, DMI, disk ids)
 *    replaced by stable per-agent fake values;
 *  - a Landlock scope (abstract Unix sockets, signals): abstract sockets have no file
 *    permissions at all, any uid in the network namespace could connect to them;
 *  - resource limits that need no cgroup: no core files, a bounded process count.
 * The priv_ side writes the fake values once, root-owned, before the fork; the child_
 * side only makes system calls (async-signal-safe).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "warden.h"
#include "fileops.h"
#include "identity.h"
#include "landlock.h"
#include "log.h"

#define SB_NPROC 4096 /* threads count too: OpenCode, its tools and language servers */

int priv_sandbox_prepare(struct warden *w)
{
	struct sandbox *sb = &w->sb;
	char dir[4096];

	/* ocsb-provision writes them (harden); the warden writes nothing the agent reads. */
	if (identity_dir(w->paths.varlib, w->agent.name, dir, sizeof(dir)) < 0 ||
		!identity_complete(w->paths.varlib, w->agent.name)) {
		log_err("%s: the agent's identity files are missing: OpenCode is not started "
			"(run ocsb-provision)",
			dir);
		return -1;
	}
	snprintf(sb->machine_id, sizeof(sb->machine_id), "%s/machine-id", dir);
	snprintf(sb->boot_id, sizeof(sb->boot_id), "%s/boot_id", dir);
	snprintf(sb->cmdline, sizeof(sb->cmdline), "%s/cmdline", dir);
	snprintf(sb->dmi, sizeof(sb->dmi), "%s/dmi", dir);
	sb->ready = 1;
	return 0;
}

/* ---- between fork and exec: system calls only ---- */

static int child_bind(const char *src, const char *dst)
{
	struct stat st;

	if (stat(dst, &st) < 0)
		return errno == ENOENT ? 0 : -errno; /* nothing to hide */
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -errno;
	/* Read-only on top of root-owned 0444 files: the mask itself cannot be changed. */
	if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
		0)
		return -errno;
	return 0;
}

static int child_tmpfs(const char *dst, const char *opts)
{
	struct stat st;

	if (stat(dst, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (mount("ocsb-tmp", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -errno;
	return 0;
}

/* As root, before the privilege drop. */
int child_sandbox_mounts(const struct sandbox *sb)
{
	int r;

	if (!sb->ready)
		return -EINVAL;
	if (unshare(CLONE_NEWNS) < 0)
		return -errno;
	/* Nothing we mount here may propagate back to the host, nor the host's to us. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -errno;
	if ((r = child_tmpfs("/tmp", "mode=1777")) < 0 ||
		(r = child_tmpfs("/var/tmp", "mode=1777")) < 0 ||
		(r = child_tmpfs("/dev/shm", "mode=1777")) < 0 ||
		(r = child_tmpfs("/run/lock", "mode=1777")) < 0)
		return r;
	/* Our own /proc instance: other users' processes (and their argv) are invisible. */
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible") <
		0)
		return -errno;
	if ((r = child_bind(sb->machine_id, "/etc/machine-id")) < 0 ||
		(r = child_bind(sb->machine_id, "/var/lib/dbus/machine-id")) < 0 ||
		(r = child_bind(sb->boot_id, "/proc/sys/kernel/random/boot_id")) < 0 ||
		(r = child_bind(sb->cmdline, "/proc/cmdline")) < 0 ||
		(r = child_bind(sb->dmi, "/sys/devices/virtual/dmi/id")) < 0)
		return r;
	/* Disk serials and filesystem UUIDs as symlink names. */
	if ((r = child_tmpfs("/dev/disk", "mode=0755")) < 0)
		return r;
	return 0;
}

/* As the agent, after the drop (no_new_privs is set). */
int child_sandbox_limits(void)
{
	struct rlimit core = {0, 0}, nproc = {SB_NPROC, SB_NPROC};
	int r;

	if (setrlimit(RLIMIT_CORE, &core) < 0 || setrlimit(RLIMIT_NPROC, &nproc) < 0)
		return -errno;
	r = landlock_scope(OCSB_LANDLOCK_SCOPE_ABSTRACT_UNIX | OCSB_LANDLOCK_SCOPE_SIGNAL);
	return r < 0 ? r : 0; /* 1: kernel before 6.12, no scoping; ocsb doctor says so */
}
