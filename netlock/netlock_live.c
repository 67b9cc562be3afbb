/* SPDX-License-Identifier: MIT */
/*
 * What ocsb-provision and `ocsb doctor` read back from the live tables: whether the table
 * exists, the uids in its set, and ocsb-agentd's route ports from the guard. The warden,
 * which installs and records (netlock_batch.c, netlock_snap.c), needs none of it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include "netlock.h"
#include "netlock_int.h"

/*
 * Attributes the kernel always sends may still be absent in a malformed message. Used by
 * the reading here and in netlock_verify.c; the warden compares raw listings and needs it
 * not.
 */
const char *netlock_str(const char *s)
{
	return s ? s : "";
}

static int netlock_table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netlock_table_info *ti = data;
	struct nftnl_table *t = nftnl_table_alloc();

	if (!t) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_table_nlmsg_parse(nlh, t) == 0 &&
		netlock_streq(nftnl_table_get_str(t, NFTNL_TABLE_NAME), netlock_name)) {
		ti->found = 1;
		ti->flags = nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS);
	}
	nftnl_table_free(t);
	return MNL_CB_OK;
}

/* 1 found (flags in ti), 0 missing, -errno. */
int netlock_get_table(struct mnl_socket *nl, struct netlock_table_info *ti)
{
	char req[512];
	struct nlmsghdr *nlh;
	struct nftnl_table *t = nftnl_table_alloc();
	int rc;

	if (!t)
		return -ENOMEM;
	memset(ti, 0, sizeof(*ti));
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK, netlock_seq());
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, netlock_name);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	rc = netlock_query(nl, nlh, netlock_table_cb, ti);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return rc;
	return ti->found ? 1 : -EPROTO;
}

int netlock_exists(void)
{
	struct netlock_table_info ti;
	struct mnl_socket *nl;
	int e = 0, rc;

	nl = netlock_socket(&e);
	if (!nl)
		return -e;
	rc = netlock_get_table(nl, &ti);
	mnl_socket_close(nl);
	return rc;
}

int netlock_live_agents(uid_t *uids, size_t max)
{
	struct netlock_live_set ls;
	struct netlock_table_info ti;
	struct mnl_socket *nl;
	int e = 0, rc;

	nl = netlock_socket(&e);
	if (!nl)
		return -e;
	rc = netlock_get_table(nl, &ti);
	if (rc == 1)
		rc = netlock_set_read(nl, &ls);
	else if (rc == 0)
		rc = -ENOENT;
	mnl_socket_close(nl);
	if (rc < 0)
		return rc;
	if (!ls.found)
		return -ENOENT;
	for (size_t i = 0; i < ls.n && i < max; i++)
		uids[i] = ls.uid[i];
	return (int)ls.n;
}

/* ---- ocsb-agentd's routes and ocsb-inject's chain, from its guard ---- */

struct netlock_routes {
	uid_t uid;
	unsigned port[NETLOCK_MAX_INJECT];
	size_t n;
	/* chain inject: found when the output chain jumps to it */
	int inject;
	uid_t inject_uid;
	unsigned uport[NETLOCK_MAX_INJECT];
	size_t n_uports;
	struct netlock_addr ns[NETLOCK_MAX_NS];
	size_t n_ns;
	int err;
};

/* The values a rule compares with: the first 4-byte one, the last 2-byte one, an address. */
struct netlock_cmps {
	uint32_t u32;
	int got_u32;
	uint16_t port; /* network order */
	struct netlock_addr addr;
};

static int netlock_cmps_of(const struct nftnl_rule *r, struct netlock_cmps *c)
{
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
	struct nftnl_expr *e;

	memset(c, 0, sizeof(*c));
	if (!it)
		return -ENOMEM;
	for (e = nftnl_expr_iter_next(it); e; e = nftnl_expr_iter_next(it)) {
		uint32_t len = 0;
		const void *v;

		if (!netlock_streq(nftnl_expr_get_str(e, NFTNL_EXPR_NAME), "cmp"))
			continue;
		v = nftnl_expr_get(e, NFTNL_EXPR_CMP_DATA, &len);
		if (!v)
			continue;
		if (len == 4 && !c->got_u32) {
			memcpy(&c->u32, v, 4);
			c->got_u32 = 1;
		}
		if ((len == 4 || len == 16) && !c->addr.family) {
			c->addr.family = len == 4 ? AF_INET : AF_INET6;
			memcpy(c->addr.a, v, len);
		}
		if (len == 2)
			memcpy(&c->port, v, 2);
	}
	nftnl_expr_iter_destroy(it);
	return 0;
}

/* 1 if the live rule r is exactly nr (its expressions), 0 if not, -ENOMEM. */
static int netlock_rule_is(const struct nftnl_rule *r, const struct netlock_rule *nr)
{
	struct nftnl_rule *built = netlock_rule_build(nr);
	char *want = built ? netlock_rule_exprs(built) : NULL, *have = netlock_rule_exprs(r);
	int same = want && have ? strcmp(want, have) == 0 : -ENOMEM;

	free(want);
	free(have);
	if (built)
		nftnl_rule_free(built);
	return same;
}

/*
 * A rule of the guard, if it is one of the shapes netlock_rules gives a route (agent), the
 * jump to ocsb-inject's chain (output), or an upstream port or a nameserver (inject):
 * whatever the values, only those very shapes count. 0 none, 1 taken into rt, -ENOMEM.
 */
static int netlock_guard_rule(
	const struct nftnl_rule *r, const char *chain, struct netlock_routes *rt)
{
	struct netlock_cmps c;
	struct netlock_rule nr;
	unsigned port;
	int rc = netlock_cmps_of(r, &c);

	if (rc < 0)
		return rc;
	port = ntohs(c.port);
	if (strcmp(chain, NETLOCK_CHAIN_AGENT) == 0) {
		if (!c.got_u32 || c.u32 == 0 || !port)
			return 0;
		nr = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_SKUID, .a = c.u32),
			M(NM_IP4_LOOPBACK), M(NM_DPORT, .a = IPPROTO_TCP, .b = port));
		rc = netlock_rule_is(r, &nr);
		if (rc == 1 && (rt->n == 0 || c.u32 == rt->uid) && rt->n < NETLOCK_MAX_INJECT) {
			rt->uid = (uid_t)c.u32;
			rt->port[rt->n++] = port;
		}
		return rc;
	}
	if (strcmp(chain, NETLOCK_CHAIN_OUTPUT) == 0) {
		if (!c.got_u32 || c.u32 == 0)
			return 0;
		nr = RULE(NETLOCK_CHAIN_OUTPUT, NV_JUMP_INJECT, M(NM_SKUID, .a = c.u32));
		rc = netlock_rule_is(r, &nr);
		if (rc == 1) {
			rt->inject = 1;
			rt->inject_uid = (uid_t)c.u32;
		}
		return rc;
	}
	if (strcmp(chain, NETLOCK_CHAIN_INJECT) != 0 || !port)
		return 0;
	nr = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT, M(NM_DPORT, .a = IPPROTO_TCP, .b = port));
	rc = netlock_rule_is(r, &nr);
	if (rc == 1 && port != 53 && rt->n_uports < NETLOCK_MAX_INJECT)
		rt->uport[rt->n_uports++] = port;
	if (rc != 0 || !c.addr.family || port != 53)
		return rc;
	/* A nameserver: its udp rule (the tcp one beside it is made with it). */
	nr = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT, M(NM_DADDR, .a = (unsigned)c.addr.family),
		M(NM_DPORT, .a = IPPROTO_UDP, .b = 53));
	memcpy(nr.m[0].addr, c.addr.a, sizeof(nr.m[0].addr));
	rc = netlock_rule_is(r, &nr);
	if (rc == 1 && rt->n_ns < NETLOCK_MAX_NS)
		rt->ns[rt->n_ns++] = c.addr;
	return rc;
}

static int netlock_routes_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netlock_routes *rt = data;
	struct nftnl_rule *r = nftnl_rule_alloc();
	const char *chain;
	int got;

	if (!r) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_rule_nlmsg_parse(nlh, r) == 0 &&
		netlock_streq(nftnl_rule_get_str(r, NFTNL_RULE_TABLE), netlock_name)) {
		chain = netlock_str(nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
		got = netlock_guard_rule(r, chain, rt);
		if (got < 0)
			rt->err = got;
	}
	nftnl_rule_free(r);
	return MNL_CB_OK;
}

int netlock_guard_routes(struct netlock_spec *s)
{
	struct netlock_routes rt = {0};
	struct netlock_table_info ti;
	struct mnl_socket *nl;
	struct nftnl_rule *r;
	struct nlmsghdr *nlh;
	char req[512];
	int e = 0, rc;

	nl = netlock_socket(&e);
	if (!nl)
		return -e;
	netlock_name = NETLOCK_GUARD_TABLE;
	rc = netlock_get_table(nl, &ti);
	/* Only a guard a live socket owns is agentd's: nobody else can have written it. */
	if (rc == 1 && !(ti.flags & NFT_TABLE_F_OWNER))
		rc = 0;
	r = rc == 1 ? nftnl_rule_alloc() : NULL;
	if (rc == 1 && !r)
		rc = -ENOMEM;
	if (r) {
		nftnl_rule_set_str(r, NFTNL_RULE_TABLE, netlock_name);
		nlh = nftnl_nlmsg_build_hdr(
			req, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, netlock_seq());
		nftnl_rule_nlmsg_build_payload(nlh, r);
		nftnl_rule_free(r);
		rc = netlock_query(nl, nlh, netlock_routes_cb, &rt);
		if (rc == 0)
			rc = rt.err;
	}
	netlock_name = NETLOCK_TABLE;
	mnl_socket_close(nl);
	if (rc < 0)
		return rc;
	/*
	 * ocsb-inject's chain as agentd has it: the upstream ports of the routes it serves,
	 * and the nameservers it read, so a run does not make the table agentd's view differ.
	 */
	if (rt.inject) {
		s->inject_uid = rt.inject_uid;
		memcpy(s->inject_uports, rt.uport, sizeof(rt.uport));
		s->n_uports = rt.n_uports;
		memcpy(s->ns, rt.ns, sizeof(rt.ns));
		s->n_ns = rt.n_ns;
	}
	if (rt.n == 0)
		return 0;
	if (s->uid != rt.uid) {
		struct netlock_range p;

		if (s->n_others == NETLOCK_MAX_AGENTS)
			return -E2BIG;
		/* The ranges stay with their uids: the run's own goes with it into others. */
		s->others_ports[s->n_others] = (struct netlock_range){s->ports_lo, s->ports_hi};
		s->others[s->n_others++] = s->uid;
		p = netlock_others_range(s, rt.uid);
		s->ports_lo = p.lo;
		s->ports_hi = p.hi;
	}
	s->uid = rt.uid;
	for (size_t i = 0; i < rt.n; i++)
		s->inject_ports[i] = rt.port[i];
	s->n_inject = rt.n;
	return (int)rt.n;
}
