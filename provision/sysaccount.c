/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "provision.h"
#include "spawn.h"
#include "../inject/inject.h"

/*
 * System accounts ocsb-provision makes for one program each (ocsb-npm, ocsb-inject): no
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
			log_err("useradd %s: %s: %s", name,
				r < 0 ? strerror(-r) : spawn_describe(&res, how, sizeof(how)),
				res.output ? res.output : "");
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
