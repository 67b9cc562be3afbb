/* SPDX-License-Identifier: MIT */
/*
 * What the uid alone leaves open at the account level (docs/escape.md):
 *  - cron and at would run the agent's jobs after ocsb-agentd stopped it, outside any
 *    supervision: the agent is listed in /etc/cron.deny and /etc/at.deny;
 *  - its ssh sessions get no core files and a bounded number of processes through
 *    pam_limits (/etc/security/limits.d/ocsb-<agent>.conf); OpenCode gets the same
 *    limits from ocsb-agentd itself.
 * Every file is rewritten atomically; --remove takes out only the agent's own lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "provision.h"

#define HARDEN_NPROC 4096

static const char *const deny_files[] = {"cron.deny", "at.deny"};

int harden_deny_edit(const char *in, const char *user, int add, struct buf *out)
{
	size_t ul = strlen(user);
	int found = 0, changed = 0;

	for (const char *s = in ? in : ""; *s;) {
		size_t n = strcspn(s, "\n");
		int mine = n == ul && !strncmp(s, user, ul);

		/* Removing: every line naming the user goes; adding: a duplicate is kept once. */
		if (mine && (!add || found))
			changed = 1;
		else if (buf_append(out, s, n) < 0 || buf_puts(out, "\n") < 0)
			return -1;
		found |= mine;
		s += n + (s[n] == '\n');
	}
	if (add && !found) {
		if (buf_printf(out, "%s\n", user) < 0)
			return -1;
		changed = 1;
	}
	return changed;
}

int harden_render_limits(const char *user, struct buf *out)
{
	return buf_printf(out,
		"# Written by ocsb-provision for the agent's ssh sessions; edits are overwritten.\n"
		"%s hard core 0\n"
		"%s hard nproc %d\n",
		user, user, HARDEN_NPROC);
}

static int deny_update(struct prov *p, const char *name, int add)
{
	char path[4096], *data = NULL;
	struct buf out = {0};
	struct stat st;
	mode_t mode = 0644;
	uid_t uid = 0;
	gid_t gid = 0;
	int r;

	if (path_join(path, sizeof(path), p->paths.etc, name) < 0)
		return -1;
	r = fo_read(path, 1 << 20, &data, NULL);
	if (r < 0 && r != -ENOENT) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	/* Keep the file's owner and mode (Debian: at.deny is root:daemon 0640). */
	if (r == 0 && lstat(path, &st) == 0) {
		mode = st.st_mode & 07777;
		uid = st.st_uid;
		gid = st.st_gid;
	}
	r = harden_deny_edit(data, p->cfg.agent, add, &out);
	if (r > 0 &&
		prov_change(p, "%s %s %s %s", add ? "add" : "remove", p->cfg.agent,
			add ? "to" : "from", path)) {
		r = fo_write(path, out.data ? out.data : "", out.len, mode, uid, gid);
		if (r < 0)
			log_err("%s: %s", path, strerror(-r));
		else
			prov_done(p);
	}
	free(data);
	buf_free(&out);
	return r < 0 ? -1 : 0;
}

static int limits_path(struct prov *p, char *out, size_t n)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "security/limits.d/ocsb-%s.conf", p->cfg.agent);
	return path_join(out, n, p->paths.etc, rel);
}

int harden_ensure(struct prov *p)
{
	char path[4096], dir[4096];
	struct buf b = {0};
	int r = -1, dfd;

	if (!p->cfg.agent[0])
		return 0;
	for (size_t i = 0; i < sizeof(deny_files) / sizeof(deny_files[0]); i++)
		if (deny_update(p, deny_files[i], 1) < 0)
			return -1;
	if (limits_path(p, path, sizeof(path)) < 0 || harden_render_limits(p->cfg.agent, &b) < 0)
		goto out;
	if (fo_same(path, b.data, b.len, 0644, 0, 0) == 1 || !prov_change(p, "write %s", path)) {
		r = 0;
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		goto out;
	}
	r = fo_write_at(dfd, strrchr(path, '/') + 1, b.data, b.len, 0644, 0, 0);
	close(dfd);
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	else
		prov_done(p);
out:
	buf_free(&b);
	return r < 0 ? -1 : 0;
}

int harden_remove(struct prov *p)
{
	char path[4096];
	struct stat st;
	int r = 0;

	if (!p->cfg.agent[0])
		return 0;
	for (size_t i = 0; i < sizeof(deny_files) / sizeof(deny_files[0]); i++)
		if (deny_update(p, deny_files[i], 0) < 0)
			r = -1;
	if (limits_path(p, path, sizeof(path)) == 0 && lstat(path, &st) == 0 &&
		prov_change(p, "remove %s", path)) {
		int u = fo_unlink(path);

		if (u < 0) {
			log_err("%s: %s", path, strerror(-u));
			r = -1;
		} else {
			prov_done(p);
		}
	}
	return r;
}
