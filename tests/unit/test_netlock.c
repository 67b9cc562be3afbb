/* SPDX-License-Identifier: MIT */
/*
 * The netlock table. Four layers:
 * - rendering (pure);
 * - oracle: nft itself compiles our nft text and must send exactly the
 *   expressions netlock builds (`unshare -rn nft --debug=netlink -c -f`);
 * - live: apply / verify / remove inside a private user+net namespace, so the
 *   host never sees table ocsb;
 * - behaviour (root only): in a private net namespace, sockets of uid 65534
 *   reach the proxy port and nothing else local, while root and uid 65533 are
 *   unaffected. tests/run-unit.sh runs this binary as nobody, where it skips:
 *   run the binary as root to exercise it.
 */
#define _GNU_SOURCE
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

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const struct netlock_spec spec_proxy = {.uid = 1000, .proxy_port = 3128};
static const struct netlock_spec spec_range = {
	.uid = 1000, .proxy_port = 3128, .ports_lo = 8000, .ports_hi = 8100};
static const struct netlock_spec spec_dns = {.uid = 4242, .proxy_port = 8080, .dns_allow = 1};
static const struct netlock_spec spec_off = {.uid = 1000};
static const struct netlock_spec spec_all = {
	.uid = 65534, .proxy_port = 65535, .ports_lo = 1, .ports_hi = 65535, .dns_allow = 1};
static const struct netlock_spec spec_squid = {.uid = 1000, .proxy_port = 3128, .proxy_uid = 13};
static const struct netlock_spec spec_one_port = {
	.uid = 1000, .proxy_port = 3128, .ports_lo = 8000, .ports_hi = 8000};

/* The rule lines of render_nft's text, in order, one per line, tabs stripped. */
static char *rules_of(const struct netlock_spec *s)
{
	struct buf b = {0}, out = {0};

	assert_int_equal(netlock_render_nft(s, &b), 0);
	for (char *l = b.data; l && *l;) {
		char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		size_t skip = strspn(l, "\t");

		if (skip == 2 && strncmp(l + 2, "type ", 5) != 0) {
			assert_int_equal(buf_append(&out, l + skip, len - skip), 0);
			assert_int_equal(buf_puts(&out, "\n"), 0);
		}
		l = nl ? nl + 1 : NULL;
	}
	buf_free(&b);
	return out.data;
}

/* ---- rendering ---- */

static void render_proxy_only(void **state)
{
	char *r = rules_of(&spec_proxy);

	assert_string_equal(r,
		"meta skuid 1000 jump agent\n"
		"ct direction reply ct state established,related accept\n"
		"ip daddr 127.0.0.1 tcp dport 3128 accept\n"
		"fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"fib daddr type local reject with icmpx admin-prohibited\n"
		"meta l4proto tcp reject with tcp reset\n"
		"reject with icmpx admin-prohibited\n");
	free(r);
}

static void render_full(void **state)
{
	struct buf b = {0};
	char *r = rules_of(&spec_all);

	/* DNS comes after the local rejects: a resolver on a local address stays closed. */
	assert_string_equal(r,
		"meta skuid 65534 jump agent\n"
		"ct direction reply ct state established,related accept\n"
		"ip daddr 127.0.0.1 tcp dport 65535 accept\n"
		"fib daddr type local tcp dport 1-65535 accept\n"
		"fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"fib daddr type local reject with icmpx admin-prohibited\n"
		"udp dport 53 accept\n"
		"tcp dport 53 accept\n"
		"meta l4proto tcp reject with tcp reset\n"
		"reject with icmpx admin-prohibited\n");
	free(r);
	assert_int_equal(netlock_render_nft(&spec_all, &b), 0);
	assert_has_line(b.data, "table inet ocsb {");
	assert_has_line(b.data, "chain output {");
	assert_has_line(b.data, "type filter hook output priority 0; policy accept;");
	assert_has_line(b.data, "chain agent {");
	buf_free(&b);
}

/* The proxy's own new TCP connections to local addresses are refused, its replies pass. */
static void render_proxy_uid(void **state)
{
	char *r = rules_of(&spec_squid);

	assert_string_equal(r,
		"meta skuid 1000 jump agent\n"
		"meta skuid 13 ct direction reply accept\n"
		"meta skuid 13 fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"ct direction reply ct state established,related accept\n"
		"ip daddr 127.0.0.1 tcp dport 3128 accept\n"
		"fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"fib daddr type local reject with icmpx admin-prohibited\n"
		"meta l4proto tcp reject with tcp reset\n"
		"reject with icmpx admin-prohibited\n");
	free(r);
	/* The agent's own uid as the proxy's would open nothing, so it adds no rule. */
	{
		struct netlock_spec same = spec_proxy;

		same.proxy_uid = same.uid;
		r = rules_of(&same);
		assert_null(strstr(r, "ct direction reply accept\n"));
		free(r);
	}
}

static void render_egress_off(void **state)
{
	char *r = rules_of(&spec_off);

	assert_null(strstr(r, "127.0.0.1"));
	assert_null(strstr(r, "dport"));
	assert_non_null(strstr(r, "fib daddr type local reject with icmpx admin-prohibited\n"));
	free(r);
}

static void render_invalid(void **state)
{
	static const struct netlock_spec bad[] = {
		{.uid = 0, .proxy_port = 3128},
		{.uid = (uid_t)-1, .proxy_port = 3128},
		{.uid = 1000, .proxy_port = 65536},
		{.uid = 1000, .proxy_port = 3128, .ports_lo = 9000, .ports_hi = 8000},
		{.uid = 1000, .proxy_port = 3128, .ports_lo = 0, .ports_hi = 8000},
		{.uid = 1000, .proxy_port = 3128, .ports_lo = 8000, .ports_hi = 0},
		{.uid = 1000, .proxy_port = 3128, .ports_lo = 8000, .ports_hi = 65536},
	};
	char err[256];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct buf b = {0};

		assert_int_equal(netlock_render_nft(&bad[i], &b), -EINVAL);
		assert_int_equal(netlock_render_expr(&bad[i], &b), -EINVAL);
		buf_free(&b);
		/* Refused before any netlink traffic: safe to call here. */
		assert_int_equal(netlock_apply(&bad[i], err, sizeof(err)), -1);
		assert_err_prefix(err, "netlock: invalid spec");
		assert_int_equal(netlock_verify(&bad[i], err, sizeof(err)), -1);
		assert_err_prefix(err, "netlock: invalid spec");
	}
	assert_int_equal(netlock_render_nft(NULL, &(struct buf){0}), -EINVAL);
}

/* nft 1.0.6's and nft 1.1's port range (two cmp, one range) compare equal; nothing else. */
static void exprs_canon_ranges(void **state)
{
	static const struct {
		const char *in, *want;
	} c[] = {
		/* nft 1.0.6 (Debian 12) -> nft 1.1's form (Debian 13), which stays. */
		{"  [ payload load 2b @ transport header + 2 => reg 1 ]\n"
		 "  [ cmp gte reg 1 0x00000100 ]\n  [ cmp lte reg 1 0x0000ffff ]\n"
		 "  [ immediate reg 0 accept ]\n",
			"  [ payload load 2b @ transport header + 2 => reg 1 ]\n"
			"  [ range eq reg 1 0x00000100 0x0000ffff ]\n"
			"  [ immediate reg 0 accept ]\n"},
		{"  [ range eq reg 1 0x00000100 0x0000ffff ]\n",
			"  [ range eq reg 1 0x00000100 0x0000ffff ]\n"},
		/* One port: nft 1.1 sends a plain comparison. */
		{"  [ cmp gte reg 1 0x0000401f ]\n  [ cmp lte reg 1 0x0000401f ]\n",
			"  [ cmp eq reg 1 0x0000401f ]\n"},
		/* At the end of the text, without the last newline. */
		{"  [ cmp gte reg 1 0x00000100 ]\n  [ cmp lte reg 1 0x0000ffff ]",
			"  [ range eq reg 1 0x00000100 0x0000ffff ]"},
		/* Not a range: two registers, the other order, not adjacent, other widths. */
		{"  [ cmp gte reg 1 0x00000100 ]\n  [ cmp lte reg 2 0x0000ffff ]\n",
			"  [ cmp gte reg 1 0x00000100 ]\n  [ cmp lte reg 2 0x0000ffff ]\n"},
		{"  [ cmp lte reg 1 0x0000ffff ]\n  [ cmp gte reg 1 0x00000100 ]\n",
			"  [ cmp lte reg 1 0x0000ffff ]\n  [ cmp gte reg 1 0x00000100 ]\n"},
		{"  [ cmp gte reg 1 0x00000100 ]\n  [ immediate reg 0 accept ]\n"
		 "  [ cmp lte reg 1 0x0000ffff ]\n",
			"  [ cmp gte reg 1 0x00000100 ]\n  [ immediate reg 0 accept ]\n"
			"  [ cmp lte reg 1 0x0000ffff ]\n"},
		{"  [ cmp gte reg 1 0x00000100 0x00000000 ]\n  [ cmp lte reg 1 0x0000ffff ]\n",
			"  [ cmp gte reg 1 0x00000100 0x00000000 ]\n  [ cmp lte reg 1 0x0000ffff "
			"]\n"},
		{"  [ cmp gte reg 1 0x0100 ]\n  [ cmp lte reg 1 0x0000ffff ]\n",
			"  [ cmp gte reg 1 0x0100 ]\n  [ cmp lte reg 1 0x0000ffff ]\n"},
		{"", ""},
	};

	for (size_t i = 0; i < ARRAY_SIZE(c); i++) {
		char *t = strdup(c[i].in);

		assert_non_null(t);
		netlock_exprs_canon(t);
		assert_string_equal(t, c[i].want);
		free(t);
	}
}

/* ---- without CAP_NET_ADMIN (in the test's own namespace, as nobody) ---- */

static int fn_unprivileged(void *arg, int outfd)
{
	char err[256];
	int r;

	(void)arg;
	/* Only meaningful without privilege: never risk the host's ruleset. */
	if (geteuid() == 0)
		return 3;
	r = netlock_exists();
	dprintf(outfd, "exists %d\n", r);
	r = netlock_apply(&spec_proxy, err, sizeof(err));
	dprintf(outfd, "apply %d %s\n", r, err);
	r = netlock_verify(&spec_proxy, err, sizeof(err));
	dprintf(outfd, "verify %d %s\n", r, err);
	r = netlock_remove(err, sizeof(err));
	dprintf(outfd, "remove %d %s\n", r, err);
	return 0;
}

/*
 * A slow machine (a Debian 12 guest under emulation): sending the batch took longer than
 * the whole answer budget because the kernel loaded the nf_tables modules meanwhile. The
 * answer queued by then is an answer, not a timeout.
 */
static void answer_after_deadline(void **state)
{
	char buf[8192];
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	struct nlmsghdr *h;
	struct rtgenmsg *g;
	long before;

	(void)state;
	assert_non_null(nl);
	assert_int_equal(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = RTM_GETLINK;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	h->nlmsg_seq = 1;
	g = mnl_nlmsg_put_extra_header(h, sizeof(*g));
	g->rtgen_family = AF_UNSPEC;
	before = netlock_now_ms();
	assert_true(mnl_socket_sendto(nl, h, h->nlmsg_len) >= 0);
	/* The kernel answers in the sender's context: the dump is queued already. */
	assert_int_equal(netlock_wait(nl, before - 1), 0);
	mnl_socket_close(nl);
}

static void unprivileged_errors(void **state)
{
	struct spawn_opts o = {.drop = geteuid() == 0, .uid = 65534, .gid = 65534};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_unprivileged, NULL, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_has_line(r.output, "exists -1");
	assert_has_line(
		r.output, "apply -1 netlock: Operation not permitted: needs root (CAP_NET_ADMIN)");
	assert_has_line(r.output,
		"verify -1 netlock: reading table inet ocsb: Operation not "
		"permitted: needs root (CAP_NET_ADMIN)");
	assert_has_line(
		r.output, "remove -1 netlock: Operation not permitted: needs root (CAP_NET_ADMIN)");
	spawn_result_free(&r);
}

/* ---- oracle: nft's own encoding ---- */

/*
 * `nft --debug=netlink` and render_expr as "chain\n  [ expr ]\n...\n\n"
 * blocks: a header "inet ocsb <chain>[ handle...]" starts a block, expression
 * lines follow; nft's lines for the table and chains ("inet (null) ..." in nft
 * 1.0.6, "inet ocsb <chain> use 0" in nft 1.1) and blocks without expressions
 * are left out: a header is written only when an expression line follows it.
 */
static char *expr_blocks(const char *text)
{
	struct buf out = {0};
	char chain[64] = "";
	int in_block = 0, header = 0;

	assert_int_equal(buf_puts(&out, ""), 0);
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		char line[1024];

		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		while (len && (line[len - 1] == ' ' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if (strncmp(line, "inet ocsb ", 10) == 0) {
			if (in_block && header)
				assert_int_equal(buf_puts(&out, "\n"), 0);
			assert_int_equal(sscanf(line + 10, "%63s", chain), 1);
			in_block = 1;
			header = 0;
		} else if (in_block && strncmp(line, "  [ ", 4) == 0) {
			if (!header)
				assert_int_equal(buf_printf(&out, "%s\n", chain), 0);
			header = 1;
			assert_int_equal(buf_printf(&out, "%s\n", line), 0);
		} else if (len == 0 && in_block) {
			if (header)
				assert_int_equal(buf_puts(&out, "\n"), 0);
			in_block = header = 0;
		}
		l = nl ? nl + 1 : NULL;
	}
	if (in_block && header)
		assert_int_equal(buf_puts(&out, "\n"), 0);
	return out.data;
}

static size_t count_blocks(const char *blocks)
{
	size_t n = 0;

	for (const char *p = blocks; (p = strstr(p, "\n\n")); p += 2)
		n++;
	return n;
}

/* Can this process make a user+net namespace? NULL, or why not. */
static const char *userns_unavailable(void)
{
	static char why[512];
	const char *argv[] = {UNSHARE, "-rn", "/bin/true", NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 10000};
	struct spawn_result r;
	int rc;

	if (access(NFT, X_OK) < 0)
		return NFT " is not installed";
	rc = spawn_run(argv, &o, &r);
	if (rc < 0) {
		snprintf(why, sizeof(why), UNSHARE ": %s", strerror(-rc));
		return why;
	}
	if (r.status != 0) {
		snprintf(why, sizeof(why), "unshare -rn: %s", r.output);
		why[strcspn(why, "\n")] = '\0';
		spawn_result_free(&r);
		return why;
	}
	spawn_result_free(&r);
	return NULL;
}

static void oracle_one(const struct netlock_spec *s, size_t want_rules)
{
	const char *file = unit_path("netlock.nft");
	const char *argv[] = {UNSHARE, "-rn", NFT, "--debug=netlink", "-c", "-f", file, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 20000};
	struct buf text = {0}, expr = {0};
	struct spawn_result r;
	char *want, *have;

	assert_int_equal(netlock_render_nft(s, &text), 0);
	unit_write(file, text.data, text.len, 0644);
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	if (r.status != 0)
		fail_msg("nft -c refused our text (status %d):\n%s\n%s", r.status, r.output,
			text.data);
	assert_int_equal(netlock_render_expr(s, &expr), 0);
	/* Port ranges in one form: nft 1.0.6 and 1.1 encode them differently (netlock.h). */
	netlock_exprs_canon(r.output);
	netlock_exprs_canon(expr.data);
	want = expr_blocks(r.output);
	have = expr_blocks(expr.data);
	assert_int_equal(count_blocks(want), want_rules);
	/* Every expression line of every rule, in order. */
	assert_string_equal(have, want);
	free(want);
	free(have);
	spawn_result_free(&r);
	buf_free(&text);
	buf_free(&expr);
}

static void oracle_nft_encoding(void **state)
{
	const char *why = userns_unavailable();

	if (why) {
		printf("# skip: no user namespace for nft: %s\n", why);
		skip();
	}
	oracle_one(&spec_proxy, 7);
	oracle_one(&spec_range, 8);
	oracle_one(&spec_dns, 9);
	oracle_one(&spec_off, 6);
	oracle_one(&spec_all, 10);
	oracle_one(&spec_one_port, 8);
	oracle_one(&spec_squid, 9);
}

/* ---- live, in a private user+net namespace ---- */

static int write_proc(const char *path, const char *text)
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
static int enter_userns_netns(int outfd)
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

/* nft with these arguments, in the current namespaces; its exit status, output in out. */
static int run_nft(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int fn_live(void *arg, int outfd)
{
	const char *nftfile = arg;
	const struct netlock_spec *s = &spec_all;
	char err[1024], out[4096];
	double t, apply_ms[20], first_ms, verify_ms;
	int r;

	if (enter_userns_netns(outfd) < 0)
		return 2;
	LCHECK(outfd, netlock_exists() == 0, "fresh namespace");
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd, r == 1 && strcmp(err, "netlock: table inet ocsb missing") == 0, "%d %s", r,
		err);

	t = now_ms();
	r = netlock_apply(s, err, sizeof(err));
	first_ms = now_ms() - t;
	LCHECK(outfd, r == 0, "%s", err);
	LCHECK(outfd, netlock_exists() == 1, "after apply");
	t = now_ms();
	r = netlock_verify(s, err, sizeof(err));
	verify_ms = now_ms() - t;
	LCHECK(outfd, r == 0, "%d %s", r, err);

	/* Idempotent: one table however often it is applied. */
	for (size_t i = 0; i < ARRAY_SIZE(apply_ms); i++) {
		t = now_ms();
		r = netlock_apply(s, err, sizeof(err));
		apply_ms[i] = now_ms() - t;
		LCHECK(outfd, r == 0, "apply %zu: %s", i, err);
	}
	qsort(apply_ms, ARRAY_SIZE(apply_ms), sizeof(double), cmp_double);
	dprintf(outfd,
		"# netlock_apply: first %.2f ms, then median %.2f ms, max %.2f ms; "
		"netlock_verify %.2f ms\n",
		first_ms, apply_ms[ARRAY_SIZE(apply_ms) / 2], apply_ms[ARRAY_SIZE(apply_ms) - 1],
		verify_ms);
	LCHECK(outfd, apply_ms[ARRAY_SIZE(apply_ms) / 2] < 50, "apply is slow");
	LCHECK(outfd, run_nft("list", "tables", NULL, NULL, NULL, out, sizeof(out)) == 0, "%s",
		out);
	LCHECK(outfd, strcmp(out, "table inet ocsb\n") == 0, "%s", out);
	LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "%s", err);

	/* Every kind of hand edit is noticed, named, and repaired by apply. */
	LCHECK(outfd, run_nft("add", "rule", "inet ocsb agent", "accept", NULL, out, 4096) == 0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strcmp(err,
				"netlock: chain agent has an extra rule 10: "
				"[ immediate reg 0 accept ]") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "%s", err);

	LCHECK(outfd, run_nft("flush", "chain", "inet ocsb agent", NULL, NULL, out, 4096) == 0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strcmp(err,
				"netlock: chain agent rule 1 missing: want \"ct direction "
				"reply ct state established,related accept\"") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);

	LCHECK(outfd,
		run_nft("insert", "rule", "inet ocsb agent", "tcp dport 22 accept", NULL, out,
			4096) == 0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strstr(err,
				"netlock: chain agent rule 1 differs: want \"ct direction reply "
				"ct state established,related accept\" [ ct load direction => "
				"reg 1 ] [ cmp eq reg 1 0x00000001 ] [ ct load state => reg 1 ]") ==
				err &&
			strstr(err,
				"have [ meta load l4proto => reg 1 ] [ cmp eq reg 1 "
				"0x00000006 ] [ payload load 2b @ transport header + 2 => "
				"reg 1 ] [ cmp eq reg 1 0x00001600 ] [ immediate reg 0 "
				"accept ]"),
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);

	LCHECK(outfd,
		run_nft("add", "rule", "inet ocsb output", "meta skuid 1 accept", NULL, out,
			4096) == 0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "chain output has an extra rule 2: "), "%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);

	LCHECK(outfd,
		run_nft("add", "chain", "inet ocsb output", "{ policy drop; }", NULL, out, 4096) ==
			0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strcmp(err,
				"netlock: chain output differs: want type filter hook "
				"output priority 0 policy accept, have type filter hook "
				"output priority 0 policy drop") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);

	/* A dormant table is present and complete but filters nothing. */
	LCHECK(outfd,
		run_nft("add", "table", "inet ocsb", "{ flags dormant; }", NULL, out, 4096) == 0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strcmp(err,
				"netlock: table inet ocsb has flags 0x1 (dormant), "
				"want none") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "%s", err);

	LCHECK(outfd, run_nft("add", "chain", "inet ocsb extra", NULL, NULL, out, 4096) == 0, "%s",
		out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: unexpected chain extra in table inet ocsb") == 0,
		"%d %s", r, err);

	/* A table of the same name shaped otherwise is replaced whole. */
	LCHECK(outfd, run_nft("delete", "table", "inet ocsb", NULL, NULL, out, 4096) == 0, "%s",
		out);
	LCHECK(outfd,
		run_nft("add", "chain", "inet ocsb agent",
			"{ type filter hook input priority -10; }", NULL, out, 4096) != 0,
		"chain without table");
	LCHECK(outfd, run_nft("add", "table", "inet ocsb", NULL, NULL, out, 4096) == 0, "%s", out);
	LCHECK(outfd,
		run_nft("add", "chain", "inet ocsb agent",
			"{ type filter hook input priority -10; }", NULL, out, 4096) == 0,
		"%s", out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: chain output missing in table inet ocsb") == 0,
		"%d %s", r, err);
	LCHECK(outfd, run_nft("add", "chain", "inet ocsb output", NULL, NULL, out, 4096) == 0, "%s",
		out);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strcmp(err,
				"netlock: chain output differs: want a base chain (hook "
				"output), have a regular chain") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "%s", err);

	/* Another spec is a difference too (DNS switched off: rule 6 is no longer udp 53). */
	r = netlock_verify(
		&(struct netlock_spec){
			.uid = 65534, .proxy_port = 65535, .ports_lo = 1, .ports_hi = 65535},
		err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "chain agent rule 6 differs: want \"meta l4proto tcp "),
		"%d %s", r, err);
	r = netlock_verify(&(struct netlock_spec){.uid = 65533,
				   .proxy_port = 65535,
				   .ports_lo = 1,
				   .ports_hi = 65535,
				   .dns_allow = 1},
		err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strstr(err, "chain output rule 1 differs: want \"meta skuid 65533 "),
		"%d %s", r, err);

	/* The nft text is the same table: nft -f of it verifies. */
	LCHECK(outfd, netlock_remove(err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, run_nft("-f", nftfile, NULL, NULL, NULL, out, 4096) == 0, "%s", out);
	LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "nft -f: %s", err);

	/* Remove, then remove again: both fine; the table is gone. */
	LCHECK(outfd, netlock_remove(err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_exists() == 0, "after remove");
	LCHECK(outfd, netlock_remove(err, sizeof(err)) == 0, "%s", err);
	r = netlock_verify(s, err, sizeof(err));
	LCHECK(outfd, r == 1 && strcmp(err, "netlock: table inet ocsb missing") == 0, "%d %s", r,
		err);
	LCHECK(outfd, run_nft("list", "tables", NULL, NULL, NULL, out, sizeof(out)) == 0, "%s",
		out);
	LCHECK(outfd, strcmp(out, "") == 0, "%s", out);

	/* The guard: owned by one socket, left alone by `nft flush ruleset`. */
	{
		struct mnl_socket *owner = mnl_socket_open(NETLINK_NETFILTER);

		LCHECK(outfd, owner && mnl_socket_bind(owner, 0, MNL_SOCKET_AUTOPID) == 0,
			"socket");
		r = netlock_guard_verify(s, err, sizeof(err));
		LCHECK(outfd, r == 1 && strstr(err, "table inet ocsb_guard missing"), "%d %s", r,
			err);
		LCHECK(outfd, netlock_guard_apply(s, owner, err, sizeof(err)) == 0, "%s", err);
		r = netlock_guard_verify(s, err, sizeof(err));
		LCHECK(outfd, r == 0, "guard verify: %d %s", r, err);
		LCHECK(outfd, netlock_guard_apply(s, owner, err, sizeof(err)) == 0, "again: %s",
			err);
		LCHECK(outfd, netlock_apply(s, err, sizeof(err)) == 0, "%s", err);
		LCHECK(outfd, run_nft("flush", "ruleset", NULL, NULL, NULL, out, sizeof(out)) == 0,
			"%s", out);
		LCHECK(outfd, netlock_exists() == 0, "the plain table goes with a flush");
		r = netlock_guard_verify(s, err, sizeof(err));
		LCHECK(outfd, r == 0, "the guard survives a flush: %d %s", r, err);
		LCHECK(outfd,
			run_nft("delete", "table", "inet", "ocsb_guard", NULL, out, sizeof(out)) !=
				0,
			"another process deleted the guard");
		LCHECK(outfd, netlock_guard_verify(s, err, sizeof(err)) == 0, "%s", err);
		mnl_socket_close(owner);
		r = netlock_guard_verify(s, err, sizeof(err));
		LCHECK(outfd, r == 1, "the guard goes with its socket: %d %s", r, err);
	}
	return 0;
}

/* Print the child's "# " lines; fail with its FAIL line; skip on SKIP. */
static void child_report(const struct spawn_result *r, const char *what)
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

static void live_apply_verify_remove(void **state)
{
	const char *file = unit_path("netlock-live.nft");
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;
	struct buf text = {0};

	assert_int_equal(netlock_render_nft(&spec_all, &text), 0);
	unit_write(file, text.data, text.len, 0644);
	buf_free(&text);
	assert_int_equal(spawn_fn(fn_live, (void *)file, &o, &r), 0);
	child_report(&r, "live");
	spawn_result_free(&r);
	/* The test itself never left its namespace. */
	assert_int_not_equal(netlock_exists(), 1);
}

/* ---- behaviour (root): what the agent's sockets can reach ---- */

#define AGENT_UID 65534
#define OTHER_UID 65533
#define P_PROXY 3128
#define P_OTHER 9999
#define P_RANGE 8050
#define P_SERVER 7777

struct probe {
	const char *name;
	int family;
	const char *addr;
	unsigned port;
	int udp;
};

/* Outcome of a probe: 0 connected / sent, or the errno; and how long it took. */
struct probe_res {
	int err;
	double ms;
};

static const struct probe probes[] = {
	{"tcp 127.0.0.1 proxy", AF_INET, "127.0.0.1", P_PROXY, 0},
	{"tcp 127.0.0.1 other", AF_INET, "127.0.0.1", P_OTHER, 0},
	{"tcp ::1 other", AF_INET6, "::1", P_OTHER, 0},
	{"tcp ::1 proxy port", AF_INET6, "::1", P_PROXY, 0},
	{"tcp 127.0.0.1 range", AF_INET, "127.0.0.1", P_RANGE, 0},
	{"udp 127.0.0.1 53", AF_INET, "127.0.0.1", 53, 1},
	{"udp ::1 53", AF_INET6, "::1", 53, 1},
};
enum { PR_PROXY, PR_OTHER, PR_OTHER6, PR_PROXY6, PR_RANGE, PR_UDP, PR_UDP6, PR_N };

/* Through the default route on lo (only when `ip` could add it): not a local address. */
static const struct probe remote_probes[] = {
	{"tcp 198.18.0.1 80", AF_INET, "198.18.0.1", 80, 0},
	{"tcp 2001:db8::1 80", AF_INET6, "2001:db8::1", 80, 0},
	{"udp 198.18.0.1 53", AF_INET, "198.18.0.1", 53, 1},
	{"udp 198.18.0.1 54", AF_INET, "198.18.0.1", 54, 1},
};
enum { RP_TCP, RP_TCP6, RP_DNS, RP_UDP, RP_N };

static socklen_t make_addr(const struct probe *p, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (p->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)p->port);
		inet_pton(AF_INET, p->addr, &in->sin_addr);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons((uint16_t)p->port);
	inet_pton(AF_INET6, p->addr, &in6->sin6_addr);
	return sizeof(*in6);
}

/* Non-blocking connect (or one datagram), bounded by 2 s. */
static struct probe_res probe_run(const struct probe *p)
{
	struct sockaddr_storage ss;
	socklen_t len = make_addr(p, &ss);
	struct probe_res res = {0};
	double t = now_ms();
	int fd = socket(
		p->family, (p->udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		res.err = errno;
		return res;
	}
	if (p->udp) {
		if (sendto(fd, "q", 1, 0, (struct sockaddr *)&ss, len) < 0)
			res.err = errno;
	} else if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS) {
			res.err = errno;
		} else {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			socklen_t sl = sizeof(res.err);

			if (poll(&pf, 1, 2000) <= 0)
				res.err = ETIMEDOUT;
			else
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &res.err, &sl);
		}
	}
	res.ms = now_ms() - t;
	close(fd);
	return res;
}

static int listen_on(int family, const char *addr, unsigned port, int udp)
{
	struct probe p = {"", family, addr, port, udp};
	struct sockaddr_storage ss;
	socklen_t len = make_addr(&p, &ss);
	int one = 1;
	int fd = socket(family, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || (!udp && listen(fd, 64) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Datagrams waiting on fd (drained), within ms. */
static int udp_received(int fd, int ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	char b[64];
	int n = 0;

	while (poll(&pf, 1, n ? 0 : ms) > 0 && recv(fd, b, sizeof(b), MSG_DONTWAIT) >= 0)
		n++;
	return n;
}

/*
 * Run the probes as uid in a forked child; results through a pipe. With
 * serve, the child first listens on 127.0.0.1:P_SERVER and afterwards answers
 * one connection with "hi": a server the agent runs, reached by root.
 */
static int probe_as(uid_t uid, const struct probe *p, size_t n, struct probe_res *res, int serve)
{
	int pfd[2], st;
	pid_t pid;
	ssize_t got;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct probe_res r[16];
		int lfd = -1;

		close(pfd[0]);
		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
			setresuid(uid, uid, uid) < 0)
			_exit(126);
		if (serve && (lfd = listen_on(AF_INET, "127.0.0.1", P_SERVER, 0)) < 0)
			_exit(125);
		for (size_t i = 0; i < n; i++)
			r[i] = probe_run(&p[i]);
		if (write(pfd[1], r, n * sizeof(r[0])) != (ssize_t)(n * sizeof(r[0])))
			_exit(124);
		close(pfd[1]);
		if (serve) {
			struct pollfd pf = {.fd = lfd, .events = POLLIN};
			int c;

			if (poll(&pf, 1, 5000) <= 0 || (c = accept(lfd, NULL, NULL)) < 0)
				_exit(123);
			if (write(c, "hi", 2) != 2)
				_exit(122);
			close(c);
		}
		_exit(0);
	}
	close(pfd[1]);
	got = read(pfd[0], res, n * sizeof(res[0]));
	close(pfd[0]);
	if (got != (ssize_t)(n * sizeof(res[0]))) {
		waitpid(pid, &st, 0);
		return -1;
	}
	return pid;
}

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* As root, connect to the agent's server and read its answer: "hi" or why not. */
static const char *read_agent_server(char *buf, size_t n)
{
	struct probe p = {"", AF_INET, "127.0.0.1", P_SERVER, 0};
	struct sockaddr_storage ss;
	socklen_t len = make_addr(&p, &ss);
	struct pollfd pf;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t r;

	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
		snprintf(buf, n, "connect: %s", strerror(errno));
		goto out;
	}
	pf = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&pf, 1, 2000) <= 0) {
		snprintf(buf, n, "no answer in 2 s");
		goto out;
	}
	r = read(fd, buf, n - 1);
	if (r < 0)
		snprintf(buf, n, "read: %s", strerror(errno));
	else
		buf[r] = '\0';
out:
	if (fd >= 0)
		close(fd);
	return buf;
}

#define P_FLOW 40000

/* As root: a UDP exchange 127.0.0.1:P_FLOW <-> the listener on :53, then close. 0 or -1. */
static int udp_flow_as_root(int lfd)
{
	struct probe p = {"", AF_INET, "127.0.0.1", 53, 1};
	struct sockaddr_storage dst, src;
	socklen_t len = make_addr(&p, &dst), sl = sizeof(src);
	struct pollfd pf = {.fd = lfd, .events = POLLIN};
	int fd = listen_on(AF_INET, "127.0.0.1", P_FLOW, 1), rc = -1;
	char b[8];

	if (fd < 0 || sendto(fd, "q", 1, 0, (struct sockaddr *)&dst, len) != 1)
		goto out;
	if (poll(&pf, 1, 1000) <= 0 ||
		recvfrom(lfd, b, sizeof(b), 0, (struct sockaddr *)&src, &sl) < 0)
		goto out;
	if (sendto(lfd, "a", 1, 0, (struct sockaddr *)&src, sl) != 1)
		goto out;
	pf = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&pf, 1, 1000) <= 0 || recv(fd, b, sizeof(b), 0) != 1)
		goto out;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* As uid: one datagram from 127.0.0.1:P_FLOW to 127.0.0.1:53. 0 sent, the errno, or 200+. */
static int udp_reuse_flow_as(uid_t uid)
{
	struct probe p = {"", AF_INET, "127.0.0.1", 53, 1};
	struct sockaddr_storage dst;
	socklen_t len = make_addr(&p, &dst);
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd;

		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
			setresuid(uid, uid, uid) < 0)
			_exit(201);
		fd = listen_on(AF_INET, "127.0.0.1", P_FLOW, 1);
		if (fd < 0)
			_exit(202);
		_exit(sendto(fd, "x", 1, 0, (struct sockaddr *)&dst, len) == 1 ? 0 : errno);
	}
	return wait_child(pid);
}

static int lo_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	if (rc == 0)
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return rc;
}

static int run_ip(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
	const char *a6)
{
	const char *argv[] = {IP, a1, a2, a3, a4, a5, a6, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 10000};
	struct spawn_result r;

	if (spawn_run(argv, &o, &r) < 0)
		return -1;
	spawn_result_free(&r);
	return r.status;
}

#define FAST_MS 1000.0
#define REFUSED_FAST(res) ((res).err == ECONNREFUSED && (res).ms < FAST_MS)
#define UDP_REFUSED(res) ((res).err == EPERM || (res).err == ECONNREFUSED)

static int fn_behaviour(void *arg, int outfd)
{
	struct netlock_spec s = {
		.uid = AGENT_UID, .proxy_port = P_PROXY, .ports_lo = 8000, .ports_hi = 8100};
	struct probe_res a[PR_N], o[PR_N], root[PR_N], ra[RP_N], rr[RP_N];
	int udp4, udp6, remote, rc;
	char err[1024], buf[256];
	pid_t pid;

	(void)arg;
	if (unshare(CLONE_NEWNET) < 0) {
		dprintf(outfd, "SKIP unshare(CLONE_NEWNET): %s\n", strerror(errno));
		return 2;
	}
	LCHECK(outfd, lo_up() == 0, "lo up: %s", strerror(errno));
	/* Optional: a default route over lo makes 198.18.0.1 a non-local destination. */
	remote = access(IP, X_OK) == 0 &&
		run_ip("route", "add", "default", "dev", "lo", NULL) == 0 &&
		run_ip("-6", "route", "add", "default", "dev", "lo") == 0;
	if (!remote)
		dprintf(outfd, "# no default route over lo (" IP "): non-local probes left out\n");
	LCHECK(outfd,
		listen_on(AF_INET, "127.0.0.1", P_PROXY, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_OTHER, 0) >= 0 &&
			listen_on(AF_INET6, "::1", P_OTHER, 0) >= 0 &&
			listen_on(AF_INET6, "::1", P_PROXY, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_RANGE, 0) >= 0,
		"listen: %s", strerror(errno));
	udp4 = listen_on(AF_INET, "127.0.0.1", 53, 1);
	udp6 = listen_on(AF_INET6, "::1", 53, 1);
	LCHECK(outfd, udp4 >= 0 && udp6 >= 0, "udp 53: %s", strerror(errno));
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);

	pid = probe_as(AGENT_UID, probes, PR_N, a, 1);
	LCHECK(outfd, pid > 0, "agent probes");
	for (size_t i = 0; i < PR_N; i++)
		dprintf(outfd, "# agent %-22s %-14s %.1f ms\n", probes[i].name,
			a[i].err ? strerror(a[i].err) : "ok", a[i].ms);
	/* Positive controls first: the proxy and the configured range are reachable. */
	LCHECK(outfd, a[PR_PROXY].err == 0, "%s", strerror(a[PR_PROXY].err));
	LCHECK(outfd, a[PR_RANGE].err == 0, "%s", strerror(a[PR_RANGE].err));
	LCHECK(outfd, REFUSED_FAST(a[PR_OTHER]), "%s %.1f ms", strerror(a[PR_OTHER].err),
		a[PR_OTHER].ms);
	LCHECK(outfd, REFUSED_FAST(a[PR_OTHER6]), "%s %.1f ms", strerror(a[PR_OTHER6].err),
		a[PR_OTHER6].ms);
	LCHECK(outfd, REFUSED_FAST(a[PR_PROXY6]), "%s %.1f ms", strerror(a[PR_PROXY6].err),
		a[PR_PROXY6].ms);
	LCHECK(outfd, UDP_REFUSED(a[PR_UDP]), "%s", strerror(a[PR_UDP].err));
	LCHECK(outfd, UDP_REFUSED(a[PR_UDP6]), "%s", strerror(a[PR_UDP6].err));
	LCHECK(outfd, udp_received(udp4, 200) == 0 && udp_received(udp6, 200) == 0,
		"the agent's datagram to local port 53 arrived");

	/* A server of the agent answers root: ct state established,related. */
	LCHECK(outfd, strcmp(read_agent_server(buf, sizeof(buf)), "hi") == 0, "%s", buf);
	LCHECK(outfd, wait_child(pid) == 0, "agent child");

	/* Root and another uid are unaffected, and their datagrams arrive. */
	for (size_t i = 0; i < PR_N; i++)
		root[i] = probe_run(&probes[i]);
	pid = probe_as(OTHER_UID, probes, PR_N, o, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "uid %d probes", OTHER_UID);
	for (size_t i = 0; i < PR_N; i++) {
		LCHECK(outfd, root[i].err == 0, "root %s: %s", probes[i].name,
			strerror(root[i].err));
		LCHECK(outfd, o[i].err == 0, "uid %d %s: %s", OTHER_UID, probes[i].name,
			strerror(o[i].err));
	}
	LCHECK(outfd, udp_received(udp4, 1000) == 2 && udp_received(udp6, 1000) == 2,
		"root's and uid %d's datagrams", OTHER_UID);

	/*
	 * Conntrack outlives sockets: after root's UDP exchange from port P_FLOW to
	 * :53 the flow is "established" for a while. The agent binding the same port
	 * must not ride on it (ct state is accepted in the reply direction only).
	 */
	LCHECK(outfd, udp_flow_as_root(udp4) == 0, "root's udp exchange: %s", strerror(errno));
	rc = udp_reuse_flow_as(AGENT_UID);
	LCHECK(outfd, rc == EPERM || rc == ECONNREFUSED, "agent reusing root's flow: %d", rc);
	LCHECK(outfd, udp_received(udp4, 200) == 0, "the agent's datagram on root's flow arrived");
	if (!remote)
		return 0;

	/* Everything non-local: refused at once for the agent, DNS only when allowed. */
	pid = probe_as(AGENT_UID, remote_probes, RP_N, ra, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agent remote probes");
	for (size_t i = 0; i < RP_N; i++)
		dprintf(outfd, "# agent %-22s %-14s %.1f ms\n", remote_probes[i].name,
			ra[i].err ? strerror(ra[i].err) : "ok", ra[i].ms);
	LCHECK(outfd, REFUSED_FAST(ra[RP_TCP]), "%s", strerror(ra[RP_TCP].err));
	LCHECK(outfd, REFUSED_FAST(ra[RP_TCP6]), "%s", strerror(ra[RP_TCP6].err));
	LCHECK(outfd, UDP_REFUSED(ra[RP_DNS]), "%s", strerror(ra[RP_DNS].err));
	LCHECK(outfd, UDP_REFUSED(ra[RP_UDP]), "%s", strerror(ra[RP_UDP].err));
	/* Control: root's SYN goes out unanswered; the refusal above was the table's. */
	rr[RP_TCP] = probe_run(&remote_probes[RP_TCP]);
	rr[RP_DNS] = probe_run(&remote_probes[RP_DNS]);
	LCHECK(outfd, !REFUSED_FAST(rr[RP_TCP]), "root was refused too");
	LCHECK(outfd, rr[RP_DNS].err == 0, "root udp 53: %s", strerror(rr[RP_DNS].err));

	s.dns_allow = 1;
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	pid = probe_as(AGENT_UID, remote_probes, RP_N, ra, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agent remote probes (dns)");
	LCHECK(outfd, ra[RP_DNS].err == 0, "dns_allow: %s", strerror(ra[RP_DNS].err));
	LCHECK(outfd, UDP_REFUSED(ra[RP_UDP]), "%s", strerror(ra[RP_UDP].err));
	LCHECK(outfd, REFUSED_FAST(ra[RP_TCP]), "%s", strerror(ra[RP_TCP].err));
	return 0;
}

static void behaviour_as_root(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	if (geteuid() != 0) {
		printf("# skip: behaviour needs root (run build/tests/test_netlock as root)\n");
		skip();
	}
	assert_int_equal(spawn_fn(fn_behaviour, NULL, &o, &r), 0);
	child_report(&r, "behaviour");
	spawn_result_free(&r);
}

#define DIR_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
#ifdef NETLOCK_ROOT_ONLY
	/* test_priv_netlock: the behaviour of the table needs root; run-unit.sh runs it so. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(behaviour_as_root),
	};

	(void)render_proxy_only;
	(void)render_full;
	(void)render_proxy_uid;
	(void)render_egress_off;
	(void)render_invalid;
	(void)unprivileged_errors;
	(void)answer_after_deadline;
	(void)oracle_nft_encoding;
	(void)live_apply_verify_remove;
	(void)exprs_canon_ranges;
	if (geteuid() != 0) {
		printf("1..1\nok 1 - netlock behaviour # SKIP needs root (sudo make test-unit)\n");
		return 0;
	}
#else
	/* Everything that runs unprivileged; the behaviour test is test_priv_netlock. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(render_proxy_only),
		cmocka_unit_test(render_full),
		cmocka_unit_test(render_proxy_uid),
		cmocka_unit_test(render_egress_off),
		cmocka_unit_test(render_invalid),
		cmocka_unit_test(exprs_canon_ranges),
		cmocka_unit_test(unprivileged_errors),
		cmocka_unit_test(answer_after_deadline),
		DIR_TEST(oracle_nft_encoding),
		DIR_TEST(live_apply_verify_remove),
	};

	(void)behaviour_as_root;
#endif
	return cmocka_run_group_tests(tests, NULL, NULL);
}
