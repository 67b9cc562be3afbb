/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "inject.h"
#include "args.h"
#include "log.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb-inject [--fd N] [-v]\n"
		"ocsb's credential injector: one plain-HTTP listener on 127.0.0.1 per route,\n"
		"each request forwarded to the route's upstream over verified TLS with the\n"
		"real key added. Started by ocsb-agentd as the ocsb-inject account; routes and\n"
		"keys arrive on the socket N (default 3), never on argv, the environment or disk,\n"
		"after the route ports' listeners (agentd holds them; the injector binds none).\n"
		"\n"
		"  --fd N           the hand-over socket from ocsb-agentd (default 3)\n"
		"  -v, --verbose    more detail in the log\n"
		"  -h, --help       this text\n"
		"      --version    the version\n"
		"See ocsb-agentd(8).\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"fd", required_argument, NULL, 'f'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct rlimit core = {0, 0};
	struct stat st;
	int c, fd = 3, verbose = 0, type = 0;
	socklen_t tl = sizeof(type);
	char *e;

	/*
	 * Before anything holds a key: no core file, and no ptrace or /proc/PID/mem by
	 * anyone but root (the process is not dumpable).
	 */
	if (setrlimit(RLIMIT_CORE, &core) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
		fprintf(stderr, "ocsb-inject: cannot turn core dumps off: %s\n", strerror(errno));
		return 1;
	}
	log_init("ocsb-inject", LOG_TARGET_STDERR, 0);
	opterr = 0; /* one line of ours for a bad option (args.h), not getopt's and the usage */
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			fd = (int)strtol(optarg, &e, 10);
			if (*e || fd < 0) {
				log_err("--fd %s: not a descriptor number; see ocsb-inject --help",
					optarg);
				return 2;
			}
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("ocsb-inject %s\n", OCSB_VERSION);
			return 0;
		default:
			return args_getopt_error(c, argv, longopts, "ocsb-inject --help");
		}
	}
	if (optind != argc) {
		log_err("unexpected argument '%s'; see ocsb-inject --help", argv[optind]);
		return 2;
	}
	log_init("ocsb-inject", LOG_TARGET_DAEMON, verbose);
	/* It parses what the agent sends: root would make a parser bug a root compromise. */
	if (geteuid() == 0 || getuid() == 0)
		fatal("refusing to run as root: ocsb-agentd starts it as the ocsb-inject account");
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode) ||
		getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM)
		fatal("fd %d is not the hand-over socket from ocsb-agentd", fd);
	if (sodium_init() < 0)
		fatal("libsodium did not start");
	signal(SIGPIPE, SIG_IGN);
	return inj_daemon(fd) < 0 ? 1 : 0;
}
