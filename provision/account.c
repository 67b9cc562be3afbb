/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <shadow.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "loginshell.h"
#include "log.h"
#include "netlock.h"
#include "procs.h"
#include "provision.h"
#include "spawn.h"

/*
 * GECOS marks the account as ocsb's and carries umask=077 for pam_umask, so
 * files the agent creates are private by default wherever PAM applies it.
 */
#define AGENT_GECOS "ocsb agent,,,,umask=077"

static int state_path(struct prov *p, char *out, size_t n)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "ocsb/agents/%s", p->cfg.agent);
	return path_join(out, n, p->paths.varlib, rel);
}

/* The value of a "key value" line of the state file, or -ENOENT / -errno. */
static int state_get(struct prov *p, const char *key, char *ret, size_t n)
{
	char path[4096], want[32], *data = NULL, *s;
	int r;

	if (state_path(p, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	r = fo_read(path, 4096, &data, NULL);
	if (r < 0)
		return r;
	snprintf(want, sizeof(want), "\n%s ", key);
	s = strstr(data, want);
	if (s) {
		s += strlen(want);
		snprintf(ret, n, "%.*s", (int)strcspn(s, "\n"), s);
	}
	free(data);
	return s ? 0 : -ENOENT;
}

/* The state file says ocsb made (or adopted) this account: it is ours to change or purge. */
int state_origin(struct prov *p, char *ret, size_t n)
{
	return state_get(p, "origin", ret, n);
}

int state_root(struct prov *p)
{
	char dir[4096];
	struct stat st;
	int dfd, r = 0;

	/* 0755: squid, as its own user, must reach its directory below it. */
	if (path_join(dir, sizeof(dir), p->paths.varlib, "ocsb") < 0)
		return -ENAMETOOLONG;
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return dfd;
	}
	if (fstat(dfd, &st) < 0 || st.st_uid != 0 ||
		((st.st_mode & 07777) != 0755 && fchmod(dfd, 0755) < 0)) {
		log_err("%s: must be a root-owned directory (mode 0755)", dir);
		r = -EPERM;
	}
	close(dfd);
	return r;
}

/*
 * The entry: the agent, whether ocsb created or adopted it, its uid once it exists, its
 * agent-ports range and its OpenCode servers' ports. The uid is kept so a purge
 * interrupted after userdel can still find the uid's files; the range is what every other
 * agent's run and ocsb-agentd give this agent in the netlock (netlock_registry): no line,
 * no range. Both ports lines are what the other agents' runs check their ranges against
 * (ports.c).
 */
static int state_text(struct prov *p, const char *origin, struct buf *b)
{
	unsigned oc_lo, oc_hi;
	int r = buf_printf(b, "# written by ocsb-provision; do not edit\nagent %s\norigin %s\n",
		p->cfg.agent, origin);

	config_opencode_ports(&p->cfg, &oc_lo, &oc_hi);
	if (r == 0 && p->agent_exists)
		r = buf_printf(b, "uid %u\n", (unsigned)p->agent.uid);
	if (r == 0 && p->cfg.ports_lo)
		r = buf_printf(b, "ports %u-%u\n", p->cfg.ports_lo, p->cfg.ports_hi);
	if (r == 0)
		r = buf_printf(b, "opencode-ports %u-%u\n", oc_lo, oc_hi);
	return r;
}

int state_record(struct prov *p, const char *origin)
{
	char path[4096], dir[4096];
	struct buf b = {0};
	int dfd, r;

	if (state_path(p, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	if (state_root(p) < 0)
		return -1;
	/* Root-only: nobody else needs to know which accounts ocsb manages. */
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return dfd;
	}
	close(dfd);
	r = state_text(p, origin, &b);
	if (r == 0)
		r = fo_write(path, b.data, b.len, 0600, 0, 0);
	buf_free(&b);
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	return r;
}

/*
 * Every run: the entry as this configuration has it, so a changed (or removed) agent-ports
 * range or OpenCode port reaches the other agents' runs and ocsb-agentd, and an entry
 * written before they were recorded gets its lines. Nothing to do before the account exists or is ours.
 */
static int state_sync(struct prov *p)
{
	char path[4096], origin[32];
	struct buf b = {0};
	int r = 0;

	if (!p->agent_exists || state_origin(p, origin, sizeof(origin)) < 0)
		return 0;
	if (state_path(p, path, sizeof(path)) < 0 || state_text(p, origin, &b) < 0) {
		log_err("%s/ocsb/agents/%s: path too long or out of memory", p->paths.varlib,
			p->cfg.agent);
		r = -1;
	} else if (fo_same(path, b.data, b.len, 0600, 0, 0) != 1) {
		unsigned oc_lo, oc_hi;

		config_opencode_ports(&p->cfg, &oc_lo, &oc_hi);
		if (p->cfg.ports_lo)
			r = prov_change(p,
				"record %s's agent-ports %u-%u and OpenCode ports %u-%u in %s",
				p->cfg.agent, p->cfg.ports_lo, p->cfg.ports_hi, oc_lo, oc_hi, path);
		else
			r = prov_change(p,
				"record in %s that %s has no agent-ports (OpenCode ports %u-%u)",
				path, p->cfg.agent, oc_lo, oc_hi);
		if (r && state_record(p, origin) < 0)
			r = -1;
		else if (r)
			prov_done(p);
	}
	buf_free(&b);
	return r < 0 ? -1 : 0;
}

int state_other_agents(struct prov *p)
{
	char dir[4096];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (path_join(dir, sizeof(dir), p->paths.varlib, "ocsb/agents") < 0)
		return -ENAMETOOLONG;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && strcmp(e->d_name, p->cfg.agent) != 0)
			n++;
	closedir(d);
	return n;
}

static int state_uid(struct prov *p, uid_t *ret)
{
	char v[32];
	int r = state_get(p, "uid", v, sizeof(v));

	if (r == 0)
		*ret = (uid_t)strtoul(v, NULL, 10);
	return r;
}

int state_remove(struct prov *p)
{
	char path[4096];
	int r;

	if (state_path(p, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	r = fo_unlink(path);
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	return r;
}

int prov_root_binary(const struct stat *st)
{
	return S_ISREG(st->st_mode) && st->st_uid == 0 && !(st->st_mode & 022) &&
		(st->st_mode & 0111) == 0111;
}

int account_check_login_shell(const char *dir, char *path, size_t n, char *err, size_t errlen)
{
	struct stat st;

	if (path_join(path, n, dir, OCSB_SHELL_NAME) < 0) {
		snprintf(err, errlen, "%s/%s: path too long", dir, OCSB_SHELL_NAME);
		return -ENAMETOOLONG;
	}
	if (lstat(path, &st) < 0) {
		int e = errno;

		snprintf(err, errlen,
			"%s: %s: the agent's login shell is installed beside ocsb-provision "
			"(sudo make install)",
			path, strerror(e));
		return -e;
	}
	if (!prov_root_binary(&st)) {
		snprintf(err, errlen,
			"%s: the agent's login shell must be a root-owned regular file, mode 0755 "
			"(not writable by group or others): reinstall it (sudo make install) or "
			"fix "
			"it with chown root:root and chmod 0755",
			path);
		return -EPERM;
	}
	return 0;
}

int prov_self_dir(char *out, size_t n, const char *what)
{
	ssize_t l = n ? readlink("/proc/self/exe", out, n - 1) : -1;
	const char *why = l < 0 ? strerror(errno) : "not a path";

	/* A name that fills the buffer may have been cut short: refused, not guessed. */
	if (l > 0 && (size_t)l >= n - 1)
		why = "too long";
	else if (l > 0 && memchr(out, '/', (size_t)l))
		why = NULL;
	if (why) {
		log_err("/proc/self/exe: %s: cannot find the directory of ocsb-provision (and of "
			"%s beside it)",
			why, what);
		return -1;
	}
	out[l] = '\0';
	*strrchr(out, '/') = '\0';
	return 0;
}

/* The agent's login shell: ocsb-shell in the directory of this very program. */
static int login_shell_preflight(struct prov *p)
{
	char self[4096], err[8192];
	int r;

	if (prov_self_dir(self, sizeof(self), "ocsb-shell") < 0)
		return -EIO;
	r = account_check_login_shell(
		self[0] ? self : "/", p->shell_src, sizeof(p->shell_src), err, sizeof(err));
	if (r < 0) {
		log_err("%s", err);
		return r;
	}
	/*
	 * The account gets a copy in a root-owned place every session can reach: the build
	 * or install directory may be below a home the agent cannot enter, or below /tmp,
	 * which the agent's sessions see as their own private tmpfs.
	 */
	if (path_join(p->login_shell, sizeof(p->login_shell), p->paths.varlib,
		    "ocsb/bin/" OCSB_SHELL_NAME) < 0)
		return -ENAMETOOLONG;
	if (strcmp(path_base(p->cfg.shell), OCSB_SHELL_NAME) == 0) {
		log_err("shell %s in %s: ocsb-shell is the agent's login shell already; 'shell' "
			"names the real shell it runs (for example /bin/bash)",
			p->cfg.shell, p->config_path);
		return -ELOOP;
	}
	return 0;
}

int account_preflight(struct prov *p)
{
	char origin[32];
	struct group *g;
	int r;

	if (p->mode != PROV_REMOVE && login_shell_preflight(p) < 0)
		return -EPERM;
	r = user_lookup(p->cfg.agent, &p->agent);
	if (r < 0 && r != -ENOENT) {
		log_err("looking up '%s': %s", p->cfg.agent, strerror(-r));
		return r;
	}
	p->agent_exists = r == 0;
	if (!p->agent_exists) {
		if (p->mode == PROV_REMOVE)
			return 0;
		errno = 0;
		g = getgrnam(p->cfg.agent);
		if (g) {
			log_err("a group named '%s' already exists (gid %u) but no such user: "
				"choose "
				"another --agent name, or remove the group",
				p->cfg.agent, (unsigned)g->gr_gid);
			return -EEXIST;
		}
		return 0;
	}
	/* The netlock's registry locks no uid outside this range: an agent there would be free. */
	if (!netlock_agent_uid(p->agent.uid)) {
		log_err("'%s' is a system account (uid %u, outside %u-%u): the agent needs an "
			"account of its own; choose another --agent name",
			p->cfg.agent, (unsigned)p->agent.uid, AGENT_UID_MIN, AGENT_UID_MAX);
		return -EEXIST;
	}
	if (p->have_owner && p->agent.uid == p->owner.uid) {
		log_err("'%s' has the owner's uid %u: the agent must be a different user",
			p->cfg.agent, (unsigned)p->agent.uid);
		return -EEXIST;
	}
	if (state_origin(p, origin, sizeof(origin)) == 0)
		return 0;
	if (p->adopt)
		return 0;
	/*
	 * An account we did not create may carry keys, cron jobs, group memberships or
	 * files that other people rely on: taking it over must be a conscious choice.
	 */
	log_err("user '%s' already exists (uid %u) and was not created by ocsb-provision: "
		"pass --adopt to take it over (its password, shell, groups and home mode will "
		"be changed), or choose another --agent name",
		p->cfg.agent, (unsigned)p->agent.uid);
	return -EEXIST;
}

static int fix_password(struct prov *p);
static int agent_init_profile(struct prov *p);

static int agent_home(struct prov *p, char *out, size_t n)
{
	return path_join(out, n, p->paths.home, p->cfg.agent);
}

static int create_account(struct prov *p)
{
	char home[4096];
	const char *argv[] = {"/usr/sbin/useradd", "--create-home", "--user-group", "--home-dir",
		home, "--shell", p->login_shell, "--comment", AGENT_GECOS, "--key", "UMASK=077",
		"--key", "HOME_MODE=0700", p->cfg.agent, NULL};
	char origin[32];

	if (agent_home(p, home, sizeof(home)) < 0)
		return -ENAMETOOLONG;
	if (!prov_change(p,
		    "create account %s (home %s, login shell %s running %s, no password, umask "
		    "077)",
		    p->cfg.agent, home, p->login_shell, p->cfg.shell))
		return 0;
	/* Intent first: a run killed after useradd must find the account to be ours. */
	if (state_origin(p, origin, sizeof(origin)) < 0 && state_record(p, "created") < 0)
		return -EIO;
	if (prov_exec(p, argv, NULL) < 0)
		return -EIO;
	if (user_lookup(p->cfg.agent, &p->agent) < 0) {
		log_err("useradd %s succeeded but the account cannot be found", p->cfg.agent);
		return -EIO;
	}
	p->agent_exists = 1;
	p->agent_created = 1;
	if (state_record(p, "created") < 0)
		return -EIO;
	prov_done(p);
	/* Part of creating it: these do not count as changes of their own. */
	if (fix_password(p) < 0 || agent_init_profile(p) < 0)
		return -EIO;
	return 0;
}

static int usermod(struct prov *p, const char *opt, const char *val)
{
	const char *argv[] = {"/usr/sbin/usermod", opt, val, p->cfg.agent, NULL};

	if (prov_exec(p, argv, NULL) < 0)
		return -EIO;
	prov_done(p);
	return 0;
}

static int fix_password(struct prov *p)
{
	struct spwd *sp;

	errno = 0;
	sp = getspnam(p->cfg.agent);
	/*
	 * '*' matches no password (no password login) yet is not the '!' lock that
	 * makes sshd without PAM refuse key logins too.
	 */
	if (sp && sp->sp_pwdp && strcmp(sp->sp_pwdp, "*") == 0)
		return 0;
	if (!p->agent_created &&
		!prov_change(
			p, "set the password field of %s to '*' (no password login)", p->cfg.agent))
		return 0;
	return usermod(p, "--password", "*");
}

static const char *const privileged_groups[] = {"root", "sudo", "wheel", "adm", "admin", "docker",
	"lxd", "libvirt", "disk", "input", "kvm", "systemd-journal", "shadow", "staff", "video",
	"audio", "plugdev", "netdev", "lpadmin", "sambashare", NULL};

static int is_privileged_group(const char *name)
{
	for (const char *const *g = privileged_groups; *g; g++)
		if (strcmp(*g, name) == 0)
			return 1;
	return 0;
}

/* The agent keeps only its own primary group: any membership is a path to someone's files. */
static int fix_groups(struct prov *p)
{
	struct strv drop = {0};
	struct group *g;
	int r = 0;

	g = getgrgid(p->agent.gid);
	if (!g || (p->have_owner && p->agent.gid == p->owner.gid) ||
		is_privileged_group(g->gr_name)) {
		log_err("the primary group of %s is %s (gid %u), not a group of its own: run "
			"'groupadd %s && usermod -g %s %s' or choose another --agent name",
			p->cfg.agent, g ? g->gr_name : "unknown", (unsigned)p->agent.gid,
			p->cfg.agent, p->cfg.agent, p->cfg.agent);
		return -EPERM;
	}
	setgrent();
	while ((g = getgrent()) != NULL) {
		if (g->gr_gid == p->agent.gid)
			continue;
		for (char **m = g->gr_mem; *m; m++)
			if (strcmp(*m, p->cfg.agent) == 0 && strv_push(&drop, g->gr_name) < 0)
				r = -ENOMEM;
	}
	endgrent();
	for (size_t i = 0; r == 0 && i < drop.n; i++) {
		const char *argv[] = {
			"/usr/bin/gpasswd", "--delete", p->cfg.agent, drop.v[i], NULL};

		if (!prov_change(p, "remove %s from group %s", p->cfg.agent, drop.v[i]))
			continue;
		if (prov_exec(p, argv, NULL) < 0)
			r = -EIO;
		else
			prov_done(p);
	}
	strv_free(&drop);
	return r;
}

static int priv_fix_home(struct prov *p)
{
	const char *home = p->agent.home;
	char name[256];
	struct stat st;
	int dfd, fd, r = 0;

	if (home[0] != '/' || strcmp(home, "/") == 0) {
		log_err("home of %s is '%s': it needs a home directory of its own", p->cfg.agent,
			home);
		return -EINVAL;
	}
	dfd = fo_open_parent(AT_FDCWD, home, 0, 0, name, sizeof(name));
	if (dfd < 0) {
		log_err("%s: %s", home, strerror(-dfd));
		return dfd;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno != ENOENT) {
			r = -errno;
			log_err("%s: %s", home, strerror(errno));
			goto out;
		}
		/* useradd killed half-way: the entry exists, the directory does not. */
		if (!prov_change(p, "create home %s", home))
			goto out;
		if (mkdirat(dfd, name, 0700) < 0) {
			r = -errno;
			log_err("mkdir %s: %s", home, strerror(errno));
			goto out;
		}
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fchown(fd, p->agent.uid, p->agent.gid) < 0 || fchmod(fd, 0700) < 0) {
			r = -errno;
			log_err("%s: %s", home, strerror(errno));
		}
		if (fd >= 0)
			close(fd);
		if (r == 0)
			prov_done(p);
		goto out;
	}
	if (!S_ISDIR(st.st_mode)) {
		log_err("home %s of %s is not a directory (a symbolic link is not accepted)", home,
			p->cfg.agent);
		r = -ENOTDIR;
		goto out;
	}
	if (st.st_uid != p->agent.uid) {
		log_err("home %s is owned by uid %u, not by %s (uid %u): fix its owner or remove "
			"it",
			home, (unsigned)st.st_uid, p->cfg.agent, (unsigned)p->agent.uid);
		r = -EPERM;
		goto out;
	}
	if ((st.st_mode & 07777) != 0700 &&
		prov_change(p, "set mode 0700 on %s (was %04o)", home,
			(unsigned)(st.st_mode & 07777))) {
		fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0 || fchmod(fd, 0700) < 0) {
			r = -errno;
			log_err("chmod %s: %s", home, strerror(errno));
		}
		if (fd >= 0)
			close(fd);
		if (r == 0)
			prov_done(p);
	}
out:
	close(dfd);
	return r;
}

/*
 * Runs as the agent: umask 077 at the top of its own dotfiles, for shells without
 * pam_umask. At the top, because Debian's .bashrc returns early when not interactive
 * and `ssh ai-dev@host cmd` runs exactly such a shell.
 */
static int child_umask_profile(void *arg, int outfd)
{
	static const char line[] =
		"# added by ocsb-provision: files private by default\numask 077\n";
	static const char *const files[] = {".profile", ".bashrc"};

	(void)arg;
	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		struct buf b = {0};
		char *old = NULL;
		size_t oldlen = 0;
		int r;

		r = fo_read_at(AT_FDCWD, files[i], 1024 * 1024, &old, &oldlen);
		if (r < 0 && r != -ENOENT) {
			dprintf(outfd, "%s: %s", files[i], strerror(-r));
			return 1;
		}
		buf_puts(&b, line);
		if (old)
			buf_append(&b, old, oldlen);
		r = fo_write_at(AT_FDCWD, files[i], b.data, b.len, 0600, (uid_t)-1, (gid_t)-1);
		buf_free(&b);
		free(old);
		if (r < 0) {
			dprintf(outfd, "%s: %s", files[i], strerror(-r));
			return 1;
		}
	}
	return 0;
}

static int agent_init_profile(struct prov *p)
{
	struct spawn_opts o = {.drop = 1,
		.uid = p->agent.uid,
		.gid = p->agent.gid,
		.user = p->agent.name,
		.cwd = p->agent.home};
	struct spawn_result res;
	int r;

	r = spawn_fn(child_umask_profile, NULL, &o, &res);
	if (r == 0 && res.status != 0) {
		log_output(LOG_LVL_ERR, res.output ? res.output : "failed", "as %s", p->cfg.agent);
		r = -EIO;
	}
	spawn_result_free(&res);
	if (r == 0)
		prov_done(p);
	return r;
}

/* <varlib>/ocsb/bin/ocsb-shell: a root-owned 0755 copy of the ocsb-shell beside us. */
static int install_login_shell(struct prov *p)
{
	struct buf b = {0};
	int r;

	r = fo_read(p->shell_src, 64u << 20, &b.data, &b.len);
	if (r < 0) {
		log_err("%s: %s", p->shell_src, strerror(-r));
		return -1;
	}
	b.cap = b.len;
	r = prov_write_file(p, p->login_shell, &b, 0755, NULL);
	buf_free(&b);
	return r < 0 ? -1 : 0;
}

int account_ensure(struct prov *p)
{
	char origin[32];

	if (install_login_shell(p) < 0)
		return -1;
	if (!p->agent_exists) {
		if (create_account(p) < 0)
			return -1;
		if (!p->agent_exists)
			return 0; /* dry run or check: nothing more to inspect */
	} else if (state_origin(p, origin, sizeof(origin)) < 0) {
		if (prov_change(p, "adopt existing account %s (uid %u)", p->cfg.agent,
			    (unsigned)p->agent.uid)) {
			if (state_record(p, "adopted") < 0)
				return -1;
			prov_done(p);
		}
	}
	if (state_sync(p) < 0 || fix_password(p) < 0)
		return -1;
	/* ocsb-shell runs cfg.shell, the real shell, after its Landlock scope. */
	if (strcmp(p->agent.shell, p->login_shell) != 0 &&
		prov_change(p, "set the login shell of %s to %s (was %s)", p->cfg.agent,
			p->login_shell, p->agent.shell) &&
		usermod(p, "--shell", p->login_shell) < 0)
		return -1;
	if (strcmp(p->agent.gecos, AGENT_GECOS) != 0 &&
		prov_change(p, "set the comment of %s to '%s'", p->cfg.agent, AGENT_GECOS) &&
		usermod(p, "--comment", AGENT_GECOS) < 0)
		return -1;
	if (fix_groups(p) < 0 || priv_fix_home(p) < 0)
		return -1;
	return 0;
}

static uid_t sweep_uid;
static unsigned sweep_removed, sweep_failed;

static int child_sweep_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	if (st->st_uid != sweep_uid)
		return 0;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) == 0) {
		sweep_removed++;
	} else {
		sweep_failed++;
		log_warn("cannot remove %s: %s", path, strerror(errno));
	}
	return 0;
}

struct sweep_job {
	const char *roots[16];
	size_t n;
};

/*
 * Runs as the old uid, with no groups: it can remove exactly what that uid could, and a
 * path swapped under it (a directory replaced by a link to /etc) leads nowhere root owns.
 */
static int child_sweep(void *arg, int outfd)
{
	struct sweep_job *j = arg;

	sweep_uid = getuid();
	sweep_removed = sweep_failed = 0;
	for (size_t i = 0; i < j->n; i++)
		if (nftw(j->roots[i], child_sweep_one, 32, FTW_PHYS | FTW_DEPTH | FTW_MOUNT) < 0 &&
			errno != ENOENT && errno != EACCES)
			dprintf(outfd, "scanning %s: %s\n", j->roots[i], strerror(errno));
	dprintf(outfd, "removed %u\n", sweep_removed);
	return sweep_failed ? 1 : 0;
}

/* Whatever the uid left in shared writable places; userdel -r only takes home and mail. */
static int agent_sweep_files(struct prov *p, uid_t uid)
{
	const char *fixed[] = {
		"/tmp", "/var/tmp", "/dev/shm", "/var/spool", "/var/mail", "/var/crash"};
	struct sweep_job j = {.n = 0};
	struct spawn_opts o = {.drop = 1,
		.uid = uid,
		.gid = 65534,
		.user = NULL,
		.cwd = "/",
		.timeout_ms = 120000};
	struct spawn_result res;
	unsigned removed = 0;
	const char *s;
	int r;

	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		j.roots[j.n++] = fixed[i];
	j.roots[j.n++] = p->paths.run;
	j.roots[j.n++] = p->paths.varlib;
	j.roots[j.n++] = p->paths.home;
	r = spawn_fn(child_sweep, &j, &o, &res);
	if (r < 0) {
		log_err("sweeping the files of uid %u: %s", (unsigned)uid, strerror(-r));
		return -1;
	}
	if (res.output && (s = strstr(res.output, "removed ")))
		removed = (unsigned)strtoul(s + 8, NULL, 10);
	if (removed)
		printf("- removed %u file%s left by uid %u\n", removed, removed == 1 ? "" : "s",
			(unsigned)uid);
	if (res.status != 0)
		log_warn("some files of uid %u could not be removed (see above)", (unsigned)uid);
	spawn_result_free(&res);
	return res.status != 0 ? -1 : 0;
}

int account_purge(struct prov *p)
{
	const char *argv[] = {"/usr/sbin/userdel", "--remove", p->cfg.agent, NULL};
	struct user_info other;
	char origin[32] = "created";
	uid_t uid;
	int n;

	if (!p->agent_exists) {
		/* A purge killed after userdel: finish the sweep, unless the uid was reused. */
		if (state_uid(p, &uid) == 0 && netlock_agent_uid(uid)) {
			if (user_lookup_uid(uid, &other) == 0)
				log_warn("uid %u now belongs to %s: its files are not swept",
					(unsigned)uid, other.name);
			else if (agent_sweep_files(p, uid) < 0)
				return -1;
		}
		return state_remove(p);
	}
	uid = p->agent.uid;
	state_origin(p, origin, sizeof(origin));
	if (state_record(p, origin) < 0)
		return -1;
	prov_change(p, "stop every process of %s", p->cfg.agent);
	n = procs_kill_uid(uid, p->cfg.agent);
	if (n < 0)
		return -1;
	prov_done(p);
	prov_change(p, "delete account %s (uid %u) with its home %s", p->cfg.agent, (unsigned)uid,
		p->agent.home);
	/* userdel warns (exit 12) when the mail spool is absent; the account is gone all the same. */
	if (prov_exec(p, argv, NULL) < 0 && user_lookup(p->cfg.agent, &p->agent) == 0)
		return -1;
	prov_done(p);
	if (agent_sweep_files(p, uid) < 0)
		return -1;
	return state_remove(p);
}
