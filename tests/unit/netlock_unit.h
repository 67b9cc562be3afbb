/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_NETLOCK_UNIT_H
#define OCSB_TEST_NETLOCK_UNIT_H

/*
 * For test_netlock, test_netlock_live and test_priv_netlock: the includes, the tools'
 * paths and the helpers of the checks that run in a child (LCHECK in the child,
 * child_report in the test).
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

/* Specs both test_netlock and test_netlock_live render and apply. */
static const struct netlock_spec spec_all __attribute__((unused)) = {
	.uid = 65534, .proxy_port = 65535, .ports_lo = 1, .ports_hi = 65535, .dns_allow = 1};
static const struct netlock_spec spec_injector __attribute__((unused)) = {.uid = 1000,
	.proxy_port = 3128,
	.inject_ports = {18400, 18401},
	.n_inject = 2,
	.inject_uid = 995,
	.inject_uports = {8443, 443, 443},
	.n_uports = 3,
	.ns = {{AF_INET, {127, 0, 0, 53}}, {AF_INET6, {[15] = 1}}},
	.n_ns = 2};

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

/* ---- for the live layers, in a private user+net namespace ---- */

static inline int write_proc(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Become root of a new user namespace owning a new network namespace. */
static inline int enter_userns_netns(int outfd)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	char map[64];

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
		dprintf(outfd, "SKIP unshare(CLONE_NEWUSER|CLONE_NEWNET): %s\n", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (write_proc("/proc/self/setgroups", "deny") < 0 ||
		write_proc("/proc/self/uid_map", map) < 0) {
		dprintf(outfd, "SKIP uid_map: %s\n", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)gid);
	if (write_proc("/proc/self/gid_map", map) < 0) {
		dprintf(outfd, "SKIP gid_map: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The most rules a spec can have: every agent with a range over the route ports, every
 * route, each route's own upstream port, three nameservers; SPEC_MAX_RULES of them (20 +
 * 2 * NETLOCK_MAX_INJECT + 2 * NETLOCK_MAX_NS + 2 * (NETLOCK_MAX_AGENTS + 1), see
 * netlock_int.h).
 */
#define SPEC_MAX_RULES \
	(20 + 2 * NETLOCK_MAX_INJECT + 2 * NETLOCK_MAX_NS + 2 * (NETLOCK_MAX_AGENTS + 1))
static inline void spec_max(struct netlock_spec *s)
{
	memset(s, 0, sizeof(*s));
	s->uid = 1000;
	s->ports_lo = 18000;
	s->ports_hi = 18999;
	for (size_t i = 0; i < NETLOCK_MAX_AGENTS; i++) {
		s->others[i] = (uid_t)(2000 + i);
		s->others_ports[i] = (struct netlock_range){18000 + (unsigned)i, 18999};
	}
	s->n_others = NETLOCK_MAX_AGENTS;
	for (size_t i = 0; i < NETLOCK_MAX_INJECT; i++) {
		s->inject_ports[i] = 18400 + (unsigned)i;
		s->inject_uports[i] = 8400 + (unsigned)i;
	}
	s->n_inject = s->n_uports = NETLOCK_MAX_INJECT;
	s->proxy_port = 3128;
	s->proxy_uid = 13;
	s->dns_allow = 1;
	s->inject_uid = 995;
	for (size_t i = 0; i < NETLOCK_MAX_NS; i++) {
		s->ns[i].family = i == 2 ? AF_INET6 : AF_INET;
		inet_pton(s->ns[i].family,
			i == 0		 ? "127.0.0.53"
				: i == 1 ? "10.0.0.2"
					 : "::1",
			s->ns[i].a);
	}
	s->n_ns = NETLOCK_MAX_NS;
}

/* nft with these arguments, in the current namespaces; its exit status, output in out. */
static inline int run_nft(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
	char *out, size_t n)
{
	const char *argv[] = {NFT, a1, a2, a3, a4, a5, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 10000};
	struct spawn_result r;

	if (spawn_run(argv, &o, &r) < 0)
		return -1;
	if (out)
		snprintf(out, n, "%s", r.output ? r.output : "");
	spawn_result_free(&r);
	return r.status;
}

#endif
