/* SPDX-License-Identifier: MIT */
/* `ocsb mirror status [--json]`: what the last mirror build mirrored, skipped and why. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "config.h"
#include "log.h"
#include "mirror.h"
#include "paths.h"

int cmd_mirror(int argc, char **argv)
{
	struct ocsb_config cfg;
	struct paths paths;
	char conf[4096], status[4096], err[1024], name[96];
	int json = 0, r;

	if (argc < 2 || strcmp(argv[1], "status") != 0) {
		log_err("usage: ocsb mirror status [--json]");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else {
			log_err("mirror status: unknown option '%s' (only --json)", argv[i]);
			return 2;
		}
	}
	paths_default(&paths);
	config_defaults(&cfg);
	if (path_join(conf, sizeof(conf), paths.etc, "ocsb/ocsb.conf") < 0)
		return 2;
	r = config_load(&cfg, conf, err, sizeof(err));
	if (r < 0) {
		log_err("%s",
			r == -ENOENT ? "no /etc/ocsb/ocsb.conf: run 'sudo ocsb-provision' first"
				     : err);
		config_free(&cfg);
		return 2;
	}
	snprintf(name, sizeof(name), "ocsb/mirror/%s.status", cfg.agent);
	r = path_join(status, sizeof(status), paths.varlib, name);
	config_free(&cfg);
	if (r < 0)
		return 2;
	r = mirror_status_print(status, json, stdout);
	if (r == -ENOENT) {
		log_err("%s: no mirror built yet: run 'sudo ocsb-provision'", status);
		return 1;
	}
	if (r == -EACCES) {
		log_err("%s: only root and the owner may read it", status);
		return 1;
	}
	if (r < 0) {
		log_err("%s: %s", status, strerror(-r));
		return 1;
	}
	return 0;
}
