/* SPDX-License-Identifier: MIT */
/*
 * libgit2 smart subtransport over libssh: one SSH session per git operation,
 * host key checked against the pinned file only, the sync key (or ssh-agent),
 * `git-upload-pack '<path>'` / `git-receive-pack '<path>'` on the other side
 * (forced through git-shell by the key's command= option).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "sync.h"

/* One SSH session and its exec channel: the libgit2 stream and push.c both use it. */
struct sync_link {
	struct sync_conn *c; /* borrowed */
	ssh_session session; /* owned */
	ssh_channel channel; /* owned */
	int open;
	int relay; /* the pull's confined child: the channel is c->relay_fd, relayed by the parent */
	int traced; /* the first reply after a write was traced */
};

struct sync_sub;

struct sync_stream {
	git_smart_subtransport_stream parent; /* first: libgit2 casts */
	struct sync_sub *sub; /* borrowed */
};

struct sync_sub {
	git_smart_subtransport parent; /* first */
	git_transport *owner; /* borrowed */
	struct sync_link link; /* embedded */
	struct sync_stream stream; /* embedded: libgit2 may ask for it again after free() */
};

void sync_conn_init(struct sync_conn *c)
{
	memset(c, 0, sizeof(*c));
	c->host = "localhost";
	c->port = 22;
	c->connect_timeout_s = 15;
	c->io_timeout_s = 60;
	c->relay_fd = c->relay_ctl = -1;
}

int sync_shell_quote(const char *s, char *out, size_t n)
{
	size_t o = 0;

	if (n < 3)
		return -1;
	out[o++] = '\'';
	for (; *s; s++) {
		if (*s == '\'') {
			if (o + 4 >= n)
				return -1;
			memcpy(out + o, "'\\''", 4);
			o += 4;
		} else {
			if (o + 1 >= n)
				return -1;
			out[o++] = *s;
		}
	}
	if (o + 2 > n)
		return -1;
	out[o++] = '\'';
	out[o] = '\0';
	return 0;
}

/* Record the first error (the root cause) and hand the same line to libgit2. */
__attribute__((format(printf, 2, 3))) static int sync_fail(
	struct sync_conn *c, const char *fmt, ...)
{
	char msg[sizeof(c->err)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!c->err[0])
		snprintf(c->err, sizeof(c->err), "%s", msg);
	git_error_set_str(GIT_ERROR_NET, msg);
	return -1;
}

/* Remote stderr (git's "fatal: ..." lines) as one line, escaped. */
void sync_link_stderr(struct sync_link *l, char *out, size_t n)
{
	char raw[1024];
	int r, len = 0;

	out[0] = '\0';
	if (!l->channel)
		return; /* relayed: the parent has the remote's stderr */
	while (len < (int)sizeof(raw) - 1) {
		r = ssh_channel_read_nonblocking(
			l->channel, raw + len, (uint32_t)(sizeof(raw) - 1 - (size_t)len), 1);
		if (r <= 0)
			break;
		len += r;
	}
	while (len > 0 && (raw[len - 1] == '\n' || raw[len - 1] == '\r'))
		len--;
	for (int i = 0; i < len; i++)
		if (raw[i] == '\n' || raw[i] == '\r')
			raw[i] = ' ';
	sync_escape(raw, (size_t)len, out, n);
}

void sync_link_close(struct sync_link *l)
{
	if (l->relay) {
		/* The parent hears the end of the download here and closes the SSH session. */
		sync_trace("relay: closing the channel");
		close(l->c->relay_fd);
		l->c->relay_fd = -1;
		l->relay = 0;
	}
	if (l->channel) {
		sync_trace("ssh: closing the channel");
		ssh_channel_close(l->channel);
		ssh_channel_free(l->channel);
		l->channel = NULL;
	}
	if (l->session) {
		sync_trace("ssh: disconnecting");
		ssh_disconnect(l->session);
		ssh_free(l->session);
		l->session = NULL;
		sync_trace("ssh: disconnected");
	}
	l->open = 0;
}

/*
 * The confined child's end of the channel (relay_fd, a socket pair): the parent reads the
 * SSH channel and writes it here. At its end the parent has written why on relay_ctl
 * first (the remote closed the connection and what it said on stderr, a time limit, the
 * byte bound): that is the error, as the transport itself would have said it.
 */
static int sync_relay_closed(struct sync_link *l)
{
	struct sync_conn *c = l->c;
	char why[sizeof(c->err)];
	size_t len = 0;

	while (len + 1 < sizeof(why)) {
		ssize_t r = read(c->relay_ctl, why + len, sizeof(why) - 1 - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	why[len] = '\0';
	why[strcspn(why, "\n")] = '\0';
	if (why[0])
		return sync_fail(c, "%s", why);
	return sync_fail(c, "%s@%s closed the connection (no message)", c->user, c->host);
}

/*
 * r bytes read from the agent: counted, the first traced, and the byte bound enforced (a
 * backstop for what the progress callback cannot see, the ref advertisement). 0 or -1.
 */
static int sync_read_count(struct sync_link *l, size_t r)
{
	struct sync_conn *c = l->c;

	c->bytes_read += (uint64_t)r;
	if (!l->traced)
		sync_trace("first %zu bytes read after the last write", r);
	l->traced = 1;
	if (c->max_bytes && c->bytes_read > c->max_bytes + (1u << 20))
		return sync_fail(c,
			"%s@%s sent more than %llu bytes: aborted (raise the bound with --max-bytes)",
			c->user, c->host, (unsigned long long)c->max_bytes);
	return 0;
}

static int sync_relay_read(struct sync_link *l, char *buffer, size_t want, size_t *bytes_read)
{
	struct sync_conn *c = l->c;
	time_t idle_start = time(NULL);

	for (;;) {
		struct pollfd p = {.fd = c->relay_fd, .events = POLLIN};
		ssize_t r;

		if (c->deadline && time(NULL) > c->deadline)
			return sync_fail(c,
				"time limit reached while receiving from %s@%s "
				"(raise it with --timeout)",
				c->user, c->host);
		/* The parent relays at once: idle here is the remote's idle, as it was in-process. */
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			return sync_fail(c, "relay: %s", strerror(errno));
		if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) {
			if (time(NULL) - idle_start >= c->io_timeout_s)
				return sync_fail(c,
					"no data from %s@%s for %d s (inactivity timeout)", c->user,
					c->host, c->io_timeout_s);
			continue;
		}
		r = read(c->relay_fd, buffer, want);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return sync_relay_closed(l);
		if (sync_read_count(l, (size_t)r) < 0)
			return -1;
		*bytes_read = (size_t)r;
		return 0;
	}
}

int sync_link_read(struct sync_link *l, char *buffer, size_t buf_size, size_t *bytes_read)
{
	struct sync_conn *c = l->c;
	/* libssh takes a uint32_t length. */
	uint32_t want = buf_size > 65536 ? 65536 : (uint32_t)buf_size;
	int idle_ms = 0;
	time_t idle_start = 0;

	*bytes_read = 0;
	if (!l->open)
		return sync_fail(c, "connection to %s@%s already closed", c->user, c->host);
	if (l->relay)
		return sync_relay_read(l, buffer, want, bytes_read);
	for (;;) {
		int r;

		if (c->deadline && time(NULL) > c->deadline)
			return sync_fail(c,
				"time limit reached while receiving from %s@%s "
				"(raise it with --timeout)",
				c->user, c->host);
		/* Short slices: the inactivity timeout and the deadline are both checked here. */
		r = ssh_channel_read_timeout(l->channel, buffer, want, 0, 1000);
		if (r > 0) {
			if (sync_read_count(l, (size_t)r) < 0)
				return -1;
			*bytes_read = (size_t)r;
			return 0;
		}
		if (r == SSH_ERROR)
			return sync_fail(c, "reading from %s@%s: %s", c->user, c->host,
				ssh_get_error(l->session));
		/* A channel the remote closed also reads 0 at once: not an idle slice. */
		if (ssh_channel_is_eof(l->channel) || ssh_channel_is_closed(l->channel)) {
			char msg[600];

			sync_link_stderr(l, msg, sizeof(msg));
			return sync_fail(c, "%s@%s closed the connection%s%s", c->user, c->host,
				msg[0] ? ": remote: " : " (no message)", msg);
		}
		/* r == 0 without EOF: the slice timed out (measured: it may return early). */
		if (!idle_start)
			idle_start = time(NULL);
		idle_ms = (int)(time(NULL) - idle_start) * 1000;
		if (idle_ms >= c->io_timeout_s * 1000)
			return sync_fail(c, "no data from %s@%s for %d s (inactivity timeout)",
				c->user, c->host, c->io_timeout_s);
	}
}

int sync_link_write(struct sync_link *l, const char *buffer, size_t len)
{
	struct sync_conn *c = l->c;

	if (!l->open)
		return sync_fail(c, "connection to %s@%s already closed", c->user, c->host);
	sync_trace("writing %zu bytes", len);
	l->traced = 0;
	if (l->relay) {
		while (len) {
			ssize_t w = write(c->relay_fd, buffer, len);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return sync_relay_closed(l);
			buffer += w;
			len -= (size_t)w;
		}
		return 0;
	}
	while (len) {
		uint32_t chunk = len > 65536 ? 65536 : (uint32_t)len;
		int r;

		if (c->deadline && time(NULL) > c->deadline)
			return sync_fail(c,
				"time limit reached while sending to %s@%s (raise it with "
				"--timeout)",
				c->user, c->host);
		r = ssh_channel_write(l->channel, buffer, chunk);
		if (r == SSH_ERROR || r <= 0) {
			char msg[600];

			sync_link_stderr(l, msg, sizeof(msg));
			return sync_fail(c, "writing to %s@%s: %s%s%s", c->user, c->host,
				ssh_get_error(l->session), msg[0] ? "; remote: " : "", msg);
		}
		buffer += r;
		len -= (size_t)r;
	}
	return 0;
}

static int sync_stream_read(
	git_smart_subtransport_stream *stream, char *buffer, size_t buf_size, size_t *bytes_read)
{
	return sync_link_read(
		&((struct sync_stream *)stream)->sub->link, buffer, buf_size, bytes_read);
}

static int sync_stream_write(git_smart_subtransport_stream *stream, const char *buffer, size_t len)
{
	return sync_link_write(&((struct sync_stream *)stream)->sub->link, buffer, len);
}

static void sync_stream_free(git_smart_subtransport_stream *stream)
{
	/* Embedded in the subtransport: the connection closes in close()/free(). */
	(void)stream;
}

static int sync_known_host(struct sync_link *l)
{
	struct sync_conn *c = l->c;
	enum ssh_known_hosts_e k = ssh_session_is_known_server(l->session);
	char where[300];
	const char *fix = c->pin_fix ? c->pin_fix : "run 'sudo ocsb-provision' again to re-pin";

	if (c->port == 22)
		snprintf(where, sizeof(where), "%s", c->host);
	else
		snprintf(where, sizeof(where), "[%s]:%u", c->host, c->port);
	switch (k) {
	case SSH_KNOWN_HOSTS_OK:
		return 0;
	case SSH_KNOWN_HOSTS_CHANGED:
		return sync_fail(c,
			"host key of %s does not match the pin in %s: refusing to connect (if the "
			"host key was changed on purpose, %s)",
			where, c->known_hosts, fix);
	case SSH_KNOWN_HOSTS_OTHER:
		return sync_fail(c,
			"host key of %s is of another type than the pin in %s: refusing to "
			"connect (%s)",
			where, c->known_hosts, fix);
	case SSH_KNOWN_HOSTS_NOT_FOUND:
	case SSH_KNOWN_HOSTS_UNKNOWN:
		return sync_fail(c, "no pinned host key for %s in %s: refusing to connect (%s)",
			where, c->known_hosts, fix);
	case SSH_KNOWN_HOSTS_ERROR:
	default:
		return sync_fail(c, "checking the host key of %s against %s: %s", where,
			c->known_hosts, ssh_get_error(l->session));
	}
}

static int sync_auth(struct sync_link *l)
{
	struct sync_conn *c = l->c;
	ssh_key key = NULL;
	int r;

	if (c->agent_auth) {
		r = ssh_userauth_agent(l->session, NULL);
		if (r != SSH_AUTH_SUCCESS)
			return sync_fail(c,
				"ssh-agent authentication as %s@%s failed: %s (is the sync key "
				"loaded? ssh-add %s)",
				c->user, c->host,
				r == SSH_AUTH_ERROR ? ssh_get_error(l->session) : "key refused",
				c->key_path ? c->key_path : "KEY");
		return 0;
	}
	if (ssh_pki_import_privkey_file(c->key_path, NULL, NULL, NULL, &key) != SSH_OK)
		return sync_fail(c,
			"cannot read the sync key %s (missing, unreadable or passphrase-protected; "
			"%s, or use --agent-auth)",
			c->key_path,
			c->key_fix ? c->key_fix : "run 'sudo ocsb-provision' to create it");
	r = ssh_userauth_publickey(l->session, NULL, key);
	ssh_key_free(key);
	if (r != SSH_AUTH_SUCCESS)
		return sync_fail(c, "%s@%s refused the sync key %s: %s (%s)", c->user, c->host,
			c->key_path,
			r == SSH_AUTH_ERROR ? ssh_get_error(l->session) : "not authorized",
			c->key_fix ? c->key_fix : "run 'sudo ocsb-provision' to authorize it");
	return 0;
}

static int sync_link_connect(struct sync_link *l, const char *service)
{
	struct sync_conn *c = l->c;
	char quoted[4200], cmd[4300];
	int no = 0, yes = 1;
	long tmo = c->connect_timeout_s;

	if (sync_shell_quote(c->remote_path, quoted, sizeof(quoted)) < 0)
		return sync_fail(c, "remote path too long");
	snprintf(cmd, sizeof(cmd), "%s %s", service, quoted);
	l->session = ssh_new();
	if (!l->session)
		return sync_fail(c, "out of memory");
	/*
	 * Nothing from ~/.ssh: no config file (it could name a ProxyCommand or another host),
	 * no other known_hosts than the pin, no global file. The pin is the trust anchor.
	 */
	if (ssh_options_set(l->session, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
		ssh_options_set(l->session, SSH_OPTIONS_HOST, c->host) < 0 ||
		ssh_options_set(l->session, SSH_OPTIONS_PORT, &c->port) < 0 ||
		ssh_options_set(l->session, SSH_OPTIONS_USER, c->user) < 0 ||
		ssh_options_set(l->session, SSH_OPTIONS_KNOWNHOSTS, c->known_hosts) < 0 ||
		ssh_options_set(l->session, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0 ||
		ssh_options_set(l->session, SSH_OPTIONS_TIMEOUT, &tmo) < 0 ||
		/*
		 * git's exchange is request and answer: a small write (the wants, a close)
		 * must not wait, as Nagle makes it, for the ACK of a window adjustment the
		 * other side delays by 40 ms.
		 */
		ssh_options_set(l->session, SSH_OPTIONS_NODELAY, &yes) < 0)
		return sync_fail(c, "setting ssh options: %s", ssh_get_error(l->session));
	sync_trace("ssh: connecting");
	if (ssh_connect(l->session) != SSH_OK)
		return sync_fail(c, "cannot connect to %s port %u: %s (is sshd running?)", c->host,
			c->port, ssh_get_error(l->session));
	if (sync_known_host(l) < 0 || sync_auth(l) < 0)
		return -1;
	sync_trace("ssh: host key checked, authenticated");
	tmo = c->io_timeout_s;
	ssh_options_set(l->session, SSH_OPTIONS_TIMEOUT, &tmo);
	l->channel = ssh_channel_new(l->session);
	if (!l->channel || ssh_channel_open_session(l->channel) != SSH_OK)
		return sync_fail(c, "opening an ssh channel to %s@%s: %s", c->user, c->host,
			ssh_get_error(l->session));
	if (ssh_channel_request_exec(l->channel, cmd) != SSH_OK)
		return sync_fail(c, "running %s on %s@%s: %s", service, c->user, c->host,
			ssh_get_error(l->session));
	l->open = 1;
	sync_trace("ssh: %s started", service);
	return 0;
}

int sync_link_open(struct sync_link *l, const char *service)
{
	sync_link_close(l);
	if (l->c->relay_ctl >= 0) {
		/* The confined child: the parent opened the session; one per pull. */
		if (l->c->relay_fd < 0)
			return sync_fail(
				l->c, "connection to %s@%s already closed", l->c->user, l->c->host);
		l->relay = 1;
		l->open = 1;
		sync_trace("relay: %s over the parent's connection", service);
		return 0;
	}
	if (sync_link_connect(l, service) < 0) {
		sync_link_close(l);
		return -1;
	}
	return 0;
}

struct sync_link *sync_link_new(struct sync_conn *c)
{
	struct sync_link *l = calloc(1, sizeof(*l));

	if (l)
		l->c = c;
	return l;
}

void sync_link_free(struct sync_link *l)
{
	if (!l)
		return;
	sync_link_close(l);
	free(l);
}

/* --- the parent's side of the pull: the SSH channel relayed to the confined child */

/* Say why the parent ends the relay: on ctl for the child (it reports it), and in why. */
__attribute__((format(printf, 3, 4))) static int sync_relay_end(
	struct sync_link *l, struct sync_relay *rl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rl->why, sizeof(rl->why), fmt, ap);
	va_end(ap);
	if (rl->ctl >= 0) {
		ssize_t w = write(rl->ctl, rl->why, strlen(rl->why));

		(void)w;
		close(rl->ctl);
		rl->ctl = -1;
	}
	shutdown(rl->data, SHUT_RDWR);
	(void)l;
	return -1;
}

int sync_link_relay(struct sync_link *l, struct sync_relay *rl)
{
	struct sync_conn *c = l->c;
	static char in[65536], out[65536];
	size_t inlen = 0, inoff = 0;
	int remote_eof = 0, busy;
	int sshfd = ssh_get_fd(l->session);

	rl->why[0] = '\0';
	if (fcntl(rl->data, F_SETFL, fcntl(rl->data, F_GETFL) | O_NONBLOCK) < 0)
		return sync_relay_end(l, rl, "relay: %s", strerror(errno));
	for (;;) {
		struct pollfd p[4];
		int np = 0, n;
		ssize_t r;

		if (c->deadline && time(NULL) > c->deadline)
			return sync_relay_end(l, rl,
				"time limit reached while receiving from %s@%s (raise it with "
				"--timeout)",
				c->user, c->host);
		busy = 0;
		/* The remote's output, as far as the child takes it (its pace is the download's). */
		if (!inlen && !remote_eof) {
			n = ssh_channel_read_nonblocking(l->channel, in, sizeof(in), 0);
			if (n > 0) {
				inlen = (size_t)n;
				inoff = 0;
				c->bytes_read += (uint64_t)n;
				if (rl->on_remote)
					rl->on_remote(rl->arg, in, (size_t)n);
				if (!l->traced)
					sync_trace("first %d bytes read after the last write", n);
				l->traced = 1;
				busy = 1;
				/* The byte bound, kept here too: the child's count is the child's. */
				if (c->max_bytes && c->bytes_read > c->max_bytes + (1u << 20))
					return sync_relay_end(l, rl,
						"%s@%s sent more than %llu bytes: aborted (raise "
						"the "
						"bound with --max-bytes)",
						c->user, c->host, (unsigned long long)c->max_bytes);
			} else if (n == SSH_ERROR) {
				return sync_relay_end(l, rl, "reading from %s@%s: %s", c->user,
					c->host, ssh_get_error(l->session));
			} else if (ssh_channel_is_eof(l->channel) ||
				ssh_channel_is_closed(l->channel)) {
				char msg[600];

				/* Not an error yet: the child may have all it needs. */
				remote_eof = 1;
				sync_link_stderr(l, msg, sizeof(msg));
				snprintf(rl->why, sizeof(rl->why),
					"%s@%s closed the connection%s%s", c->user, c->host,
					msg[0] ? ": remote: " : " (no message)", msg);
				if (rl->ctl >= 0) {
					ssize_t w = write(rl->ctl, rl->why, strlen(rl->why));

					(void)w;
					close(rl->ctl);
					rl->ctl = -1;
				}
				shutdown(rl->data, SHUT_WR);
				sync_trace("relay: the remote closed the channel");
			}
		}
		if (inlen) {
			r = write(rl->data, in + inoff, inlen);
			if (r > 0) {
				inoff += (size_t)r;
				inlen -= (size_t)r;
				busy = 1;
			} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
				return 0; /* the child is gone: its exit status says why */
			}
		}
		/* What the child sends the remote (wants, haves, done). */
		r = read(rl->data, out, sizeof(out));
		if (r > 0) {
			/*
			 * After the remote's end (libgit2 sends a flush as it closes), or when
			 * the write fails, the bytes are dropped: the child hears of it when it
			 * next reads, as it would have in-process.
			 */
			if (!remote_eof && sync_link_write(l, out, (size_t)r) < 0) {
				remote_eof = 1;
				if (rl->ctl >= 0) {
					ssize_t w = write(rl->ctl, c->err, strlen(c->err));

					(void)w;
					close(rl->ctl);
					rl->ctl = -1;
				}
				c->err[0] = '\0';
				shutdown(rl->data, SHUT_WR);
			}
			busy = 1;
		} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
			rl->why[0] = '\0';
			return 0; /* the child closed its end: the download is over */
		}
		if (!inlen && !remote_eof)
			p[np++] = (struct pollfd){.fd = sshfd, .events = POLLIN};
		p[np++] = (struct pollfd){.fd = rl->data, .events = POLLIN | (inlen ? POLLOUT : 0)};
		for (int i = 0; i < 2; i++)
			if (rl->extra[i] >= 0)
				p[np++] = (struct pollfd){.fd = rl->extra[i], .events = POLLIN};
		/* After progress, only a look: libssh may hold more of the channel already. */
		if (poll(p, (nfds_t)np, busy ? 0 : 1000) < 0 && errno != EINTR)
			return sync_relay_end(l, rl, "relay: %s", strerror(errno));
		for (int i = 0; i < np; i++) {
			int k = p[i].fd == rl->extra[0] ? 0 : p[i].fd == rl->extra[1] ? 1 : -1;

			if (k < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = rl->on_extra(rl->arg, rl->extra[k]);
			if (n < 0)
				return sync_relay_end(
					l, rl, "%s", "the confined child broke the protocol");
			if (n > 0)
				rl->extra[k] = -1;
		}
	}
}

static int sync_sub_action(git_smart_subtransport_stream **out, git_smart_subtransport *sub,
	const char *url, git_smart_service_t action)
{
	struct sync_sub *s = (struct sync_sub *)sub;
	const char *service;

	(void)url; /* the path comes from ocsb.conf, not from a URL git config could rewrite */
	switch (action) {
	case GIT_SERVICE_UPLOADPACK_LS:
		service = "git-upload-pack";
		break;
	case GIT_SERVICE_RECEIVEPACK_LS:
		service = "git-receive-pack";
		break;
	case GIT_SERVICE_UPLOADPACK:
	case GIT_SERVICE_RECEIVEPACK:
		/* Same stream, whatever its direction: libgit2 asks for UPLOADPACK to send a flush. */
		if (s->link.open) {
			*out = &s->stream.parent;
			return 0;
		}
		service = action == GIT_SERVICE_UPLOADPACK ? "git-upload-pack" : "git-receive-pack";
		break;
	default:
		return sync_fail(s->link.c, "unsupported git service %d", (int)action);
	}
	if (sync_link_open(&s->link, service) < 0)
		return -1;
	*out = &s->stream.parent;
	return 0;
}

static int sync_sub_close(git_smart_subtransport *sub)
{
	/* Also called before the first action(): a no-op when nothing is open. */
	sync_link_close(&((struct sync_sub *)sub)->link);
	return 0;
}

static void sync_sub_free(git_smart_subtransport *sub)
{
	sync_link_close(&((struct sync_sub *)sub)->link);
	free(sub);
}

static int sync_sub_create(git_smart_subtransport **out, git_transport *owner, void *param)
{
	struct sync_sub *s = calloc(1, sizeof(*s));

	if (!s)
		return -1;
	s->parent.action = sync_sub_action;
	s->parent.close = sync_sub_close;
	s->parent.free = sync_sub_free;
	s->owner = owner;
	s->link.c = param;
	s->stream.parent.subtransport = &s->parent;
	s->stream.parent.read = sync_stream_read;
	s->stream.parent.write = sync_stream_write;
	s->stream.parent.free = sync_stream_free;
	s->stream.sub = s;
	*out = &s->parent;
	return 0;
}

int sync_transport_cb(git_transport **out, git_remote *owner, void *payload)
{
	struct sync_conn *c = payload;

	/* Ours, always: a missing transport would silently fall back to libgit2's libssh2. */
	c->def.callback = sync_sub_create;
	c->def.rpc = 0;
	c->def.param = c;
	return git_transport_smart(out, owner, &c->def);
}
