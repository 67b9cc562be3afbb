/* SPDX-License-Identifier: MIT */
/*
 * The netlock's set of agents: built for a batch and filled from the agents registry (read
 * back and compared by netlock_verify.c). The route ports read from the guard:
 * netlock_live.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
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
#include <libnftnl/udata.h>
#include "config.h"
#include "fileops.h"
#include "netlock.h"
#include "netlock_int.h"
#include "paths.h"

int netlock_uid_cmp(const void *a, const void *b)
{
	uid_t x = *(const uid_t *)a, y = *(const uid_t *)b;

	return x < y ? -1 : x > y;
}

/* The set's uids, ascending, each once: uid and the others. out holds NETLOCK_MAX_AGENTS + 1. */
size_t netlock_set_uids(const struct netlock_spec *s, uid_t *out)
{
	size_t n = 0, k = 0;

	out[n++] = s->uid;
	for (size_t i = 0; i < s->n_others && i < NETLOCK_MAX_AGENTS; i++)
		out[n++] = s->others[i];
	qsort(out, n, sizeof(*out), netlock_uid_cmp);
	for (size_t i = 0; i < n; i++)
		if (k == 0 || out[i] != out[k - 1])
			out[k++] = out[i];
	return k;
}

struct nftnl_set *netlock_set_build(const struct netlock_spec *s)
{
	uid_t uids[NETLOCK_MAX_AGENTS + 1];
	size_t n = netlock_set_uids(s, uids);
	struct nftnl_set *set = nftnl_set_alloc();
	struct nftnl_udata_buf *ud;

	if (!set)
		return NULL;
	nftnl_set_set_str(set, NFTNL_SET_TABLE, netlock_name);
	nftnl_set_set_str(set, NFTNL_SET_NAME, NETLOCK_SET);
	nftnl_set_set_u32(set, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(set, NFTNL_SET_KEY_TYPE, NETLOCK_SET_KEY_TYPE);
	nftnl_set_set_u32(set, NFTNL_SET_KEY_LEN, sizeof(uint32_t));
	nftnl_set_set_u32(set, NFTNL_SET_ID, NETLOCK_SET_ID);
	nftnl_set_set_u32(set, NFTNL_SET_FLAGS, 0);
	/*
	 * For nft(8) alone, as nft sends it: the keys are in host order (BYTEORDER_HOST_ENDIAN
	 * of nftables' datatype.h), so `nft list` shows uids, not byte-swapped numbers.
	 */
	ud = nftnl_udata_buf_alloc(16);
	if (!ud || !nftnl_udata_put_u32(ud, NFTNL_UDATA_SET_KEYBYTEORDER, 1)) {
		nftnl_udata_buf_free(ud);
		nftnl_set_free(set);
		return NULL;
	}
	nftnl_set_set_data(set, NFTNL_SET_USERDATA, nftnl_udata_buf_data(ud),
		nftnl_udata_buf_len(ud));
	nftnl_udata_buf_free(ud);
	for (size_t i = 0; i < n; i++) {
		struct nftnl_set_elem *e = nftnl_set_elem_alloc();
		uint32_t key = uids[i]; /* host order, like meta skuid */

		if (!e) {
			nftnl_set_free(set);
			return NULL;
		}
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &key, sizeof(key));
		nftnl_set_elem_add(set, e);
	}
	return set;
}

/* ---- the registry ---- */

#define NETLOCK_STR_(x) #x
#define NETLOCK_STR(x) NETLOCK_STR_(x)

int netlock_agent_uid(uid_t uid)
{
	return uid >= AGENT_UID_MIN && uid <= AGENT_UID_MAX;
}

struct netlock_range netlock_others_range(const struct netlock_spec *s, uid_t uid)
{
	struct netlock_range r = {0, 0};
	int seen = 0;

	/*
	 * Two entries of one uid (an account deleted by hand whose uid a new agent got): the
	 * kernel cannot tell their sockets apart, so the uid gets only what both allow.
	 */
	for (size_t i = 0; i < s->n_others && i < NETLOCK_MAX_AGENTS; i++) {
		const struct netlock_range *p = &s->others_ports[i];

		if (s->others[i] != uid)
			continue;
		if (!seen) {
			r = *p;
			seen = 1;
			continue;
		}
		r.lo = r.lo > p->lo ? r.lo : p->lo;
		r.hi = r.hi < p->hi ? r.hi : p->hi;
		if (!p->lo || r.lo > r.hi)
			r = (struct netlock_range){0, 0};
	}
	return r;
}

static void netlock_note(char *out, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void netlock_note(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	size_t len;

	if (!out || n == 0)
		return;
	len = strlen(out);
	if (len + 3 >= n)
		return;
	if (len)
		len += (size_t)snprintf(out + len, n - len, "; ");
	va_start(ap, fmt);
	vsnprintf(out + len, n - len, fmt, ap);
	va_end(ap);
}

void netlock_entry_parse(char *data, struct netlock_entry *ret)
{
	char *line, *next;
	unsigned ln = 0;
	int bad = 0;

	memset(ret, 0, sizeof(*ret));
	ret->uid = (uid_t)-1;
	for (line = data; line && *line; line = next) {
		char err[128];
		unsigned long v;
		char *end;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		ln++;
		if (strncmp(line, "uid ", 4) == 0 && ret->uid == (uid_t)-1) {
			errno = 0;
			v = strtoul(line + 4, &end, 10);
			if (errno == 0 && end != line + 4 && *end == '\0' && v < (uid_t)-1)
				ret->uid = (uid_t)v;
		} else if (strncmp(line, "ports ", 6) == 0 && !bad) {
			/*
			 * Opens local services to the agent: only a range its own ocsb.conf could
			 * hold, once; anything else gives it none (fail closed).
			 */
			if (ret->ports.lo) {
				snprintf(ret->why, sizeof(ret->why), "line %u: a second ports line",
					ln);
				bad = 1;
			} else if (config_agent_ports(line + 6, &ret->ports.lo, &ret->ports.hi, err,
					   sizeof(err)) < 0) {
				snprintf(ret->why, sizeof(ret->why), "line %u: 'ports %.32s': %s",
					ln, line + 6, err);
				bad = 1;
			}
			if (bad)
				ret->ports = (struct netlock_range){0, 0};
		}
	}
}

static void netlock_entry_read(const char *dir, const char *name, struct netlock_entry *ret)
{
	char path[4096], *data = NULL;
	int r;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		r = -ENAMETOOLONG;
	else
		r = fo_read(path, 4096, &data, NULL);
	if (r < 0) {
		memset(ret, 0, sizeof(*ret));
		ret->uid = (uid_t)-1;
		snprintf(ret->why, sizeof(ret->why), "%s", strerror(-r));
		return;
	}
	netlock_entry_parse(data, ret);
	free(data);
}

/*
 * Whose uid it is when an agent must not have it: a system account (squid's own egress
 * forced through itself would cut every agent off), the proxy's, or ocsb-inject's (its
 * upstream connections would be blocked). NULL for an agent's.
 */
static const char *netlock_not_agent(uid_t uid, uid_t proxy, uid_t inject)
{
	if (proxy && uid == proxy)
		return "the proxy's";
	if (inject && uid == inject)
		return NETLOCK_INJECT_USER "'s";
	if (!netlock_agent_uid(uid))
		return "outside the agents' range " NETLOCK_STR(AGENT_UID_MIN) "-" NETLOCK_STR(
			AGENT_UID_MAX);
	return NULL;
}

int netlock_registry(
	struct netlock_spec *s, const char *varlib, const char *skip, char *stale, size_t n)
{
	char dir[4096];
	struct user_info iu;
	struct dirent *e;
	uid_t proxy = netlock_proxy_uid(), inject = 0;
	DIR *d;
	int rc = 0;

	if (stale && n)
		stale[0] = '\0';
	s->n_others = 0;
	if (path_join(dir, sizeof(dir), varlib, "ocsb/agents") < 0)
		return -ENAMETOOLONG;
	if (user_lookup(NETLOCK_INJECT_USER, &iu) == 0)
		inject = iu.uid;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d)) != NULL) {
		struct netlock_entry rec;
		struct user_info u;
		const char *whose;
		uid_t uid;

		if (e->d_name[0] == '.' || (skip && strcmp(e->d_name, skip) == 0))
			continue;
		netlock_entry_read(dir, e->d_name, &rec);
		/* The name is what ocsb registered; its account's uid is what sockets carry. */
		if (user_lookup(e->d_name, &u) == 0) {
			uid = u.uid;
			whose = netlock_not_agent(uid, proxy, inject);
			if (whose) {
				netlock_note(stale, n, "%s has uid %u, %s: left out", e->d_name,
					(unsigned)uid, whose);
				continue;
			}
			if (rec.why[0])
				netlock_note(stale, n,
					"%s: %s: no agent-ports range for %s until sudo "
					"ocsb-provision --config <its configuration> records it "
					"again",
					e->d_name, rec.why, e->d_name);
		} else {
			/*
			 * An account deleted by hand may leave processes running under its uid:
			 * the uid recorded at provisioning stays locked until a purge forgets
			 * the entry. Without one, there is nothing to lock. Nothing is opened
			 * for what is left of a deleted account: no range.
			 */
			uid = rec.uid;
			rec.ports = (struct netlock_range){0, 0};
			if (uid == (uid_t)-1 || netlock_not_agent(uid, proxy, inject)) {
				netlock_note(stale, n, "no account for %s: left out", e->d_name);
				continue;
			}
			netlock_note(stale, n,
				"no account for %s: its recorded uid %u stays in the set until "
				"ocsb-provision --remove --purge forgets it",
				e->d_name, (unsigned)uid);
		}
		if (s->n_others == NETLOCK_MAX_AGENTS) {
			rc = -E2BIG;
			break;
		}
		s->others_ports[s->n_others] = rec.ports;
		s->others[s->n_others++] = uid;
	}
	closedir(d);
	return rc;
}

/* ---- ocsb-inject's side from this host ---- */

int netlock_inject_host(struct netlock_spec *s, const char *etc)
{
	char path[4096], line[512];
	struct user_info u;
	FILE *f;

	s->inject_uid = user_lookup(NETLOCK_INJECT_USER, &u) == 0 ? u.uid : 0;
	s->n_ns = 0;
	if (path_join(path, sizeof(path), etc, "resolv.conf") < 0)
		return -ENAMETOOLONG;
	/* Root's file (or systemd-resolved's link to its own): read as the resolver does. */
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (s->n_ns < NETLOCK_MAX_NS && fgets(line, sizeof(line), f)) {
		struct netlock_addr *a = &s->ns[s->n_ns];
		char word[16], addr[128];

		/* "nameserver ADDR", ADDR possibly with an IPv6 scope ("%eth0": any link). */
		if (sscanf(line, " %15s %127s", word, addr) != 2 || strcmp(word, "nameserver") != 0)
			continue;
		addr[strcspn(addr, "%")] = '\0';
		memset(a, 0, sizeof(*a));
		if (inet_pton(AF_INET, addr, a->a) == 1)
			a->family = AF_INET;
		else if (inet_pton(AF_INET6, addr, a->a) == 1)
			a->family = AF_INET6;
		else
			continue;
		s->n_ns++;
	}
	fclose(f);
	return 0;
}
