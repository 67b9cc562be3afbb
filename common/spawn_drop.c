/* SPDX-License-Identifier: MIT */
/*
 * The drop (spawn.h): what a child does, between fork and exec, to become another user for
 * good, and its credentials, built before the fork. Its own file so that a program that
 * forks its children itself (ocsb-warden) links the drop without spawn_run's pipes and
 * relays (spawn.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <linux/keyctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawn.h"

int spawn_cred_init(struct spawn_cred *ret, uid_t uid, gid_t gid, const char *user)
{
	struct spawn_cred c = {.uid = uid, .gid = gid, .from_uid = getuid(), .from_gid = getgid()};
	int n = 0, room = 32;

	while (user) {
		gid_t *g = realloc(c.groups, (size_t)room * sizeof(*g));

		if (!g) {
			spawn_cred_free(&c);
			return -ENOMEM;
		}
		c.groups = g;
		n = room;
		errno = 0;
		if (getgrouplist(user, gid, c.groups, &n) >= 0)
			break;
		/* -1 with n raised past room: too small. Anything else is a failed lookup. */
		if (n <= room || n > 65536) {
			spawn_cred_free(&c);
			return errno ? -errno : -EIO;
		}
		room = n;
	}
	c.ngroups = user ? n : 0;
	c.check = malloc(((size_t)c.ngroups + 1) * sizeof(*c.check));
	if (!c.check) {
		spawn_cred_free(&c);
		return -ENOMEM;
	}
	*ret = c;
	return 0;
}

void spawn_cred_free(struct spawn_cred *c)
{
	free(c->groups);
	free(c->check);
	c->groups = c->check = NULL;
	c->ngroups = 0;
}

/* ---- between fork and exec: async-signal-safe calls only ---- */

static void child_say_num(unsigned long v)
{
	char b[24];
	size_t i = sizeof(b);
	ssize_t w;

	do
		b[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i);
	w = write(2, b + i, sizeof(b) - i);
	(void)w;
}

/* "ocsb: spawn: dropped to uid U gid G, but WHAT: not running" on fd 2 (no stdio here). */
static int child_regain(const struct spawn_cred *c, const char *what)
{
	const char *p[] = {"ocsb: spawn: dropped to uid ", " gid ", ", but ",
		": the drop is not permanent, not running\n"};
	ssize_t w;

	w = write(2, p[0], strlen(p[0]));
	child_say_num(c->uid);
	w = write(2, p[1], strlen(p[1]));
	child_say_num(c->gid);
	w = write(2, p[2], strlen(p[2]));
	w = write(2, what, strlen(what));
	w = write(2, p[3], strlen(p[3]));
	(void)w;
	return -SPAWN_EREGAIN;
}

static int child_in(const gid_t *v, int n, gid_t g)
{
	for (int i = 0; i < n; i++)
		if (v[i] == g)
			return 1;
	return 0;
}

/* The ids the drop asked for, and no way back (OpenSSH's permanently_set_uid()). */
static int child_verify(const struct spawn_cred *c)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;
	int n;

	if (getresuid(&ru, &eu, &su) < 0 || ru != c->uid || eu != c->uid || su != c->uid)
		return child_regain(c, "getresuid() names another uid");
	if (getresgid(&rg, &eg, &sg) < 0 || rg != c->gid || eg != c->gid || sg != c->gid)
		return child_regain(c, "getresgid() names another gid");
	n = getgroups(c->ngroups + 1, c->check);
	if (n != c->ngroups)
		return child_regain(c, "getgroups() lists other groups");
	for (int i = 0; i < n; i++)
		if (!child_in(c->groups, c->ngroups, c->check[i]))
			return child_regain(c, "getgroups() lists other groups");
	/*
	 * Each of these succeeds only with CAP_SETGID/CAP_SETUID still held (kept
	 * capabilities, SECBIT_NO_SETUID_FIXUP, a kernel or LSM surprise). The gid first:
	 * root's group would give the agent every root:root 0660 file.
	 */
	if (c->gid != 0 && (setgid(0) == 0 || setegid(0) == 0))
		return child_regain(c, "setgid(0) still works");
	if (c->gid != c->from_gid &&
		(setgid(c->from_gid) == 0 || setegid(c->from_gid) == 0 ||
			setresgid(c->from_gid, c->from_gid, c->from_gid) == 0))
		return child_regain(c, "the caller's gid can be set again");
	if (c->ngroups && setgroups(0, NULL) == 0)
		return child_regain(c, "setgroups() still works");
	if (c->uid != 0 && (setuid(0) == 0 || seteuid(0) == 0))
		return child_regain(c, "setuid(0) still works");
	if (c->uid != c->from_uid &&
		(setuid(c->from_uid) == 0 || seteuid(c->from_uid) == 0 ||
			setresuid(c->from_uid, c->from_uid, c->from_uid) == 0))
		return child_regain(c, "the caller's uid can be set again");
	return 0;
}

int spawn_child_drop(const struct spawn_cred *c)
{
	int r;

	/* Never in the caller's session, whoever forked us (setsid fails for a leader). */
	if (getsid(0) != getpid() && setsid() < 0)
		return -errno;
	if (setgroups((size_t)c->ngroups, c->groups) < 0 || setresgid(c->gid, c->gid, c->gid) < 0 ||
		setresuid(c->uid, c->uid, c->uid) < 0)
		return -errno;
	r = child_verify(c);
	if (r < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	/*
	 * A session keyring of its own: the one inherited (sudo's pam_keyinit makes one for
	 * root) stays possessed across setresuid, with the possessor's rights to root's keys.
	 * Anonymous session keyrings are exempt from the key quota (KEY_ALLOC_QUOTA_OVERRUN),
	 * so a target that filled its quota cannot make this fail. Only ENOSYS (a kernel
	 * without CONFIG_KEYS: no keyring to inherit) is let through; anything else, a
	 * seccomp filter's EPERM too, stops the child.
	 */
	if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) < 0 && errno != ENOSYS)
		return -errno;
	return 0;
}
