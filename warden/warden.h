/* SPDX-License-Identifier: MIT */
#ifndef OCSB_WARDEN_H
#define OCSB_WARDEN_H

/*
 * ocsb-warden: the root part of the supervisor (docs/design.md, "Who runs what"). It keeps
 * the netlock, the agent's cgroup and the children's privileges; ocsb-agentd, the
 * supervisor, runs as its own account and asks for each of those over the protocol of
 * wproto.h. Nothing here parses what the agent writes.
 */
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"
#include "config.h"
#include "wconf.h"
#include "netlock.h"
#include "paths.h"
#include "proxy.h"
#include "spawn.h"
#include "testhook.h"
#include "util.h"
#include "wproto.h"

#define WARDEN_NICE (-10)
#define SUPERVISOR_USER "ocsb-agentd" /* the supervisor's account */
#define SUPERVISOR_BIN "ocsb-agentd" /* next to ocsb-warden */
#define CHILD_STOP_MS 3000 /* SIGTERM to SIGKILL of a child the warden stops itself */
#define SUPERVISOR_STOP_MS 10000 /* SIGTERM to SIGKILL of the supervisor */
#define SUPERVISOR_BACKOFF_MAX_MS 30000
#define SUPERVISOR_HELLO_MS 30000 /* its start to its WP_HELLO */
#define EXEC_TIMEOUT_MS 3000
#define WARDEN_LOG_DIR "/var/log/ocsb" /* the children's logs: the supervisor's */

/* What epoll hands back. */
enum wsrc_kind { WS_SIGNAL, WS_NFT, WS_SUPER, WS_SUPER_EXIT, WS_CHILD, WS_EXEC, WS_TIMER };

struct wsrc {
	enum wsrc_kind kind;
	void *ptr;
};

/* The fake identity files OpenCode sees (sandbox.c). */
struct sandbox {
	int ready;
	char machine_id[4200], boot_id[4200], cmdline[4200], dmi[4200];
#ifdef OCSB_TEST_BUILD
	char test_wrap[4096]; /* exec'd in OpenCode's place (sandbox.c) */
#endif
};

/* A child the supervisor asked for: a slot of wproto's. */
struct wchild {
	uint32_t kind; /* enum wp_kind; 0 = free */
	uint32_t index; /* OpenCode's project */
	pid_t pid;
	int pidfd;
	struct wsrc pid_src;
	int exec_fd; /* the CLOEXEC pipe until the exec, -1 after */
	struct wsrc exec_src;
};

/* The warden's states towards its supervisor (docs/privsep.md). */
enum wstate { W_NONE, W_INIT, W_RUN, W_STOP };

struct warden {
	struct paths paths;
	char config_path[4096];
	char self_dir[4096]; /* where ocsb-warden is: ocsb-agentd is there too */
	int verbose, use_syslog;
	struct wconf cfg; /* owned: ocsb.conf's values (wconf.h) */
	struct user_info agent, owner, sup, inject;
	uid_t proxy_uid;
	gid_t proxy_gid;
	struct netlock_spec nl;
	struct netlock_snap snap; /* the table as the kernel listed it once installed */
	struct proxy proxy;
	struct sandbox sb;
#ifdef OCSB_TEST_BUILD
	int test_hooks; /* OCSB_TEST_HOOKS=1 in a test build: sandbox.c's and netwatch.c's hooks */
#endif

	int epfd;
	int sigfd;
	struct wsrc sig_src;
	void *nft_sock, *guard_sock, *nl_sock; /* owned: struct mnl_socket */
	int nftfd;
	struct wsrc nft_src;
	int ctlfd; /* the control socket between its bind and the supervisor's fork, else -1 */

	/* the supervisor */
	enum wstate state;
	pid_t sup_pid;
	int sup_pidfd;
	struct wsrc sup_exit_src;
	int sup_fd; /* our end of the protocol */
	struct wsrc sup_src;
	int sup_timer; /* backoff before the next, and the stop deadline */
	struct wsrc sup_timer_src;
	unsigned sup_backoff_ms;
	long sup_started_ms;
	int sup_killed; /* we killed it (a refused request): say so when it is gone */
	char notify[108]; /* systemd's socket, "" when none */
	int ready_sent;

	struct wchild ch[WP_MAX_CHILDREN];

	/* the agent's cgroup */
	struct cgroup cg;
	struct cg_limits limits;
	char cg_error[512];

	/* the netlock's state */
	int frozen; /* 0, 1 = by SIGSTOP, 2 = by the cgroup freezer */
	int sigstopped;
	int freeze_timer;
	struct wsrc freeze_src;
	unsigned restores;
	double last_restore_ms, found_ms;
	char netlock_error[512];
	char stale_agents[1024];
	int stopping;
};

/* main.c */
int warden_watch(struct warden *w, int fd, struct wsrc *s, enum wsrc_kind kind, void *ptr);
/* start: the first load, which also has a proxy provisioning started stopped (wrecord.c). */
int warden_load(struct warden *w, int start);
/* SIGHUP, or the supervisor's WP_RELOAD: ocsb.conf again, all or nothing. */
void warden_reload(struct warden *w);
/* The control socket, bound and listening (0666; the supervisor checks SO_PEERCRED): fd or -1. */
int warden_ctl_bind(struct warden *w);
/* <run>/ocsb/<agent>, root's and not writable by others: an fd, or -1 (logged). */
int warden_run_dir(struct warden *w, char *dir, size_t n);

/* netwatch.c: the netlock kept, the agent frozen while it cannot be */
int netwatch_open(struct warden *w);
int netwatch_agents(struct warden *w);
void netwatch_event(struct warden *w);
int netwatch_enforce(struct warden *w, const char *why);
/* w->nl changed (a request, a reload): install it; a failure freezes the agent. */
int netwatch_update(struct warden *w, const char *why);
void freeze_tick(struct warden *w);
int freeze_agent(struct warden *w);
int thaw_agent(struct warden *w);
int agent_cgroup_setup(struct warden *w);
void agent_cgroup_publish(struct warden *w, int on);

/* sandbox.c */
int priv_sandbox_prepare(struct warden *w);
#ifdef OCSB_TEST_BUILD
void priv_sandbox_test_wrap(struct warden *w);
#endif
int child_sandbox_mounts(const struct sandbox *sb);
int child_sandbox_limits(void);

/* children.c */
enum child_step { STEP_EXEC, STEP_CGROUP, STEP_MOUNTS, STEP_DROP, STEP_LIMITS, STEP_CHDIR };
int children_spawn(struct warden *w, const struct wp_spawn *sp, char **env, int fd0, int fd1,
	struct wp_r_spawn *ret);
int children_signal(struct warden *w, uint32_t slot, uint32_t sig);
int children_port(struct warden *w, uint32_t slot, uint32_t port, uint32_t *holder);
void children_exec_event(struct warden *w, struct wchild *c);
void children_exited(struct warden *w, struct wchild *c);
/* Every child: SIGTERM, then SIGKILL past the deadline; reaped. */
void children_stop_all(struct warden *w);
size_t children_running(const struct warden *w);

/* super.c: the supervisor and its requests */
int super_start(struct warden *w);
void super_event(struct warden *w);
void super_exited(struct warden *w);
void super_timer(struct warden *w);
void super_stop(struct warden *w);
/* An event to the supervisor, if one runs (lost otherwise: a new one asks again). */
void super_send_event(struct warden *w, uint32_t type, const void *p, size_t len);

#endif
