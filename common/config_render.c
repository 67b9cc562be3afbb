/* SPDX-License-Identifier: MIT */
/*
 * ocsb.conf as ocsb-provision writes it on its first run (config.h): every keyword
 * documented, the values in force set. The parser, which every program needs, is config.c.
 */
#include <stdio.h>
#include <string.h>

#include "conf.h"
#include "config.h"
#include "wconf.h"

static int render_limit(struct buf *o, const char *kw, int is_auto, int bytes, uint64_t v)
{
	if (is_auto)
		return buf_printf(o, "#%s auto\n", kw);
	if (!v)
		return buf_printf(o, "%s none\n", kw);
	if (bytes && v % (1ULL << 20) == 0)
		return buf_printf(o, "%s %lluM\n", kw, (unsigned long long)(v >> 20));
	return buf_printf(o, "%s %llu\n", kw, (unsigned long long)v);
}

/*
 * The mirrored paths on as many `mirror` lines as the parser takes (CONF_MAX_ARGS words
 * and CONF_MAX_LINE bytes a line): the first line replaces the defaults, the next ones add
 * to it. A path named "none" never stands alone on a line, where it would mean nothing.
 */
static int render_mirror(struct buf *o, const struct strv *paths)
{
	size_t i = 0;
	int r = 0;

	if (!paths->n)
		return buf_puts(o, "mirror none\n");
	while (i < paths->n) {
		size_t j = i, len = strlen("mirror");

		while (j < paths->n && j - i < CONF_MAX_ARGS - 1 &&
			len + 3 + strlen(paths->v[j]) <= CONF_MAX_LINE)
			len += 3 + strlen(paths->v[j++]);
		if (j == paths->n - 1 && !strcmp(paths->v[j], "none") && j - i > 1)
			j--;
		r |= buf_puts(o, "mirror");
		for (; i < j; i++)
			r |= buf_printf(o, " \"%s\"", paths->v[i]);
		r |= buf_puts(o, "\n");
	}
	return r;
}

int config_render(const struct ocsb_config *c, struct buf *o)
{
	int r = 0;

	r |= buf_puts(o,
		"# /etc/ocsb/ocsb.conf: written by ocsb-provision on its first run.\n"
		"# One 'keyword value' a line; '#' starts a comment; values with spaces go in\n"
		"# double quotes. Nothing here is executed. After editing, run\n"
		"#   sudo ocsb-provision           (apply)   or\n"
		"#   sudo ocsb-provision --check   (show what differs)\n\n");
	r |= buf_printf(o, "# The agent's Unix account (created by ocsb-provision).\nagent %s\n\n",
		c->agent);
	r |= buf_puts(
		o, "# The developer who works with the agent (their keys log in; they sync).\n");
	if (c->owner[0])
		r |= buf_printf(o, "owner %s\n\n", c->owner);
	else
		r |= buf_puts(o, "#owner alice\n\n");
	r |= buf_puts(o, "# Repositories of the owner the agent gets a clone of; repeatable.\n");
	for (size_t i = 0; i < c->projects.n; i++)
		r |= buf_printf(o, "project \"%s\"\n", c->projects.v[i]);
	if (!c->projects.n)
		r |= buf_puts(o, "#project /home/alice/code/shop\n");
	r |= buf_puts(o,
		"\n# Extra public keys allowed to log in as the agent (besides\n"
		"# ~owner/.ssh/*.pub); repeatable.\n");
	for (size_t i = 0; i < c->keys.n; i++)
		r |= buf_printf(o, "key \"%s\"\n", c->keys.v[i]);
	if (!c->keys.n)
		r |= buf_puts(o, "#key /root/alice-laptop.pub\n");
	r |= buf_puts(o,
		"\n# Public keys allowed to run git only (ocsb sync --host from another\n"
		"# machine: the key 'ocsb sync init --host' printed there); repeatable.\n");
	for (size_t i = 0; i < c->sync_keys.n; i++)
		r |= buf_printf(o, "sync-key \"%s\"\n", c->sync_keys.v[i]);
	if (!c->sync_keys.n)
		r |= buf_puts(o, "#sync-key /root/alice-laptop-sync.pub\n");
	r |= buf_printf(o, "\n# The agent's login shell.\n%sshell %s\n",
		strcmp(c->shell, OCSB_DEFAULT_SHELL) ? "" : "#", c->shell);
	r |= buf_printf(o,
		"\n# The agent's commits name the agent as committer (\"AGENT (ocsb agent)\"\n"
		"# <AGENT@HOST.ocsb>), and as author: 'owner' keeps the mirrored\n"
		"# user.name and user.email, 'agent' names the agent.\n%sagent-git-author %s\n",
		c->git_author_agent ? "" : "#", c->git_author_agent ? "agent" : "owner");
	r |= buf_printf(o,
		"\n# Port of this machine's sshd (pinned in the owner's known_hosts).\n%sssh-port "
		"%u\n",
		c->ssh_port == OCSB_DEFAULT_SSH_PORT ? "#" : "", c->ssh_port);
	r |= buf_printf(o,
		"\n# Loopback port of the egress proxy the agent's traffic must use.\n%sproxy-port "
		"%u\n",
		c->proxy_port == OCSB_DEFAULT_PROXY_PORT ? "#" : "", c->proxy_port);
	r |= buf_puts(o,
		"\n# Loopback TCP ports the agent may connect to, for servers it runs\n"
		"# itself (tests, dev servers); every other local port is refused. The\n"
		"# range is this agent's alone, not the machine's other agents': it may not\n"
		"# overlap another agent's range or OpenCode ports (refused).\n");
	if (c->ports_hi)
		r |= buf_printf(o, "agent-ports %u-%u\n", c->ports_lo, c->ports_hi);
	else
		r |= buf_puts(o, "#agent-ports 8000-8099\n");
	r |= buf_puts(o,
		"\n# The OpenCode binary ocsb-agentd runs as the agent. It and every directory\n"
		"# above it must be root's and not writable by others; the default is what\n"
		"#   sudo ocsb-provision --install-opencode\n"
		"# installs.\n");
	if (c->opencode_bin_set)
		r |= buf_printf(o, "opencode-bin \"%s\"\n", c->opencode_bin);
	else
		r |= buf_printf(o, "#opencode-bin %s\n", c->opencode_bin);
	r |= buf_printf(o,
		"\n# First loopback port of the OpenCode servers (ocsb-agentd), one per project\n"
		"# in the order above.\n%sopencode-port %u\n",
		c->opencode_port == OCSB_DEFAULT_OPENCODE_PORT ? "#" : "", c->opencode_port);
	r |= buf_puts(o,
		"\n# Limits of everything ocsb-agentd runs as the agent (one cgroup); 'none'\n"
		"# lifts one. Memory (4G, 512M; 'auto' = half of this machine):\n");
	r |= render_limit(
		o, "limit-memory", c->limit_memory == OCSB_LIMIT_AUTO, 1, c->limit_memory);
	r |= buf_puts(o, "# Tasks, that is processes and threads ('auto' = 4096):\n");
	r |= render_limit(o, "limit-tasks", c->limit_tasks == OCSB_LIMIT_AUTO, 0, c->limit_tasks);
	r |= buf_puts(o, "# CPU in percent of one CPU ('auto' = half of the CPUs):\n");
	r |= render_limit(o, "limit-cpu", c->limit_cpu == OCSB_LIMIT_AUTO, 0, c->limit_cpu);
	r |= buf_puts(o,
		"\n# The owner's tool configs the agent reads, relative to the owner's home: a\n"
		"# root-owned read-only copy, linked into the agent's home (docs/mirror.md).\n"
		"# The first 'mirror' line replaces the defaults; 'mirror none' mirrors nothing.\n"
		"# .gitconfig is never copied: only user.name, user.email, alias.* and\n"
		"# core.editor are. mirror-writable gives the agent its own writable copy of a\n"
		"# mirrored path instead; mirror-noscan turns the secret scan off below a path.\n");
	if (c->mirror.set) {
		r |= render_mirror(o, &c->mirror.paths);
	} else {
		r |= buf_puts(o, "#mirror .config/opencode .agents .gitconfig\n");
	}
	for (size_t i = 0; i < c->mirror.writable.n; i++)
		r |= buf_printf(o, "mirror-writable \"%s\"\n", c->mirror.writable.v[i]);
	for (size_t i = 0; i < c->mirror.noscan.n; i++)
		r |= buf_printf(o, "mirror-noscan \"%s\"\n", c->mirror.noscan.v[i]);
	if (!c->mirror.writable.n)
		r |= buf_puts(o, "#mirror-writable .agents\n");
	if (!c->mirror.noscan.n)
		r |= buf_puts(o, "#mirror-noscan .config/opencode/agent\n");
	return r ? -1 : 0;
}

int config_render_warden(const struct ocsb_config *c, struct buf *o)
{
	uint64_t memory;
	unsigned tasks, cpu;
	int r;

	config_limits(c, &memory, &tasks, &cpu);
	r = buf_printf(o,
		WCONF_MAGIC "\nagent %s\nowner %s\nproxy-port %u\nagent-ports %u %u\n"
			    "opencode-bin %s\nopencode-port %u\nlimits %llu %u %u\nmirror %d\n",
		c->agent, c->owner, c->proxy_port, c->ports_lo, c->ports_hi, c->opencode_bin,
		c->opencode_port, (unsigned long long)memory, tasks, cpu, c->mirror.paths.n > 0);
	for (size_t i = 0; i < c->projects.n && r == 0; i++)
		r = buf_printf(o, "project %s\n", c->projects.v[i]);
	return r < 0 ? r : buf_puts(o, "end\n");
}
