/* SPDX-License-Identifier: MIT */
/*
 * egress_decide: what the proxy will do with one host, by the same rules squid is given
 * (never-nets and internal networks first, then the first matching rule, then the policy).
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
		char c = egress_lower(in[i]);

		if (!egress_is_name_char(c) && c != '.' && c != '_' && c != ':')
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
	if (is_localhost_name(h.name) || in_nets(egress_never_nets, egress_n_never_nets, &h)) {
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
	if (in_nets(egress_private_nets, egress_n_private_nets, &h)) {
		verdict(ret, 0, NULL, "private network", "private-network");
		return;
	}
	if (e->policy == EGRESS_ALLOWLIST && e->learning)
		verdict(ret, 1, NULL, "learn mode", "learn");
	else if (e->policy == EGRESS_ALLOWLIST)
		verdict(ret, 0, NULL, "policy allowlist", "policy-allowlist");
	else
		verdict(ret, 1, NULL, "default allow", "default-allow");
}
