/* SPDX-License-Identifier: MIT */
/*
 * A place in the agent's home, looked at as the agent (root never walks into that home)
 * without following anything: shared by ocsb-provision, which skips what the agent broke,
 * and ocsb doctor, which reports it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "homecheck.h"
#include "log.h"
#include "spawn.h"

struct home_job {
	const char *name; /* relative to the agent's home */
	int want_dir;
};

#define HOME_BROKEN 20

/* As the agent, in its home: 0 fine or absent, HOME_BROKEN with what is wrong on outfd. */
static int child_home_entry(void *arg, int outfd)
{
	const struct home_job *j = arg;
	struct stat st;
	int fd;

	if (lstat(j->name, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		dprintf(outfd, "%s", strerror(errno));
		return HOME_BROKEN;
	}
	if (S_ISLNK(st.st_mode)) {
		dprintf(outfd, "is a symbolic link");
		return HOME_BROKEN;
	}
	if (j->want_dir && !S_ISDIR(st.st_mode)) {
		dprintf(outfd, "is not a directory");
		return HOME_BROKEN;
	}
	if (!j->want_dir && !S_ISREG(st.st_mode)) {
		dprintf(outfd, "%s",
			S_ISDIR(st.st_mode)	       ? "is a directory"
				: S_ISFIFO(st.st_mode) ? "is a FIFO"
						       : "is not a regular file");
		return HOME_BROKEN;
	}
	fd = open(j->name,
		(j->want_dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_NOFOLLOW | O_NONBLOCK |
			O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		dprintf(outfd, "cannot be opened (%s; mode %04o)", strerror(errno),
			(unsigned)(st.st_mode & 07777));
		return HOME_BROKEN;
	}
	close(fd);
	return 0;
}

/* Runs fn as the agent in its home: 0, 1 with why (HOME_BROKEN), or -1 (logged). */
static int as_agent(const struct user_info *agent, const char *name, int (*fn)(void *, int),
	void *arg, char *ret_why, size_t n)
{
	struct spawn_opts o = {.drop = 1,
		.uid = agent->uid,
		.gid = agent->gid,
		.user = agent->name,
		.cwd = agent->home,
		.timeout_ms = 10000};
	struct spawn_result res;
	int r;

	r = spawn_fn(fn, arg, &o, &res);
	if (r < 0) {
		log_err("looking at ~%s/%s as %s: %s", agent->name, name, agent->name,
			strerror(-r));
		return -1;
	}
	r = res.status == 0 ? 0 : 1;
	if (r)
		snprintf(ret_why, n, "%s",
			res.status == HOME_BROKEN && res.output ? res.output
								: "cannot be looked at");
	spawn_result_free(&res);
	return r;
}

int home_entry_check(
	const struct user_info *agent, const char *name, int want_dir, char *ret_why, size_t n)
{
	struct home_job j = {name, want_dir};

	return as_agent(agent, name, child_home_entry, &j, ret_why, n);
}

struct link_job {
	const char *name, *target;
};

/* As the agent: 0 when ~/name is a link to target; HOME_BROKEN with what it is instead. */
static int child_home_link(void *arg, int outfd)
{
	const struct link_job *j = arg;
	char cur[4096];
	struct stat st;
	ssize_t n;

	if (lstat(j->name, &st) < 0) {
		dprintf(outfd, "%s", errno == ENOENT ? "is absent" : strerror(errno));
		return HOME_BROKEN;
	}
	if (!S_ISLNK(st.st_mode)) {
		dprintf(outfd, "is a %s of the agent's, not the mirror's link",
			S_ISDIR(st.st_mode) ? "directory" : "file");
		return HOME_BROKEN;
	}
	n = readlink(j->name, cur, sizeof(cur) - 1);
	if (n < 0 || (size_t)n != strlen(j->target) || memcmp(cur, j->target, (size_t)n) != 0) {
		dprintf(outfd, "links elsewhere");
		return HOME_BROKEN;
	}
	return 0;
}

int home_link_check(const struct user_info *agent, const char *name, const char *target,
	char *ret_why, size_t n)
{
	struct link_job j = {name, target};

	return as_agent(agent, name, child_home_link, &j, ret_why, n);
}
