/* SPDX-License-Identifier: MIT */
/*
 * Numbers and port ranges of the configuration files, apart from their readers: the
 * warden links these (its agents registry holds ranges) and no reader.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "config.h"

int conf_uint(const char *s, unsigned long min, unsigned long max, unsigned long *ret, char *err,
	size_t errlen)
{
	unsigned long v;
	char *end;

	errno = 0;
	if (*s < '0' || *s > '9') {
		snprintf(err, errlen, "'%.64s' is not a number", s);
		return -1;
	}
	v = strtoul(s, &end, 10);
	if (errno || *end) {
		snprintf(err, errlen, "'%.64s' is not a number", s);
		return -1;
	}
	if (v < min || v > max) {
		snprintf(err, errlen, "%lu is out of range (%lu..%lu)", v, min, max);
		return -1;
	}
	*ret = v;
	return 0;
}

int config_agent_ports(const char *v, unsigned *ret_lo, unsigned *ret_hi, char *err, size_t errlen)
{
	unsigned long lo, hi;
	const char *dash = strchr(v, '-');
	char first[16];

	if (!dash || (size_t)(dash - v) >= sizeof(first)) {
		snprintf(err, errlen, "'%.64s' is not a port range LOW-HIGH (e.g. 8000-8099)", v);
		return -1;
	}
	snprintf(first, sizeof(first), "%.*s", (int)(dash - v), v);
	if (conf_uint(first, 1024, 65535, &lo, err, errlen) < 0 ||
		conf_uint(dash + 1, 1024, 65535, &hi, err, errlen) < 0)
		return -1;
	if (lo > hi) {
		snprintf(err, errlen, "port range %lu-%lu is empty", lo, hi);
		return -1;
	}
	/*
	 * The route ports are ocsb-agentd's agent's alone: another agent's range over them
	 * would let that agent spend the injected keys of agentd's.
	 */
	if (lo <= OCSB_ROUTE_PORT_HI && hi >= OCSB_ROUTE_PORT_LO) {
		snprintf(err, errlen,
			"agent-ports %lu-%lu overlaps the injector's route ports %u-%u: choose a "
			"range outside them (e.g. %lu-%u or %u-%lu)",
			lo, hi, OCSB_ROUTE_PORT_LO, OCSB_ROUTE_PORT_HI,
			lo < OCSB_ROUTE_PORT_LO ? lo : 1024, OCSB_ROUTE_PORT_LO - 1,
			OCSB_ROUTE_PORT_HI + 1, hi > OCSB_ROUTE_PORT_HI ? hi : 65535);
		return -1;
	}
	*ret_lo = (unsigned)lo;
	*ret_hi = (unsigned)hi;
	return 0;
}
