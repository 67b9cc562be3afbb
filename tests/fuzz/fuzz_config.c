/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ocsb.conf (common/config.c and common/config_full.c on the
 * keyword-file parser of common/conf.c, the mirror keywords of common/config_mirror.c), the
 * record the warden takes of it (config_render_warden, read by common/wconf.c) and the file
 * ocsb-provision writes from it (common/config_render.c). The input is the file. Besides
 * the sanitizers' findings, abort() when:
 *   - a refusal's message does not start with "ocsb.conf:LINE: ";
 *   - the warden's reader refuses the record of a file the whole reader accepts and
 *     validates, or reads other values from it than the whole reader's;
 *   - a file that parses, rendered by config_render, does not parse again (with the same
 *     config_validate verdict) to the very same values, or renders differently the second
 *     time (what provisioning writes is what it read);
 *   - a file that parses and validates has values outside what config_validate promises
 *     (ports in range, the OpenCode ports clear of ssh-port, proxy-port and agent-ports).
 * Build and run: `make fuzz FUZZ_ONLY=config` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "wconf.h"
#include "fuzz_util.h"

static int strv_equal(const struct strv *a, const struct strv *b)
{
	if (a->n != b->n)
		return 0;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->v[i], b->v[i]))
			return 0;
	return 1;
}

/* Every value (not the line numbers, which the rendered file moves). */
static void check_same(const struct ocsb_config *a, const struct ocsb_config *b)
{
	CHECK(!strcmp(a->agent, b->agent) && !strcmp(a->owner, b->owner));
	CHECK(strv_equal(&a->projects, &b->projects));
	CHECK(strv_equal(&a->keys, &b->keys));
	CHECK(strv_equal(&a->sync_keys, &b->sync_keys));
	CHECK(!strcmp(a->shell, b->shell));
	CHECK(a->ssh_port == b->ssh_port && a->proxy_port == b->proxy_port);
	CHECK(a->ports_lo == b->ports_lo && a->ports_hi == b->ports_hi);
	CHECK(!a->ports_line == !b->ports_line);
	CHECK(!strcmp(a->opencode_bin, b->opencode_bin));
	CHECK(a->opencode_bin_set == b->opencode_bin_set);
	CHECK(a->opencode_port == b->opencode_port);
	CHECK(a->limit_memory == b->limit_memory && a->limit_tasks == b->limit_tasks &&
		a->limit_cpu == b->limit_cpu);
	CHECK(a->mirror.set == b->mirror.set);
	CHECK(strv_equal(&a->mirror.paths, &b->mirror.paths));
	CHECK(strv_equal(&a->mirror.writable, &b->mirror.writable));
	CHECK(strv_equal(&a->mirror.noscan, &b->mirror.noscan));
}

static void check_valid(const struct ocsb_config *c)
{
	unsigned lo, hi;

	CHECK(c->ssh_port >= 1 && c->ssh_port <= 65535 && c->proxy_port >= 1 &&
		c->proxy_port <= 65535 && c->ssh_port != c->proxy_port);
	CHECK(strcmp(c->agent, "root") && strcmp(c->agent, c->owner));
	if (c->ports_hi)
		CHECK(c->ports_lo >= 1024 && c->ports_lo <= c->ports_hi && c->ports_hi <= 65535 &&
			!(c->ssh_port >= c->ports_lo && c->ssh_port <= c->ports_hi) &&
			!(c->proxy_port >= c->ports_lo && c->proxy_port <= c->ports_hi) &&
			(c->ports_hi < OCSB_ROUTE_PORT_LO || c->ports_lo > OCSB_ROUTE_PORT_HI));
	config_opencode_ports(c, &lo, &hi);
	CHECK(lo >= 1024 && lo <= hi && hi <= 65535);
	CHECK(!(c->ssh_port >= lo && c->ssh_port <= hi));
	CHECK(!(c->proxy_port >= lo && c->proxy_port <= hi));
	if (c->ports_hi)
		CHECK(hi < c->ports_lo || lo > c->ports_hi);
	CHECK(c->opencode_bin[0] == '/');
	for (size_t i = 0; i < c->mirror.writable.n; i++)
		CHECK(strv_contains(&c->mirror.paths, c->mirror.writable.v[i]));
}

/* The warden's record of a file that parses and validates: read back to the same values. */
static void check_warden(const struct ocsb_config *full)
{
	struct buf rec = {0};
	struct wconf w;
	char err[1024];
	uint64_t memory;
	unsigned tasks, cpu;

	CHECK(config_render_warden(full, &rec) == 0);
	if (wconf_parse(rec.data, rec.len, &w, err, sizeof(err)) < 0) {
		fprintf(stderr, "record refused: %s\n", err);
		CHECK(!"the warden reads the record of a valid file");
	}
	config_limits(full, &memory, &tasks, &cpu);
	CHECK(!strcmp(w.agent, full->agent) && !strcmp(w.owner, full->owner));
	CHECK(strv_equal(&w.projects, &full->projects));
	CHECK(w.proxy_port == full->proxy_port);
	CHECK(w.ports_lo == full->ports_lo && w.ports_hi == full->ports_hi);
	CHECK(!strcmp(w.opencode_bin, full->opencode_bin));
	CHECK(w.opencode_port == full->opencode_port);
	CHECK(w.memory_max == memory && w.tasks_max == tasks && w.cpu_percent == cpu);
	CHECK(w.mirror == (full->mirror.paths.n > 0));
	wconf_free(&w);
	buf_free(&rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ocsb_config c, back;
	struct buf text = {0}, again = {0};
	char err[1024], err2[1024];
	int valid;

	config_defaults(&c);
	err[0] = '\0';
	if (config_parse_buf(&c, (const char *)data, size, "ocsb.conf", err, sizeof(err)) < 0) {
		unsigned line;
		int off = 0;

		CHECK(sscanf(err, "ocsb.conf:%u: %n", &line, &off) == 1 && off > 0 && line > 0);
		config_free(&c);
		return 0;
	}
	valid = config_validate(&c, err, sizeof(err)) == 0;
	if (valid) {
		check_valid(&c);
		if (c.owner[0])
			check_warden(&c);
	}

	CHECK(config_render(&c, &text) == 0);
	config_defaults(&back);
	if (config_parse_buf(&back, text.data, text.len, "ocsb.conf", err2, sizeof(err2)) < 0) {
		fprintf(stderr, "rendered file refused: %s\n", err2);
		CHECK(!"the rendered configuration parses");
	}
	check_same(&c, &back);
	CHECK((config_validate(&back, err2, sizeof(err2)) == 0) == valid);
	CHECK(config_render(&back, &again) == 0);
	CHECK(again.len == text.len && !memcmp(again.data, text.data, text.len));

	buf_free(&text);
	buf_free(&again);
	config_free(&c);
	config_free(&back);
	return 0;
}
