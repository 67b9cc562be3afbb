/* SPDX-License-Identifier: MIT */
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

/*
 * The table being worked on: the plain table `ocsb`, or the guard while a guard entry
 * point runs (netlock_guard_apply/verify set these and put them back). The callers are
 * single-threaded.
 */
static const char *netlock_name = NETLOCK_TABLE;
static uint32_t netlock_flags;

/*
 * The table is described once, as data (struct netlock_rule), and turned into
 * nft text, libnftnl expressions and the comparison made by netlock_verify:
 * the three can only disagree if one of the small translators below is wrong,
 * and the unit test checks the first two against nft's own encoding.
 */

#define NETLOCK_CHAIN_OUTPUT "output"
#define NETLOCK_CHAIN_AGENT "agent"
#define NETLOCK_MAX_RULES 14
#define NETLOCK_MAX_MATCH 3
#define NETLOCK_TIMEOUT_MS 2000
#define NETLOCK_RCVBUF 65536

enum netlock_match_kind {
	NM_SKUID, /* meta skuid a */
	NM_CT_REPLY, /* ct direction reply */
	NM_CT_ESTREL, /* ct state established,related */
	NM_IP4_LOOPBACK, /* ip daddr 127.0.0.1 */
	NM_FIB_LOCAL, /* fib daddr type local */
	NM_L4PROTO, /* meta l4proto a */
	NM_DPORT, /* <a> dport b */
	NM_DPORT_RANGE, /* <a> dport b-c */
};

struct netlock_match {
	enum netlock_match_kind kind;
	unsigned a, b, c;
};

enum netlock_verdict {
	NV_JUMP_AGENT,
	NV_ACCEPT,
	NV_REJECT_TCP_RESET,
	NV_REJECT_ADMIN,
};

struct netlock_rule {
	const char *chain; /* borrowed (static) */
	struct netlock_match m[NETLOCK_MAX_MATCH];
	size_t nm;
	enum netlock_verdict v;
};

#define RULE(ch, verdict, ...)                                        \
	((struct netlock_rule){.chain = (ch),                         \
		.m = {__VA_ARGS__},                                   \
		.nm = sizeof((struct netlock_match[]){__VA_ARGS__}) / \
			sizeof(struct netlock_match),                 \
		.v = (verdict)})
#define RULE0(ch, verdict) ((struct netlock_rule){.chain = (ch), .nm = 0, .v = (verdict)})
#define M(k, ...) ((struct netlock_match){.kind = (k), __VA_ARGS__})

/* The table of design invariant 2, in order; see netlock.h. */
static int netlock_rules(const struct netlock_spec *s, struct netlock_rule *r, size_t *ret_n)
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

	r[n++] = RULE(NETLOCK_CHAIN_OUTPUT, NV_JUMP_AGENT, M(NM_SKUID, .a = s->uid));
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
	 * connections) must get out. Reply direction only: conntrack entries outlive
	 * sockets, so an original-direction "established" would let the agent bind the
	 * source port of someone else's closed UDP flow (a DNS query) and reuse it.
	 */
	r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_CT_REPLY), M(NM_CT_ESTREL));
	if (s->proxy_port)
		r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_IP4_LOOPBACK),
			M(NM_DPORT, .a = IPPROTO_TCP, .b = s->proxy_port));
	if (s->ports_lo)
		r[n++] = RULE(NETLOCK_CHAIN_AGENT, NV_ACCEPT, M(NM_FIB_LOCAL),
			M(NM_DPORT_RANGE, .a = IPPROTO_TCP, .b = s->ports_lo, .c = s->ports_hi));
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
	*ret_n = n;
	return 0;
}

uid_t netlock_proxy_uid(void)
{
	struct user_info u;

	return user_lookup("proxy", &u) == 0 ? u.uid : 0;
}

/* ---- nft text ---- */

static const char *netlock_proto_name(unsigned proto)
{
	return proto == IPPROTO_UDP ? "udp" : "tcp";
}

static int netlock_rule_text(const struct netlock_rule *r, struct buf *out)
{
	static const char *const verdicts[] = {
		[NV_JUMP_AGENT] = "jump " NETLOCK_CHAIN_AGENT,
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
		case NM_CT_REPLY:
			rc = buf_puts(out, "ct direction reply ");
			break;
		case NM_CT_ESTREL:
			rc = buf_puts(out, "ct state established,related ");
			break;
		case NM_IP4_LOOPBACK:
			rc = buf_puts(out, "ip daddr 127.0.0.1 ");
			break;
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
	size_t n;
	int rc = netlock_rules(s, r, &n);

	if (rc == 0)
		rc = buf_printf(out, "table inet %s {\n", netlock_name);
	if (rc == 0)
		rc = netlock_chain_text(r, n, NETLOCK_CHAIN_OUTPUT,
			"\t\ttype filter hook output priority 0; policy accept;\n", out);
	if (rc == 0)
		rc = netlock_chain_text(r, n, NETLOCK_CHAIN_AGENT, "", out);
	return rc ? rc : buf_puts(out, "}\n");
}

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
	if (v == NV_JUMP_AGENT) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NFT_JUMP);
		nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, NETLOCK_CHAIN_AGENT);
	} else {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_ACCEPT);
	}
	return 0;
}

/* A libnftnl rule for r; NULL when out of memory. */
static struct nftnl_rule *netlock_rule_build(const struct netlock_rule *nr)
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

/* libnftnl's text of a rule (header line, then one "  [ expr ]" line each); malloc'd. */
static char *netlock_rule_print(const struct nftnl_rule *r)
{
	size_t size = 4096;

	for (;;) {
		char *p = malloc(size);
		int n;

		if (!p)
			return NULL;
		n = nftnl_rule_snprintf(p, size, r, NFTNL_OUTPUT_DEFAULT, 0);
		if (n < 0) {
			free(p);
			return NULL;
		}
		if ((size_t)n < size)
			return p;
		free(p);
		size = (size_t)n + 1;
	}
}

/*
 * Only the expression lines: the header carries the handle, which differs
 * between a built rule and a dumped one and says nothing about behaviour.
 */
static char *netlock_rule_exprs(const struct nftnl_rule *r)
{
	char *text = netlock_rule_print(r), *nl, *exprs;

	if (!text)
		return NULL;
	nl = strchr(text, '\n');
	exprs = strdup(nl ? nl + 1 : "");
	free(text);
	return exprs;
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

void netlock_exprs_canon(char *text)
{
	const char *p = text;
	char *w = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
		unsigned r1, r2;
		char lo[16], hi[16];
		int n1 = -1, n2 = -1;

		/* Both lines whole (each ends at '\n', the second possibly at the end), one
		 * register, values of one width (libnftnl prints 32 bits per 0x word). */
		if (sscanf(p, "  [ cmp gte reg %u %15[0x0-9a-f] ]%n", &r1, lo, &n1) == 2 &&
			n1 > 0 && p[n1] == '\n' &&
			sscanf(p + n1 + 1, "  [ cmp lte reg %u %15[0x0-9a-f] ]%n", &r2, hi, &n2) ==
				2 &&
			n2 > 0 && (p[n1 + 1 + n2] == '\n' || p[n1 + 1 + n2] == '\0') && r1 == r2 &&
			strlen(lo) == strlen(hi)) {
			char line[64];
			int m = strcmp(lo, hi) == 0
				? snprintf(line, sizeof(line), "  [ cmp eq reg %u %s ]", r1, lo)
				: snprintf(line, sizeof(line), "  [ range eq reg %u %s %s ]", r1,
					  lo, hi);

			/* Never longer than the two lines it replaces: w stays behind p. */
			if (m > 0 && m < n1 + 1 + n2) {
				memcpy(w, line, (size_t)m);
				w += m;
				p += n1 + 1 + n2; /* the second line's '\n' is copied next */
				continue;
			}
		}
		memmove(w, p, len);
		w += len;
		p += len;
	}
	*w = '\0';
}

/* ---- netlink plumbing ---- */

static void netlock_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void netlock_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!err || errlen == 0)
		return;
	n = snprintf(err, errlen, "netlock: ");
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

/* strerror(e) plus what to do about the one error an operator will meet. */
static const char *netlock_hint(int e)
{
	return e == EPERM ? ": needs root (CAP_NET_ADMIN)" : "";
}

long netlock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static struct mnl_socket *netlock_socket(int *ret_err)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);

	if (!nl) {
		*ret_err = errno;
		return NULL;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		*ret_err = errno;
		mnl_socket_close(nl);
		return NULL;
	}
	return nl;
}

/* Wait for the socket to be readable: 0, or -ETIMEDOUT / -errno. */
int netlock_wait(struct mnl_socket *nl, long deadline)
{
	for (;;) {
		struct pollfd pf = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
		long left = deadline - netlock_now_ms();
		int r;

		/* Past the deadline, still take what is queued already. */
		r = poll(&pf, 1, left > 0 ? (int)left : 0);
		if (r > 0)
			return 0;
		if (r == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

/*
 * One request and its answers through cb: a dump ends with NLMSG_DONE, a
 * single get (sent with NLM_F_ACK) with its ack. 0 or -errno (-ENOENT: no
 * such object).
 */
static int netlock_query(struct mnl_socket *nl, struct nlmsghdr *req, mnl_cb_t cb, void *data)
{
	long deadline;
	uint32_t seq = req->nlmsg_seq, portid = mnl_socket_get_portid(nl);
	char *buf = malloc(NETLOCK_RCVBUF);
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0) {
		rc = -errno;
		goto out;
	}
	deadline = netlock_now_ms() + NETLOCK_TIMEOUT_MS;
	for (;;) {
		ssize_t n;
		int r;

		rc = netlock_wait(nl, deadline);
		if (rc < 0)
			goto out;
		n = mnl_socket_recvfrom(nl, buf, NETLOCK_RCVBUF);
		if (n < 0) {
			rc = -errno;
			goto out;
		}
		r = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
		if (r < 0) {
			rc = errno ? -errno : -EPROTO;
			goto out;
		}
		if (r == MNL_CB_STOP)
			break;
	}
out:
	free(buf);
	return rc;
}

static uint32_t netlock_seq(void)
{
	static uint32_t seq;

	if (!seq)
		seq = (uint32_t)time(NULL);
	return seq++;
}

/* Attributes the kernel always sends may still be absent in a malformed message. */
static const char *netlock_str(const char *s)
{
	return s ? s : "";
}

static int netlock_streq(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

/* ---- table existence and generation ---- */

struct netlock_table_info {
	int found;
	uint32_t flags;
};

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
static int netlock_get_table(struct mnl_socket *nl, struct netlock_table_info *ti)
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
static int netlock_get_gen(struct mnl_socket *nl, uint32_t *ret_gen)
{
	char req[128];
	struct nlmsghdr *nlh =
		nftnl_nlmsg_build_hdr(req, NFT_MSG_GETGEN, AF_UNSPEC, NLM_F_ACK, netlock_seq());

	return netlock_query(nl, nlh, netlock_gen_cb, ret_gen);
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

/* ---- batches ---- */

struct netlock_msg {
	uint32_t seq;
	int acked;
	char what[96];
};

struct netlock_batch {
	struct nftnl_batch *b; /* owned */
	uint32_t begin_seq;
	struct netlock_msg msg[NETLOCK_MAX_RULES + 8];
	size_t n;
};

static int netlock_batch_init(struct netlock_batch *nb)
{
	memset(nb, 0, sizeof(*nb));
	nb->b = nftnl_batch_alloc(16384, 16384);
	if (!nb->b)
		return -ENOMEM;
	nb->begin_seq = netlock_seq();
	nftnl_batch_begin(nftnl_batch_buffer(nb->b), nb->begin_seq);
	return nftnl_batch_update(nb->b) < 0 ? -ENOMEM : 0;
}

/* A message header in the batch, acknowledged and remembered under `what`. */
static struct nlmsghdr *netlock_batch_msg(
	struct netlock_batch *nb, uint16_t type, uint16_t flags, const char *what)
{
	struct netlock_msg *m;

	if (nb->n >= ARRAY_SIZE(nb->msg))
		return NULL;
	m = &nb->msg[nb->n++];
	m->seq = netlock_seq();
	snprintf(m->what, sizeof(m->what), "%s", what);
	return nftnl_nlmsg_build_hdr(
		nftnl_batch_buffer(nb->b), type, NFPROTO_INET, flags | NLM_F_ACK, m->seq);
}

static int netlock_batch_table(struct netlock_batch *nb, uint16_t type, uint16_t flags)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nlmsghdr *nlh;
	char what[96];

	if (!t)
		return -ENOMEM;
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, netlock_name);
	snprintf(what, sizeof(what), "%s table inet %s",
		type == NFT_MSG_DELTABLE ? "delete" : "add", netlock_name);
	/* The guard's NEWTABLE carries the owner flag: only our socket may change it. */
	if (type == NFT_MSG_NEWTABLE && netlock_flags)
		nftnl_table_set_u32(t, NFTNL_TABLE_FLAGS, netlock_flags);
	nlh = netlock_batch_msg(nb, type, flags, what);
	if (nlh)
		nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	return nlh && nftnl_batch_update(nb->b) == 0 ? 0 : -ENOMEM;
}

static int netlock_batch_chain(struct netlock_batch *nb, const char *name, int base)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nlmsghdr *nlh;
	char what[64];

	if (!c)
		return -ENOMEM;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, netlock_name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	if (base) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter");
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, 0);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	snprintf(what, sizeof(what), "add chain inet %s %s", netlock_name, name);
	nlh = netlock_batch_msg(nb, NFT_MSG_NEWCHAIN, NLM_F_CREATE, what);
	if (nlh)
		nftnl_chain_nlmsg_build_payload(nlh, c);
	nftnl_chain_free(c);
	return nlh && nftnl_batch_update(nb->b) == 0 ? 0 : -ENOMEM;
}

static int netlock_batch_rule(struct netlock_batch *nb, const struct netlock_rule *nr, size_t idx)
{
	struct nftnl_rule *r = netlock_rule_build(nr);
	struct nlmsghdr *nlh;
	char what[64];

	if (!r)
		return -ENOMEM;
	snprintf(what, sizeof(what), "add rule %zu to chain inet %s %s", idx, netlock_name,
		nr->chain);
	nlh = netlock_batch_msg(nb, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, what);
	if (nlh)
		nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	return nlh && nftnl_batch_update(nb->b) == 0 ? 0 : -ENOMEM;
}

/*
 * Send the batch and match every answer to its message. The kernel answers a
 * batch while processing sendmsg() (all acks or errors are queued when it
 * returns), so the wait is only a bound. 0 when every message was acked;
 * else -errno of the first failure with *ret_bad its message index (nb->n:
 * the batch as a whole, e.g. refused for lack of CAP_NET_ADMIN).
 */
static int netlock_batch_send(struct mnl_socket *nl, struct netlock_batch *nb, size_t *ret_bad)
{
	struct sockaddr_nl snl = {.nl_family = AF_NETLINK};
	long deadline;
	uint32_t portid = mnl_socket_get_portid(nl);
	size_t acked = 0, bad = nb->n;
	struct msghdr mh = {0};
	struct iovec *iov;
	char *buf = NULL;
	int niov, rc = 0, fail = 0;

	nftnl_batch_end(nftnl_batch_buffer(nb->b), netlock_seq());
	if (nftnl_batch_update(nb->b) < 0)
		return -ENOMEM;
	/* Not nftnl_batch_buffer(): that is the write position, past the messages. */
	niov = nftnl_batch_iovec_len(nb->b);
	iov = calloc((size_t)niov, sizeof(*iov));
	buf = malloc(NETLOCK_RCVBUF);
	if (!iov || !buf) {
		rc = -ENOMEM;
		goto out;
	}
	nftnl_batch_iovec(nb->b, iov, (uint32_t)niov);
	mh.msg_name = &snl;
	mh.msg_namelen = sizeof(snl);
	mh.msg_iov = iov;
	mh.msg_iovlen = (size_t)niov;
	if (sendmsg(mnl_socket_get_fd(nl), &mh, 0) < 0) {
		rc = -errno;
		goto out;
	}
	/* From here: sendmsg itself may have taken seconds (modules loaded on first use). */
	deadline = netlock_now_ms() + NETLOCK_TIMEOUT_MS;
	while (acked < nb->n && !fail) {
		ssize_t got;
		int len;

		rc = netlock_wait(nl, deadline);
		if (rc < 0) {
			for (bad = 0; bad < nb->n && nb->msg[bad].acked; bad++)
				;
			goto out;
		}
		got = mnl_socket_recvfrom(nl, buf, NETLOCK_RCVBUF);
		if (got < 0) {
			rc = -errno;
			goto out;
		}
		len = (int)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len);
			h = mnl_nlmsg_next(h, &len)) {
			const struct nlmsgerr *e;
			size_t i;

			if (h->nlmsg_type != NLMSG_ERROR || h->nlmsg_pid != portid ||
				h->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
				continue;
			e = mnl_nlmsg_get_payload(h);
			for (i = 0; i < nb->n && nb->msg[i].seq != h->nlmsg_seq; i++)
				;
			if (e->error == 0) {
				if (i < nb->n && !nb->msg[i].acked) {
					nb->msg[i].acked = 1;
					acked++;
				}
				continue;
			}
			/* The first error names the culprit; later ones are consequences. */
			if (!fail) {
				fail = 1;
				rc = e->error;
				bad = i;
			}
		}
	}
out:
	free(buf);
	free(iov);
	*ret_bad = bad;
	return rc;
}

/* The one-line reason for a failed batch. */
static void netlock_batch_err(
	const struct netlock_batch *nb, int rc, size_t bad, char *err, size_t errlen)
{
	if (rc == -ETIMEDOUT)
		netlock_seterr(err, errlen, "%s: no answer from the kernel",
			bad < nb->n ? nb->msg[bad].what : "batch");
	else if (bad < nb->n)
		netlock_seterr(err, errlen, "%s: %s%s", nb->msg[bad].what, strerror(-rc),
			netlock_hint(-rc));
	else
		netlock_seterr(err, errlen, "%s%s", strerror(-rc), netlock_hint(-rc));
}

static int netlock_apply_on(
	const struct netlock_spec *s, struct mnl_socket *given, char *err, size_t errlen)
{
	struct netlock_rule nr[NETLOCK_MAX_RULES];
	struct netlock_batch nb = {0};
	struct mnl_socket *nl = NULL;
	size_t n, bad = 0;
	int rc, e = 0;

	if (netlock_rules(s, nr, &n) < 0) {
		netlock_seterr(err, errlen, "invalid spec (uid 0, or port out of range)");
		return -1;
	}
	rc = netlock_batch_init(&nb);
	/*
	 * Create (a no-op if it exists), delete, create: whatever was there before,
	 * possibly edited by hand, is replaced in the same transaction, so there is
	 * never a moment without the table and applying twice gives one table.
	 */
	if (rc == 0)
		rc = netlock_batch_table(&nb, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	if (rc == 0)
		rc = netlock_batch_table(&nb, NFT_MSG_DELTABLE, 0);
	if (rc == 0)
		rc = netlock_batch_table(&nb, NFT_MSG_NEWTABLE, NLM_F_CREATE);
	if (rc == 0)
		rc = netlock_batch_chain(&nb, NETLOCK_CHAIN_OUTPUT, 1);
	if (rc == 0)
		rc = netlock_batch_chain(&nb, NETLOCK_CHAIN_AGENT, 0);
	/* Numbered per chain, as netlock_verify reports them. */
	for (size_t i = 0, k = 0; i < n && rc == 0; i++) {
		k = i > 0 && strcmp(nr[i].chain, nr[i - 1].chain) == 0 ? k + 1 : 1;
		rc = netlock_batch_rule(&nb, &nr[i], k);
	}
	if (rc < 0) {
		netlock_seterr(err, errlen, "building the batch: %s", strerror(-rc));
		goto out;
	}
	nl = given ? given : netlock_socket(&e);
	if (!nl) {
		rc = -e;
		netlock_seterr(err, errlen, "netfilter netlink socket: %s", strerror(e));
		goto out;
	}
	rc = netlock_batch_send(nl, &nb, &bad);
	if (rc < 0)
		netlock_batch_err(&nb, rc, bad, err, errlen);
out:
	if (nl && !given)
		mnl_socket_close(nl);
	if (nb.b)
		nftnl_batch_free(nb.b);
	return rc < 0 ? -1 : 0;
}

int netlock_apply(const struct netlock_spec *s, char *err, size_t errlen)
{
	return netlock_apply_on(s, NULL, err, errlen);
}

int netlock_guard_apply(
	const struct netlock_spec *s, struct mnl_socket *owner, char *err, size_t errlen)
{
	int rc;

	netlock_name = NETLOCK_GUARD_TABLE;
	netlock_flags = NFT_TABLE_F_OWNER;
	rc = netlock_apply_on(s, owner, err, errlen);
	netlock_name = NETLOCK_TABLE;
	netlock_flags = 0;
	return rc;
}

int netlock_guard_verify(const struct netlock_spec *s, char *err, size_t errlen)
{
	int rc;

	netlock_name = NETLOCK_GUARD_TABLE;
	netlock_flags = NFT_TABLE_F_OWNER;
	rc = netlock_verify(s, err, errlen);
	netlock_name = NETLOCK_TABLE;
	netlock_flags = 0;
	return rc;
}

int netlock_remove(char *err, size_t errlen)
{
	struct netlock_batch nb = {0};
	struct mnl_socket *nl = NULL;
	size_t bad = 0;
	int rc, e = 0;

	rc = netlock_batch_init(&nb);
	if (rc == 0)
		rc = netlock_batch_table(&nb, NFT_MSG_DELTABLE, 0);
	if (rc < 0) {
		netlock_seterr(err, errlen, "building the batch: %s", strerror(-rc));
		goto out;
	}
	nl = netlock_socket(&e);
	if (!nl) {
		rc = -e;
		netlock_seterr(err, errlen, "netfilter netlink socket: %s", strerror(e));
		goto out;
	}
	rc = netlock_batch_send(nl, &nb, &bad);
	/* Already gone is what the caller wants. */
	if (rc == -ENOENT && bad < nb.n)
		rc = 0;
	if (rc < 0)
		netlock_batch_err(&nb, rc, bad, err, errlen);
out:
	if (nl)
		mnl_socket_close(nl);
	if (nb.b)
		nftnl_batch_free(nb.b);
	return rc < 0 ? -1 : 0;
}

/* ---- verify ---- */

struct netlock_live_chain {
	char name[256];
	int base;
	char type[32];
	uint32_t hook;
	int32_t prio;
	uint32_t policy;
};

struct netlock_live_rule {
	char chain[256];
	char *exprs; /* owned */
};

struct netlock_live {
	struct netlock_table_info table;
	struct netlock_live_chain chain[8];
	size_t nchain;
	int chains_overflow; /* more chains than chain[] holds */
	struct netlock_live_rule *rule; /* owned */
	size_t nrule, caprule;
};

static void netlock_live_free(struct netlock_live *l)
{
	for (size_t i = 0; i < l->nrule; i++)
		free(l->rule[i].exprs);
	free(l->rule);
	memset(l, 0, sizeof(*l));
}

static int netlock_chain_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netlock_live *l = data;
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct netlock_live_chain *lc;

	if (!c) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_chain_nlmsg_parse(nlh, c) < 0 ||
		nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY) != NFPROTO_INET ||
		!netlock_streq(nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE), netlock_name))
		goto out;
	if (l->nchain == ARRAY_SIZE(l->chain)) {
		l->chains_overflow = 1;
		goto out;
	}
	lc = &l->chain[l->nchain++];
	snprintf(lc->name, sizeof(lc->name), "%s",
		netlock_str(nftnl_chain_get_str(c, NFTNL_CHAIN_NAME)));
	lc->base = nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM);
	if (lc->base) {
		const char *type = nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE);

		snprintf(lc->type, sizeof(lc->type), "%s", type ? type : "?");
		lc->hook = nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM);
		lc->prio = nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO);
		lc->policy = nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY);
	}
out:
	nftnl_chain_free(c);
	return MNL_CB_OK;
}

static int netlock_rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netlock_live *l = data;
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct netlock_live_rule *lr;
	int rc = MNL_CB_OK;

	if (!r) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_rule_nlmsg_parse(nlh, r) < 0 ||
		nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY) != NFPROTO_INET ||
		!netlock_streq(nftnl_rule_get_str(r, NFTNL_RULE_TABLE), netlock_name))
		goto out;
	if (l->nrule == l->caprule) {
		size_t cap = l->caprule ? l->caprule * 2 : 16;
		struct netlock_live_rule *p = realloc(l->rule, cap * sizeof(*p));

		if (!p) {
			errno = ENOMEM;
			rc = MNL_CB_ERROR;
			goto out;
		}
		l->rule = p;
		l->caprule = cap;
	}
	lr = &l->rule[l->nrule];
	snprintf(lr->chain, sizeof(lr->chain), "%s",
		netlock_str(nftnl_rule_get_str(r, NFTNL_RULE_CHAIN)));
	lr->exprs = netlock_rule_exprs(r);
	if (!lr->exprs) {
		errno = ENOMEM;
		rc = MNL_CB_ERROR;
		goto out;
	}
	l->nrule++;
out:
	nftnl_rule_free(r);
	return rc;
}

/* Table, chains and rules of one ruleset generation. 1 read, 0 table missing, -errno. */
static int netlock_live_read(struct mnl_socket *nl, struct netlock_live *l)
{
	for (int attempt = 0; attempt < 5; attempt++) {
		char req[512];
		struct nlmsghdr *nlh;
		struct nftnl_rule *r;
		uint32_t gen1 = 0, gen2 = 0;
		int rc;

		netlock_live_free(l);
		rc = netlock_get_gen(nl, &gen1);
		if (rc == 0)
			rc = netlock_get_table(nl, &l->table);
		if (rc <= 0)
			return rc;
		nlh = nftnl_nlmsg_build_hdr(
			req, NFT_MSG_GETCHAIN, NFPROTO_INET, NLM_F_DUMP, netlock_seq());
		rc = netlock_query(nl, nlh, netlock_chain_cb, l);
		if (rc < 0)
			return rc;
		/* The kernel filters a rule dump by table: the host's other tables stay out. */
		r = nftnl_rule_alloc();
		if (!r)
			return -ENOMEM;
		nftnl_rule_set_str(r, NFTNL_RULE_TABLE, netlock_name);
		nlh = nftnl_nlmsg_build_hdr(
			req, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, netlock_seq());
		nftnl_rule_nlmsg_build_payload(nlh, r);
		nftnl_rule_free(r);
		rc = netlock_query(nl, nlh, netlock_rule_cb, l);
		if (rc == 0)
			rc = netlock_get_gen(nl, &gen2);
		if (rc < 0)
			return rc;
		/* Several dumps are one picture only if no batch was committed in between. */
		if (gen1 == gen2)
			return 1;
	}
	return -EAGAIN;
}

static const char *netlock_hook_name(uint32_t hook)
{
	static const char *const names[] = {
		[NF_INET_PRE_ROUTING] = "prerouting",
		[NF_INET_LOCAL_IN] = "input",
		[NF_INET_FORWARD] = "forward",
		[NF_INET_LOCAL_OUT] = "output",
		[NF_INET_POST_ROUTING] = "postrouting",
	};

	return hook < ARRAY_SIZE(names) && names[hook] ? names[hook] : "?";
}

static const char *netlock_policy_name(uint32_t policy)
{
	return policy == NF_ACCEPT ? "accept" : policy == NF_DROP ? "drop" : "?";
}

static const struct netlock_live_chain *netlock_live_chain(
	const struct netlock_live *l, const char *name)
{
	for (size_t i = 0; i < l->nchain; i++)
		if (strcmp(l->chain[i].name, name) == 0)
			return &l->chain[i];
	return NULL;
}

/* "  [ a ]\n  [ b ]\n" -> "[ a ] [ b ]" for a one-line message. */
static void netlock_oneline(const char *in, char *out, size_t n)
{
	size_t o = 0;
	int space = 0;

	if (n == 0)
		return;
	for (; *in && o + 1 < n; in++) {
		if (*in == ' ' || *in == '\t' || *in == '\n') {
			space = o > 0;
			continue;
		}
		if (space && o + 2 < n)
			out[o++] = ' ';
		space = 0;
		out[o++] = *in;
	}
	out[o] = '\0';
}

/* Are want and have the same expressions, port ranges in either form? On ENOMEM *rc is set. */
static int netlock_exprs_same(const char *want, const char *have, int *rc)
{
	char *w = strdup(want), *h = strdup(have);
	int same = 0;

	if (w && h) {
		netlock_exprs_canon(w);
		netlock_exprs_canon(h);
		same = strcmp(w, h) == 0;
	} else {
		*rc = -ENOMEM;
		same = 1; /* no "differs" message: the error is the allocation */
	}
	free(w);
	free(h);
	return same;
}

/* 0 equal, 1 different (err says where), -errno. */
static int netlock_compare_chain(const struct netlock_live *l, const struct netlock_rule *nr,
	size_t n, const char *chain, char *err, size_t errlen)
{
	size_t want = 0, have = 0, iw = 0, ih = 0;
	char w1[1024], h1[1024];
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		want += strcmp(nr[i].chain, chain) == 0;
	for (size_t i = 0; i < l->nrule; i++)
		have += strcmp(l->rule[i].chain, chain) == 0;
	for (size_t k = 0; k < (want > have ? want : have) && rc == 0; k++) {
		const struct netlock_rule *w = NULL;
		const char *h = NULL;
		struct nftnl_rule *r = NULL;
		char *wexprs = NULL;
		struct buf text = {0};

		for (; iw < n && !w; iw++)
			if (strcmp(nr[iw].chain, chain) == 0)
				w = &nr[iw];
		for (; ih < l->nrule && !h; ih++)
			if (strcmp(l->rule[ih].chain, chain) == 0)
				h = l->rule[ih].exprs;
		if (w) {
			r = netlock_rule_build(w);
			wexprs = r ? netlock_rule_exprs(r) : NULL;
			if (!wexprs || netlock_rule_text(w, &text) < 0)
				rc = -ENOMEM;
		}
		if (rc == 0 && w && h && !netlock_exprs_same(wexprs, h, &rc)) {
			netlock_oneline(wexprs, w1, sizeof(w1));
			netlock_oneline(h, h1, sizeof(h1));
			netlock_seterr(err, errlen,
				"chain %s rule %zu differs: want \"%s\" %s, have %s", chain, k + 1,
				text.data, w1, h1);
			rc = 1;
		} else if (rc == 0 && w && !h) {
			netlock_seterr(err, errlen, "chain %s rule %zu missing: want \"%s\"", chain,
				k + 1, text.data);
			rc = 1;
		} else if (rc == 0 && !w && h) {
			netlock_oneline(h, h1, sizeof(h1));
			netlock_seterr(err, errlen, "chain %s has an extra rule %zu: %s", chain,
				k + 1, h1);
			rc = 1;
		}
		buf_free(&text);
		free(wexprs);
		if (r)
			nftnl_rule_free(r);
	}
	return rc;
}

static int netlock_compare(const struct netlock_live *l, const struct netlock_rule *nr, size_t n,
	char *err, size_t errlen)
{
	const struct netlock_live_chain *out, *agent;
	int rc;

	/* A dormant table is installed but filters nothing. */
	if (l->table.flags != netlock_flags) {
		netlock_seterr(err, errlen, "table inet %s has flags 0x%x%s, want %s", netlock_name,
			l->table.flags, l->table.flags & NFT_TABLE_F_DORMANT ? " (dormant)" : "",
			netlock_flags ? "0x2 (owner)" : "none");
		return 1;
	}
	for (size_t i = 0; i < l->nchain; i++) {
		if (strcmp(l->chain[i].name, NETLOCK_CHAIN_OUTPUT) != 0 &&
			strcmp(l->chain[i].name, NETLOCK_CHAIN_AGENT) != 0) {
			netlock_seterr(err, errlen, "unexpected chain %s in table inet %s",
				l->chain[i].name, netlock_name);
			return 1;
		}
	}
	if (l->chains_overflow) {
		netlock_seterr(err, errlen, "too many chains in table inet %s", netlock_name);
		return 1;
	}
	out = netlock_live_chain(l, NETLOCK_CHAIN_OUTPUT);
	agent = netlock_live_chain(l, NETLOCK_CHAIN_AGENT);
	if (!out || !agent) {
		netlock_seterr(err, errlen, "chain %s missing in table inet %s",
			out ? NETLOCK_CHAIN_AGENT : NETLOCK_CHAIN_OUTPUT, netlock_name);
		return 1;
	}
	if (!out->base || strcmp(out->type, "filter") != 0 || out->hook != NF_INET_LOCAL_OUT ||
		out->prio != 0 || out->policy != NF_ACCEPT) {
		if (out->base)
			netlock_seterr(err, errlen,
				"chain output differs: want type filter hook output priority 0 "
				"policy accept, have type %s hook %s priority %d policy %s",
				out->type, netlock_hook_name(out->hook), (int)out->prio,
				netlock_policy_name(out->policy));
		else
			netlock_seterr(err, errlen,
				"chain output differs: want a base chain (hook output), have "
				"a regular chain");
		return 1;
	}
	if (agent->base) {
		netlock_seterr(err, errlen,
			"chain agent differs: want a regular chain, have type %s hook %s",
			agent->type, netlock_hook_name(agent->hook));
		return 1;
	}
	rc = netlock_compare_chain(l, nr, n, NETLOCK_CHAIN_OUTPUT, err, errlen);
	if (rc == 0)
		rc = netlock_compare_chain(l, nr, n, NETLOCK_CHAIN_AGENT, err, errlen);
	return rc;
}

int netlock_verify(const struct netlock_spec *s, char *err, size_t errlen)
{
	struct netlock_rule nr[NETLOCK_MAX_RULES];
	struct netlock_live live = {0};
	struct mnl_socket *nl = NULL;
	size_t n;
	int rc, e = 0;

	if (netlock_rules(s, nr, &n) < 0) {
		netlock_seterr(err, errlen, "invalid spec (uid 0, or port out of range)");
		return -1;
	}
	nl = netlock_socket(&e);
	if (!nl) {
		netlock_seterr(err, errlen, "netfilter netlink socket: %s", strerror(e));
		return -1;
	}
	rc = netlock_live_read(nl, &live);
	if (rc == 0) {
		netlock_seterr(err, errlen, "table inet %s missing", netlock_name);
		rc = 1;
	} else if (rc == -EAGAIN) {
		netlock_seterr(err, errlen, "reading table inet %s: the ruleset kept changing",
			netlock_name);
		rc = -1;
	} else if (rc < 0) {
		netlock_seterr(err, errlen, "reading table inet %s: %s%s", netlock_name,
			strerror(-rc), netlock_hint(-rc));
		rc = -1;
	} else {
		rc = netlock_compare(&live, nr, n, err, errlen);
		if (rc < 0) {
			netlock_seterr(err, errlen, "comparing table inet %s: %s", netlock_name,
				strerror(-rc));
			rc = -1;
		}
	}
	netlock_live_free(&live);
	mnl_socket_close(nl);
	return rc;
}
