/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_conntrack_tuple_common.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/rtnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/gen.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include "config.h"
#include "netlock.h"
#include "netlock_int.h"

const char *netlock_name = NETLOCK_TABLE;
uint32_t netlock_flags;

/*
 * Each agent's agent-ports range, for its uid alone: one agent's local services (a
 * database on 127.0.0.1:5432 its configuration opens) stay closed to every other agent,
 * whichever configuration applied the table. By ascending uid, so every run that builds
 * the table from the same agents builds the same rules (the registry's order is the
 * directory's). How many rules were written to r: at most 2 * (NETLOCK_MAX_AGENTS + 1).
 */
static size_t netlock_range_rules(const struct netlock_spec *s, struct netlock_rule *r)
{
	uid_t uids[NETLOCK_MAX_AGENTS + 1];
	size_t nu = netlock_set_uids(s, uids), n = 0;

	for (size_t i = 0; i < nu; i++) {
		struct netlock_range p = uids[i] == s->uid
			? (struct netlock_range){s->ports_lo, s->ports_hi}
			: netlock_others_range(s, uids[i]);

		if (!p.lo)
			continue;
		/*
		 * The route ports are no agent's, whatever its range says (config.c and the
		 * registry refuse such a range; this holds if a spec has one anyway): the
		 * routes of agentd's agent were accepted just before, the rest is reset here.
		 */
		if (p.lo <= OCSB_ROUTE_PORT_HI && p.hi >= OCSB_ROUTE_PORT_LO) {
			unsigned lo = p.lo > OCSB_ROUTE_PORT_LO ? p.lo : OCSB_ROUTE_PORT_LO;
			unsigned hi = p.hi < OCSB_ROUTE_PORT_HI ? p.hi : OCSB_ROUTE_PORT_HI;

			r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_REJECT_TCP_RESET,
				M(NM_SKUID, .a = uids[i]), M(NM_FIB_LOCAL),
				M(NM_DPORT_RANGE, .a = IPPROTO_TCP, .b = lo, .c = hi));
		}
		r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_SKUID, .a = uids[i]),
			M(NM_FIB_LOCAL), M(NM_DPORT_RANGE, .a = IPPROTO_TCP, .b = p.lo, .c = p.hi));
	}
	return n;
}

static int netlock_port_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;

	return x < y ? -1 : x > y;
}

/*
 * ocsb-inject's chain: what its account may reach. How many rules were written to r: at
 * most 7 + 2 * NETLOCK_MAX_NS + NETLOCK_MAX_INJECT.
 */
static size_t netlock_inject_rules(const struct netlock_spec *s, struct netlock_rule *r)
{
	unsigned up[NETLOCK_MAX_INJECT];
	size_t n = 0, nu = s->n_uports;

	/*
	 * A socket accept() gives it is its own (the kernel gives a new socket the accepting
	 * process's uid), so its answers to the agent pass here: by their direction, from
	 * 127.0.0.1's route ports (agentd holds them all: nothing else of it listens there).
	 */
	r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT, M(NM_CT_REPLY), M(NM_IP4_SADDR_LOOPBACK),
		M(NM_SPORT_RANGE, .a = IPPROTO_TCP, .b = OCSB_ROUTE_PORT_LO,
			.c = OCSB_ROUTE_PORT_HI));
	/*
	 * Name resolution: its nameservers' port 53 alone, wherever they are (a local one,
	 * systemd-resolved's 127.0.0.53, is otherwise refused just below; for another these
	 * rules allow what the DNS rules further down allow anyway).
	 */
	for (size_t i = 0; i < s->n_ns; i++) {
		for (int k = 0; k < 2; k++) {
			struct netlock_rule *x = &r[n++];

			*x = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT,
				M(NM_DADDR, .a = (unsigned)s->ns[i].family),
				M(NM_DPORT, .a = k ? IPPROTO_TCP : IPPROTO_UDP, .b = 53));
			memcpy(x->m[0].addr, s->ns[i].a, sizeof(x->m[0].addr));
		}
	}
	/* The owner's local services, the agent's proxy and the routes: none of its business. */
	r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_REJECT_TCP_RESET, M(NM_FIB_LOCAL),
		M(NM_L4PROTO, .a = IPPROTO_TCP));
	r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_REJECT_ADMIN, M(NM_FIB_LOCAL));
	/*
	 * Its routes' upstreams: the hosts the owner named, on their ports only. By port, not
	 * address: it resolves the names itself, and the answers change. Ascending, once each
	 * (53 is the DNS rule's), so every run that builds the table from the same routes
	 * builds the same rules.
	 */
	memcpy(up, s->inject_uports, nu * sizeof(up[0]));
	qsort(up, nu, sizeof(up[0]), netlock_port_cmp);
	for (size_t i = 0; i < nu; i++)
		if ((i == 0 || up[i] != up[i - 1]) && up[i] != 53)
			r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT,
				M(NM_DPORT, .a = IPPROTO_TCP, .b = up[i]));
	r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT, M(NM_DPORT, .a = IPPROTO_UDP, .b = 53));
	r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_ACCEPT, M(NM_DPORT, .a = IPPROTO_TCP, .b = 53));
	r[n++] = RULE(NETLOCK_CHAIN_INJECT, NV_REJECT_TCP_RESET, M(NM_L4PROTO, .a = IPPROTO_TCP));
	r[n++] = RULE0(NETLOCK_CHAIN_INJECT, NV_REJECT_ADMIN);
	return n;
}

/* 1 if uid is s->uid or one of s->others. */
static int netlock_in_set(const struct netlock_spec *s, uid_t uid)
{
	if (uid == s->uid)
		return 1;
	for (size_t i = 0; i < s->n_others; i++)
		if (s->others[i] == uid)
			return 1;
	return 0;
}

/* The table of design invariant 2, in order; see netlock.h. */
int netlock_rules(const struct netlock_spec *s, struct netlock_rule *r, size_t *ret_n)
{
	size_t n = 0;

	/*
	 * uid 0 would lock out the daemon itself, and (uid_t)-1 is "no uid": both are
	 * configuration bugs that must not turn into a firewall.
	 */
	if (!s || s->uid == 0 || s->uid == (uid_t)-1 || s->proxy_port > 65535)
		return -EINVAL;
	if ((s->ports_lo == 0) != (s->ports_hi == 0) || s->ports_lo > s->ports_hi ||
		s->ports_hi > 65535)
		return -EINVAL;
	if (s->n_inject > NETLOCK_MAX_INJECT || s->n_others > NETLOCK_MAX_AGENTS ||
		s->n_uports > NETLOCK_MAX_INJECT || s->n_ns > NETLOCK_MAX_NS)
		return -EINVAL;
	/* The proxy's uid in the set would force squid's own egress through itself. */
	for (size_t i = 0; i < s->n_others; i++) {
		const struct netlock_range *p = &s->others_ports[i];

		if (s->others[i] == 0 || s->others[i] == (uid_t)-1 ||
			(s->proxy_uid && s->others[i] == s->proxy_uid))
			return -EINVAL;
		if ((p->lo == 0) != (p->hi == 0) || p->lo > p->hi || p->hi > 65535)
			return -EINVAL;
	}
	for (size_t i = 0; i < s->n_inject; i++)
		if (s->inject_ports[i] == 0 || s->inject_ports[i] > 65535)
			return -EINVAL;
	/* ocsb-inject is neither an agent nor the proxy: one uid, one chain. */
	if (s->inject_uid == (uid_t)-1 || (s->inject_uid && netlock_in_set(s, s->inject_uid)) ||
		(s->inject_uid && s->inject_uid == s->proxy_uid))
		return -EINVAL;
	for (size_t i = 0; i < s->n_uports; i++)
		if (s->inject_uports[i] == 0 || s->inject_uports[i] > 65535)
			return -EINVAL;
	for (size_t i = 0; i < s->n_ns; i++)
		if (s->ns[i].family != AF_INET && s->ns[i].family != AF_INET6)
			return -EINVAL;

	/* Every agent of the machine, one rule: the set holds their uids. */
	r[n++] = RULE(NETLOCK_CHAIN_OUTPUT, NV_JUMP_AGENT, M(NM_SKUID_SET));
	/*
	 * A route adds the owner's key to what comes in: only ocsb-agentd's agent (accepted
	 * in the agent chain, which no agent returns from) may reach it. Every other
	 * account's connection is reset here, the other agents' in the agent chain, so no
	 * local user spends the owner's key. The whole range, routed or not, at all times:
	 * agentd listens on every route port from its start, and a connection let through
	 * before its route exists would wait in the backlog and be served with the key.
	 */
	r[n++] = RULE(NETLOCK_CHAIN_OUTPUT, NV_REJECT_TCP_RESET, M(NM_IP4_LOOPBACK),
		M(NM_DPORT_RANGE, .a = IPPROTO_TCP, .b = OCSB_ROUTE_PORT_LO,
			.c = OCSB_ROUTE_PORT_HI));
	/*
	 * ocsb-inject holds the owner's keys and answers whatever the agent sends: its own
	 * connections are contained to what its routes need (chain inject).
	 */
	if (s->inject_uid)
		r[n++] =
			RULE(NETLOCK_CHAIN_OUTPUT, NV_JUMP_INJECT, M(NM_SKUID, .a = s->inject_uid));
	/*
	 * The proxy connects on the agent's behalf: without this, a service on one of the
	 * host's own public or benchmark addresses (not in squid's private lists) answers
	 * the agent through the proxy. Its replies to the agent (loopback) still go out.
	 */
	if (s->proxy_uid && s->proxy_uid != (uid_t)-1 && s->proxy_uid != s->uid) {
		r[n++] = RULE(NETLOCK_CHAIN_OUTPUT, NV_ACCEPT, M(NM_SKUID, .a = s->proxy_uid),
			M(NM_CT_REPLY));
		r[n++] = RULE(NETLOCK_CHAIN_OUTPUT, NV_REJECT_TCP_RESET,
			M(NM_SKUID, .a = s->proxy_uid), M(NM_FIB_LOCAL),
			M(NM_L4PROTO, .a = IPPROTO_TCP));
	}
	/*
	 * Replies of servers the agent runs (sockets it accepted from the owner's
	 * connections) must get out, to local addresses only: a server it runs on 0.0.0.0
	 * would otherwise answer any host that connects in, a way around the proxy. Reply
	 * direction only: conntrack entries outlive sockets, so an original-direction
	 * "established" would let the agent bind the source port of someone else's closed
	 * UDP flow (a DNS query) and reuse it.
	 */
	r[n++] = RULE(
		NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_CT_REPLY), M(NM_CT_ESTREL), M(NM_FIB_LOCAL));
	if (s->proxy_port)
		r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_IP4_LOOPBACK),
			M(NM_DPORT, .a = IPPROTO_TCP, .b = s->proxy_port));
	/*
	 * ocsb-inject's routes: the agent's only way to an API whose key it must not hold.
	 * Each port alone, on 127.0.0.1 only, like the proxy: not a range another local
	 * service could sit in; for agentd's agent alone, not the machine's other agents.
	 */
	for (size_t i = 0; i < s->n_inject; i++)
		r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_SKUID, .a = s->uid),
			M(NM_IP4_LOOPBACK), M(NM_DPORT, .a = IPPROTO_TCP, .b = s->inject_ports[i]));
	n += netlock_range_rules(s, r + n);
	/*
	 * Every other local address (127/8, ::1, the host's LAN and bridge addresses)
	 * hosts services of the owner: refused with a reset so clients fail at once.
	 * Before the DNS rules, so a local resolver is never reachable.
	 */
	r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_REJECT_TCP_RESET, M(NM_FIB_LOCAL),
		M(NM_L4PROTO, .a = IPPROTO_TCP));
	r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_REJECT_ADMIN, M(NM_FIB_LOCAL));
	if (s->dns_allow) {
		r[n++] = RULE(
			NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_DPORT, .a = IPPROTO_UDP, .b = 53));
		r[n++] = RULE(
			NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_DPORT, .a = IPPROTO_TCP, .b = 53));
	}
	/* Everything else: rejected, not dropped, so tools fail fast instead of hanging. */
	r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_REJECT_TCP_RESET, M(NM_L4PROTO, .a = IPPROTO_TCP));
	r[n++] = RULE0(NETLOCK_CHAIN_AGENT, NV_REJECT_ADMIN);
	if (s->inject_uid)
		n += netlock_inject_rules(s, r + n);
	/* The arrays are sized by the count netlock_int.h adds up: never more. */
	if (n > NETLOCK_MAX_RULES_USED)
		abort();
	*ret_n = n;
	return 0;
}

uid_t netlock_proxy_uid(void)
{
	struct user_info u;

	return user_lookup("proxy", &u) == 0 ? u.uid : 0;
}

/* ---- the ruleset generation ---- */

static int netlock_gen_cb(const struct nlmsghdr *nlh, void *data)
{
	struct nftnl_gen *g = nftnl_gen_alloc();

	if (!g) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_gen_nlmsg_parse(nlh, g) == 0)
		*(uint32_t *)data = nftnl_gen_get_u32(g, NFTNL_GEN_ID);
	nftnl_gen_free(g);
	return MNL_CB_OK;
}

/* The ruleset generation: it changes with every committed batch. */
int netlock_get_gen(struct mnl_socket *nl, uint32_t *ret_gen)
{
	char req[128];
	struct nlmsghdr *nlh =
		nftnl_nlmsg_build_hdr(req, NFT_MSG_GETGEN, AF_UNSPEC, NLM_F_ACK, netlock_seq());

	return netlock_query(nl, nlh, netlock_gen_cb, ret_gen);
}
