/* SPDX-License-Identifier: MIT */
/*
 * Internals of the netlock (netlock*.c): the table described as data, and the helpers the
 * files share. Callers outside use netlock.h.
 */
#ifndef OCSB_NETLOCK_INT_H
#define OCSB_NETLOCK_INT_H

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
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include "netlock.h"

/*
 * The table being worked on: the plain table `ocsb`, or the guard while a guard entry
 * point runs (netlock_guard_apply/verify set these and put them back). The callers are
 * single-threaded.
 */
extern const char *netlock_name;
extern uint32_t netlock_flags;

/*
 * The table is described once, as data (struct netlock_rule), and turned into
 * nft text, libnftnl expressions and the comparison made by netlock_verify:
 * the three can only disagree if one of the small translators below is wrong,
 * and the unit test checks the first two against nft's own encoding.
 */

#define NETLOCK_CHAIN_OUTPUT "output"
#define NETLOCK_CHAIN_AGENT "agent"
#define NETLOCK_CHAIN_INJECT "inject"
/*
 * The most netlock_rules() makes: 5 in output, 8 + NETLOCK_MAX_INJECT (an accept per route)
 * + 2 * (NETLOCK_MAX_AGENTS + 1) (a reset and an accept per agent's range) in agent, 7 +
 * 2 * NETLOCK_MAX_NS + NETLOCK_MAX_INJECT (an upstream port per route) in inject: 20 +
 * 2 * NETLOCK_MAX_INJECT + 2 * NETLOCK_MAX_NS + 2 * (NETLOCK_MAX_AGENTS + 1), with room for
 * one more kind. Every array of rules, and the batch's messages, are sized by it;
 * netlock_rules checks its count against it.
 */
#define NETLOCK_MAX_RULES_USED \
	(20 + 2 * NETLOCK_MAX_INJECT + 2 * NETLOCK_MAX_NS + 2 * (NETLOCK_MAX_AGENTS + 1))
#define NETLOCK_MAX_RULES (NETLOCK_MAX_RULES_USED + 4)
/*
 * The longest rules: meta skuid, fib daddr type local, tcp dport lo-hi (an agent's range);
 * ct direction reply, ct state, fib daddr type local; ct direction reply, ip saddr, tcp sport.
 */
#define NETLOCK_MAX_MATCH 3
#define NETLOCK_TIMEOUT_MS 2000
#define NETLOCK_RCVBUF 65536

enum netlock_match_kind {
	NM_SKUID, /* meta skuid a */
	NM_SKUID_SET, /* meta skuid @agents */
	NM_CT_REPLY, /* ct direction reply */
	NM_CT_ESTREL, /* ct state established,related */
	NM_IP4_LOOPBACK, /* ip daddr 127.0.0.1 */
	NM_IP4_SADDR_LOOPBACK, /* ip saddr 127.0.0.1 */
	NM_DADDR, /* ip daddr addr (a = AF_INET), ip6 daddr addr (a = AF_INET6) */
	NM_FIB_LOCAL, /* fib daddr type local */
	NM_L4PROTO, /* meta l4proto a */
	NM_DPORT, /* <a> dport b */
	NM_DPORT_RANGE, /* <a> dport b-c */
	NM_SPORT_RANGE, /* <a> sport b-c */
};

struct netlock_match {
	enum netlock_match_kind kind;
	unsigned a, b, c;
	unsigned char addr[16]; /* NM_DADDR: network order, 4 or 16 bytes by a */
};

enum netlock_verdict {
	NV_JUMP_AGENT,
	NV_JUMP_INJECT,
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

struct netlock_table_info {
	int found;
	uint32_t flags;
};

/* The set's key: nft's datatype "uid" (TYPE_UID of nftables' datatype.h), 4 bytes. */
#define NETLOCK_SET_KEY_TYPE 24
#define NETLOCK_SET_ID 1 /* names the set to the rules of the batch that creates it */

/* The live set, as netlock_set_read finds it. */
struct netlock_live_set {
	int found, extra; /* the set agents; another set in the table */
	char extra_name[64];
	uint32_t key_type, key_len, flags;
	uid_t uid[NETLOCK_MAX_AGENTS + 1];
	size_t n;
	int overflow, bad_key; /* more elements than uid[] holds; a key not 4 bytes */
};

/* Shared by the files of the module; nothing outside it uses these. */
size_t netlock_set_uids(const struct netlock_spec *s, uid_t *out);
int netlock_uid_cmp(const void *a, const void *b); /* qsort of uid_t */
struct nftnl_set *netlock_set_build(const struct netlock_spec *s);
int netlock_set_read(struct mnl_socket *nl, struct netlock_live_set *ls);
int netlock_set_compare(const struct netlock_live_set *ls, const struct netlock_spec *s,
	char *err, size_t errlen);
int netlock_rules(const struct netlock_spec *s, struct netlock_rule *r, size_t *ret_n);
int netlock_rule_text(const struct netlock_rule *r, struct buf *out);
struct nftnl_rule *netlock_rule_build(const struct netlock_rule *nr);
char *netlock_rule_exprs(const struct nftnl_rule *r);
void netlock_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *netlock_hint(int e);
struct mnl_socket *netlock_socket(int *ret_err);
/* Discard what is queued on nl (answers to an exchange given up on). */
void netlock_drain(struct mnl_socket *nl);
int netlock_query(struct mnl_socket *nl, struct nlmsghdr *req, mnl_cb_t cb, void *data);
uint32_t netlock_seq(void);
const char *netlock_str(const char *s);
int netlock_streq(const char *a, const char *b);
int netlock_get_table(struct mnl_socket *nl, struct netlock_table_info *ti);
int netlock_get_gen(struct mnl_socket *nl, uint32_t *ret_gen);

/* One nftables batch and what each of its messages was, for the error (netlock_batch.c). */
struct netlock_msg {
	uint32_t seq;
	int acked;
	char what[96];
};

struct netlock_batch {
	struct nftnl_batch *b; /* owned */
	uint32_t begin_seq;
	/* Three table messages, the set and its elements, three chains, then the rules. */
	struct netlock_msg msg[NETLOCK_MAX_RULES + 8];
	size_t n;
};

int netlock_batch_init(struct netlock_batch *nb);
int netlock_batch_table(struct netlock_batch *nb, uint16_t type, uint16_t flags);
int netlock_batch_send(struct mnl_socket *nl, struct netlock_batch *nb, size_t *ret_bad);
void netlock_batch_err(
	const struct netlock_batch *nb, int rc, size_t bad, char *err, size_t errlen);

/*
 * What ocsb-provision recorded in an entry of the agents registry (provision/account.c),
 * read from its text (data, NUL-terminated, cut into lines in place): netlock_set.c.
 */
struct netlock_entry {
	uid_t uid; /* "uid N", or (uid_t)-1 */
	struct netlock_range ports; /* "ports LO-HI"; 0/0 without a valid one */
	char why[192]; /* why a ports line gives no range ("" if none) */
};
void netlock_entry_parse(char *data, struct netlock_entry *ret);

#endif
