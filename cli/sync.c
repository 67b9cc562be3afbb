/* SPDX-License-Identifier: MIT */
/*
 * `ocsb sync push|pull|status|init`: the command line. The options are parsed and checked
 * here; the work is the sync library's (sync/), run with the owner's rights.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "args.h"
#include "log.h"
#include "util.h"
#include "../sync/sync.h"

static int sync_parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || s[0] == '-')
		return -1;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10, end++;
		break;
	case 'm':
	case 'M':
		v <<= 20, end++;
		break;
	case 'g':
	case 'G':
		v <<= 30, end++;
		break;
	default:
		break;
	}
	if (*end)
		return -1;
	*ret = v;
	return 0;
}

static int sync_parse_secs(const char *s, int *ret)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v <= 0 || v > 86400)
		return -1;
	*ret = (int)v;
	return 0;
}

static void sync_usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb sync push [--to NAME] [--force] [--all] [BRANCH...]\n"
		"       ocsb sync pull [--json] [--strict] [--max-bytes N[KMG]] [--max-objects N]\n"
		"       ocsb sync status\n"
		"       ocsb sync init --host HOST [--accept-host-key SHA256:FP]\n"
		"Common: [--agent-auth] [--timeout SECS] [--connect-timeout SECS]\n"
		"        [--host HOST [--port N] [--agent NAME]]   (an agent on another machine)\n"
		"Run inside a project listed in /etc/ocsb/ocsb.conf. See ocsb(1), SYNC.\n"
		"Exit status: 0 done, 1 failed, 2 usage; pull --strict: %d when the review gate\n"
		"flags anything (the refs are fetched all the same).\n"
		"OCSB_SYNC_TRACE=1: a pull prints its phases (ms) on stderr.\n"
		"The review gate's flags (pull):\n",
		SYNC_EXIT_FLAGGED);
	sync_flags_print(f);
}

static const char *const sync_valued_opts[] = {"--to", "--host", "--agent", "--accept-host-key",
	"--port", "--max-bytes", "--max-objects", "--timeout", "--connect-timeout", NULL};
static const char *const sync_all_opts[] = {"--agent-auth", "--json", "--strict", "--force",
	"--all", "--help", "--to", "--host", "--agent", "--accept-host-key", "--port",
	"--max-bytes", "--max-objects", "--timeout", "--connect-timeout", NULL};
static const char *const sync_subs[] = {"push", "pull", "status", "init", NULL};

static int listed(const char *const *list, const char *a)
{
	for (size_t i = 0; list[i]; i++)
		if (!strcmp(list[i], a))
			return 1;
	return 0;
}

/* 0, or 2 (usage error, already reported). */
static int sync_parse_opts(struct sync_opts *o, int argc, char **argv)
{
	sync_opts_defaults(o);
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "--agent-auth"))
			o->agent_auth = 1;
		else if (!strcmp(a, "--json"))
			o->json = 1;
		else if (!strcmp(a, "--strict"))
			o->strict = 1;
		else if (!strcmp(a, "--force") || !strcmp(a, "-f"))
			o->force = 1;
		else if (!strcmp(a, "--all"))
			o->all = 1;
		else if (!strcmp(a, "--to") && v)
			o->to = v, i++;
		else if (!strcmp(a, "--host") && v)
			bad = !sync_host_name_ok(v), o->host = v, i++;
		else if (!strcmp(a, "--agent") && v)
			bad = !valid_user_name(v), o->agent = v, i++;
		else if (!strcmp(a, "--accept-host-key") && v)
			o->accept_fp = v, i++;
		else if (!strcmp(a, "--port") && v) {
			int port;

			bad = sync_parse_secs(v, &port) < 0 || port > 65535;
			o->port = bad ? 0 : (unsigned)port;
			i++;
		} else if (!strcmp(a, "--max-bytes") && v)
			bad = sync_parse_size(v, &o->max_bytes), i++;
		else if (!strcmp(a, "--max-objects") && v)
			bad = sync_parse_size(v, &o->max_objects), i++;
		else if (!strcmp(a, "--timeout") && v)
			bad = sync_parse_secs(v, &o->timeout_s), i++;
		else if (!strcmp(a, "--connect-timeout") && v)
			bad = sync_parse_secs(v, &o->connect_timeout_s), i++;
		else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			sync_usage(stdout);
			return 3;
		} else if (listed(sync_valued_opts, a)) {
			log_err("option '%s' needs a value; see ocsb sync --help", a);
			return 2;
		} else if (a[0] == '-') {
			return args_unknown("option", a, sync_all_opts, "ocsb sync --help");
		} else if (strv_push(&o->branches, a) < 0) {
			return 1;
		}
		if (bad) {
			log_err("bad value '%s' for %s; see ocsb sync --help", v, a);
			return 2;
		}
	}
	return 0;
}

int cmd_sync(int argc, char **argv)
{
	struct sync_opts o = {0};
	const char *sub = argc > 1 ? argv[1] : NULL;
	int r;

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		sync_usage(sub ? stdout : stderr);
		return sub ? 0 : 2;
	}
	if (sub[0] == '-' && listed(sync_all_opts, sub)) {
		log_err("%s goes after push, pull, status or init; see ocsb sync --help", sub);
		return 2;
	}
	if (!listed(sync_subs, sub))
		return args_unknown(sub[0] == '-' ? "option" : "subcommand", sub,
			sub[0] == '-' ? sync_all_opts : sync_subs, "ocsb sync --help");
	r = sync_parse_opts(&o, argc - 2, argv + 2);
	if (r) {
		strv_free(&o.branches);
		return r == 3 ? 0 : r;
	}
	if (o.strict && strcmp(sub, "pull")) {
		log_err("--strict is for 'ocsb sync pull'");
		strv_free(&o.branches);
		return 2;
	}
	if (strcmp(sub, "push") && (o.branches.n || o.to || o.force || o.all)) {
		log_err("sync %s takes no branch names, --to, --force or --all", sub);
		strv_free(&o.branches);
		return 2;
	}
	if ((o.port || o.agent || o.accept_fp) && !o.host) {
		log_err("--port, --agent and --accept-host-key go with --host HOST");
		strv_free(&o.branches);
		return 2;
	}
	if (o.accept_fp && strcmp(sub, "init")) {
		log_err("--accept-host-key is for 'ocsb sync init --host HOST'");
		strv_free(&o.branches);
		return 2;
	}
	r = sync_run(sub, &o);
	strv_free(&o.branches);
	return r;
}
