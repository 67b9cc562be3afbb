/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "procs.h"
#include "provision.h"
#include "spawn.h"

#define INCLUDE_MARK "# added by ocsb-provision"

struct sshd_files {
	char main[4096]; /* <etc>/ssh/sshd_config */
	char dir[4096]; /* <etc>/ssh/sshd_config.d */
	char dropin[4096];
	char keys[4096]; /* <etc>/ocsb/keys */
};

static int sshd_files(struct prov *p, struct sshd_files *f)
{
	char name[128];

	snprintf(name, sizeof(name), "ocsb-%s.conf", p->cfg.agent);
	if (path_join(f->main, sizeof(f->main), p->paths.etc, "ssh/sshd_config") < 0 ||
		path_join(f->dir, sizeof(f->dir), p->paths.etc, "ssh/sshd_config.d") < 0 ||
		path_join(f->dropin, sizeof(f->dropin), f->dir, name) < 0 ||
		path_join(f->keys, sizeof(f->keys), p->paths.etc, "ocsb/keys") < 0)
		return -ENAMETOOLONG;
	return 0;
}

static void proxy_env(const struct ocsb_config *c, struct buf *out)
{
	const char *noproxy = "localhost,127.0.0.1,::1";

	/* Both cases: curl reads only the lower-case http_proxy, other tools the upper. */
	buf_printf(out,
		"http_proxy=http://127.0.0.1:%u https_proxy=http://127.0.0.1:%u "
		"HTTP_PROXY=http://127.0.0.1:%u HTTPS_PROXY=http://127.0.0.1:%u "
		"no_proxy=%s NO_PROXY=%s",
		c->proxy_port, c->proxy_port, c->proxy_port, c->proxy_port, noproxy, noproxy);
	/* `ssh agent@host cmd` runs a non-login bash: it reads BASH_ENV, not /etc/profile. */
	buf_printf(out, " BASH_ENV=/etc/profile.d/ocsb-%s.sh", c->agent);
}

int sshd_render_dropin(const struct ocsb_config *c, const char *keys_dir, struct buf *out)
{
	struct buf env = {0};
	int r = 0;

	proxy_env(c, &env);
	r |= buf_printf(out,
		"# Written by ocsb-provision for the agent account %s; edits are overwritten.\n"
		"# Remove with: ocsb-provision --remove\n\n"
		"# PermitUserEnvironment is not allowed inside Match, so it is set here for the\n"
		"# whole server, to \"no\", sshd's own default: with it the agent could set its "
		"own\n"
		"# variables (LD_PRELOAD, proxy settings) from ~/.ssh/environment.\n"
		"PermitUserEnvironment no\n\n",
		c->agent);
	r |= buf_printf(out,
		"Match User %s\n"
		"\t# Keys come only from a root-owned file: the agent cannot let anyone in.\n"
		"\tAuthorizedKeysFile %s/%%u\n"
		"\tAuthorizedKeysCommand none\n"
		"\tAuthorizedPrincipalsFile none\n"
		"\tPasswordAuthentication no\n"
		"\tKbdInteractiveAuthentication no\n"
		"\tHostbasedAuthentication no\n"
		"\t# No tunnels of any kind: forwardings would bypass the netlock and reach\n"
		"\t# the owner's agent socket, X display and local services.\n"
		"\tDisableForwarding yes\n"
		"\tAllowTcpForwarding no\n"
		"\tAllowAgentForwarding no\n"
		"\tAllowStreamLocalForwarding no\n"
		"\tX11Forwarding no\n"
		"\tPermitTunnel no\n"
		"\tPermitListen none\n"
		"\tPermitOpen none\n"
		"\t# ~/.ssh/rc would run agent-chosen code at every login, before any check.\n"
		"\tPermitUserRC no\n"
		"\t# The egress proxy, for tools that honour it; nftables enforces it anyway.\n"
		"\tSetEnv %s\n",
		c->agent, keys_dir, env.data);
	buf_free(&env);
	return r ? -ENOMEM : 0;
}

/* Does the main config include every *.conf of the drop-in directory? */
int sshd_has_include(const char *main_config, const char *dropin_dir)
{
	const char *line = main_config;
	char want_abs[4200];

	snprintf(want_abs, sizeof(want_abs), "%s/*.conf", dropin_dir);
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		char buf[4400], kw[32], arg[4300];

		if (len < sizeof(buf)) {
			memcpy(buf, line, len);
			buf[len] = '\0';
			if (sscanf(buf, " %31s %4299s", kw, arg) == 2 &&
				strcasecmp(kw, "Include") == 0 &&
				(strcmp(arg, want_abs) == 0 ||
					strcmp(arg, "sshd_config.d/*.conf") == 0))
				return 1;
		}
		line = end ? end + 1 : NULL;
	}
	return 0;
}

/* Lower-case `keyword value` lines printed by sshd -T. */
static const char *find_T(const char *out, const char *kw, char *val, size_t n)
{
	size_t kl = strlen(kw);

	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, kw, kl) == 0 && l[kl] == ' ') {
			const char *v = l + kl + 1;
			snprintf(val, n, "%.*s", (int)strcspn(v, "\n"), v);
			return val;
		}
	}
	return NULL;
}

int sshd_check_effective(const char *out, const struct ocsb_config *c, const char *keys_dir,
	char *err, size_t errlen)
{
	char akf[4200];
	const struct {
		const char *kw;
		const char *want;
	} need[] = {
		{"authorizedkeysfile", akf},
		{"authorizedkeyscommand", "none"},
		{"authorizedprincipalsfile", "none"},
		{"hostbasedauthentication", "no"},
		{"passwordauthentication", "no"},
		{"kbdinteractiveauthentication", "no"},
		{"disableforwarding", "yes"},
		{"allowtcpforwarding", "no"},
		{"allowagentforwarding", "no"},
		{"allowstreamlocalforwarding", "no"},
		{"x11forwarding", "no"},
		{"permittunnel", "no"},
		{"permituserrc", "no"},
		{"permituserenvironment", "no"},
	};
	char val[4096], want[64];
	const char *hit;
	size_t wl;

	snprintf(akf, sizeof(akf), "%s/%%u", keys_dir);
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		if (!find_T(out, need[i].kw, val, sizeof(val))) {
			snprintf(err, errlen, "sshd -T does not report '%s'", need[i].kw);
			return -1;
		}
		if (strcmp(val, need[i].want) != 0) {
			snprintf(err, errlen,
				"for user %s sshd uses '%s %s', not '%s': another configuration "
				"file "
				"sets it first (look for '%s' or a Match block in sshd_config and "
				"the "
				"files of sshd_config.d that sort before ocsb-%s.conf)",
				c->agent, need[i].kw, val, need[i].want, need[i].kw, c->agent);
			return -1;
		}
	}
	/* The whole value, port included: another SetEnv may point elsewhere. */
	wl = (size_t)snprintf(want, sizeof(want), "http_proxy=http://127.0.0.1:%u", c->proxy_port);
	if (!find_T(out, "setenv", val, sizeof(val)) || !(hit = strstr(val, want)) ||
		(hit[wl] != ' ' && hit[wl] != '\0') || (hit != val && hit[-1] != ' ')) {
		snprintf(err, errlen,
			"for user %s sshd does not set http_proxy to port %u (another SetEnv comes "
			"first)",
			c->agent, c->proxy_port);
		return -1;
	}
	return 0;
}

static int sshd_test(struct prov *p, const struct sshd_files *f, char **ret_T)
{
	char spec[256];
	const char *t[] = {p->paths.sshd, "-t", "-f", f->main, NULL};
	const char *T[] = {p->paths.sshd, "-T", "-f", f->main, "-C", spec, NULL};

	if (prov_exec(p, t, NULL) < 0)
		return -1;
	if (!ret_T)
		return 0;
	snprintf(spec, sizeof(spec), "user=%s,host=localhost,addr=127.0.0.1", p->cfg.agent);
	return prov_exec(p, T, ret_T) < 0 ? -1 : 0;
}

int sshd_preflight(struct prov *p)
{
	struct sshd_files f;
	struct stat st;

	if (sshd_files(p, &f) < 0)
		return -1;
	if (stat(p->paths.sshd, &st) < 0 || !(st.st_mode & S_IXUSR)) {
		log_err("sshd not found at %s: install OpenSSH's server (apt-get install "
			"openssh-server)",
			p->paths.sshd);
		return -1;
	}
	if (access("/usr/bin/git-shell", X_OK) < 0) {
		log_err("/usr/bin/git-shell not found: install git (apt-get install git)");
		return -1;
	}
	if (stat(f.main, &st) < 0) {
		log_err("%s: %s (reinstall openssh-server)", f.main, strerror(errno));
		return -1;
	}
	/*
	 * The agent is reached (and its clone filled) over ssh to this port: found before the
	 * first change, not after a dozen of them.
	 */
	if (p->mode == PROV_APPLY && procs_port_open(p->cfg.ssh_port) != 1) {
		log_err("nothing accepts ssh connections on 127.0.0.1:%u: start sshd first (%s), "
			"or set ssh-port in %s to the port it listens on; ocsb-provision changed "
			"nothing",
			p->cfg.ssh_port,
			stat("/run/systemd/system", &st) == 0
				? "sudo systemctl start ssh"
				: "sudo service ssh start, or sudo /usr/sbin/sshd",
			p->config_path);
		return -1;
	}
	/* Never start from a broken sshd: a failure later could not be told apart. */
	if (sshd_test(p, &f, NULL) < 0) {
		log_err("the current sshd configuration does not pass 'sshd -t' (above); fix it "
			"first, ocsb-provision changed nothing");
		return -1;
	}
	return 0;
}

/* sshd's process, pinned (procs_pidfile_pin): 0, or -ENOENT when it does not run. */
static int sshd_pin(struct prov *p, const char *T, pid_t *ret_pid, int *ret_pidfd)
{
	char pidfile[4096];

	if (!find_T(T, "pidfile", pidfile, sizeof(pidfile)))
		path_join(pidfile, sizeof(pidfile), p->paths.run, "sshd.pid");
	/* A stale pid file may name an unrelated process now: procs_pidfile checks. */
	return procs_pidfile_pin(pidfile, p->paths.sshd, ret_pid, ret_pidfd);
}

static int sshd_reload(struct prov *p, const char *T)
{
	struct stat st;
	pid_t pid;
	int fd, r;

	if (stat("/run/systemd/system", &st) == 0) {
		const char *a[] = {"/usr/bin/systemctl", "reload", "ssh.service", NULL};
		const char *b[] = {"/usr/bin/systemctl", "reload", "sshd.service", NULL};

		if (prov_exec(p, a, NULL) == 0 || prov_exec(p, b, NULL) == 0)
			return 0;
		log_warn("could not reload sshd through systemd: the new settings apply once it "
			 "restarts (systemctl restart ssh)");
		return 0;
	}
	if (sshd_pin(p, T, &pid, &fd) < 0) {
		printf("note: sshd is not running; the settings apply when it starts\n");
		return 0;
	}
	r = procs_pidfd_signal(pid, fd, SIGHUP);
	if (fd >= 0)
		close(fd);
	if (r < 0) {
		log_err("reloading sshd (pid %d): %s", (int)pid, strerror(-r));
		return -1;
	}
	/* sshd re-executes itself on SIGHUP: wait for its listener so a login right after works. */
	usleep(100000);
	for (int i = 0; i < 60 && !procs_port_open(p->cfg.ssh_port); i++)
		usleep(50000);
	return 0;
}

/* Content of the main config with our Include put first, marked as ours. */
static int add_include(const char *main, const char *dir, struct buf *out)
{
	buf_printf(out, "Include %s/*.conf " INCLUDE_MARK "\n", dir);
	return buf_puts(out, main);
}

/*
 * Set before our files change and cleared once sshd has reloaded them: a run killed in
 * between leaves it, and the next run reloads even though the files are already right.
 * Under /run on purpose: after a reboot sshd reads the files anyway.
 */
static int reload_marker(struct prov *p, char *out, size_t n)
{
	return path_join(out, n, p->paths.run, "ocsb/sshd-reload-pending");
}

static int mark_reload(struct prov *p, int pending)
{
	char path[4096];
	int r;

	if (reload_marker(p, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	r = pending ? fo_write(path, "1\n", 2, 0600, 0, 0) : fo_unlink(path);
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	return r;
}

static int reload_pending(struct prov *p)
{
	char path[4096];
	struct stat st;

	return reload_marker(p, path, sizeof(path)) == 0 && lstat(path, &st) == 0;
}

struct saved {
	const char *path;
	char *data; /* owned; NULL: the file did not exist */
	size_t len;
};

static void restore(struct saved *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = s[i].data ? fo_write(s[i].path, s[i].data, s[i].len, 0644, 0, 0)
				  : fo_unlink(s[i].path);
		if (r < 0)
			log_err("restoring %s: %s (restore it by hand)", s[i].path, strerror(-r));
	}
}

/* Write files, validate, verify the effective settings, roll back on any failure. */
static int commit(struct prov *p, struct sshd_files *f, const struct buf *newmain,
	const struct buf *dropin, int remove_dropin)
{
	struct saved s[2] = {{.path = f->main}, {.path = f->dropin}};
	char *T = NULL, err[1024];
	int r = -1, dfd;

	for (size_t i = 0; i < 2; i++)
		if (fo_read(s[i].path, 1024 * 1024, &s[i].data, &s[i].len) < 0)
			s[i].data = NULL;
	if (mark_reload(p, 1) < 0)
		goto out;
	if (newmain && fo_write(f->main, newmain->data, newmain->len, 0644, 0, 0) < 0) {
		log_err("%s: cannot write", f->main);
		goto out;
	}
	if (remove_dropin) {
		if (fo_unlink(f->dropin) < 0) {
			log_err("%s: cannot remove", f->dropin);
			goto fail;
		}
	} else if (dropin) {
		dfd = fo_mkdir_p(AT_FDCWD, f->dir, 0755, 0, 0);
		if (dfd < 0 ||
			fo_write_at(dfd, strrchr(f->dropin, '/') + 1, dropin->data, dropin->len,
				0644, 0, 0) < 0) {
			log_err("%s: cannot write", f->dropin);
			if (dfd >= 0)
				close(dfd);
			goto fail;
		}
		close(dfd);
	}
	if (sshd_test(p, f, &T) < 0) {
		log_err("sshd rejected the new configuration (above): previous files restored");
		goto fail;
	}
	if (!remove_dropin && sshd_check_effective(T, &p->cfg, f->keys, err, sizeof(err)) < 0) {
		log_err("%s: previous files restored", err);
		goto fail;
	}
	prov_done(p);
	r = sshd_reload(p, T);
	if (r == 0)
		r = mark_reload(p, 0);
	goto out;
fail:
	restore(s, 2);
	mark_reload(p, 0);
out:
	free(T);
	for (size_t i = 0; i < 2; i++)
		free(s[i].data);
	return r;
}

int sshd_ensure(struct prov *p)
{
	struct sshd_files f;
	struct buf dropin = {0}, newmain = {0};
	char *main = NULL, *T = NULL, err[1024];
	int same, need_main, r = -1;

	if (sshd_files(p, &f) < 0 || sshd_render_dropin(&p->cfg, f.keys, &dropin) < 0)
		goto out;
	if (fo_read(f.main, 1024 * 1024, &main, NULL) < 0) {
		log_err("%s: cannot read", f.main);
		goto out;
	}
	need_main = !sshd_has_include(main, f.dir);
	same = fo_same(f.dropin, dropin.data, dropin.len, 0644, 0, 0) == 1;
	if (need_main)
		prov_change(p, "add 'Include %s/*.conf' at the top of %s", f.dir, f.main);
	if (!same)
		prov_change(p,
			"write %s (Match User %s: keys from %s, no forwarding, proxy "
			"variables)",
			f.dropin, p->cfg.agent, f.keys);
	if (need_main && add_include(main, f.dir, &newmain) < 0)
		goto out;
	if ((need_main || !same) && (p->mode == PROV_APPLY)) {
		r = commit(p, &f, need_main ? &newmain : NULL, &dropin, 0);
		goto out;
	}
	if (need_main || !same) {
		r = 0;
		goto out;
	}
	/* Files as wanted: still prove sshd applies them (another file may take precedence). */
	if (sshd_test(p, &f, &T) < 0)
		goto out;
	r = 0;
	if (sshd_check_effective(T, &p->cfg, f.keys, err, sizeof(err)) < 0) {
		log_err("%s", err);
		r = -1;
	} else if (reload_pending(p) &&
		prov_change(p, "reload sshd (an earlier run stopped before reloading it)")) {
		r = sshd_reload(p, T);
		if (r == 0)
			r = mark_reload(p, 0);
		if (r == 0)
			prov_done(p);
	}
out:
	free(main);
	free(T);
	buf_free(&dropin);
	buf_free(&newmain);
	return r;
}

int sshd_remove(struct prov *p)
{
	struct sshd_files f;
	struct buf newmain = {0};
	char *main = NULL, *mark;
	struct stat st;
	int r = 0, has_dropin;

	if (sshd_files(p, &f) < 0)
		return -1;
	has_dropin = lstat(f.dropin, &st) == 0;
	if (fo_read(f.main, 1024 * 1024, &main, NULL) == 0 && (mark = strstr(main, INCLUDE_MARK))) {
		/* Drop only the line we added, keep everything else byte for byte. */
		char *start = mark, *end = strchr(mark, '\n');

		while (start > main && start[-1] != '\n')
			start--;
		buf_append(&newmain, main, (size_t)(start - main));
		buf_puts(&newmain, end ? end + 1 : "");
		prov_change(p, "remove the Include line ocsb-provision added to %s", f.main);
	}
	if (has_dropin)
		prov_change(p, "remove %s", f.dropin);
	if (has_dropin || newmain.data) {
		r = commit(p, &f, newmain.data ? &newmain : NULL, NULL, has_dropin);
	} else if (reload_pending(p)) {
		prov_change(p, "reload sshd (an earlier run stopped before reloading it)");
		r = sshd_reload(p, "");
		if (r == 0)
			r = mark_reload(p, 0);
	}
	free(main);
	buf_free(&newmain);
	return r;
}
