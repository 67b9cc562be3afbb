/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the agents registry (<varlib>/ocsb/agents/NAME, written by
 * ocsb-provision, provision/account.c), which two readers parse: the netlock's
 * (netlock_entry_parse, netlock/netlock_set.c: the agent-ports range the table opens to
 * that agent's uid) and provisioning's (ports_entry_parse, provision/ports.c: the ranges
 * another agent's run checks its own against, ports_conflict). The input is an entry's
 * text. Besides the sanitizers' findings, abort() when:
 *   - the two readers disagree on the agent-ports range (provisioning would check its
 *     ranges against another range than the one the netlock opens);
 *   - a range read is one config_agent_ports would refuse (every range opened is one an
 *     ocsb.conf could hold), or a refused ports line leaves no reason;
 *   - the OpenCode ports read are not a range of 1024..65535 (or none);
 *   - the entry as account.c writes it from what was read is not read back the same;
 *   - ports_conflict's verdict on the range is not what the ranges say.
 * Build and run: `make fuzz FUZZ_ONLY=registry` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "netlock_int.h"
#include "../../provision/provision.h"
#include "fuzz_util.h"

/* Both readers take a file of at most 4096 bytes (fo_read) as a C string. */
#define ENTRY_MAX 4096

static void read_both(const char *text, struct ports_entry *pe, struct netlock_entry *ne)
{
	char *copy = strdup(text);

	CHECK(copy != NULL);
	ports_entry_parse(text, pe);
	netlock_entry_parse(copy, ne);
	free(copy);
}

static int overlap(unsigned alo, unsigned ahi, unsigned blo, unsigned bhi)
{
	return alo && blo && alo <= bhi && blo <= ahi;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ports_entry pe, pe2;
	struct netlock_entry ne, ne2;
	struct ocsb_config c;
	struct buf w = {0};
	char *text, err[2048], why[256];
	unsigned lo, hi;
	int conflict;

	if (size > ENTRY_MAX)
		return 0;
	text = malloc(size + 1);
	CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	read_both(text, &pe, &ne);

	CHECK(pe.lo == ne.ports.lo && pe.hi == ne.ports.hi);
	CHECK(!pe.lo == !pe.hi);
	if (pe.lo) {
		char v[32];
		snprintf(v, sizeof(v), "%u-%u", pe.lo, pe.hi);
		CHECK(config_agent_ports(v, &lo, &hi, why, sizeof(why)) == 0);
		CHECK(lo == pe.lo && hi == pe.hi && !ne.why[0]);
	}
	/* A ports line that gives no range says why. */
	if (!pe.lo && (strncmp(text, "ports ", 6) == 0 || strstr(text, "\nports ")))
		CHECK(ne.why[0]);
	CHECK(!pe.oc_lo == !pe.oc_hi);
	if (pe.oc_lo)
		CHECK(pe.oc_lo >= 1024 && pe.oc_lo <= pe.oc_hi && pe.oc_hi <= 65535);
	CHECK(ne.uid == (uid_t)-1 || ne.uid < (uid_t)-1);

	/* What account.c's state_text writes of these values reads back the same. */
	CHECK(buf_puts(&w,
		      "# written by ocsb-provision; do not edit\nagent ai-dev\n"
		      "origin created\n") == 0);
	if (ne.uid != (uid_t)-1)
		CHECK(buf_printf(&w, "uid %u\n", (unsigned)ne.uid) == 0);
	if (pe.lo)
		CHECK(buf_printf(&w, "ports %u-%u\n", pe.lo, pe.hi) == 0);
	if (pe.oc_lo)
		CHECK(buf_printf(&w, "opencode-ports %u-%u\n", pe.oc_lo, pe.oc_hi) == 0);
	read_both(w.data, &pe2, &ne2);
	CHECK(!memcmp(&pe, &pe2, sizeof(pe)));
	CHECK(ne2.uid == ne.uid && ne2.ports.lo == ne.ports.lo && ne2.ports.hi == ne.ports.hi);
	CHECK(!ne2.why[0]);

	/* Another agent's run against this entry: a conflict exactly where ranges meet. */
	config_defaults(&c);
	c.ports_lo = 8000;
	c.ports_hi = 8099;
	c.ports_line = 9;
	conflict = ports_conflict(&c, "/etc/ocsb/ocsb.conf", "other", "/var/lib/ocsb/agents/other",
		&pe, err, sizeof(err));
	config_opencode_ports(&c, &lo, &hi);
	CHECK(conflict ==
		(overlap(8000, 8099, pe.lo, pe.hi) || overlap(8000, 8099, pe.oc_lo, pe.oc_hi) ||
			overlap(lo, hi, pe.lo, pe.hi)));
	if (conflict)
		CHECK(!strncmp(err, "/etc/ocsb/ocsb.conf:", 20));

	buf_free(&w);
	config_free(&c);
	free(text);
	return 0;
}
