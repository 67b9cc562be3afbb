/* SPDX-License-Identifier: MIT */
/*
 * The agent's git identity (gitident.h). Environment variables rather than a gitconfig
 * entry: git reads GIT_COMMITTER_* before any configuration file, so the owner's
 * user.name in the mirrored .gitconfig (which names the author) cannot hide who
 * committed, and nothing is written into the agent's home.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gitident.h"

/* The first label of host, when it is a plain one: else "localhost". */
static void short_host(const char *host, char *out, size_t n)
{
	char buf[256] = "";
	size_t len;

	if (!host) {
		if (gethostname(buf, sizeof(buf) - 1) < 0)
			buf[0] = '\0';
		host = buf;
	}
	len = strcspn(host, ".");
	/* A name with other bytes would end up in every commit: not taken as it is. */
	if (len == 0 || len > 63 || host[0] == '-' ||
		strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") !=
			len) {
		snprintf(out, n, "localhost");
		return;
	}
	snprintf(out, n, "%.*s", (int)len, host);
	for (char *s = out; *s; s++)
		if (*s >= 'A' && *s <= 'Z')
			*s = (char)(*s - 'A' + 'a');
}

void gitident_agent(const char *agent, const char *host, char *ret_name, size_t nlen,
	char *ret_email, size_t elen)
{
	char h[64];

	short_host(host, h, sizeof(h));
	snprintf(ret_name, nlen, "%.64s (ocsb agent)", agent);
	snprintf(ret_email, elen, "%.64s@%s.ocsb", agent, h);
}

size_t gitident_env(const char *agent, const char *host, int author_agent,
	char out[GITIDENT_ENV_MAX][GITIDENT_LINE])
{
	char name[96], email[160];
	size_t n = 0;

	gitident_agent(agent, host, name, sizeof(name), email, sizeof(email));
	snprintf(out[n++], GITIDENT_LINE, "GIT_COMMITTER_NAME=%s", name);
	snprintf(out[n++], GITIDENT_LINE, "GIT_COMMITTER_EMAIL=%s", email);
	if (author_agent) {
		snprintf(out[n++], GITIDENT_LINE, "GIT_AUTHOR_NAME=%s", name);
		snprintf(out[n++], GITIDENT_LINE, "GIT_AUTHOR_EMAIL=%s", email);
	}
	return n;
}
