/* SPDX-License-Identifier: MIT */
/*
 * The control protocol on descriptors: the frame reader, the blocking frame helpers and
 * ctl_call against a server in a child process.
 */
#define _GNU_SOURCE
#include "ctl_unit.h"

/* ---- ctl_reader_feed ---- */

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
}

static void frame(struct buf *b, const char *payload, size_t len)
{
	unsigned char h[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
		(unsigned char)(len >> 8), (unsigned char)len};

	assert_int_equal(buf_append(b, h, 4), 0);
	assert_int_equal(buf_append(b, payload, len), 0);
}

static void write_all(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

static void reader_one_byte_writes(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int sv[2];

	pair(sv);
	frame(&b, "OCSB/1 PING\n", 12);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	for (size_t i = 0; i < b.len; i++) {
		write_all(sv[1], b.data + i, 1);
		assert_int_equal(ctl_reader_feed(&r, sv[0]), i + 1 == b.len ? 1 : 0);
	}
	assert_int_equal(r.have, 12);
	assert_memory_equal(r.buf, "OCSB/1 PING\n", 13);
	/* A complete frame stays complete until reset. */
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 1);
	ctl_reader_reset(&r);
	assert_null(r.buf);
	assert_int_equal(r.hdr_have, 0);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	ctl_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
	buf_free(&b);
}

static void reader_two_frames_one_write(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int sv[2];

	pair(sv);
	frame(&b, "OCSB/1 STATUS\n", 14);
	frame(&b, "OCSB/1 LOGS 5\n", 14);
	write_all(sv[1], b.data, b.len);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 1);
	assert_string_equal(r.buf, "OCSB/1 STATUS\n");
	/* The second frame was not read into the first's buffer: it is still in the socket. */
	ctl_reader_reset(&r);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 1);
	assert_string_equal(r.buf, "OCSB/1 LOGS 5\n");
	assert_int_equal(r.have, 14);
	ctl_reader_reset(&r);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);
	buf_free(&b);
}

static void reader_bad_length(void **state)
{
	static const unsigned char lens[][4] = {
		{0, 0, 0, 0}, {0, 1, 0, 1}, {0xff, 0xff, 0xff, 0xff}, {0x80, 0, 0, 0}};
	struct ctl_reader r = {0};
	int sv[2];

	for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
		pair(sv);
		write_all(sv[1], lens[i], 4);
		write_all(sv[1], "abcd", 4);
		assert_int_equal(ctl_reader_feed(&r, sv[0]), -EPROTO);
		/* Refused before allocating: a peer chooses this number. */
		assert_null(r.buf);
		assert_int_equal(r.need, 0);
		/* And it stays refused. */
		assert_int_equal(ctl_reader_feed(&r, sv[0]), -EPROTO);
		ctl_reader_reset(&r);
		close(sv[0]);
		close(sv[1]);
	}
}

static void reader_max_frame(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	size_t off = 0;
	int sv[2], got = 0;
	ssize_t k;

	pair(sv);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	frame(&b, rep('x', CTL_MAX_FRAME), CTL_MAX_FRAME);
	while (!got) {
		if (off < b.len) {
			k = write(sv[1], b.data + off, b.len - off);
			assert_true(k > 0 || errno == EAGAIN);
			if (k > 0)
				off += (size_t)k;
		}
		got = ctl_reader_feed(&r, sv[0]);
		assert_true(got >= 0);
	}
	assert_int_equal(off, b.len);
	assert_int_equal(r.have, CTL_MAX_FRAME);
	assert_int_equal(r.buf[CTL_MAX_FRAME], '\0');
	ctl_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
	buf_free(&b);
}

static void reader_eof(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int sv[2];

	/* In the middle of a payload. */
	pair(sv);
	frame(&b, "OCSB/1 STATUS\n", 14);
	write_all(sv[1], b.data, 10);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);

	/* In the middle of the header. */
	pair(sv);
	write_all(sv[1], b.data, 2);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	assert_int_equal(r.hdr_have, 2);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);

	/* Between frames. */
	pair(sv);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);
	buf_free(&b);
}

/* A descriptor left blocking by mistake must not stall the daemon's loop. */
static void reader_blocking_fd(void **state)
{
	struct ctl_reader r = {0};
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	alarm(5);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	write_all(sv[1], "\0\0\0\2", 4);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	assert_non_null(r.buf);
	alarm(0);
	ctl_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
}

static void reader_pipe(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	frame(&b, "OCSB/1 WEB\n", 11);
	write_all(p[1], b.data, b.len);
	assert_int_equal(ctl_reader_feed(&r, p[0]), 1);
	assert_string_equal(r.buf, "OCSB/1 WEB\n");
	ctl_reader_reset(&r);
	assert_int_equal(ctl_reader_feed(&r, p[0]), 0);
	assert_int_equal(ctl_reader_feed(&r, -1), -EBADF);
	close(p[1]);
	assert_int_equal(ctl_reader_feed(&r, p[0]), -ECONNRESET);
	close(p[0]);
	buf_free(&b);
}

/* ---- blocking frame helpers ---- */

static void frames_send_recv(void **state)
{
	char *got = NULL;
	size_t n = 0;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(ctl_send_frame(sv[0], "OCSB/1 OK\n", 10, 1000), 0);
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), 0);
	assert_int_equal(n, 10);
	assert_string_equal(got, "OCSB/1 OK\n");
	free(got);
	assert_int_equal(ctl_send_frame(sv[0], "", 0, 1000), -EMSGSIZE);
	assert_int_equal(
		ctl_send_frame(sv[0], rep('x', CTL_MAX_FRAME + 1), CTL_MAX_FRAME + 1, 1000),
		-EMSGSIZE);

	/* Bad lengths, from a peer. */
	write_all(sv[0], "\0\0\0\0", 4);
	got = NULL;
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), -EPROTO);
	assert_null(got);
	write_all(sv[0], "\0\1\0\1", 4);
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), -EPROTO);
	assert_null(got);

	/* End of file in the middle of a frame. */
	write_all(sv[0], "\0\0\0\5ab", 6);
	close(sv[0]);
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), -ECONNRESET);
	assert_null(got);
	close(sv[1]);
}

static void frames_recv_timeout(void **state)
{
	char *got = NULL;
	size_t n;
	long t0;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	/* A header and part of the payload, then nothing. */
	write_all(sv[0], "\0\0\0\5ab", 6);
	t0 = now_ms();
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 200), -ETIMEDOUT);
	assert_in_range(now_ms() - t0, 190, 1500);
	assert_null(got);
	close(sv[0]);
	close(sv[1]);
}

/* A peer that does not read: the send gives up at the deadline instead of blocking. */
static void frames_send_timeout(void **state)
{
	int sv[2], small = 4096;
	long t0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	t0 = now_ms();
	assert_int_equal(
		ctl_send_frame(sv[0], rep('x', CTL_MAX_FRAME), CTL_MAX_FRAME, 200), -ETIMEDOUT);
	assert_in_range(now_ms() - t0, 190, 1500);
	close(sv[0]);
	close(sv[1]);
}

/* A peer gone: an error, not SIGPIPE (which would kill the test binary). */
static void frames_send_closed(void **state)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(ctl_send_frame(sv[0], "x\n", 2, 1000), -EPIPE);
	close(sv[0]);
}

static void peer_credentials(void **state)
{
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int sv[2], fd;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(ctl_peer(sv[0], &uid, &gid, &pid), 0);
	assert_int_equal(uid, geteuid());
	assert_int_equal(gid, getegid());
	assert_int_equal(pid, getpid());
	assert_int_equal(ctl_peer(sv[1], NULL, NULL, NULL), 0);
	close(sv[0]);
	close(sv[1]);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	uid = 12345;
	assert_int_equal(ctl_peer(fd, &uid, NULL, NULL), -ENOTSOCK);
	assert_int_equal(uid, 12345);
	close(fd);
}

/* ---- ctl_call against a server in a child process ---- */

enum srv_mode {
	SRV_ECHO, /* answer each request with what it saw, and the peer's credentials */
	SRV_ERR_CLOSE, /* refuse at once, before reading, as for an unknown uid */
	SRV_SILENT, /* read the request, never answer */
	SRV_PARTIAL, /* half a frame, then nothing */
	SRV_CLOSE, /* close without answering */
	SRV_BADLEN, /* a frame length above the limit */
	SRV_GARBAGE, /* a well-framed answer that is not a response */
};

static int listen_at(const char *path, int backlog)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	return fd;
}

/* The daemon's side, the way agentd will do it: non-blocking reader, poll, parse, answer. */
static int serve_echo(int c)
{
	struct ctl_reader rd = {0};
	struct ctl_request rq;
	struct pollfd p = {.fd = c, .events = POLLIN};
	struct buf out = {0};
	char err[256];
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int r;

	if (fcntl(c, F_SETFL, O_NONBLOCK) < 0)
		return 10;
	while ((r = ctl_reader_feed(&rd, c)) == 0)
		if (poll(&p, 1, 5000) != 1)
			return 11;
	if (r != 1)
		return 12;
	if (ctl_peer(c, &uid, &gid, &pid) < 0)
		return 13;
	if (ctl_parse_request(rd.buf, rd.have, &rq, err, sizeof(err)) < 0) {
		ctl_response_err(&out, "%s", err);
	} else {
		ctl_response_ok(&out);
		ctl_response_add(&out, "verb", "%s", ctl_verb_name(rq.verb));
		ctl_response_add(&out, "arg", "%s", rq.arg);
		ctl_response_add(&out, "count", "%u", rq.count);
		ctl_response_add(&out, "sealed", "%s", rq.sealed ? rq.sealed : "-");
		ctl_response_add(&out, "uid", "%u", (unsigned)uid);
		ctl_response_add(&out, "gid", "%u", (unsigned)gid);
		ctl_response_add(&out, "pid", "%d", (int)pid);
		ctl_request_free(&rq);
	}
	r = ctl_send_frame(c, out.data, out.len, 5000);
	ctl_reader_reset(&rd);
	buf_free(&out);
	return r < 0 ? 14 : 0;
}

static int serve_one(int c, enum srv_mode mode)
{
	struct buf out = {0};
	char junk[64];
	int r;

	switch (mode) {
	case SRV_ECHO:
		return serve_echo(c);
	case SRV_ERR_CLOSE:
		ctl_response_err(&out, "permission denied: uid %d refused", 1001);
		r = ctl_send_frame(c, out.data, out.len, 5000);
		buf_free(&out);
		return r < 0 ? 20 : 0;
	case SRV_SILENT:
		if (read(c, junk, sizeof(junk)) <= 0)
			return 21;
		pause();
		return 0;
	case SRV_PARTIAL:
		if (write(c, "\0\0\0\x0aOCSB/", 9) != 9)
			return 22;
		pause();
		return 0;
	case SRV_CLOSE:
		return read(c, junk, sizeof(junk)) <= 0 ? 23 : 0;
	case SRV_BADLEN:
		return write(c, "\x7f\0\0\0OCSB", 8) == 8 ? 0 : 24;
	case SRV_GARBAGE:
		return write(c, "\0\0\0\x0aOCSB/2 OK\n", 14) == 14 ? 0 : 25;
	}
	return 26;
}

/* Fork a server on lfd for `conns` connections; the parent keeps no copy of lfd. */
static pid_t server_start(int lfd, enum srv_mode mode, int conns)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* Never outlive the test, whatever the client does. */
		alarm(10);
		for (int i = 0; i < conns; i++) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), r;

			if (c < 0)
				_exit(30);
			r = serve_one(c, mode);
			close(c);
			if (r)
				_exit(r);
		}
		_exit(0);
	}
	close(lfd);
	return pid;
}

static void server_wait(pid_t pid, int kill_it)
{
	int st;

	if (kill_it)
		kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!kill_it && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("server: status 0x%x", st);
}

static void call_echo_every_verb(void **state)
{
	const char *path = unit_path("agentd.sock");
	struct ctl_request rqs[] = {
		{.verb = CTL_STATUS},
		{.verb = CTL_RESTART, .arg = "shop"},
		{.verb = CTL_LOGS, .count = 200},
		{.verb = CTL_WEB},
		{.verb = CTL_PING},
		{.verb = CTL_SECRET_PUT, .sealed = (char *)rep('A', CTL_MAX_SEALED)},
	};
	pid_t pid = server_start(listen_at(path, 8), SRV_ECHO, (int)ARRAY_SIZE(rqs));
	char err[512], num[32];

	for (size_t i = 0; i < ARRAY_SIZE(rqs); i++) {
		struct ctl_response r;

		if (ctl_call(path, &rqs[i], &r, 5000, err, sizeof(err)) != 0)
			fail_msg("ctl_call %s: %s", ctl_verb_name(rqs[i].verb), err);
		assert_true(r.ok);
		assert_string_equal(ctl_response_get(&r, "verb"), ctl_verb_name(rqs[i].verb));
		assert_string_equal(ctl_response_get(&r, "arg"), rqs[i].arg);
		snprintf(num, sizeof(num), "%u", rqs[i].count);
		assert_string_equal(ctl_response_get(&r, "count"), num);
		assert_string_equal(
			ctl_response_get(&r, "sealed"), rqs[i].sealed ? rqs[i].sealed : "-");
		/* What the server learnt from SO_PEERCRED is us. */
		snprintf(num, sizeof(num), "%u", (unsigned)geteuid());
		assert_string_equal(ctl_response_get(&r, "uid"), num);
		snprintf(num, sizeof(num), "%u", (unsigned)getegid());
		assert_string_equal(ctl_response_get(&r, "gid"), num);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		assert_string_equal(ctl_response_get(&r, "pid"), num);
		ctl_response_free(&r);
	}
	server_wait(pid, 0);
}

static void call_refused_with_err(void **state)
{
	const char *path = unit_path("agentd.sock");
	struct ctl_request rq = {
		.verb = CTL_SECRET_PUT, .arg = "K", .sealed = (char *)rep('Q', 8192)};
	pid_t pid = server_start(listen_at(path, 8), SRV_ERR_CLOSE, 3);
	struct ctl_response r;
	char err[512];

	/* The daemon may close before our request is out: its ERR is still what we report. */
	for (int i = 0; i < 3; i++) {
		if (ctl_call(path, &rq, &r, 5000, err, sizeof(err)) != 0)
			fail_msg("ctl_call: %s", err);
		assert_false(r.ok);
		assert_string_equal(r.error, "permission denied: uid 1001 refused");
		ctl_response_free(&r);
	}
	server_wait(pid, 0);
}

static void call_expect_fail(const char *path, int timeout_ms, int want_rc, const char *want_err)
{
	struct ctl_response r = {.ok = 7};
	char err[512] = "";
	long t0 = now_ms();

	assert_int_equal(ctl_call(path, &(struct ctl_request){.verb = CTL_STATUS}, &r, timeout_ms,
				 err, sizeof(err)),
		want_rc);
	/* Within the deadline, with some slack for a loaded machine. */
	assert_true(now_ms() - t0 < timeout_ms + 1000);
	if (strcmp(err, want_err) != 0)
		fail_msg("error '%s', expected '%s'", err, want_err);
	assert_int_equal(r.ok, 7);
}

static void call_server_failures(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	pid_t pid;

	pid = server_start(listen_at(path, 8), SRV_CLOSE, 1);
	snprintf(want, sizeof(want), "ocsb-agentd at %s closed the connection without answering",
		path);
	call_expect_fail(path, 2000, -ECONNRESET, want);
	server_wait(pid, 0);
	unlink(path);

	pid = server_start(listen_at(path, 8), SRV_BADLEN, 1);
	snprintf(want, sizeof(want), "bad answer from ocsb-agentd at %s: invalid frame length",
		path);
	call_expect_fail(path, 2000, -EPROTO, want);
	server_wait(pid, 0);
	unlink(path);

	pid = server_start(listen_at(path, 8), SRV_GARBAGE, 1);
	snprintf(want, sizeof(want),
		"bad answer from ocsb-agentd at %s: unsupported protocol version 2", path);
	call_expect_fail(path, 2000, -EPROTO, want);
	server_wait(pid, 0);
}

static void call_timeouts(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	long t0;
	pid_t pid;

	snprintf(want, sizeof(want), "ocsb-agentd at %s did not answer within 300 ms", path);
	pid = server_start(listen_at(path, 8), SRV_SILENT, 1);
	t0 = now_ms();
	call_expect_fail(path, 300, -ETIMEDOUT, want);
	assert_true(now_ms() - t0 >= 290);
	server_wait(pid, 1);
	unlink(path);

	pid = server_start(listen_at(path, 8), SRV_PARTIAL, 1);
	call_expect_fail(path, 300, -ETIMEDOUT, want);
	server_wait(pid, 1);
	unlink(path);
}

/* Listening but never accepting: connect succeeds into the backlog, no answer comes. */
static void call_never_accepted(void **state)
{
	const char *path = unit_path("agentd.sock");
	int lfd = listen_at(path, 8);
	char want[512];

	snprintf(want, sizeof(want), "ocsb-agentd at %s did not answer within 200 ms", path);
	call_expect_fail(path, 200, -ETIMEDOUT, want);
	close(lfd);
}

/* A full backlog: connect cannot complete, and gives up at the deadline. */
static void call_backlog_full(void **state)
{
	const char *path = unit_path("agentd.sock");
	int lfd = listen_at(path, 0), fds[64], n = 0, fd;
	char want[512];

	while (n < (int)ARRAY_SIZE(fds) && (fd = ctl_connect(path, 50)) >= 0)
		fds[n++] = fd;
	assert_true(n < (int)ARRAY_SIZE(fds));
	assert_int_equal(ctl_connect(path, 50), -ETIMEDOUT);
	snprintf(want, sizeof(want),
		"ocsb-agentd at %s is not accepting connections (timed out after 200 ms)", path);
	call_expect_fail(path, 200, -ETIMEDOUT, want);
	while (n > 0)
		close(fds[--n]);
	close(lfd);
}

static void call_unreachable(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	int lfd;

	snprintf(want, sizeof(want),
		"cannot reach ocsb-agentd at %s: No such file or directory (is it running? sudo "
		"ocsb-warden --foreground)",
		path);
	call_expect_fail(path, 1000, -ENOENT, want);
	assert_int_equal(ctl_connect(path, 1000), -ENOENT);

	/* A socket file left behind by a daemon that is gone. */
	lfd = listen_at(path, 1);
	close(lfd);
	snprintf(want, sizeof(want),
		"cannot reach ocsb-agentd at %s: Connection refused (is it running? sudo "
		"ocsb-warden --foreground)",
		path);
	call_expect_fail(path, 1000, -ECONNREFUSED, want);
	unlink(path);

	assert_int_equal(ctl_connect(rep('p', 200), 1000), -ENAMETOOLONG);
}

static void call_permission_denied(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	int lfd;

	if (geteuid() == 0)
		skip(); /* root ignores the socket's mode */
	lfd = listen_at(path, 1);
	assert_int_equal(chmod(path, 0), 0);
	snprintf(want, sizeof(want),
		"cannot reach ocsb-agentd at %s: Permission denied (only root and the owner may "
		"use it)",
		path);
	call_expect_fail(path, 1000, -EACCES, want);
	close(lfd);
}

static void call_invalid_request(void **state)
{
	struct ctl_response r;
	char err[512];

	assert_int_equal(ctl_call("/nonexistent/agentd.sock",
				 &(struct ctl_request){.verb = CTL_RESTART, .arg = "../etc"}, &r,
				 1000, err, sizeof(err)),
		-EINVAL);
	assert_string_equal(err, "invalid RESTART request: Invalid argument");
}

#define T(f) cmocka_unit_test(f)
#define D(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(reader_one_byte_writes),
		T(reader_two_frames_one_write),
		T(reader_bad_length),
		T(reader_max_frame),
		T(reader_eof),
		T(reader_blocking_fd),
		T(reader_pipe),
		T(frames_send_recv),
		T(frames_recv_timeout),
		T(frames_send_timeout),
		T(frames_send_closed),
		T(peer_credentials),
		D(call_echo_every_verb),
		D(call_refused_with_err),
		D(call_server_failures),
		D(call_timeouts),
		D(call_never_accepted),
		D(call_backlog_full),
		D(call_unreachable),
		D(call_permission_denied),
		D(call_invalid_request),
	};

	/* A server that closed on us must be an error return, never a SIGPIPE. */
	signal(SIGPIPE, SIG_DFL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
