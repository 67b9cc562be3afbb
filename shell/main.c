/* SPDX-License-Identifier: MIT */
/*
 * ocsb-shell: the agent's login shell (set by ocsb-provision; sshd execs it as the agent for
 * every session, command, scp and sftp). It closes what the uid leaves open in ssh sessions
 * and needs no privilege: no_new_privs, then a Landlock scope on abstract Unix sockets
 * (kernel 6.12 and later; without it the shell runs unscoped, ocsb doctor says so), then the
 * real shell (`shell` in /etc/ocsb/ocsb.conf, /bin/bash when the file cannot be read) with
 * the same arguments and login-shell mark. Signals stay unscoped: the developer signals the
 * agent's processes from her session. It also names the agent as the committer of what git
 * commits in the session (gitident.h), whatever the real shell reads at start.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "gitident.h"
#include "landlock.h"
#include "loginshell.h"

#define ME OCSB_SHELL_NAME
#define CONFIG "/etc/ocsb/ocsb.conf"

/*
 * git's identity for this uid's commits: the committer always (and the author with
 * `agent-git-author agent`), by the account's own name.
 */
static void git_identity(const struct ocsb_config *c)
{
	char env[GITIDENT_ENV_MAX][GITIDENT_LINE];
	const struct passwd *pw = getpwuid(getuid());
	size_t n = gitident_env(pw ? pw->pw_name : c->agent, NULL, c->git_author_agent, env);

	for (size_t i = 0; i < n; i++) {
		char *eq = strchr(env[i], '=');

		*eq = '\0';
		setenv(env[i], eq + 1, 1);
	}
}

/*
 * The real shell: `shell` of the config, or the default (said on stderr) when unusable;
 * the git identity set by the config (its defaults when unusable).
 */
static void real_shell(char *out, size_t n)
{
	struct ocsb_config c;
	char err[1024];

	config_defaults(&c);
	if (config_load(&c, CONFIG, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s; using %s\n", ME, err, OCSB_DEFAULT_SHELL);
		snprintf(out, n, "%s", OCSB_DEFAULT_SHELL);
		config_free(&c);
		config_defaults(&c);
	} else {
		snprintf(out, n, "%s", c.shell);
	}
	git_identity(&c);
	config_free(&c);
}

/* The same file as this program (a link or copy under another name would loop). */
static int is_self(const char *path)
{
	struct stat a, b;

	return stat(path, &a) == 0 && stat("/proc/self/exe", &b) == 0 && a.st_dev == b.st_dev &&
		a.st_ino == b.st_ino;
}

int main(int argc, char **argv)
{
	static char *noargs[] = {ME, NULL};
	char real[256], arg0[256];
	int r;

	if (argc < 1 || !argv[0])
		argv = noargs;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		fprintf(stderr, "%s: prctl(PR_SET_NO_NEW_PRIVS): %s\n", ME, strerror(errno));
	else if ((r = landlock_scope(OCSB_LANDLOCK_SCOPE_ABSTRACT_UNIX)) < 0)
		fprintf(stderr, "%s: Landlock scope on abstract Unix sockets: %s\n", ME,
			strerror(-r));

	real_shell(real, sizeof(real));
	r = loginshell_argv(real, argv, arg0, sizeof(arg0));
	if (r == 0 && is_self(real))
		r = -ELOOP;
	if (r < 0) {
		fprintf(stderr, "%s: shell %s in %s: %s; using %s\n", ME, real, CONFIG,
			r == -ELOOP ? "is ocsb-shell itself" : strerror(-r), OCSB_DEFAULT_SHELL);
		snprintf(real, sizeof(real), "%s", OCSB_DEFAULT_SHELL);
		if (loginshell_argv(real, argv, arg0, sizeof(arg0)) < 0)
			return 127;
	}
	/* Programs that start "the user's shell" ($SHELL) get the real one. */
	setenv("SHELL", real, 1);
	execv(real, argv);
	fprintf(stderr, "%s: cannot run %s: %s\n", ME, real, strerror(errno));
	if (strcmp(real, OCSB_DEFAULT_SHELL) != 0 &&
		loginshell_argv(OCSB_DEFAULT_SHELL, argv, arg0, sizeof(arg0)) == 0) {
		setenv("SHELL", OCSB_DEFAULT_SHELL, 1);
		execv(OCSB_DEFAULT_SHELL, argv);
		fprintf(stderr, "%s: cannot run %s: %s\n", ME, OCSB_DEFAULT_SHELL, strerror(errno));
	}
	return 127;
}
