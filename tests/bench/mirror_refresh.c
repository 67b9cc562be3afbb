/* SPDX-License-Identifier: MIT */
/*
 * bench_mirror_refresh OWNER AGENT ROUNDS: time a full mirror build of the owner's
 * ~/.config/opencode (the tree removed first) and a no-change refresh, ROUNDS times each,
 * through the same engine ocsb-provision and ocsb-agentd use (reader child as the owner,
 * root writes the tree). Prints "full MS" and "nochange MS" lines. Root only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mirror.h"
#include "paths.h"

int main(int argc, char **argv)
{
	struct user_info owner, agent;
	struct mirror_spec spec = {0};
	struct paths paths;
	int rounds;

	if (argc != 4) {
		fprintf(stderr, "usage: %s OWNER AGENT ROUNDS\n", argv[0]);
		return 2;
	}
	log_init("bench_mirror", LOG_TARGET_STDERR, 0);
	rounds = atoi(argv[3]);
	if (user_lookup(argv[1], &owner) < 0 || user_lookup(argv[2], &agent) < 0) {
		fprintf(stderr, "unknown user\n");
		return 2;
	}
	paths_default(&paths);
	strv_push(&spec.paths, ".config/opencode");
	spec.set = 1;
	for (int i = 0; i < rounds; i++) {
		struct mirror m;
		struct mirror_stats full, again;

		if (mirror_init(&m, &paths, &owner, &agent, &spec) < 0)
			return 1;
		mirror_remove(&m);
		if (mirror_refresh(&m, 0, &full) < 0 || mirror_refresh(&m, 0, &again) < 0)
			return 1;
		printf("full %ld %u\nnochange %ld %u\n", full.ms, full.written, again.ms,
			again.written + again.removed);
		mirror_free(&m);
	}
	mirror_spec_free(&spec);
	return 0;
}
