/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "homecheck.h"
#include "log.h"
#include "provision.h"
#include "spawn.h"
#include "../secrets/secrets.h"

/*
 * The secrets plumbing ocsb-provision owns: agentd's sealing key pair (private key
 * root-only under /var/lib/ocsb, public key readable by the owner in /etc/ocsb) and the
 * root-owned profile hook that loads /run/ocsb/<agent>/env into the agent's shells.
 */

static int hook_path(struct prov *p, char *out, size_t n)
{
	char rel[128];

	snprintf(rel, sizeof(rel), "profile.d/ocsb-%s.sh", p->cfg.agent);
	return path_join(out, n, p->paths.etc, rel);
}

int secrets_render_hook(const char *agent, uid_t uid, const char *run, struct buf *out)
{
	/*
	 * Only for the agent's uid, only a regular file the agent owns in root's directory
	 * (agentd writes it there with O_NOFOLLOW): another user's shell never reads it.
	 * Sourced by login shells (/etc/profile) and, from the agent's ~/.bashrc, by
	 * `ssh agent@host command`.
	 */
	return buf_printf(out,
		"# Written by ocsb-provision for the agent account %s; edits are overwritten.\n"
		"# Loads the owner's secrets pushed with 'ocsb secrets push' (ocsb(1)).\n"
		"if [ \"$(id -u 2>/dev/null)\" = %u ] && [ -f %s/ocsb/%s/env ] && "
		"[ ! -L %s/ocsb/%s/env ] && [ -O %s/ocsb/%s/env ]; then\n"
		"\tset -a\n"
		"\t. %s/ocsb/%s/env\n"
		"\tset +a\n"
		"fi\n",
		agent, (unsigned)uid, run, agent, run, agent, run, agent, run, agent);
}

static int key_ensure(struct prov *p)
{
	unsigned char *sk = NULL, pk[crypto_box_PUBLICKEYBYTES];
	char key[4096], pub[4096], dir[4096], err[512];
	struct buf text = {0};
	int r, dfd = -1, rc = -1;

	if (path_join(key, sizeof(key), p->paths.varlib, SECRETS_KEY_REL) < 0 ||
		path_join(pub, sizeof(pub), p->paths.etc, SECRETS_PUB_REL) < 0)
		return -1;
	sk = secrets_alloc(crypto_box_SECRETKEYBYTES);
	if (!sk) {
		log_err("%s", secrets_alloc_error());
		return -1;
	}
	r = secrets_key_load(key, sk, pk, err, sizeof(err));
	if (r < 0 && r != -ENOENT && r != -EPERM && r != -EINVAL) {
		log_err("%s", err);
		goto done;
	}
	if (r < 0) {
		/* Missing, or possibly seen by others: a new key (the owner pushes again). */
		int go = r == -ENOENT ? prov_change(p, "generate the secrets sealing key %s", key)
				      : prov_change(p, "replace the secrets sealing key: %s", err);

		if (!go)
			goto ok;
		crypto_box_keypair(pk, sk);
		if (state_root(p) < 0)
			goto done;
		snprintf(dir, sizeof(dir), "%s", key);
		*strrchr(dir, '/') = '\0';
		dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, 0, 0);
		r = dfd < 0 ? dfd
			    : fo_write_at(dfd, strrchr(key, '/') + 1, sk, crypto_box_SECRETKEYBYTES,
				      0600, 0, 0);
		if (r < 0) {
			log_err("%s: %s", key, strerror(-r));
			goto done;
		}
		prov_done(p);
	}
	if (secrets_pub_render(pk, &text) < 0)
		goto done;
	if (fo_same(pub, text.data, text.len, 0644, 0, 0) != 1 &&
		prov_change(p, "write the secrets public key %s", pub)) {
		r = fo_write(pub, text.data, text.len, 0644, 0, 0);
		if (r < 0) {
			log_err("%s: %s", pub, strerror(-r));
			goto done;
		}
		prov_done(p);
	}
ok:
	rc = 0;
done:
	if (dfd >= 0)
		close(dfd);
	secrets_free(sk);
	buf_free(&text);
	return rc;
}

static int hook_ensure(struct prov *p)
{
	char path[4096], dir[4096];
	struct buf b = {0};
	int r = 0, dfd;

	if (!p->agent_exists || hook_path(p, path, sizeof(path)) < 0)
		return 0;
	if (secrets_render_hook(p->cfg.agent, p->agent.uid, p->paths.run, &b) < 0)
		return -1;
	if (fo_same(path, b.data, b.len, 0644, 0, 0) != 1 && prov_change(p, "write %s", path)) {
		snprintf(dir, sizeof(dir), "%s", path);
		*strrchr(dir, '/') = '\0';
		dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
		r = dfd < 0 ? dfd
			    : fo_write_at(dfd, strrchr(path, '/') + 1, b.data, b.len, 0644, 0, 0);
		if (dfd >= 0)
			close(dfd);
		if (r < 0)
			log_err("%s: %s", path, strerror(-r));
		else
			prov_done(p);
	}
	buf_free(&b);
	return r < 0 ? -1 : 0;
}

/*
 * `ssh agent@host cmd`: bash sees a network stdin and reads only ~/.bashrc (not
 * /etc/profile, not BASH_ENV), so the hook is sourced from the top of the agent's own
 * .bashrc, before Debian's early return for non-interactive shells. Edited by a child
 * running as the agent: root never opens a file in the agent's home.
 */
struct bashrc_job {
	char line[8400];
	int apply;
};

static int child_bashrc(void *arg, int outfd)
{
	struct bashrc_job *j = arg;
	struct buf b = {0};
	char *old = NULL;
	size_t oldlen = 0;
	int r;

	r = fo_read_at(AT_FDCWD, ".bashrc", 1024 * 1024, &old, &oldlen);
	if (r < 0 && r != -ENOENT) {
		dprintf(outfd, ".bashrc: %s", strerror(-r));
		return 1;
	}
	if (old && memmem(old, oldlen, j->line, strlen(j->line))) {
		free(old);
		return 0;
	}
	if (!j->apply) {
		free(old);
		return 10;
	}
	buf_puts(&b, j->line);
	if (old)
		buf_append(&b, old, oldlen);
	r = fo_write_at(AT_FDCWD, ".bashrc", b.data, b.len, 0600, (uid_t)-1, (gid_t)-1);
	buf_free(&b);
	free(old);
	if (r < 0) {
		dprintf(outfd, ".bashrc: %s", strerror(-r));
		return 1;
	}
	return 0;
}

static int agent_bashrc_ensure(struct prov *p, const char *hook)
{
	struct spawn_opts o = {.drop = 1,
		.uid = p->agent.uid,
		.gid = p->agent.gid,
		.user = p->agent.name,
		.cwd = p->agent.home};
	struct bashrc_job j = {.apply = 0};
	struct spawn_result res;
	int r;

	char why[256];

	r = home_entry_check(&p->agent, ".bashrc", 0, why, sizeof(why));
	if (r < 0)
		return -1;
	if (r == 1) {
		prov_skip(p,
			"~%s/.bashrc %s: the secrets hook for `ssh %s@host cmd` is not added "
			"(the agent's own doing; to repair: sudo -u %s rm ~%s/.bashrc, then run "
			"ocsb-provision)",
			p->agent.name, why, p->agent.name, p->agent.name, p->agent.name);
		return 0;
	}
	snprintf(j.line, sizeof(j.line),
		"# added by ocsb-provision: the owner's secrets (ocsb secrets push)\n"
		"[ -r %s ] && . %s\n",
		hook, hook);
	r = spawn_fn(child_bashrc, &j, &o, &res);
	if (r == 0 && res.status == 10) {
		spawn_result_free(&res);
		if (!prov_change(p, "source %s from %s/.bashrc", hook, p->agent.home))
			return 0;
		j.apply = 1;
		r = spawn_fn(child_bashrc, &j, &o, &res);
		if (r == 0 && res.status == 0)
			prov_done(p);
	}
	if (r == 0) {
		if (res.status != 0) {
			log_output(LOG_LVL_ERR, res.output ? res.output : "failed", "as %s",
				p->agent.name);
			r = -EIO;
		}
		spawn_result_free(&res);
	}
	return r < 0 ? -1 : 0;
}

int secrets_ensure(struct prov *p)
{
	char hook[4096];

	if (sodium_init() < 0) {
		log_err("libsodium failed to initialize");
		return -1;
	}
	if (key_ensure(p) < 0 || hook_ensure(p) < 0)
		return -1;
	if (!p->agent_exists || hook_path(p, hook, sizeof(hook)) < 0)
		return 0;
	return agent_bashrc_ensure(p, hook);
}

int secrets_remove(struct prov *p)
{
	char path[4096], rel[128];
	int r = 0;

	/* Secrets must not outlive the setup they were pushed to. */
	if (hook_path(p, path, sizeof(path)) == 0 &&
		prov_remove_file(p, path, "the profile hook") < 0)
		r = -1;
	snprintf(rel, sizeof(rel), "ocsb/%s/env", p->cfg.agent);
	if (path_join(path, sizeof(path), p->paths.run, rel) == 0 &&
		prov_remove_file(p, path, "the agent's secrets file") < 0)
		r = -1;
	/*
	 * agentd keeps one record and one sealing key, for the agent it serves: removing
	 * another agent (its own --config) leaves them to that agent (issue 15).
	 */
	if (!prov_agentd_config(p))
		return r;
	if (path_join(path, sizeof(path), p->paths.varlib, SECRETS_REC_REL) == 0 &&
		prov_remove_file(p, path, "the stored secrets") < 0)
		r = -1;
	/* The sealing key is agentd's, for whichever agent it serves next. */
	if (!p->purge || p->others)
		return r;
	if (path_join(path, sizeof(path), p->paths.varlib, SECRETS_KEY_REL) == 0 &&
		prov_remove_file(p, path, "the secrets sealing key") < 0)
		r = -1;
	if (path_join(path, sizeof(path), p->paths.etc, SECRETS_PUB_REL) == 0 &&
		prov_remove_file(p, path, "the secrets public key") < 0)
		r = -1;
	return r;
}
