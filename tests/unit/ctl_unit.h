/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_CTL_UNIT_H
#define OCSB_TEST_CTL_UNIT_H

/*
 * For test_ctl and test_ctl_io: the includes and the small helpers both use.
 */
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "unit.h"

#include "ctl.h"
#include "util.h"

static inline long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A string of n copies of c, in one of 4 rotating buffers. */
static inline const char *rep(char c, size_t n)
{
	static char bufs[4][CTL_MAX_FRAME + 2];
	static unsigned next;
	char *b = bufs[next++ % 4];

	assert_true(n <= CTL_MAX_FRAME + 1);
	memset(b, c, n);
	b[n] = '\0';
	return b;
}

#endif
