/* SPDX-License-Identifier: MIT */
/*
 * The egress rules rendered into squid.conf, checked by `squid -k parse` when squid is
 * installed.
 */
#define _GNU_SOURCE
#include "egress_unit.h"

#include "../../provision/efirst.h"

/* ---- squid.conf ---- */

static const char *proxy_user(void)
{
	return getpwnam("proxy") ? "proxy" : "nobody";
}

static void render(const struct egress *e, struct buf *out)
{
	struct egress_squid sq = {
		.port = 3128, .state_dir = unit_path("state"), .user = proxy_user()};

	memset(out, 0, sizeof(*out));
	assert_int_equal(egress_render_squid(e, &sq, out), 0);
	assert_non_null(out->data);
}

/* Why squid cannot check a configuration here, or NULL. */
static const char *squid_unavailable(void)
{
	if (access(SQUID, X_OK) < 0)
		return SQUID " is not installed (apt-get install squid)";
	return NULL;
}

/* squid's complaints: its lines naming an error, a warning or a missing ACL. */
static int squid_complaint(const char *s, size_t l)
{
	return memmem(s, l, "ERROR", 5) || memmem(s, l, "FATAL", 5) || memmem(s, l, "WARNING", 7) ||
		memmem(s, l, "not found", 9);
}

/*
 * `squid -k parse` must accept the file without an ERROR (squid reports a bad regex as an
 * ERROR and still exits 0) and without warnings but the one `via off` brings.
 */
static void squid_parse(const struct buf *conf)
{
	const char *argv[] = {SQUID, "-k", "parse", "-f", unit_path("squid.conf"), NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 30000};
	struct spawn_result r;
	struct buf bad = {0};
	char what[128];

	unit_write(unit_path("squid.conf"), conf->data, conf->len, 0644);
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	for (const char *s = r.output; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL) {
		size_t l = strcspn(s, "\n");

		if (squid_complaint(s, l) && !memmem(s, l, "HTTP requires the use of Via", 28)) {
			assert_int_equal(buf_append(&bad, s, l), 0);
			assert_int_equal(buf_puts(&bad, "\n"), 0);
		}
	}
	if (r.status != 0 || bad.len)
		fail_msg("squid -k parse: %s\n%s", spawn_describe(&r, what, sizeof(what)),
			bad.len ? bad.data : r.output);
	spawn_result_free(&r);
	buf_free(&bad);
}

/* The last step of each render test: squid -k parse when squid is here (else skip, saying why). */
static void parse_and_free(struct buf *out, struct egress *e, const char *why)
{
	if (why) {
		printf("# skip: %s\n", why);
		buf_free(out);
		egress_free(e);
		skip();
	}
	squid_parse(out);
	buf_free(out);
	egress_free(e);
}

static void check_common_lines(const char *conf)
{
	assert_has_line(conf, "http_port 127.0.0.1:3128");
	assert_has_line(conf, "cache deny all");
	assert_has_line(conf, "cache_mem 0 MB");
	assert_has_line(conf, "netdb_filename none");
	assert_has_line(conf, "pinger_enable off");
	assert_has_line(conf, "shutdown_lifetime 0 seconds");
	assert_has_line(conf, "forwarded_for delete");
	assert_has_line(conf, "via off");
	assert_has_line(conf, "httpd_suppress_version_string on");
	assert_has_line(conf, "icp_port 0");
	assert_has_line(conf, "htcp_port 0");
	assert_has_line(conf, "http_access deny manager ocsb_m_manager");
	assert_null(strstr(conf, "cache_dir"));
	assert_null(strstr(conf, "dns_v4_first on"));
}

/* The last http_access line: the policy's answer to what nothing else decided. */
static void check_last_access(const char *conf, const char *want)
{
	const char *last = NULL;

	for (const char *s = conf; (s = strstr(s, "\nhttp_access ")); s++)
		last = s + 1;
	assert_non_null(last);
	assert_int_equal(strncmp(last, want, strlen(want)), 0);
	assert_true(last[strlen(want)] == '\n');
}

/*
 * Name-based denies must all come before the first http_access line that uses a dst ACL on
 * a name: that resolves the name, and a refused name should be answered without DNS. A
 * dst ACL behind ocsb_ip_literal (an IP literal, as written) needs no lookup.
 */
static void check_order(const char *conf)
{
	int seen_dst = 0;
	unsigned denies = 0, guarded = 0;

	assert_has_line(conf, "acl ocsb_ip_literal dstdom_regex -n -- ^[0-9.]+$ :");
	for (const char *s = conf; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL) {
		char line[1024];
		size_t l = strcspn(s, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)l, s);
		if (strncmp(line, "http_access ", 12) != 0)
			continue;
		if (strstr(line, " ocsb_never_dst") || strstr(line, " ocsb_private_dst")) {
			if (!strncmp(line, "http_access deny ocsb_ip_literal ocsb_", 38)) {
				guarded++;
				continue;
			}
			seen_dst = 1;
			continue;
		}
		if (strstr(line, "http_access deny ocsb_block") ||
			strstr(line, "http_access deny ocsb_dotless") ||
			strstr(line, "http_access deny ocsb_never_name") ||
			strstr(line, "http_access deny !ocsb_web_ports") ||
			(strstr(line, "ocsb_m_policy") && !strstr(line, "deny all"))) {
			if (seen_dst)
				fail_msg("'%s' comes after a dst check", line);
			denies++;
		}
	}
	assert_true(seen_dst);
	assert_true(denies >= 3);
	assert_int_equal(guarded, 2);
}

static void render_seed_example(void **state)
{
	struct egress e;
	struct buf out;
	const char *why = squid_unavailable();

	seed_rules(&e);
	render(&e, &out);
	check_common_lines(out.data);
	check_order(out.data);
	check_last_access(out.data, "http_access allow all ocsb_m_default");
	/* One ACL per statement, dstdomain -n so IP literals are never reverse-resolved. */
	assert_has_line(
		out.data, "acl ocsb_allow_1 dstdomain -n jira.example.com gitlab.example.com");
	assert_has_line(out.data,
		"acl ocsb_allow_re_2 dstdom_regex -n -i -- ^[a-z0-9-]+\\.staging\\.example\\.com$");
	assert_has_line(out.data, "acl ocsb_block_3 dstdomain -n .example.com");
	assert_has_line(out.data, "acl ocsb_block_re_4 dstdom_regex -n -i -- ^prod-");
	assert_has_line(out.data, "acl ocsb_connect_5_2_host dstdomain -n 10.0.0.5");
	assert_has_line(out.data, "acl ocsb_connect_5_2_port port 6443");
	assert_has_line(out.data,
		"acl ocsb_block_3_mark annotate_transaction ocsb_step=block ocsb_rule=t.conf:3");
	assert_has_line(out.data,
		"http_access deny ocsb_block_3 !ocsb_allowed !ocsb_connect ocsb_block_3_mark");
	assert_has_line(out.data,
		"http_access deny ocsb_private_dst !ocsb_allowed !ocsb_connect ocsb_m_private");
	assert_has_line(out.data, "http_access allow ocsb_connect_5 ocsb_connect_5_mark");
	parse_and_free(&out, &e, why);
}

/* The line number of the first "allow" line of text holding needle. */
static unsigned line_of(const struct buf *text, const char *needle)
{
	unsigned n = 1;

	for (const char *l = text->data; l; l = strchr(l, '\n'), l = l ? l + 1 : NULL, n++) {
		size_t ll = strcspn(l, "\n");

		if (!strncmp(l, "allow ", 6) && memmem(l, ll, needle, strlen(needle)))
			return n;
	}
	fail_msg("no allow line with %s", needle);
	return 0;
}

static void render_defaults_file(void **state)
{
#ifdef HAVE_DEFAULTS
	struct egress e = {0};
	struct buf out;
	char err[512];
	const char *why = squid_unavailable();

	assert_int_equal(egress_parse_buf(&e, egress_defaults, strlen(egress_defaults),
				 "egress.conf", err, sizeof(err)),
		0);
	/* The template alone (no allow line in place of its mark): allowlist, nothing named. */
	assert_int_equal(e.policy, EGRESS_ALLOWLIST);
	assert_int_equal(e.dns_allow, 0);
	assert_int_equal(e.off, 0);
	/* The shipped self-checks hold with the shipped rules. */
	for (size_t i = 0; i < e.n; i++) {
		const struct egress_rule *r = &e.rules[i];
		struct egress_verdict v;
		char host[256];
		const char *h;

		if (r->kind != EGRESS_EXPECT_BLOCK && r->kind != EGRESS_EXPECT_PASS)
			continue;
		h = strstr(r->value, "://") + 3;
		snprintf(host, sizeof(host), "%.*s", (int)strcspn(h, "/:"), h);
		egress_decide(&e, host, strncmp(r->value, "https", 5) ? 80 : 443, &v);
		if (v.allow != (r->kind == EGRESS_EXPECT_PASS))
			fail_msg("egress.conf:%u: %s %s: %s", r->line, egress_kind_name(r->kind),
				r->value, v.why);
	}
	expect_verdict(&e, "api.anthropic.com", 443, 0, "policy allowlist", 0);
	render(&e, &out);
	check_common_lines(out.data);
	check_order(out.data);
	check_last_access(out.data, "http_access deny all ocsb_m_policy");
	if (why) {
		printf("# skip: %s\n", why);
		buf_free(&out);
		egress_free(&e);
		skip();
	}
	squid_parse(&out);
	buf_free(&out);
	egress_free(&e);
#else
	printf("# skip: egress_defaults.h was not generated before this test was compiled "
	       "(make $(BUILDDIR)/gen/egress_defaults.h)\n");
	skip();
#endif
}

static void render_allowlist(void **state)
{
	struct egress e;
	struct buf out;
	char err[512];
	const char *why = squid_unavailable();

	seed_rules(&e);
	assert_int_equal(parse(&e,
				 "policy allowlist\nallow [2001:db8::5] .Foo.example "
				 "a.foo.example foo.example .foo.example\n",
				 err, sizeof(err)),
		0);
	render(&e, &out);
	check_common_lines(out.data);
	check_order(out.data);
	assert_has_line(out.data, "http_access deny !ocsb_allowed !ocsb_connect ocsb_m_policy");
	check_last_access(out.data, "http_access deny all ocsb_m_policy");
	/* IPv6 literals as squid spells them; entries another .domain covers left out. */
	assert_has_line(out.data, "acl ocsb_allow_6 dstdomain -n [2001:db8::5] .foo.example");
	parse_and_free(&out, &e, why);
}

/* An allowlist with nothing named: everything is refused before any DNS lookup. */
static void render_allowlist_empty(void **state)
{
	struct egress e = {0};
	struct buf out;
	char err[512];
	const char *why = squid_unavailable();

	assert_int_equal(parse(&e, "policy allowlist\n", err, sizeof(err)), 0);
	render(&e, &out);
	check_order(out.data);
	assert_has_line(out.data, "http_access deny all ocsb_m_policy");
	assert_has_line(out.data, "http_access deny !ocsb_web_ports ocsb_m_port");
	assert_null(strstr(out.data, "ocsb_allowed"));
	assert_null(strstr(out.data, "ocsb_connect"));
	parse_and_free(&out, &e, why);
}

static void render_egress_off(void **state)
{
	struct egress e;
	struct buf out;
	char err[512];
	const char *why = squid_unavailable();

	seed_rules(&e);
	assert_int_equal(parse(&e, "egress off\n", err, sizeof(err)), 0);
	render(&e, &out);
	check_common_lines(out.data);
	check_last_access(out.data, "http_access deny all ocsb_m_off");
	/* Nothing but denies. */
	assert_null(strstr(out.data, "http_access allow"));
	assert_null(strstr(out.data, "ocsb_allow_1"));
	parse_and_free(&out, &e, why);
}

static void render_bad_settings(void **state)
{
	struct egress e = {0};
	struct buf out = {0};
	struct egress_squid ok = {
		.port = 3128, .state_dir = "/var/lib/ocsb/proxy/state", .user = "proxy"};
	struct egress_squid sq;

	assert_int_equal(egress_render_squid(&e, &ok, &out), 0);
	buf_free(&out);
	/* Everything here lands in squid.conf as bare words. */
	sq = ok;
	sq.port = 0;
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq.port = 65536;
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq = ok;
	sq.state_dir = "relative/state";
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq.state_dir = "/var/lib/my state";
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq.state_dir = "/var/lib/${x}";
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq.state_dir = NULL;
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq = ok;
	sq.user = "bad user";
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	sq.user = NULL;
	assert_int_equal(egress_render_squid(&e, &sq, &out), -EINVAL);
	assert_null(out.data);
}

/* File names reach squid.conf in notes and comments: nothing in them may break a line. */
static void render_odd_file_name(void **state)
{
	struct egress e = {0};
	struct buf out;
	char err[512];

	assert_int_equal(egress_parse_buf(&e, "block x.example\n", 16,
				 "/home/al ice/.config/ocsb/egress.conf", err, sizeof(err)),
		0);
	render(&e, &out);
	assert_has_line(out.data,
		"acl ocsb_block_1_mark annotate_transaction ocsb_step=block "
		"ocsb_rule=/home/al_ice/.config/ocsb/egress.conf:1");
	assert_null(strstr(out.data, "al ice"));
	buf_free(&out);
	egress_free(&e);
}

/*
 * The rules of a first provisioning (issue 29), as ocsb-provision writes them: allowlist,
 * the found hosts pass, the rest is refused by the policy before any step that resolves
 * a name (check_order), and squid accepts the file.
 */
static void render_first_rules(void **state)
{
#ifdef HAVE_DEFAULTS
	struct efirst *f = calloc(1, sizeof(*f));
	struct egress e = {0};
	struct buf text = {0}, out;
	char err[512];
	const char *why = squid_unavailable();

	assert_non_null(f);
	efirst_providers_all(f);
	assert_int_equal(efirst_add(f, EFIRST_REGISTRY, "registry.npmjs.org",
				 "npm: package-lock.json in ~/code/app"),
		0);
	assert_int_equal(efirst_add(f, EFIRST_GIT, "git.example.org",
				 "git: remote origin of "
				 "~/code/app"),
		0);
	efirst_opencode(f);
	assert_int_equal(efirst_render(egress_defaults, strlen(egress_defaults), f, &text), 0);
	free(f);
	assert_int_equal(
		egress_parse_buf(&e, text.data, text.len, "egress.conf", err, sizeof(err)), 0);
	assert_non_null(strstr(text.data, "# npm: package-lock.json in ~/code/app\n"));
	assert_int_equal(e.policy, EGRESS_ALLOWLIST);
	expect_verdict(&e, "registry.npmjs.org", 443, 1, "allow", line_of(&text, "registry"));
	expect_verdict(&e, "api.anthropic.com", 443, 1, "allow", line_of(&text, "api.anthropic"));
	expect_verdict(&e, "git.example.org", 443, 1, "allow", line_of(&text, "git.example.org"));
	expect_verdict(&e, "exfil.example.net", 443, 0, "policy allowlist", 0);
	render(&e, &out);
	check_common_lines(out.data);
	check_order(out.data);
	assert_has_line(out.data, "http_access deny !ocsb_allowed ocsb_m_policy");
	check_last_access(out.data, "http_access deny all ocsb_m_policy");
	buf_free(&text);
	parse_and_free(&out, &e, why);
#else
	skip();
#endif
}

#define FILE_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		FILE_TEST(render_seed_example),
		FILE_TEST(render_defaults_file),
		FILE_TEST(render_first_rules),
		FILE_TEST(render_allowlist),
		FILE_TEST(render_allowlist_empty),
		FILE_TEST(render_egress_off),
		cmocka_unit_test(render_bad_settings),
		FILE_TEST(render_odd_file_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
