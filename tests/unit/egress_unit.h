/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TEST_EGRESS_UNIT_H
#define OCSB_TEST_EGRESS_UNIT_H

/*
 * For test_egress and test_egress_squid: the includes, the shipped defaults and the seed's
 * example, parsed.
 */
#include "unit.h"

#include <pwd.h>
#include <regex.h>

#include "egress.h"
#include "paths.h"
#include "spawn.h"
#include "util.h"

/* The shipped defaults, generated from conf/egress.conf by tools/embed.sh when present. */
#if defined(__has_include)
#if __has_include("egress_defaults.h")
#include "egress_defaults.h"
#define HAVE_DEFAULTS 1
#endif
#endif

#define SQUID "/usr/sbin/squid"

/* The seed's example (seeds/000), one statement a line as written there. */
static const char seed_example[] =
	"allow jira.example.com gitlab.example.com # wins over block\n"
	"allow-regex ^[a-z0-9-]+\\.staging\\.example\\.com$\n"
	"block .example.com # the domain and all its subdomains\n"
	"block-regex ^prod-\n"
	"connect git.example.com:2222 10.0.0.5:6443 # git over SSH, Kubernetes API\n"
	"expect-block https://prod.example.com/\n"
	"expect-pass https://gitlab.example.com/\n"
	"expect-pass https://10.0.0.5:6443/version -k\n";

static inline int parse(struct egress *e, const char *text, char *err, size_t errlen)
{
	err[0] = '\0';
	return egress_parse_buf(e, text, strlen(text), "t.conf", err, errlen);
}
static inline void seed_rules(struct egress *e)
{
	char err[512];

	memset(e, 0, sizeof(*e));
	if (parse(e, seed_example, err, sizeof(err)) != 0)
		fail_msg("seed example: %s", err);
}

#define expect_verdict(e, host, port, want_allow, want_why, want_line)                        \
	do {                                                                                  \
		struct egress_verdict v_;                                                     \
		egress_decide((e), (host), (port), &v_);                                      \
		if (v_.allow != (want_allow) || strcmp(v_.why, (want_why)) != 0 ||            \
			(want_line ? !v_.rule || v_.rule->line != (unsigned)(want_line)       \
				   : v_.rule != NULL))                                        \
			fail_msg("%s:%u: got %s '%s' line %u, want %s '%s' line %u", (host),  \
				(unsigned)(port), v_.allow ? "allow" : "deny", v_.why,        \
				v_.rule ? v_.rule->line : 0, (want_allow) ? "allow" : "deny", \
				(want_why), (unsigned)(want_line));                           \
	} while (0)

#endif
