/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentd.h"
#include "dirs.h"
#include "args.h"
#include "log.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb-agentd --supervise [-v] [--syslog] [--config FILE]\n"
		"       ocsb-agentd --mirror-read|--mirror-link|--owner-egress|--mirror-watch\n"
		"                   --config FILE\n"
		"The ocsb supervisor, unprivileged: runs the egress proxy, the credential injector\n"
		"and one OpenCode server per project through ocsb-warden, and serves\n"
		PATHS_CTL_SOCK ". ocsb-warden (root) starts it as the account ocsb-agentd, with\n"
		"its protocol's socket as fd 3 and the control socket as fd 4: run ocsb-warden,\n"
		"not this.\n"
		"\n"
		"  --supervise      the supervisor (what ocsb-warden runs)\n"
		"  --mirror-read, --mirror-link, --owner-egress\n"
		"                   one job, run by ocsb-warden as the owner or the agent\n"
		"  --mirror-watch   the mirror's watcher, run by ocsb-warden as the owner\n"
		"  --config FILE    read FILE instead of /etc/ocsb/ocsb.conf\n"
		"  -v, --verbose    more detail in the log\n"
		"      --syslog     log to syslog instead of stderr\n"
		"  -h, --help       this text\n"
		"      --version    the version\n"
		"Signals: TERM/INT stop (every OpenCode at once, then the injector and the proxy),\n"
		"HUP reloads the rules (through ocsb-warden, which re-reads ocsb.conf first).\n"
		"See ocsb-agentd(8).\n");
}

enum mode {
	MODE_NONE,
	MODE_SUPERVISE,
	MODE_MIRROR_READ,
	MODE_MIRROR_LINK,
	MODE_OWNER_EGRESS,
	MODE_MIRROR_WATCH,
};

static int supervise(const char *config)
{
	struct agentd *d;
	int r;

	if (sodium_init() < 0)
		fatal("libsodium failed to initialize");
	d = calloc(1, sizeof(*d));
	if (!d)
		return 1;
	d->wfd = WP_SUPERVISOR_FD;
	d->ctlfd = WP_CTL_FD;
	paths_default(&d->paths);
	if (snprintf(d->config_path, sizeof(d->config_path), "%s", config) >=
		(int)sizeof(d->config_path)) {
		log_err("%s: path too long", config);
		free(d);
		return 2;
	}
	if (agentd_setup(d) < 0) {
		log_err("start-up failed; nothing of the agent runs");
		agentd_free(d);
		free(d);
		return 1;
	}
	log_notice("running: agent %s, %zu OpenCode instance%s, control %s", d->agent.name, d->n_oc,
		d->n_oc == 1 ? "" : "s", d->ctl_path);
	r = agentd_run(d);
	log_notice("stopped");
	agentd_free(d);
	free(d);
	return r < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"supervise", no_argument, NULL, 'S'},
		{"mirror-read", no_argument, NULL, 'R'},
		{"mirror-link", no_argument, NULL, 'L'},
		{"owner-egress", no_argument, NULL, 'E'},
		{"mirror-watch", no_argument, NULL, 'W'},
		{"config", required_argument, NULL, 'c'},
		{"verbose", no_argument, NULL, 'v'},
		{"syslog", no_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	char defconf[4096];
	const char *config = NULL;
	enum mode mode = MODE_NONE;
	int c, verbose = 0, use_syslog = 0;

	log_init("ocsb-agentd", LOG_TARGET_STDERR, 0);
	opterr = 0; /* one line of ours for a bad option (args.h), not getopt's and the usage */
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		enum mode m = MODE_NONE;

		switch (c) {
		case 'S':
			m = MODE_SUPERVISE;
			break;
		case 'R':
			m = MODE_MIRROR_READ;
			break;
		case 'L':
			m = MODE_MIRROR_LINK;
			break;
		case 'E':
			m = MODE_OWNER_EGRESS;
			break;
		case 'W':
			m = MODE_MIRROR_WATCH;
			break;
		case 'c':
			config = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 's':
			use_syslog = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ocsb-agentd %s\n", OCSB_VERSION);
			return 0;
		default:
			return args_getopt_error(c, argv, longopts, "ocsb-agentd --help");
		}
		if (m != MODE_NONE) {
			if (mode != MODE_NONE && mode != m) {
				log_err("one mode at a time; see ocsb-agentd --help");
				return 2;
			}
			mode = m;
		}
	}
	log_init("ocsb-agentd", use_syslog ? LOG_TARGET_SYSLOG : LOG_TARGET_DAEMON, verbose);
	if (optind < argc) {
		log_err("unexpected argument '%s'; see ocsb-agentd --help", argv[optind]);
		return 2;
	}
	if (mode == MODE_NONE) {
		usage(stderr);
		return 2;
	}
	/*
	 * Nothing here needs root, and nothing should run with it: the root part is
	 * ocsb-warden, which starts this program as someone else for each job.
	 */
	if (geteuid() == 0 || getuid() == 0) {
		log_err("ocsb-agentd is started by ocsb-warden (run that as root)");
		return 2;
	}
	if (!config) {
		struct paths p;

		paths_default(&p);
		if (path_join(defconf, sizeof(defconf), p.etc, "ocsb/ocsb.conf") < 0)
			return 2;
		config = defconf;
	}
	switch (mode) {
	case MODE_SUPERVISE:
		return supervise(config);
	case MODE_MIRROR_READ:
		return agentd_mode_mirror_read(config);
	case MODE_MIRROR_LINK:
		return agentd_mode_mirror_link(config);
	case MODE_OWNER_EGRESS:
		return agentd_mode_owner_egress(config);
	case MODE_MIRROR_WATCH:
		return agentd_mode_mirror_watch(config);
	case MODE_NONE:
		break;
	}
	return 2;
}
