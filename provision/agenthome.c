/* SPDX-License-Identifier: MIT */
/*
 * What provisioning keeps in the agent's home (the clones, the secrets hook in ~/.bashrc)
 * is the agent's to break: a link, a FIFO, a directory or a 0000 file in its place
 * (common/homecheck.c looks, as the agent); a broken place is skipped with a warning and
 * every other step still runs (issue 15).
 */
#include <stdarg.h>
#include <stdio.h>

#include "homecheck.h"
#include "log.h"

#include "provision.h"

int prov_agent_entry(struct prov *p, const char *name, int want_dir, char *ret_why, size_t n)
{
	return home_entry_check(&p->agent, name, want_dir, ret_why, n);
}

void prov_skip(struct prov *p, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->skipped++;
	log_warn("skipped: %s", msg);
}
