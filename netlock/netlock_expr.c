/* SPDX-License-Identifier: MIT */
/*
 * The nft rules as libnftnl expressions (nft 1.0.6's encodings; the unit test holds nft's own
 * output as the oracle).
 */
#define _GNU_SOURCE
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
#include "netlock.h"
#include "netlock_int.h"

/* ---- libnftnl expressions (nft 1.0.6's encodings, see the unit test oracle) ---- */

static struct nftnl_expr *netlock_expr(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);

	if (e)
		nftnl_rule_add_expr(r, e);
	return e;
}

static int netlock_expr_meta(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = netlock_expr(r, "meta");

	if (!e)
		return -ENOMEM;
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	return 0;
}

static int netlock_expr_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = netlock_expr(r, "cmp");

	if (!e)
		return -ENOMEM;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	return 0;
}

static int netlock_expr_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len)
{
	struct nftnl_expr *e = netlock_expr(r, "payload");

	if (!e)
		return -ENOMEM;
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	return 0;
}

/* meta l4proto <proto>: one byte, as nft compares it. */
static int netlock_expr_l4proto(struct nftnl_rule *r, unsigned proto)
{
	uint8_t p = (uint8_t)proto;

	if (netlock_expr_meta(r, NFT_META_L4PROTO) < 0)
		return -ENOMEM;
	return netlock_expr_cmp(r, NFT_CMP_EQ, &p, sizeof(p));
}

static int netlock_expr_match(struct nftnl_rule *r, const struct netlock_match *m)
{
	struct nftnl_expr *e;
	uint32_t u32;
	uint16_t lo, hi;
	uint8_t u8;

	switch (m->kind) {
	case NM_SKUID:
		/* Host order: only packet fields are in network order. */
		u32 = m->a;
		if (netlock_expr_meta(r, NFT_META_SKUID) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32));
	case NM_SKUID_SET:
		if (netlock_expr_meta(r, NFT_META_SKUID) < 0)
			return -ENOMEM;
		e = netlock_expr(r, "lookup");
		if (!e)
			return -ENOMEM;
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
		nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, NETLOCK_SET);
		/* The set is new in the same batch: the kernel finds it by this id. */
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, NETLOCK_SET_ID);
		return 0;
	case NM_CT_REPLY:
		e = netlock_expr(r, "ct");
		if (!e)
			return -ENOMEM;
		nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_DIRECTION);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
		u8 = IP_CT_DIR_REPLY;
		return netlock_expr_cmp(r, NFT_CMP_EQ, &u8, sizeof(u8));
	case NM_CT_ESTREL:
		e = netlock_expr(r, "ct");
		if (!e)
			return -ENOMEM;
		nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
		e = netlock_expr(r, "bitwise");
		if (!e)
			return -ENOMEM;
		u32 = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, sizeof(u32));
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, &u32, sizeof(u32));
		u32 = 0;
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, &u32, sizeof(u32));
		return netlock_expr_cmp(r, NFT_CMP_NEQ, &u32, sizeof(u32));
	case NM_IP4_LOOPBACK:
		/* In the inet family nft first makes sure the packet is IPv4. */
		u8 = NFPROTO_IPV4;
		if (netlock_expr_meta(r, NFT_META_NFPROTO) < 0 ||
			netlock_expr_cmp(r, NFT_CMP_EQ, &u8, sizeof(u8)) < 0)
			return -ENOMEM;
		u32 = htonl(INADDR_LOOPBACK);
		if (netlock_expr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 4) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32));
	case NM_IP4_SADDR_LOOPBACK:
		u8 = NFPROTO_IPV4;
		if (netlock_expr_meta(r, NFT_META_NFPROTO) < 0 ||
			netlock_expr_cmp(r, NFT_CMP_EQ, &u8, sizeof(u8)) < 0)
			return -ENOMEM;
		u32 = htonl(INADDR_LOOPBACK);
		if (netlock_expr_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 12, 4) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32));
	case NM_DADDR:
		/* ip daddr: IPv4 header + 16, 4 bytes; ip6 daddr: IPv6 header + 24, 16 bytes. */
		u8 = m->a == AF_INET6 ? NFPROTO_IPV6 : NFPROTO_IPV4;
		if (netlock_expr_meta(r, NFT_META_NFPROTO) < 0 ||
			netlock_expr_cmp(r, NFT_CMP_EQ, &u8, sizeof(u8)) < 0 ||
			netlock_expr_payload(r, NFT_PAYLOAD_NETWORK_HEADER,
				m->a == AF_INET6 ? 24 : 16, m->a == AF_INET6 ? 16 : 4) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_EQ, m->addr, m->a == AF_INET6 ? 16 : 4);
	case NM_FIB_LOCAL:
		e = netlock_expr(r, "fib");
		if (!e)
			return -ENOMEM;
		nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_FLAGS, NFTA_FIB_F_DADDR);
		nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_RESULT, NFT_FIB_RESULT_ADDRTYPE);
		nftnl_expr_set_u32(e, NFTNL_EXPR_FIB_DREG, NFT_REG_1);
		u32 = RTN_LOCAL;
		return netlock_expr_cmp(r, NFT_CMP_EQ, &u32, sizeof(u32));
	case NM_L4PROTO:
		return netlock_expr_l4proto(r, m->a);
	case NM_DPORT:
		lo = htons((uint16_t)m->b);
		if (netlock_expr_l4proto(r, m->a) < 0 ||
			netlock_expr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_EQ, &lo, sizeof(lo));
	case NM_DPORT_RANGE:
		/* nft 1.0.6 encodes a range match as two comparisons, even for lo == hi (verify
		 * also accepts nft 1.1's forms: netlock_exprs_canon). */
		lo = htons((uint16_t)m->b);
		hi = htons((uint16_t)m->c);
		if (netlock_expr_l4proto(r, m->a) < 0 ||
			netlock_expr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2) < 0 ||
			netlock_expr_cmp(r, NFT_CMP_GTE, &lo, sizeof(lo)) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_LTE, &hi, sizeof(hi));
	case NM_SPORT_RANGE:
		lo = htons((uint16_t)m->b);
		hi = htons((uint16_t)m->c);
		if (netlock_expr_l4proto(r, m->a) < 0 ||
			netlock_expr_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 2) < 0 ||
			netlock_expr_cmp(r, NFT_CMP_GTE, &lo, sizeof(lo)) < 0)
			return -ENOMEM;
		return netlock_expr_cmp(r, NFT_CMP_LTE, &hi, sizeof(hi));
	}
	return -EINVAL;
}

static int netlock_expr_verdict(struct nftnl_rule *r, enum netlock_verdict v)
{
	struct nftnl_expr *e;

	if (v == NV_REJECT_TCP_RESET || v == NV_REJECT_ADMIN) {
		e = netlock_expr(r, "reject");
		if (!e)
			return -ENOMEM;
		/* In the inet family an ICMP code must be icmpx: one meaning for v4 and v6. */
		nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE,
			v == NV_REJECT_TCP_RESET ? NFT_REJECT_TCP_RST : NFT_REJECT_ICMPX_UNREACH);
		nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE,
			v == NV_REJECT_TCP_RESET ? 0 : NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
		return 0;
	}
	e = netlock_expr(r, "immediate");
	if (!e)
		return -ENOMEM;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	if (v == NV_JUMP_AGENT || v == NV_JUMP_INJECT) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NFT_JUMP);
		nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN,
			v == NV_JUMP_AGENT ? NETLOCK_CHAIN_AGENT : NETLOCK_CHAIN_INJECT);
	} else {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_ACCEPT);
	}
	return 0;
}

/* A libnftnl rule for r; NULL when out of memory. */
struct nftnl_rule *netlock_rule_build(const struct netlock_rule *nr)
{
	struct nftnl_rule *r = nftnl_rule_alloc();

	if (!r)
		return NULL;
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, netlock_name);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, nr->chain);
	for (size_t i = 0; i < nr->nm; i++)
		if (netlock_expr_match(r, &nr->m[i]) < 0)
			goto fail;
	if (netlock_expr_verdict(r, nr->v) < 0)
		goto fail;
	return r;
fail:
	nftnl_rule_free(r);
	return NULL;
}
