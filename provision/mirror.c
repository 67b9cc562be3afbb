/* SPDX-License-Identifier: MIT */
/* Provisioning step: the read-only mirror of the owner's tool configs (docs/mirror.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mirror.h"
#include "provision.h"

static void print_notices(const struct mirror *m)
{
	/* Skips, withheld files and redactions are news for the owner, not changes. */
	for (size_t i = 0; i < m->notices.n && i < 40; i++) {
		/* Details come from the reader, which runs with the owner's rights. */
		char vis[4096];

		log_vis(m->notices.v[i], strlen(m->notices.v[i]), vis, sizeof(vis));
		printf("mirror: %s\n", vis);
	}
	if (m->notices.n > 40)
		printf("mirror: ... and %zu more (ocsb mirror status)\n", m->notices.n - 40);
}

int prov_mirror_ensure(struct prov *p)
{
	struct mirror m;
	struct mirror_stats st;
	struct strv links = {0};
	int dry = p->mode != PROV_APPLY, r = 0;

	if (!p->cfg.mirror.paths.n)
		return 0;
	if (!p->have_owner)
		return 0;
	if (!p->agent_exists) {
		/* Dry run before the account exists: the plan only. */
		prov_change(p, "mirror %zu path%s of %s for %s", p->cfg.mirror.paths.n,
			p->cfg.mirror.paths.n == 1 ? "" : "s", p->owner.name, p->cfg.agent);
		return 0;
	}
	if (mirror_init(&m, &p->paths, &p->owner, &p->agent, &p->cfg.mirror) < 0) {
		log_err("mirror: path too long");
		return -1;
	}
	m.by = "ocsb-provision";
	if (!p->have_agentd_acct) {
		/* Dry run before the supervisor's account exists: the plan only. */
		prov_change(p, "mirror %zu path%s of %s for %s, written by %s",
			p->cfg.mirror.paths.n, p->cfg.mirror.paths.n == 1 ? "" : "s", p->owner.name,
			p->cfg.agent, AGENTD_USER);
		goto out;
	}
	/*
	 * The tree is the account ocsb-agentd's (issue 26): root makes the directories and
	 * the status file the account cannot make, and converts a tree of an earlier
	 * version (by descriptor); a child running as the account writes the tree.
	 */
	if (mirror_set_account(&m, &p->agentd_acct) < 0 ||
		mirror_prepare(&m, dry, &links) < 0) {
		r = -1;
		goto out;
	}
	for (size_t i = 0; i < links.n; i++) {
		prov_change(p, "mirror: %s %s", links.v[i], AGENTD_USER);
		prov_done(p);
	}
	strv_free(&links);
	if (mirror_load(&m) < 0 || mirror_refresh(&m, dry, &st) < 0) {
		r = -1;
		goto out;
	}
	if (dry) {
		for (size_t i = 0; i < m.changes.n && i < 20; i++)
			prov_change(p, "mirror: %s", m.changes.v[i]);
		if (st.written + st.removed > 20)
			prov_change(p, "mirror: ... %u more", st.written + st.removed - 20);
	} else if (st.written || st.removed) {
		prov_change(p, "mirror %s -> %s: %u written, %u removed (%u entries, %ld ms)",
			m.home, m.tree, st.written, st.removed, st.entries, st.ms);
		prov_done(p);
	}
	print_notices(&m);
	if (mirror_reserve(&m, dry, &links) < 0) {
		r = -1;
		goto out;
	}
	if (mirror_link(&m, dry, &links) < 0) {
		r = -1;
		goto out;
	}
	for (size_t i = 0; i < links.n; i++) {
		prov_change(p, "%s", links.v[i]);
		prov_done(p);
	}
out:
	strv_free(&links);
	mirror_free(&m);
	return r;
}

int prov_mirror_remove(struct prov *p)
{
	struct mirror m;
	struct strv links = {0};
	struct user_info none = {.uid = (uid_t)-1, .gid = (gid_t)-1};
	int r = 0;

	snprintf(none.name, sizeof(none.name), "%s", p->cfg.agent);
	if (mirror_init(&m, &p->paths, p->have_owner ? &p->owner : &none,
		    p->agent_exists ? &p->agent : &none, &p->cfg.mirror) < 0)
		return -1;
	/* The links first, as the agent; a writable copy is the agent's and stays. */
	if (p->agent_exists && mirror_unlink(&m, 1, &links) == 0 && links.n) {
		strv_free(&links);
		if (mirror_unlink(&m, 0, &links) < 0)
			r = -1;
		for (size_t i = 0; i < links.n; i++) {
			prov_change(p, "%s", links.v[i]);
			prov_done(p);
		}
	}
	if (access(m.dir, F_OK) == 0 || access(m.status, F_OK) == 0) {
		prov_change(p, "remove the mirror %s and %s", m.dir, m.status);
		if (mirror_remove(&m) < 0)
			r = -1;
		else
			prov_done(p);
	}
	strv_free(&links);
	mirror_free(&m);
	return r;
}
