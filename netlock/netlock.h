/* SPDX-License-Identifier: MIT */
#ifndef OCSB_NETLOCK_H
#define OCSB_NETLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

/*
 * The netlock: an nftables `inet` table that forces every socket owned by an agent's uid
 * through the local proxy (design invariant 2). One table serves every agent of the
 * machine: the set `agents` holds the uids of the agents registry (<varlib>/ocsb/agents,
 * written by ocsb-provision). Built with libnftnl and installed in one atomic batch; root
 * and every other uid are unaffected. Everything is per network namespace and needs
 * CAP_NET_ADMIN over it.
 *
 *   table inet ocsb {
 *     set agents { type uid; elements = { <uid>, <others>... } }
 *     chain output { type filter hook output priority 0; policy accept;
 *       meta skuid @agents jump agent
 *       ip daddr 127.0.0.1 tcp dport 18400-18415 reject with tcp reset   (always)
 *       meta skuid <inject_uid> jump inject                   (inject_uid != 0)
 *       meta skuid <proxy_uid> ct direction reply accept                     (proxy_uid != 0)
 *       meta skuid <proxy_uid> fib daddr type local meta l4proto tcp reject with tcp reset }
 *     chain agent {
 *       ct direction reply ct state established,related fib daddr type local accept
 *       ip daddr 127.0.0.1 tcp dport <proxy_port> accept        (proxy_port != 0)
 *       meta skuid <uid> ip daddr 127.0.0.1 tcp dport <inject_port> accept  (each route)
 *       meta skuid <u> fib daddr type local tcp dport <a>-<b> reject with tcp reset
 *                                           (each range over the route ports: the overlap)
 *       meta skuid <u> fib daddr type local tcp dport <lo>-<hi> accept
 *                                           (each agent u with a range, by ascending uid)
 *       fib daddr type local meta l4proto tcp reject with tcp reset
 *       fib daddr type local reject with icmpx admin-prohibited
 *       udp dport 53 accept; tcp dport 53 accept                 (dns_allow)
 *       meta l4proto tcp reject with tcp reset
 *       reject with icmpx admin-prohibited }
 *     chain inject {                                             (inject_uid != 0)
 *       ct direction reply ip saddr 127.0.0.1 tcp sport 18400-18415 accept
 *       ip daddr <ns> udp dport 53 accept; ip daddr <ns> tcp dport 53 accept
 *                                           (each nameserver, ip6 daddr for IPv6)
 *       fib daddr type local meta l4proto tcp reject with tcp reset
 *       fib daddr type local reject with icmpx admin-prohibited
 *       tcp dport <uport> accept                   (each route's upstream port, once)
 *       udp dport 53 accept; tcp dport 53 accept
 *       meta l4proto tcp reject with tcp reset
 *       reject with icmpx admin-prohibited } }
 *
 * A route of ocsb-inject is ocsb-agentd's agent's alone (uid, the agent of
 * /etc/ocsb/ocsb.conf), and only while it is a route: every other uid, the other agents
 * included, gets a reset on the whole route range 18400-18415, routed or not, at all times
 * (agentd listens on every route port from its start: a connection let through before the
 * route exists would wait in the backlog and be served with the key). An agent-ports range
 * is its agent's alone too: the agent of the configuration that applies the table has its
 * own (ports_lo-ports_hi), every other agent the one its registry entry records
 * (others_ports), so no run opens one agent's local services to another. Replies of the
 * agent's own servers leave only towards local addresses: a server it runs on 0.0.0.0
 * answers the owner, not a host outside. ocsb-inject's account reaches its routes'
 * upstream ports and DNS on non-local addresses and its nameservers, nothing else local;
 * the sockets it accepts from the agent are its own (accept gives them its uid), so their
 * replies are let out by their direction from the route ports.
 */
#define NETLOCK_TABLE "ocsb"
/*
 * The guard: the same chains and rules in a second table that belongs to one netlink
 * socket of ocsb-agentd (NFT_TABLE_F_OWNER). Nobody else can change or delete it, and
 * `nft flush ruleset` leaves it alone, so the agent stays locked while agentd restores
 * the plain table. It vanishes with agentd's socket; the plain table then remains.
 */
#define NETLOCK_GUARD_TABLE "ocsb_guard"
#define NETLOCK_MAX_INJECT 16 /* INJ_MAX_ROUTES of inject/inject.h */
#define NETLOCK_MAX_NS 3 /* glibc's MAXNS: its resolver asks the first three nameservers */
#define NETLOCK_SET "agents"
#define NETLOCK_MAX_AGENTS 64

/* A TCP port range on local addresses: lo-hi, 0/0 = none. */
struct netlock_range {
	unsigned lo, hi;
};

/* An address: family AF_INET (4 bytes of a) or AF_INET6 (16), network order. */
struct netlock_addr {
	int family;
	unsigned char a[16];
};

struct netlock_spec {
	uid_t uid; /* ocsb-agentd's agent (the routes' only user); never 0 */
	/*
	 * The machine's other agents, in the set with uid; repeats and uid itself are fine.
	 * others_ports[i] is others[i]'s agent-ports range (0/0: none). uid's range is
	 * ports_lo-ports_hi whatever others_ports says for it; a uid named twice gets the
	 * ports both of its ranges allow.
	 */
	uid_t others[NETLOCK_MAX_AGENTS];
	struct netlock_range others_ports[NETLOCK_MAX_AGENTS];
	size_t n_others;
	unsigned proxy_port; /* TCP port of the proxy on 127.0.0.1; 0 = no egress at all */
	unsigned ports_lo, ports_hi; /* uid's TCP port range on local addresses; 0/0 = none */
	int dns_allow; /* 1: udp/tcp 53 to non-local addresses allowed */
	uid_t proxy_uid; /* the proxy's own user: no new TCP to local addresses; 0 = no rule */
	/* ocsb-inject's route listeners on 127.0.0.1, each one port exactly (issue 17). */
	unsigned inject_ports[NETLOCK_MAX_INJECT];
	size_t n_inject;
	/*
	 * ocsb-inject's account (issue 25): a chain of its own; 0 = no such account, no
	 * chain. Never uid, an agent's or the proxy's. inject_uports: the routes' upstream
	 * TCP ports (repeats are fine); ns: the nameservers of resolv.conf.
	 */
	uid_t inject_uid;
	unsigned inject_uports[NETLOCK_MAX_INJECT];
	size_t n_uports;
	struct netlock_addr ns[NETLOCK_MAX_NS];
	size_t n_ns;
};

/* The uid of the proxy's user ("proxy", see proxy.h), or 0 when there is none. */
uid_t netlock_proxy_uid(void);

/*
 * The table as nft(8) text: `nft -f` of it installs exactly what netlock_apply
 * does. 0, or -EINVAL for an invalid spec, -ENOMEM.
 */
int netlock_render_nft(const struct netlock_spec *s, struct buf *out);

/*
 * The rules as libnftnl prints them, in the shape of `nft --debug=netlink`:
 * per rule a "inet ocsb <chain>" line, "  [ expr ]" lines and an empty line.
 * The unit tests compare it with what nft itself would send.
 */
int netlock_render_expr(const struct netlock_spec *s, struct buf *out);

/*
 * Expression text ("  [ expr ]" lines) with every port range in one form, in place. nft
 * 1.0.6 (Debian 12) sends `dport lo-hi` as two comparisons, "cmp gte reg N lo" then "cmp lte
 * reg N hi"; nft 1.1 (Debian 13) as one "range eq reg N lo hi", and a range of one port
 * as "cmp eq reg N lo". All compare the register's bytes with memcmp: the same match. Rules
 * are compared in nft 1.1's form, so a table that nft of either version installed verifies,
 * and the unit tests' oracle holds with both. A lookup's flags "0x0" (the kernel reports
 * them, nft sends none) are dropped: no flags either way.
 */
void netlock_exprs_canon(char *text);

/*
 * Install or replace the table in one atomic batch (NEWTABLE, DELTABLE,
 * NEWTABLE, chains, rules), every message acknowledged. 0, or -1 with a
 * one-line reason in err.
 */
int netlock_apply(const struct netlock_spec *s, char *err, size_t errlen);

/*
 * Compare the live table with the spec: table flags, chains (type, hook,
 * priority, policy) and every rule's expressions, handles ignored.
 * 0 equal; 1 missing or different (err says what); -1 could not check.
 */
int netlock_verify(const struct netlock_spec *s, char *err, size_t errlen);

struct mnl_socket;
/*
 * The same two through `nl`, a bound NETLINK_NETFILTER socket the caller keeps open
 * (ocsb-agentd's restore: closing a netfilter socket makes the kernel wait for the cleanup
 * of earlier transactions, an RCU grace period, tens of ms on a loaded machine). Whatever
 * an earlier, abandoned exchange left queued on it is discarded first.
 */
int netlock_apply_sock(
	const struct netlock_spec *s, struct mnl_socket *nl, char *err, size_t errlen);
int netlock_verify_sock(
	const struct netlock_spec *s, struct mnl_socket *nl, char *err, size_t errlen);
/* Install the guard through `owner`, a bound NETLINK_NETFILTER socket the caller keeps open. */
int netlock_guard_apply(
	const struct netlock_spec *s, struct mnl_socket *owner, char *err, size_t errlen);
/* Like netlock_verify, for the guard (its owner flag included). */
int netlock_guard_verify(const struct netlock_spec *s, char *err, size_t errlen);

/*
 * The table as the kernel lists it, recorded by the batch that installed it
 * (netlock_snap.c): ocsb-warden keeps it and compares the kernel's listing with it,
 * byte for byte, instead of reading the rules (netlock_verify).
 */
struct netlock_snap {
	uint32_t gen; /* the ruleset generation of the record; 0: none */
	struct buf data; /* the kernel's messages for the table, as netlock_snap.c keeps them */
};
/*
 * netlock_apply_sock, then the record, taken in the generation right after the batch's
 * (no other batch in between; else up to three tries). nl may be NULL (a socket of its
 * own). 0, or -1 with a one-line reason in err; snap is kept as it was on failure.
 */
int netlock_apply_snap(const struct netlock_spec *s, struct mnl_socket *nl,
	struct netlock_snap *snap, char *err, size_t errlen);
/* The same for the guard, through its owner socket. */
int netlock_guard_apply_snap(const struct netlock_spec *s, struct mnl_socket *owner,
	struct netlock_snap *snap, char *err, size_t errlen);
/*
 * The table now against the record: 0 the same (the generation unchanged, or every byte
 * equal), 1 missing or altered (err says what differs first), -1 could not read it.
 */
int netlock_snap_check(
	struct mnl_socket *nl, const struct netlock_snap *snap, char *err, size_t errlen);
void netlock_snap_free(struct netlock_snap *snap);

/*
 * An agent's uid: useradd's range for users (login.defs UID_MIN-UID_MAX). ocsb-provision
 * makes or adopts no agent outside it; below it, and nobody (65534), are system accounts.
 */
#define AGENT_UID_MIN 1000
#define AGENT_UID_MAX 60000
#define NETLOCK_INJECT_USER "ocsb-inject" /* INJ_USER of inject/inject.h */
/* 1 if uid is in the agents' range. */
int netlock_agent_uid(uid_t uid);
/*
 * The agent-ports range s gives `uid` among s->others: the ports every entry naming it
 * allows (0/0: none, or no entry). s->ports_lo-ports_hi is s->uid's, not looked at here.
 */
struct netlock_range netlock_others_range(const struct netlock_spec *s, uid_t uid);

/*
 * The agents registry into s->others: the account of each <varlib>/ocsb/agents/<name>, but
 * `skip` (an agent being removed; NULL: none). A uid outside the agents' range, the
 * proxy's or ocsb-inject's is left out. A name without an account (deleted by hand) keeps
 * the uid its entry records ("uid N", if an agent's), since processes may still run under
 * it; without one it is left out. Each such entry is told in `stale`, "; "-separated ("" if
 * none). s->others_ports gets the agent-ports range the entry records ("ports LO-HI");
 * none without that line, for an account deleted by hand, and for a line that is not a
 * range agent-ports allows (told in `stale` too). 0, or -errno (the directory unreadable; a
 * missing one is an empty registry).
 */
int netlock_registry(
	struct netlock_spec *s, const char *varlib, const char *skip, char *stale, size_t n);

/*
 * ocsb-agentd's route ports, as its guard holds them (the guard is agentd's alone and
 * exists while it runs): s->uid becomes the routes' uid (the former one joins s->others
 * with its range; the new one's range is what s->others gives it) and s->inject_ports
 * their ports. When the guard has ocsb-inject's chain, s->inject_uid, inject_uports and
 * ns become the guard's (agentd's view of its routes and of resolv.conf), so a run makes
 * the table agentd made. The number of routes (0: no guard, or none), or -errno.
 */
int netlock_guard_routes(struct netlock_spec *s);

/*
 * ocsb-inject's side of the table from this host: s->inject_uid (its account's uid, 0
 * without one) and s->ns (the nameserver lines of <etc>/resolv.conf, the first NETLOCK_MAX_NS;
 * none without the file). 0, or -errno for a resolv.conf that cannot be read (then no
 * nameserver, the uid set all the same).
 */
int netlock_inject_host(struct netlock_spec *s, const char *etc);

/*
 * The uids in the live table's set, ascending: how many (up to max stored), or -ENOENT
 * (no table or no set), -errno.
 */
int netlock_live_agents(uid_t *uids, size_t max);

/* Delete the table; a missing table is success. 0 or -1 with err. */
int netlock_remove(char *err, size_t errlen);

/*
 * Internal, for tests: the monotonic clock in ms, and waiting for the kernel's answer on nl
 * until deadline (that clock). Answers already queued are reported ready even after the
 * deadline (sending can take longer than the whole budget: the kernel loads nf_tables
 * modules in the sender's context). 0 ready, -ETIMEDOUT, or -errno.
 */
struct mnl_socket;
long netlock_now_ms(void);
int netlock_wait(struct mnl_socket *nl, long deadline);

/* 1 the table exists, 0 it does not, or a negative errno (-EPERM: no CAP_NET_ADMIN). */
int netlock_exists(void);

#endif
