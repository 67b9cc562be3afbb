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

/* Bounds that no honest configuration reaches; they keep a runaway file from eating memory. */
#define EGRESS_MAX_RULES 100000
#define EGRESS_MAX_DROPINS 1000
#define HOST_MAX 253

/*
 * Destinations that are never legitimate for the agent (design invariant 3), whatever the
 * rules say: loopback, unspecified, link-local (with 169.254.169.254, the cloud metadata
 * service), multicast and the reserved 240/4 with broadcast. Squid keeps IPv4 addresses as
 * v4-mapped IPv6 internally, so ::ffff:127.0.0.1 is 127.0.0.1 to it as it is to us.
 */
static const char *const never_nets[] = {
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

/* Internal networks: refused unless allow or connect names the host (the seed's rule). */
static const char *const private_nets[] = {
	"10.0.0.0/8",
	"172.16.0.0/12",
	"192.168.0.0/16",
	"100.64.0.0/10",
	"fc00::/7",
	"fec0::/10",
};

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

static int is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '-';
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/*
 * A host value of a rule into `out` (at least HOST_MAX + 1 bytes): a name, ".domain" when
 * allow_domain, an IPv4 address or an IPv6 address (brackets optional). Names are lower
 * cased and addresses canonical, so the squid ACLs match what squid's URL parser produces.
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
		} else if (!is_name_char(*p)) {
			snprintf(err, errlen,
				"'%.200s' is not a host name, .domain or IP address (letters, "
				"digits, '-' and '.')",
				v);
			return -1;
		}
		out[o++] = lower(*p);
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

/*
 * Regexes go into squid.conf as bare words: refuse what squid would read differently
 * (quotes open an include file, "${" is a macro, '#' may start a comment) before regcomp.
 */
static int regex_value(const char *v, regex_t *re, char *err, size_t errlen)
{
	char msg[256];
	int rc;

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

static void rule_free(struct egress_rule *r)
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
		rule_free(&e->rules[i]);
	free(e->rules);
	strv_free(&e->files);
	memset(e, 0, sizeof(*e));
}

struct parse_ctx {
	struct egress *e;
	const char *file; /* borrowed from e->files */
};

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
	for (int i = 0; i < argc; i++) {
		struct egress_rule *r;
		regex_t re;

		if (regex_value(argv[i], &re, err, errlen) < 0)
			return -1;
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

static int kw_policy(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct egress *e = ((struct parse_ctx *)ctx)->e;

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

	if (conf_bool(argv[0], &on, err, errlen) < 0)
		return -1;
	e->off = !on;
	return 0;
}

static int kw_dns(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct egress *e = ((struct parse_ctx *)ctx)->e;

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

static const struct conf_kw egress_keywords[] = {
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

/* ---- loading ---- */

/* What a failed file must not leave behind: its rules, its settings, its name. */
struct snapshot {
	size_t n;
	size_t nfiles;
	enum egress_policy policy;
	int off;
	int dns_allow;
};

static int begin(struct egress *e, const char *file, struct parse_ctx *c, struct snapshot *s,
	char *err, size_t errlen)
{
	s->n = e->n;
	s->nfiles = e->files.n;
	s->policy = e->policy;
	s->off = e->off;
	s->dns_allow = e->dns_allow;
	if (strv_push(&e->files, file) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c->e = e;
	c->file = e->files.v[e->files.n - 1];
	return 0;
}

static void rollback(struct egress *e, const struct snapshot *s)
{
	while (e->n > s->n)
		rule_free(&e->rules[--e->n]);
	while (e->files.n > s->nfiles) {
		free(e->files.v[--e->files.n]);
		e->files.v[e->files.n] = NULL;
	}
	e->policy = s->policy;
	e->off = s->off;
	e->dns_allow = s->dns_allow;
}

int egress_parse_buf(
	struct egress *e, const char *buf, size_t len, const char *file, char *err, size_t errlen)
{
	struct parse_ctx c;
	struct snapshot s;

	if (begin(e, file, &c, &s, err, errlen) < 0)
		return -1;
	if (conf_parse_buf(buf, len, c.file, egress_keywords, &c, err, errlen) < 0) {
		rollback(e, &s);
		return -1;
	}
	return 0;
}

/* One file; its error in err. -ENOENT passes through for the caller to decide. */
static int load_file(struct egress *e, const char *path, uid_t owner, char *err, size_t errlen)
{
	struct parse_ctx c;
	struct snapshot s;
	int r;

	if (begin(e, path, &c, &s, err, errlen) < 0)
		return -ENOMEM;
	r = conf_parse_file(c.file, owner, egress_keywords, &c, err, errlen);
	if (r < 0)
		rollback(e, &s);
	return r;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Drop-in names go into messages and into squid.conf notes: keep them plain. Hidden files
 * and names not ending in ".conf" (editor backups, dpkg leftovers) are skipped, like
 * run-parts does; a ".conf" file with another name is an error rather than silently unread.
 */
static int dropin_name(const char *name, const char *dir, char *err, size_t errlen)
{
	size_t n = strlen(name);

	if (name[0] == '.' || n <= 5 || strcmp(name + n - 5, ".conf") != 0)
		return 0;
	for (const char *p = name; *p; p++)
		if (!is_name_char(*p) && *p != '.' && *p != '_') {
			snprintf(err, errlen,
				"%s/%.200s: unsupported file name; use letters, digits, '.', "
				"'_' and '-'",
				dir, name);
			return -1;
		}
	return 1;
}

static int load_dropins(struct egress *e, const char *dir, uid_t owner, char *err, size_t errlen)
{
	struct strv names = {0};
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	fd = fo_open_dir(AT_FDCWD, dir);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", dir, strerror(-fd));
		return fd;
	}
	d = fdopendir(fd);
	if (!d) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", dir, strerror(errno));
		close(fd);
		return r;
	}
	while ((de = readdir(d))) {
		int ok = dropin_name(de->d_name, dir, err, errlen);

		if (ok < 0) {
			r = -EINVAL;
			goto out;
		}
		if (!ok)
			continue;
		if (names.n == EGRESS_MAX_DROPINS) {
			snprintf(err, errlen, "%s: more than %d files", dir, EGRESS_MAX_DROPINS);
			r = -E2BIG;
			goto out;
		}
		if (strv_push(&names, de->d_name) < 0) {
			snprintf(err, errlen, "out of memory");
			r = -ENOMEM;
			goto out;
		}
	}
	if (names.n)
		qsort(names.v, names.n, sizeof(*names.v), cmp_names);
	for (size_t i = 0; i < names.n; i++) {
		char path[PATH_MAX];

		if (path_join(path, sizeof(path), dir, names.v[i]) < 0) {
			snprintf(err, errlen, "%s/%s: path too long", dir, names.v[i]);
			r = -ENAMETOOLONG;
			goto out;
		}
		r = load_file(e, path, owner, err, errlen);
		if (r < 0)
			goto out;
	}
out:
	closedir(d);
	strv_free(&names);
	return r;
}

int egress_load_as(struct egress *e, const struct paths *p, uid_t sys_uid, const char *owner_home,
	uid_t owner_uid, char *err, size_t errlen)
{
	struct egress tmp = {0};
	char path[PATH_MAX];
	int r;

	memset(e, 0, sizeof(*e));
	/* (uid_t)-1 would switch conf_parse_file's ownership checks off. */
	if (sys_uid == (uid_t)-1)
		sys_uid = 0;
	if (owner_home && owner_uid == (uid_t)-1) {
		snprintf(err, errlen, "%s: the owner's uid is unknown", owner_home);
		return -EINVAL;
	}
	if (path_join(path, sizeof(path), p->etc, "ocsb/egress.conf") < 0) {
		snprintf(err, errlen, "%s: path too long", p->etc);
		return -ENAMETOOLONG;
	}
	/* Root-written files: only root (sys_uid in tests) may own them. */
	r = load_file(&tmp, path, sys_uid, err, errlen);
	if (r < 0)
		goto fail;
	if (path_join(path, sizeof(path), p->etc, "ocsb/egress.d") < 0) {
		snprintf(err, errlen, "%s: path too long", p->etc);
		r = -ENAMETOOLONG;
		goto fail;
	}
	r = load_dropins(&tmp, path, sys_uid, err, errlen);
	if (r < 0)
		goto fail;
	if (owner_home) {
		if (path_join(path, sizeof(path), owner_home, ".config/ocsb/egress.conf") < 0) {
			snprintf(err, errlen, "%s: path too long", owner_home);
			r = -ENAMETOOLONG;
			goto fail;
		}
		/* The owner's own layer: the owner (or root) wrote it, nobody else could. */
		r = load_file(&tmp, path, owner_uid, err, errlen);
		if (r == -ENOENT)
			r = 0;
		if (r < 0)
			goto fail;
	}
	*e = tmp;
	return 0;
fail:
	egress_free(&tmp);
	return r;
}

int egress_load(struct egress *e, const struct paths *p, const char *owner_home, uid_t owner_uid,
	char *err, size_t errlen)
{
	return egress_load_as(e, p, 0, owner_home, owner_uid, err, errlen);
}

/* ---- decisions ---- */

struct host {
	char name[HOST_MAX + 3]; /* lower case, no trailing dot; IPs as squid prints them */
	int family; /* AF_INET, AF_INET6 or 0 for a name */
	unsigned char addr[16];
};

/*
 * The host as squid sees it after parsing the URL: lower case, trailing dots gone, IPv4 in
 * any inet_aton form (2130706433, 0x7f.1 and 010.0.0.1 are addresses to squid too),
 * v4-mapped IPv6 as IPv4, IPv6 in brackets.
 */
static int host_parse(const char *in, struct host *h)
{
	char buf[HOST_MAX + 3];
	size_t len = strlen(in);
	struct in_addr a4;

	memset(h, 0, sizeof(*h));
	if (len >= 2 && in[0] == '[' && in[len - 1] == ']') {
		in++;
		len -= 2;
	}
	if (len == 0 || len >= sizeof(buf))
		return -1;
	for (size_t i = 0; i < len; i++) {
		char c = lower(in[i]);

		if (!is_name_char(c) && c != '.' && c != '_' && c != ':')
			return -1;
		buf[i] = c;
	}
	while (len > 0 && buf[len - 1] == '.')
		len--;
	if (len == 0)
		return -1;
	buf[len] = '\0';
	if (strchr(buf, ':')) {
		if (inet_pton(AF_INET6, buf, h->addr) != 1)
			return -1;
		if (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)h->addr)) {
			memmove(h->addr, h->addr + 12, 4);
			h->family = AF_INET;
			inet_ntop(AF_INET, h->addr, h->name, sizeof(h->name));
			return 0;
		}
		h->family = AF_INET6;
		h->name[0] = '[';
		inet_ntop(AF_INET6, h->addr, h->name + 1, sizeof(h->name) - 2);
		strcat(h->name, "]");
		return 0;
	}
	if (buf[0] >= '0' && buf[0] <= '9' && inet_aton(buf, &a4)) {
		memcpy(h->addr, &a4, 4);
		h->family = AF_INET;
		inet_ntop(AF_INET, &a4, h->name, sizeof(h->name));
		return 0;
	}
	memcpy(h->name, buf, len + 1);
	return 0;
}

static int in_net(const char *net, const struct host *h)
{
	unsigned char a[16];
	char addr[INET6_ADDRSTRLEN];
	const char *slash = strchr(net, '/');
	int family = strchr(net, ':') ? AF_INET6 : AF_INET;
	unsigned bits = (unsigned)atoi(slash + 1);

	if (family != h->family)
		return 0;
	snprintf(addr, sizeof(addr), "%.*s", (int)(slash - net), net);
	if (inet_pton(family, addr, a) != 1)
		return 0;
	for (unsigned i = 0; i < bits; i++) {
		unsigned char m = (unsigned char)(0x80 >> (i % 8));

		if ((a[i / 8] & m) != (h->addr[i / 8] & m))
			return 0;
	}
	return 1;
}

static int in_nets(const char *const *nets, size_t n, const struct host *h)
{
	for (size_t i = 0; i < n; i++)
		if (in_net(nets[i], h))
			return 1;
	return 0;
}

static int host_matches(const char *value, const struct host *h)
{
	unsigned char a[16];
	size_t vl, nl;

	if (strchr(value, ':'))
		return h->family == AF_INET6 && inet_pton(AF_INET6, value, a) == 1 &&
			!memcmp(a, h->addr, 16);
	if (inet_pton(AF_INET, value, a) == 1)
		return h->family == AF_INET && !memcmp(a, h->addr, 4);
	if (h->family)
		return 0;
	if (value[0] != '.')
		return !strcmp(value, h->name);
	/* ".example.com": the domain itself and every name below it. */
	vl = strlen(value);
	nl = strlen(h->name);
	return !strcmp(value + 1, h->name) || (nl > vl && !strcmp(h->name + nl - vl, value));
}

static int rule_matches(const struct egress_rule *r, const struct host *h)
{
	if (r->has_re)
		return regexec(&r->re, h->name, 0, NULL, 0) == 0;
	return host_matches(r->value, h);
}

static void verdict(struct egress_verdict *v, int allow, const struct egress_rule *r,
	const char *why, const char *tag)
{
	v->allow = allow;
	v->rule = r;
	v->why = why;
	v->tag = tag;
}

static int is_localhost_name(const char *name)
{
	size_t n = strlen(name);

	/* RFC 6761: these names are loopback, whatever a resolver answers. */
	return !strcmp(name, "localhost") || (n > 10 && !strcmp(name + n - 10, ".localhost"));
}

void egress_decide(
	const struct egress *e, const char *host, unsigned port, struct egress_verdict *ret)
{
	struct host h;
	size_t i;

	if (e->off) {
		verdict(ret, 0, NULL, "egress off", "egress-off");
		return;
	}
	if (host_parse(host, &h) < 0) {
		verdict(ret, 0, NULL, "bad host name", "bad-host-name");
		return;
	}
	if (is_localhost_name(h.name) || in_nets(never_nets, ARRAY_SIZE(never_nets), &h)) {
		verdict(ret, 0, NULL, "loopback/link-local", "loopback-link-local");
		return;
	}
	for (i = 0; i < e->n; i++)
		if (e->rules[i].kind == EGRESS_CONNECT && e->rules[i].port == port &&
			host_matches(e->rules[i].value, &h)) {
			verdict(ret, 1, &e->rules[i], "connect rule", "connect-rule");
			return;
		}
	if (port != 80 && port != 443) {
		verdict(ret, 0, NULL, "port not 80/443", "port-not-80-443");
		return;
	}
	for (i = 0; i < e->n; i++)
		if ((e->rules[i].kind == EGRESS_ALLOW || e->rules[i].kind == EGRESS_ALLOW_REGEX) &&
			rule_matches(&e->rules[i], &h)) {
			verdict(ret, 1, &e->rules[i], "allow", "allow");
			return;
		}
	for (i = 0; i < e->n; i++)
		if ((e->rules[i].kind == EGRESS_BLOCK || e->rules[i].kind == EGRESS_BLOCK_REGEX) &&
			rule_matches(&e->rules[i], &h)) {
			verdict(ret, 0, &e->rules[i], "block", "block");
			return;
		}
	if (!h.family && !strchr(h.name, '.')) {
		verdict(ret, 0, NULL, "dotless name", "dotless-name");
		return;
	}
	if (in_nets(private_nets, ARRAY_SIZE(private_nets), &h)) {
		verdict(ret, 0, NULL, "private network", "private-network");
		return;
	}
	if (e->policy == EGRESS_ALLOWLIST)
		verdict(ret, 0, NULL, "policy allowlist", "policy-allowlist");
	else
		verdict(ret, 1, NULL, "default allow", "default-allow");
}

/* ---- squid.conf ---- */

/* A statement: rules [first, end) from one line of one file with one keyword. */
struct group {
	size_t first, end;
	unsigned id;
	const char *acl; /* "allow", "allow_re", ... */
};

static const char *acl_kind(int kind)
{
	switch (kind) {
	case EGRESS_ALLOW:
		return "allow";
	case EGRESS_ALLOW_REGEX:
		return "allow_re";
	case EGRESS_BLOCK:
		return "block";
	case EGRESS_BLOCK_REGEX:
		return "block_re";
	case EGRESS_CONNECT:
		return "connect";
	}
	return NULL;
}

static size_t group_end(const struct egress *e, size_t i)
{
	size_t j = i + 1;

	while (j < e->n && e->rules[j].kind == e->rules[i].kind &&
		e->rules[j].file == e->rules[i].file && e->rules[j].line == e->rules[i].line)
		j++;
	return j;
}

/* File names in notes and comments: anything unusual in a home path becomes '_'. */
static void put_plain(struct buf *b, const char *s, int *bad)
{
	for (; *s; s++) {
		char c = *s;

		if (!is_name_char(c) && c != '.' && c != '_' && c != '/' && c != ':')
			c = '_';
		if (buf_append(b, &c, 1) < 0)
			*bad = 1;
	}
}

static void put(struct buf *b, int *bad, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void put(struct buf *b, int *bad, const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0 || buf_append(b, s, (size_t)n) < 0)
		*bad = 1;
	if (n >= 0)
		free(s);
}

static void put_str(struct buf *b, int *bad, const char *s)
{
	if (buf_puts(b, s) < 0)
		*bad = 1;
}

/* A host as squid's dstdomain sees it: IPv6 literals keep their brackets. */
static void put_host(struct buf *b, int *bad, const char *v)
{
	if (strchr(v, ':')) {
		put_str(b, bad, "[");
		put_str(b, bad, v);
		put_str(b, bad, "]");
	} else {
		put_str(b, bad, v);
	}
}

/* Squid warns about (and ignores) entries that another .domain of the same ACL covers. */
static int covered(const struct egress *e, const struct group *g, size_t i)
{
	const char *v = e->rules[i].value;
	size_t vl = strlen(v);

	for (size_t k = g->first; k < g->end; k++) {
		const char *d = e->rules[k].value;
		size_t dl = strlen(d);

		if (k == i)
			continue;
		if (!strcmp(d, v) && k < i)
			return 1;
		if (d[0] == '.' && strcmp(d, v) != 0 &&
			(!strcmp(d + 1, v) || (vl > dl && !strcmp(v + vl - dl, d))))
			return 1;
	}
	return 0;
}

static void put_location(struct buf *b, int *bad, const struct egress_rule *r)
{
	put_plain(b, r->file, bad);
	put(b, bad, ":%u", r->line);
}

static void put_mark(
	struct buf *b, int *bad, const char *name, const char *step, const struct egress_rule *r)
{
	put(b, bad, "acl %s annotate_transaction ocsb_step=%s ocsb_rule=", name, step);
	if (r)
		put_location(b, bad, r);
	else
		put_str(b, bad, "builtin");
	put_str(b, bad, "\n");
}

static void put_group_acls(const struct egress *e, const struct group *g, struct buf *b, int *bad)
{
	const struct egress_rule *r0 = &e->rules[g->first];
	char name[64], step[16];

	snprintf(name, sizeof(name), "ocsb_%s_%u", g->acl, g->id);
	put_str(b, bad, "\n# ");
	put_location(b, bad, r0);
	put(b, bad, ": %s", egress_kind_name(r0->kind));
	for (size_t i = g->first; i < g->end; i++) {
		put_str(b, bad, " ");
		if (r0->kind == EGRESS_CONNECT) {
			put_host(b, bad, e->rules[i].value);
			put(b, bad, ":%u", e->rules[i].port);
		} else {
			put_str(b, bad, e->rules[i].value);
		}
	}
	put_str(b, bad, "\n");
	switch (r0->kind) {
	case EGRESS_ALLOW:
	case EGRESS_BLOCK:
		/* -n: match IP literals as written, no reverse lookup (which would stall). */
		put(b, bad, "acl %s dstdomain -n", name);
		for (size_t i = g->first; i < g->end; i++)
			if (!covered(e, g, i)) {
				put_str(b, bad, " ");
				put_host(b, bad, e->rules[i].value);
			}
		put_str(b, bad, "\n");
		break;
	case EGRESS_ALLOW_REGEX:
	case EGRESS_BLOCK_REGEX:
		/* "--": a regex starting with '-' is not an option. */
		put(b, bad, "acl %s dstdom_regex -n -i --", name);
		for (size_t i = g->first; i < g->end; i++) {
			put_str(b, bad, " ");
			put_str(b, bad, e->rules[i].value);
		}
		put_str(b, bad, "\n");
		break;
	case EGRESS_CONNECT:
		/* host AND port for each value; the values of one line ORed. */
		for (size_t i = g->first; i < g->end; i++) {
			unsigned k = (unsigned)(i - g->first + 1);

			put(b, bad, "acl %s_%u_host dstdomain -n ", name, k);
			put_host(b, bad, e->rules[i].value);
			put(b, bad, "\nacl %s_%u_port port %u\n", name, k, e->rules[i].port);
			put(b, bad, "acl %s_%u all-of %s_%u_host %s_%u_port\n", name, k, name, k,
				name, k);
			put(b, bad, "acl %s any-of %s_%u\n", name, name, k);
		}
		break;
	}
	snprintf(step, sizeof(step), "%s",
		r0->kind == EGRESS_CONNECT ? "connect-rule"
			: r0->kind == EGRESS_ALLOW || r0->kind == EGRESS_ALLOW_REGEX ? "allow"
										     : "block");
	snprintf(name + strlen(name), sizeof(name) - strlen(name), "_mark");
	put_mark(b, bad, name, step, r0);
}

static void put_nets(struct buf *b, int *bad, const char *name, const char *const *nets, size_t n)
{
	put(b, bad, "acl %s dst", name);
	for (size_t i = 0; i < n; i++)
		put(b, bad, " %s", nets[i]);
	put_str(b, bad, "\n");
}

static int valid_state_dir(const char *s)
{
	if (!s || s[0] != '/' || strlen(s) > 1024 || strstr(s, "/../") || strstr(s, "/./"))
		return 0;
	for (; *s; s++)
		if (!is_name_char(*s) && *s != '/' && *s != '.' && *s != '_')
			return 0;
	return 1;
}

/* The exceptions of a deny step: what allow or connect names is decided further down. */
static void put_unless_named(struct buf *b, int *bad, int have_allow, int have_connect)
{
	if (have_allow)
		put_str(b, bad, " !ocsb_allowed");
	if (have_connect)
		put_str(b, bad, " !ocsb_connect");
}

int egress_render_squid(const struct egress *e, const struct egress_squid *sq, struct buf *out)
{
	struct group *groups = NULL;
	size_t ng = 0;
	int bad = 0, have_allow = 0, have_connect = 0;
	unsigned id = 0;

	if (sq->port < 1 || sq->port > 65535 || !valid_state_dir(sq->state_dir) || !sq->user ||
		!valid_user_name(sq->user))
		return -EINVAL;
	if (e->n) {
		groups = calloc(e->n, sizeof(*groups));
		if (!groups)
			return -ENOMEM;
	}
	for (size_t i = 0; i < e->n; i = group_end(e, i)) {
		const char *k = acl_kind(e->rules[i].kind);

		if (!k)
			continue;
		groups[ng] =
			(struct group){.first = i, .end = group_end(e, i), .id = ++id, .acl = k};
		if (e->rules[i].kind == EGRESS_CONNECT)
			have_connect = 1;
		if (e->rules[i].kind == EGRESS_ALLOW || e->rules[i].kind == EGRESS_ALLOW_REGEX)
			have_allow = 1;
		ng++;
	}

	put_str(out, &bad,
		"# Generated by ocsb from its egress rules; do not edit: edit the rules.\n");
	for (size_t i = 0; i < e->files.n; i++) {
		put_str(out, &bad, "#   ");
		put_plain(out, e->files.v[i], &bad);
		put_str(out, &bad, "\n");
	}
	put(out, &bad, "# policy %s, egress %s\n",
		e->policy == EGRESS_ALLOWLIST ? "allowlist" : "blocklist", e->off ? "off" : "on");
	put(out, &bad,
		"\n# Loopback only: the netlock lets the agent reach this port and nothing else.\n"
		"http_port 127.0.0.1:%u\n"
		"icp_port 0\n"
		"htcp_port 0\n",
		sq->port);
	put(out, &bad,
		"\n# No cache: nothing the agent fetched outlives the request.\n"
		"cache deny all\n"
		"cache_mem 0 MB\n"
		"cache_store_log none\n"
		"coredump_dir none\n");
	put(out, &bad,
		"\n# Run as %s; state under a directory of its own.\n"
		"cache_effective_user %s\n"
		"pid_filename %s/squid.pid\n"
		"cache_log %s/cache.log\n",
		sq->user, sq->user, sq->state_dir, sq->state_dir);
	/* The squid native fields first (tools read them), then the deciding step and rule. */
	put(out, &bad,
		"logformat ocsb %%ts.%%03tu %%6tr %%>a %%Ss/%%03>Hs %%<st %%rm %%ru %%[un "
		"%%Sh/%%<a "
		"%%mt %%{ocsb_step}note %%{ocsb_rule}note\n"
		"access_log stdio:%s/access.log ocsb\n"
		"logfile_rotate 0\n",
		sq->state_dir);
	put_str(out, &bad,
		"\n# Quiet and fast to stop; no probes of its own.\n"
		"netdb_filename none\n"
		"pinger_enable off\n"
		"shutdown_lifetime 0 seconds\n"
		"# (dns_v4_first is gone in squid 5, which connects happy-eyeballs style.)\n"
		"\n# Nothing in a request or an answer names this machine or its software.\n"
		"visible_hostname egress-proxy\n"
		"forwarded_for delete\n"
		"via off\n"
		"httpd_suppress_version_string on\n"
		"request_header_access X-Forwarded-For deny all\n"
		"request_header_access Via deny all\n"
		"reply_header_access X-Cache deny all\n"
		"reply_header_access X-Cache-Lookup deny all\n"
		"reply_header_access Via deny all\n");

	put_str(out, &bad, "\n# What each http_access line logs as the deciding step.\n");
	put_mark(out, &bad, "ocsb_m_manager", "cache-manager", NULL);
	put_mark(out, &bad, "ocsb_m_protocol", "protocol", NULL);
	put_mark(out, &bad, "ocsb_m_never", "loopback-link-local", NULL);
	if (e->off) {
		put_mark(out, &bad, "ocsb_m_off", "egress-off", NULL);
		put_str(out, &bad,
			"\n# egress off: ocsb does not start the proxy and the netlock has no rule "
			"for\n"
			"# it. Should it run anyway, it refuses everything.\n"
			"http_access deny manager ocsb_m_manager\n"
			"http_access deny all ocsb_m_off\n");
		goto done;
	}
	put_mark(out, &bad, "ocsb_m_port", "port-not-80-443", NULL);
	put_mark(out, &bad, "ocsb_m_dotless", "dotless-name", NULL);
	put_mark(out, &bad, "ocsb_m_private", "private-network", NULL);
	put_mark(out, &bad, "ocsb_m_policy", "policy-allowlist", NULL);
	put_mark(out, &bad, "ocsb_m_default", "default-allow", NULL);

	put_str(out, &bad, "\n# Built-in destinations.\n");
	put_str(out, &bad, "acl ocsb_web_proto proto HTTP HTTPS\n");
	put_str(out, &bad, "acl ocsb_web_ports port 80 443\n");
	put_str(out, &bad, "acl ocsb_never_name dstdomain -n .localhost\n");
	/*
	 * Squid rewrites IP literals canonically (IPv4 dotted, v4-mapped as IPv4, IPv6 in
	 * brackets or "::"); behind this guard a dst ACL checks the literal itself, no DNS.
	 */
	put_str(out, &bad, "acl ocsb_ip_literal dstdom_regex -n -- ^[0-9.]+$ :\n");
	/* One label, maybe with the trailing dot; IPv6 literals have ':' and are not names. */
	put_str(out, &bad, "acl ocsb_dotless dstdom_regex -n -- ^[^.:]+\\.?$\n");
	put_nets(out, &bad, "ocsb_never_dst", never_nets, ARRAY_SIZE(never_nets));
	put_nets(out, &bad, "ocsb_private_dst", private_nets, ARRAY_SIZE(private_nets));

	put_str(out, &bad, "\n# The rules, one ACL per statement.");
	for (size_t g = 0; g < ng; g++)
		put_group_acls(e, &groups[g], out, &bad);
	if (have_allow || have_connect)
		put_str(out, &bad, "\n");
	for (size_t g = 0; g < ng; g++) {
		int k = e->rules[groups[g].first].kind;

		if (k == EGRESS_ALLOW || k == EGRESS_ALLOW_REGEX)
			put(out, &bad, "acl ocsb_allowed any-of ocsb_%s_%u\n", groups[g].acl,
				groups[g].id);
		else if (k == EGRESS_CONNECT)
			put(out, &bad, "acl ocsb_connect any-of ocsb_%s_%u\n", groups[g].acl,
				groups[g].id);
	}

	put_str(out, &bad,
		"\n# Evaluation in the order of the rule language. Everything up to the policy "
		"needs\n"
		"# no DNS (names as written, IP literals as such), so a refused name is answered "
		"at\n"
		"# once; dst checks on names come last, after resolution.\n"
		"http_access deny manager ocsb_m_manager\n"
		"http_access deny !CONNECT !ocsb_web_proto ocsb_m_protocol\n"
		"http_access deny ocsb_never_name ocsb_m_never\n"
		"http_access deny ocsb_ip_literal ocsb_never_dst ocsb_m_never\n");
	put_str(out, &bad, "# Ports other than 80 and 443 only through connect rules.\n");
	put_str(out, &bad, "http_access deny !ocsb_web_ports");
	put_unless_named(out, &bad, 0, have_connect);
	put_str(out, &bad, " ocsb_m_port\n");
	put_str(out, &bad, "# block, unless allow or connect names the host (allow wins).\n");
	for (size_t g = 0; g < ng; g++) {
		int k = e->rules[groups[g].first].kind;

		if (k != EGRESS_BLOCK && k != EGRESS_BLOCK_REGEX)
			continue;
		put(out, &bad, "http_access deny ocsb_%s_%u", groups[g].acl, groups[g].id);
		put_unless_named(out, &bad, have_allow, have_connect);
		put(out, &bad, " ocsb_%s_%u_mark\n", groups[g].acl, groups[g].id);
	}
	put_str(out, &bad, "http_access deny ocsb_dotless");
	put_unless_named(out, &bad, have_allow, have_connect);
	put_str(out, &bad, " ocsb_m_dotless\n");
	put_str(out, &bad, "http_access deny ocsb_ip_literal ocsb_private_dst");
	put_unless_named(out, &bad, have_allow, have_connect);
	put_str(out, &bad, " ocsb_m_private\n");
	if (e->policy == EGRESS_ALLOWLIST) {
		put_str(out, &bad, "# allowlist: what allow and connect do not name ends here.\n");
		if (have_allow || have_connect) {
			put_str(out, &bad, "http_access deny");
			put_unless_named(out, &bad, have_allow, have_connect);
			put_str(out, &bad, " ocsb_m_policy\n");
		} else {
			put_str(out, &bad, "http_access deny all ocsb_m_policy\n");
		}
	}
	put_str(out, &bad,
		"# After resolution: never loopback, link-local or the metadata service, even "
		"when\n"
		"# allowed; private networks only for hosts allow or connect names.\n"
		"http_access deny ocsb_never_dst ocsb_m_never\n");
	put_str(out, &bad, "http_access deny ocsb_private_dst");
	put_unless_named(out, &bad, have_allow, have_connect);
	put_str(out, &bad, " ocsb_m_private\n");
	for (size_t g = 0; g < ng; g++)
		if (e->rules[groups[g].first].kind == EGRESS_CONNECT)
			put(out, &bad, "http_access allow ocsb_%s_%u ocsb_%s_%u_mark\n",
				groups[g].acl, groups[g].id, groups[g].acl, groups[g].id);
	for (size_t g = 0; g < ng; g++) {
		int k = e->rules[groups[g].first].kind;

		if (k == EGRESS_ALLOW || k == EGRESS_ALLOW_REGEX)
			put(out, &bad, "http_access allow ocsb_%s_%u ocsb_%s_%u_mark\n",
				groups[g].acl, groups[g].id, groups[g].acl, groups[g].id);
	}
	if (e->policy == EGRESS_ALLOWLIST)
		put_str(out, &bad, "http_access deny all ocsb_m_policy\n");
	else
		put_str(out, &bad, "http_access allow all ocsb_m_default\n");
done:
	free(groups);
	return bad ? -ENOMEM : 0;
}
