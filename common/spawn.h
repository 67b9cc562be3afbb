/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SPAWN_H
#define OCSB_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Run programs with an argv and a built environment, never through a shell.
 * With `drop` set the child leaves root for uid/gid (supplementary groups of
 * `user`, or none), verifies root cannot be regained and sets no_new_privs
 * before exec.
 */
struct spawn_opts {
	int drop;
	uid_t uid;
	gid_t gid;
	const char *user; /* borrowed; initgroups() name, NULL = no groups */
	char *const *envp; /* borrowed; NULL = PATH only */
	const char *cwd; /* borrowed; NULL = "/" */
	const char *input; /* borrowed; written to stdin, NULL = /dev/null */
	int capture; /* collect stdout+stderr */
	int timeout_ms; /* 0 = 60 s; then SIGKILL */
	size_t max_output; /* 0 = 256 KiB; the rest is dropped */
	pid_t parent; /* set by spawn itself: who forked the child */
};

struct spawn_result {
	int status; /* exit code, or 128+signal */
	char *output; /* owned; NUL-terminated when captured, else NULL */
	size_t output_len;
	int timed_out;
};

/*
 * Run argv[0] (an absolute path). 0 when the program ran (whatever its exit
 * status), negative errno when it could not be started; the exec error is
 * reported as the child's errno, not as a mysterious status 127.
 */
int spawn_run(const char *const argv[], const struct spawn_opts *o, struct spawn_result *ret);
void spawn_result_free(struct spawn_result *r);

/*
 * Run fn(arg, outfd) in a forked child with the privileges of spawn_opts
 * (drop/uid/gid/user/cwd); whatever fn writes to outfd is returned in ret->output.
 * ret->status is fn's return value (0..125), or 128+signal. Only for
 * single-threaded callers: the child runs ordinary code, not just exec.
 */
int spawn_fn(int (*fn)(void *arg, int outfd), void *arg, const struct spawn_opts *o,
	struct spawn_result *ret);

/* Drop from root to uid/gid with the groups of `user` (NULL = none). 0 or -errno. */
int spawn_drop_privileges(uid_t uid, gid_t gid, const char *user);

/* "cmd: exit 3" / "cmd: killed by signal 9" / "cmd: timed out" */
const char *spawn_describe(const struct spawn_result *r, char *buf, size_t n);

#endif
