/* SPDX-License-Identifier: MIT */
/*
 * Every process of a uid killed, and a refusal that names them: ocsb-provision's (the
 * account's removal, a re-provisioning). The warden kills with procs_signal_uid and says
 * less: it links no naming of processes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "procs.h"

int procs_kill_uid(uid_t uid, const char *name)
{
	char who[512];
	int n = procs_signal_uid(uid, SIGKILL, 1);

	if (n >= 0)
		return n;
	if (n == -EBUSY && procs_describe_uid(uid, who, sizeof(who)) > 0)
		log_err("cannot stop the processes of %s: they keep coming back: %s", name, who);
	else
		log_err("cannot stop the processes of %s: %s", name, strerror(-n));
	return n;
}

struct desc_ctx {
	char *out;
	size_t n, len;
	int shown;
};

static void describe_one(pid_t pid, int pidfd, void *ctx)
{
	struct desc_ctx *c = ctx;
	char path[64], comm[64] = "?";
	int w;
	FILE *fp;

	if (c->shown == 5) {
		if (c->len + 5 < c->n)
			c->len += (size_t)snprintf(c->out + c->len, c->n - c->len, ", ...");
		c->shown++;
		return;
	}
	if (c->shown > 5)
		return;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fp = fopen(path, "re");
	if (fp) {
		if (fgets(comm, sizeof(comm), fp))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(fp);
	}
	/* comm is the process's own choice of name: printable ASCII only. */
	for (char *q = comm; *q; q++)
		if (*q < 0x20 || *q > 0x7e)
			*q = '?';
	w = snprintf(
		c->out + c->len, c->n - c->len, "%s%d (%s)", c->shown ? ", " : "", (int)pid, comm);
	if (w > 0 && (size_t)w < c->n - c->len)
		c->len += (size_t)w;
	c->shown++;
}

int procs_describe_uid(uid_t uid, char *out, size_t n)
{
	struct desc_ctx c = {out, n, 0, 0};

	if (n == 0)
		return -EINVAL;
	out[0] = '\0';
	return procs_foreach_uid(uid, describe_one, &c);
}
