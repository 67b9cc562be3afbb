/* SPDX-License-Identifier: MIT */
/*
 * common/sockdiag.c, against this test's own sockets: the listener that takes
 * 127.0.0.1:PORT is found with its uid and inode (IPv4 loopback and any, IPv6 any and
 * v4-mapped), one that does not take it (127.0.0.2, ::1, an IPv6-only ::) or a port
 * nobody holds is not; the uid of the other end of a loopback connection. Any account
 * may ask: this runs as nobody.
 */
#define _GNU_SOURCE
#include "unit.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "procs.h"
#include "sockdiag.h"

/* A TCP listener on addr (IPv4 or IPv6 text), port 0: the kernel's choice. -1: no IPv6 here. */
static int listen_on(const char *addr, int v6only, unsigned *ret_port)
{
	struct sockaddr_storage ss = {0};
	struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
	socklen_t sl;
	int v6 = strchr(addr, ':') != NULL, fd;

	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 && v6)
		return -1;
	assert_true(fd >= 0);
	if (v6) {
		a6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, addr, &a6->sin6_addr), 1);
		assert_int_equal(
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only)), 0);
		sl = sizeof(*a6);
	} else {
		a4->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, addr, &a4->sin_addr), 1);
		sl = sizeof(*a4);
	}
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0 && v6) {
		close(fd); /* ::1 or IPv6 itself missing in this network namespace */
		return -1;
	}
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&ss, &sl), 0);
	*ret_port = ntohs(v6 ? a6->sin6_port : a4->sin_port);
	return fd;
}

/* A port nothing holds right now: one the kernel gave out, closed again. */
static unsigned free_port(void)
{
	unsigned port;
	int fd = listen_on("127.0.0.1", 0, &port);

	close(fd);
	return port;
}

static void expect_found(int fd, unsigned port)
{
	struct sockdiag_sock s = {(uid_t)-1, 0};
	struct stat st;

	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(sockdiag_listener(-1, port, &s), 0);
	assert_int_equal(s.uid, geteuid());
	assert_int_equal(s.inode, (unsigned long)st.st_ino);
}

static void listener_on_loopback_and_any(void **state)
{
	const char *addrs[] = {"127.0.0.1", "0.0.0.0"};
	unsigned port;

	(void)state;
	for (size_t i = 0; i < 2; i++) {
		int fd = listen_on(addrs[i], 0, &port), nl = sockdiag_open();
		struct sockdiag_sock s;

		expect_found(fd, port);
		/* On a kept socket, twice: the second answer is the second question's. */
		assert_true(nl >= 0);
		assert_int_equal(sockdiag_listener(nl, port, &s), 0);
		assert_int_equal(sockdiag_listener(nl, port, &s), 0);
		assert_int_equal(s.uid, geteuid());
		close(nl);
		close(fd);
	}
}

static void listener_ipv6_taking_ipv4(void **state)
{
	unsigned port;
	int fd;

	(void)state;
	fd = listen_on("::", 0, &port);
	if (fd < 0)
		skip();
	expect_found(fd, port);
	close(fd);
	fd = listen_on("::ffff:127.0.0.1", 0, &port);
	assert_true(fd >= 0);
	expect_found(fd, port);
	close(fd);
}

/* Listening, but not where a client of 127.0.0.1 arrives; and a port nobody holds. */
static void not_found(void **state)
{
	struct sockdiag_sock s = {(uid_t)-1, 0};
	unsigned port;
	int fd;

	(void)state;
	assert_int_equal(sockdiag_listener(-1, free_port(), &s), -ENOENT);
	assert_int_equal(s.uid, (uid_t)-1); /* untouched */
	fd = listen_on("127.0.0.2", 0, &port);
	assert_int_equal(sockdiag_listener(-1, port, &s), -ENOENT);
	close(fd);
	fd = listen_on("::", 1, &port);
	if (fd >= 0) {
		assert_int_equal(sockdiag_listener(-1, port, &s), -ENOENT);
		close(fd);
	}
	fd = listen_on("::1", 0, &port);
	if (fd >= 0) {
		assert_int_equal(sockdiag_listener(-1, port, &s), -ENOENT);
		close(fd);
	}
	assert_int_equal(sockdiag_listener(-1, 0, &s), -EINVAL);
}

/* A connected socket on the port is no listener: only the listening one counts. */
static void connections_are_not_listeners(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	struct sockdiag_sock s;
	unsigned port;
	int l = listen_on("127.0.0.1", 0, &port), c, acc;

	(void)state;
	a.sin_port = htons((uint16_t)port);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	acc = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(acc >= 0);
	close(l);
	/* The accepted socket has the port as its source, but it does not listen. */
	assert_int_equal(sockdiag_listener(-1, port, &s), -ENOENT);
	close(acc);
	close(c);
}

/*
 * procs_port_owner_is takes a process's sockets (pidfd_getfd) and asks each: this one
 * holds it, a child that does not (it closed its copy) does not.
 */
static void port_owner_by_inode(void **state)
{
	unsigned port;
	int fd = listen_on("127.0.0.1", 0, &port), p[2];
	pid_t child;
	char c;

	(void)state;
	assert_int_equal(procs_port_owner_is(getpid(), port), 1);
	assert_int_equal(procs_port_holder(port, getpid()), 1);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		close(fd);
		close(p[0]);
		c = 'r';
		if (write(p[1], &c, 1) != 1)
			_exit(1);
		alarm(30);
		pause();
		_exit(0);
	}
	close(p[1]);
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(procs_port_owner_is(child, port), 0);
	assert_int_equal(procs_port_holder(port, child), -EADDRINUSE);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(p[0]);
	close(fd);
	assert_int_equal(procs_port_owner_is(getpid(), port), 0);
	assert_int_equal(procs_port_holder(port, getpid()), 0);
}

/*
 * Who connected (ocsb-inject's second wall): the uid of the connecting socket, this
 * test's own here; a descriptor that is no TCP connection is not answered for.
 */
static void peer_uid_of_a_loopback_connection(void **state)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	unsigned port;
	int l = listen_on("127.0.0.1", 0, &port), c, s, nl, sp[2];
	uid_t uid = (uid_t)-1;

	(void)state;
	a.sin_port = htons((uint16_t)port);
	nl = sockdiag_open();
	assert_true(nl >= 0);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	assert_int_equal(sockdiag_peer_uid(nl, s, &uid), 0);
	assert_int_equal(uid, geteuid());
	/* Twice on the same netlink socket: the second answer is the second question's. */
	uid = (uid_t)-1;
	assert_int_equal(sockdiag_peer_uid(nl, s, &uid), 0);
	assert_int_equal(uid, geteuid());
	/* A socket of its own for one call. */
	uid = (uid_t)-1;
	assert_int_equal(sockdiag_peer_uid(-1, s, &uid), 0);
	assert_int_equal(uid, geteuid());
	/* No TCP connection: nothing to ask. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	assert_int_equal(sockdiag_peer_uid(nl, sp[0], &uid), -EAFNOSUPPORT);
	close(sp[0]);
	close(sp[1]);
	close(c);
	close(s);
	close(l);
	close(nl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(listener_on_loopback_and_any),
		cmocka_unit_test(listener_ipv6_taking_ipv4),
		cmocka_unit_test(not_found),
		cmocka_unit_test(connections_are_not_listeners),
		cmocka_unit_test(port_owner_by_inode),
		cmocka_unit_test(peer_uid_of_a_loopback_connection),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
