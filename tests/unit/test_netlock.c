/* SPDX-License-Identifier: MIT */
/*
 * The netlock table. Four layers:
 * - rendering (pure);
 * - oracle: nft itself compiles our nft text and must send exactly the
 *   expressions netlock builds (`unshare -rn nft --debug=netlink -c -f`);
 * - live: apply / verify / remove inside a private user+net namespace, so the
 *   host never sees table ocsb (test_netlock_live);
 * - behaviour (root only, test_priv_netlock): in a private net namespace, sockets
 *   of uid 65534 reach the proxy port and nothing else local, while root and uid
 *   65533 are unaffected.
 */
#define _GNU_SOURCE
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>

#include "netlock_unit.h"

static const struct netlock_spec spec_proxy = {.uid = 1000, .proxy_port = 3128};
static const struct netlock_spec spec_range = {
	.uid = 1000, .proxy_port = 3128, .ports_lo = 8000, .ports_hi = 8100};
static const struct netlock_spec spec_dns = {.uid = 4242, .proxy_port = 8080, .dns_allow = 1};
static const struct netlock_spec spec_off = {.uid = 1000};
static const struct netlock_spec spec_squid = {.uid = 1000, .proxy_port = 3128, .proxy_uid = 13};
static const struct netlock_spec spec_inject = {
	.uid = 1000, .proxy_port = 3128, .inject_ports = {18400, 18401}, .n_inject = 2};
static const struct netlock_spec spec_inject_range = {.uid = 1000,
	.proxy_port = 3128,
	.ports_lo = 18000,
	.ports_hi = 18999,
	.inject_ports = {18400, 18401},
	.n_inject = 2};
static const struct netlock_spec spec_agents = {.uid = 1000,
	.others = {1001, 1002},
	.n_others = 2,
	.proxy_port = 3128,
	.inject_ports = {18400},
	.n_inject = 1};
static const struct netlock_spec spec_one_port = {
	.uid = 1000, .proxy_port = 3128, .ports_lo = 8000, .ports_hi = 8000};
/* Agents with ranges of their own, out of uid order; 1003 without one. */
static const struct netlock_spec spec_ranges = {.uid = 1000,
	.others = {1002, 1003, 1001},
	.others_ports = {{9100, 9109}, {0, 0}, {9000, 9009}},
	.n_others = 3,
	.proxy_port = 3128,
	.ports_lo = 8000,
	.ports_hi = 8099};

/* ocsb-inject's account with two routes (one upstream port twice) and two nameservers. */

/* The rule lines of render_nft's text, in order, one per line, tabs stripped. */
static char *rules_of(const struct netlock_spec *s)
{
	struct buf b = {0}, out = {0};

	assert_int_equal(netlock_render_nft(s, &b), 0);
	for (char *l = b.data; l && *l;) {
		char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		size_t skip = strspn(l, "\t");

		if (skip == 2 && strncmp(l + 2, "type ", 5) != 0 &&
			strncmp(l + 2, "elements ", 9) != 0) {
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
		"meta skuid @agents jump agent\n"
		"ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"
		"ct direction reply ct state established,related fib daddr type local accept\n"
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
		"meta skuid @agents jump agent\n"
		"ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"
		"ct direction reply ct state established,related fib daddr type local accept\n"
		"ip daddr 127.0.0.1 tcp dport 65535 accept\n"
		"meta skuid 65534 fib daddr type local tcp dport 18400-18415 reject with tcp "
		"reset\n"
		"meta skuid 65534 fib daddr type local tcp dport 1-65535 accept\n"
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
		"meta skuid @agents jump agent\n"
		"ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"
		"meta skuid 13 ct direction reply accept\n"
		"meta skuid 13 fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"ct direction reply ct state established,related fib daddr type local accept\n"
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

/*
 * ocsb-inject's routes: each port exactly, on 127.0.0.1 only, before the local rejects,
 * for agentd's agent; every other uid is reset on the whole route range, routed or not
 * (issue 25: agentd listens on all 16 from its start, so a connection let through before
 * the first push waited in the backlog and was served with the key once the route existed).
 */
static void render_inject_ports(void **state)
{
	char *r = rules_of(&spec_inject);

	assert_string_equal(r,
		"meta skuid @agents jump agent\n"
		"ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"
		"ct direction reply ct state established,related fib daddr type local accept\n"
		"ip daddr 127.0.0.1 tcp dport 3128 accept\n"
		"meta skuid 1000 ip daddr 127.0.0.1 tcp dport 18400 accept\n"
		"meta skuid 1000 ip daddr 127.0.0.1 tcp dport 18401 accept\n"
		"fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"fib daddr type local reject with icmpx admin-prohibited\n"
		"meta l4proto tcp reject with tcp reset\n"
		"reject with icmpx admin-prohibited\n");
	free(r);
	/* Without routes, no port of theirs is open to anyone, and the range is reset. */
	r = rules_of(&spec_proxy);
	assert_null(strstr(r, "18400 accept"));
	assert_non_null(
		strstr(r, "ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"));
	free(r);
}

/*
 * ocsb-inject's chain (issue 25): its account reaches its routes' upstream ports and DNS
 * on non-local addresses, its nameservers' port 53 (local ones too), and nothing else
 * local; the answers of the sockets it accepts from the agent (its own: accept gives them
 * its uid) pass by their direction from the route ports.
 */
static void render_inject_chain(void **state)
{
	struct netlock_spec s = spec_injector;
	struct buf b = {0};
	char *r = rules_of(&s);

	assert_string_equal(r,
		"meta skuid @agents jump agent\n"
		"ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"
		"meta skuid 995 jump inject\n"
		"ct direction reply ct state established,related fib daddr type local accept\n"
		"ip daddr 127.0.0.1 tcp dport 3128 accept\n"
		"meta skuid 1000 ip daddr 127.0.0.1 tcp dport 18400 accept\n"
		"meta skuid 1000 ip daddr 127.0.0.1 tcp dport 18401 accept\n"
		"fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"fib daddr type local reject with icmpx admin-prohibited\n"
		"meta l4proto tcp reject with tcp reset\n"
		"reject with icmpx admin-prohibited\n"
		"ct direction reply ip saddr 127.0.0.1 tcp sport 18400-18415 accept\n"
		"ip daddr 127.0.0.53 udp dport 53 accept\n"
		"ip daddr 127.0.0.53 tcp dport 53 accept\n"
		"ip6 daddr ::1 udp dport 53 accept\n"
		"ip6 daddr ::1 tcp dport 53 accept\n"
		"fib daddr type local meta l4proto tcp reject with tcp reset\n"
		"fib daddr type local reject with icmpx admin-prohibited\n"
		"tcp dport 443 accept\n"
		"tcp dport 8443 accept\n"
		"udp dport 53 accept\n"
		"tcp dport 53 accept\n"
		"meta l4proto tcp reject with tcp reset\n"
		"reject with icmpx admin-prohibited\n");
	free(r);
	assert_int_equal(netlock_render_nft(&s, &b), 0);
	assert_has_line(b.data, "chain inject {");
	buf_free(&b);
	/* An upstream on port 53 is the DNS rule's: no second rule for it. */
	s.inject_uports[0] = 53;
	r = rules_of(&s);
	assert_null(strstr(r, "tcp dport 8443 accept\n"));
	assert_non_null(
		strstr(r, "tcp dport 443 accept\nudp dport 53 accept\ntcp dport 53 accept\n"));
	free(r);
	/* Control: without the account, no chain and no jump. */
	s.inject_uid = 0;
	r = rules_of(&s);
	assert_null(strstr(r, "inject"));
	assert_null(strstr(r, "sport"));
	assert_int_equal(netlock_render_nft(&s, &b), 0);
	assert_null(strstr(b.data, "chain inject"));
	buf_free(&b);
	/* The account is neither an agent nor the proxy; ports and addresses are checked. */
	s = spec_injector;
	s.inject_uid = s.uid;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s = spec_injector;
	s.others[0] = 995;
	s.n_others = 1;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s = spec_injector;
	s.proxy_uid = 995;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s = spec_injector;
	s.inject_uid = (uid_t)-1;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s = spec_injector;
	s.inject_uports[1] = 0;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.inject_uports[1] = 65536;
	assert_int_equal(netlock_render_expr(&s, &b), -EINVAL);
	s = spec_injector;
	s.n_uports = NETLOCK_MAX_INJECT + 1;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s = spec_injector;
	s.n_ns = NETLOCK_MAX_NS + 1;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s = spec_injector;
	s.ns[1].family = AF_UNIX;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	buf_free(&b);
}

/* resolv.conf's nameservers: the first three, IPv4 and IPv6, a scope dropped. */
static void inject_host_nameservers(void **state)
{
	static const char resolv[] =
		"# comment\nsearch example.test\nnameserver not-an-address\n"
		"  nameserver   127.0.0.53  \noptions edns0\nnameserver fe80::1%eth0\n"
		"nameserver 10.0.0.2\nnameserver 10.0.0.3\n";
	struct netlock_spec s = {0};
	struct user_info u;
	char a[INET6_ADDRSTRLEN], dir[4096];

	snprintf(dir, sizeof(dir), "%s", unit_path("etc"));

	assert_int_equal(mkdir(dir, 0755), 0);
	/* No file: no nameserver (and no error). */
	s.n_ns = 2;
	assert_int_equal(netlock_inject_host(&s, dir), 0);
	assert_int_equal(s.n_ns, 0);
	assert_int_equal(s.inject_uid, user_lookup("ocsb-inject", &u) == 0 ? u.uid : 0);
	unit_write(unit_path("etc/resolv.conf"), resolv, strlen(resolv), 0644);
	assert_int_equal(netlock_inject_host(&s, dir), 0);
	assert_int_equal(s.n_ns, 3);
	assert_int_equal(s.ns[0].family, AF_INET);
	assert_string_equal(inet_ntop(AF_INET, s.ns[0].a, a, sizeof(a)), "127.0.0.53");
	assert_int_equal(s.ns[1].family, AF_INET6);
	assert_string_equal(inet_ntop(AF_INET6, s.ns[1].a, a, sizeof(a)), "fe80::1");
	assert_string_equal(inet_ntop(AF_INET, s.ns[2].a, a, sizeof(a)), "10.0.0.2");
}

/*
 * agent-ports over the route ports (config.c refuses it; a spec may still have one): the
 * range's uid is reset on the route ports agentd does not serve it, before the range
 * accepts the rest.
 */
static void render_range_over_routes(void **state)
{
	struct netlock_spec s = spec_inject_range;
	char *r = rules_of(&s), *base = rules_of(&spec_inject), *cut, want[2048];

	/* spec_inject's rules (render_inject_ports) with the reset and the range after the
	 * agent's own route accepts, before the local rejects. */
	cut = strstr(base, "fib daddr type local meta l4proto tcp reject");
	assert_non_null(cut);
	snprintf(want, sizeof(want), "%.*s%s%s", (int)(cut - base), base,
		"meta skuid 1000 fib daddr type local tcp dport 18400-18415 reject with tcp reset\n"
		"meta skuid 1000 fib daddr type local tcp dport 18000-18999 accept\n",
		cut);
	assert_string_equal(r, want);
	assert_non_null(strstr(r,
		"meta skuid 1000 ip daddr 127.0.0.1 tcp dport 18401 accept\n"
		"meta skuid 1000 fib daddr type local tcp dport 18400-18415 reject"));
	free(base);
	free(r);
	/* Partly over them: only the covered route ports. */
	s.ports_lo = 18410;
	r = rules_of(&s);
	assert_non_null(strstr(r,
		"meta skuid 1000 fib daddr type local tcp dport 18410-18415 "
		"reject with tcp reset\n"
		"meta skuid 1000 fib daddr type local tcp dport 18410-18999 accept\n"));
	free(r);
	/* Controls: a range beside them, and one ending right before them, get no such rule. */
	s.ports_lo = 18416;
	r = rules_of(&s);
	assert_null(strstr(r, "local tcp dport 18400-"));
	assert_null(strstr(r, "-18415 reject with tcp reset\nmeta skuid"));
	assert_non_null(
		strstr(r, "meta skuid 1000 fib daddr type local tcp dport 18416-18999 accept\n"));
	free(r);
	s.ports_lo = 8000;
	s.ports_hi = 18399;
	r = rules_of(&s);
	assert_null(strstr(r, "local tcp dport 18400-"));
	free(r);
}

/*
 * Each agent's agent-ports range for its uid alone (known issue "Several agents": one
 * range, from whichever configuration applied the table, was open to every agent).
 */
static const char ranges_rules[] =
	"meta skuid @agents jump agent\n"
	"ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset\n"
	"ct direction reply ct state established,related fib daddr type local accept\n"
	"ip daddr 127.0.0.1 tcp dport 3128 accept\n"
	"meta skuid 1000 fib daddr type local tcp dport 8000-8099 accept\n"
	"meta skuid 1001 fib daddr type local tcp dport 9000-9009 accept\n"
	"meta skuid 1002 fib daddr type local tcp dport 9100-9109 accept\n"
	"fib daddr type local meta l4proto tcp reject with tcp reset\n"
	"fib daddr type local reject with icmpx admin-prohibited\n"
	"meta l4proto tcp reject with tcp reset\n"
	"reject with icmpx admin-prohibited\n";

static void render_agent_ranges(void **state)
{
	struct netlock_spec s = spec_ranges;
	char *r = rules_of(&s);

	/* By ascending uid whatever the registry's order; none for 1003, which has none. */
	assert_string_equal(r, ranges_rules);
	assert_null(strstr(r, "1003"));
	free(r);
	/* The same table when the run is 1001's: its range from its configuration. */
	s = (struct netlock_spec){.uid = 1001,
		.others = {1003, 1000, 1002},
		.others_ports = {{0, 0}, {8000, 8099}, {9100, 9109}},
		.n_others = 3,
		.proxy_port = 3128,
		.ports_lo = 9000,
		.ports_hi = 9009};
	r = rules_of(&s);
	assert_string_equal(r, ranges_rules);
	free(r);
	/* uid's range is its configuration's, not what the registry says of it. */
	s = spec_ranges;
	s.others[s.n_others] = 1000;
	s.others_ports[s.n_others++] = (struct netlock_range){7000, 7009};
	r = rules_of(&s);
	assert_string_equal(r, ranges_rules);
	free(r);
	/* Without a range of its own, the run's agent gets none: not another agent's. */
	s = spec_ranges;
	s.ports_lo = s.ports_hi = 0;
	r = rules_of(&s);
	assert_null(strstr(r, "8000-8099"));
	assert_null(strstr(r, "meta skuid 1000"));
	assert_non_null(strstr(r,
		"meta skuid 1001 fib daddr type local tcp dport 9000-9009 accept\n"
		"meta skuid 1002 fib daddr type local tcp dport 9100-9109 accept\n"));
	free(r);
	/* An other agent's range over the route ports: reset there for its uid, like uid's. */
	s = spec_ranges;
	s.others_ports[2] = (struct netlock_range){18000, 18999};
	r = rules_of(&s);
	assert_non_null(strstr(r,
		"meta skuid 1000 fib daddr type local tcp dport 8000-8099 accept\n"
		"meta skuid 1001 fib daddr type local tcp dport 18400-18415 reject "
		"with tcp reset\n"
		"meta skuid 1001 fib daddr type local tcp dport 18000-18999 accept\n"
		"meta skuid 1002 "));
	free(r);
}

/* A uid two entries name gets what both allow; an invalid range is an invalid spec. */
static void agent_ranges_same_uid(void **state)
{
	struct netlock_spec s = {.uid = 1000,
		.others = {1001, 1002, 1001},
		.others_ports = {{9000, 9009}, {9100, 9109}, {9005, 9020}},
		.n_others = 3,
		.proxy_port = 3128};
	struct netlock_range p;
	struct buf b = {0};
	char *r;

	p = netlock_others_range(&s, 1001);
	assert_int_equal(p.lo, 9005);
	assert_int_equal(p.hi, 9009);
	p = netlock_others_range(&s, 1002);
	assert_int_equal(p.lo, 9100);
	assert_int_equal(p.hi, 9109);
	p = netlock_others_range(&s, 4242); /* no entry: none */
	assert_int_equal(p.lo, 0);
	assert_int_equal(p.hi, 0);
	r = rules_of(&s);
	assert_non_null(
		strstr(r, "meta skuid 1001 fib daddr type local tcp dport 9005-9009 accept\n"));
	assert_null(strstr(r, "9000-"));
	free(r);
	/* Disjoint, or one entry without a range: none. */
	s.others_ports[2] = (struct netlock_range){9010, 9020};
	p = netlock_others_range(&s, 1001);
	assert_int_equal(p.lo, 0);
	assert_int_equal(p.hi, 0);
	s.others_ports[2] = (struct netlock_range){0, 0};
	p = netlock_others_range(&s, 1001);
	assert_int_equal(p.lo, 0);
	r = rules_of(&s);
	assert_null(strstr(r, "meta skuid 1001"));
	assert_non_null(
		strstr(r, "meta skuid 1002 fib daddr type local tcp dport 9100-9109 accept\n"));
	free(r);
	/* Not a range: refused like a bad ports_lo-ports_hi. */
	s.others_ports[1] = (struct netlock_range){0, 9109};
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.others_ports[1] = (struct netlock_range){9109, 9100};
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.others_ports[1] = (struct netlock_range){9100, 65536};
	assert_int_equal(netlock_render_expr(&s, &b), -EINVAL);
	buf_free(&b);
}

/* Every array sized by NETLOCK_MAX_RULES holds the most rules a spec can have. */
static void render_max_rules(void **state)
{
	struct netlock_spec s;
	struct buf b = {0};
	size_t n = 0;
	char *r;

	spec_max(&s);
	r = rules_of(&s);
	for (const char *p = r; (p = strchr(p, '\n')); p++)
		n++;
	assert_int_equal(n, SPEC_MAX_RULES);
	assert_non_null(strstr(r,
		"meta skuid 2063 fib daddr type local tcp dport 18400-18415 reject "
		"with tcp reset\n"
		"meta skuid 2063 fib daddr type local tcp dport 18063-18999 accept\n"));
	free(r);
	assert_int_equal(netlock_render_expr(&s, &b), 0);
	n = 0;
	for (const char *p = b.data; (p = strstr(p, "\ninet ocsb ")); p++)
		n++;
	assert_int_equal(n + 1, SPEC_MAX_RULES);
	buf_free(&b);
}

static void render_egress_off(void **state)
{
	char *r = rules_of(&spec_off);
	const char *p = r;
	size_t accepts = 0;

	/* Nothing accepted but the replies of the agent's servers to local clients. */
	while ((p = strstr(p, "accept\n")) != NULL) {
		accepts++;
		p++;
	}
	assert_int_equal(accepts, 1);
	assert_non_null(strstr(r,
		"ct direction reply ct state established,related fib daddr type local accept\n"));
	assert_null(strstr(r, "127.0.0.1 tcp dport 3128"));
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
		{.uid = 1000, .proxy_port = 3128, .inject_ports = {0}, .n_inject = 1},
		{.uid = 1000, .proxy_port = 3128, .inject_ports = {65536}, .n_inject = 1},
		{.uid = 1000, .proxy_port = 3128, .n_inject = NETLOCK_MAX_INJECT + 1},
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
	oracle_one(&spec_proxy, 8);
	oracle_one(&spec_range, 9);
	oracle_one(&spec_dns, 10);
	oracle_one(&spec_off, 7);
	oracle_one(&spec_all, 12);
	oracle_one(&spec_one_port, 9);
	oracle_one(&spec_squid, 10);
	oracle_one(&spec_inject, 10);
	oracle_one(&spec_inject_range, 12);
	oracle_one(&spec_agents, 9);
	oracle_one(&spec_ranges, 11);
	oracle_one(&spec_injector, 24);
	{
		struct netlock_spec max;

		spec_max(&max);
		oracle_one(&max, SPEC_MAX_RULES);
	}
}

/* ---- live, in a private user+net namespace ---- */

#define DIR_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	/* Everything that runs unprivileged; the behaviour test is test_priv_netlock. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(render_proxy_only),
		cmocka_unit_test(render_full),
		cmocka_unit_test(render_proxy_uid),
		cmocka_unit_test(render_inject_ports),
		cmocka_unit_test(render_inject_chain),
		DIR_TEST(inject_host_nameservers),
		cmocka_unit_test(render_range_over_routes),
		cmocka_unit_test(render_agent_ranges),
		cmocka_unit_test(agent_ranges_same_uid),
		cmocka_unit_test(render_max_rules),
		cmocka_unit_test(render_egress_off),
		cmocka_unit_test(render_invalid),
		cmocka_unit_test(exprs_canon_ranges),
		cmocka_unit_test(unprivileged_errors),
		cmocka_unit_test(answer_after_deadline),
		DIR_TEST(oracle_nft_encoding),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
