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
#include <sys/resource.h>

#include "log.h"
#include "mirror.h"
#include "paths.h"

/* CPU milliseconds (user + system) of this process and its reaped children. */
static long cpu_ms(void)
{
	struct rusage a, b;

	getrusage(RUSAGE_SELF, &a);
	getrusage(RUSAGE_CHILDREN, &b);
	return (a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) *
		1000 +
		(a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec +
			b.ru_stime.tv_usec) /
		1000;
}

int main(int argc, char **argv)
{
	struct user_info owner, agent;
	struct mirror_spec spec = {0};
	struct paths paths;
	int rounds, nochange_only = 0;

	if (argc != 4 && argc != 6) {
		fprintf(stderr, "usage: %s OWNER AGENT ROUNDS [STATE-ROOT OWNER-HOME]\n", argv[0]);
		return 2;
	}
	log_init("bench_mirror", LOG_TARGET_STDERR, 0);
	rounds = atoi(argv[3]);
	/* -N: N no-change refreshes of the existing tree only (manifest loaded from disk). */
	if (rounds < 0) {
		nochange_only = 1;
		rounds = -rounds;
	}
	if (user_lookup(argv[1], &owner) < 0 || user_lookup(argv[2], &agent) < 0) {
		fprintf(stderr, "unknown user\n");
		return 2;
	}
	paths_default(&paths);
	/* Profiling outside the harness: state below STATE-ROOT, sources in OWNER-HOME. */
	if (argc == 6) {
		if (paths_under(&paths, argv[4]) < 0)
			return 2;
		snprintf(owner.home, sizeof(owner.home), "%s", argv[5]);
	}
	strv_push(&spec.paths, ".config/opencode");
	spec.set = 1;
	for (int i = 0; i < rounds; i++) {
		struct mirror m;
		struct mirror_stats full, again;
		long c0, c1;

		if (mirror_init(&m, &paths, &owner, &agent, &spec) < 0)
			return 1;
		if (nochange_only) {
			if (mirror_load(&m) < 0)
				return 1;
			c0 = cpu_ms();
			if (mirror_refresh(&m, 0, &again) < 0)
				return 1;
			printf("nochange %ld %u cpu %ld\n", again.ms, again.written + again.removed,
				cpu_ms() - c0);
			mirror_free(&m);
			continue;
		}
		mirror_remove(&m);
		c0 = cpu_ms();
		if (mirror_refresh(&m, 0, &full) < 0)
			return 1;
		c1 = cpu_ms();
		if (mirror_refresh(&m, 0, &again) < 0)
			return 1;
		printf("full %ld %u cpu %ld\nnochange %ld %u cpu %ld\n", full.ms, full.written,
			c1 - c0, again.ms, again.written + again.removed, cpu_ms() - c1);
		mirror_free(&m);
	}
	mirror_spec_free(&spec);
	return 0;
}
