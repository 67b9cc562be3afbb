/* SPDX-License-Identifier: MIT */
/*
 * The netlock's set of agents (one table for every agent of the machine): rendering, the
 * agents registry, and, in a private user+net namespace, verification of the set and the
 * route ports ocsb-provision reads from ocsb-agentd's guard.
 */
#define _GNU_SOURCE
#include <sys/mount.h>

#include "netlock_unit.h"

static const struct netlock_spec spec_two = {.uid = 1000,
	.others = {1002, 1000, 1001, 1002},
	.n_others = 4,
	.proxy_port = 3128,
	.inject_ports = {18400},
	.n_inject = 1};

/* ---- rendering ---- */

static void render_two_agents(void **state)
{
	struct buf b = {0};

	assert_int_equal(netlock_render_nft(&spec_two, &b), 0);
	/* Each uid once, ascending; one rule for all of them. */
	assert_has_line(b.data, "set agents {");
	assert_has_line(b.data, "type uid");
	assert_has_line(b.data, "elements = { 1000, 1001, 1002 }");
	assert_has_line(b.data, "meta skuid @agents jump agent");
	assert_null(strstr(b.data, "meta skuid 1001"));
	/* The route: agentd's agent's alone, reset for every other uid. */
	assert_has_line(b.data, "meta skuid 1000 ip daddr 127.0.0.1 tcp dport 18400 accept");
	assert_has_line(b.data, "ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset");
	assert_null(strstr(b.data, "\tip daddr 127.0.0.1 tcp dport 18400 accept"));
	buf_free(&b);
}

static void render_invalid_others(void **state)
{
	struct netlock_spec s = {.uid = 1000, .others = {0}, .n_others = 1};
	struct buf b = {0};

	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.others[0] = (uid_t)-1;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.others[0] = 1001;
	s.n_others = NETLOCK_MAX_AGENTS + 1;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.n_others = 1;
	assert_int_equal(netlock_render_nft(&s, &b), 0);
	/* The proxy's uid among the agents would force squid's egress through itself. */
	s.proxy_uid = 1001;
	assert_int_equal(netlock_render_nft(&s, &b), -EINVAL);
	s.proxy_uid = 13;
	assert_int_equal(netlock_render_nft(&s, &b), 0);
	buf_free(&b);
}

/* ---- the registry ---- */

static void registry_accounts_and_stale(void **state)
{
	struct netlock_spec s = {.uid = 1000};
	char stale[1024];
	struct user_info nobody, daemon_u;

	if (user_lookup("nobody", &nobody) < 0 || user_lookup("daemon", &daemon_u) < 0) {
		printf("# skip: no accounts nobody and daemon here\n");
		skip();
	}
	/* No directory: an empty registry. */
	assert_int_equal(netlock_registry(&s, unit_path("none"), NULL, stale, sizeof(stale)), 0);
	assert_int_equal(s.n_others, 0);
	assert_int_equal(mkdir(unit_path("ocsb"), 0700), 0);
	assert_int_equal(mkdir(unit_path("ocsb/agents"), 0700), 0);
	unit_write(unit_path("ocsb/agents/nobody"), "agent nobody\n", 13, 0600);
	unit_write(unit_path("ocsb/agents/daemon"), "agent daemon\n", 13, 0600);
	unit_write(unit_path("ocsb/agents/ocsb-no-such-account"), "x\n", 2, 0600);
	unit_write(unit_path("ocsb/agents/root"), "x\n", 2, 0600);
	unit_write(unit_path("ocsb/agents/.nobody.tmp"), "x\n", 2, 0600);
	assert_int_equal(netlock_registry(&s, unit_dir, NULL, stale, sizeof(stale)), 0);
	/* System accounts are never agents: the proxy's egress through itself cuts everyone off. */
	assert_int_equal(s.n_others, 0);
	assert_non_null(strstr(stale, "nobody has uid 65534, outside the agents' range 1000-60000: "
				      "left out"));
	assert_non_null(strstr(stale, "daemon has uid "));
	/* Named, not fatal: an account deleted by hand without a recorded uid, and uid 0. */
	assert_non_null(strstr(stale, "no account for ocsb-no-such-account: left out"));
	assert_non_null(strstr(stale, "root has uid 0"));

	/*
	 * An account deleted by hand may leave processes under its uid: the recorded uid stays
	 * locked until a purge. Not one outside the agents' range, nor an unparsable one.
	 */
	unit_write(unit_path("ocsb/agents/ocsb-gone"), "agent ocsb-gone\norigin created\nuid 4242\n",
		40, 0600);
	unit_write(unit_path("ocsb/agents/ocsb-gone-sys"), "agent x\nuid 13\n", 16, 0600);
	unit_write(unit_path("ocsb/agents/ocsb-gone-bad"), "agent x\nuid 42x\n", 17, 0600);
	assert_int_equal(netlock_registry(&s, unit_dir, NULL, stale, sizeof(stale)), 0);
	assert_int_equal(s.n_others, 1);
	assert_int_equal(s.others[0], 4242);
	assert_non_null(strstr(stale, "no account for ocsb-gone: its recorded uid 4242 stays in "
				      "the set until ocsb-provision --remove --purge forgets it"));
	assert_non_null(strstr(stale, "no account for ocsb-gone-sys: left out"));
	assert_non_null(strstr(stale, "no account for ocsb-gone-bad: left out"));
	/* The agent being removed is left out. */
	assert_int_equal(netlock_registry(&s, unit_dir, "ocsb-gone", stale, sizeof(stale)), 0);
	assert_int_equal(s.n_others, 0);
}

/*
 * With a passwd of the test's own (bind-mounted in a private user+mount namespace): an
 * agent-range account is taken (the control), the proxy's and ocsb-inject's are not even
 * inside that range, and one above it is not.
 */
/*
 * In the child: <dir>/passwd as /etc/passwd, in a user+mount namespace of its own. 0, or -1
 * (SKIP said).
 */
static int own_passwd(const char *dir, int outfd)
{
	char path[4096], map[64];
	uid_t uid = getuid();

	snprintf(path, sizeof(path), "%s/passwd", dir);
	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) {
		dprintf(outfd, "SKIP unshare(CLONE_NEWUSER|CLONE_NEWNS): %s\n", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1", (unsigned)uid);
	if (write_proc("/proc/self/setgroups", "deny") < 0 ||
		write_proc("/proc/self/uid_map", map) < 0 ||
		mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		mount(path, "/etc/passwd", NULL, MS_BIND, NULL) < 0) {
		dprintf(outfd, "SKIP a passwd of our own: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int fn_registry_accounts(void *arg, int outfd)
{
	const char *dir = arg;
	struct netlock_spec s = {.uid = 1000};
	char stale[1024];

	if (own_passwd(dir, outfd) < 0)
		return 2;
	LCHECK(outfd, netlock_proxy_uid() == 1005, "proxy %u", (unsigned)netlock_proxy_uid());
	LCHECK(outfd, netlock_registry(&s, dir, NULL, stale, sizeof(stale)) == 0, "%s", stale);
	LCHECK(outfd, s.n_others == 1 && s.others[0] == 1001, "%zu others: %s", s.n_others, stale);
	LCHECK(outfd, strstr(stale, "proxy has uid 1005, the proxy's: left out"), "%s", stale);
	LCHECK(outfd, strstr(stale, "ocsb-inject has uid 1006, ocsb-inject's: left out"), "%s",
		stale);
	LCHECK(outfd, strstr(stale, "ocsb-big has uid 60001, outside"), "%s", stale);
	LCHECK(outfd, !strstr(stale, "ocsb-a1"), "%s", stale);
	return 0;
}

static void registry_agent_range(void **state)
{
	static const char pw[] = "root:x:0:0::/root:/bin/sh\n"
				 "proxy:x:1005:1005::/bin:/usr/sbin/nologin\n"
				 "ocsb-inject:x:1006:1006::/nonexistent:/usr/sbin/nologin\n"
				 "ocsb-a1:x:1001:1001::/home/ocsb-a1:/bin/sh\n"
				 "ocsb-big:x:60001:60001::/home/ocsb-big:/bin/sh\n";
	static const char *const names[] = {"proxy", "ocsb-inject", "ocsb-a1", "ocsb-big"};
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;
	char rel[64];

	unit_write(unit_path("passwd"), pw, sizeof(pw) - 1, 0644);
	assert_int_equal(mkdir(unit_path("ocsb"), 0700), 0);
	assert_int_equal(mkdir(unit_path("ocsb/agents"), 0700), 0);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(rel, sizeof(rel), "ocsb/agents/%s", names[i]);
		unit_write(unit_path(rel), "x\n", 2, 0600);
	}
	assert_int_equal(spawn_fn(fn_registry_accounts, (void *)unit_dir, &o, &r), 0);
	child_report(&r, "registry accounts");
	spawn_result_free(&r);
}

/*
 * The agent-ports range each entry records ("ports LO-HI", written by ocsb-provision): a
 * good line gives the range, no line none, and a line agent-ports would refuse none, named.
 */
static const struct {
	const char *name, *entry;
	unsigned lo, hi; /* the range the registry gives */
	const char *note; /* in the notes, or NULL: none about it */
} ports_cases[] = {
	{"ocsb-a1", "agent ocsb-a1\norigin created\nuid 1001\nports 9000-9009\n", 9000, 9009, NULL},
	{"ocsb-a2", "agent ocsb-a2\norigin created\nuid 1002\n", 0, 0, NULL},
	{"ocsb-a3", "agent ocsb-a3\nports 9000\n", 0, 0,
		"ocsb-a3: line 2: 'ports 9000': '9000' is not a port range LOW-HIGH (e.g. "
		"8000-8099): "
		"no agent-ports range for ocsb-a3 until sudo ocsb-provision --config <its "
		"configuration> records it again"},
	{"ocsb-a4", "agent ocsb-a4\nports 18000-18999\n", 0, 0,
		"ocsb-a4: line 2: 'ports 18000-18999': agent-ports 18000-18999 overlaps the "
		"injector's route ports 18400-18415"},
	{"ocsb-a5", "agent ocsb-a5\nports 80-90\n", 0, 0,
		"ocsb-a5: line 2: 'ports 80-90': 80 is out of range (1024..65535)"},
	{"ocsb-a6", "agent ocsb-a6\nports 9010-9000\n", 0, 0,
		"ocsb-a6: line 2: 'ports 9010-9000': port range 9010-9000 is empty"},
	{"ocsb-a7", "agent ocsb-a7\nports 9000-9009x\n", 0, 0,
		"ocsb-a7: line 2: 'ports 9000-9009x': '9009x' is not a number"},
	{"ocsb-a8", "agent ocsb-a8\nports 9000-9009\nports 9100-9109\n", 0, 0,
		"ocsb-a8: line 3: a second ports line"},
	{"ocsb-a9", "# a comment\nports 9200-9200", 9200, 9200, NULL},
	/* An account deleted by hand: its uid stays locked, nothing is opened for it. */
	{"ocsb-gone", "agent ocsb-gone\nuid 1020\nports 9300-9309\n", 0, 0,
		"no account for ocsb-gone: its recorded uid 1020 stays"},
};

static int fn_registry_ports(void *arg, int outfd)
{
	const char *dir = arg;
	struct netlock_spec s = {.uid = 1000};
	char stale[4096];

	if (own_passwd(dir, outfd) < 0)
		return 2;
	LCHECK(outfd, netlock_registry(&s, dir, NULL, stale, sizeof(stale)) == 0, "%s", stale);
	LCHECK(outfd, s.n_others == ARRAY_SIZE(ports_cases), "%zu others: %s", s.n_others, stale);
	for (size_t i = 0; i < ARRAY_SIZE(ports_cases); i++) {
		uid_t want = (uid_t)(1001 + i);
		size_t k;

		if (strcmp(ports_cases[i].name, "ocsb-gone") == 0)
			want = 1020;
		for (k = 0; k < s.n_others && s.others[k] != want; k++)
			;
		LCHECK(outfd, k < s.n_others, "%s: uid %u not in the set", ports_cases[i].name,
			(unsigned)want);
		LCHECK(outfd,
			s.others_ports[k].lo == ports_cases[i].lo &&
				s.others_ports[k].hi == ports_cases[i].hi,
			"%s: range %u-%u, want %u-%u", ports_cases[i].name, s.others_ports[k].lo,
			s.others_ports[k].hi, ports_cases[i].lo, ports_cases[i].hi);
		if (ports_cases[i].note)
			LCHECK(outfd, strstr(stale, ports_cases[i].note), "%s: note missing: %s",
				ports_cases[i].name, stale);
		else
			LCHECK(outfd, !strstr(stale, ports_cases[i].name), "%s: a note: %s",
				ports_cases[i].name, stale);
	}
	/* And the table gives each range to its uid alone. */
	{
		struct buf b = {0};

		LCHECK(outfd, netlock_render_nft(&s, &b) == 0, "render");
		LCHECK(outfd,
			strstr(b.data,
				"meta skuid 1001 fib daddr type local tcp dport 9000-9009 "
				"accept\n") &&
				strstr(b.data,
					"meta skuid 1009 fib daddr type local tcp dport "
					"9200-9200 accept\n") &&
				!strstr(b.data, "meta skuid 1002 fib") && !strstr(b.data, "9300") &&
				!strstr(b.data, "18000"),
			"%s", b.data);
		buf_free(&b);
	}
	return 0;
}

static void registry_ports(void **state)
{
	struct buf pw = {0};
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;
	char rel[64];

	assert_int_equal(buf_puts(&pw, "root:x:0:0::/root:/bin/sh\n"), 0);
	assert_int_equal(mkdir(unit_path("ocsb"), 0700), 0);
	assert_int_equal(mkdir(unit_path("ocsb/agents"), 0700), 0);
	for (size_t i = 0; i < ARRAY_SIZE(ports_cases); i++) {
		if (strcmp(ports_cases[i].name, "ocsb-gone") != 0)
			assert_int_equal(buf_printf(&pw, "%s:x:%zu:%zu::/home/%s:/bin/sh\n",
						 ports_cases[i].name, 1001 + i, 1001 + i,
						 ports_cases[i].name),
				0);
		snprintf(rel, sizeof(rel), "ocsb/agents/%s", ports_cases[i].name);
		unit_write(
			unit_path(rel), ports_cases[i].entry, strlen(ports_cases[i].entry), 0600);
	}
	unit_write(unit_path("passwd"), pw.data, pw.len, 0644);
	buf_free(&pw);
	assert_int_equal(spawn_fn(fn_registry_ports, (void *)unit_dir, &o, &r), 0);
	child_report(&r, "registry ports");
	spawn_result_free(&r);
}

/* ---- live, in a private user+net namespace ---- */

static int fn_live_set(void *arg, int outfd)
{
	struct netlock_spec s = {.uid = 1000, .others = {1001}, .n_others = 1, .proxy_port = 3128};
	struct netlock_spec one = {.uid = 1000, .proxy_port = 3128};
	struct netlock_spec three = s;
	char err[1024], out[4096];
	uid_t uids[8];
	int r;

	(void)arg;
	if (enter_userns_netns(outfd) < 0)
		return 2;
	LCHECK(outfd, netlock_live_agents(uids, 8) == -ENOENT, "no table yet");
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	r = netlock_live_agents(uids, 8);
	LCHECK(outfd, r == 2 && uids[0] == 1000 && uids[1] == 1001, "%d", r);
	/* nft reads the keys as uids (host order), not byte-swapped numbers. */
	LCHECK(outfd,
		run_nft("list", "set", "inet", "ocsb", "agents", out, sizeof(out)) == 0 &&
			strstr(out, "elements = { 1000, 1001 }"),
		"%s", out);

	/* A spec without the second agent: the live set has one uid too many. */
	r = netlock_verify(&one, err, sizeof(err));
	LCHECK(outfd, r == 1 && strcmp(err, "netlock: set agents has an extra uid 1001") == 0,
		"%d %s", r, err);
	three.others[three.n_others++] = 1002;
	r = netlock_verify(&three, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: set agents lacks uid 1002 (an agent without "
				      "netlock)") == 0,
		"%d %s", r, err);

	/* One agent taken out by hand: noticed, named, and put back by apply. */
	LCHECK(outfd,
		run_nft("delete", "element", "inet ocsb agents", "{ 1001 }", NULL, out,
			sizeof(out)) == 0,
		"%s", out);
	r = netlock_verify(&s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: set agents lacks uid 1001 (an agent without "
				      "netlock)") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	/* Applying twice gives the same table. */
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);

	/* Another set in the table is a difference. */
	LCHECK(outfd,
		run_nft("add", "set", "inet ocsb extra", "{ type ipv4_addr; }", NULL, out,
			sizeof(out)) == 0,
		"%s", out);
	r = netlock_verify(&s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: unexpected set extra in table inet ocsb") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	return 0;
}

/*
 * Each agent's range rule is verified like every other rule: a range missing, changed or
 * gone for one agent is drift, named, and apply puts it back.
 */
static int fn_live_ranges(void *arg, int outfd)
{
	struct netlock_spec s = {.uid = 1000,
		.others = {1002, 1001},
		.others_ports = {{9100, 9109}, {9000, 9009}},
		.n_others = 2,
		.proxy_port = 3128,
		.ports_lo = 8000,
		.ports_hi = 8099};
	struct netlock_spec t, max;
	char err[1024], out[8192];
	int r;

	(void)arg;
	if (enter_userns_netns(outfd) < 0)
		return 2;
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd,
		run_nft("list", "chain", "inet ocsb agent", NULL, NULL, out, sizeof(out)) == 0 &&
			strstr(out,
				"meta skuid 1001 fib daddr type local tcp dport 9000-9009 accept"),
		"%s", out);
	/* Control: the same agents in another order are the same table. */
	t = s;
	t.others[0] = 1001;
	t.others_ports[0] = s.others_ports[1];
	t.others[1] = 1002;
	t.others_ports[1] = s.others_ports[0];
	LCHECK(outfd, netlock_verify(&t, err, sizeof(err)) == 0, "%s", err);
	/* Another agent's range changed in its entry: the rule differs. */
	t = s;
	t.others_ports[1] = (struct netlock_range){9000, 9019};
	r = netlock_verify(&t, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strstr(err,
				"chain agent rule 4 differs: want \"meta skuid 1001 fib daddr "
				"type local tcp dport 9000-9019 accept\""),
		"%d %s", r, err);
	/* Its range gone from its entry: the live rule is one too many. */
	t.others_ports[1] = (struct netlock_range){0, 0};
	r = netlock_verify(&t, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strstr(err, "chain agent rule 4 differs: want \"meta skuid 1002 fib "),
		"%d %s", r, err);
	/* An agent given a range: the live table lacks its rule. */
	t = s;
	t.others[t.n_others] = 1003;
	t.others_ports[t.n_others++] = (struct netlock_range){9200, 9209};
	r = netlock_verify(&t, err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "set agents lacks uid 1003"), "%d %s", r, err);
	LCHECK(outfd,
		run_nft("add", "element", "inet ocsb agents", "{ 1003 }", NULL, out, sizeof(out)) ==
			0,
		"%s", out);
	r = netlock_verify(&t, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strstr(err, "chain agent rule 6 differs: want \"meta skuid 1003 fib "),
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	/* The rule taken out by hand: missing, named; apply puts it back. */
	LCHECK(outfd,
		run_nft("flush", "chain", "inet ocsb agent", NULL, NULL, out, sizeof(out)) == 0 &&
			run_nft("add", "rule", "inet ocsb agent",
				"ct direction reply ct state established,related fib daddr type "
				"local accept",
				NULL, out, sizeof(out)) == 0 &&
			run_nft("add", "rule", "inet ocsb agent",
				"ip daddr 127.0.0.1 tcp dport 3128 accept", NULL, out,
				sizeof(out)) == 0 &&
			run_nft("add", "rule", "inet ocsb agent",
				"meta skuid 1000 fib daddr type local tcp dport 8000-8099 accept",
				NULL, out, sizeof(out)) == 0,
		"%s", out);
	r = netlock_verify(&s, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strstr(err,
				"chain agent rule 4 missing: want \"meta skuid 1001 fib daddr "
				"type local tcp dport 9000-9009 accept\""),
		"%d %s", r, err);
	/* A range rule for every agent (the pre-fix table's shape is drift too). */
	LCHECK(outfd,
		run_nft("add", "rule", "inet ocsb agent",
			"fib daddr type local tcp dport 9000-9009 accept", NULL, out,
			sizeof(out)) == 0,
		"%s", out);
	r = netlock_verify(&s, err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "chain agent rule 4 differs"), "%d %s", r, err);
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);

	/* The most rules a spec can have go in one batch and verify. */
	spec_max(&max);
	LCHECK(outfd, netlock_apply(&max, err, sizeof(err)) == 0, "%s", err);
	r = netlock_verify(&max, err, sizeof(err));
	LCHECK(outfd, r == 0, "%d %s", r, err);
	max.others_ports[NETLOCK_MAX_AGENTS - 1].lo++;
	r = netlock_verify(&max, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strstr(err, "meta skuid 2063 fib daddr type local tcp dport 18064-"),
		"%d %s", r, err);
	return 0;
}

static void live_ranges(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_live_ranges, NULL, &o, &r), 0);
	child_report(&r, "live ranges");
	spawn_result_free(&r);
	assert_int_not_equal(netlock_exists(), 1);
}

static void live_set(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_live_set, NULL, &o, &r), 0);
	child_report(&r, "live set");
	spawn_result_free(&r);
	assert_int_not_equal(netlock_exists(), 1);
}

/*
 * ocsb-provision --check while ocsb-agentd serves routes: the route ports come from the
 * guard (agentd's alone), so the table agentd installed is no drift, while a port agentd
 * does not serve still is.
 */
static int fn_guard_routes(void *arg, int outfd)
{
	struct netlock_spec agentd = {.uid = 1000,
		.others = {1001},
		.n_others = 1,
		.proxy_port = 3128,
		.inject_ports = {18400, 18401},
		.n_inject = 2,
		.inject_uid = 995,
		.inject_uports = {8443, 443},
		.n_uports = 2,
		.ns = {{AF_INET, {127, 0, 0, 53}}},
		.n_ns = 1};
	/*
	 * What a run for the second agent starts from: its own uid, the registry's other,
	 * ocsb-inject's account and a resolv.conf that changed since agentd read it.
	 */
	struct netlock_spec prov = {.uid = 1001,
		.others = {1000},
		.n_others = 1,
		.proxy_port = 3128,
		.inject_uid = 995,
		.ns = {{AF_INET, {10, 9, 9, 9}}, {AF_INET, {10, 9, 9, 10}}},
		.n_ns = 2};
	struct netlock_spec before = prov, t;
	struct mnl_socket *owner;
	char err[1024], out[4096];
	int r;

	(void)arg;
	if (enter_userns_netns(outfd) < 0)
		return 2;
	/* No guard: no routes, the spec unchanged. */
	r = netlock_guard_routes(&prov);
	LCHECK(outfd, r == 0 && prov.uid == 1001 && prov.n_inject == 0, "%d", r);
	/* A table of that name nobody owns is not agentd's: no routes from it. */
	LCHECK(outfd,
		run_nft("add", "table", "inet", "ocsb_guard", NULL, out, sizeof(out)) == 0 &&
			run_nft("add", "chain", "inet ocsb_guard agent", NULL, NULL, out,
				sizeof(out)) == 0 &&
			run_nft("add", "rule", "inet ocsb_guard agent",
				"meta skuid 1001 ip daddr 127.0.0.1 tcp dport 22 accept", NULL, out,
				sizeof(out)) == 0,
		"%s", out);
	r = netlock_guard_routes(&prov);
	LCHECK(outfd, r == 0 && prov.n_inject == 0, "an unowned guard gave %d routes", r);
	LCHECK(outfd, run_nft("delete", "table", "inet", "ocsb_guard", NULL, out, sizeof(out)) == 0,
		"%s", out);

	owner = mnl_socket_open(NETLINK_NETFILTER);
	LCHECK(outfd, owner && mnl_socket_bind(owner, 0, MNL_SOCKET_AUTOPID) == 0, "socket");
	LCHECK(outfd, netlock_guard_apply(&agentd, owner, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_apply(&agentd, err, sizeof(err)) == 0, "%s", err);
	/* Control: without the guard's routes, the run would call agentd's table drift. */
	r = netlock_verify(&before, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strstr(err, "chain agent rule 3 differs") &&
			strstr(err,
				"have [ meta load skuid => reg 1 ] [ cmp eq reg 1 0x000003e8 ]"),
		"%d %s", r, err);
	/* ... and so would its nameservers, read since. */
	t = before;
	t.uid = 1000;
	t.others[0] = 1001;
	memcpy(t.inject_ports, agentd.inject_ports, sizeof(t.inject_ports));
	t.n_inject = 2;
	memcpy(t.inject_uports, agentd.inject_uports, sizeof(t.inject_uports));
	t.n_uports = 2;
	r = netlock_verify(&t, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strstr(err, "chain inject rule 2 differs: want \"ip daddr 10.9.9.9"),
		"%d %s", r, err);

	r = netlock_guard_routes(&prov);
	LCHECK(outfd, r == 2, "%d", r);
	LCHECK(outfd,
		prov.uid == 1000 && prov.n_inject == 2 && prov.inject_ports[0] == 18400 &&
			prov.inject_ports[1] == 18401,
		"uid %u, %zu routes", (unsigned)prov.uid, prov.n_inject);
	/* ocsb-inject's chain as agentd has it: its upstream ports (ascending), its nameserver. */
	LCHECK(outfd,
		prov.inject_uid == 995 && prov.n_uports == 2 && prov.inject_uports[0] == 443 &&
			prov.inject_uports[1] == 8443 && prov.n_ns == 1 &&
			prov.ns[0].family == AF_INET &&
			memcmp(prov.ns[0].a, agentd.ns[0].a, 4) == 0,
		"inject uid %u, %zu upstream ports (%u), %zu nameservers",
		(unsigned)prov.inject_uid, prov.n_uports, prov.inject_uports[0], prov.n_ns);
	r = netlock_verify(&prov, err, sizeof(err));
	LCHECK(outfd, r == 0, "agentd's table is drift to the run: %d %s", r, err);

	/* A real drift is still one: a route port agentd does not serve. */
	LCHECK(outfd,
		run_nft("insert", "rule", "inet ocsb agent",
			"meta skuid 1000 ip daddr 127.0.0.1 tcp dport 22 accept", NULL, out,
			sizeof(out)) == 0,
		"%s", out);
	r = netlock_verify(&prov, err, sizeof(err));
	LCHECK(outfd, r == 1, "a port agentd does not serve passed: %d %s", r, err);
	LCHECK(outfd, netlock_apply(&prov, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&agentd, err, sizeof(err)) == 0, "%s", err);
	/* ... and a port opened to ocsb-inject that agentd's routes do not need. */
	LCHECK(outfd,
		run_nft("insert", "rule", "inet ocsb inject", "tcp dport 22 accept", NULL, out,
			sizeof(out)) == 0,
		"%s", out);
	r = netlock_verify(&prov, err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "chain inject rule 1 differs"),
		"a port for ocsb-inject passed: %d %s", r, err);
	LCHECK(outfd, netlock_apply(&prov, err, sizeof(err)) == 0, "%s", err);
	mnl_socket_close(owner);
	/* The guard goes with agentd's socket, and its routes with it: the run's own view. */
	prov = before;
	r = netlock_guard_routes(&prov);
	LCHECK(outfd, r == 0 && prov.n_inject == 0 && prov.n_uports == 0 && prov.n_ns == 2, "%d",
		r);
	return 0;
}

static void guard_routes_for_check(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_guard_routes, NULL, &o, &r), 0);
	child_report(&r, "guard routes");
	spawn_result_free(&r);
}

#define DIR_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(render_two_agents),
		cmocka_unit_test(render_invalid_others),
		DIR_TEST(registry_accounts_and_stale),
		DIR_TEST(registry_agent_range),
		DIR_TEST(registry_ports),
		cmocka_unit_test(live_set),
		cmocka_unit_test(live_ranges),
		cmocka_unit_test(guard_routes_for_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
