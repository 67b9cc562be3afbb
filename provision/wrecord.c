/* SPDX-License-Identifier: MIT */
/*
 * ocsb-provision --warden-config[=start]: what ocsb-warden runs at its start and on each
 * reload, so that the long-lived root process holds neither a reader of ocsb.conf nor
 * the checks of what provisioning made. ocsb.conf is read and checked as a provisioning
 * run reads it; the supervisor's state must be its account's (the warden refuses a
 * supervisor that could not write its keys, its logs or the mirror); then the values the
 * warden uses are printed as the record of wconf.h. A refusal is one line "error
 * MESSAGE" (the warden logs it). Nothing is changed, except with `start`: a proxy a
 * provisioning run started while no supervisor ran is stopped, as the supervisor starts
 * its own.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "log.h"
#include "paths.h"
#include "provision.h"
#include "proxy.h"
#include "wconf.h"

/* 0 when path is the supervisor's directory (dir) or file; else the error line, and -1. */
static int sup_owns(const struct user_info *sup, const char *path, int dir)
{
	struct user_info u;
	struct stat st;

	if (lstat(path, &st) < 0) {
		printf("error %s: %s: run ocsb-provision\n", path, strerror(errno));
		return -1;
	}
	if (!(dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) {
		printf("error %s is not a %s: run ocsb-provision\n", path,
			dir ? "directory" : "file");
		return -1;
	}
	if (st.st_uid == sup->uid)
		return 0;
	if (user_lookup_uid(st.st_uid, &u) < 0)
		snprintf(u.name, sizeof(u.name), "uid %u", (unsigned)st.st_uid);
	printf("error %s belongs to %s, not to %s: run ocsb-provision\n", path, u.name,
		AGENTD_USER);
	return -1;
}

/* ocsb-provision makes these (an earlier version's are given to the account). */
static int sup_state(const struct paths *p, const struct ocsb_config *c)
{
	static const char *const rel[] = {"ocsb/agentd", "ocsb/squid"};
	char path[4096], name[160];
	struct user_info sup;

	if (user_lookup(AGENTD_USER, &sup) < 0 || sup.uid == 0) {
		printf("error the supervisor's account %s does not exist: run ocsb-provision "
		       "first\n",
			AGENTD_USER);
		return -1;
	}
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++)
		if (path_join(path, sizeof(path), p->varlib, rel[i]) < 0 ||
			sup_owns(&sup, path, 1) < 0)
			return -1;
	if (sup_owns(&sup, AGENTD_LOG_DIR, 1) < 0)
		return -1;
	/* The mirror's directory and status file: made by provisioning with a mirror only. */
	for (int f = 0; f < 2 && c->mirror.paths.n; f++) {
		snprintf(name, sizeof(name), "ocsb/mirror/%s%s", c->agent, f ? ".status" : "");
		if (path_join(path, sizeof(path), p->varlib, name) < 0 ||
			sup_owns(&sup, path, !f) < 0)
			return -1;
	}
	return 0;
}

int prov_warden_config(const char *path, int start)
{
	struct ocsb_config c;
	struct paths paths;
	struct proxy px;
	struct buf out = {0};
	char def[4096], err[1024];
	int r;

	paths_default(&paths);
	if (!path && path_join(def, sizeof(def), paths.etc, "ocsb/ocsb.conf") == 0)
		path = def;
	config_defaults(&c);
	/* The file's errors name it already; config_validate's do not. */
	if (!path || (r = config_load(&c, path, err, sizeof(err))) < 0)
		printf("error %s%s\n", path ? err : "ocsb.conf: path too long",
			path && r == -ENOENT ? " (run ocsb-provision first)" : "");
	else if (config_validate(&c, err, sizeof(err)) < 0)
		printf("error %s: %s\n", path, err);
	else if (!c.owner[0])
		printf("error %s: no owner: run ocsb-provision first\n", path);
	else if (sup_state(&paths, &c) == 0 && config_render_warden(&c, &out) == 0) {
		if (start && proxy_init(&px, &paths, c.proxy_port) == 0 &&
			proxy_stop(&px, 3000) < 0)
			log_warn("a stale squid (pid file %s) did not stop", px.pidfile);
		fwrite(out.data, 1, out.len, stdout);
	}
	r = out.len > 0 ? 0 : 1;
	buf_free(&out);
	config_free(&c);
	return fflush(stdout) == 0 ? r : 1;
}
