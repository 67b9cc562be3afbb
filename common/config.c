/* SPDX-License-Identifier: MIT */
/*
 * ocsb.conf: the defaults, the keywords of the accounts, the ports the netlock opens or
 * guards, OpenCode's binary and ports, the projects and the limits, and the checks on
 * them. The other keywords, their checks and the reader are config_full.c's
 * (config_int.h). ocsb-warden reads none of it: it takes the values ocsb-provision
 * prints from the file (wconf.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "opencode.h"
#include "paths.h"
#include "config.h"
#include "config_int.h"
#include "log.h"

void mirror_spec_defaults(struct mirror_spec *s)
{
	strv_free(&s->paths);
	strv_free(&s->writable);
	strv_free(&s->noscan);
	s->set = 0;
	/* OpenCode's agents, commands, skills and plugin config; shared skills; git identity. */
	strv_push(&s->paths, ".config/opencode");
	strv_push(&s->paths, ".agents");
	strv_push(&s->paths, MIRROR_GITCONFIG);
}

void mirror_spec_free(struct mirror_spec *s)
{
	strv_free(&s->paths);
	strv_free(&s->writable);
	strv_free(&s->noscan);
}

void config_defaults(struct ocsb_config *c)
{
	memset(c, 0, sizeof(*c));
	strcpy(c->agent, OCSB_DEFAULT_AGENT);
	strcpy(c->shell, OCSB_DEFAULT_SHELL);
	c->ssh_port = OCSB_DEFAULT_SSH_PORT;
	c->proxy_port = OCSB_DEFAULT_PROXY_PORT;
	strcpy(c->opencode_bin, OCSB_OPENCODE_BIN);
	c->opencode_port = OCSB_DEFAULT_OPENCODE_PORT;
	c->limit_memory = OCSB_LIMIT_AUTO;
	c->limit_tasks = OCSB_LIMIT_AUTO;
	c->limit_cpu = OCSB_LIMIT_AUTO;
	mirror_spec_defaults(&c->mirror);
}

void config_free(struct ocsb_config *c)
{
	strv_free(&c->projects);
	strv_free(&c->keys);
	mirror_spec_free(&c->mirror);
	strv_free(&c->sync_keys);
}

static int set_name(char *dst, size_t n, const char *v, const char *what, char *err, size_t errlen)
{
	if (!valid_user_name(v)) {
		snprintf(err, errlen,
			"'%.64s' is not a valid %s name (lower case letters, digits, '_' and '-', "
			"starting with a letter or '_', at most 32)",
			v, what);
		return -1;
	}
	snprintf(dst, n, "%s", v);
	return 0;
}

int config_kw_agent(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return set_name(c->agent, sizeof(c->agent), argv[0], "user", err, errlen);
}

int config_kw_owner(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return set_name(c->owner, sizeof(c->owner), argv[0], "user", err, errlen);
}

int config_abs_path(const char *v, char *err, size_t errlen)
{
	if (v[0] != '/') {
		snprintf(err, errlen, "'%.200s' is not an absolute path", v);
		return -1;
	}
	if (strlen(v) >= 1024) {
		snprintf(err, errlen, "path too long");
		return -1;
	}
	return 0;
}

int config_check_path(const char *v, const char *what, char *err, size_t errlen)
{
	size_t n = strlen(v);

	if (config_abs_path(v, err, errlen) < 0)
		return -1;
	/* The file is rewritten with these values in double quotes: keep that lossless. */
	if (strpbrk(v, "\"\\")) {
		snprintf(err, errlen,
			"%s '%.200s': quotes and backslashes are not supported in paths", what, v);
		return -1;
	}
	if (n == 1 || v[n - 1] == '/') {
		snprintf(err, errlen, "%s '%.200s': give the path without a trailing '/'", what, v);
		return -1;
	}
	return 0;
}

int config_push_path(struct strv *s, const char *v, const char *what, char *err, size_t errlen)
{
	if (config_check_path(v, what, err, errlen) < 0)
		return -1;
	if (strv_contains(s, v)) {
		snprintf(err, errlen, "%s '%.200s' listed twice", what, v);
		return -1;
	}
	if (strv_push(s, v) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int config_kw_project(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return config_push_path(&c->projects, argv[0], "project", err, errlen);
}

static int kw_port(unsigned *dst, const char *v, char *err, size_t errlen)
{
	unsigned long p;

	if (conf_uint(v, 1, 65535, &p, err, errlen) < 0)
		return -1;
	*dst = (unsigned)p;
	return 0;
}

int config_kw_ssh_port(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return kw_port(&((struct ocsb_config *)ctx)->ssh_port, argv[0], err, errlen);
}

int config_kw_proxy_port(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return kw_port(&((struct ocsb_config *)ctx)->proxy_port, argv[0], err, errlen);
}

int config_kw_agent_ports(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;

	c->ports_line = loc->line;
	return config_agent_ports(argv[0], &c->ports_lo, &c->ports_hi, err, errlen);
}

int config_kw_opencode_bin(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;

	/* Only the form here; whether the file is safe to run is checked when it is used. */
	if (config_check_path(argv[0], "opencode-bin", err, errlen) < 0)
		return -1;
	snprintf(c->opencode_bin, sizeof(c->opencode_bin), "%s", argv[0]);
	c->opencode_bin_set = 1;
	return 0;
}

int config_kw_opencode_port(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	unsigned long p;

	/* Unprivileged ports: the servers run as the agent, which cannot bind below 1024. */
	if (conf_uint(argv[0], 1024, 65535, &p, err, errlen) < 0)
		return -1;
	c->opencode_port = (unsigned)p;
	c->opencode_port_line = loc->line;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	char *end;
	unsigned shift = 0;

	if (strcmp(s, "none") == 0) {
		*out = 0;
		return 0;
	}
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	switch (*end) {
	case '\0':
		break;
	case 'K':
	case 'k':
		shift = 10;
		break;
	case 'M':
	case 'm':
		shift = 20;
		break;
	case 'G':
	case 'g':
		shift = 30;
		break;
	case 'T':
	case 't':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] != '\0')
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

int config_kw_limit_memory(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	uint64_t v;

	if (strcmp(argv[0], "auto") == 0) {
		c->limit_memory = OCSB_LIMIT_AUTO;
		return 0;
	}
	if (config_parse_size(argv[0], &v) < 0 || (v && v < (16ULL << 20))) {
		snprintf(err, errlen,
			"limit-memory '%.64s': give a size of at least 16M (e.g. 4G, 512M), "
			"'auto' or 'none'",
			argv[0]);
		return -1;
	}
	c->limit_memory = v;
	return 0;
}

static int kw_limit_num(const char *kw, unsigned long *dst, const char *v, unsigned long lo,
	unsigned long hi, char *err, size_t errlen)
{
	char why[256];

	if (strcmp(v, "auto") == 0) {
		*dst = OCSB_LIMIT_AUTO;
		return 0;
	}
	if (strcmp(v, "none") == 0) {
		*dst = 0;
		return 0;
	}
	if (conf_uint(v, lo, hi, dst, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "%s: %s ('auto' and 'none' work too)", kw, why);
		return -1;
	}
	return 0;
}

int config_kw_limit_tasks(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	/* OpenCode alone runs a few dozen threads, and each counts as a task. */
	return kw_limit_num("limit-tasks", &((struct ocsb_config *)ctx)->limit_tasks, argv[0], 64,
		4194304, err, errlen);
}

int config_kw_limit_cpu(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	return kw_limit_num("limit-cpu", &((struct ocsb_config *)ctx)->limit_cpu, argv[0], 10,
		100000, err, errlen);
}

void config_limits(const struct ocsb_config *c, uint64_t *memory, unsigned *tasks, unsigned *cpu)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	/* Half the machine by default: the owner keeps the other half whatever the agent does. */
	if (c->limit_memory == OCSB_LIMIT_AUTO)
		*memory = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 2 : 0;
	else
		*memory = c->limit_memory;
	*tasks = c->limit_tasks == OCSB_LIMIT_AUTO ? 4096 : (unsigned)c->limit_tasks;
	if (c->limit_cpu == OCSB_LIMIT_AUTO)
		*cpu = ncpu > 1 ? (unsigned)ncpu * 50 : 100;
	else
		*cpu = (unsigned)c->limit_cpu;
}

/*
 * agentd gives project i the port opencode-port + i. A clash would leave a server
 * unable to bind, or put OpenCode on a port the netlock opens to the agent's own
 * servers (agent-ports).
 */
void config_opencode_ports(const struct ocsb_config *c, unsigned *ret_lo, unsigned *ret_hi)
{
	unsigned n = c->projects.n ? (unsigned)c->projects.n : 1;

	*ret_lo = c->opencode_port;
	*ret_hi = c->opencode_port + n - 1;
}

static int opencode_ports_validate(const struct ocsb_config *c, char *err, size_t errlen)
{
	unsigned lo, hi, n = c->projects.n ? (unsigned)c->projects.n : 1;

	config_opencode_ports(c, &lo, &hi);
	if (lo < 1024 || hi > 65535) {
		snprintf(err, errlen,
			"opencode-port %u: the OpenCode ports (one per project, %u) must lie in "
			"1024..65535",
			lo, n);
		return -1;
	}
	if ((c->ssh_port >= lo && c->ssh_port <= hi) ||
		(c->proxy_port >= lo && c->proxy_port <= hi)) {
		snprintf(err, errlen,
			"the OpenCode ports %u-%u (opencode-port, one per project) include %s %u",
			lo, hi, c->ssh_port >= lo && c->ssh_port <= hi ? "ssh-port" : "proxy-port",
			c->ssh_port >= lo && c->ssh_port <= hi ? c->ssh_port : c->proxy_port);
		return -1;
	}
	if (c->ports_hi && lo <= c->ports_hi && hi >= c->ports_lo) {
		snprintf(err, errlen,
			"the OpenCode ports %u-%u (opencode-port, one per project) overlap "
			"agent-ports %u-%u",
			lo, hi, c->ports_lo, c->ports_hi);
		return -1;
	}
	return 0;
}

int config_push_words(struct strv *s, int argc, char **argv, char *err, size_t errlen)
{
	for (int i = 0; i < argc; i++)
		if (strv_push(s, argv[i]) < 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	return 0;
}

int config_kw_mirror(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;

	/* The first `mirror` line replaces the defaults; `mirror none` mirrors nothing. */
	if (!c->mirror.set) {
		strv_free(&c->mirror.paths);
		c->mirror.set = 1;
	}
	if (argc == 1 && !strcmp(argv[0], "none"))
		return 0;
	return config_push_words(&c->mirror.paths, argc, argv, err, errlen);
}

int config_validate_shared(const struct ocsb_config *c, char *err, size_t errlen)
{
	if (c->owner[0] && strcmp(c->owner, c->agent) == 0) {
		snprintf(err, errlen, "the agent and the owner are the same user '%s'", c->agent);
		return -1;
	}
	if (strcmp(c->agent, "root") == 0) {
		snprintf(err, errlen, "the agent cannot be root");
		return -1;
	}
	if (c->ssh_port == c->proxy_port) {
		snprintf(err, errlen, "ssh-port and proxy-port are both %u", c->ssh_port);
		return -1;
	}
	/* The range opens loopback ports to the agent: never sshd's or the proxy's own. */
	if (c->ports_hi &&
		((c->ssh_port >= c->ports_lo && c->ssh_port <= c->ports_hi) ||
			(c->proxy_port >= c->ports_lo && c->proxy_port <= c->ports_hi))) {
		snprintf(err, errlen, "agent-ports %u-%u contains ssh-port or proxy-port",
			c->ports_lo, c->ports_hi);
		return -1;
	}
	if (opencode_ports_validate(c, err, errlen) < 0)
		return -1;
	if (config_check_path(c->opencode_bin, "opencode-bin", err, errlen) < 0)
		return -1;
	/* Each project becomes ~agent/<basename>: two with one name would share a clone. */
	for (size_t i = 0; i < c->projects.n; i++) {
		const char *bi = path_base(c->projects.v[i]);

		if (config_check_path(c->projects.v[i], "project", err, errlen) < 0)
			return -1;
		if (!safe_token(bi) || bi[0] == '.') {
			snprintf(err, errlen,
				"project '%.200s': its folder name must be plain printable ASCII "
				"without quotes, spaces or a leading dot",
				c->projects.v[i]);
			return -1;
		}
		for (size_t j = 0; j < i; j++)
			if (strcmp(bi, path_base(c->projects.v[j])) == 0) {
				snprintf(err, errlen,
					"projects '%.200s' and '%.200s' share the folder name '%s'",
					c->projects.v[j], c->projects.v[i], bi);
				return -1;
			}
	}
	return 0;
}

int config_load_with(struct ocsb_config *c, const char *path, const struct conf_kw *kws,
	int (*validate)(const struct ocsb_config *c, char *err, size_t errlen))
{
	char err[1024];
	int r;

	config_defaults(c);
	/* Root program: only root may have written its configuration. */
	r = conf_parse_file(path, 0, kws, c, err, sizeof(err));
	if (r < 0) {
		log_err("%s%s", err, r == -ENOENT ? " (run ocsb-provision first)" : "");
		return -1;
	}
	if (validate(c, err, sizeof(err)) < 0) {
		log_err("%s: %s", path, err);
		return -1;
	}
	return 0;
}
