/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "provision.h"

#ifndef OCSB_SBINDIR
#define OCSB_SBINDIR "/usr/local/sbin"
#endif

/*
 * Where systemd runs, ocsb-agentd becomes a service, and the agent's user slice gets a
 * second network layer that survives an nftables flush: IPAddressDeny=any with only
 * loopback allowed (the proxy). Without systemd, the supervisor runs in the foreground
 * (sudo ocsb-agentd --foreground) and nothing here applies.
 */

int systemd_render_unit(struct buf *out)
{
	return buf_printf(out,
		"# Written by ocsb-provision; edits are overwritten.\n"
		"[Unit]\n"
		"Description=ocsb supervisor: OpenCode in the agent account, behind the netlock\n"
		"After=network.target ssh.service\n"
		"\n"
		"[Service]\n"
		"Type=simple\n"
		"ExecStart=%s/ocsb-agentd --foreground\n"
		"ExecReload=/bin/kill -HUP $MAINPID\n"
		"# OpenCode is stopped by agentd itself; then whatever is left of the unit.\n"
		"KillMode=mixed\n"
		"# agentd keeps the agent's cgroup (limits, freezer) in a subtree of its own.\n"
		"Delegate=yes\n"
		"TimeoutStopSec=15\n"
		"Restart=on-failure\n"
		"RestartSec=2\n"
		"\n"
		"[Install]\n"
		"WantedBy=multi-user.target\n",
		OCSB_SBINDIR);
}

int systemd_render_slice(const struct ocsb_config *c, struct buf *out)
{
	uint64_t mem;
	unsigned tasks, cpu;
	int r = 0;

	config_limits(c, &mem, &tasks, &cpu);
	r |= buf_puts(out,
		"# Written by ocsb-provision; edits are overwritten.\n"
		"# A second layer under the nftables netlock: even with the table\n"
		"# flushed, the agent's sessions reach nothing but loopback.\n"
		"[Slice]\n"
		"IPAddressDeny=any\n"
		"IPAddressAllow=localhost\n"
		"# The limits of ocsb.conf (limit-memory, limit-tasks, limit-cpu) for the\n"
		"# agent's ssh sessions; what ocsb-agentd runs has the same in its own cgroup.\n");
	if (mem)
		r |= buf_printf(out, "MemoryMax=%llu\n", (unsigned long long)mem);
	else
		r |= buf_puts(out, "MemoryMax=infinity\n");
	if (tasks)
		r |= buf_printf(out, "TasksMax=%u\n", tasks);
	else
		r |= buf_puts(out, "TasksMax=infinity\n");
	if (cpu)
		r |= buf_printf(out, "CPUQuota=%u%%\n", cpu);
	else
		r |= buf_puts(out, "CPUQuota=\n");
	return r ? -1 : 0;
}

int systemd_ensure(struct prov *p)
{
	const char *reload[] = {"/usr/bin/systemctl", "daemon-reload", NULL};
	const char *enable[] = {
		"/usr/bin/systemctl", "enable", "--now", "ocsb-agentd.service", NULL};
	struct buf unit = {0}, slice = {0};
	char upath[4096], spath[4096], rel[128];
	struct stat st;
	int changed = 0, r = -1;

	if (stat("/run/systemd/system", &st) < 0) {
		if (p->mode == PROV_APPLY && p->changes)
			printf("note: no systemd here: run the supervisor with "
			       "'sudo ocsb-agentd --foreground'\n");
		return 0;
	}
	snprintf(rel, sizeof(rel), "systemd/system/user-%u.slice.d/ocsb.conf",
		(unsigned)p->agent.uid);
	if (path_join(upath, sizeof(upath), p->paths.etc, "systemd/system/ocsb-agentd.service") <
			0 ||
		path_join(spath, sizeof(spath), p->paths.etc, rel) < 0)
		return -1;
	if (systemd_render_unit(&unit) < 0 || systemd_render_slice(&p->cfg, &slice) < 0)
		goto out;
	if (prov_write_file(p, upath, &unit, 0644, &changed) < 0)
		goto out;
	if (p->agent_exists && prov_write_file(p, spath, &slice, 0644, &changed) < 0)
		goto out;
	r = 0;
	if (changed && (prov_exec(p, reload, NULL) < 0 || prov_exec(p, enable, NULL) < 0))
		r = -1;
out:
	buf_free(&unit);
	buf_free(&slice);
	return r;
}
