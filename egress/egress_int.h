/* SPDX-License-Identifier: MIT */
/*
 * Internals of the egress rules (egress*.c). Callers outside use egress.h.
 */
#ifndef OCSB_EGRESS_INT_H
#define OCSB_EGRESS_INT_H

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "conf.h"
#include "egress.h"
#include "fileops.h"

/* Bounds that no honest configuration reaches; they keep a runaway file from eating memory. */
#define EGRESS_MAX_RULES 100000
#define EGRESS_MAX_DROPINS 1000
#define HOST_MAX 253
/*
 * What glibc's regcomp (ours, and squid's) expands one regex to, and all the regexes of one
 * file: counted repeats copy their operand, so a few stacked or nested ones take gigabytes
 * ("b++++++++++++++++++++" 700 MB and 4 s). A host-name regex needs a few dozen.
 */
#define EGRESS_REGEX_MAX_WEIGHT 1024
#define EGRESS_REGEX_FILE_WEIGHT 4096

/* Never legitimate destinations (invariant 3), and internal networks: egress.c. */
extern const char *const egress_never_nets[];
extern const size_t egress_n_never_nets;
extern const char *const egress_private_nets[];
extern const size_t egress_n_private_nets;

/* The parser's context (egress.c's keyword handlers, egress_load.c's loaders). */
struct parse_ctx {
	struct egress *e;
	const char *file; /* borrowed from e->files */
	unsigned long re_weight; /* of the file's regexes so far (EGRESS_REGEX_FILE_WEIGHT) */
	size_t start_n; /* e->n when the file began */
	int setting; /* the file said policy, egress, dns or learn */
	int proposal; /* the file began with `proposal`: its rules are dropped at its end */
};
/* egress.conf's keywords, ending with a NULL entry: egress.c. */
extern const struct conf_kw egress_keywords[];

/* Shared by the files of the module; nothing outside it uses these. */
int egress_is_name_char(char c);
char egress_lower(char c);
void egress_rule_free(struct egress_rule *r);

#endif
