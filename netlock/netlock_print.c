/* SPDX-License-Identifier: MIT */
/*
 * Rules as libnftnl prints them, and that text in one canonical form: what netlock_verify
 * compares and netlock_render_expr shows. ocsb-warden compares the kernel's own listing
 * (netlock_snap.c) and links none of it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libnftnl/rule.h>
#include "netlock.h"
#include "netlock_int.h"

/* libnftnl's text of a rule (header line, then one "  [ expr ]" line each); malloc'd. */
static char *netlock_rule_print(const struct nftnl_rule *r)
{
	size_t size = 4096;

	for (;;) {
		char *p = malloc(size);
		int n;

		if (!p)
			return NULL;
		n = nftnl_rule_snprintf(p, size, r, NFTNL_OUTPUT_DEFAULT, 0);
		if (n < 0) {
			free(p);
			return NULL;
		}
		if ((size_t)n < size)
			return p;
		free(p);
		size = (size_t)n + 1;
	}
}

/*
 * Only the expression lines: the header carries the handle, which differs
 * between a built rule and a dumped one and says nothing about behaviour.
 */
char *netlock_rule_exprs(const struct nftnl_rule *r)
{
	char *text = netlock_rule_print(r), *nl, *exprs;

	if (!text)
		return NULL;
	nl = strchr(text, '\n');
	exprs = strdup(nl ? nl + 1 : "");
	free(text);
	return exprs;
}

void netlock_exprs_canon(char *text)
{
	const char *p = text;
	char *w = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) + 1 : strlen(p);
		unsigned r1, r2;
		char lo[16], hi[16];
		int n1 = -1, n2 = -1;

		/* Both lines whole (each ends at '\n', the second possibly at the end), one
		 * register, values of one width (libnftnl prints 32 bits per 0x word). */
		if (sscanf(p, "  [ cmp gte reg %u %15[0x0-9a-f] ]%n", &r1, lo, &n1) == 2 &&
			n1 > 0 && p[n1] == '\n' &&
			sscanf(p + n1 + 1, "  [ cmp lte reg %u %15[0x0-9a-f] ]%n", &r2, hi, &n2) ==
				2 &&
			n2 > 0 && (p[n1 + 1 + n2] == '\n' || p[n1 + 1 + n2] == '\0') && r1 == r2 &&
			strlen(lo) == strlen(hi)) {
			char line[64];
			int m = strcmp(lo, hi) == 0
				? snprintf(line, sizeof(line), "  [ cmp eq reg %u %s ]", r1, lo)
				: snprintf(line, sizeof(line), "  [ range eq reg %u %s %s ]", r1,
					  lo, hi);

			/* Never longer than the two lines it replaces: w stays behind p. */
			if (m > 0 && m < n1 + 1 + n2) {
				memcpy(w, line, (size_t)m);
				w += m;
				p += n1 + 1 + n2; /* the second line's '\n' is copied next */
				continue;
			}
		}
		/* The kernel reports a lookup's flags even when none are set: "0x0" is none. */
		if (strncmp(p, "  [ lookup ", 11) == 0 && len >= 8 + 11 &&
			memcmp(p + len - (nl ? 7 : 6), " 0x0 ]", 6) == 0) {
			size_t keep = len - (nl ? 7 : 6);

			memmove(w, p, keep);
			memcpy(w + keep, " ]", 2);
			w += keep + 2;
			p += keep + 6;
			continue;
		}
		memmove(w, p, len);
		w += len;
		p += len;
	}
	*w = '\0';
}
