/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PATHS_H
#define OCSB_PATHS_H

#include <limits.h>

/*
 * Every system location ocsb touches, in one place, so unit tests can point
 * them at a temporary directory. Programs use paths_default().
 */
struct paths {
	char etc[PATH_MAX]; /* /etc */
	char run[PATH_MAX]; /* /run */
	char varlib[PATH_MAX]; /* /var/lib */
	char home[PATH_MAX]; /* /home: parent of the agent's home */
	char sshd[PATH_MAX]; /* /usr/sbin/sshd */
	char pkgroot[PATH_MAX]; /* "": where the package's /lib and /usr/lib trees are */
	char ctl_sock[PATH_MAX]; /* run/ocsb/agentd.sock: ocsb-agentd's control socket */
};

/*
 * The control socket below `run`, and its full default name for texts that are written
 * before any struct paths exists (--help). Code uses struct paths' ctl_sock.
 */
#define PATHS_CTL_SOCK_REL "ocsb/agentd.sock"
#define PATHS_CTL_SOCK "/run/" PATHS_CTL_SOCK_REL

void paths_default(struct paths *p);
/* All trees below `root` (tests). Returns -1 if the result does not fit. */
int paths_under(struct paths *p, const char *root);
/* out = base "/" rel; -1 (ENAMETOOLONG) if it does not fit. */
int path_join(char *out, size_t n, const char *base, const char *rel);
/* The last component of a path without a trailing '/' ("/a/b" -> "b"). */
const char *path_base(const char *path);

#endif
