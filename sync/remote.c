/* SPDX-License-Identifier: MIT */
/*
 * Remote agents (ocsb sync --host): the owner's own git-only key for other machines and
 * the explicit pinning of a remote sshd's host key (ocsb sync init --host). Nothing here
 * trusts a host key on first use: a key is pinned only when the owner hands over the
 * fingerprint they verified on the other machine.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libssh/libssh.h>

#include "fileops.h"
#include "log.h"
#include "sync.h"

#define SYNC_PUB_MAX 16384
#define SYNC_PIN_MAX (1u << 20)

int sync_host_name_ok(const char *h)
{
	size_t n = strlen(h);

	/* A DNS name, IPv4 or IPv6 literal: nothing libssh or the pin file could misparse. */
	if (n == 0 || n > 253 || h[0] == '-' || h[0] == '.' || h[0] == '[')
		return 0;
	for (const char *p = h; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			    (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == ':' ||
			    *p == '_'))
			return 0;
	return 1;
}

int sync_fp_equal(const char *given, const char *fp)
{
	/* "SHA256:abc" as ssh-keygen -l prints it, or the base64 part alone. */
	if (!strncmp(given, "SHA256:", 7))
		given += 7;
	if (!strncmp(fp, "SHA256:", 7))
		fp += 7;
	return given[0] && !strcmp(given, fp);
}

int sync_keygen(const char *dir, const char *name, const char *comment, char **ret_pub)
{
	char pubname[256];
	char *data = NULL, *b64 = NULL, *pub64 = NULL;
	ssh_key key = NULL;
	int dfd, r;

	if (snprintf(pubname, sizeof(pubname), "%s.pub", name) >= (int)sizeof(pubname))
		return -ENAMETOOLONG;
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, (uid_t)-1, (gid_t)-1);
	if (dfd < 0)
		return dfd;
	if (faccessat(dfd, name, R_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		r = fo_read_at(dfd, pubname, SYNC_PUB_MAX, &data, NULL);
		if (r == 0) {
			*ret_pub = data;
			close(dfd);
			return 0;
		}
		char full[4096];

		/* Private half without a readable public half: derive it again. */
		snprintf(full, sizeof(full), "%s/%s", dir, name);
		if (ssh_pki_import_privkey_file(full, NULL, NULL, NULL, &key) != SSH_OK) {
			close(dfd);
			return -EINVAL;
		}
	} else {
		if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK ||
			ssh_pki_export_privkey_base64(key, NULL, NULL, NULL, &b64) != SSH_OK) {
			r = -EIO;
			goto out;
		}
		/* libssh's own export would create the file under the umask: 0600 here. */
		r = fo_write_at(dfd, name, b64, strlen(b64), 0600, (uid_t)-1, (gid_t)-1);
		if (r < 0)
			goto out;
	}
	if (ssh_pki_export_pubkey_base64(key, &pub64) != SSH_OK) {
		r = -EIO;
		goto out;
	}
	if (asprintf(&data, "%s %s %s\n", ssh_key_type_to_char(ssh_key_type(key)), pub64, comment) <
		0) {
		data = NULL;
		r = -ENOMEM;
		goto out;
	}
	r = fo_write_at(dfd, pubname, data, strlen(data), 0644, (uid_t)-1, (gid_t)-1);
	if (r == 0) {
		*ret_pub = data;
		data = NULL;
	}
out:
	if (b64) {
		explicit_bzero(b64, strlen(b64));
		ssh_string_free_char(b64);
	}
	ssh_string_free_char(pub64);
	ssh_key_free(key);
	free(data);
	close(dfd);
	return r;
}

int sync_host_pin(struct sync_conn *c, const char *accept, char *ret_fp, size_t fplen,
	char *ret_type, size_t typelen)
{
	ssh_session s = ssh_new();
	ssh_key srv = NULL;
	unsigned char *hash = NULL;
	size_t hlen = 0;
	char *fp = NULL, *entry = NULL, *old = NULL, dir[4096], name[256], where[300];
	const char *slash;
	size_t oldlen = 0;
	long tmo = c->connect_timeout_s;
	int no = 0, r = -1, dfd = -1;
	enum ssh_known_hosts_e k;

	ret_fp[0] = ret_type[0] = '\0';
	if (c->port == 22)
		snprintf(where, sizeof(where), "%s", c->host);
	else
		snprintf(where, sizeof(where), "[%s]:%u", c->host, c->port);
	if (!s) {
		snprintf(c->err, sizeof(c->err), "out of memory");
		return -1;
	}
	/* The same settings as a sync connection: only the pin file, no ~/.ssh/config. */
	if (ssh_options_set(s, SSH_OPTIONS_PROCESS_CONFIG, &no) < 0 ||
		ssh_options_set(s, SSH_OPTIONS_HOST, c->host) < 0 ||
		ssh_options_set(s, SSH_OPTIONS_PORT, &c->port) < 0 ||
		ssh_options_set(s, SSH_OPTIONS_USER, c->user) < 0 ||
		ssh_options_set(s, SSH_OPTIONS_KNOWNHOSTS, c->known_hosts) < 0 ||
		ssh_options_set(s, SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null") < 0 ||
		ssh_options_set(s, SSH_OPTIONS_TIMEOUT, &tmo) < 0) {
		snprintf(c->err, sizeof(c->err), "setting ssh options: %s", ssh_get_error(s));
		goto out;
	}
	if (ssh_connect(s) != SSH_OK) {
		snprintf(c->err, sizeof(c->err),
			"cannot connect to %s port %u: %s (is sshd running there?)", c->host,
			c->port, ssh_get_error(s));
		goto out;
	}
	if (ssh_get_server_publickey(s, &srv) != SSH_OK ||
		ssh_get_publickey_hash(srv, SSH_PUBLICKEY_HASH_SHA256, &hash, &hlen) != 0 ||
		!(fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hlen))) {
		snprintf(c->err, sizeof(c->err), "reading the host key of %s: %s", where,
			ssh_get_error(s));
		goto out;
	}
	snprintf(ret_fp, fplen, "%s", fp);
	snprintf(ret_type, typelen, "%s", ssh_key_type_to_char(ssh_key_type(srv)));
	k = ssh_session_is_known_server(s);
	if (k == SSH_KNOWN_HOSTS_OK) {
		r = 1;
		goto out;
	}
	if (k == SSH_KNOWN_HOSTS_CHANGED || k == SSH_KNOWN_HOSTS_OTHER) {
		/* Never re-pinned from here: a changed key is exactly what the pin is for. */
		snprintf(c->err, sizeof(c->err),
			"%s now shows a %s host key %s that does not match its pin in %s: refusing "
			"(if the key was changed on purpose, check the new fingerprint on that "
			"machine, remove the old line with 'ssh-keygen -R \"%s\" -f %s' and run "
			"'ocsb sync init' again)",
			where, ret_type, fp, c->known_hosts, where, c->known_hosts);
		goto out;
	}
	if (k != SSH_KNOWN_HOSTS_NOT_FOUND && k != SSH_KNOWN_HOSTS_UNKNOWN) {
		snprintf(c->err, sizeof(c->err), "checking the host key of %s against %s: %s",
			where, c->known_hosts, ssh_get_error(s));
		goto out;
	}
	if (!accept) {
		r = 2;
		goto out;
	}
	if (!sync_fp_equal(accept, fp)) {
		snprintf(c->err, sizeof(c->err),
			"%s shows the %s host key %s, not %s: refusing to pin it (a wrong "
			"fingerprint, or someone between you and that machine)",
			where, ret_type, fp, accept);
		goto out;
	}
	if (ssh_session_export_known_hosts_entry(s, &entry) != SSH_OK) {
		snprintf(c->err, sizeof(c->err), "exporting the host key of %s: %s", where,
			ssh_get_error(s));
		goto out;
	}
	slash = strrchr(c->known_hosts, '/');
	if (!slash || (size_t)(slash - c->known_hosts) >= sizeof(dir) ||
		strlen(slash + 1) >= sizeof(name)) {
		snprintf(c->err, sizeof(c->err), "%s: bad path", c->known_hosts);
		goto out;
	}
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - c->known_hosts), c->known_hosts);
	snprintf(name, sizeof(name), "%s", slash + 1);
	dfd = fo_mkdir_p(AT_FDCWD, dir, 0700, (uid_t)-1, (gid_t)-1);
	if (dfd >= 0) {
		int e = fo_read_at(dfd, name, SYNC_PIN_MAX, &old, &oldlen);

		if (e == -ENOENT)
			e = 0;
		if (e == 0) {
			size_t el = strlen(entry);
			int nl = oldlen && old[oldlen - 1] != '\n';
			char *all = malloc(oldlen + el + 2);

			e = -ENOMEM;
			if (all) {
				memcpy(all, old ? old : "", oldlen);
				if (nl)
					all[oldlen] = '\n';
				memcpy(all + oldlen + nl, entry, el);
				e = fo_write_at(dfd, name, all, oldlen + nl + el, 0644, (uid_t)-1,
					(gid_t)-1);
				free(all);
			}
		}
		if (e < 0) {
			snprintf(c->err, sizeof(c->err), "writing %s: %s", c->known_hosts,
				strerror(-e));
			goto out;
		}
	} else {
		snprintf(c->err, sizeof(c->err), "%.900s: %s", dir, strerror(-dfd));
		goto out;
	}
	r = 0;
out:
	if (dfd >= 0)
		close(dfd);
	free(old);
	ssh_string_free_char(entry);
	ssh_string_free_char(fp);
	ssh_clean_pubkey_hash(&hash);
	ssh_key_free(srv);
	ssh_disconnect(s);
	ssh_free(s);
	return r;
}

/* --- init: pin a remote agent's host and create the owner's remote sync key */

int sync_do_init(struct sync_opts *o)
{
	struct sync_conn c;
	struct user_info me;
	char key[PATH_MAX], pin[PATH_MAX], dir[PATH_MAX], where[300], fp[128], type[64];
	char host[64] = "localhost", comment[160], *pub = NULL;
	int r;

	if (!o->host) {
		log_err("sync init needs --host HOST (the machine where the agent is provisioned; "
			"a local agent is set up by 'sudo ocsb-provision')");
		return -1;
	}
	if (user_lookup_uid(getuid(), &me) < 0) {
		log_err("cannot look up uid %u", (unsigned)getuid());
		return -1;
	}
	if (snprintf(dir, sizeof(dir), "%s/.config/ocsb", me.home) >= (int)sizeof(dir) ||
		snprintf(key, sizeof(key), "%s/remote_sync_ed25519", dir) >= (int)sizeof(key) ||
		snprintf(pin, sizeof(pin), "%s/remote_known_hosts", dir) >= (int)sizeof(pin)) {
		log_err("path too long");
		return -1;
	}
	sync_conn_init(&c);
	c.host = o->host;
	c.port = o->port ? o->port : 22;
	c.user = o->agent ? o->agent : "ai-dev";
	c.known_hosts = pin;
	c.connect_timeout_s = o->connect_timeout_s;
	if (c.port == 22)
		snprintf(where, sizeof(where), "%s", c.host);
	else
		snprintf(where, sizeof(where), "[%s]:%u", c.host, c.port);
	r = sync_host_pin(&c, o->accept_fp, fp, sizeof(fp), type, sizeof(type));
	if (r < 0) {
		log_err("%s", c.err);
		return -1;
	}
	if (r == 2) {
		/* No trust on first use: the owner compares with what the other machine says. */
		log_err("%s is not pinned yet; it shows the %s host key   %s nothing was "
			"written. "
			"On %s, run 'ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub': if it prints "
			"the "
			"same fingerprint, run this again with --accept-host-key %s",
			where, type, fp, c.host,
			!strcmp(type, "ssh-ed25519")	     ? "ed25519"
				: !strncmp(type, "ecdsa", 5) ? "ecdsa"
							     : "rsa",
			fp);
		return -1;
	}
	printf("%s %s (%s %s) in %s\n", r == 0 ? "pinned" : "already pinned:", where, type, fp,
		pin);
	gethostname(host, sizeof(host) - 1);
	snprintf(comment, sizeof(comment), "ocsb-sync-%s@%s", me.name, host);
	for (char *p = comment; *p; p++)
		if (*p <= ' ' || *p > '~')
			*p = '_';
	r = sync_keygen(dir, "remote_sync_ed25519", comment, &pub);
	if (r < 0) {
		log_err("%s: %s (remove it and its .pub to create a new one)", key, strerror(-r));
		return -1;
	}
	printf("sync key: %s.pub\n%s", key, pub);
	if (pub[0] && pub[strlen(pub) - 1] != '\n')
		putchar('\n');
	printf("On %s, the administrator authorizes it for git only (copy the line above into "
	       "a file there):\n  sudo ocsb-provision --sync-key FILE\n"
	       "then, in the project: ocsb sync pull|push|status --host %s%s%s%s%s\n",
		c.host, c.host, o->port ? " --port " : "", o->port ? strchr(where, ']') + 2 : "",
		o->agent ? " --agent " : "", o->agent ? o->agent : "");
	free(pub);
	return 0;
}
