/* SPDX-License-Identifier: MIT */
#ifndef OCSB_GITIDENT_H
#define OCSB_GITIDENT_H

#include <stddef.h>

/*
 * The identity git gives the agent's commits (issue 28): "AGENT (ocsb agent)" and
 * "AGENT@HOST.ocsb", HOST this machine's short name (letters, digits and '-'; "localhost"
 * otherwise). It goes into the environment of everything the agent runs (OpenCode through
 * ocsb-agentd, ssh sessions through ocsb-shell), where it wins over any gitconfig, the
 * owner's mirrored user.name and user.email included: the committer is always the agent,
 * the author too with `agent-git-author agent`.
 */
#define GITIDENT_ENV_MAX 4 /* strings gitident_env writes at most */
#define GITIDENT_LINE 256 /* bytes of one "NAME=value" */

/* The name and email for agent (a valid user name) on host (NULL: gethostname). */
void gitident_agent(const char *agent, const char *host, char *ret_name, size_t nlen,
	char *ret_email, size_t elen);
/*
 * "GIT_COMMITTER_NAME=...", "GIT_COMMITTER_EMAIL=...", and the two GIT_AUTHOR_ ones when
 * author_agent, into out; the number written.
 */
size_t gitident_env(const char *agent, const char *host, int author_agent,
	char out[GITIDENT_ENV_MAX][GITIDENT_LINE]);

#endif
