/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the review gate's classifier (sync/check.c, sync_review_classify):
 * one path the agent committed, its old and new modes, and the contents the gate reads
 * (a .gitattributes file, a link's target). The input is:
 *   [modes] old mode in the low 4 bits, new in the high 4 (a mode from a table, or with
 *           8-15 the next two bytes, any 16-bit mode, as a damaged memo could hold one)
 *   [n] then n & 127 bytes of path (up to a NUL); n & 128: the new content is cut (only
 *       the first part of the blob, as review.c reads at most 1 MiB)
 *   [hi][lo] then that many bytes of old content, the rest is the new content.
 * Contents are handed over only where sync_review_wants_data says, as review.c does.
 * Properties, abort() when broken:
 *   - a deletion raises nothing; only defined flags are raised, each with a name;
 *   - attr-driver: every line of the new .gitattributes that git itself reads as setting
 *     filter=, diff= or merge= to a driver (the oracle below follows git's attr.c:
 *     blanks are space, tab and CR, a quoted pattern may end right before an attribute,
 *     a NUL ends what git reads) raises it unless the old file had that very line;
 *   - content cut short raises attr-driver (a .gitattributes) or symlink-out (a link);
 *   - symlink-out is raised exactly when the link can resolve outside the tree: absolute,
 *     empty or NUL in the target, more ".." than directories above the link, or a ".."
 *     after a name (that name may itself be a link: "d" -> "." makes "d/../.." leave);
 *   - submodule, new-exec and dotgit follow their definitions, and the path's case does
 *     not change the hook, dotgit and .gitmodules flags (case-insensitive file systems).
 * Build and run: `make fuzz FUZZ_ONLY=sync_gate` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sync.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	git_libgit2_init();
	fuzz_quiet(argc, argv);
	return 0;
}

static const unsigned modes[8] = {0, 0100644, 0100755, 0120000, 0160000, 0040000, 0100664, 0100600};

static unsigned take_mode(struct fuzz_in *in, unsigned sel)
{
	return sel < 8 ? modes[sel] : fuzz_u16(in);
}

/* --- git's reading of one .gitattributes line (attr.c, git 2.39-2.45) */

static const char blank[] = " \t\r\n";

static int attr_name_valid(const char *s, size_t n)
{
	if (!n || *s == '-')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '-' || s[i] == '.' || s[i] == '_' || isdigit((unsigned char)s[i]) ||
			    (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return 0;
	return 1;
}

/* git's unquote_c_style: the end of the quoted string at s ('"'), or NULL when it is not one. */
static const char *unquote_end(const char *s)
{
	for (s++;;) {
		char c = *s++;

		if (!c)
			return NULL;
		if (c == '"')
			return s;
		if (c != '\\')
			continue;
		c = *s++;
		if (strchr("abfnrtv\\\"", c) && c)
			continue;
		/* \ooo, the first digit 0-3 */
		if (c >= '0' && c <= '3' && s[0] >= '0' && s[0] <= '7' && s[1] >= '0' &&
			s[1] <= '7') {
			s += 2;
			continue;
		}
		return NULL;
	}
}

/* 1 when git sets filter, diff or merge to a named driver on this line (NUL-terminated). */
static int git_line_sets_driver(const char *line)
{
	const char *cp = line + strspn(line, blank), *states, *name;
	size_t namelen;
	int driver = 0;

	if (!*cp || *cp == '#' || strlen(line) >= 2048)
		return 0;
	name = cp;
	if (*cp == '"' && (states = unquote_end(cp)) != NULL) {
		namelen = 1; /* a quoted pattern is never a macro */
	} else {
		namelen = strcspn(name, blank);
		states = name + namelen;
	}
	if (namelen > 6 && !strncmp(name, "[attr]", 6)) {
		name += 6;
		name += strspn(name, blank);
		namelen = strcspn(name, blank);
		if (!attr_name_valid(name, namelen) || !strncmp(name, "builtin_", 8))
			return 0;
	}
	states += strspn(states, blank);
	/* Every attribute must be valid, or git drops the whole line. */
	for (cp = states; *cp;) {
		const char *ep = cp + strcspn(cp, blank), *eq = strchr(cp, '=');
		const char *an = cp;
		size_t len;

		if (eq && ep < eq)
			eq = NULL;
		len = eq ? (size_t)(eq - cp) : (size_t)(ep - cp);
		if (*an == '-' || *an == '!')
			an++, len--;
		if (!attr_name_valid(an, len) || !strncmp(an, "builtin_", 8))
			return 0;
		if (an == cp && eq && ep > eq + 1 &&
			((len == 6 && !strncmp(an, "filter", 6)) ||
				(len == 4 && !strncmp(an, "diff", 4)) ||
				(len == 5 && !strncmp(an, "merge", 5))))
			driver = 1;
		cp = ep + strspn(ep, blank);
	}
	return driver;
}

/* The old file has this line (both without one trailing CR), as the gate compares them. */
static int old_has_line(const char *old, size_t olen, const char *line, size_t ll)
{
	if (ll && line[ll - 1] == '\r')
		ll--;
	for (size_t i = 0; old && i <= olen;) {
		const char *e = memchr(old + i, '\n', olen - i);
		size_t l = e ? (size_t)(e - (old + i)) : olen - i;
		size_t k = l && old[i + l - 1] == '\r' ? l - 1 : l;

		if (k == ll && !memcmp(old + i, line, ll))
			return 1;
		if (!e)
			break;
		i += l + 1;
	}
	return 0;
}

/* A driver line git reads in the new file that the old one does not have. */
static int oracle_new_driver(const char *old, size_t olen, const char *nw, size_t nlen)
{
	const char *nul = memchr(nw, '\0', nlen);
	size_t end = nul ? (size_t)(nul - nw) : nlen;

	for (size_t i = 0; i < end;) {
		const char *e = memchr(nw + i, '\n', end - i);
		size_t l = e ? (size_t)(e - (nw + i)) : end - i;
		char *line = fuzz_strndup(nw + i, l);
		int hit = git_line_sets_driver(line) && !old_has_line(old, olen, nw + i, l);

		free(line);
		if (hit)
			return 1;
		i += l + 1;
	}
	return 0;
}

/* --- where a link can point */

static int oracle_leaves(const char *path, const char *t, size_t tlen)
{
	long depth = 0;
	int named = 0;

	if (!t || !tlen || t[0] == '/' || memchr(t, '\0', tlen))
		return 1;
	for (const char *p = path; *p; p++)
		depth += *p == '/';
	for (size_t i = 0; i <= tlen;) {
		const char *e = memchr(t + i, '/', tlen - i);
		size_t l = e ? (size_t)(e - (t + i)) : tlen - i;

		if (l == 2 && t[i] == '.' && t[i + 1] == '.') {
			if (named || --depth < 0)
				return 1;
		} else if (l && !(l == 1 && t[i] == '.')) {
			named = 1;
			depth++;
		}
		if (!e)
			break;
		i += l + 1;
	}
	return 0;
}

/* --- names */

static const char *base_of(const char *p)
{
	const char *b = strrchr(p, '/');

	return b ? b + 1 : p;
}

static int has_component_ci(const char *path, const char *comp)
{
	size_t cl = strlen(comp);

	for (const char *p = path;;) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == cl && !strncasecmp(p, comp, cl))
			return 1;
		if (!e)
			return 0;
		p = e + 1;
	}
}

static unsigned classify(const char *path, unsigned om, unsigned nm, const char *od, size_t ol,
	const char *nd, size_t nl, int cut)
{
	struct sync_entry e = {.path = path, .old_mode = om, .new_mode = nm};

	if (om && sync_review_wants_data(path, om)) {
		e.old_data = od;
		e.old_len = ol;
	}
	if (nm && sync_review_wants_data(path, nm)) {
		e.new_data = nd;
		e.new_len = nl;
		e.new_cut = cut;
	}
	return sync_review_classify(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	unsigned sel = fuzz_byte(&in), om, nm, f, g, pb;
	size_t plen, olen, nlen;
	const char *p, *od, *nd;
	char *path, *swapped;
	int attrs, link_data, cut;

	om = take_mode(&in, sel & 15);
	nm = take_mode(&in, sel >> 4);
	pb = fuzz_byte(&in);
	cut = pb >> 7; /* the new content is only the first part of the blob */
	p = fuzz_take(&in, pb & 127, &plen);
	path = fuzz_strndup(p, plen);
	od = fuzz_take(&in, fuzz_u16(&in), &olen);
	nd = fuzz_take(&in, in.n, &nlen);

	f = classify(path, om, nm, od, olen, nd, nlen, cut);
	CHECK((f & ~((1u << SYNC_FLAG_COUNT) - 1)) == 0);
	for (unsigned b = 1; b < (1u << SYNC_FLAG_COUNT); b <<= 1)
		if (f & b)
			CHECK(strcmp(sync_flag_name(b), "unknown") != 0);
	if (!nm) {
		CHECK(f == 0);
		goto out;
	}
	/* What reaches the gate's content checks. */
	attrs = !strcasecmp(base_of(path), ".gitattributes") && (nm & 0170000) == 0100000;
	link_data = nm == 0120000;
	CHECK(sync_review_wants_data(path, nm) == (attrs || link_data));
	if (attrs &&
		(cut || oracle_new_driver((om & 0170000) == 0100000 ? od : NULL, olen, nd, nlen)))
		CHECK(f & SYNC_FLAG_ATTR_DRIVER);
	if (link_data)
		CHECK(!!(f & SYNC_FLAG_SYMLINK_OUT) == (cut || oracle_leaves(path, nd, nlen)));
	else
		CHECK(!(f & SYNC_FLAG_SYMLINK_OUT));
	CHECK(!!(f & SYNC_FLAG_GITMODULES) ==
		(!strcasecmp(base_of(path), ".gitmodules") || (nm == 0160000 && om != 0160000)));
	CHECK(!!(f & SYNC_FLAG_NEW_EXEC) == (nm == 0100755 && om != 0100755));
	CHECK(!!(f & SYNC_FLAG_DOTGIT) ==
		(has_component_ci(path, ".git") || has_component_ci(path, "git~1")));
	/* The same path in another case: the same hook, dotgit and .gitmodules flags. */
	swapped = strdup(path);
	CHECK(swapped != NULL);
	for (char *c = swapped; *c; c++)
		*c = (char)(islower((unsigned char)*c) ? toupper((unsigned char)*c)
						       : tolower((unsigned char)*c));
	g = classify(swapped, om, nm, od, olen, nd, nlen, cut);
	{
		unsigned m = SYNC_FLAG_HOOK | SYNC_FLAG_DOTGIT | SYNC_FLAG_GITMODULES;

		CHECK((f & m) == (g & m));
	}
	free(swapped);
out:
	free(path);
	return 0;
}
