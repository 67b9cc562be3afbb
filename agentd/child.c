/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentd.h"
#include "fileops.h"
#include "log.h"
#include "procs.h"
#include "opencode.h"
#include "dirs.h"
#include "gitident.h"
#include "../secrets/secrets.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define PROXY_WAIT_MS 5000 /* OpenCode waits while a foreign proxy holds the port */
#define BIN_WAIT_MS 2000 /* a missing OpenCode binary is looked for again this often */
#define STABLE_MS 60000 /* running this long resets the backoff */
#define CRASH_LOOP 5 /* this many crashes in a row is reported as a loop */
#define PROBE_EVERY_MS 250
#define PROBE_TIMEOUT_MS 1000 /* per request: early requests to OpenCode can hang */
#define READY_DEADLINE_MS 60000
#define LOG_MAX (10 * 1024 * 1024)
#define EXEC_TIMEOUT_MS 3000 /* WP_SPAWN to WP_E_EXEC of a child */
#define STOP_TIMEOUT_MS CHILD_STOP_MS /* SIGTERM to SIGKILL of a restart */

long ms_since(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t->tv_sec) * 1000L + (now.tv_nsec - t->tv_nsec) / 1000000L;
}

static void arm(struct child *c, long ms)
{
	struct itimerspec it = {
		.it_value = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L}};

	if (ms <= 0)
		it.it_value.tv_nsec = 1;
	timerfd_settime(c->timerfd, 0, &it, NULL);
}

static void disarm(struct child *c)
{
	struct itimerspec it = {0};

	timerfd_settime(c->timerfd, 0, &it, NULL);
}

static void backoff_grow(struct child *c)
{
	c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (c->backoff_ms > BACKOFF_MAX_MS)
		c->backoff_ms = BACKOFF_MAX_MS;
}

static const char *const step_names[] = {
	[STEP_EXEC] = "",
	[STEP_CGROUP] = "joining the agent's cgroup: ",
	[STEP_MOUNTS] = "making its private mount namespace: ",
	[STEP_DROP] = "dropping to the agent's uid: ",
	[STEP_LIMITS] = "setting its limits: ",
	[STEP_CHDIR] = "entering the project: ",
};

/*
 * "cannot start: STEP: ERROR", with the way out where one is known. A plain chroot has
 * no mount point at /, so the mount namespace cannot be made private: say so.
 */
void child_start_error(unsigned code, char *out, size_t n)
{
	unsigned step = code >> 16, e = code & 0xffff;

	if (step >= sizeof(step_names) / sizeof(step_names[0]))
		step = STEP_EXEC;
	snprintf(out, n, "cannot start: %s%s%s", step_names[step], strerror((int)e),
		step == STEP_MOUNTS && e == EINVAL
			? " (is / a mount point? ocsb-warden needs a machine or a container "
			  "with its own root mount; a plain chroot is not enough)"
			: "");
}

/* ---- what the warden gets with a WP_SPAWN ---- */

void child_spawn_free(struct child_spawn *sp)
{
	/* OpenCode's password and the secrets: wiped (secrets_free) once sent. */
	secrets_free(sp->env);
	sp->env = NULL;
	sp->envlen = 0;
	sp->nenv = 0;
	if (sp->pass_fd >= 0)
		close(sp->pass_fd);
	sp->pass_fd = -1;
}

/*
 * OpenCode's environment, every string of it: argv, uid, cgroup, sandbox and the project
 * to start in are the warden's (from ocsb.conf and the kind), never ours to say.
 */
int opencode_prepare(struct agentd *d, struct child *c, struct child_spawn *sp)
{
	char home[4200], user[128], logname[128], pw[128], hp[64], hsp[64], HP[64], HSP[64];
	char *const base[] = {home, user, logname, "SHELL=/bin/bash", "PATH=" OCSB_USER_PATH,
		"LANG=C.UTF-8", hp, hsp, HP, HSP, "no_proxy=localhost,127.0.0.1,::1",
		"NO_PROXY=localhost,127.0.0.1,::1", pw, "OPENCODE_DISABLE_AUTOUPDATE=1",
		OPENCODE_PERMISSION_ENV, "OPENCODE_DISABLE_MODELS_FETCH=1"};
	char *const *inj = injectd_child_env(d, strchr(c->name, '/') + 1);
	char git[GITIDENT_ENV_MAX][GITIDENT_LINE];
	const char *v[ARRAY_SIZE(base) + GITIDENT_ENV_MAX + INJECT_ENV_MAX + SECRETS_ENV_MAX];
	size_t n = 0, len = 0, off = 0, ngit;

	_Static_assert(ARRAY_SIZE(base) + GITIDENT_ENV_MAX + INJECT_ENV_MAX + SECRETS_ENV_MAX <=
			WP_MAX_ENV,
		"the warden takes them all");
	snprintf(home, sizeof(home), "HOME=%s", d->agent.home);
	snprintf(user, sizeof(user), "USER=%s", d->agent.name);
	snprintf(logname, sizeof(logname), "LOGNAME=%s", d->agent.name);
	snprintf(pw, sizeof(pw), "OPENCODE_SERVER_PASSWORD=%s", c->password);
	snprintf(hp, sizeof(hp), "http_proxy=http://127.0.0.1:%u", d->cfg.proxy_port);
	snprintf(hsp, sizeof(hsp), "https_proxy=http://127.0.0.1:%u", d->cfg.proxy_port);
	snprintf(HP, sizeof(HP), "HTTP_PROXY=http://127.0.0.1:%u", d->cfg.proxy_port);
	snprintf(HSP, sizeof(HSP), "HTTPS_PROXY=http://127.0.0.1:%u", d->cfg.proxy_port);
	for (size_t i = 0; i < ARRAY_SIZE(base); i++)
		v[n++] = base[i];
	/* The agent commits as itself, not as the owner its mirrored .gitconfig names. */
	ngit = gitident_env(d->agent.name, NULL, d->cfg.git_author_agent, git);
	for (size_t i = 0; i < ngit; i++)
		v[n++] = git[i];
	/* The injector's routes: provider base URLs and git's insteadOf (injectd.c). */
	for (size_t i = 0; inj && inj[i] && i < INJECT_ENV_MAX; i++)
		v[n++] = inj[i];
	/* The owner's secrets last (their names never collide with the ones above). */
	for (size_t i = 0; c->sec_env && c->sec_env[i] && i < SECRETS_ENV_MAX; i++)
		v[n++] = c->sec_env[i];
	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	sp->env = secrets_alloc(len);
	if (!sp->env) {
		log_err("%s: %s", c->name, secrets_alloc_error());
		sodium_memzero(pw, sizeof(pw));
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i]) + 1;

		memcpy(sp->env + off, v[i], l);
		off += l;
	}
	sp->envlen = len;
	sp->nenv = (uint32_t)n;
	sodium_memzero(pw, sizeof(pw));
	return 0;
}

/* ---- supervisor side ---- */

/* "opencode/shop" logs to CHILD_LOG_DIR/opencode-shop.log. */
void child_log_name(const struct child *c, char *out, size_t n)
{
	snprintf(out, n, "%s.log", c->name);
	for (char *s = out; *s; s++)
		if (*s == '/')
			*s = '-';
}

/*
 * The log file, appended to by agentd only. Bounded: past LOG_MAX it becomes NAME.log.1
 * (the one older file kept) and a new one starts, so a chatty or hostile child cannot
 * fill the disk, between restarts either.
 */
static int log_file(struct child *c, int rotate)
{
	char name[128], old[160];
	struct stat st;
	int dfd;

	child_log_name(c, name, sizeof(name));
	/* The warden made it ours. */
	dfd = fo_mkdir_p(AT_FDCWD, CHILD_LOG_DIR, 0750, getuid(), getgid());
	if (dfd < 0)
		return -1;
	if (c->log_fd >= 0) {
		close(c->log_fd);
		c->log_fd = -1;
	}
	if (rotate || (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > LOG_MAX)) {
		snprintf(old, sizeof(old), "%s.1", name);
		renameat(dfd, name, dfd, old);
	}
	c->log_fd = openat(dfd, name, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (c->log_fd >= 0 && fstat(c->log_fd, &st) == 0)
		c->log_size = st.st_size;
	close(dfd);
	return c->log_fd;
}

int child_log_open(struct agentd *d, struct child *c)
{
	int p[2];

	c->log_fd = -1;
	/* The child's end blocks (a full pipe slows it down); ours never does. */
	if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
		log_err("%s: pipe: %s", c->name, strerror(errno));
		return -1;
	}
	c->log_r = p[0];
	c->log_w = p[1];
	return agentd_watch(d, c->log_r, &c->log_src, SRC_LOG, c, EPOLLIN);
}

void child_log_event(struct agentd *d, struct child *c)
{
	char buf[65536];
	ssize_t n;

	(void)d;
	/* Bounded per wake-up, so one child's flood cannot starve the loop. */
	for (int round = 0; round < 16 && (n = read(c->log_r, buf, sizeof(buf))) > 0; round++) {
		if (c->log_fd < 0 || c->log_size + n > LOG_MAX) {
			if (log_file(c, c->log_fd >= 0) < 0)
				continue; /* dropped: nowhere to write */
		}
		if (write(c->log_fd, buf, (size_t)n) == n)
			c->log_size += n;
	}
}

struct child *child_by_slot(struct agentd *d, uint32_t slot)
{
	if (d->proxy_child.pid > 0 && d->proxy_child.slot == slot)
		return &d->proxy_child;
	if (d->inject_child.pid > 0 && d->inject_child.slot == slot)
		return &d->inject_child;
	for (size_t i = 0; i < d->n_oc; i++)
		if (d->oc[i].pid > 0 && d->oc[i].slot == slot)
			return &d->oc[i];
	return NULL;
}

/* A signal to a running child, by the warden (it holds the pidfd). */
static void child_signal(struct agentd *d, struct child *c, int sig)
{
	int r;

	if (c->pid <= 0)
		return;
	r = wc_signal(d, c->slot, sig);
	/* Gone already: its WP_E_EXIT is on the way. */
	if (r < 0 && r != -ESRCH)
		log_warn("%s: signal %d: %s", c->name, sig, strerror(-r));
}

/*
 * Who holds the agent's proxy port: 1 our squid or nobody, 0 someone else. A non-root
 * supervisor cannot read squid's /proc/PID/fd: the warden looks (WP_PORT).
 */
static int proxy_port_ours(struct agentd *d)
{
	int h;

	if (d->proxy_child.pid <= 0)
		return !procs_port_open(d->cfg.proxy_port);
	h = wc_port(d, d->proxy_child.slot, d->cfg.proxy_port);
	return h != WP_PORT_OTHER;
}

int child_start(struct agentd *d, struct child *c)
{
	struct child_spawn sp = {.pass_fd = -1};
	struct wp_r_spawn rs;
	char bin_err[480];
	int r;

	if (c->pid > 0)
		return 0; /* still running or stopping: its exit schedules what follows */
	if (d->stopping || d->frozen)
		return 0;
	if (c->is_opencode && opencode_bin_check(d->opencode_bin, bin_err, sizeof(bin_err)) < 0) {
		/*
		 * Not a crash: stopped, and looked for again until it is there (an install
		 * after provisioning, issue 28 item 3: no restart of ours needed). Said once.
		 */
		if (strcmp(c->last_error, bin_err) != 0)
			log_err("%s: %s", c->name, bin_err);
		snprintf(c->last_error, sizeof(c->last_error), "%s", bin_err);
		c->state = CH_STOPPED;
		arm(c, BIN_WAIT_MS);
		return -1;
	}
	if (c->is_opencode && !d->egress.off && !proxy_port_ours(d)) {
		/*
		 * OpenCode's only way out is the proxy port: a proxy there that is not ours
		 * (Debian's squid.service) would carry its traffic without ocsb's rules.
		 */
		snprintf(c->last_error, sizeof(c->last_error),
			"127.0.0.1:%u, the agent's proxy port, is held by another process, not "
			"ocsb's squid: OpenCode not started (systemctl disable --now squid)",
			d->cfg.proxy_port);
		log_err("%s: %s", c->name, c->last_error);
		c->state = CH_BACKOFF;
		arm(c, PROXY_WAIT_MS);
		return -1;
	}
	/* Decrypted into locked memory for this start only; without them OpenCode still runs. */
	if (c->is_opencode && secretd_child_env(d, c) < 0)
		log_err("%s: starting without the owner's secrets (see above)", c->name);
	r = c->prepare ? c->prepare(d, c, &sp) : 0;
	secretd_child_env_free(c);
	if (r == 0) {
		r = wc_spawn(d, c->kind, c->index, sp.env, sp.envlen, sp.nenv, c->log_w, sp.pass_fd,
			&rs);
		if (r == 0 && rs.pid <= 0)
			r = -EPROTO;
	}
	child_spawn_free(&sp);
	if (r < 0) {
		/* Nothing runs: retried like a start that failed in the child. */
		snprintf(c->last_error, sizeof(c->last_error), "cannot start: %s", strerror(-r));
		log_err("%s: %s", c->name, c->last_error);
		c->crashes_in_row++;
		backoff_grow(c);
		c->state = CH_BACKOFF;
		arm(c, c->backoff_ms);
		return -1;
	}
	c->pid = rs.pid;
	c->slot = rs.slot;
	c->exec_pending = 1;
	clock_gettime(CLOCK_MONOTONIC, &c->started);
	/* Exits are retried with backoff from here on, whatever happens next. */
	c->state = CH_BACKOFF;
	/*
	 * The exec or its error arrives as the warden's event (WP_E_EXEC), bounded by the
	 * timer: the child is the agent's before it execs, and the agent could stop it there.
	 */
	arm(c, EXEC_TIMEOUT_MS);
	return 0;
}

/* WP_E_EXEC: code 0 is the exec, else the step and errno of the failure before it. */
void child_exec_event(struct agentd *d, struct child *c, uint32_t code)
{
	if (!c->exec_pending)
		return;
	c->exec_pending = 0;
	if (code) {
		child_start_error(code, c->last_error, sizeof(c->last_error));
		log_err("%s: %s", c->name, c->last_error);
		if (c->state != CH_STOPPING)
			disarm(c);
		return; /* its WP_E_EXIT follows and schedules the retry */
	}
	if (c->state == CH_STOPPING || c->pid <= 0)
		return; /* stopped before it ran: the stop's timer stays armed */
	c->state = c->is_opencode ? CH_STARTING : CH_RUNNING;
	log_notice("%s: started (pid %d)", c->name, (int)c->pid);
	if (c->is_opencode)
		arm(c, PROBE_EVERY_MS);
	else
		disarm(c);
}

static void restart_now(struct agentd *d, struct child *c);

static void probe_close(struct agentd *d, struct child *c)
{
	if (c->probe_fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->probe_fd, NULL);
		close(c->probe_fd);
		c->probe_fd = -1;
	}
	c->probe_len = 0;
	c->probe_sent = 0;
}

/* WP_E_EXIT: the warden reaped it (its exec error, if any, came before). */
void child_exited(struct agentd *d, struct child *c, const struct wp_e_exit *e)
{
	char how[64];
	long ran;

	c->pid = 0;
	c->exec_pending = 0;
	probe_close(d, c);
	if (e->cld == CLD_EXITED)
		snprintf(how, sizeof(how), "exit %d", e->status);
	else
		snprintf(how, sizeof(how), "signal %d", e->status);
	ran = ms_since(&c->started);
	if (c->state == CH_STOPPING && c->restart_after && !d->stopping) {
		log_info("%s: stopped (%s)", c->name, how);
		disarm(c);
		restart_now(d, c);
		return;
	}
	if (d->stopping || c->state == CH_STOPPED || c->state == CH_STOPPING) {
		log_info("%s: stopped (%s)", c->name, how);
		disarm(c);
		c->state = CH_STOPPED;
		return;
	}
	if (ran >= STABLE_MS) {
		c->crashes_in_row = 0;
		c->backoff_ms = 0;
	}
	c->crashes_in_row++;
	backoff_grow(c);
	if (c->is_opencode && procs_port_open(c->port))
		/* Our child is gone: whoever answers on its port is not OpenCode. */
		snprintf(c->last_error, sizeof(c->last_error),
			"%s after %ld ms; 127.0.0.1:%u is held by another process, not OpenCode",
			how, ran, c->port);
	else if (!c->last_error[0] || strncmp(c->last_error, "cannot start", 12) != 0)
		snprintf(c->last_error, sizeof(c->last_error), "%s after %ld ms", how, ran);
	if (c->crashes_in_row >= CRASH_LOOP)
		log_err("%s: crash loop: %u exits in a row, last %s; next try in %u ms", c->name,
			c->crashes_in_row, c->last_error, c->backoff_ms);
	else
		log_warn("%s: %s; restarting in %u ms", c->name, c->last_error, c->backoff_ms);
	c->state = CH_BACKOFF;
	arm(c, c->backoff_ms);
}

/* A non-blocking HTTP request with the password: the first answer that is not a
 * connection error means OpenCode serves. */
static void probe_begin(struct agentd *d, struct child *c)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->port)};
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = &c->probe_src};
	int fd, own;

	/*
	 * Only OpenCode's own socket is asked: the agent could listen on the port first
	 * and answer 200, and status would say "running" over a crash loop. Its
	 * /proc/PID/fd is the agent's: the warden looks (WP_PORT).
	 */
	own = wc_port(d, c->slot, c->port);
	if (own != WP_PORT_CHILD) {
		if (own == WP_PORT_OTHER) {
			if (!strstr(c->last_error, "held by another process"))
				log_err("%s: 127.0.0.1:%u is held by another process, not OpenCode "
					"(pid %d): not probed",
					c->name, c->port, (int)c->pid);
			snprintf(c->last_error, sizeof(c->last_error),
				"127.0.0.1:%u is held by another process, not OpenCode (pid %d)",
				c->port, (int)c->pid);
		}
		return;
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS) {
		close(fd);
		return;
	}
	c->probe_src.kind = SRC_PROBE;
	c->probe_src.ptr = c;
	if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		close(fd);
		return;
	}
	c->probe_fd = fd;
	c->probe_len = 0;
	c->probe_sent = 0;
	clock_gettime(CLOCK_MONOTONIC, &c->probe_deadline);
}

void child_probe_event(struct agentd *d, struct child *c, uint32_t events)
{
	if (c->probe_fd < 0)
		return;
	if (events & (EPOLLERR | EPOLLHUP) && !(events & EPOLLIN)) {
		probe_close(d, c);
		return;
	}
	if (!c->probe_sent && (events & EPOLLOUT)) {
		char req[512], cred[128], b64[200];
		struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &c->probe_src};
		int len;

		snprintf(cred, sizeof(cred), "opencode:%s", c->password);
		sodium_bin2base64(b64, sizeof(b64), (const unsigned char *)cred, strlen(cred),
			sodium_base64_VARIANT_ORIGINAL);
		len = snprintf(req, sizeof(req),
			"GET " OPENCODE_PROBE_PATH " HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
			"Authorization: Basic %s\r\nConnection: close\r\n\r\n",
			c->port, b64);
		if (send(c->probe_fd, req, (size_t)len, MSG_NOSIGNAL) != len) {
			probe_close(d, c);
			return;
		}
		c->probe_sent = 1;
		epoll_ctl(d->epfd, EPOLL_CTL_MOD, c->probe_fd, &ev);
		return;
	}
	if (events & EPOLLIN) {
		ssize_t n = recv(c->probe_fd, c->probe_buf + c->probe_len,
			sizeof(c->probe_buf) - 1 - c->probe_len, 0);
		int r;

		if (n <= 0) {
			probe_close(d, c);
			return;
		}
		c->probe_len += (size_t)n;
		c->probe_buf[c->probe_len] = '\0';
		r = opencode_probe_answer(c->probe_buf, c->probe_len, sizeof(c->probe_buf));
		if (r == 0)
			return;
		if (r > 0) {
			c->state = CH_RUNNING;
			clock_gettime(CLOCK_MONOTONIC, &c->ready_at);
			c->last_error[0] = '\0';
			log_notice("%s: ready on http://127.0.0.1:%u after %ld ms", c->name,
				c->port, ms_since(&c->started));
			disarm(c);
		}
		probe_close(d, c);
	}
}

void child_timer(struct agentd *d, struct child *c)
{
	uint64_t ticks;

	if (read(c->timerfd, &ticks, sizeof(ticks)) < 0)
		return;
	if (c->exec_pending && c->pid > 0 && c->state != CH_STOPPING) {
		snprintf(c->last_error, sizeof(c->last_error), "did not exec within %d ms: killed",
			EXEC_TIMEOUT_MS);
		log_err("%s: %s", c->name, c->last_error);
		c->exec_pending = 0;
		child_signal(d, c, SIGKILL);
		return; /* its WP_E_EXIT schedules the retry */
	}
	switch (c->state) {
	case CH_BACKOFF:
		child_start(d, c);
		break;
	case CH_STARTING:
		/* A request still pending past its deadline is dropped and tried again. */
		if (c->probe_fd >= 0 && ms_since(&c->probe_deadline) >= PROBE_TIMEOUT_MS)
			probe_close(d, c);
		if (c->probe_fd < 0)
			probe_begin(d, c);
		if (ms_since(&c->started) > READY_DEADLINE_MS && !c->last_error[0])
			snprintf(c->last_error, sizeof(c->last_error),
				"not answering %ld s after start", ms_since(&c->started) / 1000);
		arm(c, PROBE_EVERY_MS);
		break;
	case CH_STOPPING:
		log_warn("%s: did not stop within %d ms: killing it", c->name, STOP_TIMEOUT_MS);
		child_signal(d, c, SIGKILL);
		break; /* its WP_E_EXIT follows */
	case CH_STOPPED:
		/*
		 * Armed only while OpenCode's binary is missing (every other stop disarms).
		 * In backoff, as a start that waits: a freeze meanwhile leaves it there, and
		 * the thaw starts it.
		 */
		if (c->is_opencode && c->pid <= 0 && !d->stopping) {
			c->state = CH_BACKOFF;
			child_start(d, c);
		}
		break;
	default:
		break;
	}
}

/*
 * At shutdown only, after the loop. child_stop_begin sends SIGTERM; child_stop_wait waits
 * for its WP_E_EXIT by the deadline (mono_ms) or kills it then: every OpenCode gets its
 * SIGTERM at once, so N instances take as long to stop as the slowest, not the sum.
 */
void child_stop_begin(struct agentd *d, struct child *c)
{
	disarm(c);
	probe_close(d, c);
	c->state = CH_STOPPED;
	child_signal(d, c, SIGTERM);
}

void child_stop_wait(struct agentd *d, struct child *c, long deadline)
{
	while (c->pid > 0 && mono_ms() < deadline)
		wc_wait(d, deadline);
	if (c->pid <= 0)
		return;
	log_warn("%s: did not stop in time: killing it", c->name);
	child_signal(d, c, SIGKILL);
	/* A killed child is gone at once; the warden's reaping is bounded all the same. */
	deadline = mono_ms() + STOP_TIMEOUT_MS;
	while (c->pid > 0 && mono_ms() < deadline)
		wc_wait(d, deadline);
	if (c->pid > 0) {
		log_err("%s: no word of its end from the warden: left to it", c->name);
		c->pid = 0;
	}
}

static void restart_now(struct agentd *d, struct child *c)
{
	c->restart_after = 0;
	c->crashes_in_row = 0;
	c->backoff_ms = 0;
	c->restarts++;
	/* While frozen, child_start waits: the thaw starts what is in backoff. */
	c->state = CH_BACKOFF;
	child_start(d, c);
}

/*
 * SIGTERM now, SIGKILL when the timer fires first, the start when the warden says it is
 * gone: the loop goes on meanwhile (a control request is not held up by a slow exit).
 */
static void stop_begin(struct agentd *d, struct child *c, int restart)
{
	c->restart_after = restart;
	if (c->state == CH_STOPPING)
		return;
	probe_close(d, c);
	c->state = CH_STOPPING;
	child_signal(d, c, SIGTERM);
	arm(c, STOP_TIMEOUT_MS);
}

void child_restart(struct agentd *d, struct child *c)
{
	if (c->pid <= 0) {
		disarm(c);
		probe_close(d, c);
		restart_now(d, c);
		return;
	}
	stop_begin(d, c, 1);
}

/* The same without the start: the child stays stopped once the warden says it is gone. */
void child_stop_soon(struct agentd *d, struct child *c)
{
	if (c->pid <= 0) {
		disarm(c);
		probe_close(d, c);
		c->state = CH_STOPPED;
		return;
	}
	stop_begin(d, c, 0);
}

/* The OpenCode password: generated once, kept the supervisor's only, survives its restarts. */
int opencode_password(struct agentd *d, struct child *c)
{
	char dir[4096], name[128], *data = NULL;
	unsigned char raw[24];
	int dfd, r;

	if (path_join(dir, sizeof(dir), d->paths.varlib, "ocsb/agentd") < 0)
		return -1;
	snprintf(name, sizeof(name), "%s.password", strchr(c->name, '/') + 1);
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, getuid(), getgid());
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return -1;
	}
	r = fo_read_at(dfd, name, 256, &data, NULL);
	if (r == 0 && strlen(data) >= 16 && strlen(data) < sizeof(c->password)) {
		snprintf(c->password, sizeof(c->password), "%.*s", (int)strcspn(data, "\n"), data);
		free(data);
		close(dfd);
		return 0;
	}
	free(data);
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(c->password, sizeof(c->password), raw, sizeof(raw),
		sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	sodium_memzero(raw, sizeof(raw));
	r = fo_write_at(dfd, name, c->password, strlen(c->password), 0600, getuid(), getgid());
	close(dfd);
	if (r < 0)
		log_err("%s/%s: %s", dir, name, strerror(-r));
	return r;
}
