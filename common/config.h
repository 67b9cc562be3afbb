/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CONFIG_H
#define OCSB_CONFIG_H

#include <stdint.h>

#include "util.h"

/*
 * What `mirror`, `mirror-writable` and `mirror-noscan` say; the mirror (mirror.h) works from
 * it. The functions are the mirror's rules for these keywords (the defaults in
 * common/config.c, what a path may be in common/config_mirror.c).
 */
struct mirror_spec {
	struct strv paths; /* relative to the owner's home */
	struct strv writable; /* subset of paths: the agent gets its own copy */
	struct strv noscan; /* paths (or prefixes) not scanned for secrets */
	int set; /* a `mirror` line was given (else the defaults) */
};

void mirror_spec_defaults(struct mirror_spec *s);
void mirror_spec_free(struct mirror_spec *s);
/* A path acceptable after `mirror`: relative, no "..", no control characters, not secret. */
int mirror_path_ok(const char *rel, char *err, size_t errlen);
/* 1 when `path` is `prefix` or lies below it. */
int mirror_path_under(const char *path, const char *prefix);
#define MIRROR_GITCONFIG ".gitconfig"

/*
 * /etc/ocsb/ocsb.conf: read whole by ocsb-provision, ocsb-agentd, ocsb and ocsb-shell
 * (config_full.c); the warden takes the values ocsb-provision --warden-config prints
 * (wconf.h).
 */
struct ocsb_config {
	char agent[64];
	char owner[64]; /* empty: the user who ran sudo */
	struct strv projects; /* absolute paths of the owner's repositories */
	struct strv keys; /* extra public key files for the owner */
	struct strv sync_keys; /* public key files authorized for git only (remote owners) */
	char shell[256];
	int git_author_agent; /* agent-git-author agent: the agent's commits name it as author */
	unsigned ssh_port;
	unsigned proxy_port;
	unsigned ports_lo, ports_hi; /* loopback TCP ports the agent may reach (0 = none) */
	unsigned ports_line; /* agent-ports' line in the file (0: not there) */
	char opencode_bin[1024]; /* the OpenCode binary ocsb-agentd runs as the agent */
	int opencode_bin_set; /* given in the file, not the default */
	unsigned opencode_port; /* first loopback port of the OpenCode servers, one per project */
	unsigned opencode_port_line; /* opencode-port's line in the file (0: the default) */
	/* Limits of the agent's cgroup; OCSB_LIMIT_AUTO: chosen from the machine at start. */
	uint64_t limit_memory; /* bytes, 0 = none */
	unsigned long limit_tasks; /* 0 = none */
	unsigned long limit_cpu; /* percent of one CPU, 0 = none */
	struct mirror_spec mirror; /* owned; the owner's configs the agent reads (mirror.h) */
};

#define OCSB_LIMIT_AUTO (~0UL)

#define OCSB_DEFAULT_AGENT "ai-dev"
#define OCSB_DEFAULT_SHELL "/bin/bash"
#define OCSB_DEFAULT_SSH_PORT 22
#define OCSB_DEFAULT_PROXY_PORT 3128
#define OCSB_DEFAULT_OPENCODE_PORT 4096
/* The injector's route ports: INJ_PORT_BASE .. + INJ_MAX_ROUTES - 1 of inject/inject.h. */
#define OCSB_ROUTE_PORT_LO 18400
#define OCSB_ROUTE_PORT_HI 18415

/*
 * "LOW-HIGH", an agent-ports range: 1024..65535, not empty, not over the route ports.
 * 0, or -1 with the reason in err. ocsb.conf's keyword and the agents registry use it.
 */
int config_agent_ports(const char *v, unsigned *ret_lo, unsigned *ret_hi, char *err, size_t errlen);
/* "4G", "512M", "100000K", "none" -> bytes (0 = none): limit-memory's values. */
int config_parse_size(const char *s, uint64_t *out);

void config_defaults(struct ocsb_config *c);
void config_free(struct ocsb_config *c);
/* Pass 1 (syntax) for a buffer: "file:line: message" in err. */
int config_parse_buf(struct ocsb_config *c, const char *buf, size_t len, const char *file,
	char *err, size_t errlen);
/* Root-owned, not group/world-writable file; -ENOENT when missing. */
int config_load(struct ocsb_config *c, const char *path, char *err, size_t errlen);
/*
 * The OpenCode servers' ports: opencode-port, one per project (one at least, as if a
 * project were added later). config_validate keeps them in 1024..65535.
 */
void config_opencode_ports(const struct ocsb_config *c, unsigned *ret_lo, unsigned *ret_hi);
/* Pass 2: whole-config checks that need no system lookups. */
int config_validate(const struct ocsb_config *c, char *err, size_t errlen);
/*
 * The daemons' start and reload: defaults, config_load and config_validate, a failure
 * logged (file:line, and the way out when the file is missing). 0, or -1.
 */
int config_load_logged(struct ocsb_config *c, const char *path);
/* The limits in force: OCSB_LIMIT_AUTO resolved against this machine's memory and CPUs. */
void config_limits(const struct ocsb_config *c, uint64_t *memory, unsigned *tasks, unsigned *cpu);
/* The file written on first run: every keyword documented, the values in force set. */
int config_render(const struct ocsb_config *c, struct buf *out);

#endif
