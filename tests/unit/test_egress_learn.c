/* SPDX-License-Identifier: MIT */
/*
 * Egress learn mode (issue 29): the `learn` and `proposal` keywords, learning in decisions
 * and in squid.conf, `--since` (cli/egress_learn.c). The proxy's log read back is
 * test_egress_log.c. Every refusal has an accepted control next to it.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "egress.h"
#include "egress_log.h"
#include "paths.h"
#include "util.h"

#include "../../cli/cli.h"
#include "egress_learn_unit.h"

#define WINDOW "learn 2026-12-06T21:00:00Z 2026-12-06T22:00:00Z\n"
#define LEARN "policy allowlist\n" WINDOW

static int parse_as(struct egress *e, const char *text, const char *file, char *err, size_t n)
{
	err[0] = '\0';
	return egress_parse_buf(e, text, strlen(text), file, err, n);
}

#define ok(e, text) ok_as((e), (text), "t.conf")

/* Refused with an error that starts with prefix; nothing of it kept. */
static void refused(const char *text, const char *prefix)
{
	struct egress e = {0};
	char err[512];

	if (parse_as(&e, text, "t.conf", err, sizeof(err)) != -1)
		fail_msg("accepted: %s", text);
	assert_err_prefix(err, prefix);
	assert_true(e.learn_from == 0 && e.learn_until == 0 && !e.learn_file);
	assert_true(e.n == 0 && e.proposals.n == 0);
	egress_free(&e);
}

/* ---- learn FROM UNTIL ---- */

static void learn_parse(void **state)
{
	struct egress e = {0};

	(void)state;
	ok(&e, LEARN);
	assert_int_equal(e.learn_from, T0);
	assert_int_equal(e.learn_until, T0 + 3600);
	assert_ptr_equal(e.learn_file, e.files.v[0]);
	egress_free(&e);
	/* 24 hours exactly is the longest window. */
	ok(&e, "learn 2026-12-06T21:00:00Z 2026-12-07T21:00:00Z\n");
	assert_int_equal(e.learn_until - e.learn_from, 86400);
	egress_free(&e);
}

static void learn_refused(void **state)
{
	/* FROM, UNTIL, and the one refused (timegm's round trip catches day 30 and month 13). */
	static const char *const bad_time[][3] = {
		{"2026-12-06T21:00:00", "2026-12-06T22:00:00Z", "2026-12-06T21:00:00"},
		{"2026-12-06T21:00:00Z", "2026-12-06T22:00:00+01:00", "2026-12-06T22:00:00+01:00"},
		{"2026-12-31T23:00:00Z", "2026-13-01T00:00:00Z", "2026-13-01T00:00:00Z"},
		{"2026-02-28T23:00:00Z", "2026-02-30T00:00:00Z", "2026-02-30T00:00:00Z"},
		{"2026-12-6T21:00:00Z", "2026-12-06T22:00:00Z", "2026-12-6T21:00:00Z"},
		{"1999-12-31T23:00:00Z", "2000-01-01T00:00:00Z", "1999-12-31T23:00:00Z"},
	};
	char text[128], want[128];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_time); i++) {
		snprintf(text, sizeof(text), "\nlearn %s %s\n", bad_time[i][0], bad_time[i][1]);
		snprintf(want, sizeof(want), "t.conf:2: learn '%s': give a UTC time as",
			bad_time[i][2]);
		refused(text, want);
	}
	refused("allow a.example\nlearn 2026-12-06T22:00:00Z 2026-12-06T21:00:00Z\n",
		"t.conf:2: learn: the end must come after the start");
	refused("learn 2026-12-06T21:00:00Z 2026-12-06T21:00:00Z\n",
		"t.conf:1: learn: the end must come after the start");
	refused("learn 2026-12-06T21:00:00Z 2026-12-07T21:00:01Z\n",
		"t.conf:1: learn: the end must come after the start, and at most 24 hours");
	refused(WINDOW WINDOW, "t.conf:2: 'learn' given twice (first on line 1)");
	refused("learn 2026-12-06T21:00:00Z\n", "t.conf:1: 'learn' takes 2 values, got 1");
}

/* ---- learning on and off ---- */

static void learn_update(void **state)
{
	struct egress e = {0};

	(void)state;
	ok(&e, LEARN);
	assert_int_equal(egress_learn_update(&e, T0 + 1), 1);
	assert_int_equal(e.learning, 1);
	assert_int_equal(egress_learn_update(&e, T0 + 3599), 1);
	assert_int_equal(egress_learn_update(&e, T0 + 3600), 0);
	assert_int_equal(e.learning, 0);
	assert_int_equal(egress_learn_update(&e, T0 + 86400), 0);
	egress_free(&e);
	/* The blocklist has nothing to learn; egress off lets nothing through; no window. */
	ok(&e, WINDOW);
	assert_int_equal(e.learn_until, T0 + 3600);
	assert_int_equal(egress_learn_update(&e, T0 + 1), 0);
	egress_free(&e);
	ok(&e, "egress off\n" LEARN);
	assert_int_equal(egress_learn_update(&e, T0 + 1), 0);
	egress_free(&e);
	ok(&e, "policy allowlist\n");
	assert_int_equal(egress_learn_update(&e, T0 + 1), 0);
	egress_free(&e);
}

/* A file that fails after `learn` leaves the window an earlier file set, or none. */
static void learn_rollback(void **state)
{
	struct egress e = {0};
	char err[512];

	(void)state;
	ok_as(&e, "policy allowlist\n", "a.conf");
	assert_int_equal(parse_as(&e, WINDOW "allow bad_host\n", "b.conf", err, sizeof(err)), -1);
	assert_err_prefix(err, "b.conf:2: 'bad_host' is not a host name");
	assert_true(e.learn_from == 0 && e.learn_until == 0 && !e.learn_file);
	/* Control: the window of a good file stays, also when a later file fails. */
	ok_as(&e, WINDOW, "c.conf");
	assert_int_equal(e.learn_until, T0 + 3600);
	assert_string_equal(e.learn_file, "c.conf");
	assert_int_equal(parse_as(&e, "learn 2026-12-07T00:00:00Z 2026-12-07T01:00:00Z\nbogus\n",
				 "d.conf", err, sizeof(err)),
		-1);
	assert_true(e.learn_from == T0 && e.learn_until == T0 + 3600);
	assert_string_equal(e.learn_file, "c.conf");
	egress_free(&e);
}

static void put_file(const char *rel, const char *text)
{
	unit_write(unit_path(rel), text, strlen(text), 0644);
}

static void learn_rollback_load(void **state)
{
	struct egress e;
	struct paths p;
	char err[512];

	(void)state;
	assert_int_equal(paths_under(&p, unit_dir), 0);
	assert_int_equal(mkdir(unit_path("etc"), 0755), 0);
	assert_int_equal(mkdir(unit_path("etc/ocsb"), 0755), 0);
	assert_int_equal(mkdir(unit_path("etc/ocsb/egress.d"), 0755), 0);
	put_file("etc/ocsb/egress.conf", LEARN);
	put_file("etc/ocsb/egress.d/10-a.conf", "allow a.example\nconnect a.example:0\n");
	memset(&e, 0x5a, sizeof(e));
	assert_int_equal(
		egress_load_as(&e, &p, getuid(), NULL, (uid_t)-1, err, sizeof(err)), -EINVAL);
	assert_true(e.learn_from == 0 && e.learn_until == 0 && !e.learn_file && !e.learning);
	egress_free(&e);
	/* Control: the drop-in mended, the window is the main file's. */
	put_file("etc/ocsb/egress.d/10-a.conf", "allow a.example\n");
	assert_int_equal(egress_load_as(&e, &p, getuid(), NULL, (uid_t)-1, err, sizeof(err)), 0);
	assert_int_equal(e.learn_until, T0 + 3600);
	assert_string_equal(e.learn_file, unit_path("etc/ocsb/egress.conf"));
	egress_free(&e);
}

/* ---- proposal ---- */

static void proposal_first(void **state)
{
	struct egress e = {0};

	(void)state;
	refused("allow a.example\nproposal\n", "t.conf:2: proposal: say it first");
	refused("policy allowlist\nproposal\n", "t.conf:2: proposal: say it first");
	refused("proposal\nproposal\n", "t.conf:2: 'proposal' given twice");
	refused("proposal\npolicy allowlist\n", "t.conf:2: policy: a proposal holds");
	refused("proposal\negress off\n", "t.conf:2: egress: a proposal holds");
	refused("proposal\ndns allow\n", "t.conf:2: dns: a proposal holds");
	refused("proposal\n" WINDOW, "t.conf:2: learn: a proposal holds");
	/* Its rules are checked all the same. */
	refused("proposal\nallow bad_host\n", "t.conf:2: 'bad_host' is not a host name");
	/* Control: after comments, with the rules a proposal may hold. */
	ok(&e, "# why\n\nproposal\nallow a.example\nconnect g.example:22\nblock b.example\n");
	assert_int_equal(e.proposals.n, 1);
	egress_free(&e);
}

static void proposal_dropped(void **state)
{
	struct egress e = {0};

	(void)state;
	ok_as(&e, "policy allowlist\nallow keep.example\n", "a.conf");
	ok_as(&e, "proposal\nallow new.example\nconnect new.example:22\n", "p.conf");
	assert_int_equal(e.n, 1);
	assert_int_equal(e.files.n, 2);
	assert_int_equal(e.proposals.n, 1);
	assert_string_equal(e.proposals.v[0], "p.conf");
	expect_tag(&e, "new.example", 443, 0, "policy-allowlist");
	expect_tag(&e, "new.example", 22, 0, "port-not-80-443");
	expect_tag(&e, "keep.example", 443, 1, "allow");
	/* Control: the same rules without `proposal` are in force. */
	ok_as(&e, "allow new.example\nconnect new.example:22\n", "q.conf");
	assert_int_equal(e.n, 3);
	assert_int_equal(e.proposals.n, 1);
	expect_tag(&e, "new.example", 443, 1, "allow");
	expect_tag(&e, "new.example", 22, 1, "connect-rule");
	egress_free(&e);
}

/* ---- decisions and squid.conf while learning ---- */

static void learning_set(struct egress *e, const char *rules)
{
	memset(e, 0, sizeof(*e));
	ok(e, rules);
	egress_learn_update(e, T0 + 60);
}

static void decide_learning(void **state)
{
	struct egress e;

	(void)state;
	learning_set(&e, LEARN "allow ok.example\nblock bad.example\n");
	assert_int_equal(e.learning, 1);
	expect_tag(&e, "new.example", 443, 1, "learn");
	expect_tag(&e, "new.example", 80, 1, "learn");
	expect_tag(&e, "ok.example", 443, 1, "allow");
	/* The built-in refusals and the block rules do not learn. */
	expect_tag(&e, "127.0.0.1", 80, 0, "loopback-link-local");
	expect_tag(&e, "169.254.169.254", 80, 0, "loopback-link-local");
	expect_tag(&e, "localhost", 80, 0, "loopback-link-local");
	expect_tag(&e, "new.example", 8080, 0, "port-not-80-443");
	expect_tag(&e, "bad.example", 443, 0, "block");
	expect_tag(&e, "10.1.2.3", 443, 0, "private-network");
	expect_tag(&e, "intranet", 443, 0, "dotless-name");
	/* Control: the window over, the allowlist refuses. */
	egress_learn_update(&e, T0 + 3600);
	expect_tag(&e, "new.example", 443, 0, "policy-allowlist");
	expect_tag(&e, "ok.example", 443, 1, "allow");
	egress_free(&e);
}

static void render(const struct egress *e, struct buf *out)
{
	struct egress_squid sq = {
		.port = 3128, .state_dir = "/var/lib/ocsb/egress", .user = "proxy"};

	memset(out, 0, sizeof(*out));
	assert_int_equal(egress_render_squid(e, &sq, out), 0);
}

static void squid_learning(void **state)
{
	struct egress e;
	struct buf on, off;

	(void)state;
	learning_set(&e, LEARN "allow ok.example\n");
	render(&e, &on);
	assert_has_line(on.data, "http_access allow all ocsb_m_learn");
	/* Neither the early deny of the allowlist nor its last line. */
	assert_null(strstr(on.data, "ocsb_m_policy\n"));
	assert_non_null(strstr(on.data, "# learn mode until 2026-12-06T22:00:00Z"));
	/* Control: the same rules after the window. */
	egress_learn_update(&e, T0 + 3600);
	render(&e, &off);
	assert_null(strstr(off.data, "ocsb_m_learn"));
	assert_has_line(off.data, "http_access deny all ocsb_m_policy");
	assert_has_line(off.data, "http_access deny !ocsb_allowed ocsb_m_policy");
	buf_free(&on);
	buf_free(&off);
	egress_free(&e);
}

static void squid_blocklist_learn_inert(void **state)
{
	struct egress a, b;
	struct buf ta, tb;

	(void)state;
	/* The same lines at the same line numbers: squid's ACL names carry them. */
	learning_set(&a, "allow ok.example\nblock bad.example\n");
	learning_set(&b, "allow ok.example\nblock bad.example\n" WINDOW);
	assert_true(b.learn_until == T0 + 3600 && !b.learning);
	render(&a, &ta);
	render(&b, &tb);
	assert_string_equal(ta.data, tb.data);
	assert_has_line(ta.data, "http_access allow all ocsb_m_default");
	buf_free(&ta);
	buf_free(&tb);
	egress_free(&a);
	egress_free(&b);
}

/* ---- --since ---- */

static void since(void **state)
{
	static const char *const bad[] = {"", "soon", "0m", "5x", "30", "m", "-5m",
		"2026-12-06T21:00", "2026-12-06T21:00:00", "2026-12-06 21:00:00Z", "2026-12-06x"};
	time_t t;

	(void)state;
	assert_int_equal(egress_since("30m", T0, &t), 0);
	assert_int_equal(t, T0 - 1800);
	assert_int_equal(egress_since("2h", T0, &t), 0);
	assert_int_equal(t, T0 - 7200);
	assert_int_equal(egress_since("7d", T0, &t), 0);
	assert_int_equal(t, T0 - 7 * 86400);
	assert_int_equal(egress_since("2026-12-06", T0, &t), 0);
	assert_int_equal(t, 1796515200);
	assert_int_equal(egress_since("2026-12-06T21:00:00Z", T0, &t), 0);
	assert_int_equal(t, T0);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (egress_since(bad[i], T0, &t) != -1)
			fail_msg("accepted '%s'", bad[i]);
}

#define FILE_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(learn_parse),
		cmocka_unit_test(learn_refused),
		cmocka_unit_test(learn_update),
		cmocka_unit_test(learn_rollback),
		FILE_TEST(learn_rollback_load),
		cmocka_unit_test(proposal_first),
		cmocka_unit_test(proposal_dropped),
		cmocka_unit_test(decide_learning),
		cmocka_unit_test(squid_learning),
		cmocka_unit_test(squid_blocklist_learn_inert),
		cmocka_unit_test(since),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
