/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "log.h"

#define ARGS_MAX_WORD 64
#define ARGS_MAX_OPTS 64

/* Optimal string alignment distance: insertions, deletions, changes, neighbour swaps. */
static size_t osa(const char *a, const char *b)
{
	size_t n = strlen(a), m = strlen(b), d[ARGS_MAX_WORD + 1][ARGS_MAX_WORD + 1];

	if (n > ARGS_MAX_WORD || m > ARGS_MAX_WORD)
		return (size_t)-1;
	for (size_t i = 0; i <= n; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= m; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= n; i++)
		for (size_t j = 1; j <= m; j++) {
			size_t cost = a[i - 1] != b[j - 1], v = d[i - 1][j] + 1;

			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < v)
				v = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
				d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[n][m];
}

const char *args_nearest(const char *word, const char *const *cands)
{
	const char *best = NULL, *prefix = NULL;
	size_t best_d = (size_t)-1, wl = strlen(word), dashes = strspn(word, "-");
	size_t limit = wl - dashes >= 6 ? 2 : 1;
	int prefixes = 0;

	/* One letter ("-x"): any other letter is one edit away, and no better a guess. */
	if (wl - dashes < 2)
		return NULL;
	for (size_t i = 0; cands[i]; i++) {
		size_t d = osa(word, cands[i]);

		if (d < best_d)
			best_d = d, best = cands[i];
		if (strncmp(cands[i], word, wl) == 0)
			prefixes++, prefix = cands[i];
	}
	if (best && best_d <= limit)
		return best;
	return prefixes == 1 ? prefix : NULL;
}

int args_unknown(const char *what, const char *word, const char *const *cands, const char *help)
{
	const char *near = cands ? args_nearest(word, cands) : NULL;

	if (near)
		log_err("unknown %s '%s' (did you mean '%s'?); see %s", what, word, near, help);
	else
		log_err("unknown %s '%s'; see %s", what, word, help);
	return 2;
}

int args_getopt_error(int c, char **argv, const struct option *longopts, const char *help)
{
	const char *given = optind > 0 ? argv[optind - 1] : "?";
	static char full[ARGS_MAX_OPTS][ARGS_MAX_WORD + 3];
	const char *cands[ARGS_MAX_OPTS + 1];
	char name[ARGS_MAX_WORD + 3], list[256] = "";
	size_t n = 0, len;
	int prefixes = 0;

	if (c == ':') {
		log_err("option '%s' needs a value; see %s", given, help);
		return 2;
	}
	/* "--ownr=alice" is compared as "--ownr". */
	snprintf(name, sizeof(name), "%.*s", (int)strcspn(given, "="), given);
	if (optopt) {
		/*
		 * A long option given a value it does not take (optopt: its val), or a short
		 * option that does not exist (optopt: the letter; the element may hold several,
		 * and optind may not have moved past it: name the letter alone).
		 */
		for (size_t i = 0; longopts[i].name && !strncmp(name, "--", 2); i++)
			if (longopts[i].val == optopt &&
				!strncmp(longopts[i].name, name + 2, strlen(name + 2))) {
				log_err("option '%s' takes no value; see %s", name, help);
				return 2;
			}
		if (optopt > ' ' && optopt < 0x7f)
			log_err("unknown option '-%c'; see %s", optopt, help);
		else
			log_err("bad option '%s'; see %s", name, help);
		return 2;
	}
	for (size_t i = 0; longopts[i].name && n < ARGS_MAX_OPTS; i++) {
		snprintf(full[n], sizeof(full[n]), "--%s", longopts[i].name);
		cands[n] = full[n];
		/* getopt_long takes a unique prefix: one shared by several is ambiguous. */
		if (strlen(name) > 2 && !strncmp(full[n], name, strlen(name))) {
			len = strlen(list);
			snprintf(list + len, sizeof(list) - len, "%s%s", len ? ", " : "", full[n]);
			prefixes++;
		}
		n++;
	}
	cands[n] = NULL;
	if (prefixes > 1) {
		log_err("ambiguous option '%s' (%s); see %s", name, list, help);
		return 2;
	}
	return args_unknown("option", name, cands, help);
}
