/* SPDX-License-Identifier: MIT */
/*
 * The route ports' listeners agentd holds and hands to each injector (inject/listen.c):
 * what arrives is exactly what was sent, in its slot, and the hand-over text after it is
 * read intact; a head that names more listeners than came, a socket that is not listening
 * or another text is refused, each beside the nearest accepted case.
 */
#define _GNU_SOURCE
#include "unit.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../../inject/inject.h"

/* A listener on an ephemeral loopback port (the route ports belong to a running agentd). */
static int listener(unsigned *ret_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

static unsigned port_of(int fd)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);

	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	return ntohs(a.sin_port);
}

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void listeners_arrive_in_their_slots(void **state)
{
	int lfd[INJ_MAX_ROUTES], got[INJ_MAX_ROUTES], sv[2], c;
	unsigned port[INJ_MAX_ROUTES];
	const char *text = "ocsb-inject 3\nabc";
	char rest[64] = {0};
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

	(void)state;
	for (int i = 0; i < INJ_MAX_ROUTES; i++)
		lfd[i] = -1;
	lfd[0] = listener(&port[0]);
	lfd[5] = listener(&port[5]);
	lfd[15] = listener(&port[15]);
	pair(sv);
	assert_int_equal(inj_send_listeners(sv[0], lfd), 0);
	assert_int_equal(write(sv[0], text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(inj_recv_listeners(sv[1], got), 0);
	for (int i = 0; i < INJ_MAX_ROUTES; i++) {
		if (lfd[i] < 0) {
			assert_int_equal(got[i], -1);
			continue;
		}
		assert_true(got[i] >= 0);
		assert_int_equal(port_of(got[i]), port[i]);
		assert_true(fcntl(got[i], F_GETFD) & FD_CLOEXEC);
	}
	/* The injector accepts on what it got: a connection to slot 5's port arrives there. */
	a.sin_port = htons((uint16_t)port[5]);
	c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	int s = accept4(got[5], NULL, NULL, SOCK_CLOEXEC);
	assert_true(s >= 0);
	close(s);
	close(c);
	/* The hand-over text after the head is the daemon's, untouched. */
	assert_int_equal(read(sv[1], rest, sizeof(rest) - 1), (ssize_t)strlen(text));
	assert_string_equal(rest, text);
	for (int i = 0; i < INJ_MAX_ROUTES; i++) {
		if (lfd[i] >= 0)
			close(lfd[i]);
		if (got[i] >= 0)
			close(got[i]);
	}
	close(sv[0]);
	close(sv[1]);
}

static int recv_of(const char *head, const int *fds, size_t n)
{
	int sv[2], got[INJ_MAX_ROUTES], r;

	pair(sv);
	assert_int_equal(inj_send_fds(sv[0], head, fds, n), 0);
	r = inj_recv_listeners(sv[1], got);
	for (int i = 0; r == 0 && i < INJ_MAX_ROUTES; i++)
		if (got[i] >= 0)
			close(got[i]);
	close(sv[0]);
	close(sv[1]);
	return r;
}

static void anything_else_refused(void **state)
{
	unsigned p;
	int l = listener(&p), other[2], none[INJ_MAX_ROUTES];

	(void)state;
	pair(other);
	/* Controls: one listener for slot 0, and no listener at all. */
	assert_int_equal(recv_of("ocsb-listen 0001\n", &l, 1), 0);
	assert_int_equal(recv_of("ocsb-listen 0000\n", NULL, 0), 0);
	/* The head names two, one came; one named, none came. */
	assert_int_equal(recv_of("ocsb-listen 0003\n", &l, 1), -1);
	assert_int_equal(recv_of("ocsb-listen 0001\n", NULL, 0), -1);
	/* Not a listening socket. */
	assert_int_equal(recv_of("ocsb-listen 0001\n", &other[0], 1), -1);
	/* Another text: the routes' hand-over where the listeners belong, a bad mask. */
	assert_int_equal(recv_of("ocsb-inject 0001\n", &l, 1), -1);
	assert_int_equal(recv_of("ocsb-listen 00x1\n", &l, 1), -1);
	/* agentd gone before it sent anything. */
	{
		int sv[2];
		pair(sv);
		close(sv[0]);
		assert_int_equal(inj_recv_listeners(sv[1], none), -1);
		close(sv[1]);
	}
	close(other[0]);
	close(other[1]);
	close(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(listeners_arrive_in_their_slots),
		cmocka_unit_test(anything_else_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
