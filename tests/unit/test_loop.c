/* SPDX-License-Identifier: MIT */
/*
 * What keeps ocsb-agentd's loop from waiting on a control client: the reply writer that
 * sends only what the socket takes (common/ctl.c) and the bounded client table with its
 * deadlines (agentd/ctlsrv.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "unit.h"

#include "../../agentd/agentd.h"
#include "ctl.h"

static const char *payload(size_t n)
{
	static char b[CTL_MAX_FRAME + 1];

	for (size_t i = 0; i < n; i++)
		b[i] = (char)('a' + i % 26);
	return b;
}

/* A blocking socket with a small send buffer: a peer that does not read fills it at once. */
static void pair(int sv[2])
{
	int small = 4096;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
}

static void writer_sends_what_the_socket_takes(void **state)
{
	struct ctl_writer w = {0};
	char *got = malloc(CTL_MAX_FRAME + 4);
	size_t have = 0;
	int sv[2], r, rounds = 0;

	(void)state;
	pair(sv);
	assert_int_equal(ctl_writer_frame(&w, payload(CTL_MAX_FRAME), CTL_MAX_FRAME), 0);
	/* The peer reads nothing: the flush returns instead of blocking (fd is blocking). */
	assert_int_equal(ctl_writer_flush(&w, sv[0]), 0);
	assert_true(w.off > 0 && w.off < w.len);
	assert_int_equal(ctl_writer_flush(&w, sv[0]), 0);
	/* As the peer reads, the rest goes, in order. */
	for (r = 0; r != 1; rounds++) {
		ssize_t n = recv(sv[1], got + have, CTL_MAX_FRAME + 4 - have, MSG_DONTWAIT);

		if (n > 0)
			have += (size_t)n;
		r = ctl_writer_flush(&w, sv[0]);
		assert_true(r == 0 || r == 1);
		assert_true(rounds < 100000);
	}
	while (have < CTL_MAX_FRAME + 4) {
		ssize_t n = recv(sv[1], got + have, CTL_MAX_FRAME + 4 - have, 0);

		assert_true(n > 0);
		have += (size_t)n;
	}
	assert_int_equal((unsigned char)got[0], 0);
	assert_int_equal((unsigned char)got[1], 1); /* 65536 = 0x00010000 */
	assert_int_equal((unsigned char)got[2], 0);
	assert_int_equal((unsigned char)got[3], 0);
	assert_memory_equal(got + 4, payload(CTL_MAX_FRAME), CTL_MAX_FRAME);
	assert_true(rounds > 1);
	ctl_writer_reset(&w);
	assert_null(w.buf);
	free(got);
	close(sv[0]);
	close(sv[1]);
}

static void writer_bounds(void **state)
{
	struct ctl_writer w = {0};

	(void)state;
	assert_int_equal(ctl_writer_frame(&w, "", 0), -EMSGSIZE);
	assert_int_equal(ctl_writer_frame(&w, payload(CTL_MAX_FRAME + 1), CTL_MAX_FRAME + 1),
		-EMSGSIZE);
	assert_null(w.buf);
	assert_int_equal(ctl_writer_frame(&w, "x\n", 2), 0);
	assert_int_equal(w.len, 6);
	/* One frame at a time: the memory of a client is bounded by one reply. */
	assert_int_equal(ctl_writer_frame(&w, "y\n", 2), -EBUSY);
	assert_int_equal(w.len, 6);
	ctl_writer_reset(&w);
	ctl_writer_reset(&w); /* twice: a no-op */
}

static void writer_peer_gone(void **state)
{
	struct ctl_writer w = {0};
	int sv[2];

	(void)state;
	pair(sv);
	close(sv[1]);
	assert_int_equal(ctl_writer_frame(&w, "x\n", 2), 0);
	/* No SIGPIPE (MSG_NOSIGNAL): an error to act on. */
	assert_int_equal(ctl_writer_flush(&w, sv[0]), -EPIPE);
	ctl_writer_reset(&w);
	close(sv[0]);
}

static void empty(struct ctl_client *v, size_t n)
{
	memset(v, 0, n * sizeof(*v));
	for (size_t i = 0; i < n; i++)
		v[i].fd = -1;
}

static void slot_free_first_then_oldest(void **state)
{
	struct ctl_client v[4];

	(void)state;
	empty(v, 4);
	assert_ptr_equal(ctlsrv_slot(v, 4), &v[0]);
	v[0].fd = 10, v[0].deadline_ms = 500;
	v[1].fd = 11, v[1].deadline_ms = 300;
	assert_ptr_equal(ctlsrv_slot(v, 4), &v[2]);
	v[2].fd = 12, v[2].deadline_ms = 700;
	v[3].fd = 13, v[3].deadline_ms = 400;
	/* Full: the client nearest its deadline (the oldest) gives way, not slot 0. */
	assert_ptr_equal(ctlsrv_slot(v, 4), &v[1]);
	v[1].fd = -1;
	assert_ptr_equal(ctlsrv_slot(v, 4), &v[1]);
}

static void next_deadline(void **state)
{
	struct ctl_client v[3];

	(void)state;
	empty(v, 3);
	assert_int_equal(ctlsrv_next_deadline(v, 3), 0);
	v[2].fd = 5, v[2].deadline_ms = 9000;
	assert_int_equal(ctlsrv_next_deadline(v, 3), 9000);
	v[0].fd = 6, v[0].deadline_ms = 7000;
	v[1].deadline_ms = 1; /* a free slot's stale value does not count */
	assert_int_equal(ctlsrv_next_deadline(v, 3), 7000);
}

/* A child that fails before its exec says at which step; a plain chroot gets the way out. */
static void start_error_names_the_step(void **state)
{
	char b[512];

	(void)state;
	child_start_error((STEP_MOUNTS << 16) | EINVAL, b, sizeof(b));
	assert_non_null(strstr(b, "cannot start: making its private mount namespace: "));
	assert_non_null(strstr(b, strerror(EINVAL)));
	assert_non_null(strstr(b, "a plain chroot is not enough"));
	child_start_error((STEP_DROP << 16) | EPERM, b, sizeof(b));
	assert_non_null(strstr(b, "cannot start: dropping to the agent's uid: "));
	assert_null(strstr(b, "chroot")); /* the hint is for that one case */
	child_start_error((STEP_EXEC << 16) | ENOENT, b, sizeof(b));
	assert_string_equal(b, "cannot start: No such file or directory");
	child_start_error((77u << 16) | ENOENT, b, sizeof(b)); /* an unknown step: no name */
	assert_string_equal(b, "cannot start: No such file or directory");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(writer_sends_what_the_socket_takes),
		cmocka_unit_test(writer_bounds),
		cmocka_unit_test(writer_peer_gone),
		cmocka_unit_test(slot_free_first_then_oldest),
		cmocka_unit_test(next_deadline),
		cmocka_unit_test(start_error_names_the_step),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
