/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CONFIG_INT_H
#define OCSB_CONFIG_INT_H
/*
 * Between config.c (the keywords of the accounts, the ports, OpenCode and the limits, and
 * their checks) and config_full.c (the whole keyword table and the reader: ocsb-provision,
 * the supervisor, ocsb, ocsb-shell). One handler per keyword, one check per rule. The
 * warden reads none of it (wconf.h).
 */
#include <stddef.h>

#include "conf.h"
#include "config.h"

int config_kw_agent(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_owner(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_project(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_ssh_port(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_proxy_port(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_agent_ports(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_opencode_bin(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_opencode_port(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_limit_memory(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_limit_tasks(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
int config_kw_limit_cpu(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);
/*
 * `mirror PATH...` without the checks of each path: the first line replaces the defaults,
 * `mirror none` mirrors nothing, the paths are appended. config_full.c checks them after.
 */
int config_kw_mirror(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen);

/* The keywords both readers check, with the same handler, count of values and flags. */
#define CONFIG_KW_SHARED                                                                      \
	{"agent", 1, 1, config_kw_agent, CONF_ONCE}, {"owner", 1, 1, config_kw_owner, CONF_ONCE}, \
		{"project", 1, 1, config_kw_project, 0},                                          \
		{"ssh-port", 1, 1, config_kw_ssh_port, CONF_ONCE},                                \
		{"proxy-port", 1, 1, config_kw_proxy_port, CONF_ONCE},                            \
		{"agent-ports", 1, 1, config_kw_agent_ports, CONF_ONCE},                          \
		{"opencode-bin", 1, 1, config_kw_opencode_bin, CONF_ONCE},                        \
		{"opencode-port", 1, 1, config_kw_opencode_port, CONF_ONCE},                      \
		{"limit-memory", 1, 1, config_kw_limit_memory, CONF_ONCE},                        \
		{"limit-tasks", 1, 1, config_kw_limit_tasks, CONF_ONCE},                          \
		{"limit-cpu", 1, 1, config_kw_limit_cpu, CONF_ONCE}

/* The file's keywords ({NULL}-terminated). */
extern const struct conf_kw config_keywords[];

/* An absolute path shorter than 1024 bytes. */
int config_abs_path(const char *v, char *err, size_t errlen);
/* config_abs_path, no quote or backslash, no trailing '/': what `what` (a keyword) takes. */
int config_check_path(const char *v, const char *what, char *err, size_t errlen);
/* config_check_path, then appended to s unless listed already. */
int config_push_path(struct strv *s, const char *v, const char *what, char *err, size_t errlen);
/* Every argv[i] appended to s; -1 ("out of memory" in err). */
int config_push_words(struct strv *s, int argc, char **argv, char *err, size_t errlen);

/* config_validate's checks of CONFIG_KW_SHARED's keywords (the netlock's ports, the names). */
int config_validate_shared(const struct ocsb_config *c, char *err, size_t errlen);
/*
 * Defaults, `path` (root's: conf_parse_file's checks) read with the table kws, then
 * validate; a failure logged with file:line or the path, and the way out when the file is
 * missing. 0, or -1.
 */
int config_load_with(struct ocsb_config *c, const char *path, const struct conf_kw *kws,
	int (*validate)(const struct ocsb_config *c, char *err, size_t errlen));

#endif
