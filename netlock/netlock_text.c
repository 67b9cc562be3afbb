/* SPDX-License-Identifier: MIT */
/*
 * The table as text (netlock.h): what `nft -f` would install (netlock_render_nft, for
 * ocsb-provision's dry run, the benches and the tests) and the rules as libnftnl prints them
 * (netlock_render_expr, the unit tests' comparison with nft's own encoding). The rule
 * text both share, netlock_rule_text, is in netlock.c: verify's messages use it too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libnftnl/rule.h>
#include "netlock.h"
#include "netlock_int.h"

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
