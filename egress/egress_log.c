/* SPDX-License-Identifier: MIT */
/*
 * The proxy's access log read back: learn mode's proposal and the refused destinations
 * (egress_log.h). Every line is the agent's doing (host names, methods): nothing from it
 * reaches a rule unless it is a plain host, and nothing reaches a terminal unescaped.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress_log.h"
#include "fileops.h"

int egress_log_parse(const char *line, struct egress_logrec *r)
{
	long elapsed, bytes;
	char client[64], url[2048], user[64], hier[300], type[128];
	const char *h, *end;
	size_t hl;
	int f;

	memset(r, 0, sizeof(*r));
	r->port = 80;
	/*
	 * squid's native fields, then (our logformat) the deciding step and rule as squid
	 * itself saw them, after name resolution: "block /etc/ocsb/egress.conf:3".
	 */
	f = sscanf(line, "%lf %ld %63s %63s %ld %31s %2047s %63s %299s %127s %63s %1099s", &r->ts,
		&elapsed, client, r->action, &bytes, r->method, url, user, hier, type, r->step,
		r->rule);
	/* A time squid could write (NaN, or far out of time_t's range, is no log line). */
	if (f < 7 || !(r->ts >= 0 && r->ts < 1e15))
		return -1;
	if (f < 12 || !strcmp(r->step, "-")) {
		r->step[0] = '\0';
		r->rule[0] = '\0';
	}
	if (!strcmp(r->method, "CONNECT")) {
		h = url;
		r->port = 443;
	} else {
		h = strstr(url, "://");
		h = h ? h + 3 : url;
		if (!strncmp(url, "https:", 6))
			r->port = 443;
	}
	if (*h == '[') {
		end = strchr(h, ']');
		if (!end)
			return -1;
		h++;
		hl = (size_t)(end - h);
		end++;
	} else {
		end = h + strcspn(h, ":/");
		hl = (size_t)(end - h);
	}
	if (hl == 0 || hl >= sizeof(r->host))
		return -1;
	memcpy(r->host, h, hl);
	r->host[hl] = '\0';
	if (*end == ':') {
		char *e;
		unsigned long p = strtoul(end + 1, &e, 10);

		if (e == end + 1 || p < 1 || p > 65535)
			return -1;
		r->port = (unsigned)p;
	}
	r->denied = strstr(r->action, "DENIED") != NULL;
	return 0;
}

int egress_log_line(const struct egress *e, const char *line, char *out, size_t n)
{
	struct egress_logrec r;
	struct egress_verdict v;
	char when[32], why[1200];
	time_t t;
	struct tm tm;

	if (egress_log_parse(line, &r) < 0)
		return -1;
	if (r.step[0]) {
		snprintf(why, sizeof(why), "%s%s%s", r.step, strcmp(r.rule, "builtin") ? " " : "",
			strcmp(r.rule, "builtin") ? r.rule : "");
	} else {
		/* An older log line without our fields: what the rules say now. */
		egress_decide(e, r.host, r.port, &v);
		if (v.rule)
			snprintf(why, sizeof(why), "%s %s:%u (by the current rules)", v.tag,
				v.rule->file, v.rule->line);
		else
			snprintf(why, sizeof(why), "%s (by the current rules)", v.tag);
	}
	t = (time_t)r.ts;
	localtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(out, n, "%s %-5s %-7s %s:%u  %s  [%s]", when, r.denied ? "DENY" : "ALLOW",
		r.method, r.host, r.port, r.action, why);
	return 0;
}

int egress_host_plain(const char *host)
{
	unsigned char a[16];
	size_t len = strlen(host), label = 0;
	const char *last;

	if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1)
		return 1;
	if (len == 0 || len > 253)
		return 0;
	for (size_t i = 0; i <= len; i++) {
		char c = host[i];

		if (c == '.' || c == '\0') {
			/* No empty label, none longer than 63, none that starts or ends with '-'. */
			if (label == 0 || label > 63 || host[i - 1] == '-' ||
				host[i - label] == '-')
				return 0;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return 0;
		label++;
	}
	/*
	 * A dotted name (a dotless one is refused by the rules before any allow) whose last
	 * label is not numeric: the rules read such a name as an IPv4 address ("1.2.3").
	 */
	last = strrchr(host, '.');
	return last && strspn(last + 1, "0123456789") < strlen(last + 1);
}

/* ---- the tally: open addressing on host and port ---- */

static uint64_t key_hash(const char *host, unsigned port)
{
	uint64_t h = 1469598103934665603ULL;

	for (const unsigned char *p = (const unsigned char *)host; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (h ^ port) * 1099511628211ULL;
}

static struct egress_seen *slot(struct egress_seen *v, size_t cap, const char *host, unsigned port)
{
	size_t i = (size_t)key_hash(host, port) & (cap - 1);

	while (v[i].host && (v[i].port != port || strcmp(v[i].host, host) != 0))
		i = (i + 1) & (cap - 1);
	return &v[i];
}

static int grow(struct egress_tally *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct egress_seen *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].host)
			*slot(v, cap, t->v[i].host, t->v[i].port) = t->v[i];
	free(t->v);
	t->v = v;
	t->cap = cap;
	return 0;
}

static unsigned method_bit(const char *m)
{
	if (!strcmp(m, "CONNECT"))
		return EGRESS_M_CONNECT;
	if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
		return EGRESS_M_GET;
	if (!strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH"))
		return EGRESS_M_POST;
	return EGRESS_M_OTHER;
}

int egress_tally_add(struct egress_tally *t, const struct egress_logrec *r)
{
	struct egress_seen *s;

	if ((t->n + 1) * 2 > t->cap && grow(t) < 0)
		return -ENOMEM;
	s = slot(t->v, t->cap, r->host, r->port);
	if (!s->host) {
		if (t->n >= EGRESS_TALLY_MAX) {
			t->dropped++;
			return 0;
		}
		s->host = strdup(r->host);
		if (!s->host)
			return -ENOMEM;
		s->port = r->port;
		s->first = r->ts;
		t->n++;
	}
	s->count++;
	if (r->ts < s->first)
		s->first = r->ts;
	if (r->ts >= s->last) {
		s->last = r->ts;
		snprintf(s->step, sizeof(s->step), "%.31s", r->step);
		snprintf(s->rule, sizeof(s->rule), "%.239s", r->rule);
	}
	s->methods |= method_bit(r->method);
	return 0;
}

static int cmp_seen(const void *a, const void *b)
{
	const struct egress_seen *x = a, *y = b;
	int c;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	c = strcmp(x->host, y->host);
	if (c)
		return c;
	return x->port < y->port ? -1 : x->port > y->port;
}

void egress_tally_sort(struct egress_tally *t)
{
	size_t j = 0;

	for (size_t i = 0; i < t->cap; i++)
		if (t->v[i].host)
			t->v[j++] = t->v[i];
	for (size_t i = j; i < t->cap; i++)
		memset(&t->v[i], 0, sizeof(t->v[i]));
	if (j)
		qsort(t->v, j, sizeof(*t->v), cmp_seen);
}

void egress_tally_free(struct egress_tally *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->v[i].host);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

int egress_tally_text(
	struct egress_tally *t, const char *text, size_t len, int learn, double from, double until)
{
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char line[4096];
		struct egress_logrec r;

		if (l < sizeof(line)) {
			memcpy(line, p, l);
			line[l] = '\0';
			if (egress_log_parse(line, &r) == 0 && r.ts >= from &&
				(!until || r.ts <= until) &&
				(learn ? !strcmp(r.step, "learn") && !r.denied : r.denied) &&
				egress_tally_add(t, &r) < 0)
				return -ENOMEM;
		}
		p += l + 1;
	}
	return 0;
}

/* ---- the public suffix list ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int egress_psl_parse(struct egress_psl *psl, const char *text, size_t len)
{
	const char *p = text, *end = text + len;

	memset(psl, 0, sizeof(*psl));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p), w = 0;
		char rule[256];

		/* The rule is the line's first word; "//" starts a comment line. */
		while (w < l && p[w] != ' ' && p[w] != '\t' && p[w] != '\r')
			w++;
		if (w && w < sizeof(rule) && !(w >= 2 && p[0] == '/' && p[1] == '/')) {
			for (size_t i = 0; i < w; i++)
				rule[i] = (p[i] >= 'A' && p[i] <= 'Z') ? (char)(p[i] + 32) : p[i];
			rule[w] = '\0';
			if (strv_push(&psl->rules, rule) < 0) {
				egress_psl_free(psl);
				return -ENOMEM;
			}
		}
		p += l + 1;
	}
	if (psl->rules.n)
		qsort(psl->rules.v, psl->rules.n, sizeof(*psl->rules.v), cmp_str);
	return 0;
}

int egress_psl_load(struct egress_psl *psl, const char *path)
{
	char *data = NULL;
	size_t len = 0;
	int r;

	memset(psl, 0, sizeof(*psl));
	r = fo_read(path, 16 * 1024 * 1024, &data, &len);
	if (r < 0)
		return r;
	r = egress_psl_parse(psl, data, len);
	free(data);
	return r;
}

void egress_psl_free(struct egress_psl *psl)
{
	strv_free(&psl->rules);
}

static int psl_has(const struct egress_psl *psl, const char *prefix, const char *suffix)
{
	char key[300];
	const char *k = key;

	if ((size_t)snprintf(key, sizeof(key), "%s%s", prefix, suffix) >= sizeof(key))
		return 0;
	return psl->rules.n &&
		bsearch(&k, psl->rules.v, psl->rules.n, sizeof(*psl->rules.v), cmp_str) != NULL;
}

void egress_registrable(const struct egress_psl *psl, const char *host, char *out, size_t n)
{
	const char *labels[128], *ps = NULL;
	size_t nl = 0;
	unsigned char a[16];

	if (inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1 ||
		!strchr(host, '.')) {
		snprintf(out, n, "%s", host);
		return;
	}
	for (const char *p = host; p && nl < 128; p = strchr(p, '.'), p = p ? p + 1 : NULL)
		labels[nl++] = p;
	/*
	 * The longest rule that matches wins; an exception ("!www.ck") beats the wildcard it
	 * carves out of, its public suffix one label shorter. No rule: the last label ("*").
	 */
	for (size_t i = 0; psl && psl->rules.n && i < nl && !ps; i++) {
		if (psl_has(psl, "!", labels[i]))
			ps = i + 1 < nl ? labels[i + 1] : labels[i];
		else if (psl_has(psl, "", labels[i]) ||
			(i + 1 < nl && psl_has(psl, "*.", labels[i + 1])))
			ps = labels[i];
	}
	if (!ps)
		ps = labels[nl - 1];
	/* One label more than the public suffix; the suffix itself is its own group. */
	for (size_t i = 1; i < nl; i++)
		if (labels[i] == ps) {
			snprintf(out, n, "%s", labels[i - 1]);
			return;
		}
	snprintf(out, n, "%s", host);
}

/* ---- what is written and printed ---- */

static void put(struct buf *b, int *bad, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void put(struct buf *b, int *bad, const char *fmt, ...)
{
	char line[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* Every piece is bounded by its fields, well under a line's room. */
	if (n < 0 ||
		buf_append(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1) < 0)
		*bad = 1;
}

static void iso(double ts, char *out, size_t n)
{
	egress_time_utc((time_t)ts, out, n);
}

static void methods_text(const struct egress_seen *s, char *out, size_t n)
{
	snprintf(out, n, "%s%s%s%s", s->methods & EGRESS_M_CONNECT ? " CONNECT" : "",
		s->methods & EGRESS_M_GET ? " GET" : "", s->methods & EGRESS_M_POST ? " POST" : "",
		s->methods & EGRESS_M_OTHER ? " other" : "");
}

struct group_row {
	char dom[256];
	const struct egress_seen *s;
};

static int cmp_group(const void *a, const void *b)
{
	const struct group_row *x = a, *y = b;
	int c = strcmp(x->dom, y->dom);

	if (c)
		return c;
	c = strcmp(x->s->host, y->s->host);
	return c ? c : (x->s->port < y->s->port ? -1 : x->s->port > y->s->port);
}

/* The ports of one host listed in its allow line's comment; the rest are counted. */
#define PROPOSAL_PORTS 8

int egress_proposal_render(struct egress_tally *t, const struct egress_psl *psl, time_t from,
	time_t until, const char *machine, struct buf *out)
{
	struct group_row *rows;
	size_t nr = 0;
	unsigned long skipped = 0, skipped_req = 0, over = 0, over_req = 0;
	char a[32], b[32];
	int bad = 0, lines = 0;

	egress_tally_sort(t);
	rows = calloc(t->n ? t->n : 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		if (!egress_host_plain(t->v[i].host)) {
			skipped++;
			skipped_req += t->v[i].count;
			continue;
		}
		/* The most requested first (the tally's order): a flood does not bury them. */
		if (nr == EGRESS_PROPOSAL_MAX) {
			over++;
			over_req += t->v[i].count;
			continue;
		}
		rows[nr].s = &t->v[i];
		egress_registrable(psl, t->v[i].host, rows[nr].dom, sizeof(rows[nr].dom));
		nr++;
	}
	if (nr)
		qsort(rows, nr, sizeof(*rows), cmp_group);
	iso((double)from, a, sizeof(a));
	iso((double)until, b, sizeof(b));
	put(out, &bad,
		"# A proposal of `ocsb egress learn` on %s: NOT in force.\n"
		"# Learned from %s to %s (%ld min): the hosts the agent reached that the\n"
		"# allowlist would have refused, grouped by registrable domain%s, with the\n"
		"# requests, methods, ports and first use (UTC) of each. Delete what you do not\n"
		"# want, then: sudo ocsb egress apply FILE\n"
		"proposal\n",
		machine, a, b, (long)((until - from + 59) / 60),
		psl && psl->rules.n ? "" : " (by their last two labels: no public suffix list)");
	for (size_t i = 0; i < nr; i++) {
		const struct egress_seen *s = rows[i].s;
		char first[32], meth[48];
		unsigned long more = 0, more_req = 0;
		double t0; /* the first use of any of its ports */

		if (i == 0 || strcmp(rows[i].dom, rows[i - 1].dom) != 0) {
			unsigned long hosts = 0, req = 0;

			/* Hosts, not destinations: a host's ports are adjacent rows. */
			for (size_t j = i; j < nr && !strcmp(rows[j].dom, rows[i].dom); j++) {
				hosts +=
					j == i || strcmp(rows[j].s->host, rows[j - 1].s->host) != 0;
				req += rows[j].s->count;
			}
			put(out, &bad, "\n# %s: %lu host%s, %lu request%s\n", rows[i].dom, hosts,
				hosts == 1 ? "" : "s", req, req == 1 ? "" : "s");
		}
		/* One line a host: a second port of the same host is in its comment. */
		if (i > 0 && !strcmp(s->host, rows[i - 1].s->host))
			continue;
		t0 = s->first;
		put(out, &bad, "allow %s  #", s->host);
		for (size_t j = i; j < nr && !strcmp(rows[j].s->host, s->host); j++) {
			methods_text(rows[j].s, meth, sizeof(meth));
			/* A few ports, the rest counted: a rule line has CONF_MAX_LINE bytes. */
			if (j - i < PROPOSAL_PORTS)
				put(out, &bad, "%s %lu request%s (%s port %u)", j > i ? ";" : "",
					rows[j].s->count, rows[j].s->count == 1 ? "" : "s",
					meth + 1, rows[j].s->port);
			else {
				more++;
				more_req += rows[j].s->count;
			}
			if (rows[j].s->first < t0)
				t0 = rows[j].s->first;
		}
		iso(t0, first, sizeof(first));
		if (more)
			put(out, &bad, "; %lu more port%s (%lu request%s)", more,
				more == 1 ? "" : "s", more_req, more_req == 1 ? "" : "s");
		put(out, &bad, ", first %s\n", first);
		lines++;
	}
	if (skipped || t->dropped)
		put(out, &bad,
			"\n# Left out: %lu destination%s whose name is not a plain host name (%lu "
			"request%s), %lu request%s past %d destinations.\n",
			skipped, skipped == 1 ? "" : "s", skipped_req, skipped_req == 1 ? "" : "s",
			t->dropped, t->dropped == 1 ? "" : "s", EGRESS_TALLY_MAX);
	if (over)
		put(out, &bad,
			"# Left out: %lu less requested destination%s (%lu request%s): a proposal "
			"holds the %d most requested.\n",
			over, over == 1 ? "" : "s", over_req, over_req == 1 ? "" : "s",
			EGRESS_PROPOSAL_MAX);
	free(rows);
	return bad ? -ENOMEM : lines;
}

int egress_proposal_check(const char *text, size_t len, const char *name, char *err, size_t errlen)
{
	struct egress e = {0};
	int r = egress_parse_buf(&e, text, len, name, err, errlen);

	if (r == 0 &&
		(e.proposals.n != 1 || e.n != 0 || e.learn_until || e.policy != EGRESS_BLOCKLIST ||
			e.off || e.dns_allow)) {
		snprintf(err, errlen, "%s: not a proposal (its first statement must be `proposal`)",
			name);
		r = -1;
	}
	egress_free(&e);
	return r;
}

/* Bytes a terminal would act on become '?': host names are the agent's text. */
static void shown(const char *in, char *out, size_t n)
{
	size_t i = 0;

	for (; in[i] && i + 1 < n; i++)
		out[i] = (in[i] >= 0x20 && in[i] < 0x7f) ? in[i] : '?';
	out[i] = '\0';
}

/* The line that would let host:port through, after the step that refused it. */
static void to_allow(const struct egress_seen *s, char *out, size_t n)
{
	const char *st = s->step;

	if (!strcmp(st, "loopback-link-local") || !strcmp(st, "protocol") ||
		!strcmp(st, "cache-manager") || !strcmp(st, "bad-host-name"))
		snprintf(out, n, "none: no rule lifts the step %s", st);
	else if (!strcmp(st, "egress-off"))
		snprintf(out, n, "none while `egress off` is in force");
	else if (!egress_host_plain(s->host))
		snprintf(out, n, "none: not a plain host name");
	else if (!strcmp(st, "port-not-80-443") || (s->port != 80 && s->port != 443))
		snprintf(out, n, "connect %s%s%s:%u", strchr(s->host, ':') ? "[" : "", s->host,
			strchr(s->host, ':') ? "]" : "", s->port);
	else if (!strcmp(st, "block"))
		snprintf(out, n, "allow %s  (allow beats the block; or delete the block line)",
			s->host);
	else
		snprintf(out, n, "allow %s", s->host);
}

size_t egress_denied_render(struct egress_tally *t, const struct egress *e, struct buf *out)
{
	int bad = 0;

	egress_tally_sort(t);
	put(out, &bad, "%6s  %-19s  %-32s  %-32s  %s\n", "COUNT", "LAST (UTC)", "HOST:PORT",
		"REFUSED BY", "TO ALLOW (a line for egress.conf, or sudo ocsb egress allow)");
	for (size_t i = 0; i < t->n; i++) {
		const struct egress_seen *s = &t->v[i];
		char host[300], hp[320], last[32], why[1200], allow[400], now[1200] = "";
		struct egress_verdict v;

		shown(s->host, host, sizeof(host));
		snprintf(hp, sizeof(hp), "%s%s%s:%u", strchr(host, ':') ? "[" : "", host,
			strchr(host, ':') ? "]" : "", s->port);
		iso(s->last, last, sizeof(last));
		last[10] = ' ';
		last[19] = '\0';
		if (s->step[0])
			snprintf(why, sizeof(why), "%s%s%s", s->step,
				s->rule[0] && strcmp(s->rule, "builtin") ? " " : "",
				strcmp(s->rule, "builtin") ? s->rule : "");
		else
			snprintf(why, sizeof(why), "(an older log line)");
		shown(why, why, sizeof(why));
		to_allow(s, allow, sizeof(allow));
		if (e) {
			egress_decide(e, s->host, s->port, &v);
			if (v.allow && v.rule)
				snprintf(now, sizeof(now), "  [allowed now: %s %s:%u]", v.tag,
					v.rule->file, v.rule->line);
			else if (v.allow)
				snprintf(now, sizeof(now), "  [allowed now: %s]", v.tag);
		}
		put(out, &bad, "%6lu  %-19s  %-32s  %-32s  %s%s\n", s->count, last, hp, why, allow,
			now);
	}
	if (t->dropped)
		put(out, &bad, "# and %lu request%s past %d destinations, not counted\n",
			t->dropped, t->dropped == 1 ? "" : "s", EGRESS_TALLY_MAX);
	return bad ? 0 : t->n;
}
