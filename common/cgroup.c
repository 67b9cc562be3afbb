/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"
#include "procs.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif

static const char *const ctrl_name[CG_NCTRL] = {"memory", "pids", "cpu", "freezer"};

static int fs_is(const char *path, long magic)
{
	struct statfs s;

	return statfs(path, &s) == 0 && (long)s.f_type == magic;
}

/* Writes s to dir/file (no newline needed for cgroup files). */
static int cg_write(const char *dir, const char *file, const char *s)
{
	char path[1200];
	size_t len = strlen(s);
	int fd, r = 0;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (write(fd, s, len) != (ssize_t)len)
		r = -errno;
	close(fd);
	return r;
}

static int cg_read(const char *dir, const char *file, char *out, size_t n)
{
	char path[1200];
	ssize_t got;
	int fd;

	if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	got = read(fd, out, n - 1);
	close(fd);
	if (got < 0)
		return -errno;
	out[got] = '\0';
	return (int)got;
}

/*
 * This process's cgroup path in the hierarchy that holds `ctrl` (v1), or in the unified
 * one (ctrl NULL), from /proc/self/cgroup: "id:controllers:path".
 */
static int own_path(const char *ctrl, char *out, size_t n)
{
	char line[1400];
	FILE *fp = fopen("/proc/self/cgroup", "re");
	int found = -ENOENT;

	if (!fp)
		return -errno;
	while (found < 0 && fgets(line, sizeof(line), fp)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *nl;

		if (!c2)
			continue;
		*c2 = '\0';
		if ((nl = strchr(c2 + 1, '\n')))
			*nl = '\0';
		if (!ctrl) {
			if (c1[1] != '\0')
				continue;
		} else {
			int hit = 0;

			for (char *t = strtok(c1 + 1, ","); t && !hit; t = strtok(NULL, ","))
				hit = strcmp(t, ctrl) == 0;
			if (!hit)
				continue;
		}
		if (snprintf(out, n, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1) >= (int)n)
			found = -ENAMETOOLONG;
		else
			found = 0;
	}
	fclose(fp);
	return found;
}

static int mkdir_ok(const char *dir)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void set_procs(struct cgroup *cg)
{
	for (int i = 0; i < CG_NCTRL; i++)
		if (cg->dir[i][0])
			snprintf(cg->procs[i], sizeof(cg->procs[i]), "%s/cgroup.procs", cg->dir[i]);
		else
			cg->procs[i][0] = '\0';
}

static int setup_v1(
	struct cgroup *cg, const char *fs_root, const char *agent, char *err, size_t errlen)
{
	char own[900], mnt[1024];

	for (int i = 0; i < CG_NCTRL; i++) {
		int r;

		snprintf(mnt, sizeof(mnt), "%s/%s", fs_root, ctrl_name[i]);
		if (!fs_is(mnt, CGROUP_SUPER_MAGIC) || own_path(ctrl_name[i], own, sizeof(own)) < 0)
			continue;
		if (snprintf(cg->dir[i], sizeof(cg->dir[i]), "%s%s/ocsb-%s", mnt, own, agent) >=
			(int)sizeof(cg->dir[i])) {
			snprintf(err, errlen, "cgroup path too long under %s", mnt);
			return -ENAMETOOLONG;
		}
		if ((r = mkdir_ok(cg->dir[i])) < 0) {
			snprintf(err, errlen, "mkdir %s: %s", cg->dir[i], strerror(-r));
			return r;
		}
	}
	if (!cg->dir[CG_MEMORY][0] && !cg->dir[CG_PIDS][0]) {
		snprintf(err, errlen,
			"no cgroup v1 memory or pids hierarchy under %s and no cgroup v2 there",
			fs_root);
		for (int i = 0; i < CG_NCTRL; i++)
			if (cg->dir[i][0])
				rmdir(cg->dir[i]);
		memset(cg->dir, 0, sizeof(cg->dir));
		return -ENOTSUP;
	}
	cg->mode = CG_V1;
	snprintf(cg->what, sizeof(cg->what), "cgroup v1 %s%s%s%s(%s)",
		cg->dir[CG_MEMORY][0] ? "memory " : "", cg->dir[CG_PIDS][0] ? "pids " : "",
		cg->dir[CG_CPU][0] ? "cpu " : "", cg->dir[CG_FREEZER][0] ? "freezer " : "",
		cg->dir[CG_MEMORY][0] ? cg->dir[CG_MEMORY] : cg->dir[CG_PIDS]);
	return 0;
}

/* Turns on what it can of memory, pids and cpu below dir; returns how many are on. */
static int enable_controllers(const char *dir)
{
	char have[512];
	int on = 0;

	for (int i = 0; i < CG_FREEZER; i++) {
		char add[32];

		snprintf(add, sizeof(add), "+%s", ctrl_name[i]);
		cg_write(dir, "cgroup.subtree_control", add);
	}
	if (cg_read(dir, "cgroup.subtree_control", have, sizeof(have)) > 0)
		for (char *t = strtok(have, " \n"); t; t = strtok(NULL, " \n"))
			for (int i = 0; i < CG_FREEZER; i++)
				on += strcmp(t, ctrl_name[i]) == 0;
	return on;
}

void cg_why_no_controllers(const char *dir, const char *own, char *err, size_t errlen)
{
	char have[512], list[64] = "";
	size_t olen = strlen(own);
	int unit = olen > 8 && !strcmp(own + olen - 8, ".service");

	if (cg_read(dir, "cgroup.controllers", have, sizeof(have)) > 0)
		for (char *t = strtok(have, " \n"); t; t = strtok(NULL, " \n"))
			for (int i = 0; i < CG_FREEZER; i++)
				if (!strcmp(t, ctrl_name[i]))
					snprintf(list + strlen(list), sizeof(list) - strlen(list),
						"%s%s", list[0] ? " " : "", t);
	if (list[0]) {
		/* They reach this cgroup: only "no internal processes" can refuse them. */
		snprintf(err, errlen,
			"cgroup v2: %s may hand %s down but enabling them failed: other "
			"processes sit in that cgroup (controllers go only to a cgroup's children "
			"while it holds no process)",
			dir, list);
	} else if (unit) {
		/*
		 * The unit asks for them (Delegate=yes): the cgroup above holds them back, as
		 * a container's manager does when it delegates none.
		 */
		snprintf(err, errlen,
			"cgroup v2: no memory, pids or cpu controller is delegated to %s (its "
			"cgroup.controllers lists none of them) although the unit asks for them "
			"(Delegate=yes): the cgroups above hold them back, as a container does "
			"whose manager delegates none to it",
			dir);
	} else {
		snprintf(err, errlen,
			"cgroup v2: no memory, pids or cpu controller is delegated to %s (its "
			"cgroup.controllers lists none of them): run ocsb-warden from its systemd "
			"unit, which sets Delegate=yes, or, in a container, have its manager "
			"delegate them",
			dir);
	}
}

static int setup_v2(
	struct cgroup *cg, const char *fs_root, const char *agent, char *err, size_t errlen)
{
	char own[900], base[1024], sup[1100];
	int r;

	if ((r = own_path(NULL, own, sizeof(own))) < 0) {
		snprintf(err, errlen, "cannot find this process's cgroup in /proc/self/cgroup");
		return r;
	}
	if (!own[0]) {
		/* The root cgroup may hold processes and still delegate controllers. */
		snprintf(base, sizeof(base), "%s/ocsb", fs_root);
		if ((r = mkdir_ok(base)) < 0) {
			snprintf(err, errlen, "mkdir %s: %s", base, strerror(-r));
			return r;
		}
		enable_controllers(fs_root);
	} else {
		/*
		 * Our own cgroup (a unit with Delegate=yes): controllers can be handed down
		 * only once no process sits in it, so agentd moves itself to a leaf first.
		 */
		snprintf(base, sizeof(base), "%s%s", fs_root, own);
		if (snprintf(sup, sizeof(sup), "%s/supervisor", base) >= (int)sizeof(sup) ||
			(r = mkdir_ok(sup)) < 0 || (r = cg_write(sup, "cgroup.procs", "0")) < 0) {
			snprintf(err, errlen, "cannot move ocsb-warden into %s/supervisor: %s",
				base, strerror(r < 0 ? -r : ENAMETOOLONG));
			return r < 0 ? r : -ENAMETOOLONG;
		}
	}
	if (enable_controllers(base) == 0) {
		cg_why_no_controllers(base, own, err, errlen);
		return -ENOTSUP;
	}
	if (snprintf(cg->dir[0], sizeof(cg->dir[0]), "%s/ocsb-%s", base, agent) >=
		(int)sizeof(cg->dir[0])) {
		snprintf(err, errlen, "cgroup path too long under %s", base);
		return -ENAMETOOLONG;
	}
	if ((r = mkdir_ok(cg->dir[0])) < 0) {
		snprintf(err, errlen, "mkdir %s: %s", cg->dir[0], strerror(-r));
		return r;
	}
	cg->mode = CG_V2;
	snprintf(cg->what, sizeof(cg->what), "cgroup v2 (%s)", cg->dir[0]);
	return 0;
}

int cg_setup(struct cgroup *cg, const char *fs_root, const char *agent, const struct cg_limits *lim,
	char *err, size_t errlen)
{
	int r, stale;

	memset(cg, 0, sizeof(*cg));
	if (fs_is(fs_root, CGROUP2_SUPER_MAGIC))
		r = setup_v2(cg, fs_root, agent, err, errlen);
	else
		r = setup_v1(cg, fs_root, agent, err, errlen);
	if (r < 0) {
		memset(cg, 0, sizeof(*cg));
		snprintf(cg->what, sizeof(cg->what), "none");
		return r;
	}
	set_procs(cg);
	/* Left by an agentd that was killed: nobody supervises those processes. */
	stale = cg_count(cg);
	if (stale > 0) {
		log_warn("%s: %d process%s left from an earlier run: killing them", cg->what, stale,
			stale == 1 ? "" : "es");
		cg_kill_all(cg);
	}
	return cg_set_limits(cg, lim, err, errlen);
}

int cg_set_limits(const struct cgroup *cg, const struct cg_limits *lim, char *err, size_t errlen)
{
	char v[64];
	int r;

#define SET(i, file, val)                                                                     \
	do {                                                                                  \
		if (cg->dir[i][0] && (r = cg_write(cg->dir[i], file, val)) < 0) {             \
			snprintf(err, errlen, "write %s to %s/%s: %s", val, cg->dir[i], file, \
				strerror(-r));                                                \
			return r;                                                             \
		}                                                                             \
	} while (0)

	if (cg->mode == CG_V2) {
		if (lim->memory_max)
			snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->memory_max);
		else
			snprintf(v, sizeof(v), "max");
		SET(0, "memory.max", v);
		if (lim->tasks_max)
			snprintf(v, sizeof(v), "%u", lim->tasks_max);
		else
			snprintf(v, sizeof(v), "max");
		SET(0, "pids.max", v);
		if (lim->cpu_percent)
			snprintf(v, sizeof(v), "%u 100000", lim->cpu_percent * 1000);
		else
			snprintf(v, sizeof(v), "max 100000");
		SET(0, "cpu.max", v);
	} else if (cg->mode == CG_V1) {
		if (lim->memory_max)
			snprintf(v, sizeof(v), "%llu", (unsigned long long)lim->memory_max);
		else
			snprintf(v, sizeof(v), "-1");
		/*
		 * With swap accounting, memory+swap gets the same limit, or the agent would
		 * page out past it; it must stay >= the memory limit at every step.
		 */
		int memsw = cg->dir[CG_MEMORY][0] &&
			cg_write(cg->dir[CG_MEMORY], "memory.memsw.limit_in_bytes", "-1") == 0;
		SET(CG_MEMORY, "memory.limit_in_bytes", v);
		if (memsw)
			SET(CG_MEMORY, "memory.memsw.limit_in_bytes", v);
		if (lim->tasks_max)
			snprintf(v, sizeof(v), "%u", lim->tasks_max);
		else
			snprintf(v, sizeof(v), "max");
		SET(CG_PIDS, "pids.max", v);
		SET(CG_CPU, "cpu.cfs_period_us", "100000");
		if (lim->cpu_percent)
			snprintf(v, sizeof(v), "%u", lim->cpu_percent * 1000);
		else
			snprintf(v, sizeof(v), "-1");
		SET(CG_CPU, "cpu.cfs_quota_us", v);
	}
#undef SET
	return 0;
}

int cg_open_procs(const struct cgroup *cg, int ret_fds[CG_NCTRL])
{
	int fds[CG_NCTRL];

	for (int i = 0; i < CG_NCTRL; i++)
		fds[i] = -1;
	for (int i = 0; i < CG_NCTRL; i++) {
		if (!cg->procs[i][0])
			continue;
		fds[i] = open(cg->procs[i], O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fds[i] < 0) {
			int e = errno;

			cg_close_procs(fds);
			return -e;
		}
	}
	memcpy(ret_fds, fds, sizeof(fds));
	return 0;
}

int cg_join_fds(const int fds[CG_NCTRL])
{
	for (int i = 0; i < CG_NCTRL; i++)
		if (fds[i] >= 0 && write(fds[i], "0", 1) != 1)
			return -errno;
	return 0;
}

void cg_close_procs(int fds[CG_NCTRL])
{
	for (int i = 0; i < CG_NCTRL; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
	}
}

int cg_attach(const struct cgroup *cg, pid_t pid)
{
	char s[32];
	int r = 0;

	snprintf(s, sizeof(s), "%d", (int)pid);
	for (int i = 0; i < CG_NCTRL; i++) {
		int e;

		if (cg->dir[i][0] && (e = cg_write(cg->dir[i], "cgroup.procs", s)) < 0 && !r)
			r = e;
	}
	return r;
}

static const char *freezer_dir(const struct cgroup *cg)
{
	if (cg->mode == CG_V2)
		return cg->dir[0];
	if (cg->mode == CG_V1 && cg->dir[CG_FREEZER][0])
		return cg->dir[CG_FREEZER];
	return NULL;
}

int cg_freeze(const struct cgroup *cg, int on)
{
	const char *d = freezer_dir(cg);

	if (!d)
		return -ENOTSUP;
	if (cg->mode == CG_V2)
		return cg_write(d, "cgroup.freeze", on ? "1" : "0");
	return cg_write(d, "freezer.state", on ? "FROZEN" : "THAWED");
}

/* The directory whose cgroup.procs lists the agent's processes. */
static const char *list_dir(const struct cgroup *cg)
{
	for (int i = 0; i < CG_NCTRL; i++)
		if (cg->dir[i][0])
			return cg->dir[i];
	return NULL;
}

/* Calls fn for each pid in the cgroup; returns how many, or -errno. */
static int for_each_pid(const struct cgroup *cg, void (*fn)(pid_t, void *), void *ctx)
{
	const char *d = list_dir(cg);
	char path[1200], line[32];
	FILE *fp;
	int n = 0;

	if (!d)
		return -ENOTSUP;
	snprintf(path, sizeof(path), "%s/cgroup.procs", d);
	fp = fopen(path, "re");
	if (!fp)
		return -errno;
	while (fgets(line, sizeof(line), fp)) {
		long pid = strtol(line, NULL, 10);

		if (pid <= 0)
			continue;
		if (fn)
			fn((pid_t)pid, ctx);
		n++;
	}
	fclose(fp);
	return n;
}

struct match {
	pid_t pid;
	int hit;
};

static void match_pid(pid_t pid, void *ctx)
{
	struct match *m = ctx;

	m->hit |= pid == m->pid;
}

int cg_contains(const struct cgroup *cg, pid_t pid)
{
	struct match m = {pid, 0};

	return for_each_pid(cg, match_pid, &m) < 0 ? 0 : m.hit;
}

int cg_count(const struct cgroup *cg)
{
	return for_each_pid(cg, NULL, NULL);
}

/*
 * Pinned (pidfd), then found in the cgroup again, then killed through the pidfd: a pid
 * read from cgroup.procs whose process exited meanwhile may be another's by now, outside
 * the cgroup (see procs.h).
 */
static void kill_pid(pid_t pid, void *ctx)
{
	const struct cgroup *cg = ctx;
	int fd = procs_pidfd(pid);

	if (fd < 0 && fd != -ENOSYS)
		return;
	if (cg_contains(cg, pid))
		procs_pidfd_signal(pid, fd, SIGKILL);
	if (fd >= 0)
		close(fd);
}

int cg_kill_all(const struct cgroup *cg)
{
	int first = cg_count(cg), left = first;

	if (first <= 0)
		return first;
	/* v2 (5.14+): the kernel kills the whole subtree, forks in flight included. */
	if (cg->mode == CG_V2 && cg_write(cg->dir[0], "cgroup.kill", "1") == 0) {
		for (int i = 0; i < 200 && (left = cg_count(cg)) > 0; i++)
			usleep(10000);
		return left > 0 ? -EBUSY : first;
	}
	/*
	 * Elsewhere: freeze so nothing forks between listing and killing, signal every
	 * listed process, then thaw so the signals are delivered. Repeat until empty.
	 */
	for (int i = 0; i < 200 && left > 0; i++) {
		int froze = cg_freeze(cg, 1) == 0;

		for_each_pid(cg, kill_pid, (void *)cg);
		if (froze)
			cg_freeze(cg, 0);
		usleep(10000);
		left = cg_count(cg);
	}
	return left > 0 ? -EBUSY : first;
}

int cg_remove(struct cgroup *cg)
{
	int r = 0;

	if (cg->mode == CG_NONE)
		return 0;
	if (cg_kill_all(cg) == -EBUSY)
		r = -EBUSY;
	for (int i = 0; i < CG_NCTRL; i++) {
		if (!cg->dir[i][0])
			continue;
		/* A dying task may hold the cgroup for a moment after it left the list. */
		for (int t = 0; t < 50 && rmdir(cg->dir[i]) < 0 && errno == EBUSY; t++)
			usleep(10000);
		if (access(cg->dir[i], F_OK) == 0 && !r)
			r = -EBUSY;
	}
	memset(cg, 0, sizeof(*cg));
	snprintf(cg->what, sizeof(cg->what), "none");
	return r;
}
