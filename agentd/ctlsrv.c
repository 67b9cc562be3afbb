/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "ctl.h"
#include "fileops.h"
#include "log.h"
#include "dirs.h"

/*
 * The control socket. Anyone can connect (mode 0666): the peer's uid, from the kernel
 * (SO_PEERCRED), decides. Root and the owner are served; everyone else, the agent first
 * of all, gets one error line and the door. One request per connection.
 */

int ctlsrv_open(struct agentd *d)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char dir[4096];
	int fd, dfd;

	if (snprintf(dir, sizeof(dir), "%s", d->paths.ctl_sock) >= (int)sizeof(dir) ||
		snprintf(d->ctl_path, sizeof(d->ctl_path), "%s", dir) >= (int)sizeof(d->ctl_path) ||
		strlen(d->ctl_path) >= sizeof(a.sun_path) || !strrchr(dir, '/'))
		return -1;
	*strrchr(dir, '/') = '\0';
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		return -1;
	}
	/* A stale socket of a killed agentd; a live one would answer (checked by the caller). */
	unlinkat(dfd, path_base(d->ctl_path), 0);
	close(dfd);
	strcpy(a.sun_path, d->ctl_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		chmod(d->ctl_path, 0666) < 0 || listen(fd, 16) < 0) {
		log_err("%s: %s", d->ctl_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	d->ctlfd = fd;
	for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++)
		d->clients[i].fd = -1;
	return agentd_watch(d, fd, &d->ctl_src, SRC_CTL_LISTEN, d, EPOLLIN);
}

static void client_close(struct agentd *d, struct ctl_client *cl)
{
	if (cl->fd < 0)
		return;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, cl->fd, NULL);
	close(cl->fd);
	cl->fd = -1;
	if (cl->reader) {
		ctl_reader_reset(cl->reader);
		free(cl->reader);
		cl->reader = NULL;
	}
}

void ctlsrv_close(struct agentd *d)
{
	for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++)
		client_close(d, &d->clients[i]);
	if (d->ctlfd > 0) {
		close(d->ctlfd);
		unlink(d->ctl_path);
	}
}

static void send_reply(int fd, const struct buf *b)
{
	/* Bounded: a peer that does not read cannot hold the daemon. */
	if (ctl_send_frame(fd, b->data, b->len, 1000) < 0)
		log_debug("control: reply not delivered");
}

void ctlsrv_accept(struct agentd *d)
{
	for (;;) {
		int fd = accept4(d->ctlfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct ctl_client *cl = NULL;
		uid_t uid;
		gid_t gid;
		pid_t pid;

		if (fd < 0)
			return;
		if (ctl_peer(fd, &uid, &gid, &pid) < 0 || (uid != 0 && uid != d->owner.uid)) {
			struct buf b = {0};

			/* Rate-limited: a refused peer looping on connect must not flood the log. */
			static time_t last;
			static unsigned quiet;
			time_t now = time(NULL);

			if (now - last >= 10) {
				log_warn("control: refused uid %u (pid %d): only root and %s may "
					 "connect%s",
					(unsigned)uid, (int)pid, d->owner.name,
					quiet ? " (more refusals not logged)" : "");
				last = now;
				quiet = 0;
			} else {
				quiet++;
			}
			ctl_response_err(&b, "not allowed: uid %u is neither root nor the owner %s",
				(unsigned)uid, d->owner.name);
			send_reply(fd, &b);
			buf_free(&b);
			close(fd);
			continue;
		}
		for (size_t i = 0; i < AGENTD_MAX_CLIENTS; i++)
			if (d->clients[i].fd < 0) {
				cl = &d->clients[i];
				break;
			}
		if (!cl) {
			/* Full: the oldest slot gives way (clients are root or the owner). */
			cl = &d->clients[0];
			client_close(d, cl);
		}
		cl->fd = fd;
		cl->uid = uid;
		cl->reader = calloc(1, sizeof(struct ctl_reader));
		if (!cl->reader || agentd_watch(d, fd, &cl->src, SRC_CTL_CLIENT, cl, EPOLLIN) < 0) {
			client_close(d, cl);
			continue;
		}
	}
}

static const char *state_name(const struct child *c)
{
	switch (c->state) {
	case CH_STOPPED:
		return "stopped";
	case CH_BACKOFF:
		return "restarting";
	case CH_STARTING:
		return "starting";
	case CH_RUNNING:
		return "running";
	}
	return "?";
}

static void add_child(struct buf *b, const struct child *c, int with_secret)
{
	ctl_response_add(b, c->is_opencode ? "instance" : "proxy", "%s",
		c->is_opencode ? strchr(c->name, '/') + 1 : "squid");
	ctl_response_add(b, "state", "%s", state_name(c));
	if (c->pid > 0) {
		ctl_response_add(b, "pid", "%d", (int)c->pid);
		ctl_response_add(b, "uptime-s", "%ld", ms_since(&c->started) / 1000);
	}
	ctl_response_add(b, "restarts", "%u", c->restarts + c->crashes_in_row);
	if (c->last_error[0])
		ctl_response_add(b, "last-error", "%s", c->last_error);
	if (c->is_opencode) {
		ctl_response_add(b, "url", "http://127.0.0.1:%u", c->port);
		ctl_response_add(b, "user", "opencode");
		if (with_secret)
			ctl_response_add(b, "password", "%s", c->password);
	}
}

static void do_status(struct agentd *d, struct buf *b, int web_only)
{
	ctl_response_ok(b);
	if (!web_only) {
		ctl_response_add(b, "version", OCSB_VERSION);
		ctl_response_add(b, "agent", "%s", d->agent.name);
		ctl_response_add(b, "uptime-s", "%ld", ms_since(&d->started) / 1000);
		ctl_response_add(
			b, "netlock", "%s", d->frozen ? "FAILED (agent frozen)" : "verified");
		ctl_response_add(b, "netlock-restores", "%u", d->netlock_restores);
		if (d->netlock_restores)
			ctl_response_add(b, "netlock-last-restore-ms", "%.2f", d->last_restore_ms);
		if (d->netlock_error[0])
			ctl_response_add(b, "netlock-error", "%s", d->netlock_error);
		ctl_response_add(b, "frozen", "%s",
			d->frozen == 2	    ? "yes (cgroup freezer)"
				: d->frozen ? "yes (SIGSTOP)"
					    : "no");
		if (d->cg.mode != CG_NONE) {
			ctl_response_add(b, "limits", "memory %llu MiB, tasks %u, cpu %u%%",
				(unsigned long long)(d->limits.memory_max >> 20),
				d->limits.tasks_max, d->limits.cpu_percent);
			ctl_response_add(b, "cgroup", "%s", d->cg.what);
			ctl_response_add(b, "cgroup-processes", "%d", cg_count(&d->cg));
		} else {
			ctl_response_add(b, "limits", "NONE: %s", d->cg_error);
		}
		ctl_response_add(b, "egress", "%s", d->egress.off ? "off" : "on");
		if (!d->egress.off)
			add_child(b, &d->proxy_child, 0);
	}
	for (size_t i = 0; i < d->n_oc; i++)
		add_child(b, &d->oc[i], 1);
}

static void do_restart(struct agentd *d, const char *project, struct buf *b)
{
	int n = 0;

	for (size_t i = 0; i < d->n_oc; i++) {
		if (project[0] && strcmp(strchr(d->oc[i].name, '/') + 1, project) != 0)
			continue;
		child_restart(d, &d->oc[i]);
		n++;
	}
	if (!n) {
		ctl_response_err(b, "no OpenCode instance named '%s'", project);
		return;
	}
	ctl_response_ok(b);
	ctl_response_add(b, "restarted", "%d", n);
}

static void do_logs(struct agentd *d, unsigned count, struct buf *b)
{
	size_t budget;

	ctl_response_ok(b);
	if (!count)
		count = 50;
	/* Each instance gets an equal share of the frame. */
	budget = (CTL_MAX_FRAME - 1024) / (d->n_oc ? d->n_oc : 1) * 3 / 4; /* room for prefixes */
	for (size_t i = 0; i < d->n_oc; i++) {
		char path[4096], name[128], *data = NULL;
		size_t len = 0, lines = 0;
		const char *p;

		child_log_name(&d->oc[i], name, sizeof(name));
		if (path_join(path, sizeof(path), CHILD_LOG_DIR, name) < 0 ||
			fo_read(path, 16 * 1024 * 1024, &data, &len) < 0)
			continue;
		/*
		 * The newest `count` lines that fit in one frame: walk back from the end
		 * counting lines and bytes, then add them oldest first.
		 */
		p = data + len;
		if (p > data && p[-1] == '\n')
			p--;
		while (p > data && lines < count && (size_t)(data + len - p) < budget) {
			if (*--p == '\n')
				lines++;
		}
		if (*p == '\n')
			p++;
		while (*p) {
			size_t l = strcspn(p, "\n");

			if (ctl_response_add(b, "log", "%s: %.*s", strchr(d->oc[i].name, '/') + 1,
				    (int)l, p) == -EMSGSIZE)
				break;
			p += l + (p[l] ? 1 : 0);
		}
		free(data);
	}
}

static void handle(struct agentd *d, struct ctl_client *cl, const char *payload, size_t len)
{
	struct ctl_request rq;
	struct buf b = {0};
	char err[512];

	if (ctl_parse_request(payload, len, &rq, err, sizeof(err)) < 0) {
		log_warn("control: uid %u: bad request: %s", (unsigned)cl->uid, err);
		ctl_response_err(&b, "%s", err);
		goto send;
	}
	switch (rq.verb) {
	case CTL_PING:
		ctl_response_ok(&b);
		ctl_response_add(&b, "version", OCSB_VERSION);
		break;
	case CTL_STATUS:
		do_status(d, &b, 0);
		break;
	case CTL_WEB:
		do_status(d, &b, 1);
		break;
	case CTL_RESTART:
		do_restart(d, rq.arg, &b);
		break;
	case CTL_LOGS:
		do_logs(d, rq.count, &b);
		break;
	case CTL_SECRET_PUT:
		secretd_put(d, cl->uid, rq.sealed, &b);
		break;
	}
	ctl_request_free(&rq);
send:
	send_reply(cl->fd, &b);
	buf_free(&b);
}

void ctlsrv_client(struct agentd *d, struct ctl_client *cl, uint32_t events)
{
	struct ctl_reader *r = cl->reader;
	int st;

	st = ctl_reader_feed(r, cl->fd);
	if (st == 0 && !(events & (EPOLLHUP | EPOLLERR)))
		return;
	if (st == 1)
		handle(d, cl, r->buf, r->have);
	else if (st == -EPROTO)
		log_warn("control: uid %u sent a frame of a bad length: closed", (unsigned)cl->uid);
	client_close(d, cl);
}
