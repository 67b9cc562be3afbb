/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "egress.h"
#include "fileops.h"
#include "egress_int.h"

/*
 * Destinations that are never legitimate for the agent (design invariant 3), whatever the
 * rules say: loopback, unspecified, link-local (with 169.254.169.254, the cloud metadata
 * service), multicast and the reserved 240/4 with broadcast. Squid keeps IPv4 addresses as
 * v4-mapped IPv6 internally, so ::ffff:127.0.0.1 is 127.0.0.1 to it as it is to us.
 */
const char *const egress_never_nets[] = {
	"127.0.0.0/8",
	"0.0.0.0/8",
	"169.254.0.0/16",
	"224.0.0.0/4",
	"240.0.0.0/4",
	"::1/128",
	"::/128",
	"fe80::/10",
	"ff00::/8",
};
const size_t egress_n_never_nets = ARRAY_SIZE(egress_never_nets);

/* Internal networks: refused unless allow or connect names the host (the seed's rule). */
const char *const egress_private_nets[] = {
	"10.0.0.0/8",
	"172.16.0.0/12",
	"192.168.0.0/16",
	"100.64.0.0/10",
	"fc00::/7",
	"fec0::/10",
};
const size_t egress_n_private_nets = ARRAY_SIZE(egress_private_nets);

/* ---- values ---- */

const char *egress_kind_name(int kind)
{
	switch (kind) {
	case EGRESS_ALLOW:
		return "allow";
	case EGRESS_ALLOW_REGEX:
		return "allow-regex";
	case EGRESS_BLOCK:
		return "block";
	case EGRESS_BLOCK_REGEX:
		return "block-regex";
	case EGRESS_CONNECT:
		return "connect";
	case EGRESS_EXPECT_PASS:
		return "expect-pass";
	case EGRESS_EXPECT_BLOCK:
		return "expect-block";
	}
	return "?";
}

int egress_is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '-';
}

char egress_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/*
 * A host value of a rule into `out` (at least HOST_MAX + 1 bytes): a name, ".domain" when
 * allow_domain, an IPv4 address or an IPv6 address (brackets optional). Names are lower
 * cased and addresses canonical (a v4-mapped IPv6 address as its IPv4 one), so the squid
 * ACLs match what squid's URL parser produces.
 */
static int host_value(const char *v, int allow_domain, char *out, char *err, size_t errlen)
{
	char inner[INET6_ADDRSTRLEN + 1];
	struct in6_addr a6;
	struct in_addr a4;
	const char *p, *label, *last;
	size_t len = strlen(v), o = 0;

	if (len == 0) {
		snprintf(err, errlen, "empty host");
		return -1;
	}
	if (strchr(v, '/')) {
		snprintf(err, errlen,
			"'%.200s': networks are not supported; name hosts, .domains or single "
			"addresses",
			v);
		return -1;
	}
	if (v[0] == '[' || strchr(v, ':')) {
		const char *s = v[0] == '[' ? v + 1 : v;
		size_t sl = v[0] == '[' ? len - 2 : len;

		if ((v[0] == '[' && (len < 3 || v[len - 1] != ']')) || sl >= sizeof(inner)) {
			snprintf(err, errlen, "'%.200s' is not an IPv6 address", v);
			return -1;
		}
		memcpy(inner, s, sl);
		inner[sl] = '\0';
		if (inet_pton(AF_INET6, inner, &a6) != 1) {
			snprintf(err, errlen,
				"'%.200s' is not a host or IPv6 address (a port goes in 'connect "
				"HOST:PORT')",
				v);
			return -1;
		}
		/*
		 * Squid and egress_decide see a v4-mapped literal as the IPv4 address it
		 * maps: written as IPv6 the rule would never match (an allow without effect,
		 * a block the agent passes with the address's usual form).
		 */
		if (IN6_IS_ADDR_V4MAPPED(&a6))
			inet_ntop(AF_INET, a6.s6_addr + 12, out, HOST_MAX + 1);
		else
			inet_ntop(AF_INET6, &a6, out, HOST_MAX + 1);
		return 0;
	}
	p = v;
	if (*p == '.') {
		if (!allow_domain) {
			snprintf(err, errlen, "'%.200s': a .domain is not allowed here", v);
			return -1;
		}
		out[o++] = *p++;
	}
	if (len > HOST_MAX) {
		snprintf(err, errlen, "'%.64s...' is longer than %d characters", v, HOST_MAX);
		return -1;
	}
	label = last = p;
	for (;; p++) {
		if (*p == '.' || *p == '\0') {
			size_t ll = (size_t)(p - label);

			if (ll == 0 && *p == '\0') {
				snprintf(err, errlen, "'%.200s': remove the trailing '.'", v);
				return -1;
			}
			if (ll == 0 || ll > 63) {
				snprintf(err, errlen, "'%.200s': %s", v,
					ll ? "a label is longer than 63 characters"
					   : "empty label between dots");
				return -1;
			}
			if (label[0] == '-' || p[-1] == '-') {
				snprintf(err, errlen,
					"'%.200s' is not a host name: a label starts or ends "
					"with '-'",
					v);
				return -1;
			}
			last = label;
			if (*p == '\0')
				break;
			label = p + 1;
		} else if (!egress_is_name_char(*p)) {
			snprintf(err, errlen,
				"'%.200s' is not a host name, .domain or IP address (letters, "
				"digits, '-' and '.')",
				v);
			return -1;
		}
		out[o++] = egress_lower(*p);
	}
	out[o] = '\0';
	/* No top-level domain is numeric: such a value can only be meant as an IPv4 address. */
	if (strspn(last, "0123456789") == strlen(last)) {
		if (v[0] == '.' || inet_pton(AF_INET, v, &a4) != 1) {
			snprintf(err, errlen, "'%.200s' is not an IPv4 address (a.b.c.d)", v);
			return -1;
		}
		inet_ntop(AF_INET, &a4, out, HOST_MAX + 1);
	}
	return 0;
}

/* x * f, or past EGRESS_REGEX_MAX_WEIGHT (all that matters of a weight above it). */
static unsigned long weight_mul(unsigned long x, unsigned long f)
{
	return f && x > (EGRESS_REGEX_MAX_WEIGHT + 1) / f ? EGRESS_REGEX_MAX_WEIGHT + 1 : x * f;
}

/*
 * An upper bound on the size regcomp expands the ERE v to: an atom (a character, an
 * escape, a bracket expression) counts 1, a group what it holds, and a repeat multiplies
 * its operand by the copies regcomp makes of it: '+' 2, {m}, {m,} m + 1, {m,n} n ('*' and
 * '?' none). Only an upper bound for what regcomp accepts; what it refuses it refuses.
 *
 * *ret_empty_repeat is set when a repeat's operand can match the empty string ("z??",
 * "(a*)+", "(x|)*", "(^)+"): glibc's regcomp spends time growing much faster than the
 * size on the empty paths of such a loop ("z" with 100 '?' then "+++" takes minutes).
 * Such a repeat adds nothing a host name could need ("(a?)+" is "a*").
 */
static unsigned long regex_weight(const char *v, int *ret_empty_repeat)
{
	enum { DEPTH = 64 };
	unsigned long sum[DEPTH], last[DEPTH];
	/*
	 * Per group: the alternatives before this one had an empty match (grp), the elements
	 * of this one before the last all do (prev), the last does (lnull), there is one (have).
	 */
	unsigned char grp[DEPTH], prev[DEPTH], lnull[DEPTH], have[DEPTH];
	int d = 0;

	*ret_empty_repeat = 0;
	sum[0] = last[0] = 0;
	grp[0] = have[0] = 0;
	prev[0] = lnull[0] = 1;
	for (const char *p = v; *p; p++) {
		unsigned long w = 1, f = 0;
		int empty = 0, opt = 0; /* the atom matches the empty string; the repeat may skip */

		switch (*p) {
		case '(':
			if (++d == DEPTH)
				return EGRESS_REGEX_MAX_WEIGHT + 1;
			sum[d] = last[d] = 0;
			grp[d] = have[d] = 0;
			prev[d] = lnull[d] = 1;
			continue;
		case ')':
			if (d == 0)
				break;
			empty = grp[d] || (prev[d] && lnull[d]);
			w = sum[d--];
			break;
		case '|':
			last[d] = 0;
			grp[d] |= prev[d] && lnull[d];
			prev[d] = lnull[d] = 1;
			have[d] = 0;
			continue;
		case '^':
		case '$':
			empty = 1; /* anchors match no character */
			break;
		case '\\':
			if (p[1])
				p++;
			/* GNU's word and buffer anchors match no character either. */
			empty = *p && strchr("bB<>`'", *p) != NULL;
			break;
		case '[':
			/* To the closing ']': one first (or after '^') is literal; [:x:] inside. */
			p++;
			if (*p == '^')
				p++;
			if (*p == ']')
				p++;
			while (*p && *p != ']') {
				if (*p == '[' && (p[1] == ':' || p[1] == '=' || p[1] == '.')) {
					const char *e = strchr(p + 2, p[1]);
					p = e && e[1] == ']' ? e + 1 : p;
				}
				p++;
			}
			if (!*p)
				p--;
			break;
		case '+':
			f = 2;
			break;
		case '*':
		case '?':
			f = 1;
			opt = 1;
			break;
		case '{': {
			char *e;
			unsigned long m = strtoul(p + 1, &e, 10), n = m + 1;

			if (!(p[1] >= '0' && p[1] <= '9') && p[1] != ',')
				break;
			if (*e == ',') {
				if (e[1] >= '0' && e[1] <= '9')
					n = strtoul(e + 1, &e, 10);
				else
					e++;
			} else {
				n = m;
			}
			if (*e != '}')
				break;
			opt = m == 0;
			f = m > n ? m : n;
			f = f ? f : 1;
			p = e;
			break;
		}
		}
		if (f) {
			/* The operand is copied: stacked repeats multiply. */
			unsigned long grown = weight_mul(last[d], f);
			sum[d] = sum[d] - last[d] + grown;
			last[d] = grown;
			/* Without an operand regcomp refuses it ("Invalid preceding ..."). */
			if (have[d] && lnull[d])
				*ret_empty_repeat = 1;
			lnull[d] |= opt;
		} else {
			sum[d] += w;
			last[d] = w;
			prev[d] = prev[d] && lnull[d];
			lnull[d] = (unsigned char)empty;
			have[d] = 1;
		}
		if (sum[d] > EGRESS_REGEX_MAX_WEIGHT)
			return EGRESS_REGEX_MAX_WEIGHT + 1;
	}
	while (d > 0)
		sum[d - 1] += sum[d], d--;
	return sum[0] > EGRESS_REGEX_MAX_WEIGHT ? EGRESS_REGEX_MAX_WEIGHT + 1 : sum[0];
}

/*
 * Regexes go into squid.conf as bare words: refuse what squid would read differently
 * (quotes open an include file, "${" is a macro, '#' may start a comment) before regcomp.
 */
static int regex_value(const char *v, regex_t *re, char *err, size_t errlen)
{
	char msg[256];
	int rc, empty_repeat;

	if (!*v) {
		snprintf(err, errlen, "empty regex");
		return -1;
	}
	for (const char *p = v; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c <= ' ' || c >= 0x7f || c == '"' || c == '\'' || c == '#') {
			snprintf(err, errlen,
				"regex '%.200s': spaces, quotes, '#' and non-ASCII characters "
				"never match a host name",
				v);
			return -1;
		}
	}
	if (strstr(v, "${")) {
		snprintf(err, errlen, "regex '%.200s': '${' is not supported", v);
		return -1;
	}
	if (regex_weight(v, &empty_repeat) > EGRESS_REGEX_MAX_WEIGHT) {
		snprintf(err, errlen,
			"regex '%.200s' is too complex: its repeats ({m,n}, '+') would copy it "
			"more than %d times over",
			v, EGRESS_REGEX_MAX_WEIGHT);
		return -1;
	}
	if (empty_repeat) {
		snprintf(err, errlen,
			"regex '%.200s' repeats something that can match nothing (as in "
			"\"a?+\", \"(a*)*\", \"(a|)+\"), which glibc's regex compiler may take "
			"minutes over: write the repeat once (\"a*\", \"(a|b)*\")",
			v);
		return -1;
	}
	rc = regcomp(re, v, REG_EXTENDED | REG_ICASE | REG_NOSUB);
	if (rc != 0) {
		regerror(rc, re, msg, sizeof(msg));
		snprintf(err, errlen, "bad regex '%.200s': %s", v, msg);
		return -1;
	}
	return 0;
}

static int url_value(const char *v, char *err, size_t errlen)
{
	size_t skip = !strncmp(v, "http://", 7) ? 7 : !strncmp(v, "https://", 8) ? 8 : 0;

	if (!skip) {
		snprintf(err, errlen, "'%.200s' is not an http:// or https:// URL", v);
		return -1;
	}
	if (v[skip] == '\0' || v[skip] == '/') {
		snprintf(err, errlen, "'%.200s': no host in the URL", v);
		return -1;
	}
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
			snprintf(err, errlen,
				"'%.200s': spaces and non-ASCII characters must be %%-encoded in a "
				"URL",
				v);
			return -1;
		}
	return 0;
}

/*
 * curl options of a self-check. The checks run curl as the agent (or root); options that
 * read or write files (-o, -K, -D, -T, --cookie-jar, -H @file) or change the proxy (-x,
 * --noproxy) would turn a rule file into a way to touch files or to skip the proxy.
 */
static const char *const curl_flags[] = {"-k", "--insecure", "-I", "--head", "-L", "--location",
	"-4", "--ipv4", "-6", "--ipv6", "-f", "--fail", "-s", "--silent", "-S", "--show-error",
	"-g", "--globoff", "--compressed", "--http1.0", "--http1.1", "--http2", NULL};
static const char *const curl_valued[] = {"-H", "--header", "-X", "--request", "-A", "--user-agent",
	"-m", "--max-time", "--connect-timeout", "--data-raw", NULL};

static int in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return 1;
	return 0;
}

static int curl_args_value(int argc, char **argv, struct strv *out, char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++) {
		if (in_list(curl_valued, argv[i])) {
			if (i + 1 == argc) {
				snprintf(err, errlen, "curl option %s needs a value", argv[i]);
				return -1;
			}
			if (argv[i + 1][0] == '@') {
				snprintf(err, errlen,
					"curl option %s %.100s: values read from files are not "
					"supported",
					argv[i], argv[i + 1]);
				return -1;
			}
			if (strv_push(out, argv[i]) < 0 || strv_push(out, argv[i + 1]) < 0)
				goto nomem;
			i++;
		} else if (in_list(curl_flags, argv[i])) {
			if (strv_push(out, argv[i]) < 0)
				goto nomem;
		} else {
			snprintf(err, errlen,
				"curl option '%.100s' is not supported in self-checks (allowed: -k "
				"-I -L -4 -6 -f -s -S -g -H -X -A -m and their long forms, "
				"--compressed, --http1.0/1.1/2, --connect-timeout, --data-raw)",
				argv[i]);
			return -1;
		}
	}
	return 0;
nomem:
	snprintf(err, errlen, "out of memory");
	return -1;
}

/* ---- rules ---- */

void egress_rule_free(struct egress_rule *r)
{
	free(r->value);
	strv_free(&r->curl_args);
	if (r->has_re)
		regfree(&r->re);
	memset(r, 0, sizeof(*r));
}

void egress_free(struct egress *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		egress_rule_free(&e->rules[i]);
	free(e->rules);
	strv_free(&e->files);
	strv_free(&e->proposals);
	memset(e, 0, sizeof(*e));
}

static struct egress_rule *rule_add(struct parse_ctx *c, const struct conf_loc *loc, int kind,
	const char *value, char *err, size_t errlen)
{
	struct egress *e = c->e;
	struct egress_rule *r;

	if (e->n == EGRESS_MAX_RULES) {
		snprintf(err, errlen, "more than %d rules", EGRESS_MAX_RULES);
		return NULL;
	}
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 32;
		struct egress_rule *nr = realloc(e->rules, cap * sizeof(*nr));

		if (!nr)
			goto nomem;
		e->rules = nr;
		e->cap = cap;
	}
	r = &e->rules[e->n];
	memset(r, 0, sizeof(*r));
	r->value = strdup(value);
	if (!r->value)
		goto nomem;
	r->kind = kind;
	r->file = c->file;
	r->line = loc->line;
	e->n++;
	return r;
nomem:
	snprintf(err, errlen, "out of memory");
	return NULL;
}

static int add_hosts(void *ctx, const struct conf_loc *loc, int argc, char **argv, int kind,
	char *err, size_t errlen)
{
	char host[HOST_MAX + 1];

	for (int i = 0; i < argc; i++)
		if (host_value(argv[i], 1, host, err, errlen) < 0 ||
			!rule_add(ctx, loc, kind, host, err, errlen))
			return -1;
	return 0;
}

static int add_regexes(void *ctx, const struct conf_loc *loc, int argc, char **argv, int kind,
	char *err, size_t errlen)
{
	struct parse_ctx *c = ctx;

	for (int i = 0; i < argc; i++) {
		struct egress_rule *r;
		regex_t re;
		int empty_repeat;

		if (regex_value(argv[i], &re, err, errlen) < 0)
			return -1;
		/* One file's regexes together: many small ones cost what one large one does. */
		c->re_weight += regex_weight(argv[i], &empty_repeat);
		if (c->re_weight > EGRESS_REGEX_FILE_WEIGHT) {
			regfree(&re);
			snprintf(err, errlen,
				"the regexes of this file are too complex together (more than "
				"%d atoms, repeats counted): use .domain rules",
				EGRESS_REGEX_FILE_WEIGHT);
			return -1;
		}
		r = rule_add(ctx, loc, kind, argv[i], err, errlen);
		if (!r) {
			regfree(&re);
			return -1;
		}
		r->re = re;
		r->has_re = 1;
	}
	return 0;
}

static int kw_allow(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return add_hosts(ctx, loc, argc, argv, EGRESS_ALLOW, err, errlen);
}

static int kw_block(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return add_hosts(ctx, loc, argc, argv, EGRESS_BLOCK, err, errlen);
}

static int kw_allow_regex(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return add_regexes(ctx, loc, argc, argv, EGRESS_ALLOW_REGEX, err, errlen);
}

static int kw_block_regex(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return add_regexes(ctx, loc, argc, argv, EGRESS_BLOCK_REGEX, err, errlen);
}

static int kw_connect(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++) {
		const char *v = argv[i], *colon;
		char host[HOST_MAX + 1], hostpart[HOST_MAX + 3], msg[128];
		struct egress_rule *r;
		unsigned long port;
		size_t hl;

		if (v[0] == '[') {
			const char *close = strchr(v, ']');
			colon = close && close[1] == ':' ? close + 1 : NULL;
		} else {
			colon = strrchr(v, ':');
			if (colon && memchr(v, ':', (size_t)(colon - v))) {
				snprintf(err, errlen,
					"connect '%.200s': write IPv6 as [ADDRESS]:PORT", v);
				return -1;
			}
		}
		if (!colon || colon == v) {
			snprintf(err, errlen, "connect '%.200s': give HOST:PORT", v);
			return -1;
		}
		hl = (size_t)(colon - v);
		if (hl >= sizeof(hostpart)) {
			snprintf(err, errlen, "connect '%.64s...': host too long", v);
			return -1;
		}
		memcpy(hostpart, v, hl);
		hostpart[hl] = '\0';
		if (conf_uint(colon + 1, 1, 65535, &port, msg, sizeof(msg)) < 0) {
			snprintf(err, errlen, "connect '%.200s': port %s", v, msg);
			return -1;
		}
		if (host_value(hostpart, 1, host, err, errlen) < 0)
			return -1;
		r = rule_add(ctx, loc, EGRESS_CONNECT, host, err, errlen);
		if (!r)
			return -1;
		r->port = (unsigned)port;
	}
	return 0;
}

static int add_expect(void *ctx, const struct conf_loc *loc, int argc, char **argv, int kind,
	char *err, size_t errlen)
{
	struct egress_rule *r;

	if (url_value(argv[0], err, errlen) < 0)
		return -1;
	r = rule_add(ctx, loc, kind, argv[0], err, errlen);
	if (!r)
		return -1;
	return curl_args_value(argc - 1, argv + 1, &r->curl_args, err, errlen);
}

static int kw_expect_pass(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return add_expect(ctx, loc, argc, argv, EGRESS_EXPECT_PASS, err, errlen);
}

static int kw_expect_block(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return add_expect(ctx, loc, argc, argv, EGRESS_EXPECT_BLOCK, err, errlen);
}

/* Settings change what is in force: a proposal holds rules only. */
static int setting(struct parse_ctx *c, const char *kw, char *err, size_t errlen)
{
	if (c->proposal) {
		snprintf(err, errlen,
			"%s: a proposal holds allow, connect and block lines only (it is not in "
			"force until `sudo ocsb egress apply FILE`)",
			kw);
		return -1;
	}
	c->setting = 1;
	return 0;
}

static int kw_policy(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct egress *e = ((struct parse_ctx *)ctx)->e;

	if (setting(ctx, "policy", err, errlen) < 0)
		return -1;

	if (!strcmp(argv[0], "blocklist"))
		e->policy = EGRESS_BLOCKLIST;
	else if (!strcmp(argv[0], "allowlist"))
		e->policy = EGRESS_ALLOWLIST;
	else {
		snprintf(err, errlen, "policy '%.64s': say allowlist or blocklist", argv[0]);
		return -1;
	}
	return 0;
}

static int kw_egress(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct egress *e = ((struct parse_ctx *)ctx)->e;
	int on;

	if (setting(ctx, "egress", err, errlen) < 0)
		return -1;
	if (conf_bool(argv[0], &on, err, errlen) < 0)
		return -1;
	e->off = !on;
	return 0;
}

static int kw_dns(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct egress *e = ((struct parse_ctx *)ctx)->e;

	if (setting(ctx, "dns", err, errlen) < 0)
		return -1;
	if (!strcmp(argv[0], "allow"))
		e->dns_allow = 1;
	else if (!strcmp(argv[0], "deny"))
		e->dns_allow = 0;
	else {
		snprintf(err, errlen, "dns '%.64s': say allow or deny", argv[0]);
		return -1;
	}
	return 0;
}

void egress_time_utc(time_t t, char *out, size_t n)
{
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(out, n, "?");
}

/* "2026-12-06T21:00:00Z" exactly (UTC, seconds, the Z): what egress_time_utc writes. */
static int utc_value(const char *v, time_t *ret, char *err, size_t errlen)
{
	struct tm tm = {0};
	char back[32];
	int len = 0;

	if (sscanf(v, "%4d-%2d-%2dT%2d:%2d:%2dZ%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
		    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &len) != 6 ||
		v[len] || tm.tm_year < 2000 || tm.tm_year > 9999)
		goto bad;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*ret = timegm(&tm);
	egress_time_utc(*ret, back, sizeof(back));
	if (*ret == (time_t)-1 || strcmp(back, v) != 0)
		goto bad;
	return 0;
bad:
	snprintf(err, errlen, "'%.64s': give a UTC time as 2026-12-06T21:00:00Z", v);
	return -1;
}

/* Learn mode lasts at most a day: longer is a blocklist by another name. */
#define EGRESS_LEARN_MAX_S (24 * 3600)

static int kw_learn(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct parse_ctx *c = ctx;
	time_t from, until;
	char msg[160];

	if (setting(c, "learn", err, errlen) < 0)
		return -1;
	if (utc_value(argv[0], &from, msg, sizeof(msg)) < 0 ||
		utc_value(argv[1], &until, msg, sizeof(msg)) < 0) {
		snprintf(err, errlen, "learn %s", msg);
		return -1;
	}
	if (until <= from || until - from > EGRESS_LEARN_MAX_S) {
		snprintf(err, errlen,
			"learn: the end must come after the start, and at most 24 hours after "
			"it (sudo ocsb egress learn start --minutes N writes this line)");
		return -1;
	}
	c->e->learn_from = from;
	c->e->learn_until = until;
	c->e->learn_file = c->file;
	return 0;
}

static int kw_proposal(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct parse_ctx *c = ctx;

	if (c->e->n != c->start_n || c->setting) {
		snprintf(err, errlen, "proposal: say it first in the file, before any rule");
		return -1;
	}
	c->proposal = 1;
	return 0;
}

int egress_learn_update(struct egress *e, time_t now)
{
	e->learning = e->policy == EGRESS_ALLOWLIST && !e->off && e->learn_until &&
		now < e->learn_until;
	return e->learning;
}

const struct conf_kw egress_keywords[] = {
	{"learn", 2, 2, kw_learn, CONF_ONCE},
	{"proposal", 0, 0, kw_proposal, CONF_ONCE},
	{"policy", 1, 1, kw_policy, CONF_ONCE},
	{"egress", 1, 1, kw_egress, CONF_ONCE},
	{"dns", 1, 1, kw_dns, CONF_ONCE},
	{"allow", 1, CONF_MAX_ARGS - 1, kw_allow, 0},
	{"allow-regex", 1, CONF_MAX_ARGS - 1, kw_allow_regex, 0},
	{"block", 1, CONF_MAX_ARGS - 1, kw_block, 0},
	{"block-regex", 1, CONF_MAX_ARGS - 1, kw_block_regex, 0},
	{"connect", 1, CONF_MAX_ARGS - 1, kw_connect, 0},
	{"expect-pass", 1, CONF_MAX_ARGS - 1, kw_expect_pass, 0},
	{"expect-block", 1, CONF_MAX_ARGS - 1, kw_expect_block, 0},
	{NULL, 0, 0, NULL, 0},
};
