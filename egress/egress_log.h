/* SPDX-License-Identifier: MIT */
#ifndef OCSB_EGRESS_LOG_H
#define OCSB_EGRESS_LOG_H

#include <stddef.h>
#include <time.h>

#include "egress.h"
#include "util.h"

/*
 * The proxy's access log, read back (issue 29): one line in our logformat
 * (egress_squid.c), what learn mode saw, what was refused. Pure: the callers read the file
 * (root, `ocsb egress ...`) and hand over its text; nothing here touches the machine
 * except egress_psl_load, which reads the public suffix list.
 */

struct egress_logrec {
	double ts; /* seconds since the epoch, as squid wrote them */
	char action[64]; /* "TCP_DENIED/403" */
	char method[32];
	char host[256]; /* as requested: a name, an IPv4 or an IPv6 literal (no brackets) */
	unsigned port;
	char step[64]; /* the deciding step ("learn", "policy-allowlist"); "" on older lines */
	char rule[1100]; /* "/etc/ocsb/egress.conf:12", "builtin"; "" on older lines */
	int denied;
};

/* One line (without its newline): 0, or -1 for a line that is not ours. */
int egress_log_parse(const char *line, struct egress_logrec *r);
/*
 * One line made readable for `ocsb egress logs`: local time, ALLOW or DENY, method,
 * host:port, squid's action and the step and rule that decided it (for an older line
 * without them, what the rules e say now). 0, or -1 for a line that is not ours.
 */
int egress_log_line(const struct egress *e, const char *line, char *out, size_t n);

/*
 * A host that may go into a rule as it is: a name of letters, digits and '-' in dotted
 * labels of 1 to 63 characters (at most 253 in all), or an IP literal. 1 or 0.
 */
int egress_host_plain(const char *host);

/* What the log says about one destination (host and port). */
struct egress_seen {
	char *host; /* owned */
	unsigned port;
	unsigned long count;
	double first, last;
	unsigned methods; /* EGRESS_M_* bits */
	char step[32]; /* of the latest request (steps are short: "port-not-80-443") */
	/* Its rule, cut to 240 bytes: a file of /etc/ocsb and a line, or "builtin". */
	char rule[240];
};

#define EGRESS_M_CONNECT 0x1
#define EGRESS_M_GET 0x2
#define EGRESS_M_POST 0x4
#define EGRESS_M_OTHER 0x8

/*
 * Destinations keyed by host and port, at most EGRESS_TALLY_MAX of them (a table of
 * 20,000 is read by nobody; the proposal takes the 2,000 most requested): about 16 MB.
 */
#define EGRESS_TALLY_MAX 20000
struct egress_tally {
	struct egress_seen *v; /* owned; open addressing, cap slots, n used */
	size_t n, cap;
	unsigned long dropped; /* requests past EGRESS_TALLY_MAX destinations */
};

/* Count one request. 0, or -ENOMEM. */
int egress_tally_add(struct egress_tally *t, const struct egress_logrec *r);
/* The used slots, packed and sorted (by count descending, then host, then port). */
void egress_tally_sort(struct egress_tally *t);
void egress_tally_free(struct egress_tally *t);

/*
 * Feed a whole log text: learn = 1 counts the requests logged as step `learn` within
 * [from, until] (the learn window), learn = 0 the refused ones from `from` on (until 0: no
 * end). Lines that are not ours are skipped. 0, or -ENOMEM.
 */
int egress_tally_text(
	struct egress_tally *t, const char *text, size_t len, int learn, double from, double until);

/* The public suffix list (publicsuffix's file), for grouping hosts by registrable domain. */
struct egress_psl {
	struct strv rules; /* sorted: "com", "*.ck", "!www.ck" */
};
#define EGRESS_PSL_FILE "/usr/share/publicsuffix/public_suffix_list.dat"
/* Parse the list's text (its format: one rule a line, "//" comments). 0, or -ENOMEM. */
int egress_psl_parse(struct egress_psl *psl, const char *text, size_t len);
/* Read and parse path: 0, -ENOENT (no list: group by the last two labels), -errno. */
int egress_psl_load(struct egress_psl *psl, const char *path);
void egress_psl_free(struct egress_psl *psl);
/*
 * The registrable domain of host ("example.co.uk" for "a.b.example.co.uk") into out: by
 * the list when it has rules, else the last two labels; an IP literal is its own.
 */
void egress_registrable(const struct egress_psl *psl, const char *host, char *out, size_t n);

/* A proposal's allow lines at most: beyond, the file would outgrow what the loader reads. */
#define EGRESS_PROPOSAL_MAX 2000
/*
 * learn stop's proposal for a tally of learned requests: a header saying it is not in force,
 * `proposal`, then the hosts grouped by registrable domain, one `allow HOST` line each with
 * its counts, methods, ports and first use. Hosts that are not plain are left out and
 * counted in a comment, and so are destinations past the EGRESS_PROPOSAL_MAX most
 * requested. Returns how many allow lines it wrote (0: nothing learned), or
 * -ENOMEM.
 */
int egress_proposal_render(struct egress_tally *t, const struct egress_psl *psl, time_t from,
	time_t until, const char *machine, struct buf *out);

/*
 * Is text a proposal and nothing else (what root checks before writing what the log's
 * reader made): it parses, its first statement is `proposal` (so none of its rules is in
 * force), it holds no setting. 0, or -1 with err ("name:line: ..." or why not).
 */
int egress_proposal_check(const char *text, size_t len, const char *name, char *err, size_t errlen);

/*
 * `ocsb egress denied`: a table of the refused destinations, most refused first, each with
 * the step and rule that refused it and the line that would allow it (or why none can); e
 * says what the rules in force decide now ("allowed now" after `egress allow`).
 * Returns the number of rows.
 */
size_t egress_denied_render(struct egress_tally *t, const struct egress *e, struct buf *out);

#endif
