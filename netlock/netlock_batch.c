/* SPDX-License-Identifier: MIT */
/*
 * The netlock's changes as one nftables batch: the kernel applies all of it or nothing.
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
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include "netlock.h"
#include "netlock_int.h"

/* ---- batches ---- */

int netlock_batch_init(struct netlock_batch *nb)
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

int netlock_batch_table(struct netlock_batch *nb, uint16_t type, uint16_t flags)
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

/* The set of agents and its elements: after the table, before the rule that looks it up. */
static int netlock_batch_set(struct netlock_batch *nb, const struct netlock_spec *s)
{
	struct nftnl_set *set = netlock_set_build(s);
	struct nlmsghdr *nlh;
	char what[96];
	int rc = -ENOMEM;

	if (!set)
		return -ENOMEM;
	snprintf(what, sizeof(what), "add set inet %s %s", netlock_name, NETLOCK_SET);
	nlh = netlock_batch_msg(nb, NFT_MSG_NEWSET, NLM_F_CREATE, what);
	if (nlh) {
		nftnl_set_nlmsg_build_payload(nlh, set);
		if (nftnl_batch_update(nb->b) == 0) {
			snprintf(what, sizeof(what), "add element inet %s %s", netlock_name,
				NETLOCK_SET);
			nlh = netlock_batch_msg(nb, NFT_MSG_NEWSETELEM, NLM_F_CREATE, what);
			if (nlh) {
				nftnl_set_elems_nlmsg_build_payload(nlh, set);
				rc = nftnl_batch_update(nb->b) == 0 ? 0 : -ENOMEM;
			}
		}
	}
	nftnl_set_free(set);
	return rc;
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
int netlock_batch_send(struct mnl_socket *nl, struct netlock_batch *nb, size_t *ret_bad)
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
void netlock_batch_err(const struct netlock_batch *nb, int rc, size_t bad, char *err, size_t errlen)
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
		rc = netlock_batch_set(&nb, s);
	if (rc == 0)
		rc = netlock_batch_chain(&nb, NETLOCK_CHAIN_OUTPUT, 1);
	if (rc == 0)
		rc = netlock_batch_chain(&nb, NETLOCK_CHAIN_AGENT, 0);
	if (rc == 0 && s->inject_uid)
		rc = netlock_batch_chain(&nb, NETLOCK_CHAIN_INJECT, 0);
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

int netlock_apply_sock(
	const struct netlock_spec *s, struct mnl_socket *nl, char *err, size_t errlen)
{
	if (nl)
		netlock_drain(nl);
	return netlock_apply_on(s, nl, err, errlen);
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
