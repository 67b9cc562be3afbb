/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SPAWN_H
#define OCSB_SPAWN_H

#include <errno.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Run programs with an argv and a built environment, never through a shell: the one
 * fork-exec path for everything root runs as someone else (agentd's supervised children
 * use its drop, spawn_child_drop(), too; docs/design.md lists every fork and why).
 *
 * Every child starts a session of its own, so it has no controlling terminal: a child
 * left in the caller's session could push input into the terminal that ran `sudo`
 * (TIOCSTI; bubblewrap's --new-session, CVE-2017-5226). Its stdin is /dev/null or a
 * pipe, its stdout /dev/null or a pipe; its stderr is the capture pipe, or a pipe the
 * parent copies to its own stderr with control bytes escaped when the child drops
 * privileges (it never gets one of root's descriptors: a terminal, a log file, the
 * journal's stream) or when the caller's stderr is a terminal; otherwise (a root
 * child, stderr not a terminal) it inherits stderr.
 *
 * With `drop` set the child leaves root for uid/gid (supplementary groups of `user`,
 * or none), proves that neither uid nor gid can come back, sets no_new_privs and joins
 * a fresh session keyring before exec.
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
	/*
	 * A daemon: the child forks once more and the grandchild, stdio on /dev/null, is
	 * the one that execs (a child of init, in the session the child made). spawn_run
	 * returns once it has exec'd (status 0) or with its exec error; not with spawn_fn.
	 */
	int detach;
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
 * reported as the child's errno, not as a mysterious status 127. A child whose
 * privilege drop did not hold returns -SPAWN_EREGAIN (and is logged).
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

/*
 * Who a dropping child becomes, resolved before fork: the group database is read
 * through NSS (files, LDAP, sssd), which allocates and takes locks, so getgrouplist()
 * runs in the parent and the child only calls setgroups().
 */
struct spawn_cred {
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* owned: the groups of `user` (gid among them), NULL when none */
	int ngroups;
	gid_t *check; /* owned: room for ngroups + 1 entries, for getgroups() after the drop */
	uid_t from_uid; /* the caller's ids: out of reach after the drop */
	gid_t from_gid;
};

/* 0 or -errno (-ENOENT: `user` unknown). user NULL = no supplementary groups. */
int spawn_cred_init(struct spawn_cred *ret, uid_t uid, gid_t gid, const char *user);
void spawn_cred_free(struct spawn_cred *c);

/*
 * Between fork and exec, async-signal-safe: a session of its own (if the caller has not
 * made one), setgroups, setresgid, setresuid, then proof that the drop holds (all three
 * uids and gids and the groups are the target's; setgid/setegid/setresgid and
 * setuid/seteuid/setresuid back to the caller's ids and to 0 all fail, as OpenSSH's
 * permanently_set_uid() checks), no_new_privs, and a fresh session keyring so that
 * none of the caller's keys stays possessed. 0, -errno of the step that failed, or
 * -SPAWN_EREGAIN when the drop did not hold (a line saying which check tripped is
 * written to fd 2 first). The caller must then not exec: spawn's child exits with
 * SPAWN_EXIT_REGAIN.
 */
int spawn_child_drop(const struct spawn_cred *c);
#define SPAWN_EREGAIN ENOTRECOVERABLE /* "the dropped ids could come back" */
#define SPAWN_EXIT_REGAIN 126 /* exit status of such a child (127: any other setup error) */

/* "cmd: exit 3" / "cmd: killed by signal 9" / "cmd: timed out" */
const char *spawn_describe(const struct spawn_result *r, char *buf, size_t n);

#endif
