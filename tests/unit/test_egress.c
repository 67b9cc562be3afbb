/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include <pwd.h>
#include <regex.h>

#include "egress.h"
#include "paths.h"
#include "spawn.h"
#include "util.h"

/* The shipped defaults, generated from conf/egress.conf by tools/embed.sh when present. */
#if defined(__has_include)
#if __has_include("egress_defaults.h")
#include "egress_defaults.h"
#define HAVE_DEFAULTS 1
#endif
#endif

#define SQUID "/usr/sbin/squid"

/* The seed's example (seeds/000), one statement a line as written there. */
static const char seed_example[] =
	"allow jira.example.com gitlab.example.com # wins over block\n"
	"allow-regex ^[a-z0-9-]+\\.staging\\.example\\.com$\n"
	"block .example.com # the domain and all its subdomains\n"
	"block-regex ^prod-\n"
	"connect git.example.com:2222 10.0.0.5:6443 # git over SSH, Kubernetes API\n"
	"expect-block https://prod.example.com/\n"
	"expect-pass https://gitlab.example.com/\n"
	"expect-pass https://10.0.0.5:6443/version -k\n";

static int parse(struct egress *e, const char *text, char *err, size_t errlen)
{
	err[0] = '\0';
	return egress_parse_buf(e, text, strlen(text), "t.conf", err, errlen);
}

/* ---- parsing ---- */

static void parse_every_keyword(void **state)
{
	const char *text =
		"policy allowlist\n"
		"egress off\n"
		"dns allow\n"
		"allow Jira.Example.COM .corp.example 10.0.0.5 [2001:DB8::5] 2001:db8:0::6\n"
		"allow-regex ^[a-z]+\\.dev$\n"
		"block .example.com\n"
		"block-regex ^prod- -x\n"
		"connect git.example.com:2222 10.0.0.5:6443 [2001:db8::7]:22\n"
		"expect-pass https://gitlab.example.com/ -k -H 'Accept: */*' --max-time 5\n"
		"expect-block http://10.1.2.3/\n";
	struct egress e = {0};
	char err[512];

	assert_int_equal(parse(&e, text, err, sizeof(err)), 0);
	assert_int_equal(e.policy, EGRESS_ALLOWLIST);
	assert_int_equal(e.off, 1);
	assert_int_equal(e.dns_allow, 1);
	assert_int_equal(e.files.n, 1);
	assert_string_equal(e.files.v[0], "t.conf");
	assert_int_equal(e.n, 14);

	/* Host names lower case, addresses canonical, IPv6 without brackets. */
	assert_int_equal(e.rules[0].kind, EGRESS_ALLOW);
	assert_string_equal(e.rules[0].value, "jira.example.com");
	assert_string_equal(e.rules[1].value, ".corp.example");
	assert_string_equal(e.rules[2].value, "10.0.0.5");
	assert_string_equal(e.rules[3].value, "2001:db8::5");
	assert_string_equal(e.rules[4].value, "2001:db8::6");
	for (size_t i = 0; i < 5; i++) {
		assert_ptr_equal(e.rules[i].file, e.files.v[0]);
		assert_int_equal(e.rules[i].line, 4);
	}
	assert_int_equal(e.rules[5].kind, EGRESS_ALLOW_REGEX);
	assert_true(e.rules[5].has_re);
	assert_string_equal(e.rules[5].value, "^[a-z]+\\.dev$");
	assert_int_equal(e.rules[6].kind, EGRESS_BLOCK);
	assert_int_equal(e.rules[7].kind, EGRESS_BLOCK_REGEX);
	assert_int_equal(e.rules[8].kind, EGRESS_BLOCK_REGEX);
	assert_string_equal(e.rules[8].value, "-x");
	assert_int_equal(e.rules[9].kind, EGRESS_CONNECT);
	assert_string_equal(e.rules[9].value, "git.example.com");
	assert_int_equal(e.rules[9].port, 2222);
	assert_string_equal(e.rules[10].value, "10.0.0.5");
	assert_int_equal(e.rules[10].port, 6443);
	assert_string_equal(e.rules[11].value, "2001:db8::7");
	assert_int_equal(e.rules[11].port, 22);
	assert_int_equal(e.rules[12].kind, EGRESS_EXPECT_PASS);
	assert_string_equal(e.rules[12].value, "https://gitlab.example.com/");
	assert_int_equal(e.rules[12].curl_args.n, 5);
	assert_string_equal(e.rules[12].curl_args.v[0], "-k");
	assert_string_equal(e.rules[12].curl_args.v[1], "-H");
	assert_string_equal(e.rules[12].curl_args.v[2], "Accept: */*");
	assert_string_equal(e.rules[12].curl_args.v[3], "--max-time");
	assert_string_equal(e.rules[12].curl_args.v[4], "5");
	assert_int_equal(e.rules[12].line, 9);
	assert_int_equal(e.rules[13].kind, EGRESS_EXPECT_BLOCK);
	assert_int_equal(e.rules[13].curl_args.n, 0);
	assert_string_equal(egress_kind_name(e.rules[13].kind), "expect-block");
	assert_string_equal(egress_kind_name(0), "?");
	egress_free(&e);
}

static void parse_defaults(void **state)
{
	struct egress e = {0};
	char err[512];

	/* A zeroed struct is the default; an empty file changes nothing. */
	assert_int_equal(parse(&e, "# nothing\n\n", err, sizeof(err)), 0);
	assert_int_equal(e.policy, EGRESS_BLOCKLIST);
	assert_int_equal(e.off, 0);
	assert_int_equal(e.dns_allow, 0);
	assert_int_equal(e.n, 0);
	egress_free(&e);
	egress_free(&e);
	egress_free(NULL);
}

struct bad_case {
	const char *text;
	const char *prefix; /* exact start of the message */
	const char *detail; /* somewhere in the message */
};

static void parse_errors(void **state)
{
	static const struct bad_case cases[] = {
		{"bogus x\n", "t.conf:1: unknown keyword 'bogus'", ""},
		{"\nallow\n", "t.conf:2: 'allow' takes 1 to 31 values, got 0", ""},
		{"allow ok.example bad_host\n", "t.conf:1: 'bad_host' is not a host name", ""},
		{"allow 'two words'\n", "t.conf:1: 'two words' is not a host name", ""},
		{"allow 10.0.0.0/8\n", "t.conf:1: '10.0.0.0/8': networks are not supported", ""},
		{"allow example.com:443\n", "t.conf:1: 'example.com:443' is not a host or IPv6",
			"connect HOST:PORT"},
		{"block a..b\n", "t.conf:1: 'a..b': empty label", ""},
		{"block example.com.\n", "t.conf:1: 'example.com.': remove the trailing '.'", ""},
		{"block -x.example\n", "t.conf:1: '-x.example' is not a host name", ""},
		{"block 1.2.3\n", "t.conf:1: '1.2.3' is not an IPv4 address", ""},
		{"block 300.1.1.1\n", "t.conf:1: '300.1.1.1' is not an IPv4 address", ""},
		{"block [::1\n", "t.conf:1: '[::1' is not an IPv6 address", ""},
		{"block-regex \"a b\"\n", "t.conf:1: regex 'a b': spaces", ""},
		{"allow-regex '^a\"'\n", "t.conf:1: regex '^a\"': spaces, quotes", ""},
		{"allow-regex '${x}'\n", "t.conf:1: regex '${x}': '${' is not supported", ""},
		{"connect git.example.com\n", "t.conf:1: connect 'git.example.com': give HOST:PORT",
			""},
		{"connect :22\n", "t.conf:1: connect ':22': give HOST:PORT", ""},
		{"connect git.example.com:0\n",
			"t.conf:1: connect 'git.example.com:0': port 0 is out of range (1..65535)",
			""},
		{"connect git.example.com:70000\n",
			"t.conf:1: connect 'git.example.com:70000': port 70000 is out of range "
			"(1..65535)",
			""},
		{"connect h.example:22x\n", "t.conf:1: connect 'h.example:22x': port '22x' is not",
			""},
		{"connect 2001:db8::1:22\n", "t.conf:1: connect '2001:db8::1:22': write IPv6 as",
			""},
		{"connect [2001:db8::1]22\n", "t.conf:1: connect '[2001:db8::1]22': give HOST:PORT",
			""},
		{"connect bad_host:22\n", "t.conf:1: 'bad_host' is not a host name", ""},
		{"expect-pass example.com/\n",
			"t.conf:1: 'example.com/' is not an http:// or https:// URL", ""},
		{"expect-block ftp://example.com/\n", "t.conf:1: 'ftp://example.com/' is not an",
			""},
		{"expect-pass https:///x\n", "t.conf:1: 'https:///x': no host in the URL", ""},
		{"expect-pass https://a.example/ -o /tmp/x\n",
			"t.conf:1: curl option '-o' is not supported", ""},
		{"expect-pass https://a.example/ -H @/etc/shadow\n",
			"t.conf:1: curl option -H @/etc/shadow: values read from files", ""},
		{"expect-pass https://a.example/ -H\n", "t.conf:1: curl option -H needs a value",
			""},
		{"policy allowlist\n# again\npolicy blocklist\n",
			"t.conf:3: 'policy' given twice (first on line 1)", ""},
		{"egress on\negress off\n", "t.conf:2: 'egress' given twice (first on line 1)", ""},
		{"dns deny\ndns deny\n", "t.conf:2: 'dns' given twice (first on line 1)", ""},
		{"policy maybe\n", "t.conf:1: policy 'maybe': say allowlist or blocklist", ""},
		{"dns maybe\n", "t.conf:1: dns 'maybe': say allow or deny", ""},
		{"egress maybe\n", "t.conf:1: 'maybe' is not yes or no", ""},
	};
	char err[512];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct egress e = {0};

		if (parse(&e, cases[i].text, err, sizeof(err)) != -1)
			fail_msg("accepted: %s", cases[i].text);
		assert_err_prefix(err, cases[i].prefix);
		if (!strstr(err, cases[i].detail))
			fail_msg("'%s' lacks '%s'", err, cases[i].detail);
		assert_int_equal(e.n, 0);
		assert_int_equal(e.files.n, 0);
		egress_free(&e);
	}
}

static void parse_bad_regex(void **state)
{
	const char *bad[] = {"^(a", "a{2,1}", "[z-a]", "a\\"};
	char err[512], want[512], msg[256];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct egress e = {0};
		char text[64];
		regex_t re;
		int rc = regcomp(&re, bad[i], REG_EXTENDED | REG_ICASE | REG_NOSUB);

		assert_int_not_equal(rc, 0);
		regerror(rc, &re, msg, sizeof(msg));
		/* The line number of the offending statement, and regcomp's own words. */
		snprintf(text, sizeof(text), "allow-regex ok\nblock-regex '%s'\n", bad[i]);
		snprintf(want, sizeof(want), "t.conf:2: bad regex '%s': %s", bad[i], msg);
		assert_int_equal(parse(&e, text, err, sizeof(err)), -1);
		assert_string_equal(err, want);
		egress_free(&e);
	}
}

/* A failed buffer leaves what was there before untouched. */
static void parse_is_atomic(void **state)
{
	const char *bad = "policy allowlist\negress off\ndns deny\nblock b.example\nblock c_bad\n";
	const char *good = "policy allowlist\nblock b.example\n";
	struct egress e = {0};
	char err[512];

	assert_int_equal(parse(&e, "dns allow\nallow a.example\n", err, sizeof(err)), 0);
	assert_int_equal(
		egress_parse_buf(&e, bad, strlen(bad), "second.conf", err, sizeof(err)), -1);
	assert_err_prefix(err, "second.conf:5: ");
	assert_int_equal(e.n, 1);
	assert_int_equal(e.policy, EGRESS_BLOCKLIST);
	assert_int_equal(e.off, 0);
	assert_int_equal(e.dns_allow, 1);
	assert_int_equal(e.files.n, 1);
	/* A later buffer overrides settings and adds rules. */
	assert_int_equal(
		egress_parse_buf(&e, good, strlen(good), "third.conf", err, sizeof(err)), 0);
	assert_int_equal(e.policy, EGRESS_ALLOWLIST);
	assert_int_equal(e.dns_allow, 1);
	assert_int_equal(e.n, 2);
	assert_string_equal(e.rules[1].file, "third.conf");
	assert_string_equal(e.rules[0].file, "t.conf");
	egress_free(&e);
}

/* ---- decisions ---- */

static void seed_rules(struct egress *e)
{
	char err[512];

	memset(e, 0, sizeof(*e));
	if (parse(e, seed_example, err, sizeof(err)) != 0)
		fail_msg("seed example: %s", err);
}

#define expect_verdict(e, host, port, want_allow, want_why, want_line)                        \
	do {                                                                                  \
		struct egress_verdict v_;                                                     \
		egress_decide((e), (host), (port), &v_);                                      \
		if (v_.allow != (want_allow) || strcmp(v_.why, (want_why)) != 0 ||            \
			(want_line ? !v_.rule || v_.rule->line != (unsigned)(want_line)       \
				   : v_.rule != NULL))                                        \
			fail_msg("%s:%u: got %s '%s' line %u, want %s '%s' line %u", (host),  \
				(unsigned)(port), v_.allow ? "allow" : "deny", v_.why,        \
				v_.rule ? v_.rule->line : 0, (want_allow) ? "allow" : "deny", \
				(want_why), (unsigned)(want_line));                           \
	} while (0)

static void decide_seed_example(void **state)
{
	struct egress e;

	seed_rules(&e);
	/* allow beats block; block covers the domain and its subdomains. */
	expect_verdict(&e, "jira.example.com", 443, 1, "allow", 1);
	expect_verdict(&e, "gitlab.example.com", 80, 1, "allow", 1);
	expect_verdict(&e, "JIRA.Example.COM.", 443, 1, "allow", 1);
	expect_verdict(&e, "example.com", 443, 0, "block", 3);
	expect_verdict(&e, "prod.example.com", 443, 0, "block", 3);
	expect_verdict(&e, "a.b.example.com", 80, 0, "block", 3);
	expect_verdict(&e, "notexample.com", 443, 1, "default allow", 0);
	/* Regexes: allow-regex beats the domain block, block-regex on any name. */
	expect_verdict(&e, "web-1.staging.example.com", 443, 1, "allow", 2);
	expect_verdict(&e, "a.b.staging.example.com", 443, 0, "block", 3);
	expect_verdict(&e, "prod-db.example.net", 443, 0, "block", 4);
	expect_verdict(&e, "PROD-db.example.net", 443, 0, "block", 4);
	expect_verdict(&e, "db-prod-1.example.net", 443, 1, "default allow", 0);
	/* Names without a dot and internal networks. */
	expect_verdict(&e, "intranet", 80, 0, "dotless name", 0);
	expect_verdict(&e, "intranet.", 443, 0, "dotless name", 0);
	expect_verdict(&e, "10.1.2.3", 443, 0, "private network", 0);
	expect_verdict(&e, "172.31.0.1", 80, 0, "private network", 0);
	expect_verdict(&e, "192.168.1.1", 80, 0, "private network", 0);
	expect_verdict(&e, "100.64.0.1", 80, 0, "private network", 0);
	expect_verdict(&e, "[fd00::1]", 443, 0, "private network", 0);
	expect_verdict(&e, "172.32.0.1", 80, 1, "default allow", 0);
	/* connect: host and port together; other ports of the same host are not named. */
	expect_verdict(&e, "10.0.0.5", 6443, 1, "connect rule", 5);
	expect_verdict(&e, "10.0.0.5", 443, 0, "private network", 0);
	expect_verdict(&e, "git.example.com", 2222, 1, "connect rule", 5);
	expect_verdict(&e, "git.example.com", 22, 0, "port not 80/443", 0);
	expect_verdict(&e, "git.example.com", 443, 0, "block", 3);
	expect_verdict(&e, "www.debian.org", 8080, 0, "port not 80/443", 0);
	expect_verdict(&e, "jira.example.com", 8443, 0, "port not 80/443", 0);
	expect_verdict(&e, "www.debian.org", 443, 1, "default allow", 0);
	/* Never: loopback, link-local, metadata, unspecified, multicast, in any spelling. */
	expect_verdict(&e, "169.254.169.254", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "127.0.0.1", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "127.1", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "2130706433", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "0x7f.1", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "[::1]", 443, 0, "loopback/link-local", 0);
	expect_verdict(&e, "::1", 443, 0, "loopback/link-local", 0);
	expect_verdict(&e, "[::ffff:127.0.0.1]", 443, 0, "loopback/link-local", 0);
	expect_verdict(&e, "[::ffff:10.0.0.1]", 443, 0, "private network", 0);
	expect_verdict(&e, "[fe80::1]", 443, 0, "loopback/link-local", 0);
	expect_verdict(&e, "0.0.0.0", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "[::]", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "224.0.0.251", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "localhost", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "api.localhost", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "bad host", 80, 0, "bad host name", 0);
	expect_verdict(&e, "", 80, 0, "bad host name", 0);
	expect_verdict(&e, "...", 80, 0, "bad host name", 0);
	egress_free(&e);
}

/* Invariant 3: no rule opens loopback, link-local or the metadata service. */
static void decide_never_even_if_allowed(void **state)
{
	const char *text = "policy allowlist\n"
			   "allow 169.254.169.254 127.0.0.1 ::1 localhost fe80::1 0.0.0.0\n"
			   "allow-regex .*\n"
			   "connect 169.254.169.254:80 127.0.0.1:22 [::1]:443 localhost:8080\n";
	struct egress e = {0};
	struct egress_verdict v;
	char err[512];

	assert_int_equal(parse(&e, text, err, sizeof(err)), 0);
	expect_verdict(&e, "169.254.169.254", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "127.0.0.1", 22, 0, "loopback/link-local", 0);
	expect_verdict(&e, "127.0.0.1", 443, 0, "loopback/link-local", 0);
	expect_verdict(&e, "[::1]", 443, 0, "loopback/link-local", 0);
	expect_verdict(&e, "localhost", 8080, 0, "loopback/link-local", 0);
	expect_verdict(&e, "[fe80::1]", 80, 0, "loopback/link-local", 0);
	expect_verdict(&e, "0.0.0.0", 80, 0, "loopback/link-local", 0);
	/* The regex allows the rest; private addresses pass only because it names them. */
	expect_verdict(&e, "10.9.9.9", 443, 1, "allow", 3);
	egress_decide(&e, "169.254.169.254", 80, &v);
	assert_string_equal(v.tag, "loopback-link-local");
	egress_free(&e);
}

static void decide_allowlist(void **state)
{
	struct egress e;
	char err[512];

	seed_rules(&e);
	assert_int_equal(parse(&e, "policy allowlist\n", err, sizeof(err)), 0);
	/* What the blocklist passes is refused; named hosts still pass. */
	expect_verdict(&e, "www.debian.org", 443, 0, "policy allowlist", 0);
	expect_verdict(&e, "notexample.com", 80, 0, "policy allowlist", 0);
	expect_verdict(&e, "172.32.0.1", 80, 0, "policy allowlist", 0);
	expect_verdict(&e, "jira.example.com", 443, 1, "allow", 1);
	expect_verdict(&e, "x.staging.example.com", 443, 1, "allow", 2);
	expect_verdict(&e, "10.0.0.5", 6443, 1, "connect rule", 5);
	expect_verdict(&e, "prod.example.com", 443, 0, "block", 3);
	expect_verdict(&e, "10.1.2.3", 443, 0, "private network", 0);
	egress_free(&e);
}

static void decide_egress_off(void **state)
{
	struct egress e;
	struct egress_verdict v;
	char err[512];

	seed_rules(&e);
	assert_int_equal(parse(&e, "egress off\n", err, sizeof(err)), 0);
	expect_verdict(&e, "jira.example.com", 443, 0, "egress off", 0);
	expect_verdict(&e, "10.0.0.5", 6443, 0, "egress off", 0);
	egress_decide(&e, "www.debian.org", 443, &v);
	assert_string_equal(v.tag, "egress-off");
	egress_free(&e);
}

static void decide_ip_rules(void **state)
{
	const char *text = "allow 10.0.0.5 2001:db8::5 .corp.example\nblock 198.51.100.7\n"
			   "connect [fd00::9]:8443\n";
	struct egress e = {0};
	char err[512];

	assert_int_equal(parse(&e, text, err, sizeof(err)), 0);
	/* Addresses compare as addresses, however they are written. */
	expect_verdict(&e, "10.0.0.5", 443, 1, "allow", 1);
	expect_verdict(&e, "[2001:DB8:0:0::5]", 443, 1, "allow", 1);
	expect_verdict(&e, "198.51.100.7", 80, 0, "block", 2);
	expect_verdict(&e, "[fd00::9]", 8443, 1, "connect rule", 3);
	expect_verdict(&e, "[fd00::9]", 443, 0, "private network", 0);
	/* A .domain is the domain itself and what is below it, never a suffix of a label. */
	expect_verdict(&e, "corp.example", 443, 1, "allow", 1);
	expect_verdict(&e, "a.corp.example", 443, 1, "allow", 1);
	expect_verdict(&e, "xcorp.example", 443, 1, "default allow", 0);
	egress_free(&e);
}

/* ---- loading ---- */

static void mkdirs(const char *rel, mode_t mode)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s", unit_path(rel));
	for (char *s = path + strlen(unit_dir) + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (mkdir(path, mode) < 0 && errno != EEXIST)
				fail_msg("mkdir %s: %s", path, strerror(errno));
			assert_int_equal(chmod(path, mode), 0);
			*s = c;
			if (!c)
				break;
		}
	}
}

static void put_file(const char *rel, const char *text, mode_t mode)
{
	unit_write(unit_path(rel), text, strlen(text), mode);
}

static void layout(struct paths *p)
{
	assert_int_equal(paths_under(p, unit_dir), 0);
	mkdirs("etc/ocsb/egress.d", 0755);
	mkdirs("home/alice/.config/ocsb", 0755);
	put_file("etc/ocsb/egress.conf", "policy blocklist\ndns allow\nallow a.example\n", 0644);
}

static void load_layers(void **state)
{
	struct egress e;
	struct paths p;
	char err[512];

	layout(&p);
	put_file("etc/ocsb/egress.d/20-b.conf", "block b.example\n", 0644);
	put_file("etc/ocsb/egress.d/10-a.conf", "policy allowlist\nallow-regex ^a\n", 0644);
	/* Not *.conf, or hidden: skipped like run-parts does. */
	put_file("etc/ocsb/egress.d/README", "this is not a rule file\n", 0644);
	put_file("etc/ocsb/egress.d/30-c.conf~", "bogus\n", 0644);
	put_file("etc/ocsb/egress.d/.40-d.conf", "bogus\n", 0644);
	put_file("home/alice/.config/ocsb/egress.conf", "egress off\nconnect h.example:22\n", 0644);

	err[0] = '\0';
	assert_int_equal(egress_load_as(&e, &p, getuid(), unit_path("home/alice"), getuid(), err,
				 sizeof(err)),
		0);
	assert_int_equal(e.files.n, 4);
	assert_string_equal(e.files.v[0], unit_path("etc/ocsb/egress.conf"));
	assert_string_equal(e.files.v[1], unit_path("etc/ocsb/egress.d/10-a.conf"));
	assert_string_equal(e.files.v[2], unit_path("etc/ocsb/egress.d/20-b.conf"));
	assert_string_equal(e.files.v[3], unit_path("home/alice/.config/ocsb/egress.conf"));
	/* Rules add up in file order; a later file's setting wins. */
	assert_int_equal(e.n, 4);
	assert_string_equal(e.rules[0].value, "a.example");
	assert_string_equal(e.rules[1].value, "^a");
	assert_string_equal(e.rules[2].value, "b.example");
	assert_string_equal(e.rules[3].value, "h.example");
	assert_string_equal(e.rules[3].file, e.files.v[3]);
	assert_int_equal(e.rules[3].line, 2);
	assert_int_equal(e.policy, EGRESS_ALLOWLIST);
	assert_int_equal(e.dns_allow, 1);
	assert_int_equal(e.off, 1);
	egress_free(&e);
}

static void load_later_file_overrides_policy(void **state)
{
	struct egress e;
	struct paths p;
	char err[512];

	layout(&p);
	put_file("etc/ocsb/egress.d/10-a.conf", "policy allowlist\n", 0644);
	put_file("home/alice/.config/ocsb/egress.conf", "policy blocklist\ndns deny\n", 0600);
	assert_int_equal(egress_load_as(&e, &p, getuid(), unit_path("home/alice"), getuid(), err,
				 sizeof(err)),
		0);
	assert_int_equal(e.policy, EGRESS_BLOCKLIST);
	assert_int_equal(e.dns_allow, 0);
	egress_free(&e);
	/* Without the owner's layer the drop-in's allowlist stands. */
	assert_int_equal(egress_load_as(&e, &p, getuid(), NULL, (uid_t)-1, err, sizeof(err)), 0);
	assert_int_equal(e.policy, EGRESS_ALLOWLIST);
	assert_int_equal(e.dns_allow, 1);
	assert_int_equal(e.files.n, 2);
	egress_free(&e);
}

static void load_owner_file_optional(void **state)
{
	struct egress e;
	struct paths p;
	char err[512];

	layout(&p);
	assert_int_equal(egress_load_as(&e, &p, getuid(), unit_path("home/alice"), getuid(), err,
				 sizeof(err)),
		0);
	assert_int_equal(e.files.n, 1);
	egress_free(&e);
	/* Neither ~/.config/ocsb nor egress.d need exist. */
	assert_int_equal(rmdir(unit_path("home/alice/.config/ocsb")), 0);
	assert_int_equal(rmdir(unit_path("etc/ocsb/egress.d")), 0);
	assert_int_equal(egress_load_as(&e, &p, getuid(), unit_path("home/alice"), getuid(), err,
				 sizeof(err)),
		0);
	assert_int_equal(e.n, 1);
	egress_free(&e);
}

/* Any refused file refuses the whole set: e comes back empty. */
static void expect_load_fails(const struct paths *p, int want, const char *prefix)
{
	struct egress e;
	char err[512];

	memset(&e, 0x5a, sizeof(e));
	err[0] = '\0';
	assert_int_equal(egress_load_as(&e, p, getuid(), unit_path("home/alice"), getuid(), err,
				 sizeof(err)),
		want);
	assert_err_prefix(err, prefix);
	assert_int_equal(e.n, 0);
	assert_null(e.rules);
	assert_int_equal(e.files.n, 0);
	assert_int_equal(e.policy, EGRESS_BLOCKLIST);
	egress_free(&e);
}

static void load_owner_group_writable(void **state)
{
	struct paths p;
	char prefix[PATH_MAX + 8];

	layout(&p);
	put_file("home/alice/.config/ocsb/egress.conf", "allow x.example\n", 0664);
	snprintf(prefix, sizeof(prefix), "%s: file is writable by group or others",
		unit_path("home/alice/.config/ocsb/egress.conf"));
	expect_load_fails(&p, -EPERM, prefix);
	/* The directory counts too. */
	put_file("home/alice/.config/ocsb/egress.conf", "allow x.example\n", 0644);
	assert_int_equal(chmod(unit_path("home/alice/.config/ocsb"), 0777), 0);
	snprintf(prefix, sizeof(prefix), "%s: its directory is writable",
		unit_path("home/alice/.config/ocsb/egress.conf"));
	expect_load_fails(&p, -EPERM, prefix);
}

static void load_owner_symlink(void **state)
{
	struct paths p;

	layout(&p);
	put_file("elsewhere.conf", "allow x.example\n", 0644);
	assert_int_equal(symlink(unit_path("elsewhere.conf"),
				 unit_path("home/alice/.config/ocsb/egress.conf")),
		0);
	expect_load_fails(&p, -EINVAL, unit_path("home/alice/.config/ocsb/egress.conf"));
}

static void load_error_in_dropin(void **state)
{
	struct paths p;
	char prefix[PATH_MAX + 8];

	layout(&p);
	put_file("etc/ocsb/egress.d/10-a.conf", "allow ok.example\n\nconnect x.example:0\n", 0644);
	put_file("home/alice/.config/ocsb/egress.conf", "allow y.example\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s:3: connect 'x.example:0': port 0 is out of range",
		unit_path("etc/ocsb/egress.d/10-a.conf"));
	expect_load_fails(&p, -EINVAL, prefix);
}

static void load_error_in_owner_file(void **state)
{
	struct paths p;
	char prefix[PATH_MAX + 8];

	layout(&p);
	put_file("home/alice/.config/ocsb/egress.conf", "policy allowlist\npolicy blocklist\n",
		0644);
	snprintf(prefix, sizeof(prefix), "%s:2: 'policy' given twice (first on line 1)",
		unit_path("home/alice/.config/ocsb/egress.conf"));
	expect_load_fails(&p, -EINVAL, prefix);
}

static void load_bad_dropin_name(void **state)
{
	struct paths p;
	char prefix[PATH_MAX + 8];

	layout(&p);
	put_file("etc/ocsb/egress.d/my rules.conf", "allow x.example\n", 0644);
	snprintf(prefix, sizeof(prefix), "%s/my rules.conf: unsupported file name",
		unit_path("etc/ocsb/egress.d"));
	expect_load_fails(&p, -EINVAL, prefix);
}

static void load_missing_main_file(void **state)
{
	struct paths p;

	layout(&p);
	assert_int_equal(unlink(unit_path("etc/ocsb/egress.conf")), 0);
	expect_load_fails(&p, -ENOENT, unit_path("etc/ocsb/egress.conf"));
}

/* The real entry point wants root's files: ours belong to the test user. */
static void load_requires_root_owned(void **state)
{
	struct egress e;
	struct paths p;
	char err[512], prefix[PATH_MAX + 8];

	if (geteuid() == 0) {
		printf("# skip: running as root, every file is root's\n");
		skip();
	}
	layout(&p);
	snprintf(prefix, sizeof(prefix), "%s: its directory is owned by uid %u",
		unit_path("etc/ocsb/egress.conf"), (unsigned)getuid());
	assert_int_equal(egress_load(&e, &p, NULL, (uid_t)-1, err, sizeof(err)), -EPERM);
	assert_err_prefix(err, prefix);
	assert_int_equal(e.n, 0);
	/* The owner's uid is needed to check the owner's file. */
	assert_int_equal(
		egress_load(&e, &p, unit_path("home/alice"), (uid_t)-1, err, sizeof(err)), -EINVAL);
}

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
	if (why) {
		printf("# skip: %s\n", why);
		buf_free(&out);
		egress_free(&e);
		skip();
	}
	squid_parse(&out);
	buf_free(&out);
	egress_free(&e);
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
	assert_int_equal(e.policy, EGRESS_BLOCKLIST);
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
	expect_verdict(&e, "api.anthropic.com", 443, 1, "allow", e.rules[0].line);
	render(&e, &out);
	check_common_lines(out.data);
	check_order(out.data);
	check_last_access(out.data, "http_access allow all ocsb_m_default");
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
	if (why) {
		printf("# skip: %s\n", why);
		buf_free(&out);
		egress_free(&e);
		skip();
	}
	squid_parse(&out);
	buf_free(&out);
	egress_free(&e);
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
	if (why) {
		printf("# skip: %s\n", why);
		buf_free(&out);
		egress_free(&e);
		skip();
	}
	squid_parse(&out);
	buf_free(&out);
	egress_free(&e);
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
	if (why) {
		printf("# skip: %s\n", why);
		buf_free(&out);
		egress_free(&e);
		skip();
	}
	squid_parse(&out);
	buf_free(&out);
	egress_free(&e);
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

#define FILE_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_every_keyword),
		cmocka_unit_test(parse_defaults),
		cmocka_unit_test(parse_errors),
		cmocka_unit_test(parse_bad_regex),
		cmocka_unit_test(parse_is_atomic),
		cmocka_unit_test(decide_seed_example),
		cmocka_unit_test(decide_never_even_if_allowed),
		cmocka_unit_test(decide_allowlist),
		cmocka_unit_test(decide_egress_off),
		cmocka_unit_test(decide_ip_rules),
		FILE_TEST(load_layers),
		FILE_TEST(load_later_file_overrides_policy),
		FILE_TEST(load_owner_file_optional),
		FILE_TEST(load_owner_group_writable),
		FILE_TEST(load_owner_symlink),
		FILE_TEST(load_error_in_dropin),
		FILE_TEST(load_error_in_owner_file),
		FILE_TEST(load_bad_dropin_name),
		FILE_TEST(load_missing_main_file),
		FILE_TEST(load_requires_root_owned),
		FILE_TEST(render_seed_example),
		FILE_TEST(render_defaults_file),
		FILE_TEST(render_allowlist),
		FILE_TEST(render_allowlist_empty),
		FILE_TEST(render_egress_off),
		cmocka_unit_test(render_bad_settings),
		FILE_TEST(render_odd_file_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
