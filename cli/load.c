/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

int cli_load(struct cli *c, char *err, size_t errlen)
{
	char path[4096];
	int r;

	memset(c, 0, sizeof(*c));
	paths_default(&c->paths);
	config_defaults(&c->cfg);
	if (path_join(path, sizeof(path), c->paths.etc, "ocsb/ocsb.conf") < 0)
		return -1;
	r = config_load(&c->cfg, path, err, errlen);
	if (r == -ENOENT) {
		snprintf(err, errlen, "%s missing: run 'sudo ocsb-provision' first", path);
		return -1;
	}
	if (r < 0)
		return -1;
	if (c->cfg.owner[0] && user_lookup(c->cfg.owner, &c->owner) == 0)
		c->have_owner = 1;
	if (proxy_init(&c->proxy, &c->paths, c->cfg.proxy_port) < 0) {
		snprintf(err, errlen, "path too long");
		return -1;
	}
	/* Same layers as ocsb-provision: /etc, egress.d, then the owner's own file. */
	r = egress_load(&c->egress, &c->paths, c->have_owner ? c->owner.home : NULL,
		c->have_owner ? c->owner.uid : (uid_t)-1, err, errlen);
	if (r == -ENOENT)
		snprintf(err, errlen,
			"%s/ocsb/egress.conf missing: run 'sudo ocsb-provision' first",
			c->paths.etc);
	/* Someone else's setup: the owner's own rules are hers to read. Say who may. */
	else if (r == -EACCES && c->have_owner && geteuid() != 0 && geteuid() != c->owner.uid)
		snprintf(err, errlen,
			"this machine's agent %s belongs to %s: run ocsb as %s, or as root (sudo); "
			"%s's rules in %s/.config/ocsb are not readable by you",
			c->cfg.agent, c->owner.name, c->owner.name, c->owner.name, c->owner.home);
	return r < 0 ? -1 : 0;
}

void cli_free(struct cli *c)
{
	config_free(&c->cfg);
	egress_free(&c->egress);
}
