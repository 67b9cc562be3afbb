/* SPDX-License-Identifier: MIT */
/*
 * netlock_verify: the table the kernel holds, read back and compared rule by rule with the
 * one netlock_rules describes.
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

/* ---- the set, read back ---- */

static int netlock_set_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netlock_live_set *ls = data;
	struct nftnl_set *set = nftnl_set_alloc();
	const char *name;

	if (!set) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_set_nlmsg_parse(nlh, set) < 0 ||
		nftnl_set_get_u32(set, NFTNL_SET_FAMILY) != NFPROTO_INET ||
		!netlock_streq(nftnl_set_get_str(set, NFTNL_SET_TABLE), netlock_name))
		goto out;
	name = netlock_str(nftnl_set_get_str(set, NFTNL_SET_NAME));
	if (strcmp(name, NETLOCK_SET) != 0) {
		ls->extra = 1;
		snprintf(ls->extra_name, sizeof(ls->extra_name), "%s", name);
		goto out;
	}
	ls->found = 1;
	ls->key_type = nftnl_set_get_u32(set, NFTNL_SET_KEY_TYPE);
	ls->key_len = nftnl_set_get_u32(set, NFTNL_SET_KEY_LEN);
	ls->flags = nftnl_set_is_set(set, NFTNL_SET_FLAGS) ? nftnl_set_get_u32(set, NFTNL_SET_FLAGS)
							     : 0;
out:
	nftnl_set_free(set);
	return MNL_CB_OK;
}

static int netlock_elem_cb(const struct nlmsghdr *nlh, void *data)
{
	struct netlock_live_set *ls = data;
	struct nftnl_set *set = nftnl_set_alloc();
	struct nftnl_set_elems_iter *it;
	struct nftnl_set_elem *e;

	if (!set) {
		errno = ENOMEM;
		return MNL_CB_ERROR;
	}
	if (nftnl_set_elems_nlmsg_parse(nlh, set) < 0)
		goto out;
	it = nftnl_set_elems_iter_create(set);
	/* _next returns the current element, then moves on. */
	while (it && (e = nftnl_set_elems_iter_next(it)) != NULL) {
		uint32_t len = 0, key;
		const void *k = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);

		if (!k || len != sizeof(key)) {
			ls->bad_key = 1;
			continue;
		}
		memcpy(&key, k, sizeof(key));
		if (ls->n < ARRAY_SIZE(ls->uid))
			ls->uid[ls->n++] = (uid_t)key;
		else
			ls->overflow = 1;
	}
	if (it)
		nftnl_set_elems_iter_destroy(it);
out:
	nftnl_set_free(set);
	return MNL_CB_OK;
}

/* The table's sets, and the elements of `agents`. 0 (ls->found says whether), or -errno. */
int netlock_set_read(struct mnl_socket *nl, struct netlock_live_set *ls)
{
	char req[512];
	struct nlmsghdr *nlh;
	struct nftnl_set *set = nftnl_set_alloc();
	int rc;

	memset(ls, 0, sizeof(*ls));
	if (!set)
		return -ENOMEM;
	nftnl_set_set_str(set, NFTNL_SET_TABLE, netlock_name);
	nlh = nftnl_nlmsg_build_hdr(req, NFT_MSG_GETSET, NFPROTO_INET, NLM_F_DUMP, netlock_seq());
	nftnl_set_nlmsg_build_payload(nlh, set);
	rc = netlock_query(nl, nlh, netlock_set_cb, ls);
	if (rc == 0 && ls->found) {
		nftnl_set_set_str(set, NFTNL_SET_NAME, NETLOCK_SET);
		nlh = nftnl_nlmsg_build_hdr(
			req, NFT_MSG_GETSETELEM, NFPROTO_INET, NLM_F_DUMP, netlock_seq());
		nftnl_set_elems_nlmsg_build_payload(nlh, set);
		rc = netlock_query(nl, nlh, netlock_elem_cb, ls);
		qsort(ls->uid, ls->n, sizeof(ls->uid[0]), netlock_uid_cmp);
	}
	nftnl_set_free(set);
	return rc == -ENOENT ? 0 : rc;
}

/* 0 equal, 1 different (err says how). */
int netlock_set_compare(const struct netlock_live_set *ls, const struct netlock_spec *s,
	char *err, size_t errlen)
{
	uid_t want[NETLOCK_MAX_AGENTS + 1];
	size_t n = netlock_set_uids(s, want), i = 0, k = 0;

	if (ls->extra) {
		netlock_seterr(err, errlen, "unexpected set %s in table inet %s", ls->extra_name,
			netlock_name);
		return 1;
	}
	if (!ls->found) {
		netlock_seterr(err, errlen, "set %s missing in table inet %s", NETLOCK_SET,
			netlock_name);
		return 1;
	}
	if (ls->key_type != NETLOCK_SET_KEY_TYPE || ls->key_len != sizeof(uint32_t) ||
		ls->flags != 0 || ls->bad_key || ls->overflow) {
		netlock_seterr(err, errlen,
			"set %s differs: want type uid (%d), 4-byte keys, no flags; have type %u, "
			"%u-byte keys, flags 0x%x%s",
			NETLOCK_SET, NETLOCK_SET_KEY_TYPE, ls->key_type, ls->key_len, ls->flags,
			ls->overflow ? ", too many elements" : "");
		return 1;
	}
	/* Both ascending: the first difference names a missing or an extra uid. */
	while (i < n || k < ls->n) {
		if (k == ls->n || (i < n && want[i] < ls->uid[k])) {
			netlock_seterr(err, errlen, "set %s lacks uid %u (an agent without netlock)",
				NETLOCK_SET, (unsigned)want[i]);
			return 1;
		}
		if (i == n || ls->uid[k] < want[i]) {
			netlock_seterr(err, errlen, "set %s has an extra uid %u", NETLOCK_SET,
				(unsigned)ls->uid[k]);
			return 1;
		}
		i++;
		k++;
	}
	return 0;
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
	struct netlock_live_set set;
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
			rc = netlock_set_read(nl, &l->set);
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

static int netlock_compare(const struct netlock_live *l, const struct netlock_spec *s,
	const struct netlock_rule *nr, size_t n, char *err, size_t errlen)
{
	const struct netlock_live_chain *out, *agent, *inject;
	int rc;

	/* A dormant table is installed but filters nothing. */
	if (l->table.flags != netlock_flags) {
		netlock_seterr(err, errlen, "table inet %s has flags 0x%x%s, want %s", netlock_name,
			l->table.flags, l->table.flags & NFT_TABLE_F_DORMANT ? " (dormant)" : "",
			netlock_flags ? "0x2 (owner)" : "none");
		return 1;
	}
	for (size_t i = 0; i < l->nchain; i++) {
		const char *name = l->chain[i].name;

		/* ocsb-inject's chain belongs to a table that locks its account, only. */
		if (strcmp(name, NETLOCK_CHAIN_OUTPUT) != 0 &&
			strcmp(name, NETLOCK_CHAIN_AGENT) != 0 &&
			(strcmp(name, NETLOCK_CHAIN_INJECT) != 0 || !s->inject_uid)) {
			netlock_seterr(err, errlen, "unexpected chain %s in table inet %s", name,
				netlock_name);
			return 1;
		}
	}
	if (l->chains_overflow) {
		netlock_seterr(err, errlen, "too many chains in table inet %s", netlock_name);
		return 1;
	}
	out = netlock_live_chain(l, NETLOCK_CHAIN_OUTPUT);
	agent = netlock_live_chain(l, NETLOCK_CHAIN_AGENT);
	inject = netlock_live_chain(l, NETLOCK_CHAIN_INJECT);
	if (!out || !agent || (s->inject_uid && !inject)) {
		netlock_seterr(err, errlen, "chain %s missing in table inet %s",
			!out		 ? NETLOCK_CHAIN_OUTPUT
				: !agent ? NETLOCK_CHAIN_AGENT
					 : NETLOCK_CHAIN_INJECT,
			netlock_name);
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
	for (int i = 0; i < 2; i++) {
		const struct netlock_live_chain *c = i ? inject : agent;

		if (c && c->base) {
			netlock_seterr(err, errlen,
				"chain %s differs: want a regular chain, have type %s hook %s",
				c->name, c->type, netlock_hook_name(c->hook));
			return 1;
		}
	}
	rc = netlock_set_compare(&l->set, s, err, errlen);
	if (rc == 0)
		rc = netlock_compare_chain(l, nr, n, NETLOCK_CHAIN_OUTPUT, err, errlen);
	if (rc == 0)
		rc = netlock_compare_chain(l, nr, n, NETLOCK_CHAIN_AGENT, err, errlen);
	if (rc == 0 && s->inject_uid)
		rc = netlock_compare_chain(l, nr, n, NETLOCK_CHAIN_INJECT, err, errlen);
	return rc;
}

static int netlock_verify_on(
	const struct netlock_spec *s, struct mnl_socket *given, char *err, size_t errlen)
{
	struct netlock_rule nr[NETLOCK_MAX_RULES];
	struct netlock_live live = {0};
	struct mnl_socket *nl = given;
	size_t n;
	int rc, e = 0;

	if (netlock_rules(s, nr, &n) < 0) {
		netlock_seterr(err, errlen, "invalid spec (uid 0, or port out of range)");
		return -1;
	}
	if (nl)
		netlock_drain(nl);
	else if (!(nl = netlock_socket(&e))) {
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
		rc = netlock_compare(&live, s, nr, n, err, errlen);
		if (rc < 0) {
			netlock_seterr(err, errlen, "comparing table inet %s: %s", netlock_name,
				strerror(-rc));
			rc = -1;
		}
	}
	netlock_live_free(&live);
	if (!given)
		mnl_socket_close(nl);
	return rc;
}

int netlock_verify(const struct netlock_spec *s, char *err, size_t errlen)
{
	return netlock_verify_on(s, NULL, err, errlen);
}

int netlock_verify_sock(
	const struct netlock_spec *s, struct mnl_socket *nl, char *err, size_t errlen)
{
	return netlock_verify_on(s, nl, err, errlen);
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
