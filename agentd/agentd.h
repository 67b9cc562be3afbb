/* SPDX-License-Identifier: MIT */
#ifndef OCSB_AGENTD_H
#define OCSB_AGENTD_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "cgroup.h" /* enum cg_mode, for the warden's status */
#include "config.h"
#include "egress.h"
#include "paths.h"
#include "proxy.h"
#include "util.h"
#include "wproto.h"

/* OpenCode facts (docs/opencode.md): the readiness probe and the permission setting. */
#define OPENCODE_PROBE_PATH "/global/health"
#define OPENCODE_PERMISSION_ENV "OPENCODE_PERMISSION={\"*\":\"allow\"}"

#define AGENTD_MAX_PROJECTS 16
#define AGENTD_MAX_CLIENTS 64
/* SIGTERM to SIGKILL of a child, at a restart and at shutdown. */
#define CHILD_STOP_MS 3000
#define SECRETS_ENV_MAX 64 /* SECRETS_MAX_COUNT of secrets/secrets.h */
/* OPENCODE_CONFIG_CONTENT, GIT_CONFIG_COUNT and a key and value per route (INJ_MAX_ROUTES). */
#define INJECT_ENV_MAX (2 + 2 * 16)
/* squid's configuration, rendered by the supervisor in a directory the warden made its own. */
#define SQUID_CONF_REL "ocsb/squid/squid.conf"

/* What epoll hands back: the kind of source and its object. */
enum src_kind {
	SRC_SIGNAL,
	SRC_WARDEN, /* fd 3: the warden's events (wclient.c) */
	SRC_CTL_LISTEN,
	SRC_CTL_CLIENT,
	SRC_TIMER,
	SRC_PROBE,
	SRC_LOG,
	SRC_MIRROR,
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
 * What a WP_SPAWN carries besides the kind: OpenCode's environment (with the OpenCode
 * password and the secrets: in locked memory, wiped once sent) and the injector's end of
 * its socketpair. Built by the child's prepare hook, freed by child_spawn_free.
 */
struct child_spawn {
	char *env; /* owned, locked: nenv NUL-terminated "NAME=value" strings, NULL = none */
	size_t envlen;
	uint32_t nenv;
	int pass_fd; /* owned: fds[1] of the WP_SPAWN, -1 = none */
};

/* One supervised program: the proxy, or OpenCode for one project. */
struct child {
	char name[96]; /* "proxy", "opencode/shop" */
	enum child_state state;
	uint32_t kind; /* enum wp_kind */
	uint32_t index; /* WP_KIND_OPENCODE: the project's position in ocsb.conf */
	pid_t pid; /* the warden's child, 0 = none (its WP_E_EXIT came) */
	uint32_t slot; /* the warden's handle of it, valid while pid > 0 */
	int exec_pending; /* spawned, no WP_E_EXEC yet */
	int timerfd; /* backoff, exec, stop and readiness deadlines */
	struct src timer_src;
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
	/* Before the WP_SPAWN: fills sp (0, or -errno with nothing to free); NULL = nothing. */
	int (*prepare)(struct agentd *d, struct child *c, struct child_spawn *sp);
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

struct agentd {
	struct paths paths;
	char config_path[4096];
	struct ocsb_config cfg; /* owned */
	struct egress egress; /* owned */
	struct user_info agent, owner;
	struct proxy proxy;
	char opencode_bin[4096];

	int epfd;
	int sigfd;
	struct src sig_src;
	/* the warden (wclient.c) */
	int wfd; /* fd 3, the protocol's socket, -1 = none */
	struct src w_src;
	void *wc; /* owned: struct wclient, its request ids and queued events */
	/* The routes the warden last took (WP_ROUTES answered 0), for `ocsb status`. */
	unsigned routes_sent[WP_MAX_ROUTES];
	size_t n_routes_sent;
	int routes_ok; /* the last WP_ROUTES was answered 0 */
	int ctlfd;
	struct src ctl_src;
	char ctl_path[4096];
	struct ctl_client clients[AGENTD_MAX_CLIENTS];
	int ctl_timer; /* the nearest client deadline */
	struct src ctl_timer_src;

	struct child proxy_child;
	struct child oc[AGENTD_MAX_PROJECTS];
	size_t n_oc;
	struct child inject_child; /* ocsb-inject (injectd.c) */
	void *inject; /* owned: struct injectd */
	uid_t inject_uid; /* the injector's account exists: 0 = no */

	/* The netlock's and the cgroup's state are the warden's: WP_E_FROZEN, WP_STATUS. */
	int frozen; /* 0, 1 = by SIGSTOP, 2 = by the cgroup freezer */
	struct wp_r_status wstatus; /* the last WP_STATUS answer (ocsb status) */
	int stopping;
	void *mirror; /* owned: struct mirrorwatch, NULL when nothing is mirrored */
	/* SIGHUP's squid configuration under `squid -k parse`: proxycheck.c */
	pid_t pcheck_pid;
	int pcheck_fd;
	struct src pcheck_src;
	struct buf pcheck_conf, pcheck_out; /* owned */
	int pcheck_again;
	/*
	 * Generations, for `ocsb egress allow|apply|learn` to wait on a reload: the rules
	 * loaded (1 at start, +1 each reload that took or learn mode's end), the ones squid
	 * has (and the one it refused), the reloads tried and why the last failed.
	 */
	unsigned egress_gen, proxy_gen, pcheck_gen, proxy_failed_gen, reloads;
	char proxy_error[512], reload_error[512];
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
/* The warden's events: the agent frozen or thawed (WP_E_FROZEN), ocsb.conf re-read. */
void agentd_frozen(struct agentd *d, int frozen);
void agentd_reload(struct agentd *d);
/* The egress bits of d->egress to the warden (WP_EGRESS): 0, or -1 logged. */
int agentd_send_egress(struct agentd *d);

/*
 * The one-job modes (modes.c): the supervisor's program run by the warden as someone
 * else, `--config F` given; the exit status is the mode's.
 */
int agentd_mode_mirror_read(const char *config);
int agentd_mode_mirror_link(const char *config);
int agentd_mode_owner_egress(const char *config);
int agentd_mode_mirror_watch(const char *config);

/*
 * The warden's client (wclient.c): fd 3. A request waits for its reply (same id); events
 * that come meanwhile are queued and handled from the loop (wc_drain), never inside a
 * request. The warden gone, or a reply of the wrong type or id: logged, exit(1) (the
 * children are the warden's, it cleans up).
 */
int wc_open(struct agentd *d, int fd);
void wc_close(struct agentd *d);
/*
 * One request and its reply (of type `want`, payload copied into reply, exactly rlen
 * bytes). fds are the caller's (closed by the caller). Returns only with the reply.
 */
void wc_call(struct agentd *d, uint32_t type, const void *p, size_t len, const void *tail,
	size_t tail_len, const int *fds, size_t nfds, uint32_t want, void *reply, size_t rlen);
/* A request answered by WP_R_OK: its err (0 or -errno). */
int wc_call_ok(struct agentd *d, uint32_t type, const void *p, size_t len, const void *tail,
	size_t tail_len);
/*
 * WP_SPAWN of kind (enum wp_kind): env as struct wp_spawn's tail (NULL, 0, 0 for none),
 * fd0 the child's stdout+stderr (the one-job modes: its stderr), fd1 the kind's second
 * descriptor or -1; both stay the caller's. 0 with *ret (pid, slot), or -errno.
 */
int wc_spawn(struct agentd *d, uint32_t kind, uint32_t index, const char *env, size_t envlen,
	uint32_t nenv, int fd0, int fd1, struct wp_r_spawn *ret);
int wc_signal(struct agentd *d, uint32_t slot, int sig);
/* Who holds port: enum wp_port_holder, or -errno. */
int wc_port(struct agentd *d, uint32_t slot, unsigned port);
/* One of the fixed files (enum wp_file) with this content: 0 or -errno. */
int wc_write(struct agentd *d, uint32_t file, const void *data, size_t len);
int wc_status(struct agentd *d, struct wp_r_status *ret);
/* fd 3 readable (epoll): the events that came, queued, then handled. */
void wc_event(struct agentd *d);
/* The queued events, handled (a no-op inside another drain). */
void wc_drain(struct agentd *d);
/* Waits for one message until deadline (mono_ms), then handles the queue: 1 got one, 0 not. */
int wc_wait(struct agentd *d, long deadline);
/*
 * A child of another kind than struct child's (the one-job modes): fn gets its
 * WP_E_EXEC (e->type WP_E_EXEC, code) and WP_E_EXIT (then the slot is forgotten). At
 * most WP_MAX_CHILDREN at once: 0, or -ENOSPC.
 */
struct wc_event {
	uint32_t type; /* WP_E_EXEC, WP_E_EXIT, WP_E_FROZEN, WP_E_RELOAD */
	union {
		struct wp_e_exec exec;
		struct wp_e_exit exit;
		struct wp_e_frozen frozen;
	} u;
};
int wc_on_slot(struct agentd *d, uint32_t slot,
	void (*fn)(struct agentd *d, const struct wc_event *e, void *arg), void *arg);
/* Blocks until slot's WP_E_EXIT (the other events queued): 0, or -ETIMEDOUT. */
int wc_wait_exit(struct agentd *d, uint32_t slot, long timeout_ms, struct wp_e_exit *ret);

/* SIGHUP's proxy configuration, checked outside the loop: proxycheck.c */
void proxycheck_begin(struct agentd *d);
void proxycheck_event(struct agentd *d);
void proxycheck_close(struct agentd *d);
/*
 * Learn mode's end (egress.learn_until passed): the allowlist again, squid told. The
 * milliseconds until it is due (-1: not learning; at most a minute, for clock changes).
 */
int agentd_learn_timeout(struct agentd *d);

/* children: child.c */
/* What a child was doing when it failed before its exec (the high 16 bits of its report). */
enum child_step { STEP_EXEC, STEP_CGROUP, STEP_MOUNTS, STEP_DROP, STEP_LIMITS, STEP_CHDIR };
void child_start_error(unsigned code, char *out, size_t n);
int child_start(struct agentd *d, struct child *c);
/* The warden's events of a child's slot. */
void child_exec_event(struct agentd *d, struct child *c, uint32_t code);
void child_exited(struct agentd *d, struct child *c, const struct wp_e_exit *e);
/* The struct child of a live slot, NULL when none. */
struct child *child_by_slot(struct agentd *d, uint32_t slot);
void child_timer(struct agentd *d, struct child *c);
void child_probe_event(struct agentd *d, struct child *c, uint32_t events);
void child_stop_soon(struct agentd *d, struct child *c);
void child_stop_begin(struct agentd *d, struct child *c);
void child_stop_wait(struct agentd *d, struct child *c, long deadline);
void child_restart(struct agentd *d, struct child *c);
int opencode_prepare(struct agentd *d, struct child *c, struct child_spawn *sp);
void child_spawn_free(struct child_spawn *sp);
int opencode_password(struct agentd *d, struct child *c);
long ms_since(const struct timespec *t);
#define CHILD_LOG_DIR "/var/log/ocsb"
void child_log_name(const struct child *c, char *out, size_t n);
int child_log_open(struct agentd *d, struct child *c);
void child_log_event(struct agentd *d, struct child *c);

/* secrets: secretd.c */
int secretd_init(struct agentd *d);
void secretd_free(struct agentd *d);
/* Before OpenCode's WP_SPAWN: c->sec_env for its environment; freed right after it. */
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
/* After a push: routes, the warden's route ports, OpenCode's config, the keys to the injector. */
void injectd_update(struct agentd *d, const struct secret_set *s);
/* The route ports agentd serves, ascending into ports[WP_MAX_ROUTES]: how many. */
size_t injectd_ports(struct agentd *d, unsigned *ports);
/*
 * What project's OpenCode is started with (NULL-terminated, or NULL):
 * OPENCODE_CONFIG_CONTENT with its provider settings, GIT_CONFIG_* sending git to its
 * generic routes. Marks them as the ones the instance got, for injectd_changed.
 */
char *const *injectd_child_env(struct agentd *d, const char *project);
/* 1 when project's routes moved since its OpenCode got them (a push restarts it). */
int injectd_changed(struct agentd *d, const char *project);
/* The git settings for the ssh sessions' env file ("export GIT_CONFIG_...\n"), no key. */
int injectd_env_lines(struct agentd *d, const struct secret_set *s, const char *project,
	struct buf *out);
int inject_prepare(struct agentd *d, struct child *c, struct child_spawn *sp);

/* the mirror of the owner's configs: mirrorwatch.c */
int mirrorwatch_open(struct agentd *d);
void mirrorwatch_event(struct agentd *d, struct src *s);
void mirrorwatch_reload(struct agentd *d);
void mirrorwatch_close(struct agentd *d);
/*
 * The watcher (--mirror-watch), in a process that already is the owner: watches the
 * owner's mirrored directories and writes one byte to outfd per burst of changes, until
 * outfd's reader is gone. The exit status: 0 then, else 1 (logged).
 */
struct mirror;
/* The supervisor refreshes this long after the watcher's last byte of a burst. */
#define MIRROR_DEBOUNCE_MS 100
int mirrorwatch_watcher(struct mirror *m, int outfd);

/* control socket: ctlsrv.c */
/* fd: the control socket, bound and listening (the warden's fd 4). */
int ctlsrv_open(struct agentd *d, int fd);
void ctlsrv_accept(struct agentd *d);
void ctlsrv_client(struct agentd *d, struct ctl_client *cl, uint32_t events);
void ctlsrv_timer(struct agentd *d);
/* The slot for a new client: a free one, else the one nearest its deadline (the oldest). */
struct ctl_client *ctlsrv_slot(struct ctl_client *v, size_t n);
/* The nearest deadline of the connected clients, 0 for none. */
long ctlsrv_next_deadline(const struct ctl_client *v, size_t n);
void ctlsrv_close(struct agentd *d);

#endif
