/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirs.h"
#include "fileops.h"
#include "log.h"
#include "provision.h"
#include "spawn.h"
/* conf/ocsb-agentd.service.in with the install's sbin directory: the unit's one text. */
#include "unit_text.h"

/*
 * Where systemd runs, ocsb-agentd becomes a service, and the agent's user slice gets a
 * second network layer that survives an nftables flush: IPAddressDeny=any with only
 * loopback allowed (the proxy). Without systemd, the supervisor runs in the foreground
 * (sudo ocsb-warden --foreground) and nothing here applies.
 *
 * The unit's text exists once (conf/ocsb-agentd.service.in). The Debian package installs
 * it under /lib or /usr/lib/systemd/system and provisioning only enables it; a `make
 * install` has no packaged copy, so provisioning writes it to /etc/systemd/system with
 * the header below, which also marks a copy in /etc as ours to replace or remove.
 */

#define UNIT_NAME "ocsb-agentd.service"
#define UNIT_HEADER "# Written by ocsb-provision; edits are overwritten.\n"
#define WANTS_REL "systemd/system/multi-user.target.wants/" UNIT_NAME

int systemd_render_unit(struct buf *out)
{
	return buf_puts(out, UNIT_HEADER) < 0 || buf_puts(out, unit_text) < 0 ? -1 : 0;
}

int systemd_unit_is_ours(const char *text, size_t len)
{
	size_t n = strlen(UNIT_HEADER);

	return len >= n && memcmp(text, UNIT_HEADER, n) == 0;
}

int systemd_packaged_unit(const struct paths *p, char *ret, size_t n)
{
	/* Debian 13's debhelper installs under /usr/lib, Debian 12's under /lib. */
	static const char *const dirs[] = {"usr/lib/systemd/system", "lib/systemd/system"};
	char dir[4096];
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		if (path_join(dir, sizeof(dir), p->pkgroot[0] ? p->pkgroot : "/", dirs[i]) < 0 ||
			path_join(ret, n, dir, UNIT_NAME) < 0)
			return -ENAMETOOLONG;
		if (stat(ret, &st) == 0 && S_ISREG(st.st_mode))
			return 1;
	}
	ret[0] = '\0';
	return 0;
}

int systemd_render_slice(const struct ocsb_config *c, struct buf *out)
{
	uint64_t mem;
	unsigned tasks, cpu;
	int r = 0;

	config_limits(c, &mem, &tasks, &cpu);
	r |= buf_puts(out,
		"# Written by ocsb-provision; edits are overwritten.\n"
		"# A second layer under the nftables netlock: even with the table\n"
		"# flushed, the agent's sessions reach nothing but loopback.\n"
		"[Slice]\n"
		"IPAddressDeny=any\n"
		"IPAddressAllow=localhost\n"
		"# The limits of ocsb.conf (limit-memory, limit-tasks, limit-cpu) for the\n"
		"# agent's ssh sessions; what ocsb-agentd runs has the same in its own cgroup.\n");
	if (mem)
		r |= buf_printf(out, "MemoryMax=%llu\n", (unsigned long long)mem);
	else
		r |= buf_puts(out, "MemoryMax=infinity\n");
	if (tasks)
		r |= buf_printf(out, "TasksMax=%u\n", tasks);
	else
		r |= buf_puts(out, "TasksMax=infinity\n");
	if (cpu)
		r |= buf_printf(out, "CPUQuota=%u%%\n", cpu);
	else
		r |= buf_puts(out, "CPUQuota=\n");
	return r ? -1 : 0;
}

/* <etc>/systemd/system/ocsb-agentd.service: 1 ours (our header), 0 absent, 2 the admin's. */
static int etc_unit_state(struct prov *p, char *path, size_t n)
{
	char *data = NULL;
	size_t len = 0;
	int r;

	if (path_join(path, n, p->paths.etc, "systemd/system/" UNIT_NAME) < 0)
		return -ENAMETOOLONG;
	r = fo_read(path, 1 << 16, &data, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return 2; /* unreadable or odd (a link, a directory): not ours to touch */
	r = systemd_unit_is_ours(data, len) ? 1 : 2;
	free(data);
	return r;
}

int systemd_slice_paths(struct prov *p, uid_t uid, char *dir, size_t dn, char *file, size_t fn)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "systemd/system/user-%u.slice.d", (unsigned)uid);
	if (path_join(dir, dn, p->paths.etc, rel) < 0 || path_join(file, fn, dir, "ocsb.conf") < 0)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * The agent gets no user manager: <etc>/systemd/system/user@UID.service is a link to
 * /dev/null (masked). What it would run (systemd-run --user, systemctl --user units, the
 * services a lingering user keeps) would live outside ocsb-agentd's cgroup: its limits,
 * its freezer, and the stop that ends everything of the agent. Logins still work: logind
 * goes on without the user manager. Lingering is dropped as well (a masked manager runs
 * nothing, but a linger file says otherwise to whoever reads it).
 */
static int mask_path(struct prov *p, uid_t uid, char *path, size_t n)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "systemd/system/user@%u.service", (unsigned)uid);
	return path_join(path, n, p->paths.etc, rel) < 0 ? -ENAMETOOLONG : 0;
}

/* 1 when path is a link to /dev/null (masked), 0 absent, 2 something else. */
static int mask_state(const char *path)
{
	char t[32];
	ssize_t k = readlink(path, t, sizeof(t) - 1);
	struct stat st;

	if (k == 9 && memcmp(t, "/dev/null", 9) == 0)
		return 1;
	return lstat(path, &st) < 0 && errno == ENOENT ? 0 : 2;
}

static int mask_user_manager(struct prov *p, int *changed)
{
	char path[4096], tmp[4200];
	int dfd, st;

	if (mask_path(p, p->agent.uid, path, sizeof(path)) < 0)
		return -1;
	st = mask_state(path);
	if (st == 1)
		return 0;
	if (st == 2) {
		log_err("%s exists and is not a mask (a link to /dev/null): the agent would get a "
			"user manager outside ocsb-agentd's cgroup; remove it, then run "
			"ocsb-provision again",
			path);
		return -1;
	}
	if (!prov_change(p, "mask user@%u.service: %s gets no user manager (systemd-run "
			    "--user, systemctl --user and lingering run nothing)",
		    (unsigned)p->agent.uid, p->agent.name))
		return 0;
	dfd = prov_parent_dir(path);
	if (dfd < 0)
		return -1;
	close(dfd);
	snprintf(tmp, sizeof(tmp), "%s.ocsb-tmp", path);
	unlink(tmp);
	if (symlink("/dev/null", tmp) < 0 || rename(tmp, path) < 0) {
		log_err("%s: %s", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	*changed = 1;
	prov_done(p);
	return 0;
}

static int drop_linger(struct prov *p)
{
	char path[4096], rel[300];
	struct stat st;

	snprintf(rel, sizeof(rel), "systemd/linger/%s", p->agent.name);
	if (path_join(path, sizeof(path), p->paths.varlib, rel) < 0)
		return -1;
	if (lstat(path, &st) < 0)
		return 0;
	return prov_remove_file(p, path, "the agent's lingering (loginctl enable-linger)");
}

static int systemd_running(void)
{
	struct stat st;

	return stat("/run/systemd/system", &st) == 0;
}

void systemd_note(struct prov *p)
{
	/* Said after a run that changed something, while no supervisor answers. */
	if (!systemd_running() && p->mode == PROV_APPLY && p->changes &&
		!prov_agentd_running(p))
		printf("note: no systemd here: run the supervisor with "
		       "'sudo ocsb-warden --foreground' (docs/install.md: Without systemd)\n");
}

int systemd_ensure(struct prov *p)
{
	const char *reload[] = {"/usr/bin/systemctl", "daemon-reload", NULL};
	const char *enable[] = {"/usr/bin/systemctl", "enable", "--now", UNIT_NAME, NULL};
	struct buf unit = {0}, slice = {0};
	char upath[4096], spath[4096], sdir[4096], packaged[4096], wants[4096];
	struct stat st;
	/* prov_write_file and prov_remove_file act only in these modes. */
	int acting = p->mode == PROV_APPLY || p->mode == PROV_REMOVE;
	int changed = 0, r = -1, ours;

	if (!systemd_running())
		return 0; /* systemd_note() says what to do instead, at the end of the run */
	if (path_join(wants, sizeof(wants), p->paths.etc, WANTS_REL) < 0 ||
		systemd_packaged_unit(&p->paths, packaged, sizeof(packaged)) < 0 ||
		systemd_slice_paths(p, p->agent.uid, sdir, sizeof(sdir), spath, sizeof(spath)) < 0)
		return -1;
	ours = etc_unit_state(p, upath, sizeof(upath));
	if (ours < 0)
		return -1;
	if (packaged[0]) {
		/* The package's unit is the one: a copy an older ocsb wrote would shadow it. */
		if (ours == 1) {
			if (prov_remove_file(p, upath, "the old unit copy") < 0)
				return -1;
			changed = acting;
		}
	} else {
		if (systemd_render_unit(&unit) < 0)
			goto out;
		if (prov_write_file(p, upath, &unit, 0644, &changed) < 0)
			goto out;
	}
	if (p->agent_exists) {
		if (systemd_render_slice(&p->cfg, &slice) < 0 ||
			prov_write_file(p, spath, &slice, 0644, &changed) < 0 ||
			mask_user_manager(p, &changed) < 0 || drop_linger(p) < 0)
			goto out;
	}
	r = 0;
	if (changed && prov_exec(p, reload, NULL) < 0)
		r = -1;
	/* Enabled means the wants link exists: `systemctl enable` makes exactly that link. */
	if (r == 0 && (changed || lstat(wants, &st) < 0) &&
		prov_change(
			p, "enable and start %s (%s)", UNIT_NAME, packaged[0] ? packaged : upath)) {
		if (prov_exec(p, enable, NULL) < 0)
			r = -1;
		else
			prov_done(p);
	}
out:
	buf_free(&unit);
	buf_free(&slice);
	return r;
}

/* 1 when `systemctl is-active ocsb-agentd.service` says so (systemd running), else 0. */
static int unit_active(void)
{
	const char *argv[] = {"/usr/bin/systemctl", "is-active", "--quiet", UNIT_NAME, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 20000};
	struct spawn_result res;
	int active;

	if (!systemd_running() || spawn_run(argv, &o, &res) < 0)
		return 0;
	active = res.status == 0;
	spawn_result_free(&res);
	return active;
}

int systemd_stop_agentd(struct prov *p)
{
	const char *stop[] = {"/usr/bin/systemctl", "stop", UNIT_NAME, NULL};

	/*
	 * Provisioning enabled and started the unit: undoing it stops it first (a running
	 * supervisor would put the table back and restart OpenCode during the removal). A
	 * supervisor started by hand is not ours to stop: the caller refuses then.
	 */
	if (!unit_active() || !prov_change(p, "stop %s", UNIT_NAME))
		return 0;
	if (prov_exec(p, stop, NULL) < 0)
		return -1;
	prov_done(p);
	return 1;
}

int systemd_start_agentd(struct prov *p)
{
	const char *start[] = {"/usr/bin/systemctl", "start", UNIT_NAME, NULL};

	if (!systemd_running() ||
		!prov_change(p, "start %s again (other agents remain)", UNIT_NAME))
		return 0;
	if (prov_exec(p, start, NULL) < 0)
		return -1;
	prov_done(p);
	return 0;
}

int systemd_remove(struct prov *p, int last_agent)
{
	const char *reload[] = {"/usr/bin/systemctl", "daemon-reload", NULL};
	const char *disable[] = {"/usr/bin/systemctl", "disable", UNIT_NAME, NULL};
	char upath[4096], spath[4096], sdir[4096], wants[4096];
	struct stat st;
	int running = systemd_running(), changed = 0, r = 0, ours;

	if (p->agent_exists) {
		if (systemd_slice_paths(p, p->agent.uid, sdir, sizeof(sdir), spath, sizeof(spath)) < 0)
			return -1;
		if (lstat(spath, &st) == 0) {
			if (prov_remove_file(p, spath, "the agent's slice limits") < 0)
				return -1;
			rmdir(sdir); /* only when nothing else is in it */
			changed = 1;
		}
		if (mask_path(p, p->agent.uid, spath, sizeof(spath)) < 0)
			return -1;
		if (mask_state(spath) == 1) {
			if (prov_remove_file(p, spath, "the mask of the agent's user manager") < 0)
				return -1;
			changed = 1;
		}
	}
	/* The supervisor serves every agent of the machine: it goes with the last one. */
	if (!last_agent)
		goto reload;
	if (path_join(wants, sizeof(wants), p->paths.etc, WANTS_REL) < 0)
		return -1;
	if (lstat(wants, &st) == 0 && prov_change(p, "disable %s", UNIT_NAME)) {
		/* Without a running systemd, the link is all `disable` would remove. */
		if (running ? prov_exec(p, disable, NULL) < 0 : fo_unlink(wants) < 0)
			r = -1;
		else
			prov_done(p);
		changed = 1;
	}
	ours = etc_unit_state(p, upath, sizeof(upath));
	if (ours == 1) {
		if (prov_remove_file(p, upath, "the unit") < 0)
			r = -1;
		changed = 1;
	}
reload:
	if (changed && running && prov_exec(p, reload, NULL) < 0)
		r = -1;
	return r;
}
