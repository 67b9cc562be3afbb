/* SPDX-License-Identifier: MIT */
/*
 * A container's seccomp filter makes a system call fail with the same errno as a kernel
 * without it or a limit: systemd-nspawn's default filter refuses keyctl, mlock (without
 * CAP_IPC_LOCK) and Landlock with EPERM, and ocsb used to say "raise RLIMIT_MEMLOCK" or
 * "kernel too old". This names the filter, and the container's setting that allows the
 * call, in one line. The settings are the containers' documented knobs; which of them a
 * given container needs is said once, here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "fileops.h"
#include "sysblock.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif

static const struct {
	const char *name; /* as seccomp names it */
	int major, minor; /* the first kernel that has it */
	const char *nspawn; /* systemd-nspawn's --system-call-filter= value */
	const char *lxc_list; /* what to take out of an LXC deny list */
} calls[SYSBLOCK_NCALLS] = {
	[SYSBLOCK_KEYCTL] = {"keyctl", 0, 0, "@keyring", "keyctl"},
	[SYSBLOCK_MLOCK] = {"mlock", 0, 0, "@memlock", "mlock"},
	[SYSBLOCK_LANDLOCK] = {"landlock_create_ruleset", 5, 13,
		"'landlock_create_ruleset landlock_add_rule landlock_restrict_self'", "landlock_*"},
};

const char *sysblock_name(enum sysblock_call call)
{
	return call < SYSBLOCK_NCALLS ? calls[call].name : "?";
}

int sysblock_parse_status(const char *status)
{
	for (const char *s = status; s && *s;) {
		if (strncmp(s, "Seccomp:", 8) == 0) {
			char *end;
			long v = strtol(s + 8, &end, 10);

			return end == s + 8 || v < 0 || v > 2 ? -1 : (int)v;
		}
		s = strchr(s, '\n');
		s = s ? s + 1 : NULL;
	}
	return -1;
}

enum sysblock_ct sysblock_ct_from_name(const char *name)
{
	size_t n = name ? strcspn(name, "\n") : 0;

	if (n == 0)
		return SYSBLOCK_CT_NONE;
	if (n == 14 && !strncmp(name, "systemd-nspawn", n))
		return SYSBLOCK_CT_NSPAWN;
	if (n == 6 && !strncmp(name, "docker", n))
		return SYSBLOCK_CT_DOCKER;
	if ((n == 6 && !strncmp(name, "podman", n)) || (n == 3 && !strncmp(name, "oci", n)))
		return SYSBLOCK_CT_PODMAN;
	if (!strncmp(name, "lxc", 3) || (n == 5 && !strncmp(name, "incus", n)))
		return SYSBLOCK_CT_LXC;
	return SYSBLOCK_CT_OTHER;
}

/* container=NAME in an environ block (NUL-separated). */
static enum sysblock_ct ct_from_environ(const char *env, size_t len)
{
	for (size_t i = 0; i < len; i += strnlen(env + i, len - i) + 1)
		if (len - i > 10 && !strncmp(env + i, "container=", 10)) {
			char name[64];

			snprintf(name, sizeof(name), "%.*s",
				(int)strnlen(env + i + 10, len - i - 10), env + i + 10);
			return sysblock_ct_from_name(name);
		}
	return SYSBLOCK_CT_NONE;
}

static enum sysblock_ct ct_detect(void)
{
	char *text = NULL;
	size_t len = 0;
	enum sysblock_ct ct = SYSBLOCK_CT_NONE;
	struct stat st;

	/* systemd writes its $container here in every container it runs in. */
	if (fo_read("/run/systemd/container", 4096, &text, &len) == 0)
		ct = sysblock_ct_from_name(text);
	free(text);
	text = NULL;
	if (ct != SYSBLOCK_CT_NONE)
		return ct;
	if (stat("/.dockerenv", &st) == 0)
		return SYSBLOCK_CT_DOCKER;
	if (stat("/run/.containerenv", &st) == 0)
		return SYSBLOCK_CT_PODMAN;
	if (stat("/dev/lxd", &st) == 0 || stat("/dev/incus", &st) == 0)
		return SYSBLOCK_CT_LXC;
	/* PID 1's environment: readable by root only, where no marker file exists. */
	if (fo_read("/proc/1/environ", 1 << 16, &text, &len) == 0)
		ct = ct_from_environ(text, len);
	free(text);
	return ct;
}

void sysblock_facts(struct sysblock_facts *out)
{
	char *status = NULL, path[64];
	struct utsname u;

	memset(out, 0, sizeof(*out));
	out->seccomp = -1;
	/* By pid: fo_read follows no link, and /proc/self is one. */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)getpid());
	if (fo_read(path, 1 << 16, &status, NULL) == 0)
		out->seccomp = sysblock_parse_status(status);
	free(status);
	if (uname(&u) == 0 &&
		sscanf(u.release, "%d.%d", &out->kernel_major, &out->kernel_minor) != 2)
		out->kernel_major = out->kernel_minor = 0;
	out->ct = ct_detect();
}

static int kernel_before(const struct sysblock_facts *f, int major, int minor)
{
	if (f->kernel_major == 0)
		return 0; /* unknown: not provably too old */
	return f->kernel_major < major || (f->kernel_major == major && f->kernel_minor < minor);
}

enum sysblock_cause sysblock_classify(
	enum sysblock_call call, int err, const struct sysblock_facts *f)
{
	if (call >= SYSBLOCK_NCALLS)
		return SYSBLOCK_OTHER;
	if (err < 0)
		err = -err;
	/* Landlock's own answer for "built in, not in lsm= at boot"; no filter says it. */
	if (call == SYSBLOCK_LANDLOCK && err == EOPNOTSUPP)
		return SYSBLOCK_LSM_OFF;
	if (err == ENOSYS && kernel_before(f, calls[call].major, calls[call].minor))
		return SYSBLOCK_KERNEL;
	/* Filters answer EPERM (nspawn, Docker) or ENOSYS (LXC's "errno 38"). */
	if (f->seccomp == 2 && (err == EPERM || err == EACCES || err == ENOSYS))
		return SYSBLOCK_SECCOMP;
	if (err == ENOSYS)
		return SYSBLOCK_KERNEL;
	return SYSBLOCK_OTHER;
}

static int setting(char *buf, size_t n, enum sysblock_call call, enum sysblock_ct ct)
{
	const char *name = calls[call].name, *nspawn = calls[call].nspawn;

	switch (ct) {
	case SYSBLOCK_CT_NSPAWN:
		return snprintf(buf, n,
			"start the container with systemd-nspawn --system-call-filter=%s "
			"(SystemCallFilter= in the [Exec] section of its .nspawn file)",
			nspawn);
	case SYSBLOCK_CT_DOCKER:
	case SYSBLOCK_CT_PODMAN:
		return snprintf(buf, n,
			"start the container with --security-opt seccomp=unconfined, or a seccomp "
			"profile "
			"(--security-opt seccomp=FILE.json) that allows %s",
			name);
	case SYSBLOCK_CT_LXC:
		return snprintf(buf, n,
			"take %s out of the container's seccomp deny list (Incus/LXD: "
			"security.syscalls.deny; LXC: lxc.seccomp.profile)",
			calls[call].lxc_list);
	default:
		return snprintf(buf, n,
			"allow %s in the container's filter (systemd-nspawn: "
			"--system-call-filter=%s; Docker, Podman: --security-opt "
			"seccomp=unconfined; "
			"Incus/LXD: security.syscalls.deny without it)",
			name, nspawn);
	}
}

static const char *ct_name(enum sysblock_ct ct)
{
	static const char *const names[] = {[SYSBLOCK_CT_NONE] = "a",
		[SYSBLOCK_CT_NSPAWN] = "systemd-nspawn's",
		[SYSBLOCK_CT_DOCKER] = "Docker's",
		[SYSBLOCK_CT_PODMAN] = "Podman's",
		[SYSBLOCK_CT_LXC] = "LXC's",
		[SYSBLOCK_CT_OTHER] = "the container's"};

	return ct <= SYSBLOCK_CT_OTHER ? names[ct] : "a";
}

enum sysblock_cause sysblock_explain(
	char *buf, size_t n, enum sysblock_call call, int err, const struct sysblock_facts *f)
{
	enum sysblock_cause c = sysblock_classify(call, err, f);
	char how[400];

	if (n)
		buf[0] = '\0';
	switch (c) {
	case SYSBLOCK_SECCOMP:
		setting(how, sizeof(how), call, f->ct);
		snprintf(buf, n,
			"%s: %s, refused by %s seccomp filter (the container's, not ocsb's): %s",
			calls[call].name, strerror(err < 0 ? -err : err), ct_name(f->ct), how);
		break;
	case SYSBLOCK_KERNEL:
		if (calls[call].major)
			snprintf(buf, n, "%s: not in this kernel (%d.%d; it needs Linux %d.%d)",
				calls[call].name, f->kernel_major, f->kernel_minor,
				calls[call].major, calls[call].minor);
		else
			snprintf(buf, n, "%s: not in this kernel (%d.%d)", calls[call].name,
				f->kernel_major, f->kernel_minor);
		break;
	case SYSBLOCK_LSM_OFF:
		snprintf(buf, n,
			"Landlock is built into this kernel but not enabled at boot: add landlock "
			"to "
			"lsm= on the kernel command line (/sys/kernel/security/lsm lists the "
			"active "
			"ones)");
		break;
	case SYSBLOCK_OTHER:
		break;
	}
	return c;
}

int sysblock_probe(enum sysblock_call call)
{
	long r = 0;
	void *p;

	switch (call) {
	case SYSBLOCK_KEYCTL:
		r = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0);
		/*
		 * No keyring to name is an answer of the call itself: it is allowed. ENOSYS
		 * (no CONFIG_KEYS, or LXC's "keyctl errno 38") is what the drop lets through
		 * (common/spawn_drop.c): no keyring to inherit, nothing to refuse here either.
		 */
		return r < 0 && errno != ENOKEY && errno != ENOSYS ? errno : 0;
	case SYSBLOCK_MLOCK: {
		long page = sysconf(_SC_PAGESIZE);
		int e = 0;

		p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			-1, 0);
		if (p == MAP_FAILED)
			return 0; /* no memory to try with: nothing learnt */
		if (mlock(p, (size_t)page) < 0)
			e = errno;
		else
			munlock(p, (size_t)page);
		munmap(p, (size_t)page);
		return e;
	}
	case SYSBLOCK_LANDLOCK:
		r = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U /* _VERSION */);
		return r < 0 ? errno : 0;
	default:
		return 0;
	}
}
