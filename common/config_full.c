/* SPDX-License-Identifier: MIT */
/*
 * ocsb.conf as a whole: the keywords only other programs than the warden use (the owner's
 * keys, the shell, the agent's git author, the mirror's paths), the whole table and its
 * checks, for ocsb-provision, the supervisor, ocsb and ocsb-shell. The keywords the warden
 * reads too, and their checks, are config.c's (config_int.h).
 */
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "config.h"
#include "config_int.h"

static int kw_key(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return config_push_path(&c->keys, argv[0], "key", err, errlen);
}

static int kw_sync_key(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return config_push_path(&c->sync_keys, argv[0], "sync-key", err, errlen);
}

static int kw_shell(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;

	if (config_abs_path(argv[0], err, errlen) < 0)
		return -1;
	if (!safe_token(argv[0])) {
		snprintf(err, errlen, "shell '%.200s': spaces, quotes and '$' are not supported",
			argv[0]);
		return -1;
	}
	snprintf(c->shell, sizeof(c->shell), "%s", argv[0]);
	return 0;
}

/*
 * agent-git-author owner|agent: who the agent's commits name as author (gitident.h). The
 * committer is the agent either way.
 */
static int kw_agent_git_author(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;

	if (strcmp(argv[0], "owner") != 0 && strcmp(argv[0], "agent") != 0) {
		snprintf(err, errlen,
			"agent-git-author '%.64s': 'owner' (the mirrored user.name and user.email, "
			"the default) or 'agent'",
			argv[0]);
		return -1;
	}
	c->git_author_agent = argv[0][0] == 'a';
	return 0;
}

/* The paths s holds from `from` on (relative to the owner's home): allowed, each once. */
static int mirror_paths_check(struct strv *s, size_t from, const char *kw, char *err, size_t errlen)
{
	for (size_t i = from; i < s->n; i++) {
		if (mirror_path_ok(s->v[i], err, errlen) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(s->v[j], s->v[i]) == 0) {
				snprintf(err, errlen, "%s '%.200s' listed twice", kw, s->v[i]);
				return -1;
			}
	}
	return 0;
}

static int kw_mirror(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	/* Before the first line, the defaults, which that line replaces. */
	size_t from = c->mirror.set ? c->mirror.paths.n : 0;

	if (config_kw_mirror(ctx, loc, argc, argv, err, errlen) < 0)
		return -1;
	return mirror_paths_check(&c->mirror.paths, from, "mirror", err, errlen);
}

/* mirror-writable / mirror-noscan PATH... */
static int mirror_paths(
	struct strv *s, int argc, char **argv, const char *kw, char *err, size_t errlen)
{
	size_t from = s->n;

	if (config_push_words(s, argc, argv, err, errlen) < 0)
		return -1;
	return mirror_paths_check(s, from, kw, err, errlen);
}

static int kw_mirror_writable(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return mirror_paths(&c->mirror.writable, argc, argv, "mirror-writable", err, errlen);
}

static int kw_mirror_noscan(
	void *ctx, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ocsb_config *c = ctx;
	return mirror_paths(&c->mirror.noscan, argc, argv, "mirror-noscan", err, errlen);
}

const struct conf_kw config_keywords[] = {
	CONFIG_KW_SHARED,
	{"key", 1, 1, kw_key, 0},
	{"sync-key", 1, 1, kw_sync_key, 0},
	{"shell", 1, 1, kw_shell, CONF_ONCE},
	{"agent-git-author", 1, 1, kw_agent_git_author, CONF_ONCE},
	{"mirror", 1, CONF_MAX_ARGS, kw_mirror, 0},
	{"mirror-writable", 1, CONF_MAX_ARGS, kw_mirror_writable, 0},
	{"mirror-noscan", 1, CONF_MAX_ARGS, kw_mirror_noscan, 0},
	{NULL, 0, 0, NULL, 0},
};

int config_parse_buf(struct ocsb_config *c, const char *buf, size_t len, const char *file,
	char *err, size_t errlen)
{
	return conf_parse_buf(buf, len, file, config_keywords, c, err, errlen);
}

int config_load(struct ocsb_config *c, const char *path, char *err, size_t errlen)
{
	/* Root program: only root may have written its configuration. */
	return conf_parse_file(path, 0, config_keywords, c, err, errlen);
}

int config_validate(const struct ocsb_config *c, char *err, size_t errlen)
{
	if (config_validate_shared(c, err, errlen) < 0)
		return -1;
	/* A writable copy of something not mirrored would be a copy of nothing. */
	for (size_t i = 0; i < c->mirror.writable.n; i++)
		if (!strv_contains(&c->mirror.paths, c->mirror.writable.v[i])) {
			snprintf(err, errlen,
				"mirror-writable '%.200s' is not one of the mirrored paths (add it "
				"to a 'mirror' line)",
				c->mirror.writable.v[i]);
			return -1;
		}
	/* Paths may come from the command line too: the same rules as in the file. */
	for (size_t i = 0; i < c->keys.n; i++)
		if (config_check_path(c->keys.v[i], "key", err, errlen) < 0)
			return -1;
	for (size_t i = 0; i < c->sync_keys.n; i++)
		if (config_check_path(c->sync_keys.v[i], "sync-key", err, errlen) < 0)
			return -1;
	return 0;
}

int config_load_logged(struct ocsb_config *c, const char *path)
{
	return config_load_with(c, path, config_keywords, config_validate);
}
