/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROVISION_H
#define OCSB_PROVISION_H

#include <sys/types.h>

#include "config.h"
#include "egress.h"
#include "paths.h"
#include "proxy.h"
#include "testhook.h"
#include "util.h"

/*
 * ocsb-provision runs as root. Its functions are named after whose rights they use where
 * another user is involved: priv_* works as root inside a directory a user controls (by
 * descriptor, O_NOFOLLOW); owner_* and agent_* run something with that user's rights
 * through common/spawn.c; child_* is the code inside such a dropped child.
 */

enum prov_mode {
	PROV_APPLY,
	PROV_DRY_RUN, /* print the plan, change nothing */
	PROV_CHECK, /* report drift, change nothing, exit 1 on drift */
	PROV_REMOVE, /* undo (account kept unless purge) */
};

struct prov_opts {
	const char *config_path; /* borrowed; NULL = <etc>/ocsb/ocsb.conf */
	const char *agent; /* borrowed; overrides the file */
	const char *owner;
	struct strv projects; /* owned; replaces the file's list when non-empty */
	struct strv keys;
	struct strv sync_keys; /* owned; replaces the file's sync-key list when non-empty */
	enum prov_mode mode;
	int purge;
	int adopt;
	int verbose;
	int install_opencode; /* --install-opencode[=VERSION] */
	const char *opencode_version; /* borrowed; NULL = OCSB_OPENCODE_VERSION */
};

struct prov {
	struct paths paths;
	struct ocsb_config cfg; /* owned */
	enum prov_mode mode;
	int purge;
	int others; /* --remove: other agents ocsb provisioned here remain */
	int adopt;
	int config_exists;
	char config_path[4096];

	struct user_info owner;
	int have_owner;
	struct strv extra_keys; /* owned; normalized lines of the 'key' files */
	struct strv extra_sync_keys; /* owned; normalized lines of the 'sync-key' files */
	struct user_info agent;
	int agent_exists;
	char shell_src[4096]; /* ocsb-shell beside this program */
	char login_shell[4096]; /* its copy in <varlib>/ocsb/bin: the agent's login shell */
	int agent_created; /* useradd ran in this process */

	int opencode_managed; /* opencode-bin set or --install-opencode used: check it */
	int opencode_bad; /* preflight found the binary unusable (--check: drift) */
	int opencode_missing; /* the default opencode-bin is missing: this run installs it */
	char opencode_err[1024];

	struct user_info agentd_acct; /* the supervisor's account, ocsb-agentd (issue 26) */
	int have_agentd_acct;

	struct egress egress; /* owned */
	int egress_loaded;
	struct buf egress_first; /* owned: the rules of a first run, made once (egress_first.c) */
	struct proxy proxy;

	unsigned changes;
	unsigned skipped; /* steps the agent broke in its own home (prov_skip) */
#ifdef OCSB_TEST_BUILD
	unsigned fault_at; /* test hook: SIGKILL self after this many changes */
#endif
};

/* prov.c */
int prov_main(struct prov_opts *o);
/*
 * A system account of ocsb's own (sysaccount.c): found, or created when create is set.
 * 0, -ENOENT (missing, create unset), -EIO (useradd failed), -EPERM (not ours); logged.
 */
int prov_system_account(const char *name, const char *gecos, int create, uid_t *ret_uid,
	gid_t *ret_gid);
int inject_account_ensure(struct prov *p);
/*
 * The supervisor's account (issue 26): ocsb-warden starts ocsb-agentd as it. The name is
 * the warden's SUPERVISOR_USER (warden/warden.h); the comment marks it as ocsb's.
 */
#define AGENTD_USER "ocsb-agentd"
#define AGENTD_GECOS "ocsb supervisor"
#define AGENTD_LOG_DIR "/var/log/ocsb" /* CHILD_LOG_DIR of agentd/agentd.h */
int agentd_account_ensure(struct prov *p);
/*
 * Its state directories, made its own (by descriptor): <varlib>/ocsb/agentd 0700,
 * <varlib>/ocsb/squid 0755, /var/log/ocsb 0750; root's files of an earlier version in
 * them are given to it (after secrets_ensure: its sealing key among them). The
 * mirror's directory: prov_mirror_ensure.
 */
int agentd_dirs_ensure(struct prov *p);
/* Record one change; returns 1 when the caller must make it (apply/remove modes). */
int prov_change(struct prov *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Called after each change is made: the fault-injection point of the tests. */
void prov_done(struct prov *p);

/* ocsb-agentd (started by systemd or by hand) listens on its control socket. */
int prov_agentd_running(struct prov *p);
/*
 * ocsb-provision --warden-config[=start] (wrecord.c): the record of wconf.h on stdout, or
 * one line "error MESSAGE"; with `start`, a proxy a provisioning run started is stopped
 * first (the warden's supervisor runs its own). 0, or 1.
 */
int prov_warden_config(const char *path, int start);
struct spawn_result;
struct spawn_opts;
/* Options of a run as the owner: dropped to the owner's uid, gid and groups, cwd "/", 30 s. */
struct spawn_opts prov_as_owner(const struct prov *p);
/*
 * git as the owner (repos.c): no system config, PATH and LC_ALL alone, its output
 * captured, 30 s at most. spawn_run's return; the caller frees res.
 */
int prov_owner_git(struct prov *p, const char *const argv[], struct spawn_result *res);
/*
 * 1 when this run's configuration is the one ocsb-agentd reads (/etc/ocsb/ocsb.conf): its
 * agent is the one agentd serves, whose secrets and OpenCode passwords agentd keeps.
 */
int prov_agentd_config(const struct prov *p);

/*
 * A step left out because the agent broke its place in its home (common/homecheck.c looks,
 * as the agent): one warning, counted in the summary; every other step still runs.
 */
void prov_skip(struct prov *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*
 * A root-owned file under a root-owned tree holding exactly b (mode, root:root), written
 * atomically when it differs ("write PATH"); *changed set when written (may be NULL).
 */
/* A shared file of the machine (at.deny, pam.d/sshd, ssh_known_hosts), edited in place. */
struct prov_file {
	char *data; /* owned; NULL when absent */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	int exists;
};
/*
 * Reads <etc>/rel (its path in path), with its owner and mode (absent: no data, 0644
 * root:root); 0 or -1 (logged).
 */
int prov_file_read(struct prov *p, const char *rel, char *path, size_t n, struct prov_file *f);
/*
 * changed > 0: "what" is the change; once made (prov_change), out replaces the file with its
 * owner and mode kept, or removes it when out is empty and remove_empty. Frees f's data.
 * 0, or -1 (logged; also when changed < 0).
 */
int prov_file_commit(struct prov *p, const char *path, struct prov_file *f, int changed,
	const struct buf *out, int remove_empty, const char *what);
/* Makes path's parent directory (root's, 0755) as needed; its descriptor, or -1 (logged). */
int prov_parent_dir(const char *path);
int prov_write_file(
	struct prov *p, const char *path, const struct buf *b, mode_t mode, int *changed);
/* Removes path if present ("remove [WHAT ]PATH"). */
int prov_remove_file(struct prov *p, const char *path, const char *what);
/* Run an absolute-path program as root with a clean environment; logs failures. */
int prov_exec(struct prov *p, const char *const argv[], char **ret_output);

/* harden.c: cron/at denial and pam_limits for the agent */
int harden_ensure(struct prov *p);
int harden_remove(struct prov *p);
/*
 * Add (or remove) the line `user` in a deny file's text; 1 when out differs from in, 2 when
 * removing left only the mark of a file ocsb-provision made (out empty: remove the file).
 */
int harden_deny_edit(const char *in, const char *user, int add, struct buf *out);
int harden_render_limits(const char *user, struct buf *out);
/* Add (or remove) ocsb's pam_namespace line in /etc/pam.d/sshd text; 1 when changed. */
int harden_pam_edit(const char *in, int add, struct buf *out);
/* The directories the agent's ssh sessions get a tmpfs of their own on; [0] is /tmp. */
#define HARDEN_NPOLY 4
extern const char *const harden_polydirs[HARDEN_NPOLY];
/* skip: bit i leaves harden_polydirs[i] out (never /tmp, which runs the init script). */
int harden_render_namespace(const char *user, unsigned skip, struct buf *out);
unsigned harden_polydirs_skip(int say, const char *agent);
/*
 * The pam_namespace init script: the fake identity's masks, then the session joins the
 * cgroups ocsb-agentd lists in cgroups_file and is refused unless it is in every one;
 * with no list it is refused while conf_path configures limits, unless systemd holds
 * the session in the agent's slice (uid, slice_conf: ocsb's drop-in).
 */
int harden_render_init(const char *identity_dir, const char *cgroups_file, const char *conf_path,
	const char *slice_conf, unsigned uid, struct buf *out);

/* account.c */
struct stat;
/* A program root may run or hand out: a root-owned regular file, 0755 at most. */
int prov_root_binary(const struct stat *st);
/* The directory of this very program, in out; -1 (logged, naming `what` looked for there). */
int prov_self_dir(char *out, size_t n, const char *what);
/* ocsb-shell in dir: 0, or -errno with the reason and what to do in err. */
int account_check_login_shell(const char *dir, char *path, size_t n, char *err, size_t errlen);
int account_preflight(struct prov *p);
int account_ensure(struct prov *p);
int account_purge(struct prov *p);
int state_root(struct prov *p);
int state_record(struct prov *p, const char *origin);
int state_origin(struct prov *p, char *ret, size_t n);
int state_remove(struct prov *p);
/* How many other agents ocsb provisioned here (state files besides this agent's), or -errno. */
int state_other_agents(struct prov *p);

/* keys.c */
int keys_parse_pubkey(const char *line, struct buf *ret_normalized, char *err, size_t errlen);
int keys_render_authorized(const struct strv *owner_keys, const char *sync_key,
	const struct strv *extra_sync_keys, struct buf *out);
int keys_render_known_hosts(const struct strv *host_keys, unsigned port, struct buf *out);
int keys_preflight(struct prov *p);
int keys_ensure(struct prov *p);
int keys_remove(struct prov *p);
/*
 * The marked block of this machine's host keys in /etc/ssh/ssh_known_hosts: in is the
 * file, block the lines to keep there (NULL: none); out gets the new file. 1 changed,
 * 0 same, -1 no memory.
 */
int keys_global_known_hosts_edit(const char *in, const char *block, struct buf *out);
int keys_global_ensure(struct prov *p);
/* Removes the block (with the last agent). */
int keys_global_remove(struct prov *p);

/* sshd.c */
int sshd_render_dropin(const struct ocsb_config *c, const char *keys_dir, struct buf *out);
int sshd_has_include(const char *main_config, const char *dropin_dir);
int sshd_check_effective(const char *sshd_T_output, const struct ocsb_config *c,
	const char *keys_dir, char *err, size_t errlen);
int sshd_preflight(struct prov *p);
int sshd_ensure(struct prov *p);
int sshd_remove(struct prov *p);

/* net.c */
int net_preflight(struct prov *p);
int net_ensure(struct prov *p);
int net_remove(struct prov *p);
/*
 * egress_first.c: the text of /etc/ocsb/egress.conf for a first run (issue 29), made once
 * per run and kept in p->egress_first: policy allowlist, allow lines for the providers,
 * registries, git hosts and OpenCode's endpoints. 0, or -1 (said).
 */
int net_first_rules(struct prov *p, const struct buf **ret);

/* ports.c: the agents' loopback ports against each other */
/* What an entry of the agents registry records of an agent's loopback ports. */
struct ports_entry {
	unsigned lo, hi; /* "ports LO-HI": its agent-ports range (0/0: none) */
	unsigned oc_lo, oc_hi; /* "opencode-ports LO-HI": its OpenCode servers (0/0: unknown) */
};
/* An entry's text: ranges as ocsb-provision writes them; a bad or second ports line, none. */
void ports_entry_parse(const char *text, struct ports_entry *ret);
/*
 * Whether configuration c (from file) and the entry of the agent `other` (at other_path)
 * overlap where one agent would reach the other's servers: 1 with "FILE:LINE: ..." naming
 * both agents and ranges in err, or 0.
 */
int ports_conflict(const struct ocsb_config *c, const char *file, const char *other,
	const char *other_path, const struct ports_entry *e, char *err, size_t errlen);
/* c against every other entry of the registry: 0, or -1 (said). */
int ports_preflight(struct prov *p);

/* systemd.c */
/* The unit's text as provisioning writes it to /etc (make install: no packaged unit). */
int systemd_render_unit(struct buf *out);
/* 1 when text starts with the header ocsb-provision writes: a copy that is ours. */
int systemd_unit_is_ours(const char *text, size_t len);
/* The package's unit under <pkgroot>/usr/lib or /lib/systemd/system: 1 and its path, or 0. */
int systemd_packaged_unit(const struct paths *p, char *ret, size_t n);
int systemd_render_slice(const struct ocsb_config *c, struct buf *out);
/* <etc>/systemd/system/user-UID.slice.d and the ocsb.conf drop-in in it. */
int systemd_slice_paths(struct prov *p, uid_t uid, char *dir, size_t dn, char *file, size_t fn);
/* Where systemd is absent: how to run the supervisor, after a run that changed things. */
void systemd_note(struct prov *p);
int systemd_ensure(struct prov *p);
/* The agent's slice limits; with last_agent also the supervisor's unit and its enabling. */
int systemd_remove(struct prov *p, int last_agent);
/* --remove: stop ocsb-agentd.service when systemd runs it: 1 stopped, 0 not active, -1. */
int systemd_stop_agentd(struct prov *p);
/* ... and start it again afterwards (other agents remain): 0 or -1. */
int systemd_start_agentd(struct prov *p);

/* opencode.c */
/* An exact release number ("1.18.33"): no tags or ranges. */
int opencode_version_ok(const char *v);
/* npm install into the root-owned prefix unless that version is there already. */
int opencode_install(struct prov *p, const char *version);
int opencode_preflight(struct prov *p, int installing);
int opencode_ensure(struct prov *p, int installed_now);
/* npm_fail.c: after a failed `npm ci`: its log kept, the cause named when known. */
enum npm_cause { NPM_CAUSE_OTHER, NPM_CAUSE_TLS, NPM_CAUSE_NET };
enum npm_cause npm_cause(const char *out);
/* The newest *.log of npm's log directory copied to dest (root's, 0600): 0 or -errno. */
int npm_keep_log(const char *logs, const char *dest);
/* Both, logged: npm's output, its log directory, where to keep the log. */
void npm_explain(const char *out, const char *logs, const char *keep);

/* secrets.c: agentd's sealing key pair and the agent's profile hook */
int secrets_render_hook(const char *agent, uid_t uid, const char *run, struct buf *out);
int secrets_ensure(struct prov *p);
int secrets_remove(struct prov *p);
/* mirror.c: the read-only mirror of the owner's configs */
int prov_mirror_ensure(struct prov *p);
int prov_mirror_remove(struct prov *p);

/* repos.c */
int repos_preflight(struct prov *p);
int repos_ensure(struct prov *p);

#endif
