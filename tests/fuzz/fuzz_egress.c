/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the egress rules (egress/egress.c's keywords on common/conf.c,
 * egress/egress_load.c's buffer loader), what is built from them (egress_render_squid,
 * egress_decide) and the proxy's log lines read back with them (egress_log_line). The input
 * is a rule file; after a line "#--log" the rest is squid's access log. Besides the
 * sanitizers' findings, abort() when:
 *   - a refused file leaves a rule, a setting or its name behind, or its message does not
 *     start with "egress.conf:LINE: ";
 *   - the rules of a file that parses, written out again one per line (values quoted),
 *     do not parse to the same rules, values and settings (values are stored canonical:
 *     parsing one again changes nothing);
 *   - a host or regex value holds a byte squid.conf would read otherwise (blank, quote,
 *     '#', control), or the squid configuration built from the rules fails or holds a
 *     control byte, a quote or "${";
 *   - egress_decide contradicts a rule about its own host: an allowed name is refused by
 *     anything but the never-allowed destinations, a blocked one passes but through
 *     allow or connect, a connect rule's host and port are refused but as never-allowed,
 *     anything passes with `egress off`;
 *   - a log line's summary is not one NUL-terminated line.
 * Build and run: `make fuzz FUZZ_ONLY=egress` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "egress.h"
#include "egress_log.h"
#include "fuzz_util.h"

#define FILE_NAME "egress.conf"

/* One value quoted as conf_split reads it back: in single quotes, else double with escapes. */
static void put_quoted(struct buf *b, const char *s)
{
	if (!strchr(s, '\'')) {
		CHECK(buf_printf(b, " '%s'", s) == 0);
		return;
	}
	CHECK(buf_puts(b, " \"") == 0);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			CHECK(buf_puts(b, "\\") == 0);
		CHECK(buf_append(b, s, 1) == 0);
	}
	CHECK(buf_puts(b, "\"") == 0);
}

/* The longest line of b (the parser takes CONF_MAX_LINE bytes). */
static size_t longest_line(const struct buf *b)
{
	size_t best = 0, cur = 0;

	for (size_t i = 0; i < b->len; i++)
		if (b->data[i] == '\n') {
			best = cur > best ? cur : best;
			cur = 0;
		} else {
			cur++;
		}
	return cur > best ? cur : best;
}

/* The rules as a file: settings, then one rule a line. */
static void render_rules(const struct egress *e, struct buf *b)
{
	CHECK(buf_printf(b, "policy %s\negress %s\ndns %s\n",
		      e->policy == EGRESS_ALLOWLIST ? "allowlist" : "blocklist",
		      e->off ? "off" : "on", e->dns_allow ? "allow" : "deny") == 0);
	for (size_t i = 0; i < e->n; i++) {
		const struct egress_rule *r = &e->rules[i];

		CHECK(buf_puts(b, egress_kind_name(r->kind)) == 0);
		if (r->kind == EGRESS_CONNECT) {
			char hp[300];
			snprintf(hp, sizeof(hp), strchr(r->value, ':') ? "[%s]:%u" : "%s:%u",
				r->value, r->port);
			put_quoted(b, hp);
		} else {
			put_quoted(b, r->value);
		}
		for (size_t k = 0; k < r->curl_args.n; k++)
			put_quoted(b, r->curl_args.v[k]);
		CHECK(buf_puts(b, "\n") == 0);
	}
}

static void same_rules(const struct egress *a, const struct egress *b)
{
	CHECK(a->n == b->n && a->policy == b->policy && a->off == b->off &&
		a->dns_allow == b->dns_allow);
	for (size_t i = 0; i < a->n; i++) {
		const struct egress_rule *x = &a->rules[i], *y = &b->rules[i];

		CHECK(x->kind == y->kind && !strcmp(x->value, y->value) && x->port == y->port);
		CHECK(x->has_re == y->has_re && x->curl_args.n == y->curl_args.n);
		for (size_t k = 0; k < x->curl_args.n; k++)
			CHECK(!strcmp(x->curl_args.v[k], y->curl_args.v[k]));
	}
}

static void check_values(const struct egress *e)
{
	for (size_t i = 0; i < e->n; i++) {
		const struct egress_rule *r = &e->rules[i];

		CHECK(r->value && r->value[0] && r->file == e->files.v[0] && r->line > 0);
		CHECK(r->has_re ==
			(r->kind == EGRESS_ALLOW_REGEX || r->kind == EGRESS_BLOCK_REGEX));
		CHECK((r->kind == EGRESS_CONNECT) == (r->port != 0) && r->port <= 65535);
		CHECK(r->curl_args.n == 0 || r->kind == EGRESS_EXPECT_PASS ||
			r->kind == EGRESS_EXPECT_BLOCK);
		if (r->kind == EGRESS_EXPECT_PASS || r->kind == EGRESS_EXPECT_BLOCK)
			continue;
		/* Goes into squid.conf as a bare word. */
		for (const char *c = r->value; *c; c++)
			CHECK(*c > ' ' && *c < 0x7f && *c != '"' && *c != '\'' && *c != '#');
		if (!r->has_re)
			CHECK(strlen(r->value) <= 253 + 1);
	}
}

static void check_squid(const struct egress *e)
{
	struct egress_squid sq = {.port = 3128, .state_dir = "/run/ocsb/proxy", .user = "proxy"};
	struct buf out = {0};

	CHECK(egress_render_squid(e, &sq, &out) == 0);
	CHECK(out.len > 0 && out.data[out.len - 1] == '\n');
	for (size_t i = 0; i < out.len; i++) {
		unsigned char c = (unsigned char)out.data[i];
		CHECK(c == '\n' || (c >= 0x20 && c < 0x7f));
	}
	/* Outside comments: no quoted include and no macro. */
	for (const char *l = out.data; l < out.data + out.len;) {
		const char *nl = memchr(l, '\n', (size_t)(out.data + out.len - l));
		size_t len = (size_t)(nl - l);

		if (len && l[0] != '#') {
			CHECK(!memchr(l, '"', len) && !memchr(l, '\'', len));
			CHECK(!memmem(l, len, "${", 2));
		}
		l = nl + 1;
	}
	buf_free(&out);
}

static int never(const char *why)
{
	return !strcmp(why, "loopback/link-local");
}

static void check_decide(const struct egress *e)
{
	for (size_t i = 0; i < e->n; i++) {
		const struct egress_rule *r = &e->rules[i];
		struct egress_verdict v;
		char host[300];

		if (r->has_re || r->kind == EGRESS_EXPECT_PASS || r->kind == EGRESS_EXPECT_BLOCK)
			continue;
		/* ".example.com" names the domain itself too. */
		snprintf(host, sizeof(host), strchr(r->value, ':') ? "[%s]" : "%s",
			r->value + (r->value[0] == '.'));
		egress_decide(e, host, r->kind == EGRESS_CONNECT ? r->port : 443, &v);
		CHECK(v.why && v.tag);
		if (e->off) {
			CHECK(!v.allow && !strcmp(v.why, "egress off"));
			continue;
		}
		if (v.allow)
			CHECK(v.rule || !strcmp(v.why, "default allow"));
		switch (r->kind) {
		case EGRESS_ALLOW:
		case EGRESS_CONNECT:
			CHECK(v.allow || never(v.why));
			break;
		case EGRESS_BLOCK:
			CHECK(!v.allow || !strcmp(v.why, "allow") ||
				!strcmp(v.why, "connect rule"));
			break;
		}
	}
}

static void check_log(const struct egress *e, const char *p, size_t n)
{
	char *text = malloc(n + 1), out[4600];

	CHECK(text != NULL);
	memcpy(text, p, n);
	text[n] = '\0';
	for (char *line = text, *next; line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		memset(out, 'x', sizeof(out));
		if (egress_log_line(e, line, out, sizeof(out)) == 0)
			CHECK(memchr(out, '\0', sizeof(out)) && !strchr(out, '\n'));
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *log = memmem(p, size, "#--log\n", 7);
	size_t n = log ? (size_t)(log - p) : size;
	struct egress e = {0}, back = {0};
	struct buf text = {0};
	char err[1024];

	err[0] = '\0';
	if (egress_parse_buf(&e, p, n, FILE_NAME, err, sizeof(err)) < 0) {
		unsigned line;
		int off = 0;

		CHECK(e.n == 0 && e.files.n == 0 && e.policy == EGRESS_BLOCKLIST && !e.off &&
			!e.dns_allow);
		CHECK(sscanf(err, FILE_NAME ":%u: %n", &line, &off) == 1 && off > 0);
		egress_free(&e);
		return 0;
	}
	CHECK(e.files.n == 1 && !strcmp(e.files.v[0], FILE_NAME));
	check_values(&e);

	/* (Unless quoting took a line past what one may hold: then it cannot be written so.) */
	render_rules(&e, &text);
	if (longest_line(&text) <= CONF_MAX_LINE) {
		if (egress_parse_buf(&back, text.data, text.len, "again.conf", err, sizeof(err)) <
			0) {
			fprintf(stderr, "%s\n", err);
			CHECK(!"the rules written out parse again");
		}
		same_rules(&e, &back);
	}

	check_squid(&e);
	check_decide(&e);
	if (log)
		check_log(&e, log + 7, size - n - 7);
	buf_free(&text);
	egress_free(&e);
	egress_free(&back);
	return 0;
}
