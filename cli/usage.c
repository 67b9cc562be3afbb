/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "fileops.h"
#include "json.h"
#include "args.h"
#include "log.h"
#include "paths.h"
#include "../inject/inject.h"

/*
 * `ocsb usage [--json]`: what went through the injected routes, per route and day, as
 * ocsb-agentd summed it from ocsb-inject's reports (inject/inject.h, INJ_USAGE_REL).
 * Tokens are the provider's own figures where its answers carry them.
 */
int cmd_usage(int argc, char **argv)
{
	struct inj_usage_row *rows = calloc(INJ_USAGE_MAX_ROWS, sizeof(*rows));
	struct paths paths;
	char path[4096], *text = NULL;
	size_t len, n = 0;
	int json = 0, r, rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("Usage: ocsb usage [--json]\n"
			       "Requests, bytes, answer statuses and tokens per injected route and "
			       "day (UTC),\nas ocsb-agentd counted them; REFUSED: requests and "
			       "connections the injector\nanswered itself (never sent upstream). "
			       "See ocsb(1).\n");
			free(rows);
			return 0;
		} else {
			static const char *const opts[] = {"--json", "--help", NULL};

			free(rows);
			return args_unknown(argv[i][0] == '-' ? "option" : "argument", argv[i],
				opts, "ocsb usage --help");
		}
	}
	if (!rows)
		return 1;
	paths_default(&paths);
	if (path_join(path, sizeof(path), paths.varlib, INJ_USAGE_REL) < 0)
		goto out;
	r = fo_read(path, 1 << 20, &text, &len);
	if (r < 0 && r != -ENOENT) {
		log_err("%s: %s%s", path, strerror(-r),
			r == -EACCES ? " (the agent's owner and root read it)" : "");
		goto out;
	}
	if (text && inj_usage_parse(text, rows, &n, INJ_USAGE_MAX_ROWS) < 0) {
		log_err("%s: not a usage file of this version", path);
		goto out;
	}
	if (json) {
		struct buf b = {0};
		buf_puts(&b, "[");
		for (size_t i = 0; i < n; i++) {
			const struct inj_usage_row *u = &rows[i];
			buf_puts(&b, i ? ",\n {\"route\":" : "\n {\"route\":");
			json_buf_str(&b, u->route);
			buf_printf(&b,
				",\"day\":\"%s\",\"requests\":%llu,\"bytes_up\":%llu,"
				"\"bytes_down\":%llu,\"input_tokens\":%llu,\"output_tokens\":%llu,"
				"\"status\":{\"2xx\":%llu,\"3xx\":%llu,\"4xx\":%llu,\"5xx\":%llu,"
				"\"failed\":%llu},\"refused\":%llu}",
				u->day, u->n, u->req, u->resp, u->in, u->out, u->st[0], u->st[1],
				u->st[2], u->st[3], u->st[4], u->refused);
		}
		buf_puts(&b, n ? "\n]\n" : "]\n");
		fputs(b.data, stdout);
		buf_free(&b);
	} else if (!n) {
		printf("no requests through injected routes yet (ocsb secrets set NAME --inject)\n");
	} else {
		printf("%-24s %-10s %8s %10s %10s %10s %10s  %-22s %s\n", "ROUTE", "DAY",
			"REQUESTS", "UP", "DOWN", "IN-TOK", "OUT-TOK", "2xx/3xx/4xx/5xx/failed",
			"REFUSED");
		for (size_t i = 0; i < n; i++) {
			const struct inj_usage_row *u = &rows[i];
			char st[128];
			snprintf(st, sizeof(st), "%llu/%llu/%llu/%llu/%llu", u->st[0], u->st[1],
				u->st[2], u->st[3], u->st[4]);
			printf("%-24s %-10s %8llu %10llu %10llu %10llu %10llu  %-22s %llu\n",
				u->route, u->day, u->n, u->req, u->resp, u->in, u->out, st,
				u->refused);
		}
	}
	rc = 0;
out:
	free(text);
	free(rows);
	return rc;
}
