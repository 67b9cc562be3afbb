/* SPDX-License-Identifier: MIT */
#ifndef OCSB_ARGS_H
#define OCSB_ARGS_H

#include <getopt.h>

/*
 * A mistyped word on a command line gets one line, not a page of usage: what was wrong,
 * the nearest valid word when one is close ("did you mean 'status'?"), and where the full
 * text is ("see ocsb --help"). Every program prints its bad-usage errors this way and
 * exits 2.
 */

/*
 * The candidate (cands: NULL-terminated) nearest to word, or NULL when none is close: at
 * most one edit away (two from a word of six characters or more), a swap of two neighbours
 * counting as one, or else the only candidate word is the start of.
 */
const char *args_nearest(const char *word, const char *const *cands);

/*
 * Logs "unknown WHAT 'WORD' (did you mean 'NEAREST'?); see HELP" (without the suggestion
 * when nothing is close) and returns 2.
 */
int args_unknown(const char *what, const char *word, const char *const *cands, const char *help);

/*
 * getopt_long's return for a bad option (opterr = 0 and an optstring starting with ':'):
 * ':' a value is missing, '?' an unknown or ambiguous option; argv as given to getopt_long,
 * longopts its table (the suggestions). One line as above; returns 2.
 */
int args_getopt_error(int c, char **argv, const struct option *longopts, const char *help);

#endif
