/* SPDX-License-Identifier: MIT */
/*
 * The squid configuration built from the egress rules: ACLs grouped as the rules are, in
 * their order, with the never-nets and internal networks refused ahead of them.
 */
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

		if (!egress_is_name_char(c) && c != '.' && c != '_' && c != '/' && c != ':')
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
		if (!egress_is_name_char(*s) && *s != '/' && *s != '.' && *s != '_')
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
	if (e->learning) {
		char until[32];

		egress_time_utc(e->learn_until, until, sizeof(until));
		put(out, &bad,
			"# learn mode until %s: what the allowlist refuses passes as the blocklist\n"
			"# would let it, logged as step learn (names are resolved meanwhile)\n",
			until);
	}
	for (size_t i = 0; i < e->proposals.n; i++)
		put(out, &bad, "# not in force (a proposal): %s\n", e->proposals.v[i]);
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
	if (e->learning)
		put_mark(out, &bad, "ocsb_m_learn", "learn", NULL);

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
	put_nets(out, &bad, "ocsb_never_dst", egress_never_nets, egress_n_never_nets);
	put_nets(out, &bad, "ocsb_private_dst", egress_private_nets, egress_n_private_nets);

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
	if (e->policy == EGRESS_ALLOWLIST && !e->learning) {
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
	if (e->policy == EGRESS_ALLOWLIST && e->learning)
		put_str(out, &bad, "http_access allow all ocsb_m_learn\n");
	else if (e->policy == EGRESS_ALLOWLIST)
		put_str(out, &bad, "http_access deny all ocsb_m_policy\n");
	else
		put_str(out, &bad, "http_access allow all ocsb_m_default\n");
done:
	free(groups);
	return bad ? -ENOMEM : 0;
}
