/* SPDX-License-Identifier: MIT */
/*
 * The proxy's access log read back for learn mode (issue 29, egress/egress_log.c): log
 * lines, plain hosts, the tally, the public suffix list, the proposal (parsed back as rules)
 * and the table of refusals. Every refusal has an accepted control next to it.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "egress.h"
#include "egress_log.h"
#include "util.h"

#include "egress_learn_unit.h"

/* ---- log lines ---- */

static void log_parse(void **state)
{
	static const struct {
		const char *line, *host, *method, *step, *rule;
		unsigned port;
		int denied;
	} good[] = {
		{"1796590801.250     45 127.0.0.1 TCP_TUNNEL/200 5120 CONNECT api.example.com:8443 "
		 "- HIER_DIRECT/192.0.2.1 - learn builtin",
			"api.example.com", "CONNECT", "learn", "builtin", 8443, 0},
		{"1796590802.000      0 127.0.0.1 TCP_DENIED/403 3900 GET http://bad.example/x?y=1 "
		 "- "
		 "HIER_NONE/- text/html block /etc/ocsb/egress.conf:12",
			"bad.example", "GET", "block", "/etc/ocsb/egress.conf:12", 80, 1},
		/* CONNECT without a port, https, older lines without step and rule, "-". */
		{"1 0 c TCP_TUNNEL/200 0 CONNECT h.example - - - - -", "h.example", "CONNECT", "",
			"", 443, 0},
		{"1 0 c TCP_MISS/200 0 GET https://s.example/p", "s.example", "GET", "", "", 443,
			0},
		{"1 0 c TCP_MISS/200 0 GET http://h.example:65535/", "h.example", "GET", "", "",
			65535, 0},
		{"1 0 c TCP_MISS/200 0 POST http://[2001:db8::1]:8080/ - HIER_NONE/- - learn "
		 "builtin",
			"2001:db8::1", "POST", "learn", "builtin", 8080, 0},
		{"1 0 c TCP_DENIED/403 0 CONNECT [2001:db8::2]:443", "2001:db8::2", "CONNECT", "",
			"", 443, 1},
	};
	struct egress_logrec r;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (egress_log_parse(good[i].line, &r) != 0)
			fail_msg("refused '%s'", good[i].line);
		assert_string_equal(r.host, good[i].host);
		assert_string_equal(r.method, good[i].method);
		assert_string_equal(r.step, good[i].step);
		assert_string_equal(r.rule, good[i].rule);
		assert_int_equal(r.port, good[i].port);
		assert_int_equal(r.denied, good[i].denied);
	}
	assert_int_equal(egress_log_parse(good[0].line, &r), 0);
	assert_true(r.ts > 1796590801.2 && r.ts < 1796590801.3);
	assert_string_equal(r.action, "TCP_TUNNEL/200");
}

static void log_parse_refused(void **state)
{
	static const char *const bad[] = {"", "garbage", "not a log line but seven words",
		"1 0 c TCP_MISS/200 0 GET http://h.example:0/",
		"1 0 c TCP_MISS/200 0 GET http://h.example:70000/",
		"1 0 c TCP_MISS/200 0 GET http://h.example:/", "1 0 c TCP_MISS/200 0 GET http:///x",
		"1 0 c TCP_TUNNEL/200 0 CONNECT :443",
		"1 0 c TCP_MISS/200 0 GET http://[2001:db8::1/",
		"nan 0 c TCP_MISS/200 0 GET http://h.example/",
		"-1 0 c TCP_MISS/200 0 GET http://h.example/",
		"1e15 0 c TCP_MISS/200 0 GET http://h.example/"};
	struct egress_logrec r;

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (egress_log_parse(bad[i], &r) != -1)
			fail_msg("accepted '%s'", bad[i]);
	/* Control: the good form of the same lines. */
	assert_int_equal(
		egress_log_parse("1 0 c TCP_MISS/200 0 GET http://h.example:8080/", &r), 0);
	assert_int_equal(egress_log_parse("1 0 c TCP_TUNNEL/200 0 CONNECT h.example:443", &r), 0);
}

static void host_plain(void **state)
{
	static const char *const good[] = {"example.com", "a-b.example", "x1.y2.example",
		"xn--bcher-kva.example", "1.2.3.4", "2001:db8::1", "::1", "a.b2"};
	static const char *const bad[] = {"", "Example.com", "a_b.example", "a..b", ".a.example",
		"example.com.", "-a.example", "a-.example", "a.-b.example", "localhost",
		"a\033.example", "a b.example", "a/b.example", "1.2.3", "a.b.123", "[::1]",
		"h.example:443"};
	char label[80], name[300];

	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		if (!egress_host_plain(good[i]))
			fail_msg("refused '%s'", good[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		if (egress_host_plain(bad[i]))
			fail_msg("accepted '%s'", bad[i]);
	/* A label of 63 passes, 64 not; 253 characters pass, 254 not. */
	memset(label, 'a', 64);
	snprintf(name, sizeof(name), "%.63s.example", label);
	assert_true(egress_host_plain(name));
	snprintf(name, sizeof(name), "%.64s.example", label);
	assert_false(egress_host_plain(name));
	snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.61s", label, label, label, label);
	assert_int_equal(strlen(name), 253);
	assert_true(egress_host_plain(name));
	snprintf(name, sizeof(name), "%.63s.%.63s.%.63s.%.62s", label, label, label, label);
	assert_false(egress_host_plain(name));
}

/* ---- the tally ---- */

static void add(struct egress_tally *t, const char *host, unsigned port, const char *method,
	double ts, const char *step, int denied)
{
	struct egress_logrec r = {.port = port, .ts = ts, .denied = denied};

	snprintf(r.host, sizeof(r.host), "%s", host);
	snprintf(r.method, sizeof(r.method), "%s", method);
	snprintf(r.step, sizeof(r.step), "%s", step);
	snprintf(r.rule, sizeof(r.rule), "%s", denied ? "t.conf:3" : "builtin");
	assert_int_equal(egress_tally_add(t, &r), 0);
}

static void tally_counts(void **state)
{
	struct egress_tally t = {0};

	(void)state;
	add(&t, "a.example", 443, "CONNECT", 100, "learn", 0);
	add(&t, "a.example", 443, "HEAD", 50, "learn", 0);
	add(&t, "a.example", 443, "PUT", 200, "allow", 0);
	add(&t, "a.example", 443, "DELETE", 150, "learn", 0);
	add(&t, "a.example", 80, "GET", 10, "learn", 0);
	add(&t, "b.example", 443, "CONNECT", 10, "learn", 0);
	assert_int_equal(t.n, 3);
	egress_tally_sort(&t);
	assert_string_equal(t.v[0].host, "a.example");
	assert_int_equal(t.v[0].port, 443);
	assert_int_equal(t.v[0].count, 4);
	assert_true(t.v[0].first == 50 && t.v[0].last == 200);
	assert_int_equal(
		t.v[0].methods, EGRESS_M_CONNECT | EGRESS_M_GET | EGRESS_M_POST | EGRESS_M_OTHER);
	assert_string_equal(t.v[0].step, "allow"); /* of the latest */
	assert_true(!strcmp(t.v[1].host, "a.example") && t.v[1].port == 80);
	assert_int_equal(t.v[1].methods, EGRESS_M_GET);
	assert_string_equal(t.v[2].host, "b.example");
	assert_int_equal(t.dropped, 0);
	egress_tally_free(&t);
}

/*
 * Not here: the `dropped` path past EGRESS_TALLY_MAX destinations. Reaching it takes some
 * 5 s and 300 MB (a slot is 1.2 KB, the table 262,144 slots by then).
 */
static void tally_filters(void **state)
{
	static const char text[] =
		"1000 0 c TCP_TUNNEL/200 0 CONNECT l1.example:443 - - - learn builtin\n"
		"1000 0 c TCP_DENIED/403 0 CONNECT l2.example:443 - - - learn builtin\n"
		"1000 0 c TCP_TUNNEL/200 0 CONNECT l3.example:443 - - - allow t.conf:1\n"
		"5000 0 c TCP_TUNNEL/200 0 CONNECT l4.example:443 - - - learn builtin\n"
		"2000 0 c TCP_TUNNEL/200 0 CONNECT l7.example:443 - - - learn builtin\n"
		"1000 0 c TCP_DENIED/403 0 GET http://d1.example/ - - - policy-allowlist builtin\n"
		"10 0 c TCP_DENIED/403 0 GET http://d0.example/ - - - policy-allowlist builtin\n"
		"garbage\n"
		"1500 0 c TCP_TUNNEL/200 0 CONNECT l1.example:443 - - - learn builtin";
	struct egress_tally t = {0};

	(void)state;
	/* Learned: step learn, not refused, within [from, until]. */
	assert_int_equal(egress_tally_text(&t, text, strlen(text), 1, 500, 2000), 0);
	egress_tally_sort(&t);
	assert_int_equal(t.n, 2);
	assert_true(!strcmp(t.v[0].host, "l1.example") && t.v[0].count == 2);
	assert_string_equal(t.v[1].host, "l7.example");
	egress_tally_free(&t);
	/* Refused, from 500 on. */
	assert_int_equal(egress_tally_text(&t, text, strlen(text), 0, 500, 0), 0);
	egress_tally_sort(&t);
	assert_int_equal(t.n, 2);
	assert_string_equal(t.v[0].host, "d1.example");
	assert_string_equal(t.v[1].host, "l2.example");
	egress_tally_free(&t);
	/* Control: from 0, the early refusal counts too. */
	assert_int_equal(egress_tally_text(&t, text, strlen(text), 0, 0, 0), 0);
	assert_int_equal(t.n, 3);
	egress_tally_free(&t);
}

/* ---- the public suffix list ---- */

static const char psl_text[] = "// comment\ncom\nuk\nco.uk\n*.ck\n!www.ck\n\n  \n";

static void expect_reg(const struct egress_psl *psl, const char *host, const char *want)
{
	char out[256];

	egress_registrable(psl, host, out, sizeof(out));
	if (strcmp(out, want) != 0)
		fail_msg("%s: got %s, want %s", host, out, want);
}

static void psl_registrable(void **state)
{
	struct egress_psl psl, none;

	(void)state;
	assert_int_equal(egress_psl_parse(&psl, psl_text, strlen(psl_text)), 0);
	assert_int_equal(psl.rules.n, 5);
	expect_reg(&psl, "a.b.example.co.uk", "example.co.uk");
	expect_reg(&psl, "www.ck", "www.ck");
	expect_reg(&psl, "a.www.ck", "www.ck");
	expect_reg(&psl, "foo.bar.ck", "foo.bar.ck");
	expect_reg(&psl, "x.y.foo.bar.ck", "foo.bar.ck");
	expect_reg(&psl, "x.example.com", "example.com");
	expect_reg(&psl, "example.com", "example.com");
	expect_reg(&psl, "192.0.2.1", "192.0.2.1");
	expect_reg(&psl, "2001:db8::1", "2001:db8::1");
	/* Without a list: the last two labels. */
	assert_int_equal(egress_psl_parse(&none, "", 0), 0);
	assert_int_equal(none.rules.n, 0);
	expect_reg(&none, "a.b.example.co.uk", "co.uk");
	expect_reg(&none, "x.example.com", "example.com");
	expect_reg(&none, "192.0.2.1", "192.0.2.1");
	egress_psl_free(&psl);
	egress_psl_free(&none);
}

/* ---- the proposal ---- */

static void proposal_render(void **state)
{
	struct egress_tally t = {0};
	struct egress_psl psl;
	struct egress e = {0};
	struct buf out = {0};
	char *open;
	long at_uk, at_com;

	(void)state;
	assert_int_equal(egress_psl_parse(&psl, psl_text, strlen(psl_text)), 0);
	/* Three ports of one host, the earliest first use on the second. */
	add(&t, "a.example.com", 80, "GET", (double)T0 + 90, "learn", 0);
	add(&t, "a.example.com", 443, "CONNECT", (double)T0 + 50, "learn", 0);
	add(&t, "a.example.com", 443, "CONNECT", (double)T0 + 95, "learn", 0);
	add(&t, "a.example.com", 8443, "CONNECT", (double)T0 + 70, "learn", 0);
	add(&t, "b.example.com", 443, "CONNECT", (double)T0 + 100, "learn", 0);
	add(&t, "x.example.co.uk", 443, "POST", (double)T0 + 100, "learn", 0);
	for (int i = 0; i < 4; i++)
		add(&t, "bad_host.example", 443, "CONNECT", (double)T0 + 100, "learn", 0);
	for (unsigned p = 1000; p < 1010; p++)
		add(&t, "m.example.com", p, "CONNECT", (double)T0 + 100, "learn", 0);
	assert_int_equal(egress_proposal_render(&t, &psl, T0, T0 + 3600, "box1", &out), 4);
	assert_non_null(strstr(out.data, "on box1: NOT in force"));
	assert_has_line(out.data, "proposal");
	at_uk = unit_line_at(out.data, "# example.co.uk: 1 host, 1 request");
	at_com = unit_line_at(out.data, "# example.com: 3 hosts, 15 requests");
	if (at_uk < 0 || at_com < at_uk)
		fail_msg("groups %ld %ld in:\n%s", at_uk, at_com, out.data);
	assert_has_line(out.data,
		"allow a.example.com  # 1 request (GET port 80); 2 requests "
		"(CONNECT port 443); 1 request (CONNECT port 8443), first "
		"2026-12-06T21:00:50Z");
	assert_true(unit_line_at(out.data,
			    "allow b.example.com  # 1 request (CONNECT port 443), "
			    "first 2026-12-06T21:01:40Z") > at_com);
	assert_has_line(out.data,
		"allow x.example.co.uk  # 1 request (POST port 443), first "
		"2026-12-06T21:01:40Z");
	/* Ten ports: eight listed, two counted (a rule line is at most 4096 bytes). */
	assert_non_null(strstr(out.data, "(CONNECT port 1007); 2 more ports (2 requests), first"));
	assert_null(strstr(out.data, "bad_host"));
	assert_non_null(strstr(out.data,
		"# Left out: 1 destination whose name is not a plain host "
		"name (4 requests)"));

	/* Parsed back: checked, not in force. */
	ok_as(&e, "policy allowlist\n", "egress.conf");
	ok_as(&e, out.data, "p.conf");
	assert_true(e.n == 0 && e.proposals.n == 1);
	expect_tag(&e, "a.example.com", 443, 0, "policy-allowlist");
	expect_tag(&e, "x.example.co.uk", 443, 0, "policy-allowlist");
	egress_free(&e);
	/* Control: without the `proposal` line it allows the learned hosts and no other. */
	open = strstr(out.data, "\nproposal\n");
	assert_non_null(open);
	open[1] = '#';
	ok_as(&e, "policy allowlist\n", "egress.conf");
	ok_as(&e, out.data, "p.conf");
	assert_true(e.n == 4 && e.proposals.n == 0);
	expect_tag(&e, "a.example.com", 443, 1, "allow");
	expect_tag(&e, "b.example.com", 443, 1, "allow");
	expect_tag(&e, "x.example.co.uk", 443, 1, "allow");
	expect_tag(&e, "m.example.com", 443, 1, "allow");
	expect_tag(&e, "c.example.com", 443, 0, "policy-allowlist");
	expect_tag(&e, "example.com", 443, 0, "policy-allowlist");
	egress_free(&e);
	buf_free(&out);
	egress_tally_free(&t);
	/* Nothing learned: 0 lines, nothing left out. */
	assert_int_equal(egress_proposal_render(&t, &psl, T0, T0 + 3600, "box1", &out), 0);
	assert_has_line(out.data, "proposal");
	assert_null(strstr(out.data, "Left out"));
	buf_free(&out);
	egress_psl_free(&psl);
}

/* ---- egress denied ---- */

/* The table's row that holds needle holds want too. */
static void expect_row(const char *text, const char *needle, const char *want)
{
	const char *at = strstr(text, needle), *s, *e;

	if (!at)
		fail_msg("no row for %s in:\n%s", needle, text);
	for (s = at; s > text && s[-1] != '\n'; s--)
		;
	e = strchr(at, '\n');
	if (!memmem(s, e ? (size_t)(e - s) : strlen(s), want, strlen(want)))
		fail_msg("row '%.*s' lacks '%s'", (int)(e ? e - s : 0), s, want);
}

static void denied_render(void **state)
{
	struct egress_tally t = {0};
	struct egress e = {0};
	struct buf out = {0}, plain = {0};

	(void)state;
	for (int i = 0; i < 3; i++)
		add(&t, "t1.example", 80, "GET", (double)T0 + i, "policy-allowlist", 1);
	add(&t, "git.example.org", 22, "CONNECT", (double)T0, "port-not-80-443", 1);
	add(&t, "169.254.169.254", 80, "GET", (double)T0, "loopback-link-local", 1);
	add(&t, "ads.example.com", 443, "CONNECT", (double)T0, "block", 1);
	add(&t, "x\033[2J.example", 80, "GET", (double)T0, "policy-allowlist", 1);
	add(&t, "2001:db8::7", 5432, "CONNECT", (double)T0, "port-not-80-443", 1);
	ok_as(&e, "policy allowlist\nallow t1.example\n", "t.conf");
	assert_int_equal(egress_denied_render(&t, &e, &out), 6);
	assert_non_null(strstr(out.data, "COUNT"));
	expect_row(out.data, "t1.example:80", "     3  2026-12-06 21:00:02");
	expect_row(out.data, "t1.example:80", "policy-allowlist t.conf:3");
	expect_row(out.data, "t1.example:80", "allow t1.example  [allowed now: allow t.conf:2]");
	expect_row(out.data, "git.example.org:22", "connect git.example.org:22");
	expect_row(out.data, "169.254.169.254:80", "none: no rule lifts the step loopback-link");
	expect_row(out.data, "ads.example.com:443", "block t.conf:3");
	expect_row(
		out.data, "ads.example.com:443", "allow ads.example.com  (allow beats the block");
	expect_row(out.data, "x?[2J.example:80", "none: not a plain host name");
	expect_row(out.data, "[2001:db8::7]:5432", "connect [2001:db8::7]:5432");
	/* The most refused first; nothing a terminal would act on. */
	assert_true(strstr(out.data, "t1.example") < strstr(out.data, "git.example.org"));
	for (const char *p = out.data; *p; p++)
		if (*p != '\n' && (*p < 0x20 || *p > 0x7e))
			fail_msg("byte 0x%02x in the table", (unsigned char)*p);
	/* Control: without rules in force, nothing is "allowed now". */
	assert_int_equal(egress_denied_render(&t, NULL, &plain), 6);
	assert_null(strstr(plain.data, "allowed now"));
	expect_row(plain.data, "t1.example:80", "allow t1.example");
	buf_free(&out);
	buf_free(&plain);
	egress_free(&e);
	egress_tally_free(&t);
}

/*
 * What root checks before writing what the log's reader made: a proposal and nothing else.
 * A reader that lost its `proposal` line, or slipped a setting in, is refused.
 */
static void proposal_check(void **state)
{
	static const char good[] = "# learned\nproposal\nallow a.example.com  # 1 request\n";
	static const char *const bad[] = {
		"allow a.example.com\n", /* no proposal line: its rules would be in force */
		"allow a.example.com\nproposal\n", /* not first */
		"proposal\npolicy blocklist\n",
		"proposal\nlearn 2026-12-06T21:00:00Z "
		"2026-12-06T22:00:00Z\n",
		"proposal\nallow a..b\n", /* a bad line */
		"", /* nothing */
	};
	char err[512];

	(void)state;
	assert_int_equal(egress_proposal_check(good, strlen(good), "p.conf", err, sizeof(err)), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (egress_proposal_check(bad[i], strlen(bad[i]), "p.conf", err, sizeof(err)) == 0)
			fail_msg("accepted as a proposal: '%s'", bad[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(log_parse),
		cmocka_unit_test(log_parse_refused),
		cmocka_unit_test(host_plain),
		cmocka_unit_test(tally_counts),
		cmocka_unit_test(tally_filters),
		cmocka_unit_test(psl_registrable),
		cmocka_unit_test(proposal_render),
		cmocka_unit_test(denied_render),
		cmocka_unit_test(proposal_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
