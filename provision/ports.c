/* SPDX-License-Identifier: MIT */
/*
 * The loopback ports of the machine's agents, against each other (issue 25). The netlock
 * opens each agent's agent-ports range to its uid alone, but a port in two agents' ranges
 * is open to both, whoever listens there. Provisioning refuses, before any change:
 *
 * - a range over another agent's range: each agent reaches the servers the other runs on
 *   the shared ports (its test database, its debugger, a dev server with its secrets);
 * - a range over the ports of another agent's OpenCode servers, from either side (the
 *   range's run or the OpenCode agent's run, whichever comes second): the range's agent
 *   reaches a server that runs commands as the other agent. Its password guards it, but
 *   the wall between agents is the netlock, not a password.
 *
 * Left alone as harmless: two agents' OpenCode ports over each other (no range holds them,
 * so neither agent reaches either; at worst a server cannot bind, which ocsb-agentd
 * reports), and an agent's range over its own OpenCode ports, refused by config_validate.
 * Not for ranges to decide: any uid may listen on any free port, so an agent may listen
 * on a port of another's range and be reached by that one (the listener chose to serve).
 *
 * Every entry of the registry counts, its account there or not (a name that comes back
 * gets its recorded range again) and served by ocsb-agentd or not: only the agent of
 * /etc/ocsb/ocsb.conf runs OpenCode today, but which agent that is changes with an edit of
 * that file and a restart of ocsb-agentd, with no run of ocsb-provision to check it then.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "fileops.h"
#include "log.h"
#include "provision.h"

/* "LO-HI" of ports 1024..65535, LO <= HI: 0, or -1. */
static int ports_range(const char *v, unsigned *ret_lo, unsigned *ret_hi)
{
	unsigned long lo, hi;
	char first[16], err[128];
	const char *dash = strchr(v, '-');

	if (!dash || (size_t)(dash - v) >= sizeof(first))
		return -1;
	snprintf(first, sizeof(first), "%.*s", (int)(dash - v), v);
	if (conf_uint(first, 1024, 65535, &lo, err, sizeof(err)) < 0 ||
		conf_uint(dash + 1, 1024, 65535, &hi, err, sizeof(err)) < 0 || lo > hi)
		return -1;
	*ret_lo = (unsigned)lo;
	*ret_hi = (unsigned)hi;
	return 0;
}

void ports_entry_parse(const char *text, struct ports_entry *ret)
{
	const char *line, *next;
	int nports = 0;

	memset(ret, 0, sizeof(*ret));
	for (line = text; line && *line; line = next) {
		char *v = NULL, err[256];
		size_t len;

		next = strchr(line, '\n');
		len = next ? (size_t)(next - line) : strlen(line);
		if (next)
			next++;
		/*
		 * The whole value, as the netlock reads it (netlock_entry_parse): a value cut
		 * to a buffer could read as another range ("1024-000...010004" as "1024-0"),
		 * and this run would check its ranges against another range than the one the
		 * netlock opens.
		 */
		if (len >= 6 && strncmp(line, "ports ", 6) == 0) {
			v = strndup(line + 6, len - 6);
			/* As the netlock reads it (netlock_registry): one valid line, or none. */
			if (nports++ || !v ||
				config_agent_ports(v, &ret->lo, &ret->hi, err, sizeof(err)) < 0)
				ret->lo = ret->hi = 0;
		} else if (len >= 15 && strncmp(line, "opencode-ports ", 15) == 0 && !ret->oc_lo) {
			v = strndup(line + 15, len - 15);
			if (!v || ports_range(v, &ret->oc_lo, &ret->oc_hi) < 0)
				ret->oc_lo = ret->oc_hi = 0;
		}
		free(v);
	}
}

static int ports_overlap(unsigned alo, unsigned ahi, unsigned blo, unsigned bhi)
{
	return alo && blo && alo <= bhi && blo <= ahi;
}

int ports_conflict(const struct ocsb_config *c, const char *file, const char *other,
	const char *other_path, const struct ports_entry *e, char *err, size_t errlen)
{
	unsigned oc_lo, oc_hi;
	const char *me = c->agent;

	if (ports_overlap(c->ports_lo, c->ports_hi, e->lo, e->hi)) {
		snprintf(err, errlen,
			"%s:%u: agent-ports %u-%u of %s overlaps agent-ports %u-%u of %s (%s): "
			"each agent could reach the servers the other runs on ports %u-%u; give "
			"%s a range outside %u-%u",
			file, c->ports_line, c->ports_lo, c->ports_hi, me, e->lo, e->hi, other,
			other_path, c->ports_lo > e->lo ? c->ports_lo : e->lo,
			c->ports_hi < e->hi ? c->ports_hi : e->hi, me, e->lo, e->hi);
		return 1;
	}
	if (ports_overlap(c->ports_lo, c->ports_hi, e->oc_lo, e->oc_hi)) {
		snprintf(err, errlen,
			"%s:%u: agent-ports %u-%u of %s overlaps the OpenCode ports %u-%u of %s "
			"(%s): %s could reach %s's OpenCode servers, which run commands as %s; "
			"give %s a range outside %u-%u",
			file, c->ports_line, c->ports_lo, c->ports_hi, me, e->oc_lo, e->oc_hi,
			other, other_path, me, other, other, me, e->oc_lo, e->oc_hi);
		return 1;
	}
	config_opencode_ports(c, &oc_lo, &oc_hi);
	if (ports_overlap(oc_lo, oc_hi, e->lo, e->hi)) {
		char where[64];

		/* opencode-port is not in the file: name the default the ports come from. */
		if (c->opencode_port_line)
			snprintf(where, sizeof(where), ":%u", c->opencode_port_line);
		else
			where[0] = '\0';
		snprintf(err, errlen,
			"%s%s: the OpenCode ports %u-%u of %s (opencode-port%s %u, one per "
			"project) overlap agent-ports %u-%u of %s (%s): %s could reach %s's "
			"OpenCode servers, which run commands as %s; %s so that they lie outside "
			"%u-%u",
			file, where, oc_lo, oc_hi, me, c->opencode_port_line ? "" : "'s default",
			c->opencode_port, e->lo, e->hi, other, other_path, other, me, me,
			c->opencode_port_line ? "set opencode-port" : "add an opencode-port line",
			e->lo, e->hi);
		return 1;
	}
	return 0;
}

int ports_preflight(struct prov *p)
{
	char dir[4096], path[4400], err[2048], names[512] = "";
	size_t nlen = 0;
	unsigned unknown = 0;
	struct dirent *e;
	DIR *d;
	int r = 0;

	if (path_join(dir, sizeof(dir), p->paths.varlib, "ocsb/agents") < 0) {
		log_err("%s/ocsb/agents: path too long", p->paths.varlib);
		return -1;
	}
	d = opendir(dir);
	if (!d) {
		if (errno == ENOENT)
			return 0;
		log_err("%s: %s", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		struct ports_entry pe;
		char *data = NULL;
		int rr;

		if (e->d_name[0] == '.' || strcmp(e->d_name, p->cfg.agent) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		/* An entry that cannot be read opens no range in the netlock either. */
		rr = fo_read(path, 4096, &data, NULL);
		ports_entry_parse(rr < 0 ? "" : data, &pe);
		free(data);
		if (ports_conflict(
			    &p->cfg, p->config_path, e->d_name, path, &pe, err, sizeof(err))) {
			log_err("%s", err);
			r = -1;
			break;
		}
		if (!pe.oc_lo && p->cfg.ports_lo) {
			unknown++;
			if (nlen < sizeof(names))
				nlen += (size_t)snprintf(names + nlen, sizeof(names) - nlen, "%s%s",
					nlen ? ", " : "", e->d_name);
		}
	}
	closedir(d);
	/* Written by an older ocsb-provision: the line comes with that agent's next run. */
	if (r == 0 && unknown)
		log_warn("%s: the entr%s of %s record%s no OpenCode ports: agent-ports %u-%u is "
			 "not checked against %s OpenCode servers until sudo ocsb-provision "
			 "--config <%s configuration> runs for %s",
			dir, unknown == 1 ? "y" : "ies", names, unknown == 1 ? "s" : "",
			p->cfg.ports_lo, p->cfg.ports_hi, unknown == 1 ? "its" : "their",
			unknown == 1 ? "its" : "each one's", unknown == 1 ? "it" : "each");
	return r;
}
