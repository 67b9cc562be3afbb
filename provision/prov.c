/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "identity.h"
#include "ctl.h"
#include "log.h"
#include "procs.h"
#include "opencode.h"
#include "provision.h"
#include "sysblock.h"
#include "spawn.h"

int prov_change(struct prov *p, const char *fmt, ...)
{
	static const char *const prefix[] = {
		[PROV_APPLY] = "+ ",
		[PROV_DRY_RUN] = "would: ",
		[PROV_CHECK] = "drift: ",
		[PROV_REMOVE] = "- ",
	};
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->changes++;
	printf("%s%s\n", prefix[p->mode], msg);
	fflush(stdout);
	return p->mode == PROV_APPLY || p->mode == PROV_REMOVE;
}

void prov_skip(struct prov *p, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->skipped++;
	log_warn("skipped: %s", msg);
}

void prov_done(struct prov *p)
{
#ifdef OCSB_TEST_BUILD
	static unsigned done;

	/* Tests kill us after each change to prove a re-run converges (test build only). */
	if (p->fault_at && ++done == p->fault_at) {
		fflush(NULL);
		raise(SIGKILL);
	}
#endif
}

int prov_file_read(struct prov *p, const char *rel, char *path, size_t n, struct prov_file *f)
{
	struct stat st;
	int r;

	memset(f, 0, sizeof(*f));
	f->mode = 0644;
	if (path_join(path, n, p->paths.etc, rel) < 0)
		return -1;
	r = fo_read(path, 1 << 20, &f->data, NULL);
	if (r == -ENOENT)
		return 0;
	/* Keep the file's owner and mode (Debian: at.deny is root:daemon 0640). */
	if (r < 0 || lstat(path, &st) < 0) {
		log_err("%s: %s", path, strerror(r < 0 ? -r : errno));
		free(f->data);
		f->data = NULL;
		return -1;
	}
	f->exists = 1;
	f->mode = st.st_mode & 07777;
	f->uid = st.st_uid;
	f->gid = st.st_gid;
	return 0;
}

int prov_file_commit(struct prov *p, const char *path, struct prov_file *f, int changed,
	const struct buf *out, int remove_empty, const char *what)
{
	int r = changed < 0 ? -1 : 0;

	if (changed > 0 && prov_change(p, "%s", what)) {
		/* Emptied and asked to: removed rather than left empty. */
		if (remove_empty && out->len == 0)
			r = f->exists ? fo_unlink(path) : 0;
		else
			r = fo_write(path, out->data ? out->data : "", out->len, f->mode, f->uid,
				f->gid);
		if (r < 0)
			log_err("%s: %s", path, strerror(-r));
		else
			prov_done(p);
	}
	free(f->data);
	f->data = NULL;
	return r < 0 ? -1 : 0;
}

int prov_parent_dir(const char *path)
{
	char dir[4096];
	int dfd;

	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0)
		log_err("%s: %s", dir, strerror(-dfd));
	return dfd;
}

int prov_write_file(
	struct prov *p, const char *path, const struct buf *b, mode_t mode, int *changed)
{
	int dfd, r;

	if (fo_same(path, b->data, b->len, mode, 0, 0) == 1 || !prov_change(p, "write %s", path))
		return 0;
	dfd = prov_parent_dir(path);
	if (dfd < 0)
		return -1;
	r = fo_write_at(dfd, strrchr(path, '/') + 1, b->data, b->len, mode, 0, 0);
	close(dfd);
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	if (changed)
		*changed = 1;
	prov_done(p);
	return 0;
}

int prov_remove_file(struct prov *p, const char *path, const char *what)
{
	struct stat st;
	int r;

	if (lstat(path, &st) < 0 ||
		!prov_change(p, "remove %s%s%s", what ? what : "", what ? " " : "", path))
		return 0;
	r = fo_unlink(path);
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	prov_done(p);
	return 0;
}

int prov_exec(struct prov *p, const char *const argv[], char **ret_output)
{
	struct spawn_opts o = {.capture = 1, .timeout_ms = 60000};
	struct spawn_result res;
	char how[64];
	int r;

	r = spawn_run(argv, &o, &res);
	if (r < 0) {
		log_err("cannot run %s: %s", argv[0], strerror(-r));
		return r;
	}
	if (res.status != 0) {
		/* The tool's own words are the most useful part: as the lines it wrote. */
		log_output(LOG_LVL_ERR, res.output, "%s %s: %s", argv[0], argv[1] ? argv[1] : "",
			spawn_describe(&res, how, sizeof(how)));
		spawn_result_free(&res);
		return -EIO;
	}
	if (ret_output)
		*ret_output = res.output;
	else
		spawn_result_free(&res);
	return 0;
}

static int take_lock(struct prov *p)
{
	char dir[4096], path[4096];
	int dfd, fd;

	if (path_join(dir, sizeof(dir), p->paths.run, "ocsb") < 0 ||
		path_join(path, sizeof(path), dir, "provision.lock") < 0)
		return -ENAMETOOLONG;
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return dfd;
	}
	fd = openat(dfd, "provision.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	close(dfd);
	if (fd < 0) {
		log_err("%s: %s", path, strerror(errno));
		return -errno;
	}
	/* The lock dies with the process, so a SIGKILLed run never leaves it stale. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		log_err("another ocsb-provision is running (lock %s held); wait for it to finish",
			path);
		close(fd);
		return -EBUSY;
	}
	return fd;
}

/* Config file, then flags, then the sudo user as the default owner. */
static int resolve_config(struct prov *p, struct prov_opts *o)
{
	char err[1024];
	int r;

	config_defaults(&p->cfg);
	if (o->config_path)
		snprintf(p->config_path, sizeof(p->config_path), "%s", o->config_path);
	else if (path_join(p->config_path, sizeof(p->config_path), p->paths.etc, "ocsb/ocsb.conf") <
		0)
		return -ENAMETOOLONG;
	r = config_load(&p->cfg, p->config_path, err, sizeof(err));
	if (r == 0) {
		p->config_exists = 1;
	} else if (r == -ENOENT && !o->config_path) {
		p->config_exists = 0;
	} else {
		log_err("%s", err);
		return -EINVAL;
	}
	if (o->agent) {
		if (!valid_user_name(o->agent)) {
			log_err("--agent '%s' is not a valid user name (lower case letters, "
				"digits, "
				"'_' and '-', starting with a letter or '_', at most 32)",
				o->agent);
			return -EINVAL;
		}
		snprintf(p->cfg.agent, sizeof(p->cfg.agent), "%s", o->agent);
	}
	if (o->owner) {
		if (!valid_user_name(o->owner)) {
			log_err("--owner '%s' is not a valid user name", o->owner);
			return -EINVAL;
		}
		snprintf(p->cfg.owner, sizeof(p->cfg.owner), "%s", o->owner);
	}
	if (o->projects.n) {
		strv_free(&p->cfg.projects);
		for (size_t i = 0; i < o->projects.n; i++)
			if (strv_contains(&p->cfg.projects, o->projects.v[i]) == 0 &&
				strv_push(&p->cfg.projects, o->projects.v[i]) < 0)
				return -ENOMEM;
	}
	if (o->keys.n) {
		strv_free(&p->cfg.keys);
		for (size_t i = 0; i < o->keys.n; i++)
			if (strv_contains(&p->cfg.keys, o->keys.v[i]) == 0 &&
				strv_push(&p->cfg.keys, o->keys.v[i]) < 0)
				return -ENOMEM;
	}
	if (o->sync_keys.n) {
		strv_free(&p->cfg.sync_keys);
		for (size_t i = 0; i < o->sync_keys.n; i++)
			if (strv_contains(&p->cfg.sync_keys, o->sync_keys.v[i]) == 0 &&
				strv_push(&p->cfg.sync_keys, o->sync_keys.v[i]) < 0)
				return -ENOMEM;
	}
	if (!p->cfg.owner[0]) {
		const char *su = getenv("SUDO_USER");
		if (su && *su && strcmp(su, "root") != 0 && valid_user_name(su))
			snprintf(p->cfg.owner, sizeof(p->cfg.owner), "%s", su);
	}
	if (config_validate(&p->cfg, err, sizeof(err)) < 0) {
		log_err("%s%s", p->config_exists ? "configuration: " : "", err);
		return -EINVAL;
	}
	return 0;
}

/*
 * What a container's seccomp filter may refuse and ocsb cannot do without, tried before
 * any change: keyctl (every child run as another account, git as the owner or the agent,
 * npm, OpenCode, joins a session keyring of its own: common/spawn_drop.c) and mlock (the
 * secrets' memory). One line each: the call, the filter, the container's setting.
 */
static int syscalls_preflight(void)
{
	static const enum sysblock_call need[] = {SYSBLOCK_KEYCTL, SYSBLOCK_MLOCK};
	struct sysblock_facts f;
	char line[512];
	int bad = 0;

	sysblock_facts(&f);
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (sysblock_explain(line, sizeof(line), need[i], sysblock_probe(need[i]), &f) !=
			SYSBLOCK_OTHER) {
			log_err("%s", line);
			bad = 1;
		}
	return bad ? -1 : 0;
}

static int owner_preflight(struct prov *p)
{
	int r;

	if (!p->cfg.owner[0]) {
		if (p->mode == PROV_REMOVE)
			return 0;
		log_err("no owner given: pass --owner USER (the developer who works with the "
			"agent) or set 'owner' in %s",
			p->config_path);
		return -EINVAL;
	}
	r = user_lookup(p->cfg.owner, &p->owner);
	if (r == -ENOENT) {
		if (p->mode == PROV_REMOVE) {
			log_warn("owner '%s' no longer exists: skipping the owner's files",
				p->cfg.owner);
			return 0;
		}
		log_err("unknown owner '%s': no such user on this machine (check the name given "
			"with --owner or in %s)",
			p->cfg.owner, p->config_path);
		return -EINVAL;
	}
	if (r < 0) {
		log_err("looking up owner '%s': %s", p->cfg.owner, strerror(-r));
		return r;
	}
	if (p->owner.uid == 0) {
		log_err("the owner cannot be root: name the developer's own account with --owner");
		return -EINVAL;
	}
	p->have_owner = 1;
	return 0;
}

static int config_ensure(struct prov *p)
{
	struct buf b = {0};
	char dir[4096];
	int dfd, r;

	if (p->config_exists)
		return 0;
	if (!prov_change(
		    p, "write %s (commented defaults and the values in force)", p->config_path))
		return 0;
	snprintf(dir, sizeof(dir), "%s", p->config_path);
	*strrchr(dir, '/') = '\0';
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return dfd;
	}
	r = config_render(&p->cfg, &b);
	if (r == 0)
		r = fo_write_at(dfd, strrchr(p->config_path, '/') + 1, b.data, b.len, 0644, 0, 0);
	if (r < 0)
		log_err("%s: %s", p->config_path, strerror(-r));
	close(dfd);
	buf_free(&b);
	if (r == 0)
		prov_done(p);
	return r;
}

static int remove_config(struct prov *p)
{
	char dir[4096];
	int r;

	if (!p->config_exists)
		return 0;
	if (!p->purge) {
		printf("kept %s (your settings; --purge removes it)\n", p->config_path);
		return 0;
	}
	prov_change(p, "remove %s", p->config_path);
	r = fo_unlink(p->config_path);
	if (r < 0) {
		log_err("%s: %s", p->config_path, strerror(-r));
		return r;
	}
	/* Leave /etc/ocsb itself only if something else still lives there. */
	snprintf(dir, sizeof(dir), "%s", p->config_path);
	*strrchr(dir, '/') = '\0';
	rmdir(dir);
	prov_done(p);
	return 0;
}

/*
 * --purge of the last agent ocsb provisioned here: the machine-wide state goes too
 * (<varlib>/ocsb: proxy, mirror, identities, agentd's keys, the login shell's copy) and
 * /etc/ocsb once emptied. OpenCode's tree is software, not state: it is named, not removed
 * (apt purge ocsb removes it).
 */
static int purge_machine(struct prov *p)
{
	char dir[4096], etc[4096], keys[4096];
	struct stat st;
	int r = 0;

	if (path_join(dir, sizeof(dir), p->paths.varlib, "ocsb") < 0 ||
		path_join(etc, sizeof(etc), p->paths.etc, "ocsb") < 0 ||
		path_join(keys, sizeof(keys), etc, "keys") < 0)
		return -1;
	if (lstat(dir, &st) == 0 && prov_change(p, "remove %s (no agent is left)", dir)) {
		r = fo_rmtree(dir);
		if (r < 0)
			log_err("%s: %s", dir, strerror(-r));
		else
			prov_done(p);
	}
	/* The supervisor's logs (its account's directory, removed without following links). */
	if (lstat(AGENTD_LOG_DIR, &st) == 0 &&
		prov_change(p, "remove %s (no agent is left)", AGENTD_LOG_DIR)) {
		int e = fo_rmtree(AGENTD_LOG_DIR);

		if (e < 0) {
			log_err("%s: %s", AGENTD_LOG_DIR, strerror(-e));
			r = e;
		} else {
			prov_done(p);
		}
	}
	rmdir(keys);
	if (rmdir(etc) < 0 && errno != ENOENT)
		printf("kept %s: it holds files ocsb-provision did not write\n", etc);
	if (lstat(OCSB_OPENCODE_PREFIX, &st) == 0)
		printf("kept OpenCode in %s (rm -rf it, or apt purge ocsb, when no longer "
		       "needed)\n",
			OCSB_OPENCODE_PREFIX);
	return r < 0 ? -1 : 0;
}

int prov_agentd_config(const struct prov *p)
{
	char def[4096];

	return path_join(def, sizeof(def), p->paths.etc, "ocsb/ocsb.conf") == 0 &&
	       !strcmp(def, p->config_path);
}

/*
 * --purge of one agent while others remain (issue 15): what ocsb keeps for it alone goes
 * with it, the others' stays. Its fake identity is named by the agent; agentd's OpenCode
 * passwords are named by project and belong to the agent agentd serves, so they go only
 * with that agent. With the last agent purge_machine takes the rest.
 */
static int purge_agent_state(struct prov *p)
{
	char dir[4096], path[4200];
	struct stat st;
	int r = 0, e;

	if (identity_dir(p->paths.varlib, p->cfg.agent, dir, sizeof(dir)) == 0 &&
		lstat(dir, &st) == 0 && prov_change(p, "remove the fake identity %s", dir)) {
		e = fo_rmtree(dir);
		if (e < 0) {
			log_err("%s: %s", dir, strerror(-e));
			r = -1;
		} else {
			prov_done(p);
		}
	}
	if (!prov_agentd_config(p) || path_join(dir, sizeof(dir), p->paths.varlib, "ocsb/agentd") < 0)
		return r;
	for (size_t i = 0; i < p->cfg.projects.n; i++) {
		snprintf(path, sizeof(path), "%s/%s.password", dir, path_base(p->cfg.projects.v[i]));
		if (prov_remove_file(p, path, "the OpenCode password") < 0)
			r = -1;
	}
	return r;
}

/*
 * Whether a supervisor holds the control socket. A listener that accepts the connection is
 * enough: a busy ocsb-agentd (starting the proxy on a loaded machine) may take longer than
 * any short deadline to reply, and it is running all the same. A stale socket file with no
 * listener refuses the connection at once.
 */
int prov_agentd_running(struct prov *p)
{
	int fd = ctl_connect(p->paths.ctl_sock, 1000);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/*
 * A root process running ocsb-warden, found by its executable's name (its pid), or 0. A
 * warden between two supervisors answers on no control socket, yet would put the netlock
 * back as soon as --remove took it away (seen in the Debian 12 walk-through, where the
 * supervisor, not the warden, was stopped). Root's only: another account's process named
 * so must not hold a removal up.
 */
static pid_t warden_running(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	if (!d)
		return 0;
	while (!found && (e = readdir(d))) {
		char link[64], exe[PATH_MAX];
		const char *base;
		struct stat st;
		ssize_t n;
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		snprintf(link, sizeof(link), "/proc/%ld", pid);
		if (stat(link, &st) < 0 || st.st_uid != 0)
			continue;
		snprintf(link, sizeof(link), "/proc/%ld/exe", pid);
		if ((n = readlink(link, exe, sizeof(exe) - 1)) <= 0)
			continue;
		exe[n] = '\0';
		base = strrchr(exe, '/');
		base = base ? base + 1 : exe;
		/* An upgraded binary reads "ocsb-warden (deleted)". */
		if (!strcmp(base, "ocsb-warden") || !strcmp(base, "ocsb-warden (deleted)"))
			found = (pid_t)pid;
	}
	closedir(d);
	return found;
}

/*
 * What stays in the owner's repositories (issue 28, item 8): ocsb sync's remote-tracking
 * branches of this agent and its files in .git. They are the owner's: root does not go
 * into them (nor does a removal run git as the owner); the owner gets the command.
 */
static void owner_leftovers_note(struct prov *p)
{
	const char *a = p->cfg.agent;

	if (!p->have_owner)
		return;
	for (size_t i = 0; i < p->cfg.projects.n; i++) {
		const char *d = p->cfg.projects.v[i];

		printf("kept in %s's repository %s: the agent's branches refs/remotes/%s/* and "
		       "ocsb sync's .git/ocsb-sync.* (lock, review, unrelated); to remove them, "
		       "as %s: git -C \"%s\" for-each-ref --format='delete %%(refname)' "
		       "refs/remotes/%s/ | git -C \"%s\" update-ref --stdin && "
		       "rm -f \"%s\"/.git/ocsb-sync.*\n",
			p->owner.name, d, a, p->owner.name, d, a, d, d);
	}
}

static int run_remove(struct prov *p)
{
	int r = 0, n, others, stopped;
	pid_t w;

	/* A running supervisor would put the table back and restart OpenCode under our feet. */
	stopped = systemd_stop_agentd(p);
	if (stopped < 0)
		return -1;
	if (prov_agentd_running(p)) {
		log_err("ocsb-agentd is running: stop it first (systemctl stop ocsb-agentd, or "
			"SIGTERM to it), then run --remove again");
		return -1;
	}
	if ((w = warden_running()) > 0) {
		log_err("ocsb-warden is running (pid %ld) and would put the netlock back: stop it "
			"first (systemctl stop ocsb-agentd, or sudo kill %ld and wait until its log "
			"says stopped), then run --remove again",
			(long)w, (long)w);
		return -1;
	}
	others = state_other_agents(p);
	if (others < 0) {
		log_err("%s/ocsb/agents: %s", p->paths.varlib, strerror(-others));
		return -1;
	}
	p->others = others;
	if (sshd_remove(p) < 0)
		r = -1;
	if (keys_remove(p) < 0)
		r = -1;
	if (harden_remove(p) < 0)
		r = -1;
	/* No process of the agent may outlive its netlock: stop them before the table goes. */
	if (p->agent_exists && (n = procs_kill_uid(p->agent.uid, p->agent.name)) != 0) {
		if (n < 0)
			return -1;
		prov_change(p, "stopped %d process%s of %s", n, n == 1 ? "" : "es", p->agent.name);
	}
	if (prov_mirror_remove(p) < 0)
		r = -1;
	if (net_remove(p) < 0)
		r = -1;
	if (secrets_remove(p) < 0)
		r = -1;
	if (systemd_remove(p, others == 0) < 0 || (others == 0 && keys_global_remove(p) < 0))
		r = -1;
	if (p->purge) {
		if (account_purge(p) < 0 || purge_agent_state(p) < 0)
			r = -1;
	} else if (p->agent_exists) {
		printf("kept account %s (home %s); --purge removes it and every file it owns\n",
			p->agent.name, p->agent.home);
	}
	owner_leftovers_note(p);
	if (r == 0 && remove_config(p) < 0)
		r = -1;
	if (r == 0 && p->purge && others == 0 && purge_machine(p) < 0)
		r = -1;
	/* The supervisor serves every agent: it goes on for the others. */
	if (stopped == 1 && others > 0 && systemd_start_agentd(p) < 0)
		r = -1;
	return r;
}

int prov_main(struct prov_opts *o)
{
	static const char *const verb[] = {
		[PROV_APPLY] = "change",
		[PROV_DRY_RUN] = "planned change",
		[PROV_CHECK] = "difference",
		[PROV_REMOVE] = "removal",
	};
	struct prov *p;
	int lock = -1, r, install_only;

	if (geteuid() != 0) {
		log_err("must run as root: sudo ocsb-provision ...");
		return 2;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return 1;
	paths_default(&p->paths);
	p->mode = o->mode;
	p->purge = o->purge;
	p->adopt = o->adopt;
#ifdef OCSB_TEST_BUILD
	{
		const char *fault = TESTHOOK_ENV("OCSB_FAULT_KILL_AT");

		if (fault)
			p->fault_at = (unsigned)strtoul(fault, NULL, 10);
	}
#endif
	umask(022);

	lock = take_lock(p);
	if (lock < 0) {
		r = 2;
		goto out;
	}
	/*
	 * --install-opencode alone installs OpenCode and nothing else (tools/install-deps.sh
	 * runs it on machines that are not provisioned); with any option that describes the
	 * setup it comes first in a full run.
	 */
	install_only = o->install_opencode && !o->agent && !o->owner && !o->projects.n &&
		!o->keys.n && !o->sync_keys.n && !o->config_path && !o->adopt;
	/* Everything that can be wrong with the input is found before the first change. */
	if (syscalls_preflight() < 0) {
		r = 2;
		goto out;
	}
	if (!install_only &&
		(resolve_config(p, o) < 0 || owner_preflight(p) < 0 || account_preflight(p) < 0 ||
			(p->mode != PROV_REMOVE &&
				(ports_preflight(p) < 0 || keys_preflight(p) < 0 ||
					net_preflight(p) < 0 || sshd_preflight(p) < 0 ||
					repos_preflight(p) < 0 ||
					opencode_preflight(p, o->install_opencode) < 0)))) {
		r = 2;
		goto out;
	}
	r = 0;
	if ((o->install_opencode || p->opencode_missing) &&
		opencode_install(
			p, o->opencode_version ? o->opencode_version : OCSB_OPENCODE_VERSION) < 0) {
		r = 1;
	} else if (install_only) {
		/* Done: nothing else was asked for. */
	} else if (p->mode == PROV_REMOVE) {
		r = run_remove(p) < 0 ? 1 : 0;
	} else {
		/*
		 * The netlock goes in right after the accounts exist, before any way in: the
		 * agent's, and ocsb-inject's, which the table gives a chain of its own. The
		 * unit is enabled and started once what the warden checks at its start
		 * (the supervisor's directories, the mirror's) and what it uses (the agent's
		 * identity files) are in place.
		 */
		if (config_ensure(p) < 0 || account_ensure(p) < 0 || inject_account_ensure(p) < 0 ||
			agentd_account_ensure(p) < 0 || net_ensure(p) < 0 || keys_ensure(p) < 0 ||
			keys_global_ensure(p) < 0 || sshd_ensure(p) < 0 || repos_ensure(p) < 0 ||
			secrets_ensure(p) < 0 || agentd_dirs_ensure(p) < 0 ||
			prov_mirror_ensure(p) < 0 || harden_ensure(p) < 0 || systemd_ensure(p) < 0 ||
			opencode_ensure(p, o->install_opencode || p->opencode_missing) < 0)
			r = 1;
	}
	if (r == 1) {
		log_err("stopped after %u %s%s; fix the error above and run again (completed steps "
			"are kept and not redone)",
			p->changes, verb[p->mode], p->changes == 1 ? "" : "s");
		goto out;
	}
	systemd_note(p);
	switch (p->mode) {
	case PROV_CHECK:
		printf("ocsb-provision: %u difference%s from the configuration%s\n", p->changes,
			p->changes == 1 ? "" : "s",
			p->changes ? " (run ocsb-provision to fix)" : "");
		r = p->changes ? 1 : 0;
		break;
	case PROV_DRY_RUN:
		printf("ocsb-provision: %u change%s planned, none made (--dry-run)\n", p->changes,
			p->changes == 1 ? "" : "s");
		break;
	default:
		printf("ocsb-provision: %u %s%s\n", p->changes, verb[p->mode],
			p->changes == 1 ? "" : "s");
	}
	if (p->skipped)
		printf("ocsb-provision: %u step%s skipped: the agent changed %s in its home (see "
		       "the warnings above)\n",
			p->skipped, p->skipped == 1 ? "" : "s",
			p->skipped == 1 ? "its place" : "their places");
out:
	if (lock >= 0)
		close(lock);
	config_free(&p->cfg);
	strv_free(&p->extra_keys);
	strv_free(&p->extra_sync_keys);
	if (p->egress_loaded)
		egress_free(&p->egress);
	buf_free(&p->egress_first);
	free(p);
	return r;
}
