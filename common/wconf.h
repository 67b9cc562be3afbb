/* SPDX-License-Identifier: MIT */
#ifndef OCSB_WCONF_H
#define OCSB_WCONF_H

/*
 * What ocsb-warden takes of ocsb.conf, as a record. The warden holds no reader of the
 * file: at its start and on each reload it runs `ocsb-provision --warden-config`, a
 * one-shot root process that reads and checks the file as provisioning does and prints
 * the record (config_render_warden), and reads that (warden/main.c runs it, wconf_parse
 * reads it). One item a line, in this order; `project` repeats; nothing follows `end`:
 *
 *   ocsb-warden-config 1
 *   agent NAME
 *   owner NAME
 *   proxy-port PORT
 *   agent-ports LOW HIGH              (0 0: none)
 *   opencode-bin PATH
 *   opencode-port PORT
 *   limits BYTES TASKS PERCENT        (resolved against this machine; 0: none)
 *   mirror 0|1                        (whether `mirror` lists a path)
 *   project PATH                      (0 or more)
 *   end
 *
 * A refusal is the single line "error MESSAGE" (the file, its line, what to do).
 */
#include <stdint.h>

#include "util.h"

#define WCONF_MAGIC "ocsb-warden-config 1"
#define WCONF_MAX 65536 /* bytes of a record */

struct wconf {
	char agent[64], owner[64];
	unsigned proxy_port, ports_lo, ports_hi, opencode_port;
	char opencode_bin[1024];
	uint64_t memory_max;
	unsigned tasks_max, cpu_percent;
	int mirror;
	struct strv projects;
};

struct ocsb_config;
/* ocsb-provision's side: the record of a configuration that config_validate accepted. */
int config_render_warden(const struct ocsb_config *c, struct buf *out);
/* The warden's side (common/wconf.c): buf holds len bytes; 0, or -1 with the reason in err. */
int wconf_parse(const char *buf, size_t len, struct wconf *ret, char *err, size_t errlen);
void wconf_free(struct wconf *c);

#endif
