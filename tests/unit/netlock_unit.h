/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_NETLOCK_UNIT_H
#define OCSB_TEST_NETLOCK_UNIT_H

/*
 * For test_netlock and test_priv_netlock: the includes, the tools' paths and the helpers
 * of the checks that run in a child (LCHECK in the child, child_report in the test).
 */
#include <arpa/inet.h>
#include <grp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>

#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>

#include "unit.h"

#include "netlock.h"
#include "spawn.h"
#include "util.h"

#define UNSHARE "/usr/bin/unshare"
#define NFT "/usr/sbin/nft"
#define IP "/usr/sbin/ip"

static inline double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* In the child: report the first failed check and stop. */
#define LCHECK(outfd, cond, ...)                                                 \
	do {                                                                     \
		if (!(cond)) {                                                   \
			dprintf((outfd), "FAIL line %d: %s: ", __LINE__, #cond); \
			dprintf((outfd), __VA_ARGS__);                           \
			dprintf((outfd), "\n");                                  \
			return 1;                                                \
		}                                                                \
	} while (0)

/* Print the child's "# " lines; fail with its FAIL line; skip on SKIP. */
static inline void child_report(const struct spawn_result *r, const char *what)
{
	const char *fail = r->output ? strstr(r->output, "FAIL ") : NULL;
	const char *skipped = r->output ? strstr(r->output, "SKIP ") : NULL;

	for (const char *l = r->output; l && *l;) {
		const char *nl = strchr(l, '\n');
		int len = nl ? (int)(nl - l) : (int)strlen(l);

		if (l[0] == '#')
			printf("%.*s\n", len, l);
		l = nl ? nl + 1 : NULL;
	}
	if (r->status == 2 && skipped) {
		printf("# skip: %s: %s", what, skipped + 5);
		skip();
	}
	if (r->status != 0 || fail)
		fail_msg("%s: status %d%s\n%s", what, r->status, r->timed_out ? " (timed out)" : "",
			r->output ? r->output : "");
}

#endif
