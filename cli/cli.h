/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CLI_H
#define OCSB_CLI_H

#include <sys/stat.h>

#include "config.h"
#include "egress.h"
#include "paths.h"
#include "proxy.h"

/* What every subcommand needs: the machine's configuration and the egress rules. */
struct cli {
	struct paths paths;
	struct ocsb_config cfg; /* owned */
	struct egress egress; /* owned */
	struct proxy proxy;
	struct user_info owner; /* who the rules' owner file belongs to */
	int have_owner;
};

int cli_load(struct cli *c, char *err, size_t errlen);
void cli_free(struct cli *c);

/* agentd_cmd.c: `ocsb status|web|restart|logs`, through the control socket */
int cmd_agentd(int argc, char **argv);

/* mirror.c: `ocsb mirror status [--json]` */
int cmd_mirror(int argc, char **argv);
/*
 * The mirror's places in the agent's home (as root: looked at as the agent): fn gets each
 * place the tree holds or reserves, why NULL when it is the mirror's link, else why not.
 * Writable copies and the generated .gitconfig are not links and are left out. Returns how
 * many places were looked at, or -1.
 */
typedef void (*mirror_place_fn)(void *arg, const char *rel, const char *why);
int mirror_places_check(const struct ocsb_config *cfg, const struct paths *p,
	const struct user_info *agent, mirror_place_fn fn, void *arg);

/* secrets.c: `ocsb secrets ...`, the owner's side of the secrets (secrets/ holds the format) */
int cmd_secrets(int argc, char **argv);
int cmd_usage(int argc, char **argv);

/* sync.c: `ocsb sync ...`: argv[0] is "sync". Exit status 0 ok, 1 failure, 2 usage. */
int cmd_sync(int argc, char **argv);

/* egress.c: `ocsb egress render|verify|logs` */
int cmd_egress(struct cli *c, int argc, char **argv);
/* Its arguments (after "egress"): 0, or 2 with one line that says what is wrong. */
int egress_args(int argc, char **argv);
/* egress_learn.c: `ocsb egress learn|apply|allow|denied` (argv[0] is the verb) */
int egress_learn_cmd(struct cli *c, int argc, char **argv);
int egress_learn_args(int argc, char **argv);
/* --since WHEN (30m, 2h, 7d, 2026-12-06, 2026-12-06T21:00:00Z) as a time: 0, or -1. */
int egress_since(const char *s, time_t now, time_t *ret);

/* doctor.c: `ocsb doctor [--fix] [--json]`; exit 1 when a check FAILs */
int cmd_doctor(struct cli *c, int argc, char **argv);
/* Its arguments (argv[0] is "doctor"): 0 with the flags set (each may be NULL), or 2 with
 * one line that says what is wrong. */
int doctor_args(int argc, char **argv, int *ret_fix, int *ret_json);
const char *doctor_status_name(int st);
int doctor_sshd_verdict(const char *sshd_t, const char *agent, char *bad, size_t n);
/*
 * The route ports agentd's status names (served: "none", or "18400 18401") against the
 * ones its guard table holds (guard[n], ascending): 0 the same, 1 not (why says which port
 * and how).
 */
int doctor_routes_differ(
	const char *served, const unsigned *guard, size_t n, char *why, size_t whylen);
int doctor_listed(const char *text, const char *user);
/*
 * OpenCode's instances in ocsb-agentd's status (keys and values as they came, a block per
 * "instance"): 0 when each runs or is still starting (within its start time: agentd names
 * no last-error yet), 1 when one is not; detail says which, and how long each has been
 * starting ("0 of 1 instance running; starting: shop (12 s)").
 */
int doctor_instances_verdict(
	const struct strv *keys, const struct strv *values, char *detail, size_t n);
/*
 * The abstract-sockets check: 0 when the agent's login shell is ocsb-shell (shell_safe: a
 * root-owned file not writable by group/others) on a kernel with Landlock ABI >= 6, 1 when
 * the login shell is something else, 2 when the kernel is too old.
 */
int doctor_shell_verdict(const char *login_shell, int shell_safe, long abi);
int doctor_sensitive(const char *rel);
/*
 * The fix for a kernel setting below its minimum (issue 28): set it now and keep it in a
 * file of its own, /etc/sysctl.d/60-ocsb-NAME.conf, so that following every fix doctor
 * prints keeps every setting (one shared file kept only the last). 0, or -1 if it does
 * not fit in n.
 */
int doctor_sysctl_fix(char *buf, size_t n, const char *name, int min);
/*
 * --fix as root: chmod go-rwx home/rel through a descriptor opened below homefd without
 * following links, only if it is still the regular file `seen` (device, inode) of `owner`.
 * 0, or -1 with why it was left alone.
 */
int doctor_fix_mode(int homefd, const char *rel, const struct stat *seen, uid_t owner,
	char *why, size_t n);

#endif
