/* SPDX-License-Identifier: MIT */
/*
 * netlock_snap: the table as the kernel itself serialises it (its table, chains, sets, set
 * elements and rules, in dump order), recorded by the batch that installed it and compared
 * byte for byte afterwards. This is ocsb-warden's check (design.md, invariant 4): it needs
 * no reading of rules, so the root process links no expression printer.
 *
 * Why the record is the table we built: the record is taken in the generation right after
 * our batch's own, the ruleset generation counts committed batches one by one, and every
 * batch that changes something is a commit. Record generation == (generation read before
 * our batch) + 1 means no other batch came in between; else the batch is sent again.
 * netlock_verify (a reading rule by rule, for ocsb-provision, ocsb doctor and the tests)
 * checks the same table independently.
 */
#include "netlock_int.h"

/*
 * One picture of the table, in `out`: per message of the dumps, its type, the length of
 * what follows and its attributes. Chain counters are left out (our chains have none;
 * nothing else in the table changes without a batch). 1 read, 0 table missing, -errno.
 */
struct snap_read {
	struct buf *out;
	int found;
};

static int snap_cb(const struct nlmsghdr *nlh, void *data)
{
	struct snap_read *sr = data;
	const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);
	const struct nlattr *a;
	const char *table = NULL;
	uint16_t type = NFNL_MSG_TYPE(nlh->nlmsg_type);
	size_t at;

	if (nlh->nlmsg_len < NLMSG_HDRLEN + sizeof(*g) || g->nfgen_family != NFPROTO_INET)
		return MNL_CB_OK;
	/* Attribute 1 names the table in each: NFTA_{TABLE_NAME,CHAIN,RULE,SET,SET_ELEM_LIST}_TABLE. */
	mnl_attr_for_each(a, nlh, sizeof(*g))
	{
		if (mnl_attr_get_type(a) == 1 && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) == 0)
			table = mnl_attr_get_str(a);
	}
	if (!netlock_streq(table, netlock_name))
		return MNL_CB_OK;
	if (type == NFT_MSG_NEWTABLE)
		sr->found = 1;
	at = sr->out->len;
	if (buf_append(sr->out, &type, sizeof(type)) < 0 ||
		buf_append(sr->out, &(uint32_t){0}, sizeof(uint32_t)) < 0)
		goto nomem;
	mnl_attr_for_each(a, nlh, sizeof(*g))
	{
		if (type == NFT_MSG_NEWCHAIN && mnl_attr_get_type(a) == NFTA_CHAIN_COUNTERS)
			continue;
		if (buf_append(sr->out, a, mnl_attr_get_payload_len(a) + MNL_ATTR_HDRLEN) < 0)
			goto nomem;
	}
	memcpy(sr->out->data + at + sizeof(type),
		&(uint32_t){(uint32_t)(sr->out->len - at - sizeof(type) - sizeof(uint32_t))},
		sizeof(uint32_t));
	return MNL_CB_OK;
nomem:
	errno = ENOMEM;
	return MNL_CB_ERROR;
}

/* A dump (or, for the table, a get) of one kind of object of our table. */
static int snap_dump(struct mnl_socket *nl, uint16_t type, struct snap_read *sr)
{
	char req[512];
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(req, type, NFPROTO_INET,
		type == NFT_MSG_GETTABLE ? NLM_F_ACK : NLM_F_DUMP, netlock_seq());
	int rc;

	/* The kernel filters each dump by these; snap_cb filters again by table. */
	mnl_attr_put_strz(nlh, 1, netlock_name);
	if (type == NFT_MSG_GETSETELEM)
		mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, NETLOCK_SET);
	rc = netlock_query(nl, nlh, snap_cb, sr);
	return rc == -ENOENT ? 0 : rc;
}

/* Table, chains, sets, elements and rules of one generation: 1, 0 table missing, -errno. */
static int snap_read(struct mnl_socket *nl, struct buf *out, uint32_t *ret_gen)
{
	static const uint16_t kinds[] = {NFT_MSG_GETTABLE, NFT_MSG_GETCHAIN, NFT_MSG_GETSET,
		NFT_MSG_GETSETELEM, NFT_MSG_GETRULE};

	for (int attempt = 0; attempt < 5; attempt++) {
		struct snap_read sr = {out, 0};
		uint32_t gen1 = 0, gen2 = 0;
		int rc = netlock_get_gen(nl, &gen1);

		out->len = 0;
		for (size_t i = 0; i < ARRAY_SIZE(kinds) && rc == 0; i++)
			rc = snap_dump(nl, kinds[i], &sr);
		if (rc == 0)
			rc = netlock_get_gen(nl, &gen2);
		if (rc < 0)
			return rc;
		/* Several dumps are one picture only if no batch was committed in between. */
		if (gen1 == gen2) {
			*ret_gen = gen1;
			return sr.found;
		}
	}
	return -EAGAIN;
}

void netlock_snap_free(struct netlock_snap *snap)
{
	buf_free(&snap->data);
	snap->gen = 0;
}

static int snap_take(
	struct mnl_socket *nl, uint32_t before, struct netlock_snap *snap, char *err, size_t errlen)
{
	struct buf b = {0};
	uint32_t gen = 0, next = before + 1 ? before + 1 : 1; /* the kernel skips 0 */
	int rc = snap_read(nl, &b, &gen);

	if (rc == 1 && gen == next) {
		buf_free(&snap->data);
		snap->data = b;
		snap->gen = gen;
		return 0;
	}
	buf_free(&b);
	if (rc < 0)
		netlock_seterr(err, errlen, "reading table inet %s back: %s%s", netlock_name,
			strerror(-rc), netlock_hint(-rc));
	else if (rc == 0)
		netlock_seterr(err, errlen, "table inet %s missing right after it was installed",
			netlock_name);
	else
		netlock_seterr(err, errlen,
			"another batch changed the ruleset while table inet %s was installed",
			netlock_name);
	return rc == 1 ? 1 : -1;
}

int netlock_apply_snap(const struct netlock_spec *s, struct mnl_socket *nl,
	struct netlock_snap *snap, char *err, size_t errlen)
{
	struct mnl_socket *own = NULL;
	int rc = -1, e = 0;

	if (!nl && !(nl = own = netlock_socket(&e))) {
		netlock_seterr(err, errlen, "netfilter netlink socket: %s", strerror(e));
		return -1;
	}
	/* Three tries: a host whose firewall manager commits at that very moment. */
	for (int attempt = 0; attempt < 3; attempt++) {
		uint32_t before = 0;

		netlock_drain(nl);
		rc = netlock_get_gen(nl, &before);
		if (rc < 0) {
			netlock_seterr(err, errlen, "reading the ruleset generation: %s%s",
				strerror(-rc), netlock_hint(-rc));
			rc = -1;
			break;
		}
		rc = netlock_apply_sock(s, nl, err, errlen);
		if (rc == 0)
			rc = snap_take(nl, before, snap, err, errlen);
		if (rc <= 0)
			break;
	}
	if (own)
		mnl_socket_close(own);
	return rc < 0 ? -1 : rc ? -1 : 0;
}

int netlock_guard_apply_snap(const struct netlock_spec *s, struct mnl_socket *owner,
	struct netlock_snap *snap, char *err, size_t errlen)
{
	int rc;

	netlock_name = NETLOCK_GUARD_TABLE;
	netlock_flags = NFT_TABLE_F_OWNER;
	rc = netlock_apply_snap(s, owner, snap, err, errlen);
	netlock_name = NETLOCK_TABLE;
	netlock_flags = 0;
	return rc;
}

/* What the first record that differs is: the user's clue to what was changed. */
static const char *snap_diff(const struct buf *a, const struct buf *b)
{
	static const char *const kind[] = {[NFT_MSG_NEWTABLE] = "the table",
		[NFT_MSG_NEWCHAIN] = "a chain",
		[NFT_MSG_NEWRULE] = "a rule",
		[NFT_MSG_NEWSET] = "a set",
		[NFT_MSG_NEWSETELEM] = "the set's elements"};
	size_t off = 0;

	for (;;) {
		uint16_t ta, tb;
		uint32_t la, lb;

		if (off + 6 > a->len || off + 6 > b->len)
			return off + 6 > b->len ? "a part missing" : "an addition";
		memcpy(&ta, a->data + off, 2);
		memcpy(&tb, b->data + off, 2);
		memcpy(&la, a->data + off + 2, 4);
		memcpy(&lb, b->data + off + 2, 4);
		if (ta != tb || la != lb || memcmp(a->data + off + 6, b->data + off + 6, la) != 0)
			return ta < ARRAY_SIZE(kind) && kind[ta] ? kind[ta] : "an object";
		off += 6 + la;
	}
}

int netlock_snap_check(
	struct mnl_socket *nl, const struct netlock_snap *snap, char *err, size_t errlen)
{
	struct buf b = {0};
	struct mnl_socket *own = NULL;
	uint32_t gen = 0;
	int rc, r = 1, e = 0;

	if (!snap->gen) {
		netlock_seterr(err, errlen, "table inet %s: nothing recorded", netlock_name);
		return 1;
	}
	if (nl)
		netlock_drain(nl);
	else if (!(nl = own = netlock_socket(&e))) {
		netlock_seterr(err, errlen, "netfilter netlink socket: %s", strerror(e));
		return -1;
	}
	/* No batch since the record: nothing can differ. */
	if (netlock_get_gen(nl, &gen) == 0 && gen == snap->gen) {
		if (own)
			mnl_socket_close(own);
		return 0;
	}
	rc = snap_read(nl, &b, &gen);
	if (rc < 0) {
		netlock_seterr(err, errlen, "reading table inet %s: %s%s", netlock_name,
			rc == -EAGAIN ? "the ruleset kept changing" : strerror(-rc),
			rc == -EAGAIN ? "" : netlock_hint(-rc));
		r = -1;
	} else if (rc == 0) {
		netlock_seterr(err, errlen, "table inet %s missing", netlock_name);
	} else if (b.len != snap->data.len || memcmp(b.data, snap->data.data, b.len) != 0) {
		netlock_seterr(err, errlen, "table inet %s altered (first difference: %s)",
			netlock_name, snap_diff(&snap->data, &b));
	} else {
		r = 0;
	}
	buf_free(&b);
	if (own)
		mnl_socket_close(own);
	return r;
}
