/* SPDX-License-Identifier: MIT */
#ifndef OCSB_WPROTO_H
#define OCSB_WPROTO_H

/*
 * The warden's protocol: ocsb-warden (root) and ocsb-agentd (the supervisor, the
 * account ocsb-agentd) over one SOCK_SEQPACKET socketpair, fd 3 of the supervisor. In
 * the manner of OpenSSH's monitor: the unprivileged side asks, the warden does one
 * narrow thing or refuses. One message per datagram: a header, then a payload whose
 * length each type fixes (WP_SPAWN alone carries a variable environment after its
 * fixed part), descriptors in SCM_RIGHTS where a type says so and nowhere else.
 *
 * Requests (supervisor -> warden) carry an id the reply repeats; every request gets
 * exactly one reply (WP_R_*), in order. Events (warden -> supervisor, id 0) come
 * between replies at any time. A request the warden's current state does not allow,
 * of an unknown type, of the wrong length, with descriptors it does not take, or
 * malformed in any other way, is logged and the supervisor is killed: the warden
 * starts a new one after a pause; the netlock, the cgroups and the guard table stay
 * the warden's throughout.
 *
 * What the warden never takes from the supervisor: a program to run (argv is the
 * warden's, from ocsb.conf), a uid to run it as (fixed per kind), a path to write to
 * (a fixed name per WP_FILE_* kind), a netlock rule (only the egress bits and the
 * routes' ports, bounded below).
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define WP_MAX_MSG (96 * 1024) /* the largest datagram, header included */
#define WP_MAX_FDS 2
#define WP_MAX_ENV 128 /* strings in a WP_SPAWN environment */
#define WP_MAX_ROUTES 16 /* NETLOCK_MAX_INJECT */
#define WP_ROUTE_LO 18400 /* INJ_PORT_BASE: the routes' ports, on 127.0.0.1 */
#define WP_ROUTE_HI 18415
#define WP_MAX_FILE (64 * 1024) /* WP_WRITE's content */
#define WP_SUPERVISOR_FD 3 /* where the supervisor finds its end */
#define WP_CTL_FD 4 /* and the control socket, listening, bound by the warden */

enum wp_type {
	/* requests */
	WP_HELLO = 1, /* {} once, first: the supervisor is up (state INIT -> RUN) */
	WP_SPAWN, /* struct wp_spawn + env; fds: [0] stdout+stderr (a pipe), [1] see the kinds */
	WP_SIGNAL, /* struct wp_signal */
	WP_EGRESS, /* struct wp_egress: the netlock's egress bits, applied and verified */
	WP_ROUTES, /* struct wp_routes: the injector's routes, applied and verified */
	WP_PORT, /* struct wp_port: who holds 127.0.0.1:port */
	WP_WRITE, /* struct wp_write + content: one of the fixed files */
	WP_STATUS, /* {}: struct wp_r_status back */
	WP_RELOAD, /* {}: re-read ocsb.conf (as SIGHUP to the warden does) */
	WP_BYE, /* {}: stopping; from now on WP_SIGNAL, WP_STATUS, WP_WRITE (state STOP) */
	/* replies */
	WP_R_OK = 64, /* struct wp_r_ok: 0 or -errno */
	WP_R_SPAWN, /* struct wp_r_spawn */
	WP_R_PORT, /* struct wp_r_port */
	WP_R_STATUS, /* struct wp_r_status */
	/* events */
	WP_E_EXEC = 128, /* struct wp_e_exec: a child exec'd (code 0) or failed before */
	WP_E_EXIT, /* struct wp_e_exit: a child is gone (reaped by the warden) */
	WP_E_FROZEN, /* struct wp_e_frozen: the agent frozen (netlock lost) or thawed */
	WP_E_RELOAD, /* {}: the warden re-read ocsb.conf; the supervisor reloads too */
};

struct wp_hdr {
	uint32_t type;
	uint32_t id; /* a request's, repeated in its reply; 0 in events */
};

/* What the warden runs: the program, its argv and its uid are the kind's. */
enum wp_kind {
	/*
	 * squid -N -f <varlib>/ocsb/squid/squid.conf, as `proxy` from the start: the
	 * supervisor renders that file, so root never parses it.
	 */
	WP_KIND_PROXY = 1,
	WP_KIND_OPENCODE, /* project `index` of ocsb.conf: the agent, in its cgroup and sandbox */
	WP_KIND_INJECT, /* ocsb-inject --fd 4, as ocsb-inject; fds[1] becomes its fd 4 */
	/*
	 * The supervisor's own program in a mode of one job, run as someone else with
	 * `--config <the warden's ocsb.conf>` after the mode; fds[0] is its stderr, fds[1]
	 * its stdout, stdin /dev/null. Not in the agent's cgroup (MIRROR_LINK is: it is
	 * the agent's).
	 */
	WP_KIND_MIRROR_READ, /* ocsb-agentd --mirror-read: as the owner */
	WP_KIND_MIRROR_LINK, /* ocsb-agentd --mirror-link: as the agent */
	WP_KIND_OWNER_EGRESS, /* ocsb-agentd --owner-egress: as the owner */
	WP_KIND_MIRROR_WATCH, /* ocsb-agentd --mirror-watch: as the owner, long-running */
};

#define WP_MAX_CHILDREN 24 /* slots: AGENTD_MAX_PROJECTS + proxy + inject + one-job modes (4) */

struct wp_spawn {
	uint32_t kind; /* enum wp_kind */
	uint32_t index; /* WP_KIND_OPENCODE: the project's position in ocsb.conf, else 0 */
	uint32_t nenv; /* NUL-terminated "NAME=value" strings after this struct (OpenCode only) */
	uint32_t envlen; /* their bytes, the last NUL included */
};

struct wp_r_spawn {
	int32_t err; /* 0, or -errno: nothing runs */
	int32_t pid;
	uint32_t slot; /* the child's handle for WP_SIGNAL, WP_PORT and the events */
};

struct wp_signal {
	uint32_t slot;
	uint32_t sig; /* SIGTERM or SIGKILL; SIGHUP to the proxy (squid's reload) */
};

struct wp_egress {
	uint32_t off; /* 1: `egress off`, no proxy port for the agent */
	uint32_t dns_allow; /* 1: `dns allow` */
};

struct wp_routes {
	uint32_t n; /* 0..WP_MAX_ROUTES */
	uint32_t port[WP_MAX_ROUTES]; /* ascending, in WP_ROUTE_LO..WP_ROUTE_HI */
	uint32_t uport[WP_MAX_ROUTES]; /* each route's upstream TCP port, 1..65535 */
};

struct wp_port {
	uint32_t slot; /* the child that should hold it */
	uint32_t port; /* 1..65535, TCP on 127.0.0.1 or any address */
};

enum wp_port_holder {
	WP_PORT_FREE = 0, /* nobody listens */
	WP_PORT_CHILD, /* the slot's process does */
	WP_PORT_OTHER, /* someone else does */
};

struct wp_r_port {
	int32_t err;
	uint32_t holder; /* enum wp_port_holder */
};

enum wp_file {
	WP_FILE_AGENT_ENV = 1, /* <run>/ocsb/<agent>/env: the agent's, 0400 (ssh sessions) */
	WP_FILE_USAGE, /* <varlib>/ocsb/inject/usage (INJ_USAGE_REL): the owner's, 0400 */
};

struct wp_write {
	uint32_t file; /* enum wp_file */
	uint32_t len; /* content bytes after this struct, at most WP_MAX_FILE */
};

struct wp_r_ok {
	int32_t err;
};

struct wp_r_status {
	uint32_t restores; /* netlock restores since the start */
	uint32_t last_restore_us;
	uint32_t frozen; /* 0, 1 = by SIGSTOP, 2 = by the cgroup freezer */
	uint32_t cg_mode; /* enum cg_mode */
	uint64_t memory_max;
	uint32_t tasks_max;
	uint32_t cpu_percent;
	char cg_what[1200]; /* the agent's cgroup, as cgroup.h names it (struct cgroup's what) */
	char cg_error[512]; /* why there is none */
	char netlock_error[512];
	char stale_agents[1024];
	int32_t cg_procs; /* processes in the agent's cgroup (cg_count), when cg_mode is not CG_NONE */
};

struct wp_e_exec {
	uint32_t slot;
	uint32_t code; /* 0: exec'd; else (step << 16) | errno, as child_start_error() reads */
};

struct wp_e_exit {
	uint32_t slot;
	int32_t cld; /* siginfo si_code: CLD_EXITED, CLD_KILLED, CLD_DUMPED */
	int32_t status; /* si_status: the exit code or the signal */
};

struct wp_e_frozen {
	uint32_t frozen; /* as wp_r_status.frozen */
};

/*
 * One message, its payload and up to WP_MAX_FDS descriptors (closed by the caller).
 * 0, or -errno (-EMSGSIZE beyond WP_MAX_MSG). Blocking: the socket is the caller's.
 */
int wp_send(int fd, uint32_t type, uint32_t id, const void *payload, size_t len, const void *tail,
	size_t tail_len, const int *fds, size_t nfds);

/*
 * One message into buf (WP_MAX_MSG bytes): its header in *h, the payload's length in
 * *len, descriptors in fds (-1 where none; *nfds how many came). 0, -EAGAIN (nonblocking,
 * none), -ECONNRESET (the peer is gone), -EBADMSG (truncated, short, or descriptors of
 * another kind: the descriptors that came are closed).
 */
int wp_recv(int fd, struct wp_hdr *h, void *buf, size_t *len, int *fds, size_t *nfds);

/*
 * A WP_SPAWN environment: exactly nenv NUL-terminated strings in envlen bytes, each
 * NAME=value with NAME of [A-Za-z_][A-Za-z0-9_]* and no NUL inside. Pointers into env
 * in out[nenv] (NULL after). 0, or -EINVAL.
 */
int wp_env_check(const char *env, size_t envlen, uint32_t nenv, char **out, size_t outn);

#endif
