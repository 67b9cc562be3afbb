/* SPDX-License-Identifier: MIT */
/* `ocsb mirror status [--json]`: what the last mirror build mirrored, skipped and why. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "homecheck.h"
#include "args.h"
#include "log.h"
#include "mirror.h"
#include "paths.h"

int mirror_places_check(const struct ocsb_config *cfg, const struct paths *p,
	const struct user_info *agent, mirror_place_fn fn, void *arg)
{
	const struct mirror_spec *ms = &cfg->mirror;
	char tree[4096], target[8192], why[256];
	struct stat st;
	int seen = 0;

	if (snprintf(tree, sizeof(tree), "%s/ocsb/mirror/%s/tree", p->varlib, agent->name) >=
		(int)sizeof(tree))
		return -1;
	for (size_t i = 0; i < ms->paths.n; i++) {
		const char *rel = ms->paths.v[i];
		int writable = 0, r;

		for (size_t k = 0; k < ms->writable.n; k++)
			writable |= mirror_path_under(rel, ms->writable.v[k]);
		snprintf(target, sizeof(target), "%s/%s", tree, rel);
		/* A writable copy and the generated .gitconfig are no links by design. */
		if (writable || !strcmp(rel, MIRROR_GITCONFIG) || lstat(target, &st) < 0)
			continue;
		seen++;
		r = home_link_check(agent, rel, target, why, sizeof(why));
		if (r < 0)
			return -1;
		fn(arg, rel, r == 1 ? why : NULL);
	}
	return seen;
}

struct place_report {
	FILE *f;
	const char *agent;
	int bad;
};

static void place_print(void *arg, const char *rel, const char *why)
{
	struct place_report *pr = arg;

	if (!why)
		return;
	/* why comes from a look at the agent's home: escaped like every name here. */
	fprintf(pr->f, "%sunlinked  ~%s/%s: %s: the agent does not see your %s\n",
		pr->bad++ ? "" : "\n", pr->agent, rel, why, rel);
}

/*
 * The mirror's places in the agent's home (issue 15): a real directory there instead of
 * the link hides the owner's configs, and the status file cannot know. Only root can look
 * into the agent's 0700 home; the owner is told so rather than shown "mirrored" alone.
 */
static int report_places(const struct ocsb_config *cfg, const struct paths *p, int json)
{
	struct place_report pr = {stdout, cfg->agent, 0};
	struct user_info a;
	int seen;

	if (json)
		return 0;
	if (geteuid() != 0) {
		printf("\nplaces in ~%s: not checked (only root can look into the agent's home): "
		       "sudo ocsb mirror status\n",
			cfg->agent);
		return 0;
	}
	if (user_lookup(cfg->agent, &a) < 0) {
		log_err("no account %s", cfg->agent);
		return -1;
	}
	seen = mirror_places_check(cfg, p, &a, place_print, &pr);
	if (seen < 0)
		return -1;
	if (pr.bad)
		printf("fix: sudo -u %s rm -rf ~%s/PLACE && sudo ocsb-provision\n", a.name,
			a.name);
	else if (seen)
		printf("\nplaces in ~%s: the %d place%s link%s to the mirror\n", a.name, seen,
			seen == 1 ? "" : "s", seen == 1 ? "s" : "");
	return pr.bad;
}

int cmd_mirror(int argc, char **argv)
{
	struct ocsb_config cfg;
	struct paths paths;
	char conf[4096], status[4096], err[1024], name[96];
	int json = 0, r;

	static const char *const subs[] = {"status", NULL};
	static const char *const opts[] = {"--json", NULL};

	if (argc < 2) {
		log_err("say status (ocsb mirror status [--json]); see ocsb --help");
		return 2;
	}
	if (strcmp(argv[1], "status") != 0)
		return args_unknown("subcommand", argv[1], subs, "ocsb --help");
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = 1;
		else
			return args_unknown(argv[i][0] == '-' ? "option" : "argument", argv[i],
				opts, "ocsb --help");
	}
	paths_default(&paths);
	config_defaults(&cfg);
	if (path_join(conf, sizeof(conf), paths.etc, "ocsb/ocsb.conf") < 0)
		return 2;
	r = config_load(&cfg, conf, err, sizeof(err));
	if (r < 0) {
		log_err("%s",
			r == -ENOENT ? "no /etc/ocsb/ocsb.conf: run 'sudo ocsb-provision' first"
				     : err);
		config_free(&cfg);
		return 2;
	}
	snprintf(name, sizeof(name), "ocsb/mirror/%s.status", cfg.agent);
	r = path_join(status, sizeof(status), paths.varlib, name);
	if (r < 0)
		goto out;
	r = mirror_status_print(status, json, stdout);
	if (r == -ENOENT) {
		log_err("%s: no mirror built yet: run 'sudo ocsb-provision'", status);
		r = 1;
	} else if (r == -EACCES) {
		log_err("%s: only root and the owner may read it", status);
		r = 1;
	} else if (r < 0) {
		log_err("%s: %s", status, strerror(-r));
		r = 1;
	} else {
		r = report_places(&cfg, &paths, json) ? 1 : 0;
	}
out:
	config_free(&cfg);
	return r < 0 ? 2 : r;
}
