/* SPDX-License-Identifier: MIT */
#ifndef OCSB_AGENTD_H
#define OCSB_AGENTD_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "cgroup.h"
#include "config.h"
#include "egress.h"
#include "netlock.h"
#include "paths.h"
#include "proxy.h"
#include "spawn.h"
#include "testhook.h"
#include "util.h"

/* OpenCode facts (docs/opencode.md): the readiness probe and the permission setting. */
#define OPENCODE_PROBE_PATH "/global/health"
#define OPENCODE_PERMISSION_ENV "OPENCODE_PERMISSION={\"*\":\"allow\"}"

#define AGENTD_MAX_PROJECTS 16
#define AGENTD_MAX_CLIENTS 64
/* ocsb-agentd's nice value: ahead of the agent's processes (nice 0) when the CPU is busy. */
#define AGENTD_NICE (-10)
/* SIGTERM to SIGKILL of a child, at a restart and at shutdown. */
#define CHILD_STOP_MS 3000
#define SECRETS_ENV_MAX 64 /* SECRETS_MAX_COUNT of secrets/secrets.h */
/* OPENCODE_CONFIG, GIT_CONFIG_COUNT and a key and value per route (INJ_MAX_ROUTES). */
#define INJECT_ENV_MAX (2 + 2 * 16)

/* What epoll hands back: the kind of source and its object. */
enum src_kind {
	SRC_SIGNAL,
	SRC_NFT,
	SRC_CTL_LISTEN,
	SRC_CTL_CLIENT,
	SRC_CHILD,
	SRC_TIMER,
	SRC_PROBE,
	SRC_LOG,
	SRC_MIRROR,
	SRC_EXEC,
	SRC_CTL_TIMER,
	SRC_PROXYCHECK,
	SRC_INJECT /* the last: src_names in agentd.c names each */
};

struct src {
	enum src_kind kind;
	void *ptr; /* borrowed */
};

enum child_state {
	CH_STOPPED, /* not wanted (shutdown), or cannot run (missing binary) */
	CH_BACKOFF, /* waiting before a restart */
	CH_STARTING, /* running, not yet answering */
	CH_RUNNING, /* answering */
	CH_STOPPING, /* SIGTERM sent, SIGKILL when the timer fires first */
};

struct agentd;

/*
 * What a forked child needs between fork and exec, built before the fork by the
 * supervisor (formatting, the group database, opening files): after the fork the
 * child only makes system calls (async-signal-safe). Holds the OpenCode password and
 * points at the secrets: wiped right after the fork (child_plan_free).
 */
#define CHILD_PLAN_ENV (16 + INJECT_ENV_MAX + SECRETS_ENV_MAX + 1)
struct child_plan {
	char *argv[8]; /* borrowed strings: this plan's or the agentd's */
	char *env[CHILD_PLAN_ENV];
	char home[4200], user[128], logname[128], port[16], pw[128], hp[64], hsp[64], HP[64],
		HSP[64];
	struct spawn_cred cred; /* owned: OpenCode becomes the agent; squid drops by itself */
	int cg_fds[CG_NCTRL]; /* owned: the agent cgroup's cgroup.procs files, -1 = none */
	int pass_fd; /* owned: handed to the child as fd 4 (the injector's socket), -1 = none */
};

/* One supervised program: the proxy, or OpenCode for one project. */
struct child {
	char name[96]; /* "proxy", "opencode/shop" */
	enum child_state state;
	pid_t pid;
	int pidfd;
	struct src pid_src;
	int timerfd; /* backoff, exec, stop and readiness deadlines */
	struct src timer_src;
	int exec_fd; /* owned: the CLOEXEC pipe until the child execs, -1 after */
	struct src exec_src;
	int restart_after; /* CH_STOPPING: start again once it is gone */
	unsigned restarts;
	unsigned backoff_ms;
	unsigned crashes_in_row; /* reset after a stable period */
	struct timespec started;
	char last_error[512];
	/* Output: one pipe for all incarnations, copied by agentd into a bounded log. */
	int log_r, log_w; /* owned */
	struct src log_src;
	int log_fd; /* owned: the open log file, -1 until the first output */
	long long log_size;
	/* Before the fork, as root: fills the plan (0, or -errno with nothing to free). */
	int (*plan_child)(struct agentd *d, struct child *c, struct child_plan *p);
	/* In the forked child: system calls only, then exec; returns -errno on failure. */
	int (*exec_child)(struct agentd *d, struct child *c, const struct child_plan *p);
	/* OpenCode */
	int is_opencode;
	char project[4400]; /* the agent's clone */
	unsigned port;
	char password[64];
	int probe_fd;
	struct src probe_src;
	char probe_buf[256];
	size_t probe_len;
	int probe_sent;
	struct timespec probe_deadline;
	struct timespec ready_at;
	/* secrets (secretd.c) */
	char **sec_env; /* owned, locked: "NAME=value" for the next exec; NULL otherwise */
	size_t sec_count;
	unsigned char sec_digest[32]; /* keyed digest of the secrets it was started with */
};

struct ctl_client {
	int fd;
	struct src src;
	uid_t uid;
	void *reader; /* owned: struct ctl_reader */
	void *writer; /* owned: struct ctl_writer, the reply as the socket takes it */
	long deadline_ms; /* mono_ms() by which the request is read and answered */
};

/* OpenCode's private mount namespace and limits: sandbox.c */
struct sandbox {
	int ready;
	char machine_id[4200], boot_id[4200], cmdline[4200], dmi[4200]; /* fake values */
#ifdef OCSB_TEST_BUILD
	char test_wrap[4096]; /* test hook: exec'd in OpenCode's place (OCSB_TEST_HOOKS=1) */
#endif
};

struct agentd {
	struct paths paths;
	char config_path[4096];
	struct ocsb_config cfg; /* owned */
	struct egress egress; /* owned */
	struct user_info agent, owner;
	struct netlock_spec nl;
	struct proxy proxy;
	char opencode_bin[4096];
	struct sandbox sb;

	int epfd;
	int sigfd;
	struct src sig_src;
	int nftfd;
	void *nft_sock; /* owned: struct mnl_socket */
	void *guard_sock; /* owned: struct mnl_socket that owns the guard table */
	void *nl_sock; /* owned: kept for the table's restores and read-backs (netlock_apply_sock) */
	struct src nft_src;
	int ctlfd;
	struct src ctl_src;
	char ctl_path[4096];
	struct ctl_client clients[AGENTD_MAX_CLIENTS];
	int ctl_timer; /* the nearest client deadline */
	struct src ctl_timer_src;
	int freeze_timer;
	struct src freeze_src;

	struct child proxy_child;
	struct child oc[AGENTD_MAX_PROJECTS];
	size_t n_oc;
	struct child inject_child; /* ocsb-inject (injectd.c) */
	void *inject; /* owned: struct injectd */
	uid_t inject_uid;
	gid_t inject_gid;

	struct cgroup cg; /* the agent's: limits, freezing, killing as a whole */
	struct cg_limits limits;
	char cg_error[512]; /* why there is none */

	int frozen; /* 0, 1 = by SIGSTOP, 2 = by the cgroup freezer */
	int sigstopped; /* some processes were stopped by SIGSTOP: SIGCONT at the thaw */
	unsigned netlock_restores;
	double last_restore_ms;
	double found_ms; /* the read-back that found the table altered (for the log) */
	char netlock_error[512];
	char stale_agents[1024]; /* the registry's entries told of (netlock_registry), as last said */
	int stopping;
#ifdef OCSB_TEST_BUILD
	int test_hooks; /* OCSB_TEST_HOOKS=1 in a test build: sandbox.c's and netwatch.c's hooks */
#endif
	void *mirror; /* owned: struct mirrorwatch, NULL when nothing is mirrored */
	/* SIGHUP's squid configuration under `squid -k parse`: proxycheck.c */
	pid_t pcheck_pid;
	int pcheck_fd;
	struct src pcheck_src;
	struct buf pcheck_conf, pcheck_out; /* owned */
	int pcheck_again;
	struct timespec started;

	/* secrets (secretd.c) */
	unsigned char *sec_sk; /* owned, locked; NULL: secrets unavailable (sec_error says why) */
	unsigned char sec_pk[32];
	unsigned char sec_digest_key[32]; /* random per process */
	char sec_error[512];
};

/* main loop and setup: agentd.c */
int agentd_setup(struct agentd *d);
int agentd_run(struct agentd *d);
void agentd_free(struct agentd *d);
int agentd_watch(
	struct agentd *d, int fd, struct src *s, enum src_kind kind, void *ptr, uint32_t events);

/* SIGHUP's proxy configuration, checked outside the loop: proxycheck.c */
void proxycheck_begin(struct agentd *d);
void proxycheck_event(struct agentd *d);
void proxycheck_close(struct agentd *d);

/* children: child.c */
/* What a child was doing when it failed before its exec (the high 16 bits of its report). */
enum child_step { STEP_EXEC, STEP_CGROUP, STEP_MOUNTS, STEP_DROP, STEP_LIMITS, STEP_CHDIR };
void child_start_error(unsigned code, char *out, size_t n);
int child_start(struct agentd *d, struct child *c);
void child_exited(struct agentd *d, struct child *c);
void child_timer(struct agentd *d, struct child *c);
void child_probe_event(struct agentd *d, struct child *c, uint32_t events);
void child_stop_soon(struct agentd *d, struct child *c);
void child_stop_begin(struct agentd *d, struct child *c);
void child_stop_wait(struct agentd *d, struct child *c, long deadline);
void child_exec_event(struct agentd *d, struct child *c);
void child_restart(struct agentd *d, struct child *c);
int proxy_plan(struct agentd *d, struct child *c, struct child_plan *p);
int proxy_exec(struct agentd *d, struct child *c, const struct child_plan *p);
int opencode_plan(struct agentd *d, struct child *c, struct child_plan *p);
int opencode_exec(struct agentd *d, struct child *c, const struct child_plan *p);
void child_plan_free(struct child_plan *p);
int opencode_password(struct agentd *d, struct child *c);
long ms_since(const struct timespec *t);
#define CHILD_LOG_DIR "/var/log/ocsb"
void child_log_name(const struct child *c, char *out, size_t n);
int child_log_open(struct agentd *d, struct child *c);
void child_log_event(struct agentd *d, struct child *c);

/* sandbox.c */
int priv_sandbox_prepare(struct agentd *d);
#ifdef OCSB_TEST_BUILD
void priv_sandbox_test_wrap(struct agentd *d);
#endif
int child_sandbox_mounts(struct agentd *d);
int child_sandbox_limits(void);

/* netlock watch and freezing: netwatch.c */
int netwatch_open(struct agentd *d);
/*
 * The machine's other agents and their agent-ports ranges (the registry) into d->nl: 1
 * changed, 0 same, -1 unreadable.
 */
int netwatch_agents(struct agentd *d);
void netwatch_event(struct agentd *d);
int netwatch_enforce(struct agentd *d, const char *why);
int freeze_agent(struct agentd *d);
int agent_cgroup_setup(struct agentd *d);
void agent_cgroup_publish(struct agentd *d, int on);
/*
 * <run>/ocsb/<agent>, created root-owned 0755 if missing and refused unless it is root's
 * and not writable by others: an fd to it, or -1 (logged, prefixed with what).
 */
int agent_run_dir(struct agentd *d, char *dir, size_t n, const char *what);
int thaw_agent(struct agentd *d);
void freeze_tick(struct agentd *d);

/* secrets: secretd.c */
int secretd_init(struct agentd *d);
void secretd_free(struct agentd *d);
/* Before forking OpenCode: c->sec_env for its environment; free right after the fork. */
int secretd_child_env(struct agentd *d, struct child *c);
void secretd_child_env_free(struct child *c);
void secretd_put(struct agentd *d, uid_t peer, const char *sealed, struct buf *reply);
/* The decrypted record into locked memory (free with secrets_set_free): 0 or -1, logged. */
struct secret_set;
int secretd_load(struct agentd *d, struct secret_set **ret);

/* the credential injector: injectd.c */
/* The route ports, bound before anything of the agent runs (and before secretd_init). */
int injectd_hold_ports(struct agentd *d);
int injectd_init(struct agentd *d);
void injectd_free(struct agentd *d);
void injectd_event(struct agentd *d, uint32_t events);
/* After a push: routes, netlock ports, OpenCode's config, and the keys to the injector. */
void injectd_update(struct agentd *d, const struct secret_set *s);
/*
 * The routes agentd serves into d->nl (their ports for the agent, their upstream ports for
 * ocsb-inject's chain), nothing applied: every path that builds d->nl anew calls it.
 */
void injectd_netlock(struct agentd *d);
/* The route ports agentd serves, ascending into ports[NETLOCK_MAX_INJECT]: how many. */
size_t injectd_ports(struct agentd *d, unsigned *ports);
/*
 * What project's OpenCode is started with (NULL-terminated, or NULL): OPENCODE_CONFIG
 * naming its provider settings, GIT_CONFIG_* sending git to its generic routes. Marks
 * them as the ones the instance got, for injectd_changed.
 */
char *const *injectd_child_env(struct agentd *d, const char *project);
/* 1 when project's routes moved since its OpenCode got them (a push restarts it). */
int injectd_changed(struct agentd *d, const char *project);
/* The git settings for the ssh sessions' env file ("export GIT_CONFIG_...\n"), no key. */
int injectd_env_lines(struct agentd *d, const struct secret_set *s, const char *project,
	struct buf *out);
int inject_plan(struct agentd *d, struct child *c, struct child_plan *p);
int inject_exec(struct agentd *d, struct child *c, const struct child_plan *p);

/* the mirror of the owner's configs: mirrorwatch.c */
int mirrorwatch_open(struct agentd *d);
void mirrorwatch_event(struct agentd *d, struct src *s);
void mirrorwatch_reload(struct agentd *d);
void mirrorwatch_close(struct agentd *d);

/* control socket: ctlsrv.c */
int ctlsrv_open(struct agentd *d);
void ctlsrv_accept(struct agentd *d);
void ctlsrv_client(struct agentd *d, struct ctl_client *cl, uint32_t events);
void ctlsrv_timer(struct agentd *d);
/* The slot for a new client: a free one, else the one nearest its deadline (the oldest). */
struct ctl_client *ctlsrv_slot(struct ctl_client *v, size_t n);
/* The nearest deadline of the connected clients, 0 for none. */
long ctlsrv_next_deadline(const struct ctl_client *v, size_t n);
void ctlsrv_close(struct agentd *d);

#endif
