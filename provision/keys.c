/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "fileops.h"
#include "log.h"
#include "provision.h"
#include "spawn.h"

#define PUBKEY_MAX 16384
#define OWNER_DIR ".config/ocsb"

/* Copy a key comment keeping only characters that cannot break the file format. */
static void clean_comment(const char *in, char *out, size_t n)
{
	size_t j = 0;

	for (; *in && j + 1 < n && j < 64; in++) {
		unsigned char c = (unsigned char)*in;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			strchr("@._+-:", c))
			out[j++] = (char)c;
	}
	out[j] = '\0';
}

int keys_parse_pubkey(const char *line, struct buf *ret, char *err, size_t errlen)
{
	char type[64], b64[PUBKEY_MAX], comment[128] = "", clean[80];
	enum ssh_keytypes_e kt;
	ssh_key key = NULL;
	int n;

	if (strlen(line) >= PUBKEY_MAX) {
		snprintf(err, errlen, "key line too long");
		return -1;
	}
	n = sscanf(line, "%63s %16383s %127[^\n]", type, b64, comment);
	if (n < 2) {
		snprintf(err, errlen, "not a public key line (expected 'TYPE BASE64 [COMMENT]')");
		return -1;
	}
	kt = ssh_key_type_from_name(type);
	if (kt == SSH_KEYTYPE_UNKNOWN) {
		/* A line with options ("restrict,... ssh-ed25519 ...") lands here too. */
		snprintf(err, errlen,
			"unknown key type '%.40s' (options before the key are not accepted)", type);
		return -1;
	}
	if (ssh_pki_import_pubkey_base64(b64, kt, &key) != SSH_OK) {
		snprintf(err, errlen, "%s key data does not decode", type);
		return -1;
	}
	ssh_key_free(key);
	clean_comment(comment, clean, sizeof(clean));
	if (buf_printf(ret, "%s %s%s%s", type, b64, clean[0] ? " " : "", clean) < 0) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int keys_render_authorized(const struct strv *owner_keys, const char *sync_key,
	const struct strv *extra_sync_keys, struct buf *out)
{
	static const char git_only[] =
		"restrict,command=\"/usr/bin/git-shell -c \\\"$SSH_ORIGINAL_COMMAND\\\"\" ";
	int r = 0;

	r |= buf_puts(out,
		"# Written by ocsb-provision; edits are overwritten. Root-owned on purpose:\n"
		"# the agent must not be able to add keys that let anyone in.\n");
	r |= buf_puts(
		out, "# The owner's keys: a shell with a terminal, no forwarding of any kind.\n");
	for (size_t i = 0; i < owner_keys->n; i++)
		r |= buf_printf(out, "restrict,pty %s\n", owner_keys->v[i]);
	if (sync_key) {
		/* git-shell runs only git-upload-pack/receive-pack/upload-archive on one path. */
		r |= buf_puts(out, "# The sync key (ocsb sync): git only.\n");
		r |= buf_printf(out, "%s%s\n", git_only, sync_key);
	}
	if (extra_sync_keys && extra_sync_keys->n) {
		/* Keys of owners on other machines (ocsb sync --host): the same git-only line. */
		r |= buf_puts(out, "# Sync keys from other machines (sync-key): git only.\n");
		for (size_t i = 0; i < extra_sync_keys->n; i++)
			r |= buf_printf(out, "%s%s\n", git_only, extra_sync_keys->v[i]);
	}
	return r ? -ENOMEM : 0;
}

int keys_render_known_hosts(const struct strv *host_keys, unsigned port, struct buf *out)
{
	static const char *const names[] = {"localhost", "127.0.0.1", "::1"};
	int r = 0;

	r |= buf_puts(out,
		"# This machine's own sshd, pinned by ocsb-provision from its host key\n"
		"# files: ocsb sync never trusts a key on first use.\n");
	for (size_t i = 0; i < host_keys->n; i++) {
		char type[64], b64[PUBKEY_MAX];

		if (sscanf(host_keys->v[i], "%63s %16383s", type, b64) != 2)
			continue;
		for (size_t j = 0; j < ARRAY_SIZE(names); j++) {
			if (port == 22)
				r |= buf_printf(out, "%s %s %s\n", names[j], type, b64);
			else
				r |= buf_printf(out, "[%s]:%u %s %s\n", names[j], port, type, b64);
		}
	}
	return r ? -ENOMEM : 0;
}

/* Root reads its own host keys (root-owned files under /etc/ssh). */
static int load_host_keys(struct prov *p, struct strv *ret)
{
	char pattern[4096], err[256];
	glob_t g;
	int r = 0;

	if (path_join(pattern, sizeof(pattern), p->paths.etc, "ssh/ssh_host_*_key.pub") < 0)
		return -ENAMETOOLONG;
	if (glob(pattern, 0, NULL, &g) != 0) {
		log_err("no host key found (%s): sshd has not been set up; run ssh-keygen -A",
			pattern);
		return -ENOENT;
	}
	for (size_t i = 0; r == 0 && i < g.gl_pathc; i++) {
		struct buf norm = {0};
		char *data = NULL;

		if (fo_read(g.gl_pathv[i], PUBKEY_MAX, &data, NULL) < 0) {
			log_warn("cannot read host key %s: skipped", g.gl_pathv[i]);
			continue;
		}
		if (keys_parse_pubkey(data, &norm, err, sizeof(err)) < 0)
			log_warn("%s: %s: skipped", g.gl_pathv[i], err);
		else
			r = strv_push(ret, norm.data);
		buf_free(&norm);
		free(data);
	}
	globfree(&g);
	if (r == 0 && ret->n == 0) {
		log_err("no usable host key under %s/ssh", p->paths.etc);
		return -ENOENT;
	}
	return r;
}

/* ---- work done as the owner: root never reads or writes across that boundary ---- */

enum { CHILD_SAME = 0, CHILD_CHANGED = 1, CHILD_FAILED = 2 };

struct owner_job {
	const char *agent;
	int write; /* make the change (else only report) */
	const char *content; /* known_hosts */
	char comment[128];
};

static int child_open_owner_dir(int create)
{
	int fd;

	/* As the owner: following the owner's own links is the owner's business. */
	if (create) {
		if (mkdir(".config", 0700) < 0 && errno != EEXIST)
			return -errno;
		if (mkdir(OWNER_DIR, 0700) < 0 && errno != EEXIST)
			return -errno;
	}
	fd = open(OWNER_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int child_fail(int outfd, const char *what, int err)
{
	dprintf(outfd, "%s: %s", what, strerror(err < 0 ? -err : err));
	return CHILD_FAILED;
}

static int child_sync_key(void *arg, int outfd)
{
	struct owner_job *j = arg;
	char priv[128], pub[140], *data = NULL;
	ssh_key key = NULL;
	char *b64 = NULL, *pub64 = NULL;
	int dfd, r, status = CHILD_SAME;

	snprintf(priv, sizeof(priv), "%s_sync_ed25519", j->agent);
	snprintf(pub, sizeof(pub), "%s.pub", priv);
	dfd = child_open_owner_dir(j->write);
	if (dfd < 0)
		return dfd == -ENOENT ? CHILD_CHANGED : child_fail(outfd, "~/" OWNER_DIR, dfd);
	if (faccessat(dfd, priv, R_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		r = fo_read_at(dfd, pub, PUBKEY_MAX, &data, NULL);
		if (r == 0) {
			dprintf(outfd, "%s", data);
			free(data);
			close(dfd);
			return CHILD_SAME;
		}
		/* Private half without its public half: derive it again. */
		status = CHILD_CHANGED;
		if (!j->write)
			goto out;
		char *pem = NULL;
		if (fo_read_at(dfd, priv, PUBKEY_MAX, &pem, NULL) < 0 ||
			ssh_pki_import_privkey_base64(pem, NULL, NULL, NULL, &key) != SSH_OK) {
			free(pem);
			status = child_fail(outfd, priv, EINVAL);
			goto out;
		}
		explicit_bzero(pem, strlen(pem));
		free(pem);
	} else {
		status = CHILD_CHANGED;
		if (!j->write)
			goto out;
		if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK ||
			ssh_pki_export_privkey_base64(key, NULL, NULL, NULL, &b64) != SSH_OK) {
			status = child_fail(outfd, "generating an ed25519 key", EIO);
			goto out;
		}
		/* Written by us with mode 0600: libssh's own export would follow the umask. */
		r = fo_write_at(dfd, priv, b64, strlen(b64), 0600, (uid_t)-1, (gid_t)-1);
		if (r < 0) {
			status = child_fail(outfd, priv, r);
			goto out;
		}
	}
	if (ssh_pki_export_pubkey_base64(key, &pub64) != SSH_OK) {
		status = child_fail(outfd, "exporting the public key", EIO);
		goto out;
	}
	{
		struct buf line = {0};

		buf_printf(&line, "ssh-ed25519 %s %s\n", pub64, j->comment);
		r = fo_write_at(dfd, pub, line.data, line.len, 0644, (uid_t)-1, (gid_t)-1);
		if (r == 0)
			dprintf(outfd, "%s", line.data);
		else
			status = child_fail(outfd, pub, r);
		buf_free(&line);
	}
out:
	if (b64) {
		explicit_bzero(b64, strlen(b64));
		ssh_string_free_char(b64);
	}
	ssh_string_free_char(pub64);
	ssh_key_free(key);
	close(dfd);
	return status;
}

static int child_owner_pubkeys(void *arg, int outfd)
{
	struct owner_job *j = arg;
	char skip[140];
	glob_t g;

	snprintf(skip, sizeof(skip), "%s_sync_ed25519.pub", j->agent);
	if (glob(".ssh/*.pub", 0, NULL, &g) != 0)
		return CHILD_SAME;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char *data = NULL;

		if (strstr(g.gl_pathv[i], skip))
			continue;
		if (fo_read(g.gl_pathv[i], PUBKEY_MAX, &data, NULL) < 0)
			continue;
		/* One file per record: the name first, so root can say where a bad line is. */
		dprintf(outfd, "#file %s\n%s\n", g.gl_pathv[i], data);
		free(data);
	}
	globfree(&g);
	return CHILD_SAME;
}

static int child_known_hosts(void *arg, int outfd)
{
	struct owner_job *j = arg;
	size_t len = strlen(j->content);
	int dfd, r;

	dfd = child_open_owner_dir(j->write);
	if (dfd == -ENOENT)
		return CHILD_CHANGED;
	if (dfd < 0)
		return child_fail(outfd, "~/" OWNER_DIR, dfd);
	r = fo_same_at(dfd, "known_hosts", j->content, len, 0644, (uid_t)-1, (gid_t)-1);
	if (r == 1) {
		close(dfd);
		return CHILD_SAME;
	}
	if (j->write) {
		r = fo_write_at(dfd, "known_hosts", j->content, len, 0644, (uid_t)-1, (gid_t)-1);
		if (r < 0) {
			close(dfd);
			return child_fail(outfd, "known_hosts", r);
		}
	}
	close(dfd);
	return CHILD_CHANGED;
}

static int child_remove_owner_files(void *arg, int outfd)
{
	struct owner_job *j = arg;
	char priv[128], pub[140];
	int dfd, removed = 0, others = 0;
	DIR *d;
	struct dirent *e;

	snprintf(priv, sizeof(priv), "%s_sync_ed25519", j->agent);
	snprintf(pub, sizeof(pub), "%s.pub", priv);
	dfd = child_open_owner_dir(0);
	if (dfd < 0)
		return CHILD_SAME;
	if (unlinkat(dfd, priv, 0) == 0)
		removed++;
	if (unlinkat(dfd, pub, 0) == 0)
		removed++;
	/* known_hosts pins this machine for every agent: keep it while another one remains. */
	d = fdopendir(dup(dfd));
	while (d && (e = readdir(d)) != NULL)
		if (strstr(e->d_name, "_sync_ed25519"))
			others++;
	if (d)
		closedir(d);
	if (!others && unlinkat(dfd, "known_hosts", 0) == 0)
		removed++;
	close(dfd);
	if (!others && unlinkat(AT_FDCWD, OWNER_DIR, AT_REMOVEDIR) == 0)
		removed++;
	(void)outfd;
	return removed ? CHILD_CHANGED : CHILD_SAME;
}

/* Run fn as the owner; returns the child's CHILD_* code or -1 (already logged). */
static int owner_run(struct prov *p, int (*fn)(void *, int), struct owner_job *j, char **ret_out)
{
	struct spawn_opts o = prov_as_owner(p);
	struct spawn_result res;
	int r;

	o.cwd = p->owner.home;
	r = spawn_fn(fn, j, &o, &res);
	if (r < 0) {
		log_err("running as %s: %s", p->owner.name, strerror(-r));
		return -1;
	}
	if (res.status >= CHILD_FAILED) {
		log_output(LOG_LVL_ERR, res.output && res.output[0] ? res.output : "failed",
			"as %s in %s", p->owner.name, p->owner.home);
		spawn_result_free(&res);
		return -1;
	}
	if (ret_out)
		*ret_out = res.output;
	else
		spawn_result_free(&res);
	return res.status;
}

static int owner_collect_keys(struct prov *p, struct strv *keys)
{
	struct owner_job j = {.agent = p->cfg.agent};
	char *out = NULL, *save = NULL, err[256], file[8400] = "";
	unsigned lineno = 0;
	int r = 0;

	if (owner_run(p, child_owner_pubkeys, &j, &out) < 0)
		return -1;
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct buf norm = {0};

		if (strncmp(line, "#file ", 6) == 0) {
			snprintf(file, sizeof(file), "%s/%s", p->owner.home, line + 6);
			lineno = 0;
			continue;
		}
		lineno++;
		if (!line[0] || line[0] == '#')
			continue;
		if (keys_parse_pubkey(line, &norm, err, sizeof(err)) < 0)
			log_warn("%s:%u: %s: not used", file, lineno, err);
		else if (!strv_contains(keys, norm.data))
			r = strv_push(keys, norm.data);
		buf_free(&norm);
	}
	free(out);
	for (size_t i = 0; r == 0 && i < p->extra_keys.n; i++)
		if (!strv_contains(keys, p->extra_keys.v[i]))
			r = strv_push(keys, p->extra_keys.v[i]);
	return r < 0 ? -1 : 0;
}

/* Read public key files into normalized lines (ret); 0 or -1 (logged). */
static int keys_read_files(const struct strv *files, const char *what, struct strv *ret)
{
	char err[256];
	int r = 0;

	for (size_t i = 0; r == 0 && i < files->n; i++) {
		char *data = NULL, *save = NULL;
		unsigned lineno = 0;

		r = fo_read(files->v[i], PUBKEY_MAX, &data, NULL);
		if (r < 0) {
			log_err("%s file %s: %s", what, files->v[i],
				r == -ELOOP ? "is a symbolic link (give the real file)"
					    : strerror(-r));
			return -1;
		}
		for (char *line = strtok_r(data, "\n", &save); line;
			line = strtok_r(NULL, "\n", &save)) {
			struct buf norm = {0};

			lineno++;
			if (!line[0] || line[0] == '#')
				continue;
			if (keys_parse_pubkey(line, &norm, err, sizeof(err)) < 0) {
				log_err("%s:%u: %s", files->v[i], lineno, err);
				r = -EINVAL;
			} else if (!strv_contains(ret, norm.data)) {
				r = strv_push(ret, norm.data);
			}
			buf_free(&norm);
			if (r < 0)
				break;
		}
		free(data);
	}
	return r < 0 ? -1 : 0;
}

/* Key files named by the administrator (--key, 'key', --sync-key, 'sync-key'): read and
 * checked before any change. */
int keys_preflight(struct prov *p)
{
	if (keys_read_files(&p->cfg.keys, "key", &p->extra_keys) < 0 ||
		keys_read_files(&p->cfg.sync_keys, "sync-key", &p->extra_sync_keys) < 0)
		return -1;
	/* A key in both lists would get the shell line first (sshd uses the first match). */
	for (size_t i = 0; i < p->extra_sync_keys.n; i++)
		if (strv_contains(&p->extra_keys, p->extra_sync_keys.v[i])) {
			log_err("a sync-key is also a login key (key/--key): it would get a shell; "
				"use a separate key for ocsb sync");
			return -1;
		}
	return 0;
}

static int ensure_sync_key(struct prov *p, struct buf *ret_pub)
{
	struct owner_job j = {.agent = p->cfg.agent, .write = 0};
	char host[64] = "localhost", err[256], *out = NULL;
	int r;

	gethostname(host, sizeof(host) - 1);
	snprintf(j.comment, sizeof(j.comment), "ocsb-sync-%s@", p->cfg.agent);
	clean_comment(host, j.comment + strlen(j.comment), sizeof(j.comment) - strlen(j.comment));
	r = owner_run(p, child_sync_key, &j, &out);
	if (r < 0)
		return -1;
	if (r == CHILD_CHANGED) {
		free(out);
		out = NULL;
		if (!prov_change(p, "generate the sync key %s/" OWNER_DIR "/%s_sync_ed25519",
			    p->owner.home, p->cfg.agent))
			return 0;
		j.write = 1;
		if (owner_run(p, child_sync_key, &j, &out) < 0)
			return -1;
		prov_done(p);
	}
	r = keys_parse_pubkey(out ? out : "", ret_pub, err, sizeof(err));
	if (r < 0)
		log_err("%s/" OWNER_DIR "/%s_sync_ed25519.pub: %s (remove both halves of the key "
			"and run again)",
			p->owner.home, p->cfg.agent, err);
	free(out);
	return r;
}

static int ensure_authorized(struct prov *p, const struct strv *owner_keys, const char *sync)
{
	char dir[4096], path[4096];
	struct buf b = {0};
	int dfd, r;

	if (path_join(dir, sizeof(dir), p->paths.etc, "ocsb/keys") < 0 ||
		path_join(path, sizeof(path), dir, p->cfg.agent) < 0)
		return -1;
	if (keys_render_authorized(owner_keys, sync, &p->extra_sync_keys, &b) < 0)
		return -1;
	r = fo_same(path, b.data, b.len, 0644, 0, 0);
	if (r == 1 ||
		!prov_change(p, "write %s (%zu owner key%s%s)", path, owner_keys->n,
			owner_keys->n == 1 ? "" : "s", sync ? " and the sync key" : "")) {
		buf_free(&b);
		return 0;
	}
	/* sshd's StrictModes wants every directory up to the file root-owned, not group-writable. */
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
	if (dfd < 0) {
		log_err("%s: %s", dir, strerror(-dfd));
		buf_free(&b);
		return -1;
	}
	r = fo_write_at(dfd, p->cfg.agent, b.data, b.len, 0644, 0, 0);
	close(dfd);
	buf_free(&b);
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	prov_done(p);
	return 0;
}

static int ensure_known_hosts(struct prov *p)
{
	struct strv hk = {0};
	struct buf b = {0};
	struct owner_job j = {.agent = p->cfg.agent};
	int r = -1;

	if (load_host_keys(p, &hk) < 0 || keys_render_known_hosts(&hk, p->cfg.ssh_port, &b) < 0)
		goto out;
	j.content = b.data;
	r = owner_run(p, child_known_hosts, &j, NULL);
	if (r == CHILD_CHANGED) {
		r = 0;
		if (!prov_change(p,
			    "pin this machine's %zu host key%s in %s/" OWNER_DIR "/known_hosts",
			    hk.n, hk.n == 1 ? "" : "s", p->owner.home))
			goto out;
		j.write = 1;
		r = owner_run(p, child_known_hosts, &j, NULL);
		if (r >= 0) {
			prov_done(p);
			r = 0;
		}
	}
out:
	strv_free(&hk);
	buf_free(&b);
	return r < 0 ? -1 : 0;
}

int keys_ensure(struct prov *p)
{
	struct strv owner_keys = {0};
	struct buf sync = {0};
	int r = -1;

	if (owner_collect_keys(p, &owner_keys) < 0)
		goto out;
	if (owner_keys.n == 0)
		log_warn("no public key of %s found (~%s/.ssh/*.pub) and none given with --key: "
			 "'ssh %s@localhost' will not let anyone in until you add one (as %s: "
			 "ssh-keygen -t ed25519; then run ocsb-provision again)",
			p->owner.name, p->owner.name, p->cfg.agent, p->owner.name);
	if (ensure_sync_key(p, &sync) < 0)
		goto out;
	if (ensure_authorized(p, &owner_keys, sync.len ? sync.data : NULL) < 0)
		goto out;
	r = ensure_known_hosts(p);
out:
	strv_free(&owner_keys);
	buf_free(&sync);
	return r;
}

int keys_remove(struct prov *p)
{
	struct owner_job j = {.agent = p->cfg.agent, .write = 1};
	char dir[4096], path[4096];
	struct stat st;
	int r;

	if (path_join(dir, sizeof(dir), p->paths.etc, "ocsb/keys") < 0 ||
		path_join(path, sizeof(path), dir, p->cfg.agent) < 0)
		return -1;
	if (lstat(path, &st) == 0) {
		prov_change(p, "remove %s", path);
		r = fo_unlink(path);
		if (r < 0) {
			log_err("%s: %s", path, strerror(-r));
			return -1;
		}
		rmdir(dir); /* only when no other agent's file remains */
		prov_done(p);
	}
	if (!p->have_owner)
		return 0;
	r = owner_run(p, child_remove_owner_files, &j, NULL);
	if (r == CHILD_CHANGED) {
		prov_change(p, "removed the sync key and host pin of %s from %s/" OWNER_DIR,
			p->cfg.agent, p->owner.home);
		prov_done(p);
	}
	return r < 0 ? -1 : 0;
}

/*
 * `ssh ai-dev@localhost` as the README says, with no question about a host key: ssh also
 * reads the machine-wide /etc/ssh/ssh_known_hosts (GlobalKnownHostsFile), and this
 * machine's own host keys are root's to vouch for. One marked block there, nothing in the
 * owner's home; a key the owner pinned herself in ~/.ssh/known_hosts still counts first.
 */
#define KH_BEGIN "# >>> ocsb-provision: this machine's own sshd, for ssh to localhost >>>"
#define KH_END "# <<< ocsb-provision <<<"

int keys_global_known_hosts_edit(const char *in, const char *block, struct buf *out)
{
	const char *s = in ? in : "";
	int inside = 0, had = 0, changed;
	struct buf old = {0};

	while (*s) {
		size_t n = strcspn(s, "\n");

		if (!inside && n == strlen(KH_BEGIN) && !strncmp(s, KH_BEGIN, n)) {
			inside = had = 1;
		} else if (inside) {
			if (n == strlen(KH_END) && !strncmp(s, KH_END, n))
				inside = 0;
			else if (buf_append(&old, s, n) < 0 || buf_puts(&old, "\n") < 0)
				goto fail;
		} else if (buf_append(out, s, n) < 0 || buf_puts(out, "\n") < 0) {
			goto fail;
		}
		s += n + (s[n] == '\n');
	}
	/* Same block already there (and closed): nothing to do. */
	changed = block ? !had || inside || old.len != strlen(block) ||
			memcmp(old.data, block, old.len) != 0
			: had;
	if (block && buf_printf(out, KH_BEGIN "\n%s" KH_END "\n", block) < 0)
		goto fail;
	buf_free(&old);
	return changed;
fail:
	buf_free(&old);
	return -1;
}

static int global_known_hosts(struct prov *p, const char *block)
{
	char path[4096], what[4200];
	struct buf out = {0};
	struct prov_file f;
	int r;

	if (prov_file_read(p, "ssh/ssh_known_hosts", path, sizeof(path), &f) < 0)
		return -1;
	r = keys_global_known_hosts_edit(f.data, block, &out);
	snprintf(what, sizeof(what),
		block ? "vouch for this machine's host keys in %s (ssh to localhost asks nothing)"
		      : "remove ocsb's block from %s",
		path);
	/* Emptied by the removal of our block: the file goes (we made it). */
	r = prov_file_commit(p, path, &f, r, &out, !block, what);
	buf_free(&out);
	return r;
}

int keys_global_ensure(struct prov *p)
{
	struct strv hk = {0};
	struct buf b = {0};
	const char *lines;
	int r = -1;

	if (load_host_keys(p, &hk) < 0 || keys_render_known_hosts(&hk, p->cfg.ssh_port, &b) < 0)
		goto out;
	/* The pin file's lines without its two-line header. */
	lines = b.data;
	for (int i = 0; i < 2 && lines && *lines == '#'; i++)
		lines = strchr(lines, '\n') ? strchr(lines, '\n') + 1 : lines + strlen(lines);
	r = global_known_hosts(p, lines);
out:
	strv_free(&hk);
	buf_free(&b);
	return r;
}

int keys_global_remove(struct prov *p)
{
	return global_known_hosts(p, NULL);
}
