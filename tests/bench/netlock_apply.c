/* SPDX-License-Identifier: MIT */
/*
 * bench: time netlock_apply (one atomic batch) N times, and the same table loaded by
 * nft(8) from its text form, the reference. Root, in a network namespace of its own
 * (tests/bench/netlock runs it inside the e2e harness). Prints figures; never fails
 * on a timing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "netlock.h"
#include "spawn.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *t, int n)
{
	qsort(t, (size_t)n, sizeof(*t), cmp);
	printf("# %-28s p50 %7.3f ms   p99 %7.3f ms   max %7.3f ms   (%d runs)\n", what, t[n / 2],
		t[(n * 99) / 100], t[n - 1], n);
}

int main(int argc, char **argv)
{
	struct netlock_spec s = {.uid = 1000, .proxy_port = 3128};
	int n = argc > 1 ? atoi(argv[1]) : 200;
	double *ours = calloc((size_t)n, sizeof(double)), *ref = calloc((size_t)n, sizeof(double));
	char err[1024], path[] = "/tmp/ocsb-bench-nft.XXXXXX";
	struct buf text = {0};
	int fd;

	if (!ours || !ref || n < 1)
		return 1;
	for (int i = 0; i < n; i++) {
		double t0 = now_ms();

		if (netlock_apply(&s, err, sizeof(err)) < 0) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		ours[i] = now_ms() - t0;
	}
	if (netlock_verify(&s, err, sizeof(err)) != 0) {
		fprintf(stderr, "verify after the runs: %s\n", err);
		return 1;
	}
	/* The reference: nft -f with the same table (flush first, like our replace). */
	netlock_render_nft(&s, &text);
	fd = mkstemp(path);
	if (fd < 0 || dprintf(fd, "table inet ocsb\ndelete table inet ocsb\n%s", text.data) < 0)
		return 1;
	close(fd);
	for (int i = 0; i < n; i++) {
		const char *argv2[] = {"/usr/sbin/nft", "-f", path, NULL};
		struct spawn_opts o = {.capture = 1};
		struct spawn_result r;
		double t0 = now_ms();

		if (spawn_run(argv2, &o, &r) < 0 || r.status != 0) {
			fprintf(stderr, "nft -f failed: %s\n", r.output ? r.output : "");
			return 1;
		}
		ref[i] = now_ms() - t0;
		spawn_result_free(&r);
	}
	unlink(path);
	report("netlock_apply (libnftnl)", ours, n);
	report("nft -f (reference)", ref, n);
	printf("# apply p50 / nft p50: %.3f\n", ours[n / 2] / ref[n / 2]);
	netlock_remove(err, sizeof(err));
	buf_free(&text);
	free(ours);
	free(ref);
	return 0;
}
