/* SPDX-License-Identifier: MIT */
#ifndef OCSB_EGRESS_H
#define OCSB_EGRESS_H

#include <regex.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "paths.h"
#include "util.h"

/*
 * Egress rules: the seed's language, one statement a line (conf.h syntax).
 *
 *   policy allowlist|blocklist        default blocklist
 *   egress on|off                     off: no proxy access at all
 *   dns allow|deny                    the agent's direct DNS (netlock), default deny
 *   allow HOST...                     host, .domain (and subdomains) or IP; beats block
 *   allow-regex REGEX...              POSIX ERE on the host name, case-insensitive
 *   block HOST...
 *   block-regex REGEX...
 *   connect HOST:PORT...              tunnels to other ports ([v6]:port for IPv6)
 *   expect-pass URL [curl options]    self-checks for `ocsb egress verify`
 *   expect-block URL [curl options]
 *   learn FROM UNTIL                  learn mode until UNTIL (UTC, 2026-12-06T21:00:00Z); FROM
 *                                     starts the log window `learn stop` reads. Under the
 *                                     allowlist, what the policy would refuse passes and
 *                                     is logged as step `learn`
 *   proposal                          first statement of a file that is not in force: it is
 *                                     parsed and checked, its rules are dropped
 *
 * Evaluation (egress_decide, and the squid configuration in the same order):
 * destinations that are never legitimate (loopback, unspecified, link-local with the
 * cloud metadata address, multicast, localhost names) -> connect -> ports other than
 * 80/443 -> allow -> block -> dotless names -> private networks unless allowed or
 * connected by name -> the policy (blocklist: allow, allowlist: deny; allowlist while
 * learning: allow, as step "learn").
 *
 * A zeroed struct egress holds the defaults: blocklist, egress on, dns deny, no rules.
 */

enum egress_policy { EGRESS_BLOCKLIST, EGRESS_ALLOWLIST };

enum egress_kind {
	EGRESS_ALLOW = 1,
	EGRESS_ALLOW_REGEX,
	EGRESS_BLOCK,
	EGRESS_BLOCK_REGEX,
	EGRESS_CONNECT,
	EGRESS_EXPECT_PASS,
	EGRESS_EXPECT_BLOCK,
};

/*
 * One value of one statement: `allow a b` gives two rules with the same file and line
 * (the squid configuration gives each statement one ACL). Host values are stored
 * lower case; IP literals in canonical form, IPv6 without brackets, v4-mapped IPv6 as IPv4.
 */
struct egress_rule {
	int kind; /* enum egress_kind */
	char *value; /* owned: host, .domain, regex, connect host or URL */
	unsigned port; /* connect: 1..65535 */
	const char *file; /* borrowed from egress.files */
	unsigned line;
	struct strv curl_args; /* expect-*: the words after the URL (checked, see below) */
	regex_t re; /* *-regex: REG_EXTENDED | REG_ICASE | REG_NOSUB; moves with the rule */
	int has_re;
};

struct egress {
	struct egress_rule *rules; /* owned */
	size_t n;
	size_t cap;
	enum egress_policy policy;
	int off; /* `egress off` */
	int dns_allow; /* `dns allow` */
	struct strv files; /* every file read, in order; rules point into it */
	/* `learn FROM UNTIL` (0 when none): the window, as written (a past one stays here). */
	time_t learn_from, learn_until;
	const char *learn_file; /* borrowed from files: where it was set */
	/*
	 * Learning now: policy allowlist and the load's clock before UNTIL (FROM is not
	 * waited for: `learn start` writes the time it starts) (set by the
	 * loaders, egress_learn_update; the supervisor clears it when the window ends).
	 */
	int learning;
	struct strv proposals; /* the files that say `proposal`: read, checked, not in force */
};

/* Set e->learning for the time `now`; 1 when learning. */
int egress_learn_update(struct egress *e, time_t now);
/* "2026-12-06T21:00:00Z" for t (UTC), as `learn` takes it; out of at least 24 bytes. */
void egress_time_utc(time_t t, char *out, size_t n);

/*
 * Parse one buffer and add its rules; `file` names it in errors ("file:line: ...").
 * Settings given here override earlier ones; a setting twice in one buffer is an
 * error. On error nothing of this buffer is kept and -1 is returned.
 *
 * expect-* options are limited to curl options that neither read nor write files nor
 * change the proxy: -k -I -L -4 -6 -f -s -S -g, --insecure --head --location --ipv4
 * --ipv6 --fail --silent --show-error --globoff --compressed --http1.0 --http1.1
 * --http2, and with a value -H -X -A -m, --header --request --user-agent --max-time
 * --connect-timeout --data-raw (a header value may not start with '@').
 */
int egress_parse_buf(
	struct egress *e, const char *buf, size_t len, const char *file, char *err, size_t errlen);

/*
 * Read <etc>/ocsb/egress.conf, then <etc>/ocsb/egress.d/NAME.conf in byte order, then
 * <owner_home>/.config/ocsb/egress.conf when present (owner_home NULL: none). Files
 * under /etc must belong to root, the owner's to owner_uid (or root); none may be
 * group/world-writable, symbolic links are refused. `e` need not be initialized and is
 * overwritten, a previous load is not freed (load into a new struct to keep the old rules
 * when the new ones fail): on success it holds the rules of all files; on failure it is
 * empty and err says "file:line: ..." or "file: ...".
 * Returns 0, -ENOENT when <etc>/ocsb/egress.conf is missing (nothing else is read),
 * or another negative errno.
 */
int egress_load(struct egress *e, const struct paths *p, const char *owner_home, uid_t owner_uid,
	char *err, size_t errlen);
/*
 * The same, with the files under <etc> allowed to belong to sys_uid as well as root:
 * unit tests run unprivileged and cannot create root-owned files. Programs use
 * egress_load.
 */
int egress_load_as(struct egress *e, const struct paths *p, uid_t sys_uid, const char *owner_home,
	uid_t owner_uid, char *err, size_t errlen);

/* The owner's layer, relative to the owner's home. */
#define EGRESS_OWNER_FILE ".config/ocsb/egress.conf"
/*
 * egress_load for a process that cannot read the owner's home (the supervisor, running as
 * the account ocsb-agentd, issue 26): the files under <etc> read as egress_load reads
 * them, then the owner's layer as text, read by a child running as the owner
 * (`ocsb-agentd --owner-egress`, WP_KIND_OWNER_EGRESS: egress_owner_read). owner_text
 * NULL: no layer (the file does not exist); len 0 with a text: an empty one. Parsed by
 * the same code under the file's own name, <owner_home>/.config/ocsb/egress.conf, so its
 * errors ("file:line: ...") and squid's notes read as with egress_load. The same returns.
 */
int egress_load_text(struct egress *e, const struct paths *p, const char *owner_home,
	const char *owner_text, size_t len, char *err, size_t errlen);
/* The same with sys_uid as egress_load_as (unit tests). */
int egress_load_text_as(struct egress *e, const struct paths *p, uid_t sys_uid,
	const char *owner_home, const char *owner_text, size_t len, char *err, size_t errlen);
/*
 * The owner's side (run as the owner): the content of <owner_home>/.config/ocsb/egress.conf
 * with the checks egress_load makes (a regular file of owner_uid or root, its directory
 * too, neither group/world-writable, no link, at most 1 MiB). 0 with *ret_data (caller
 * frees), -ENOENT (no file: no layer), or another negative errno with err set.
 */
int egress_owner_read(const char *owner_home, uid_t owner_uid, char **ret_data, size_t *ret_len,
	char *err, size_t errlen);

struct egress_verdict {
	int allow;
	const struct egress_rule *rule; /* borrowed; NULL when a built-in step decided */
	/*
	 * "connect rule", "port not 80/443", "allow", "block", "dotless name",
	 * "private network", "loopback/link-local", "policy allowlist", "default allow",
	 * "learn mode", "egress off", "bad host name"
	 */
	const char *why;
	/* The same step as squid logs it (%{ocsb_step}note): "connect-rule", ... */
	const char *tag;
};

/*
 * What the rules say about a request to host:port, without DNS: `host` as requested
 * (name, IPv4 literal, IPv6 literal with or without brackets). Names that resolve to a
 * private or loopback address are refused by squid after resolution, not here.
 */
void egress_decide(
	const struct egress *e, const char *host, unsigned port, struct egress_verdict *ret);

struct egress_squid {
	unsigned port; /* http_port on 127.0.0.1 */
	const char *state_dir; /* borrowed: pid file and logs, writable by `user` */
	const char *user; /* borrowed: cache_effective_user, e.g. "proxy" */
};

/*
 * Append a complete squid.conf to `out`. Every request squid logs carries the deciding
 * step and rule as its last two fields: "%{ocsb_step}note %{ocsb_rule}note", e.g.
 * "block /etc/ocsb/egress.conf:12" or "private-network builtin".
 * 0, -EINVAL for a bad port, state_dir or user, -ENOMEM.
 */
int egress_render_squid(const struct egress *e, const struct egress_squid *sq, struct buf *out);

/* "allow", "allow-regex", ... (the keyword); "?" for an unknown kind. */
const char *egress_kind_name(int kind);

void egress_free(struct egress *e);

#endif
