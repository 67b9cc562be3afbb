/* SPDX-License-Identifier: MIT */
#ifndef OCSB_PROVISION_EFIRST_H
#define OCSB_PROVISION_EFIRST_H

#include <stddef.h>

#include "util.h"


/*
 * The egress rules of a first provisioning (issue 29): `policy allowlist` with allow lines
 * for what the agent needs, each with the reason it is there. Pure: the scan of the
 * owner's projects (egress_first.c, as the owner) hands in indices and text it read; the
 * tables, the validation and the rendering live here and are unit-tested.
 */

enum efirst_section {
	EFIRST_PROVIDER, /* an LLM provider of the built-in list */
	EFIRST_REGISTRY, /* a package registry: a manifest or lock file in a project */
	EFIRST_GIT, /* the git host of a project's remote */
	EFIRST_OPENCODE, /* OpenCode's own endpoints */
	EFIRST_N_SECTIONS,
};

#define EFIRST_MAX_LINES 96
#define EFIRST_MAX_HOSTS 256 /* a host name of 253 fits */
#define EFIRST_MAX_WHY 200

struct efirst_line {
	int section; /* enum efirst_section */
	char hosts[EFIRST_MAX_HOSTS]; /* "pypi.org files.pythonhosted.org" */
	char why[EFIRST_MAX_WHY]; /* "PyPI: requirements.txt in ~/code/app" */
};

struct efirst {
	struct efirst_line l[EFIRST_MAX_LINES];
	size_t n;
	int all_providers; /* efirst_providers_all ran: the section says so once */
};

/* The files whose presence at a project's top names an ecosystem ("package-lock.json"). */
size_t efirst_n_files(void);
const char *efirst_file(size_t i);
/* The ecosystem of file i: its name ("npm") and the hosts of its registry. */
const char *efirst_file_eco(size_t i);
const char *efirst_file_hosts(size_t i);
/* The index of a file name in the table, or -1: how a name is classified. */
int efirst_file_find(const char *name);

/*
 * Add hosts with their reason; a line whose hosts are already listed is left out (the
 * first reason stays). Control bytes and non-ASCII in why become '?'. 0, or -ENOSPC.
 */
int efirst_add(struct efirst *f, int section, const char *hosts, const char *why);

/*
 * The host of a git remote URL: https://, http://, ssh://, git:// with optional user@ and
 * :port, or scp-like [user@]host:path. Lower case, letters, digits, '.' and '-' only, with a
 * dot (a dotless name never passes the proxy). 0, or -1 for anything else (a local path,
 * file://, a bracketed address, a name with odd bytes).
 */
int efirst_remote_host(const char *url, char *out, size_t n);

/* Every built-in provider (root does not open the supervisor's record of the secrets). */
void efirst_providers_all(struct efirst *f);
/* OpenCode's endpoints (docs/opencode.md, "Network at start"). */
void efirst_opencode(struct efirst *f);

/* The line of the template the allow lines replace; the template must hold it once. */
#define EFIRST_MARK "# @allow-lines@"
/*
 * The template (conf/egress.conf) with its EFIRST_MARK line replaced by f's sections,
 * each line "allow HOSTS  # WHY". 0, -EINVAL (the template has no mark), -ENOMEM.
 */
int efirst_render(const char *tmpl, size_t len, const struct efirst *f, struct buf *out);

#endif
