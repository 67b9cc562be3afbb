/* SPDX-License-Identifier: MIT */
/*
 * `ocsb doctor [--fix] [--json]`: is the sandbox intact? One line per check, OK / WARN /
 * FAIL with the command that fixes it; exit 1 when anything FAILs. As the owner it checks
 * what the owner can see (her home, the supervisor's status); as root also the effective
 * sshd settings, the live nftables table and a few escape probes run as the agent, each
 * paired with the same probe as root. `--fix` prints the fixes; as root it applies those
 * that are local and reversible (file modes); kernel-wide settings are only printed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <grp.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "fileops.h"
#include "json.h"
#include "landlock.h"
#include "log.h"
#include "loginshell.h"
#include "netlock.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"

#define AGENTD_SOCK "/run/ocsb/agentd.sock"
#define SCAN_MAX_FILES 20000 /* a bound on the home scan, not a promise of completeness */

enum dr_status { DR_OK, DR_WARN, DR_FAIL };

struct dr_check {
	char name[48];
	enum dr_status st;
	char detail[768];
	char fix[768];
};

struct doctor {
	struct cli *c;
	int fix, json, root;
	int usepam; /* from sshd -T as root: 1, 0, or -1 unknown */
	struct dr_check *v; /* owned */
	size_t n, cap;
};

const char *doctor_status_name(int st)
{
	return st == DR_OK ? "OK" : st == DR_WARN ? "WARN" : "FAIL";
}

static void add(struct doctor *dr, enum dr_status st, const char *name, const char *fix,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(struct doctor *dr, enum dr_status st, const char *name, const char *fix,
	const char *fmt, ...)
{
	struct dr_check *k;
	va_list ap;

	if (dr->n == dr->cap) {
		size_t cap = dr->cap ? dr->cap * 2 : 32;
		struct dr_check *v = realloc(dr->v, cap * sizeof(*v));

		if (!v)
			return;
		dr->v = v;
		dr->cap = cap;
	}
	k = &dr->v[dr->n++];
	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->st = st;
	snprintf(k->fix, sizeof(k->fix), "%s", fix ? fix : "");
	va_start(ap, fmt);
	vsnprintf(k->detail, sizeof(k->detail), fmt, ap);
	va_end(ap);
}

/* ---- pure parts (unit-tested) ---- */

/*
 * The settings sshd -T must show for the agent (design invariant 6). Returns how many
 * are wrong or missing and lists them ("permituserrc=yes, ...") in bad.
 */
int doctor_sshd_verdict(const char *sshd_t, const char *agent, char *bad, size_t n)
{
	static const char *const want[][2] = {
		{"disableforwarding", "yes"},
		{"permituserrc", "no"},
		{"permituserenvironment", "no"},
		{"permittunnel", "no"},
		{"allowagentforwarding", "no"},
		{"allowtcpforwarding", "no"},
		{"x11forwarding", "no"},
	};
	size_t used = 0;
	int wrong = 0;
	char akf[128];

	bad[0] = '\0';
	snprintf(akf, sizeof(akf), "/etc/ocsb/keys/%s", agent);
	for (size_t i = 0; i <= sizeof(want) / sizeof(want[0]); i++) {
		const char *key =
			i < sizeof(want) / sizeof(want[0]) ? want[i][0] : "authorizedkeysfile";
		const char *val = i < sizeof(want) / sizeof(want[0]) ? want[i][1] : akf;
		char got[256] = "(missing)";
		size_t kl = strlen(key);

		for (const char *s = sshd_t; s && *s;) {
			size_t l = strcspn(s, "\n");

			if (l > kl && !strncmp(s, key, kl) && s[kl] == ' ') {
				snprintf(got, sizeof(got), "%.*s", (int)(l - kl - 1), s + kl + 1);
				break;
			}
			s += l + (s[l] == '\n');
		}
		/* AuthorizedKeysFile: %u may be expanded or not; anything else is a finding. */
		if (!strcmp(got, val) ||
			(i == sizeof(want) / sizeof(want[0]) && !strcmp(got, "/etc/ocsb/keys/%u")))
			continue;
		wrong++;
		if (used < n)
			used += (size_t)snprintf(bad + used, n - used, "%s%s=%s (want %s)",
				used ? ", " : "", key, got, val);
	}
	return wrong;
}

/* 1 when the deny file text lists user on a line of its own. */
int doctor_listed(const char *text, const char *user)
{
	size_t ul = strlen(user);

	for (const char *s = text; s && *s;) {
		size_t l = strcspn(s, "\n");

		if (l == ul && !strncmp(s, user, ul))
			return 1;
		s += l + (s[l] == '\n');
	}
	return 0;
}

/* Is a file under the owner's home a secret by its path (relative to the home)? */
int doctor_sensitive(const char *rel)
{
	static const char *const dirs[] = {
		".ssh/", ".aws/", ".docker/", ".kube/", ".gnupg/", ".azure/", ".password-store/"};
	static const char *const files[] = {".netrc", ".git-credentials", ".pgpass", ".npmrc",
		".pypirc", ".vault-token", ".my.cnf"};
	static const char *const words[] = {
		"token", "secret", "credential", "auth", "password", "key", "hosts.yml", ".env"};
	const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strncmp(rel, dirs[i], strlen(dirs[i])))
			return !strstr(base, ".pub") && strcmp(base, "known_hosts") != 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!strcmp(rel, files[i]))
			return 1;
	if (!strcmp(base, ".env") || !strncmp(base, ".env.", 5))
		return 1;
	/* Under ~/.config, by name: most files there are settings, not secrets. */
	if (!strncmp(rel, ".config/", 8))
		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (strcasestr(base, words[i]))
				return 1;
	return 0;
}

/* ---- checks ---- */

static int run_capture(const char *const argv[], char **ret)
{
	struct spawn_opts o = {.capture = 1, .timeout_ms = 10000};
	struct spawn_result r = {0};
	int rc;

	*ret = NULL;
	if (access(argv[0], X_OK) < 0)
		return -ENOENT;
	rc = spawn_run(argv, &o, &r);
	if (rc < 0)
		return rc;
	*ret = r.output;
	r.output = NULL;
	rc = r.status;
	spawn_result_free(&r);
	return rc;
}

static void check_deps(struct doctor *dr)
{
	const char *squid[] = {"/usr/sbin/squid", "-v", NULL};
	int maj, min, rev;
	char *out = NULL, line[160] = "not found";

	git_libgit2_version(&maj, &min, &rev);
	if (run_capture(squid, &out) == 0 && out)
		snprintf(line, sizeof(line), "%.*s", (int)strcspn(out, "\n"), out);
	free(out);
	add(dr, access("/usr/sbin/squid", X_OK) == 0 ? DR_OK : DR_FAIL, "dependencies",
		"sudo make deps", "libgit2 %d.%d.%d, libssh %s, libsodium %s, squid: %s", maj, min,
		rev, ssh_version(0), sodium_version_string(), line);
	if (access(dr->c->cfg.opencode_bin, X_OK) == 0)
		add(dr, DR_OK, "opencode", NULL, "%s", dr->c->cfg.opencode_bin);
	else
		add(dr, DR_FAIL, "opencode", "sudo ocsb-provision --install-opencode",
			"%s: not installed", dr->c->cfg.opencode_bin);
}

struct scan {
	struct doctor *dr;
	const char *home;
	uid_t owner;
	int homefd; /* the home, opened once: fixes are made below it, never by path */
	size_t files;
	unsigned exposed;
};
static struct scan *scan_ctx; /* nftw has no user pointer */

/* Can every account traverse from the home down to path's directory? */
static int reachable_by_others(const char *home, const char *path)
{
	char dir[4096];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	while ((slash = strrchr(dir, '/')) && strlen(dir) > strlen(home)) {
		*slash = '\0';
		if (stat(dir, &st) < 0 || !(st.st_mode & S_IXOTH))
			return 0;
	}
	return 1;
}

/*
 * Test hook, off unless OCSB_TEST_HOOKS=1 is in root's environment: while
 * <run>/ocsb/test-doctor-pause exists, --fix waits before each fix (after the scan saw the
 * file), so a test can swap a link in at the worst moment. It only delays.
 */
static void test_pause(struct doctor *dr)
{
	char pause[4096], paused[4096];
	const char *h = getenv("OCSB_TEST_HOOKS");
	int fd;

	if (!h || strcmp(h, "1") != 0 ||
		snprintf(pause, sizeof(pause), "%s/ocsb/test-doctor-pause", dr->c->paths.run) >=
			(int)sizeof(pause) ||
		snprintf(paused, sizeof(paused), "%s/ocsb/test-doctor-paused", dr->c->paths.run) >=
			(int)sizeof(paused) ||
		access(pause, F_OK) < 0)
		return;
	fd = open(paused, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	for (int i = 0; i < 600 && access(pause, F_OK) == 0; i++)
		usleep(50 * 1000);
	unlink(paused);
}

/*
 * Take go-rwx off home/rel as root. The name is the owner's to change at any moment: the
 * file is opened below the home without following any link (O_PATH, openat2
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS or an O_NOFOLLOW walk), checked on the descriptor
 * (the regular file the scan saw, same device and inode, the owner's), and chmod'ed through
 * that descriptor. 0, or -1 with the reason it was left alone in why.
 */
int doctor_fix_mode(
	int homefd, const char *rel, const struct stat *seen, uid_t owner, char *why, size_t n)
{
	struct stat st;
	int fd, r;

	fd = fo_open_beneath(homefd, rel, O_PATH);
	if (fd < 0) {
		snprintf(why, n, "%s",
			fd == -ELOOP || fd == -EXDEV || fd == -ENOTDIR
				? "a symbolic link (or another file) is on its path now"
				: fd == -ENOENT ? "it is gone"
						: strerror(-fd));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		snprintf(why, n, "%s", strerror(errno));
		close(fd);
		return -1;
	}
	if (S_ISLNK(st.st_mode))
		snprintf(why, n, "it was replaced by a symbolic link since the scan");
	else if (!S_ISREG(st.st_mode))
		snprintf(why, n, "it is no longer a regular file");
	else if (st.st_dev != seen->st_dev || st.st_ino != seen->st_ino)
		snprintf(why, n, "it was replaced by another file since the scan");
	else if (st.st_uid != owner)
		snprintf(why, n, "it belongs to uid %u, not to the owner", (unsigned)st.st_uid);
	else
		why[0] = '\0';
	if (why[0]) {
		close(fd);
		return -1;
	}
	r = fo_fchmod_path(fd, st.st_mode & 0700);
	close(fd);
	if (r < 0) {
		snprintf(why, n, "chmod: %s", strerror(-r));
		return -1;
	}
	return 0;
}

static int scan_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	struct scan *s = scan_ctx;
	const char *rel = path + strlen(s->home) + 1;
	char fix[600];

	if (++s->files > SCAN_MAX_FILES)
		return 1;
	if (flag == FTW_D && f->level > 0 &&
		(!strcmp(path + f->base, "node_modules") || !strcmp(path + f->base, ".git") ||
			!strcmp(path + f->base, ".cache")))
		return FTW_SKIP_SUBTREE;
	if (flag == FTW_D && f->level >= 4)
		return FTW_SKIP_SUBTREE;
	if (flag != FTW_F || !S_ISREG(st->st_mode) || !(st->st_mode & S_IROTH) ||
		!doctor_sensitive(rel) || !reachable_by_others(s->home, path))
		return 0;
	s->exposed++;
	snprintf(fix, sizeof(fix), "chmod go-rwx '%s'", path);
	if (s->dr->fix && s->dr->root) {
		char why[128] = "the home could not be opened";

		test_pause(s->dr);
		if (s->homefd >= 0 &&
			doctor_fix_mode(s->homefd, rel, st, s->owner, why, sizeof(why)) == 0) {
			add(s->dr, DR_OK, "owner-file", NULL,
				"%s was readable by every account (%04o): fixed", path,
				st->st_mode & 07777);
			s->exposed--;
			return 0;
		}
		add(s->dr, DR_FAIL, "owner-file", fix,
			"%s is readable by every account (%04o); not fixed, left alone: %s", path,
			st->st_mode & 07777, why);
		return 0;
	}
	add(s->dr, DR_FAIL, "owner-file", fix,
		"%s is readable by every account, the agent included (%04o)", path,
		st->st_mode & 07777);
	return 0;
}

static void check_owner_home(struct doctor *dr)
{
	const struct user_info *o = &dr->c->owner;
	struct scan s = {.dr = dr, .home = o->home, .owner = o->uid, .homefd = -1};
	char fix[4200];
	struct stat st;

	if (!dr->c->have_owner) {
		add(dr, DR_WARN, "owner-home", "sudo ocsb-provision --owner USER",
			"no owner in the configuration");
		return;
	}
	if (stat(o->home, &st) < 0) {
		add(dr, DR_FAIL, "owner-home", NULL, "%s: %s", o->home, strerror(errno));
		return;
	}
	snprintf(fix, sizeof(fix), "chmod 0700 '%s'", o->home);
	if (st.st_mode & S_IWOTH)
		add(dr, DR_FAIL, "owner-home", fix, "%s is world-writable (%04o)", o->home,
			st.st_mode & 07777);
	else if (st.st_mode & (S_IROTH | S_IXOTH))
		add(dr, DR_WARN, "owner-home", fix,
			"%s is %04o: every account (the agent too) reaches files left readable in "
			"it",
			o->home, st.st_mode & 07777);
	else
		add(dr, DR_OK, "owner-home", NULL, "%s is %04o", o->home, st.st_mode & 07777);
	/* Only reachable files matter; with a closed home nothing below is reachable. */
	if (!(st.st_mode & S_IXOTH))
		return;
	/* The home's own path comes from passwd (root's); below it, everything is the owner's. */
	if (dr->fix && dr->root)
		s.homefd = open(o->home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	scan_ctx = &s;
	nftw(o->home, scan_one, 32, FTW_PHYS | FTW_ACTIONRETVAL);
	scan_ctx = NULL;
	if (s.homefd >= 0)
		close(s.homefd);
	if (!s.exposed)
		add(dr, DR_OK, "owner-files", NULL,
			"no readable secrets (.ssh, .aws, .config, .docker, .kube, .netrc, "
			".git-credentials, .env) in %s (%zu files looked at)",
			o->home, s.files);
}

static void check_sshd(struct doctor *dr)
{
	char spec[256], bad[1024], *out = NULL;
	const char *argv[] = {"/usr/sbin/sshd", "-T", "-C", spec, NULL};
	int rc, wrong;

	if (!dr->root) {
		add(dr, DR_WARN, "sshd", "sudo ocsb doctor",
			"the effective sshd settings need root to read (sshd -T)");
		return;
	}
	snprintf(spec, sizeof(spec), "user=%s,host=localhost,addr=127.0.0.1", dr->c->cfg.agent);
	rc = run_capture(argv, &out);
	if (rc != 0 || !out) {
		add(dr, DR_FAIL, "sshd", "sudo sshd -t", "sshd -T -C %s failed (exit %d)", spec,
			rc);
		free(out);
		return;
	}
	wrong = doctor_sshd_verdict(out, dr->c->cfg.agent, bad, sizeof(bad));
	dr->usepam = strstr(out, "\nusepam yes\n") ? 1 : strstr(out, "\nusepam no\n") ? 0 : -1;
	free(out);
	if (wrong)
		add(dr, DR_FAIL, "sshd", "sudo ocsb-provision", "for %s: %s", dr->c->cfg.agent,
			bad);
	else
		add(dr, DR_OK, "sshd", NULL,
			"for %s: forwarding off, no ~/.ssh/rc or environment, root-owned keys",
			dr->c->cfg.agent);
}

static void check_agentd(struct doctor *dr)
{
	struct ctl_request rq = {.verb = CTL_STATUS};
	struct ctl_response resp = {0};
	struct netlock_spec nl = {0};
	char err[512];
	unsigned instances = 0, healthy = 0, states = 0;

	/* The live table against the configuration: root reads it itself. */
	if (dr->root) {
		struct user_info a;

		if (user_lookup(dr->c->cfg.agent, &a) < 0) {
			add(dr, DR_FAIL, "netlock", "sudo ocsb-provision", "no account %s",
				dr->c->cfg.agent);
		} else {
			nl.uid = a.uid;
			nl.proxy_port = dr->c->egress.off ? 0 : dr->c->cfg.proxy_port;
			nl.ports_lo = dr->c->cfg.ports_lo;
			nl.ports_hi = dr->c->cfg.ports_hi;
			nl.dns_allow = dr->c->egress.dns_allow;
			nl.proxy_uid = netlock_proxy_uid();
			if (netlock_verify(&nl, err, sizeof(err)) == 0)
				add(dr, DR_OK, "netlock", NULL,
					"table inet %s live and equal to the configuration",
					NETLOCK_TABLE);
			else
				add(dr, DR_FAIL, "netlock",
					"sudo ocsb-provision (or start ocsb-agentd, which restores "
					"it)",
					"%s", err);
		}
	}
	if (ctl_call(AGENTD_SOCK, &rq, &resp, 5000, err, sizeof(err)) < 0 || !resp.ok) {
		add(dr, DR_FAIL, "agentd",
			"sudo ocsb-agentd --foreground (or systemctl start ocsb-agentd)", "%s",
			resp.error ? resp.error : err);
		ctl_response_free(&resp);
		return;
	}
	if (!dr->root) {
		const char *v = ctl_response_get(&resp, "netlock");

		add(dr, v && !strcmp(v, "verified") ? DR_OK : DR_FAIL, "netlock",
			"sudo ocsb-provision", "ocsb-agentd reports the netlock %s",
			v ? v : "unknown");
	}
	if (ctl_response_get(&resp, "frozen") && !strcmp(ctl_response_get(&resp, "frozen"), "yes"))
		add(dr, DR_FAIL, "agentd", "sudo ocsb doctor; nft list ruleset",
			"the agent is frozen: the netlock could not be restored");
	for (size_t i = 0; i < resp.keys.n; i++)
		/* The first state is the proxy's (see ocsb status), the rest OpenCode's. */
		if (!strcmp(resp.keys.v[i], "state") && states++ > 0) {
			instances++;
			healthy += !strcmp(resp.values.v[i], "running");
		}
	if (instances == 0 || healthy == instances)
		add(dr, DR_OK, "opencode", NULL, "%u of %u instance%s running", healthy, instances,
			instances == 1 ? "" : "s");
	else
		add(dr, DR_FAIL, "opencode", "ocsb logs; ocsb restart",
			"%u of %u instances running", healthy, instances);
	ctl_response_free(&resp);
}

static void check_proxy(struct doctor *dr)
{
	if (dr->c->egress.off) {
		add(dr, DR_OK, "proxy", NULL, "egress off: no proxy by design");
		return;
	}
	struct proxy px;
	int held;

	if (dr->root && proxy_init(&px, &dr->c->paths, dr->c->cfg.proxy_port) == 0) {
		/* The agent reaches this port whoever listens: it must be ocsb's squid. */
		held = procs_port_holder(dr->c->cfg.proxy_port, proxy_pid(&px));
		if (held == -EADDRINUSE) {
			add(dr, DR_FAIL, "proxy",
				"sudo systemctl disable --now squid; sudo ocsb-provision",
				"127.0.0.1:%u is held by a process that is not ocsb's squid: the "
				"agent's traffic would bypass ocsb's rules",
				dr->c->cfg.proxy_port);
			return;
		}
		if (held == 1) {
			add(dr, DR_OK, "proxy", NULL, "ocsb's squid listens on 127.0.0.1:%u",
				dr->c->cfg.proxy_port);
			return;
		}
	}
	if (procs_port_open(dr->c->cfg.proxy_port) == 1)
		add(dr, DR_OK, "proxy", NULL, "listening on 127.0.0.1:%u", dr->c->cfg.proxy_port);
	else
		add(dr, DR_FAIL, "proxy", "start ocsb-agentd (it runs squid)",
			"nothing listens on 127.0.0.1:%u", dr->c->cfg.proxy_port);
}

static void check_features(struct doctor *dr)
{
	char path[4200];
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/ocsb/%s/env", dr->c->paths.run, dr->c->cfg.agent) >=
		(int)sizeof(path))
		return;
	if (stat(path, &st) == 0)
		add(dr, DR_OK, "secrets", NULL, "handed over (%s)", path);
	else
		add(dr, DR_WARN, "secrets", "ocsb secrets set NAME",
			"none handed over to the agent (%s absent)", path);
	if (path_join(path, sizeof(path), dr->c->paths.varlib, "ocsb/mirror") < 0)
		return;
	if (stat(path, &st) == 0 && time(NULL) - st.st_mtime < 24 * 3600)
		add(dr, DR_OK, "mirror", NULL, "%s refreshed within a day", path);
	else
		add(dr, DR_WARN, "mirror", "restart ocsb-agentd", "%s %s", path,
			stat(path, &st) == 0 ? "older than a day" : "absent");
}

static void check_sysctls(struct doctor *dr)
{
	static const struct {
		const char *name;
		int min;
		enum dr_status st;
	} k[] = {
		{"fs.protected_symlinks", 1, DR_FAIL},
		{"fs.protected_hardlinks", 1, DR_FAIL},
		{"fs.protected_fifos", 1, DR_WARN},
		{"fs.protected_regular", 1, DR_WARN},
	};

	for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		char path[128], *data = NULL, fix[300];
		int v = -1;

		snprintf(path, sizeof(path), "/proc/sys/%s", k[i].name);
		for (char *p = path + 10; *p; p++)
			if (*p == '.')
				*p = '/';
		if (fo_read(path, 64, &data, NULL) == 0)
			v = atoi(data);
		free(data);
		/* Kernel-wide: printed, never applied by --fix. */
		snprintf(fix, sizeof(fix),
			"sudo sysctl -w %s=%d && echo '%s = %d' | sudo tee "
			"/etc/sysctl.d/60-ocsb.conf",
			k[i].name, k[i].min, k[i].name, k[i].min);
		if (v >= k[i].min)
			add(dr, DR_OK, "sysctl", NULL, "%s = %d", k[i].name, v);
		else
			add(dr, k[i].st, "sysctl", fix,
				"%s = %d: the agent can plant links or files in /tmp that the "
				"owner "
				"then follows or writes",
				k[i].name, v);
	}
}

static void check_groups(struct doctor *dr)
{
	static const char *const privileged[] = {"root", "sudo", "wheel", "adm", "admin", "docker",
		"lxd", "libvirt", "disk", "input", "kvm", "systemd-journal", "video", "shadow",
		"staff"};
	struct user_info a;
	gid_t groups[256];
	int n = 256, bad = 0;
	char list[1024] = "";
	size_t used = 0;

	if (user_lookup(dr->c->cfg.agent, &a) < 0) {
		add(dr, DR_FAIL, "agent-groups", "sudo ocsb-provision", "no account %s",
			dr->c->cfg.agent);
		return;
	}
	if (getgrouplist(a.name, a.gid, groups, &n) < 0)
		n = 0;
	for (int i = 0; i < n; i++) {
		struct group *g = getgrgid(groups[i]);
		int priv = groups[i] == 0 ||
			(dr->c->have_owner && groups[i] == dr->c->owner.gid && groups[i] != a.gid);

		if (groups[i] == a.gid)
			continue;
		for (size_t j = 0; g && j < sizeof(privileged) / sizeof(privileged[0]); j++)
			priv |= !strcmp(g->gr_name, privileged[j]);
		bad += priv;
		if (used < sizeof(list))
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s%s",
				used ? ", " : "", g ? g->gr_name : "?",
				priv ? " (privileged)" : "");
	}
	if (bad) {
		char fix[300];

		snprintf(fix, sizeof(fix), "sudo gpasswd -d %s GROUP", a.name);
		add(dr, DR_FAIL, "agent-groups", fix, "%s is in %s", a.name, list);
	} else if (used) {
		add(dr, DR_WARN, "agent-groups", NULL, "%s is also in %s", a.name, list);
	} else {
		add(dr, DR_OK, "agent-groups", NULL, "%s has no supplementary group", a.name);
	}
}

static void check_persistence(struct doctor *dr)
{
	static const char *const files[] = {"cron.deny", "at.deny"};
	char linger[4096], fix[300];
	struct passwd *pw;
	struct stat st;

	/* systemd's lingering keeps a user manager (and its services) running after logout. */
	if (snprintf(linger, sizeof(linger), "%s/systemd/linger/%s", dr->c->paths.varlib,
		    dr->c->cfg.agent) < (int)sizeof(linger)) {
		snprintf(fix, sizeof(fix), "sudo loginctl disable-linger %s", dr->c->cfg.agent);
		if (lstat(linger, &st) == 0)
			add(dr, DR_FAIL, "persistence", fix,
				"%s lingers: its user services outlive every session and agentd",
				dr->c->cfg.agent);
		else
			add(dr, DR_OK, "persistence", NULL, "%s does not linger (%s absent)",
				dr->c->cfg.agent, linger);
	}

	/*
	 * Where systemd runs, the agent's user manager is masked (ocsb-provision): what it
	 * would start (systemd-run --user, systemctl --user) lives outside agentd's cgroup.
	 */
	if (lstat("/run/systemd/system", &st) == 0 && (pw = getpwnam(dr->c->cfg.agent))) {
		char mask[4096], rel[64], t[32];
		ssize_t k = -1;

		snprintf(rel, sizeof(rel), "systemd/system/user@%u.service", (unsigned)pw->pw_uid);
		if (path_join(mask, sizeof(mask), dr->c->paths.etc, rel) == 0)
			k = readlink(mask, t, sizeof(t) - 1);
		if (k == 9 && memcmp(t, "/dev/null", 9) == 0)
			add(dr, DR_OK, "persistence", NULL,
				"user@%u.service is masked: %s has no user manager (systemd-run "
				"--user, systemctl --user)",
				(unsigned)pw->pw_uid, dr->c->cfg.agent);
		else
			add(dr, DR_FAIL, "persistence", "sudo ocsb-provision",
				"user@%u.service is not masked: %s's user services would run "
				"outside ocsb-agentd's cgroup and outlive its stop",
				(unsigned)pw->pw_uid, dr->c->cfg.agent);
	}

	for (size_t i = 0; i < 2; i++) {
		char path[4096], *data = NULL;

		if (path_join(path, sizeof(path), dr->c->paths.etc, files[i]) < 0)
			continue;
		fo_read(path, 1 << 20, &data, NULL);
		if (doctor_listed(data, dr->c->cfg.agent))
			add(dr, DR_OK, "persistence", NULL, "%s lists %s", path, dr->c->cfg.agent);
		else
			add(dr, DR_FAIL, "persistence", "sudo ocsb-provision",
				"%s does not list %s: its jobs would run after the agent is "
				"stopped",
				path, dr->c->cfg.agent);
		free(data);
	}
}

int doctor_shell_verdict(const char *login_shell, int shell_safe, long abi)
{
	if (!login_shell || strcmp(path_base(login_shell), OCSB_SHELL_NAME) != 0 || !shell_safe)
		return 1;
	return abi >= 6 ? 0 : 2;
}

/* ssh sessions: ocsb-shell as the login shell applies the abstract-socket scope. */
static void check_abstract(struct doctor *dr, long abi)
{
	struct passwd *pw = getpwnam(dr->c->cfg.agent);
	const char *shell = pw ? pw->pw_shell : NULL;
	struct stat st;
	int safe = shell && stat(shell, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
		!(st.st_mode & 022);

	switch (doctor_shell_verdict(shell, safe, abi)) {
	case 0:
		add(dr, DR_OK, "abstract-sockets", NULL,
			"ssh sessions of %s start under %s: a Landlock scope keeps them from "
			"other users' abstract Unix sockets, like OpenCode",
			dr->c->cfg.agent, shell);
		break;
	case 2:
		add(dr, DR_WARN, "abstract-sockets",
			"a kernel >= 6.12 (Landlock ABI 6); meanwhile keep no secrets behind "
			"abstract Unix sockets",
			"the kernel is before 6.12 (no Landlock scope): %s and OpenCode can "
			"connect "
			"to other users' abstract Unix sockets (X11, some D-Bus and IDE helpers "
			"listen there)",
			shell);
		break;
	default:
		add(dr, DR_WARN, "abstract-sockets",
			"sudo ocsb-provision (makes ocsb-shell the agent's login shell)",
			"ssh sessions of %s can connect to other users' abstract Unix sockets "
			"(X11, "
			"some D-Bus and IDE helpers listen there): its login shell is %s, not a "
			"root-owned ocsb-shell",
			dr->c->cfg.agent, shell ? shell : "(no such user)");
	}
}

/* What OpenCode gets that the agent's ssh sessions do not: said plainly. */
static void check_sessions(struct doctor *dr)
{
	char *mounts = NULL;
	long abi = landlock_abi();
	int hidepid = 0, session_ns = 0;
	char pam[4096], conf[4096], *text = NULL;
	struct stat st;

	/* Provisioning's pam_namespace entry for the agent, and its line in sshd's stack. */
	if (path_join(pam, sizeof(pam), dr->c->paths.etc, "pam.d/sshd") == 0 &&
		fo_read(pam, 1 << 20, &text, NULL) == 0 && strstr(text, "pam_namespace.so") &&
		strstr(text, "# ocsb-provision") &&
		snprintf(conf, sizeof(conf), "%s/security/namespace.d/ocsb-%s.conf",
			dr->c->paths.etc, dr->c->cfg.agent) < (int)sizeof(conf) &&
		stat(conf, &st) == 0)
		session_ns = 1;
	free(text);

	if (fo_read("/proc/self/mountinfo", 1 << 20, &mounts, NULL) == 0) {
		for (char *s = mounts; s && *s;) {
			size_t l = strcspn(s, "\n");
			char line[1024];

			snprintf(line, sizeof(line), "%.*s", (int)l, s);
			if (strstr(line, " /proc ") && strstr(line, " - proc ") &&
				(strstr(line, "hidepid=2") || strstr(line, "hidepid=invisible")))
				hidepid = 1;
			s += l + (s[l] == '\n');
		}
	}
	free(mounts);
	add(dr, abi >= 6 ? DR_OK : DR_WARN, "opencode-sandbox",
		abi >= 6 ? NULL : "a kernel >= 6.12 (Landlock ABI 6)",
		"OpenCode runs with a private /tmp and /dev/shm, its own /proc (hidepid), fake "
		"machine-id, boot_id, kernel command line and DMI ids; Landlock scope for abstract "
		"sockets and signals: %s",
		abi >= 6 ? "yes" : "no (kernel too old)");
	if (session_ns && dr->usepam == 0)
		add(dr, DR_WARN, "ssh-sessions", "UsePAM yes in sshd_config",
			"the pam_namespace entry for %s is inert: sshd runs with UsePAM no, so its "
			"ssh sessions get NO private namespace",
			dr->c->cfg.agent);
	else if (session_ns)
		add(dr, DR_OK, "ssh-sessions", NULL,
			"ssh sessions of %s get a private /tmp, /var/tmp and /dev/shm, their own "
			"/proc (hidepid) and the fake identity (pam_namespace, %s)",
			dr->c->cfg.agent, pam);
	else
		add(dr, DR_WARN, "ssh-sessions", "sudo ocsb-provision (needs pam_namespace.so)",
			"ssh sessions of %s get NO private namespace: they share /tmp and /dev/shm "
			"with everyone, see every process and the real machine-id, boot_id and "
			"kernel command line",
			dr->c->cfg.agent);
	check_abstract(dr, abi);
	if (session_ns && !hidepid)
		add(dr, DR_OK, "proc", NULL,
			"OpenCode and the agent's ssh sessions mount their own /proc with hidepid "
			"(the machine's /proc is unchanged)");
	else if (hidepid)
		add(dr, DR_OK, "proc", NULL,
			"/proc is mounted with hidepid: other users' processes "
			"are hidden from the agent's ssh sessions");
	else
		add(dr, DR_WARN, "proc",
			"opt in: sudo mount -o remount,hidepid=invisible,gid=GROUP /proc (GROUP: "
			"the owner's and monitoring tools' group; and in /etc/fstab)",
			"/proc shows every process: the agent's ssh sessions can read the owner's "
			"command lines");
}

/* ---- a few probes as the agent, each paired with the same probe as root ---- */

static int tcp_connects(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct pollfd pf;
	int fd, ok = 0, e = 0;
	socklen_t el = sizeof(e);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		ok = 1;
	} else if (errno == EINPROGRESS) {
		pf.fd = fd;
		pf.events = POLLOUT;
		if (poll(&pf, 1, 2000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0)
			ok = e == 0;
	}
	close(fd);
	return ok;
}

struct probe_arg {
	const char *home;
	unsigned port;
};

/* Exit bits: 1 = reached the owner's home listing, 2 = reached sshd on 127.0.0.1:22. */
static int probe_fn(void *arg, int outfd)
{
	const struct probe_arg *p = arg;
	char path[4200];
	int r = 0, fd;

	(void)outfd;
	snprintf(path, sizeof(path), "%s/.ssh", p->home);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		r |= 1;
		close(fd);
	}
	if (tcp_connects(p->port))
		r |= 2;
	return r;
}

static void check_probes(struct doctor *dr)
{
	struct probe_arg pa = {.home = dr->c->owner.home, .port = 22};
	struct spawn_opts o = {.drop = 1, .timeout_ms = 10000};
	struct spawn_result r = {0};
	struct user_info a;
	int control = 0;
	struct stat st;
	char ssh_dir[4200];

	if (!dr->root) {
		add(dr, DR_WARN, "probes", "sudo ocsb doctor", "probes as the agent need root");
		return;
	}
	if (user_lookup(dr->c->cfg.agent, &a) < 0 || !dr->c->have_owner)
		return;
	/* Controls: root reaches both, or the probe would prove nothing. */
	snprintf(ssh_dir, sizeof(ssh_dir), "%s/.ssh", pa.home);
	control = (stat(ssh_dir, &st) == 0 ? 1 : 0) | (tcp_connects(pa.port) ? 2 : 0);
	o.uid = a.uid;
	o.gid = a.gid;
	o.user = a.name;
	if (spawn_fn(probe_fn, &pa, &o, &r) < 0) {
		add(dr, DR_FAIL, "probes", NULL, "cannot run a probe as %s", a.name);
		return;
	}
	if (control & 1)
		add(dr, r.status & 1 ? DR_FAIL : DR_OK, "probe-files",
			r.status & 1 ? "chmod 0700 ~/.ssh" : NULL, "%s %s open %s", a.name,
			r.status & 1 ? "CAN" : "cannot", ssh_dir);
	else
		add(dr, DR_WARN, "probe-files", NULL, "no %s to probe (control failed)", ssh_dir);
	if (control & 2)
		add(dr, r.status & 2 ? DR_FAIL : DR_OK, "probe-network",
			r.status & 2 ? "sudo ocsb-provision" : NULL,
			"%s %s connect to 127.0.0.1:22 (root can)", a.name,
			r.status & 2 ? "CAN" : "cannot");
	else
		add(dr, DR_WARN, "probe-network", NULL,
			"nothing listens on 127.0.0.1:22 to probe (control failed)");
	spawn_result_free(&r);
}

/* ---- output ---- */

static int report(struct doctor *dr)
{
	unsigned fails = 0, warns = 0;
	struct buf b = {0};

	for (size_t i = 0; i < dr->n; i++) {
		fails += dr->v[i].st == DR_FAIL;
		warns += dr->v[i].st == DR_WARN;
	}
	if (dr->json) {
		buf_puts(&b, "{\"checks\":[");
		for (size_t i = 0; i < dr->n; i++) {
			buf_printf(&b, "%s{\"check\":", i ? "," : "");
			json_buf_str(&b, dr->v[i].name);
			buf_printf(&b,
				",\"status\":\"%s\",\"detail\":", doctor_status_name(dr->v[i].st));
			json_buf_str(&b, dr->v[i].detail);
			buf_puts(&b, ",\"fix\":");
			json_buf_str(&b, dr->v[i].fix);
			buf_puts(&b, "}");
		}
		buf_printf(&b, "],\"fail\":%u,\"warn\":%u}\n", fails, warns);
		fwrite(b.data, 1, b.len, stdout);
		buf_free(&b);
	} else {
		for (size_t i = 0; i < dr->n; i++) {
			/* File names under the owner's home are anyone's bytes: no raw controls. */
			char vis[4 * sizeof(dr->v[i].detail)];

			log_vis(dr->v[i].detail, strlen(dr->v[i].detail), vis, sizeof(vis));
			printf("%-4s %-16s %s\n", doctor_status_name(dr->v[i].st), dr->v[i].name,
				vis);
			log_vis(dr->v[i].fix, strlen(dr->v[i].fix), vis, sizeof(vis));
			if (dr->v[i].st != DR_OK && dr->v[i].fix[0])
				printf("     %-16s fix: %s\n", "", vis);
		}
		printf("doctor: %u FAIL, %u WARN, %zu checks\n", fails, warns, dr->n);
	}
	return fails ? 1 : 0;
}

int cmd_doctor(struct cli *c, int argc, char **argv)
{
	struct doctor dr = {.c = c, .root = geteuid() == 0, .usepam = -1};
	int r;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--fix"))
			dr.fix = 1;
		else if (!strcmp(argv[i], "--json"))
			dr.json = 1;
		else {
			fprintf(stderr, "ocsb doctor: unknown option '%s' (--fix, --json)\n",
				argv[i]);
			return 2;
		}
	}
	check_deps(&dr);
	check_owner_home(&dr);
	check_sshd(&dr);
	check_agentd(&dr);
	check_proxy(&dr);
	check_features(&dr);
	check_sysctls(&dr);
	check_groups(&dr);
	check_persistence(&dr);
	check_sessions(&dr);
	check_probes(&dr);
	r = report(&dr);
	free(dr.v);
	return r;
}
