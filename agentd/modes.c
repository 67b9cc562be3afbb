/* SPDX-License-Identifier: MIT */
/*
 * The one-job modes of ocsb-agentd (issue 26): the supervisor's program, exec'd by
 * ocsb-warden as someone else for one job that needs that someone's rights, the way
 * got-read-pack parses for got: the supervisor (account ocsb-agentd) cannot read the
 * owner's home nor write the agent's, and root does neither any more.
 *
 *   --mirror-read   as the owner: the mirror's reader; its stream on stdout (fd 1)
 *   --mirror-link   as the agent: the links into the mirror in the agent's home; one
 *                   line per change on stdout ("! ..." for a place left alone)
 *   --owner-egress  as the owner: ~/.config/ocsb/egress.conf as it is, on stdout
 *   --mirror-watch  as the owner, for as long as the supervisor runs: inotify on the
 *                   mirrored directories (this account may not watch a 0700 one); one
 *                   byte on stdout per burst of changes (mirrorwatch.c)
 *
 * Each reads ocsb.conf itself (root's, 0644, checked as every program checks it) and
 * looks the accounts up by name: nothing comes from the supervisor but the fact that it
 * asked. Each refuses to run as anyone but the account its job is for, so that a mode
 * started by hand as root does not do the job with root's rights. Errors on stderr, the
 * exit status 0 when the job was done.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentd.h"
#include "config.h"
#include "egress.h"
#include "fileops.h"
#include "log.h"
#include "mirror.h"
#include "paths.h"

struct mode_ctx {
	struct paths paths;
	struct ocsb_config cfg; /* owned */
	struct user_info owner, agent;
};

/* ocsb.conf and the two accounts; 0, or an exit status (logged). */
static int mode_setup(struct mode_ctx *c, const char *config, const char *what)
{
	char err[1024];
	int r;

	memset(c, 0, sizeof(*c));
	paths_default(&c->paths);
	config_defaults(&c->cfg);
	r = config_load(&c->cfg, config, err, sizeof(err));
	if (r < 0) {
		log_err("%s: %s", what, err);
		return 1;
	}
	if (config_validate(&c->cfg, err, sizeof(err)) < 0) {
		log_err("%s: %s: %s", what, config, err);
		return 1;
	}
	if (!c->cfg.owner[0] || user_lookup(c->cfg.owner, &c->owner) < 0) {
		log_err("%s: owner '%s' in %s is not a user of this machine", what, c->cfg.owner,
			config);
		return 1;
	}
	if (user_lookup(c->cfg.agent, &c->agent) < 0) {
		log_err("%s: agent account %s does not exist", what, c->cfg.agent);
		return 1;
	}
	return 0;
}

/* Only as `u`: real and effective ids both, never root. */
static int mode_as(const struct user_info *u, const char *what)
{
	if (getuid() != u->uid || geteuid() != u->uid || u->uid == 0 || getgid() != u->gid) {
		log_err("%s runs as %s (uid %u), not as uid %u", what, u->name, (unsigned)u->uid,
			(unsigned)geteuid());
		return 2;
	}
	return 0;
}

int agentd_mode_mirror_read(const char *config)
{
	struct mode_ctx c;
	struct mirror m;
	int r;

	r = mode_setup(&c, config, "--mirror-read");
	if (r == 0)
		r = mode_as(&c.owner, "--mirror-read");
	if (r == 0 && !c.cfg.mirror.paths.n) {
		log_err("--mirror-read: nothing is mirrored (mirror none)");
		r = 1;
	}
	if (r == 0 && mirror_init(&m, &c.paths, &c.owner, &c.agent, &c.cfg.mirror) < 0) {
		log_err("--mirror-read: path too long");
		r = 1;
	} else if (r == 0) {
		/* The manifest from the status file, the walk from the owner's home. */
		r = mirror_read_here(&m, 1);
		mirror_free(&m);
	}
	config_free(&c.cfg);
	return r;
}

int agentd_mode_mirror_link(const char *config)
{
	struct mode_ctx c;
	struct mirror m;
	int r;

	r = mode_setup(&c, config, "--mirror-link");
	if (r == 0)
		r = mode_as(&c.agent, "--mirror-link");
	if (r == 0 && mirror_init(&m, &c.paths, &c.owner, &c.agent, &c.cfg.mirror) < 0) {
		log_err("--mirror-link: path too long");
		r = 1;
	} else if (r == 0) {
		/* No manifest (the agent cannot read the status file): the tree says. */
		r = mirror_link_here(&m, 0, 0, 1);
		mirror_free(&m);
	}
	config_free(&c.cfg);
	return r;
}

int agentd_mode_owner_egress(const char *config)
{
	struct mode_ctx c;
	char err[1024], *data = NULL;
	size_t len = 0;
	int r;

	r = mode_setup(&c, config, "--owner-egress");
	if (r == 0)
		r = mode_as(&c.owner, "--owner-egress");
	if (r == 0) {
		/* conf_parse_file's checks on the descriptor it reads; the supervisor parses. */
		int e = egress_owner_read(c.owner.home, c.owner.uid, &data, &len, err, sizeof(err));

		if (e == -ENOENT) {
			r = 0; /* no file: no layer, nothing printed */
		} else if (e < 0) {
			log_err("%s", err);
			r = 1;
		} else if (fo_write_all(1, data, len) < 0) {
			log_err("--owner-egress: stdout: %s", strerror(errno));
			r = 1;
		}
	}
	free(data);
	config_free(&c.cfg);
	return r;
}

int agentd_mode_mirror_watch(const char *config)
{
	struct mode_ctx c;
	struct mirror m;
	int r;

	r = mode_setup(&c, config, "--mirror-watch");
	if (r == 0)
		r = mode_as(&c.owner, "--mirror-watch");
	if (r == 0 && !c.cfg.mirror.paths.n) {
		log_err("--mirror-watch: nothing is mirrored (mirror none)");
		r = 1;
	}
	if (r == 0 && mirror_init(&m, &c.paths, &c.owner, &c.agent, &c.cfg.mirror) < 0) {
		log_err("--mirror-watch: path too long");
		r = 1;
	} else if (r == 0) {
		/* The warden's parent-death signal ends it with the warden; EPIPE with us. */
		r = mirrorwatch_watcher(&m, 1);
		mirror_free(&m);
	}
	config_free(&c.cfg);
	return r;
}
