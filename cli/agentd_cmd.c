/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ctl.h"
#include "args.h"
#include "log.h"
#include "paths.h"

static int call(struct ctl_request *rq, struct ctl_response *resp)
{
	char err[1024];
	struct paths p;

	paths_default(&p);
	if (ctl_call(p.ctl_sock, rq, resp, 10000, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return 1;
	}
	if (!resp->ok) {
		log_err("ocsb-agentd: %s", resp->error);
		ctl_response_free(resp);
		return 1;
	}
	return 0;
}

/* Key/value lines as the daemon sent them, grouped: a new block at each instance/proxy. */
static void print_blocks(const struct ctl_response *r)
{
	for (size_t i = 0; i < r->keys.n; i++) {
		const char *k = r->keys.v[i];

		if (!strcmp(k, "instance") || !strcmp(k, "proxy"))
			printf("\n%s %s\n", k, r->values.v[i]);
		else if (!strcmp(k, "log"))
			printf("%s\n", r->values.v[i]);
		else
			printf("  %-24s %s\n", k, r->values.v[i]);
	}
}

int cmd_agentd(int argc, char **argv)
{
	struct ctl_request rq = {0};
	struct ctl_response resp;
	const char *cmd = argv[0];
	int r;

	if (!strcmp(cmd, "status") && argc == 1) {
		rq.verb = CTL_STATUS;
	} else if (!strcmp(cmd, "web") && argc == 1) {
		rq.verb = CTL_WEB;
	} else if (!strcmp(cmd, "restart") && argc <= 2) {
		rq.verb = CTL_RESTART;
		if (argc == 2)
			snprintf(rq.arg, sizeof(rq.arg), "%s", argv[1]);
	} else if (!strcmp(cmd, "logs") && (argc == 1 || (argc == 3 && !strcmp(argv[1], "-n")))) {
		rq.verb = CTL_LOGS;
		if (argc == 3) {
			char *end;
			unsigned long n = strtoul(argv[2], &end, 10);

			if (*end || n < 1 || n > CTL_MAX_LOG_LINES) {
				log_err("-n: a number from 1 to %d; see ocsb --help",
					CTL_MAX_LOG_LINES);
				return 2;
			}
			rq.count = (unsigned)n;
		}
	} else if (!strcmp(cmd, "logs") && argc == 2 && !strcmp(argv[1], "-n")) {
		log_err("-n needs a number of lines; see ocsb --help");
		return 2;
	} else if (!strcmp(cmd, "logs") && argv[1][0] == '-' && strcmp(argv[1], "-n")) {
		static const char *const opts[] = {"-n", NULL};

		return args_unknown("option", argv[1], opts, "ocsb --help");
	} else {
		const char *form = "";

		if (!strcmp(cmd, "restart"))
			form = " [PROJECT]";
		else if (!strcmp(cmd, "logs"))
			form = " [-n N]";
		log_err("unexpected argument '%s' (ocsb %s%s); see ocsb --help", argv[argc - 1],
			cmd, form);
		return 2;
	}
	r = call(&rq, &resp);
	if (r)
		return r;
	if (rq.verb == CTL_RESTART)
		printf("restarted %s instance%s\n", ctl_response_get(&resp, "restarted"),
			strcmp(ctl_response_get(&resp, "restarted"), "1") ? "s" : "");
	else
		print_blocks(&resp);
	ctl_response_free(&resp);
	return 0;
}
