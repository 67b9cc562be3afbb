/* SPDX-License-Identifier: MIT */
/*
 * What test_egress_learn.c and test_egress_log.c share: a rule text parsed or the test
 * failed, and a decision's verdict and step checked.
 */
#ifndef OCSB_EGRESS_LEARN_UNIT_H
#define OCSB_EGRESS_LEARN_UNIT_H

#include "unit.h"

#include "egress.h"

#define T0 ((time_t)1796590800) /* 2026-12-06T21:00:00Z */

/* Parsed as file, or the test fails with the error. */
static inline void ok_as(struct egress *e, const char *text, const char *file)
{
	char err[512] = "";

	if (egress_parse_buf(e, text, strlen(text), file, err, sizeof(err)) != 0)
		fail_msg("%s", err);
}

static inline void expect_tag(
	const struct egress *e, const char *host, unsigned port, int allow, const char *tag)
{
	struct egress_verdict v;

	egress_decide(e, host, port, &v);
	if (v.allow != allow || strcmp(v.tag, tag) != 0)
		fail_msg("%s:%u: got %s %s, want %s %s", host, port, v.allow ? "allow" : "deny",
			v.tag, allow ? "allow" : "deny", tag);
}

#endif
