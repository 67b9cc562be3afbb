/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "homecheck.h"
#include "log.h"
#include "provision.h"
#include "spawn.h"

#define GIT "/usr/bin/git"

/* As the owner: is each project a git repository? Output: one line per bad path. */
static int child_check_projects(void *arg, int outfd)
{
	const struct strv *projects = arg;
	int bad = 0;

	for (size_t i = 0; i < projects->n; i++) {
		const char *path = projects->v[i];
		char probe[4200];
		struct stat st;

		if (stat(path, &st) < 0) {
			dprintf(outfd, "%s: %s\n", path, strerror(errno));
			bad = 1;
			continue;
		}
		if (!S_ISDIR(st.st_mode)) {
			dprintf(outfd, "%s: not a directory\n", path);
			bad = 1;
			continue;
		}
		/* A work tree has .git (a directory, or a file for worktrees); a bare one has HEAD. */
		snprintf(probe, sizeof(probe), "%s/.git", path);
		if (access(probe, F_OK) == 0)
			continue;
		snprintf(probe, sizeof(probe), "%s/HEAD", path);
		if (access(probe, F_OK) == 0) {
			snprintf(probe, sizeof(probe), "%s/objects", path);
			if (access(probe, F_OK) == 0)
				continue;
		}
		dprintf(outfd,
			"%s: not a git repository (no .git inside; run 'git init' there, or "
			"name the repository's top folder)\n",
			path);
		bad = 1;
	}
	return bad;
}

int repos_preflight(struct prov *p)
{
	struct spawn_opts o = prov_as_owner(p);
	struct spawn_result res;
	int r;

	if (!p->cfg.projects.n)
		return 0;
	if (access(GIT, X_OK) < 0) {
		log_err(GIT " not found: install git (apt-get install git)");
		return -1;
	}
	/* The owner's repositories are looked at with the owner's rights only. */
	r = spawn_fn(child_check_projects, &p->cfg.projects, &o, &res);
	if (r < 0) {
		log_err("checking projects as %s: %s", p->owner.name, strerror(-r));
		return -1;
	}
	if (res.status != 0) {
		char *save = NULL;
		for (char *l = strtok_r(res.output, "\n", &save); l;
			l = strtok_r(NULL, "\n", &save))
			log_err("project %s", l);
		r = -1;
	}
	spawn_result_free(&res);
	return r;
}

/* Run git as the agent in its home, with an environment built from nothing. */
static int agent_git(struct prov *p, const char *const argv[], char **ret_out)
{
	char home[4200], user[128];
	char *env[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", home, user, "GIT_CONFIG_NOSYSTEM=1", NULL};
	struct spawn_opts o = {.drop = 1,
		.uid = p->agent.uid,
		.gid = p->agent.gid,
		.user = p->agent.name,
		.cwd = p->agent.home,
		.envp = env,
		.capture = 1,
		.timeout_ms = 30000};
	struct spawn_result res;
	char how[64];
	int r;

	snprintf(home, sizeof(home), "HOME=%s", p->agent.home);
	snprintf(user, sizeof(user), "USER=%s", p->agent.name);
	r = spawn_run(argv, &o, &res);
	if (r < 0) {
		log_err("running git as %s: %s", p->agent.name, strerror(-r));
		return -1;
	}
	if (res.status != 0 && !ret_out) {
		log_output(LOG_LVL_ERR, res.output, "as %s: git %s %s: %s", p->agent.name, argv[1],
			argv[2], spawn_describe(&res, how, sizeof(how)));
		spawn_result_free(&res);
		return -1;
	}
	r = res.status;
	if (ret_out)
		*ret_out = res.output;
	else
		spawn_result_free(&res);
	return r;
}

/*
 * The owner's `ocsb`, which pushes the first branches: beside this program (a build tree)
 * or in ../bin (PREFIX/sbin and PREFIX/bin). It runs with the owner's rights only, but a
 * binary someone else could replace would run as the owner: root-owned, 0755 at most.
 */
static int ocsb_cli_path(char *out, size_t n)
{
	static const char *const rel[] = {"ocsb", "../bin/ocsb"};
	char dir[4096];
	struct stat st;

	if (prov_self_dir(dir, sizeof(dir), "ocsb") < 0)
		return -1;
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
		if (path_join(out, n, dir[0] ? dir : "/", rel[i]) < 0)
			return -1;
		if (lstat(out, &st) < 0)
			continue;
		if (!prov_root_binary(&st)) {
			log_err("%s: ocsb must be a root-owned regular file, mode 0755 (not "
				"writable "
				"by group or others): reinstall it (sudo make install)",
				out);
			return -1;
		}
		return 0;
	}
	log_err("%s/ocsb: %s: ocsb-provision fills the agent's clone with `ocsb sync push`, "
		"installed beside it or in ../bin (sudo make install)",
		dir, strerror(ENOENT));
	return -1;
}

struct spawn_opts prov_as_owner(const struct prov *p)
{
	struct spawn_opts o = {.drop = 1,
		.uid = p->owner.uid,
		.gid = p->owner.gid,
		.user = p->owner.name,
		.cwd = "/",
		.timeout_ms = 30000};

	return o;
}

int prov_owner_git(struct prov *p, const char *const argv[], struct spawn_result *res)
{
	char *env[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", "GIT_CONFIG_NOSYSTEM=1", NULL};
	struct spawn_opts o = prov_as_owner(p);

	o.envp = env;
	o.capture = 1;
	return spawn_run(argv, &o, res);
}

/* git as the owner, in the owner's repository: its exit status (output in out), or -1. */
static int owner_git(struct prov *p, const char *const argv[], char *out, size_t n)
{
	struct spawn_result res;
	int st;

	if (prov_owner_git(p, argv, &res) < 0)
		return -1;
	st = res.status;
	if (out)
		snprintf(out, n, "%.*s", res.output ? (int)strcspn(res.output, "\n") : 0,
			res.output ? res.output : "");
	spawn_result_free(&res);
	return st;
}

/* The owner's current branch; "" when detached or not a plain name. */
static int owner_branch(struct prov *p, const char *project, char *out, size_t n)
{
	const char *argv[] = {
		GIT, "-C", project, "symbolic-ref", "--quiet", "--short", "HEAD", NULL};
	int st = owner_git(p, argv, out, n);

	if (st < 0)
		return -1;
	/* Only a plain name goes on the agent's command line. */
	if (st != 0 ||
		strspn(out,
			"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			"0123456789._/-") != strlen(out))
		out[0] = '\0';
	return 0;
}

static int owner_has_commits(struct prov *p, const char *project)
{
	const char *argv[] = {GIT, "-C", project, "rev-parse", "--quiet", "--verify", "HEAD", NULL};

	return owner_git(p, argv, NULL, 0) == 0;
}

/* As the owner, in the project: `ocsb sync push --all` over the sync key. */
static int owner_seed(struct prov *p, const char *project, const char *name)
{
	char cli[4096], home[4200];
	/* libgit2 reads $HOME/.gitconfig: the owner's, never root's (0700, kept by sudo). */
	char *env[] = {"PATH=/usr/bin:/bin", home, NULL};
	const char *push[] = {cli, "sync", "push", "--all", NULL};
	struct spawn_opts o = prov_as_owner(p);
	const char *head[] = {GIT, "-C", name, "symbolic-ref", "HEAD", NULL, NULL};
	char branch[256], ref[300];
	struct spawn_result res;
	int r;

	o.cwd = project;
	o.envp = env;
	o.capture = 1;
	o.timeout_ms = 300000;
	if (ocsb_cli_path(cli, sizeof(cli)) < 0)
		return -1;
	snprintf(home, sizeof(home), "HOME=%s", p->owner.home);
	if (owner_branch(p, project, branch, sizeof(branch)) < 0)
		return -1;
	/* The clone checks out the branch the owner is on, so updateInstead fills its tree. */
	if (branch[0]) {
		snprintf(ref, sizeof(ref), "refs/heads/%s", branch);
		head[5] = ref;
		if (agent_git(p, head, NULL) < 0)
			return -1;
	}
	r = spawn_run(push, &o, &res);
	if (r < 0 || res.status != 0) {
		log_output(LOG_LVL_ERR,
			r == 0 && res.output && res.output[0] ? res.output : strerror(-r),
			"seeding ~%s/%s from %s (as %s) failed", p->cfg.agent, name, project,
			p->owner.name);
		if (r == 0)
			spawn_result_free(&res);
		return -1;
	}
	spawn_result_free(&res);
	return 0;
}

int repos_ensure(struct prov *p)
{
	if (!p->agent_exists) {
		for (size_t i = 0; i < p->cfg.projects.n; i++)
			prov_change(p, "create the empty repository ~%s/%s for %s", p->cfg.agent,
				path_base(p->cfg.projects.v[i]), p->cfg.projects.v[i]);
		return 0;
	}
	for (size_t i = 0; i < p->cfg.projects.n; i++) {
		const char *name = path_base(p->cfg.projects.v[i]);
		const char *get[] = {
			GIT, "-C", name, "config", "--get", "receive.denyCurrentBranch", NULL};
		const char *init[] = {
			GIT, "-c", "init.defaultBranch=main", "init", "--quiet", name, NULL};
		const char *set[] = {GIT, "-C", name, "config", "receive.denyCurrentBranch",
			"updateInstead", NULL};
		const char *tip[] = {
			GIT, "-C", name, "rev-parse", "--quiet", "--verify", "HEAD", NULL};
		char *out = NULL, why[256];
		int st, configured;

		st = home_entry_check(&p->agent, name, 1, why, sizeof(why));
		if (st < 0)
			return -1;
		if (st == 1) {
			prov_skip(p,
				"~%s/%s %s: the clone of %s is not checked or filled (the agent's "
				"own doing; to repair: sudo -u %s rm -rf ~%s/%s, then run "
				"ocsb-provision)",
				p->agent.name, name, why, p->cfg.projects.v[i], p->agent.name,
				p->agent.name, name);
			continue;
		}
		/* Checked as the agent: its home is its own, root does not walk into it. */
		st = agent_git(p, get, &out);
		if (st < 0)
			return -1;
		configured = st == 0 && out && strncmp(out, "updateInstead", 13) == 0;
		free(out);
		if (!configured &&
			prov_change(p,
				"create the repository ~%s/%s (receive.denyCurrentBranch "
				"updateInstead) for %s",
				p->cfg.agent, name, p->cfg.projects.v[i])) {
			if (agent_git(p, init, NULL) < 0 || agent_git(p, set, NULL) < 0)
				return -1;
			prov_done(p);
		}
		/* An empty clone is filled with the owner's branches, once; never overwritten. */
		out = NULL;
		st = agent_git(p, tip, &out);
		free(out);
		if (st < 0)
			return -1;
		if (st == 0 || !owner_has_commits(p, p->cfg.projects.v[i]))
			continue;
		if (!prov_change(p,
			    "fill ~%s/%s with the branches of %s (as %s, over the sync key)",
			    p->cfg.agent, name, p->cfg.projects.v[i], p->owner.name))
			continue;
		if (owner_seed(p, p->cfg.projects.v[i], name) < 0)
			return -1;
		prov_done(p);
	}
	return 0;
}
