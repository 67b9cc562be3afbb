/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "efirst.h"
#include "egress_defaults.h"
#include "fileops.h"
#include "log.h"
#include "provision.h"
#include "spawn.h"

/*
 * The rules of a first provisioning (issue 29), gathered with the least authority that
 * can see each fact: the projects' files and remotes as the owner. Root reads nothing of the owner's: the owner's child
 * reports file indices, and git's output is cut to checked host names.
 */

#define GIT "/usr/bin/git"

/* As the owner: "PROJECT FILE" index pairs for each table file at a project's top. */
static int child_scan_files(void *arg, int outfd)
{
	const struct strv *projects = arg;

	for (size_t i = 0; i < projects->n; i++) {
		int dfd = open(projects->v[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (dfd < 0)
			continue;
		for (size_t k = 0; k < efirst_n_files(); k++) {
			struct stat st;

			/* Presence only: a link or a directory of that name says nothing. */
			if (fstatat(dfd, efirst_file(k), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				S_ISREG(st.st_mode))
				dprintf(outfd, "%zu %zu\n", i, k);
		}
		close(dfd);
	}
	return 0;
}

/* "~/code/app" for a project under the owner's home, else its path. */
static void project_text(struct prov *p, const char *path, char *out, size_t n)
{
	size_t hl = strlen(p->owner.home);

	if (hl > 1 && !strncmp(path, p->owner.home, hl) && path[hl] == '/')
		snprintf(out, n, "~%s", path + hl);
	else
		snprintf(out, n, "%s", path);
}

static int scan_files(struct prov *p, struct efirst *f)
{
	struct spawn_opts o = prov_as_owner(p);
	struct spawn_result res;
	char *save = NULL;
	int r;

	r = spawn_fn(child_scan_files, &p->cfg.projects, &o, &res);
	if (r < 0) {
		log_err("looking for manifest files in the projects as %s: %s", p->owner.name,
			strerror(-r));
		return -1;
	}
	for (char *l = strtok_r(res.output, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char why[EFIRST_MAX_WHY], proj[160];
		size_t i, k;

		/* Indices into our own tables, checked: the child's text is never shown. */
		if (sscanf(l, "%zu %zu", &i, &k) != 2 || i >= p->cfg.projects.n ||
			k >= efirst_n_files())
			continue;
		project_text(p, p->cfg.projects.v[i], proj, sizeof(proj));
		snprintf(
			why, sizeof(why), "%s: %s in %s", efirst_file_eco(k), efirst_file(k), proj);
		efirst_add(f, EFIRST_REGISTRY, efirst_file_hosts(k), why);
	}
	spawn_result_free(&res);
	return 0;
}

/* remote.NAME.url of one project, read by git as the owner: its local config only. */
static int scan_remotes(struct prov *p, const char *project, struct efirst *f)
{
	const char *argv[] = {GIT, "-C", project, "config", "--local", "--get-regexp",
		"^remote\\..*\\.url$", NULL};
	struct spawn_result res;
	char *save = NULL, proj[160];

	if (access(GIT, X_OK) < 0 || prov_owner_git(p, argv, &res) < 0)
		return 0;
	project_text(p, project, proj, sizeof(proj));
	for (char *l = res.status == 0 ? strtok_r(res.output, "\n", &save) : NULL; l;
		l = strtok_r(NULL, "\n", &save)) {
		char host[256], why[EFIRST_MAX_WHY], *url = strchr(l, ' ');
		const char *name = l + strlen("remote.");
		int nl;

		if (!url || strncmp(l, "remote.", 7) != 0 ||
			efirst_remote_host(url + 1, host, sizeof(host)) < 0)
			continue;
		/* remote.NAME.url: the name is what lies between; efirst_add masks odd bytes. */
		nl = (int)(url - name) - (int)strlen(".url");
		if (nl < 0)
			continue;
		snprintf(why, sizeof(why), "git: remote %.*s of %s", nl > 40 ? 40 : nl, name, proj);
		efirst_add(f, EFIRST_GIT, host, why);
	}
	spawn_result_free(&res);
	return 0;
}

static int scan(struct prov *p, struct efirst *f)
{
	/*
	 * Every built-in provider: what secrets the owner pushed is the supervisor's to know
	 * (its record is sealed with its key); root does not open it to narrow the list.
	 */
	efirst_providers_all(f);
	if (!p->have_owner || !p->cfg.projects.n)
		goto done;
	if (scan_files(p, f) < 0)
		return -1;
	for (size_t i = 0; i < p->cfg.projects.n; i++)
		scan_remotes(p, p->cfg.projects.v[i], f);
done:
	efirst_opencode(f);
	return 0;
}

int net_first_rules(struct prov *p, const struct buf **ret)
{
	struct efirst *f;
	int r;

	if (p->egress_first.data) {
		*ret = &p->egress_first;
		return 0;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		log_err("egress rules of a first run: %s", strerror(ENOMEM));
		return -1;
	}
	r = scan(p, f);
	if (r == 0) {
		r = efirst_render(egress_defaults, strlen(egress_defaults), f, &p->egress_first);
		if (r < 0)
			log_err("conf/egress.conf (built in): %s",
				r == -EINVAL ? "no '" EFIRST_MARK
					       "' line where the allow lines go; "
					       "rebuild from a clean tree"
					     : strerror(-r));
	}
	free(f);
	if (r < 0)
		return -1;
	*ret = &p->egress_first;
	return 0;
}
