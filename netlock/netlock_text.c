/* SPDX-License-Identifier: MIT */
/*
 * The table as text (netlock.h): what `nft -f` would install (netlock_render_nft, for
 * ocsb-provision's dry run, the benches and the tests) and the rules as libnftnl prints them
 * (netlock_render_expr, the unit tests' comparison with nft's own encoding). The rule
 * text both share, netlock_rule_text, is here; verify's messages use it too.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libnftnl/rule.h>
#include "netlock.h"
#include "netlock_int.h"

static const char *netlock_proto_name(unsigned proto)
{
	return proto == IPPROTO_UDP ? "udp" : "tcp";
}

int netlock_rule_text(const struct netlock_rule *r, struct buf *out)
{
	static const char *const verdicts[] = {
		[NV_JUMP_AGENT] = "jump " NETLOCK_CHAIN_AGENT,
		[NV_JUMP_INJECT] = "jump " NETLOCK_CHAIN_INJECT,
		[NV_ACCEPT] = "accept",
		[NV_REJECT_TCP_RESET] = "reject with tcp reset",
		[NV_REJECT_ADMIN] = "reject with icmpx admin-prohibited",
	};
	int rc = 0;

	for (size_t i = 0; i < r->nm && rc == 0; i++) {
		const struct netlock_match *m = &r->m[i];

		switch (m->kind) {
		case NM_SKUID:
			rc = buf_printf(out, "meta skuid %u ", m->a);
			break;
		case NM_SKUID_SET:
			rc = buf_puts(out, "meta skuid @" NETLOCK_SET " ");
			break;
		case NM_CT_REPLY:
			rc = buf_puts(out, "ct direction reply ");
			break;
		case NM_CT_ESTREL:
			rc = buf_puts(out, "ct state established,related ");
			break;
		case NM_IP4_LOOPBACK:
			rc = buf_puts(out, "ip daddr 127.0.0.1 ");
			break;
		case NM_IP4_SADDR_LOOPBACK:
			rc = buf_puts(out, "ip saddr 127.0.0.1 ");
			break;
		case NM_DADDR: {
			char a[INET6_ADDRSTRLEN];

			if (!inet_ntop((int)m->a, m->addr, a, sizeof(a)))
				return -EINVAL;
			rc = buf_printf(out, "%s daddr %s ", m->a == AF_INET6 ? "ip6" : "ip", a);
			break;
		}
		case NM_FIB_LOCAL:
			rc = buf_puts(out, "fib daddr type local ");
			break;
		case NM_L4PROTO:
			rc = buf_printf(out, "meta l4proto %s ", netlock_proto_name(m->a));
			break;
		case NM_DPORT:
			rc = buf_printf(out, "%s dport %u ", netlock_proto_name(m->a), m->b);
			break;
		case NM_DPORT_RANGE:
			rc = buf_printf(
				out, "%s dport %u-%u ", netlock_proto_name(m->a), m->b, m->c);
			break;
		case NM_SPORT_RANGE:
			rc = buf_printf(
				out, "%s sport %u-%u ", netlock_proto_name(m->a), m->b, m->c);
			break;
		}
	}
	return rc ? rc : buf_puts(out, verdicts[r->v]);
}


static int netlock_chain_text(const struct netlock_rule *r, size_t n, const char *chain,
	const char *head, struct buf *out)
{
	int rc = buf_printf(out, "\tchain %s {\n%s", chain, head);

	for (size_t i = 0; i < n && rc == 0; i++) {
		if (strcmp(r[i].chain, chain) != 0)
			continue;
		rc = buf_puts(out, "\t\t");
		if (rc == 0)
			rc = netlock_rule_text(&r[i], out);
		if (rc == 0)
			rc = buf_puts(out, "\n");
	}
	return rc ? rc : buf_puts(out, "\t}\n");
}

int netlock_render_nft(const struct netlock_spec *s, struct buf *out)
{
	struct netlock_rule r[NETLOCK_MAX_RULES];
	uid_t uids[NETLOCK_MAX_AGENTS + 1];
	size_t n, nu;
	int rc = netlock_rules(s, r, &n);

	if (rc == 0)
		rc = buf_printf(out, "table inet %s {\n\tset " NETLOCK_SET " {\n\t\ttype uid\n",
			netlock_name);
	nu = rc == 0 ? netlock_set_uids(s, uids) : 0;
	for (size_t i = 0; i < nu && rc == 0; i++)
		rc = buf_printf(out, "%s%u%s", i ? ", " : "\t\telements = { ", (unsigned)uids[i],
			i + 1 == nu ? " }\n" : "");
	if (rc == 0)
		rc = buf_puts(out, "\t}\n");
	if (rc == 0)
		rc = netlock_chain_text(r, n, NETLOCK_CHAIN_OUTPUT,
			"\t\ttype filter hook output priority 0; policy accept;\n", out);
	if (rc == 0)
		rc = netlock_chain_text(r, n, NETLOCK_CHAIN_AGENT, "", out);
	if (rc == 0 && s->inject_uid)
		rc = netlock_chain_text(r, n, NETLOCK_CHAIN_INJECT, "", out);
	return rc ? rc : buf_puts(out, "}\n");
}

int netlock_render_expr(const struct netlock_spec *s, struct buf *out)
{
	struct netlock_rule nr[NETLOCK_MAX_RULES];
	size_t n;
	int rc = netlock_rules(s, nr, &n);

	for (size_t i = 0; i < n && rc == 0; i++) {
		struct nftnl_rule *r = netlock_rule_build(&nr[i]);
		char *exprs = r ? netlock_rule_exprs(r) : NULL;

		if (!exprs)
			rc = -ENOMEM;
		else
			rc = buf_printf(out, "inet %s %s\n%s\n", netlock_name, nr[i].chain, exprs);
		free(exprs);
		if (r)
			nftnl_rule_free(r);
	}
	return rc;
}
