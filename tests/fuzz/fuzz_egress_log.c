/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the proxy's access log read back (egress/egress_log.c): the input is
 * the log's text (the agent's doing: host names, methods, URLs). It is tallied both ways
 * (learn mode's requests, the refused ones), made into a proposal (with a small public
 * suffix list) and into the `ocsb egress denied` table. Besides the sanitizers' findings,
 * abort() when:
 *   - the proposal does not parse with egress_parse_buf, or its rules are not dropped;
 *   - with its `proposal` line removed, it holds a rule other than `allow HOST`, a HOST that
 *     is not egress_host_plain or not a host of the input (IP literals compared as
 *     addresses), or fewer or more allow lines than egress_proposal_render counted;
 *   - the denied table holds a byte other than printable ASCII and '\n'.
 * Build and run: `make fuzz FUZZ_ONLY=egress_log` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "egress_log.h"
#include "fuzz_util.h"

static const char psl_text[] = "// a few rules of every kind\n"
			       "com\nuk\nco.uk\nnet\n*.ck\n!www.ck\nexample\n";
static struct egress_psl psl;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet(argc, argv);
	CHECK(egress_psl_parse(&psl, psl_text, strlen(psl_text)) == 0);
	return 0;
}

/* An IP literal's address (v4-mapped IPv6 as IPv4, as the rules store it): 4, 16 or 0. */
static int addr_of(const char *h, unsigned char a[16])
{
	if (inet_pton(AF_INET, h, a) == 1)
		return 4;
	if (inet_pton(AF_INET6, h, a) == 1) {
		if (IN6_IS_ADDR_V4MAPPED((struct in6_addr *)a)) {
			memmove(a, a + 12, 4);
			return 4;
		}
		return 16;
	}
	return 0;
}

static int same_host(const char *rule, const char *host)
{
	unsigned char a[16], b[16];
	int la = addr_of(rule, a), lb = addr_of(host, b);

	if (la || lb)
		return la == lb && !memcmp(a, b, (size_t)la);
	return !strcmp(rule, host);
}

static int in_tally(const struct egress_tally *t, const char *v)
{
	for (size_t i = 0; i < t->n; i++)
		if (same_host(v, t->v[i].host))
			return 1;
	return 0;
}

/* Parsed, or the error and the text shown before CHECK aborts. */
static int parsed(struct egress *e, const char *text, size_t len)
{
	char err[512];

	if (egress_parse_buf(e, text, len, "proposal.conf", err, sizeof(err)) == 0)
		return 1;
	fprintf(fuzz_err ? fuzz_err : stderr, "%s\n%.*s\n", err, (int)len, text);
	return 0;
}

static void check_proposal(struct egress_tally *t, const struct buf *text, int lines)
{
	struct egress e = {0};
	char *body, *p;
	int allows = 0;

	CHECK(parsed(&e, text->data, text->len));
	CHECK(e.n == 0 && e.proposals.n == 1 && e.policy == EGRESS_BLOCKLIST);
	egress_free(&e);
	/* The same text in force: `proposal` made a comment. */
	body = fuzz_strndup(text->data, text->len);
	p = strstr(body, "\nproposal\n");
	CHECK(p != NULL);
	p[1] = '#';
	CHECK(parsed(&e, body, text->len));
	CHECK(e.proposals.n == 0);
	for (size_t i = 0; i < e.n; i++) {
		CHECK(e.rules[i].kind == EGRESS_ALLOW);
		CHECK(egress_host_plain(e.rules[i].value));
		CHECK(in_tally(t, e.rules[i].value));
		CHECK(i == 0 || e.rules[i].line != e.rules[i - 1].line);
		allows++;
	}
	CHECK(allows == lines);
	egress_free(&e);
	free(body);
}

static void check_printable(const struct buf *b)
{
	for (size_t i = 0; i < b->len; i++)
		CHECK(b->data[i] == '\n' || (b->data[i] >= 0x20 && b->data[i] <= 0x7e));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char rules[] = "policy allowlist\nallow example.com .example.net\n";
	const char *text = (const char *)data;
	struct egress_tally learned = {0}, refused = {0};
	struct buf prop = {0}, table = {0};
	struct egress e = {0};
	char err[512];
	int lines;

	/* A window of the seeds' times, and one without an end. */
	CHECK(egress_tally_text(&learned, text, size, 1, 1700000000, 1800000000) == 0);
	CHECK(egress_tally_text(&refused, text, size, 0, 0, 0) == 0);
	lines = egress_proposal_render(&learned, &psl, 1765054800, 1765058400, "fuzz", &prop);
	CHECK(lines >= 0 && (size_t)lines <= learned.n);
	check_proposal(&learned, &prop, lines);
	/* The table with rules that allow some of it now. */
	CHECK(egress_parse_buf(&e, rules, strlen(rules), "egress.conf", err, sizeof(err)) == 0);
	CHECK(egress_denied_render(&refused, &e, &table) == refused.n);
	check_printable(&table);
	buf_free(&table);
	CHECK(egress_denied_render(&refused, NULL, &table) == refused.n);
	check_printable(&table);
	egress_free(&e);
	buf_free(&prop);
	buf_free(&table);
	egress_tally_free(&learned);
	egress_tally_free(&refused);
	return 0;
}
