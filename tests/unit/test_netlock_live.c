/* SPDX-License-Identifier: MIT */
/*
 * The netlock table live (test_netlock renders it and holds it to nft's own encoding):
 * apply / verify / remove, the record the warden checks against (netlock_snap.c), the
 * injector's chain and the kept socket's latency, each inside a private user+net
 * namespace, so the host never sees table ocsb.
 */
#define _GNU_SOURCE
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>

#include "netlock_unit.h"

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
				"netlock: chain agent has an extra rule 11: "
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
				"reply ct state established,related fib daddr type local "
				"accept\"") == 0,
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
				"ct state established,related fib daddr type local accept\" "
				"[ ct load direction => "
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
	LCHECK(outfd, r == 1 && strstr(err, "chain output has an extra rule 3: "), "%d %s", r, err);
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

	/* Another spec is a difference too (DNS switched off: rule 7 is no longer udp 53). */
	r = netlock_verify(
		&(struct netlock_spec){
			.uid = 65534, .proxy_port = 65535, .ports_lo = 1, .ports_hi = 65535},
		err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "chain agent rule 7 differs: want \"meta l4proto tcp "),
		"%d %s", r, err);
	r = netlock_verify(&(struct netlock_spec){.uid = 65533,
				   .proxy_port = 65535,
				   .ports_lo = 1,
				   .ports_hi = 65535,
				   .dns_allow = 1},
		err, sizeof(err));
	LCHECK(outfd, r == 1 && strcmp(err, "netlock: set agents lacks uid 65533 (an agent without netlock)") == 0,
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

/*
 * The warden's check (netlock_snap.c), live: every hand edit the rule-by-rule verify names
 * above is seen as an alteration of the recorded table, and a change elsewhere is not.
 */
static int fn_live_snap(void *arg, int outfd)
{
	static const char *const edits[][3] = {
		{"add", "rule", "inet ocsb agent accept"},
		{"flush", "chain", "inet ocsb agent"},
		{"insert", "rule", "inet ocsb agent tcp dport 22 accept"},
		{"add", "chain", "inet ocsb output { policy drop; }"},
		{"add", "table", "inet ocsb { flags dormant; }"},
		{"add", "chain", "inet ocsb extra"},
		{"delete", "element", "inet ocsb agents { 65534 }"},
		{"add", "element", "inet ocsb agents { 4242 }"},
		{"delete", "table", "inet ocsb"},
	};
	const struct netlock_spec *s = &spec_all;
	struct netlock_snap snap = {0};
	char err[1024], out[4096], cmd[256];
	int r;

	(void)arg;
	if (enter_userns_netns(outfd) < 0)
		return 2;
	r = netlock_snap_check(NULL, &snap, err, sizeof(err));
	LCHECK(outfd, r == 1 && strstr(err, "nothing recorded"), "%d %s", r, err);
	LCHECK(outfd, netlock_apply_snap(s, NULL, &snap, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, snap.gen != 0 && snap.data.len > 0, "a record");
	/* The record is the table we built: the independent reading agrees. */
	LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_snap_check(NULL, &snap, err, sizeof(err)) == 0, "%s", err);
	for (size_t i = 0; i < ARRAY_SIZE(edits); i++) {
		snprintf(cmd, sizeof(cmd), "%s %s %s", edits[i][0], edits[i][1], edits[i][2]);
		LCHECK(outfd, run_nft(cmd, NULL, NULL, NULL, NULL, out, sizeof(out)) == 0,
			"nft %s: %s", cmd, out);
		LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 1, "verify sees: %s", cmd);
		r = netlock_snap_check(NULL, &snap, err, sizeof(err));
		LCHECK(outfd,
			r == 1 && (strstr(err, "netlock: table inet ocsb altered (first difference: ") ==
					  err ||
					  strcmp(err, "netlock: table inet ocsb missing") == 0),
			"nft %s: %d %s", cmd, r, err);
		dprintf(outfd, "# %s: %s\n", cmd, err);
		LCHECK(outfd, netlock_apply_snap(s, NULL, &snap, err, sizeof(err)) == 0, "%s", err);
		LCHECK(outfd, netlock_snap_check(NULL, &snap, err, sizeof(err)) == 0, "%s", err);
		LCHECK(outfd, netlock_verify(s, err, sizeof(err)) == 0, "%s", err);
	}
	/* Positive control: another table's batch changes the generation, not our table. */
	LCHECK(outfd,
		run_nft("add table inet other", NULL, NULL, NULL, NULL, out, sizeof(out)) == 0 &&
			run_nft("add chain inet other c", NULL, NULL, NULL, NULL, out, sizeof(out)) ==
				0,
		"%s", out);
	r = netlock_snap_check(NULL, &snap, err, sizeof(err));
	LCHECK(outfd, r == 0, "another table: %d %s", r, err);
	/* The guard is recorded the same way, through its owner socket. */
	{
		struct mnl_socket *owner = mnl_socket_open(NETLINK_NETFILTER);
		struct netlock_snap g = {0};

		LCHECK(outfd, owner && mnl_socket_bind(owner, 0, MNL_SOCKET_AUTOPID) == 0,
			"socket");
		LCHECK(outfd, netlock_guard_apply_snap(s, owner, &g, err, sizeof(err)) == 0, "%s",
			err);
		LCHECK(outfd, g.gen > snap.gen && g.data.len > 0, "guard gen %u, table %u",
			g.gen, snap.gen);
		LCHECK(outfd, netlock_guard_verify(s, err, sizeof(err)) == 0, "%s", err);
		/* The guard's batch is not a change of the plain table. */
		LCHECK(outfd, netlock_snap_check(NULL, &snap, err, sizeof(err)) == 0, "%s", err);
		netlock_snap_free(&g);
		mnl_socket_close(owner);
	}
	netlock_snap_free(&snap);
	return 0;
}

static void live_snap(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_live_snap, NULL, &o, &r), 0);
	child_report(&r, "live snap");
	spawn_result_free(&r);
}

/* ocsb-inject's chain, live: verified with the rest, its absence and its presence told. */
static int fn_live_inject(void *arg, int outfd)
{
	struct netlock_spec none = spec_injector;
	char err[1024], out[4096];
	int r;

	(void)arg;
	none.inject_uid = 0;
	if (enter_userns_netns(outfd) < 0)
		return 2;
	LCHECK(outfd, netlock_apply(&spec_injector, err, sizeof(err)) == 0, "%s", err);
	r = netlock_verify(&spec_injector, err, sizeof(err));
	LCHECK(outfd, r == 0, "%d %s", r, err);
	LCHECK(outfd,
		run_nft("list", "chain", "inet ocsb inject", NULL, NULL, out, 4096) == 0 &&
			strstr(out, "ip6 daddr ::1 udp dport 53 accept"),
		"%s", out);
	r = netlock_verify(&none, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: unexpected chain inject in table inet ocsb") == 0,
		"%d %s", r, err);
	LCHECK(outfd, run_nft("flush", "chain", "inet ocsb inject", NULL, NULL, out, 4096) == 0,
		"%s", out);
	r = netlock_verify(&spec_injector, err, sizeof(err));
	LCHECK(outfd,
		r == 1 &&
			strcmp(err,
				"netlock: chain inject rule 1 missing: want \"ct direction reply "
				"ip saddr 127.0.0.1 tcp sport 18400-18415 accept\"") == 0,
		"%d %s", r, err);
	LCHECK(outfd, netlock_apply(&none, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&none, err, sizeof(err)) == 0, "%s", err);
	r = netlock_verify(&spec_injector, err, sizeof(err));
	LCHECK(outfd,
		r == 1 && strcmp(err, "netlock: chain inject missing in table inet ocsb") == 0,
		"%d %s", r, err);
	return 0;
}

static void live_inject_chain(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_live_inject, NULL, &o, &r), 0);
	child_report(&r, "live inject chain");
	spawn_result_free(&r);
}

/*
 * ocsb-agentd's kept socket: apply and verify through one socket, many times, and an
 * answer left queued by an exchange given up on (a dump request never read) does not
 * confuse the next one (without the drain, its sequence number fails the next read).
 */
static int fn_kept_socket(void *arg, int outfd)
{
	const struct netlock_spec *s = &spec_all;
	struct mnl_socket *nl;
	char err[1024], buf[8192];
	struct nlmsghdr *h;
	int r;

	if (enter_userns_netns(outfd) < 0)
		return 2;
	nl = mnl_socket_open(NETLINK_NETFILTER);
	LCHECK(outfd, nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) == 0, "socket");
	for (int i = 0; i < 5; i++) {
		LCHECK(outfd, netlock_apply_sock(s, nl, err, sizeof(err)) == 0, "apply %d: %s", i, err);
		r = netlock_verify_sock(s, nl, err, sizeof(err));
		LCHECK(outfd, r == 0, "verify %d: %d %s", i, r, err);
	}
	/* Leave the answers of a table dump queued on the socket, unread. */
	h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	h->nlmsg_seq = 1;
	mnl_nlmsg_put_extra_header(h, sizeof(struct nfgenmsg));
	LCHECK(outfd, mnl_socket_sendto(nl, h, h->nlmsg_len) >= 0, "dump request");
	r = netlock_verify_sock(s, nl, err, sizeof(err));
	LCHECK(outfd, r == 0, "verify after a stale answer: %d %s", r, err);
	LCHECK(outfd, mnl_socket_sendto(nl, h, h->nlmsg_len) >= 0, "dump request");
	LCHECK(outfd, netlock_apply_sock(s, nl, err, sizeof(err)) == 0, "apply after a stale answer: %s", err);
	/* Control: the table it verifies is the one in the kernel (a change is seen). */
	LCHECK(outfd, netlock_remove(err, sizeof(err)) == 0, "%s", err);
	r = netlock_verify_sock(s, nl, err, sizeof(err));
	LCHECK(outfd, r == 1, "the removed table verified: %d %s", r, err);
	mnl_socket_close(nl);
	return 0;
}

static void kept_socket(void **state)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_kept_socket, NULL, &o, &r), 0);
	child_report(&r, "kept socket");
	spawn_result_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kept_socket),
		cmocka_unit_test(live_inject_chain),
		cmocka_unit_test(live_snap),
		cmocka_unit_test_setup_teardown(
			live_apply_verify_remove, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
