/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "provision.h"
#include "spawn.h"
#include "../inject/inject.h"

/*
 * System accounts ocsb-provision makes for one program each (ocsb-npm, ocsb-inject,
 * ocsb-agentd): no
 * login, no home, a group of their own, no supplementary groups. One uid per program, so
 * nothing else can ptrace or signal it, and root can end all of its processes at once.
 * The comment marks the account as ours: one of that name ocsb did not make is refused.
 */
int prov_system_account(const char *name, const char *gecos, int create, uid_t *ret_uid,
	gid_t *ret_gid)
{
	const char *argv[] = {"/usr/sbin/useradd", "--system", "--user-group", "--no-create-home",
		"--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "--comment", gecos,
		name, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 60000};
	struct spawn_result res = {0};
	struct passwd *pw = getpwnam(name);
	char how[64];
	int r;

	if (!pw && !create)
		return -ENOENT;
	if (!pw) {
		r = spawn_run(argv, &o, &res);
		if (r < 0 || res.status != 0) {
			log_output(LOG_LVL_ERR, r < 0 ? NULL : res.output, "useradd %s: %s", name,
				r < 0 ? strerror(-r) : spawn_describe(&res, how, sizeof(how)));
			spawn_result_free(&res);
			return -EIO;
		}
		spawn_result_free(&res);
		pw = getpwnam(name);
	}
	if (!pw || pw->pw_uid == 0 || pw->pw_gid == 0 || pw->pw_uid == 65534 ||
		pw->pw_uid >= 1000 || strcmp(pw->pw_gecos, gecos) != 0) {
		log_err("account %s: %s; remove it (userdel %s) and run again", name,
			pw ? "not the system account ocsb-provision made" : "not found after useradd",
			name);
		return -EPERM;
	}
	*ret_uid = pw->pw_uid;
	*ret_gid = pw->pw_gid;
	return 0;
}

/* ocsb-inject's account: ocsb-agentd starts the injector as it (issue 17). */
int inject_account_ensure(struct prov *p)
{
	uid_t uid;
	gid_t gid;
	int r = prov_system_account(INJ_USER, INJ_GECOS, 0, &uid, &gid);

	if (r == 0 || r != -ENOENT)
		return r == 0 ? 0 : -1;
	if (!prov_change(p, "create the system account %s (the credential injector)", INJ_USER))
		return 0;
	r = prov_system_account(INJ_USER, INJ_GECOS, 1, &uid, &gid);
	prov_done(p);
	return r < 0 ? -1 : 0;
}

/* ocsb-agentd's account (issue 26): ocsb-warden starts the supervisor as it. */
int agentd_account_ensure(struct prov *p)
{
	uid_t uid;
	gid_t gid;
	int r = prov_system_account(AGENTD_USER, AGENTD_GECOS, 0, &uid, &gid);

	if (r == -ENOENT) {
		if (!prov_change(p, "create the system account %s (the supervisor)", AGENTD_USER))
			return 0;
		r = prov_system_account(AGENTD_USER, AGENTD_GECOS, 1, &uid, &gid);
		if (r == 0)
			prov_done(p);
	}
	if (r < 0)
		return -1;
	if (user_lookup(AGENTD_USER, &p->agentd_acct) < 0) {
		log_err("account %s: not found after useradd", AGENTD_USER);
		return -1;
	}
	p->have_agentd_acct = 1;
	return 0;
}

/*
 * Root's files of an earlier version in a directory being given to the account: one
 * level, regular files only, each opened O_PATH|O_NOFOLLOW and checked (root's, one link)
 * before the chown of that very inode. A link or anything else is left alone.
 */
static int adopt_files(int dfd, uid_t uid, gid_t gid)
{
	struct dirent *de;
	DIR *d;
	int fd = dup(dfd), r = 0;

	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		int f;

		if (de->d_name[0] == '.' &&
			(!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
			continue;
		f = openat(dirfd(d), de->d_name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (f < 0)
			continue;
		if (fstat(f, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 && st.st_nlink == 1) {
			if (fchownat(f, "", uid, gid, AT_EMPTY_PATH) < 0)
				r = -errno;
			else if (r >= 0)
				r++;
		}
		close(f);
	}
	closedir(d);
	return r;
}

/* One directory of the account's: made, or given to it with what root left in it. */
static int agentd_dir(struct prov *p, const char *path, mode_t mode)
{
	uid_t uid = p->agentd_acct.uid;
	gid_t gid = p->agentd_acct.gid;
	struct stat st;
	int fd, r;

	if (!p->have_agentd_acct) {
		/* Dry run before the account exists: the plan only. */
		prov_change(p, "make %s (%04o %s)", path, (unsigned)mode, AGENTD_USER);
		return 0;
	}
	if (p->mode != PROV_APPLY) {
		fd = fo_open_dir(AT_FDCWD, path);
		if (fd == -ENOENT) {
			prov_change(p, "make %s (%04o %s)", path, (unsigned)mode, AGENTD_USER);
			return 0;
		}
		if (fd < 0 || fstat(fd, &st) < 0) {
			log_err("%s: %s", path, strerror(fd < 0 ? -fd : errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
		if (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode)
			prov_change(p, "give %s to %s (%04o)", path, AGENTD_USER, (unsigned)mode);
		return 0;
	}
	/* Made root's first (the account gets it below, after its files). */
	fd = fo_mkdir_p(AT_FDCWD, path, mode, 0, 0);
	if (fd < 0 || fstat(fd, &st) < 0) {
		log_err("%s: %s", path, strerror(fd < 0 ? -fd : errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	/*
	 * Root's files first, the directory last: until then it is root's and nothing in it
	 * can change. A directory the warden gave already may still hold root's old files.
	 */
	r = adopt_files(fd, uid, gid);
	if (r >= 0 && (st.st_uid != uid || st.st_gid != gid || (st.st_mode & 07777) != mode)) {
		if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0)
			r = -errno;
		else
			r++;
	}
	close(fd);
	if (r < 0) {
		log_err("%s: owner %s and mode %04o: %s", path, AGENTD_USER, (unsigned)mode,
			strerror(-r));
		return -1;
	}
	if (r > 0) {
		prov_change(p, "give %s to %s (%04o)", path, AGENTD_USER, (unsigned)mode);
		prov_done(p);
	}
	return 0;
}

int agentd_dirs_ensure(struct prov *p)
{
	char dir[4096];
	static const struct {
		const char *rel;
		mode_t mode;
	} state[] = {
		/* its keys, OpenCode passwords: nobody else's */
		{"ocsb/agentd", 0700},
		/* squid.conf, rendered by it, read by squid (proxy) */
		{"ocsb/squid", 0755},
	};

	for (size_t i = 0; i < sizeof(state) / sizeof(state[0]); i++) {
		if (path_join(dir, sizeof(dir), p->paths.varlib, state[i].rel) < 0)
			return -1;
		if (agentd_dir(p, dir, state[i].mode) < 0)
			return -1;
	}
	/* The children's logs: root (ocsb status, ocsb logs) and the account read them. */
	return agentd_dir(p, AGENTD_LOG_DIR, 0750);
}
