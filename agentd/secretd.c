/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentd.h"
#include "ctl.h"
#include "fileops.h"
#include "log.h"
#include "../secrets/secrets.h"

/*
 * agentd's side of the secrets: open what the owner pushed (sealed to our key), keep it
 * encrypted at rest (the supervisor's account only), decrypt into locked memory only to
 * start OpenCode or to have the warden write the agent's tmpfs env file, and wipe right
 * after. Values never reach a log line, an argv or an error message: only names and
 * counts do.
 */

#define ENV_NAME "env"

static int varlib_path(struct agentd *d, const char *rel, char *out, size_t n)
{
	return path_join(out, n, d->paths.varlib, rel);
}

/* The record, or an empty set when nothing was pushed yet. */
static int load_set(struct agentd *d, struct secret_set **ret)
{
	unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];
	char path[4096], err[512], *data = NULL;
	size_t len = 0;
	int r;

	if (varlib_path(d, SECRETS_REC_REL, path, sizeof(path)) < 0)
		return -1;
	r = fo_read(path, SECRETS_MAX_SET + 1024, &data, &len);
	if (r == -ENOENT) {
		*ret = secrets_set_new();
		if (!*ret)
			log_err("secrets: %s", secrets_alloc_error());
		return *ret ? 0 : -1;
	}
	if (r < 0) {
		log_err("secrets: %s: %s", path, strerror(-r));
		return -1;
	}
	secrets_rec_key(d->sec_sk, key);
	r = secrets_rec_open(key, (unsigned char *)data, len, ret, err, sizeof(err));
	sodium_memzero(key, sizeof(key));
	free(data);
	if (r < 0)
		log_err("secrets: %s: %s (push the secrets again)", path, err);
	return r;
}

/* The project whose overrides ssh sessions see: the first one (docs/secrets.md). */
static const char *ssh_project(struct agentd *d)
{
	return d->n_oc ? strchr(d->oc[0].name, '/') + 1 : "";
}

/*
 * /run/ocsb/<agent>/env: written by the warden (WP_FILE_AGENT_ENV) in the root-owned
 * directory the agent cannot plant a link in, the file itself the agent's, 0400.
 */
static int write_env_file(struct agentd *d, const struct secret_set *s)
{
	char *text = NULL;
	struct buf git = {0};
	size_t len = 0;
	int r;

	/* git over HTTPS to an injected host goes through its route (injectd.c). */
	r = injectd_env_lines(d, s, ssh_project(d), &git);
	if (r == 0)
		r = secrets_env_file(s, ssh_project(d), git.data, &text, &len);
	buf_free(&git);
	if (r == 0)
		r = wc_write(d, WP_FILE_AGENT_ENV, text, len);
	secrets_free(text);
	if (r < 0)
		log_err("secrets: %s/ocsb/%s/%s: %s", d->paths.run, d->agent.name, ENV_NAME,
			strerror(-r));
	return r < 0 ? -1 : 0;
}

int secretd_load(struct agentd *d, struct secret_set **ret)
{
	return d->sec_sk ? load_set(d, ret) : -1;
}

int secretd_init(struct agentd *d)
{
	char path[4096], err[512];
	struct secret_set *s = NULL;
	int r;

	randombytes_buf(d->sec_digest_key, sizeof(d->sec_digest_key));
	if (varlib_path(d, SECRETS_KEY_REL, path, sizeof(path)) < 0)
		return -1;
	d->sec_sk = secrets_alloc(crypto_box_SECRETKEYBYTES);
	if (!d->sec_sk) {
		log_err("secrets: %s", secrets_alloc_error());
		return -1;
	}
	r = secrets_key_load(path, d->sec_sk, d->sec_pk, err, sizeof(err));
	if (r == -ENOENT) {
		/* Not fatal: everything else works; a push says what to do. */
		snprintf(d->sec_error, sizeof(d->sec_error), "%s", err);
		log_warn("secrets: %s; secrets are unavailable until then", err);
		secrets_free(d->sec_sk);
		d->sec_sk = NULL;
		return 0;
	}
	if (r < 0) {
		/* A key others could read or replace: refuse rather than hand secrets over. */
		log_err("secrets: %s", err);
		return -1;
	}
	if (load_set(d, &s) == 0) {
		write_env_file(d, s);
		log_info("secrets: %zu stored secret%s", s->n, s->n == 1 ? "" : "s");
	}
	secrets_set_free(s);
	return 0;
}

void secretd_free(struct agentd *d)
{
	secrets_free(d->sec_sk);
	d->sec_sk = NULL;
}

int secretd_child_env(struct agentd *d, struct child *c)
{
	size_t idx[SECRETS_MAX_COUNT], n, size = 0, k = 0;
	const char *project = strchr(c->name, '/') + 1;
	struct secret_set *s = NULL;
	char *arena, **env;

	c->sec_env = NULL;
	memset(c->sec_digest, 0, sizeof(c->sec_digest));
	if (!d->sec_sk)
		return 0;
	if (load_set(d, &s) < 0)
		return -1;
	n = secrets_effective(s, project, idx);
	secrets_digest(s, project, d->sec_digest_key, c->sec_digest);
	for (size_t i = 0; i < n; i++)
		size += strlen(s->e[idx[i]].name) + 1 + s->e[idx[i]].len + sizeof(SECRETS_PLACEHOLDER);
	/* One locked block: the pointer array, then "NAME=value" strings. */
	env = secrets_alloc((n + 1) * sizeof(char *) + size + 1);
	if (!env) {
		log_err("%s: secrets: %s", c->name, secrets_alloc_error());
		secrets_set_free(s);
		return -1;
	}
	arena = (char *)(env + n + 1);
	for (size_t i = 0; i < n; i++) {
		const struct secret *e = &s->e[idx[i]];

		env[i] = arena + k;
		k += (size_t)sprintf(arena + k, "%s=", e->name);
		/* Injected (issue 17): the key stays with ocsb-inject, OpenCode gets a stand-in. */
		if (e->route[0])
			k += (size_t)sprintf(arena + k, "%s", SECRETS_PLACEHOLDER);
		else
			memcpy(arena + k, e->value, e->len);
		k += e->route[0] ? 0 : e->len;
		arena[k++] = '\0';
	}
	env[n] = NULL;
	c->sec_env = env;
	c->sec_count = n;
	secrets_set_free(s);
	return 0;
}

void secretd_child_env_free(struct child *c)
{
	secrets_free(c->sec_env);
	c->sec_env = NULL;
}

void secretd_put(struct agentd *d, uid_t peer, const char *sealed, struct buf *b)
{
	unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES],
		digest[crypto_generichash_BYTES];
	char path[4096], dir[4096], err[512];
	struct secret_set *s = NULL;
	struct buf rec = {0};
	int dfd, r, restarted = 0;

	if (!d->sec_sk) {
		ctl_response_err(b, "secrets are unavailable: %s", d->sec_error);
		return;
	}
	if (secrets_unseal(d->sec_pk, d->sec_sk, sealed, strlen(sealed), &s, err, sizeof(err)) <
		0) {
		log_warn("secrets: uid %u: refused: %s", (unsigned)peer, err);
		ctl_response_err(b, "%s", err);
		return;
	}
	/* At rest first: a restart below reads the record, and a crash must not lose a push. */
	secrets_rec_key(d->sec_sk, key);
	r = secrets_rec_seal(key, s, (long long)time(NULL), &rec);
	sodium_memzero(key, sizeof(key));
	if (r < 0 || varlib_path(d, SECRETS_REC_REL, path, sizeof(path)) < 0) {
		ctl_response_err(b, "cannot seal the secrets record");
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s", path);
	*strrchr(dir, '/') = '\0';
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, getuid(), getgid());
	r = dfd < 0 ? dfd
		    : fo_write_at(dfd, strrchr(path, '/') + 1, rec.data, rec.len, 0600, getuid(),
			      getgid());
	if (dfd >= 0)
		close(dfd);
	if (r < 0) {
		log_err("secrets: %s: %s", path, strerror(-r));
		ctl_response_err(b, "cannot store the secrets: %s: %s", path, strerror(-r));
		goto out;
	}
	if (write_env_file(d, s) < 0) {
		ctl_response_err(b,
			"stored, but the agent's env file could not be written (see "
			"the ocsb-agentd log)");
		goto out;
	}
	/* Before any restart: OpenCode starts with the routes in its config. */
	injectd_update(d, s);
	ctl_response_ok(b);
	ctl_response_add(b, "secrets", "%zu", s->n);
	/* Only instances whose own effective set changed; one that is not running picks up
	 * the record when it starts. */
	for (size_t i = 0; i < d->n_oc; i++) {
		struct child *c = &d->oc[i];
		const char *project = strchr(c->name, '/') + 1;

		if (c->pid <= 0)
			continue;
		secrets_digest(s, project, d->sec_digest_key, digest);
		/* Its routes can move when another project's change; then it restarts too. */
		if (sodium_memcmp(digest, c->sec_digest, sizeof(digest)) == 0 &&
			!injectd_changed(d, project))
			continue;
		child_restart(d, c);
		ctl_response_add(b, "restarted", "%s", project);
		restarted++;
	}
	log_notice("secrets: %zu secret%s from uid %u stored; %d instance%s restarted", s->n,
		s->n == 1 ? "" : "s", (unsigned)peer, restarted, restarted == 1 ? "" : "s");
out:
	buf_free(&rec);
	secrets_set_free(s);
}
