/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agentd.h"
#include "ctl.h"
#include "dirs.h"
#include "log.h"
#include "sdnotify.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb-agentd [--foreground] [--config FILE] [-v]\n"
		"The ocsb supervisor: installs and watches the netlock, runs the egress proxy\n"
		"and one OpenCode server per project as the agent, serves " PATHS_CTL_SOCK ".\n"
		"Runs as root, in the foreground (under systemd, or by hand).\n"
		"\n"
		"  --foreground     run in the foreground (the only mode; for clarity in scripts)\n"
		"  --config FILE    read FILE instead of /etc/ocsb/ocsb.conf\n"
		"  -v, --verbose    more detail in the log\n"
		"      --syslog     log to syslog instead of stderr\n"
		"  -h, --help       this text\n"
		"      --version    the version\n"
		"Signals: TERM/INT stop (every OpenCode at once, then the injector and the proxy),\n"
		"HUP reloads the rules (squid's once `squid -k parse` accepts them).\n"
		"See ocsb-agentd(8).\n");
}

/*
 * The netlock watchdog must not wait behind the load it guards: ocsb-agentd runs at a
 * higher priority than the agent's processes and everything else at nice 0, and
 * SCHED_RESET_ON_FORK hands none of it to what it starts (OpenCode, squid, the mirror's
 * writer start at nice 0). Without CAP_SYS_NICE (some containers) it runs at nice 0.
 */
static void raise_priority(void)
{
	struct sched_param sp = {0};

	if (sched_setscheduler(0, SCHED_OTHER | SCHED_RESET_ON_FORK, &sp) < 0 ||
		setpriority(PRIO_PROCESS, 0, AGENTD_NICE) < 0)
		log_warn("cannot raise the scheduling priority (%s): the netlock watchdog shares "
			 "the CPU with the agent's load on equal terms",
			strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"foreground", no_argument, NULL, 'f'},
		{"config", required_argument, NULL, 'c'},
		{"verbose", no_argument, NULL, 'v'},
		{"syslog", no_argument, NULL, 's'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct agentd *d;
	char notify[108];
	const char *config = NULL;
	int c, verbose = 0, use_syslog = 0, r;

	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
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
			usage(stderr);
			return 2;
		}
	}
	log_init("ocsb-agentd", use_syslog ? LOG_TARGET_SYSLOG : LOG_TARGET_DAEMON, verbose);
	if (optind < argc) {
		log_err("unexpected argument '%s'", argv[optind]);
		return 2;
	}
	if (geteuid() != 0) {
		log_err("must run as root");
		return 2;
	}
	if (sodium_init() < 0)
		fatal("libsodium failed to initialize");
	d = calloc(1, sizeof(*d));
	if (!d)
		return 1;
	paths_default(&d->paths);
	if (config)
		snprintf(d->config_path, sizeof(d->config_path), "%s", config);
	else
		path_join(d->config_path, sizeof(d->config_path), d->paths.etc, "ocsb/ocsb.conf");
	/* systemd's notify socket: ours to use, not our children's to inherit. */
	if (sd_notify_take(notify, sizeof(notify)) < 0)
		log_warn("NOTIFY_SOCKET is not a socket's name: systemd will not hear we are ready");
#ifdef OCSB_TEST_BUILD
	d->test_hooks = TESTHOOK_ON();
#endif
	/*
	 * One supervisor per machine: a live one listens on the socket (a busy one may take
	 * longer than any short deadline to reply; a stale file refuses the connection).
	 */
	if ((r = ctl_connect(d->paths.ctl_sock, 1000)) >= 0) {
		close(r);
		log_err("another ocsb-agentd is running (it listens on %s)", d->paths.ctl_sock);
		free(d);
		return 2;
	}
	raise_priority();
	if (agentd_setup(d) < 0) {
		log_err("start-up failed; nothing of the agent runs");
		agentd_free(d);
		free(d);
		return 1;
	}
	log_notice("running: agent %s, %zu OpenCode instance%s, control %s", d->agent.name, d->n_oc,
		d->n_oc == 1 ? "" : "s", d->ctl_path);
	/*
	 * Under the unit (Type=notify), ready means the netlock tables are verified: ssh,
	 * cron, at and logins (systemd-user-sessions) are ordered after this, so no process
	 * of the agent runs at boot before the table does.
	 */
	if ((r = sd_notify_send(notify, "READY=1\nSTATUS=netlock verified; supervising")) < 0)
		log_warn("telling systemd we are ready: %s", strerror(-r));
	r = agentd_run(d);
	log_notice("stopped");
	agentd_free(d);
	free(d);
	return r < 0 ? 1 : 0;
}
