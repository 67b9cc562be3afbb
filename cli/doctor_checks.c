/* SPDX-License-Identifier: MIT */
/*
 * The checks of `ocsb doctor`, one function per area: dependencies, the owner's home, sshd,
 * ocsb-agentd, the proxy, kernel features, sysctls, groups, persistence (the sandbox and
 * sessions: doctor_sandbox.c).
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
#include "sysblock.h"
#include "log.h"
#include "loginshell.h"
#include "netlock.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"
#include "testhook.h"
#include "doctor_int.h"

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

void doctor_check_deps(struct doctor *dr)
{
	const char *squid[] = {"/usr/sbin/squid", "-v", NULL};
	int maj, min, rev;
	char *out = NULL, line[160] = "not found";

	git_libgit2_version(&maj, &min, &rev);
	if (run_capture(squid, &out) == 0 && out)
		snprintf(line, sizeof(line), "%.*s", (int)strcspn(out, "\n"), out);
	free(out);
	doctor_add(dr, access("/usr/sbin/squid", X_OK) == 0 ? DR_OK : DR_FAIL, "dependencies",
		"sudo make deps", "libgit2 %d.%d.%d, libssh %s, libsodium %s, squid: %s", maj, min,
		rev, ssh_version(0), sodium_version_string(), line);
	if (access(dr->c->cfg.opencode_bin, X_OK) == 0)
		doctor_add(dr, DR_OK, "opencode", NULL, "%s", dr->c->cfg.opencode_bin);
	else
		doctor_add(dr, DR_FAIL, "opencode", "sudo ocsb-provision --install-opencode",
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
 * Test hook, in a test build and off unless OCSB_TEST_HOOKS=1 is in root's environment:
 * while <run>/ocsb/test-doctor-pause exists, --fix waits before each fix (after the scan saw
 * the file), so a test can swap a link in at the worst moment. It only delays.
 */
#ifdef OCSB_TEST_BUILD
static void test_pause(struct doctor *dr)
{
	char pause[4096], paused[4096];
	int fd;

	if (!TESTHOOK_ON() ||
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
#else
static void test_pause(struct doctor *dr)
{
}
#endif

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
			doctor_add(s->dr, DR_OK, "owner-file", NULL,
				"%s was readable by every account (%04o): fixed", path,
				st->st_mode & 07777);
			s->exposed--;
			return 0;
		}
		doctor_add(s->dr, DR_FAIL, "owner-file", fix,
			"%s is readable by every account (%04o); not fixed, left alone: %s", path,
			st->st_mode & 07777, why);
		return 0;
	}
	doctor_add(s->dr, DR_FAIL, "owner-file", fix,
		"%s is readable by every account, the agent included (%04o)", path,
		st->st_mode & 07777);
	return 0;
}

void doctor_check_owner_home(struct doctor *dr)
{
	const struct user_info *o = &dr->c->owner;
	struct scan s = {.dr = dr, .home = o->home, .owner = o->uid, .homefd = -1};
	char fix[4200];
	struct stat st;

	if (!dr->c->have_owner) {
		doctor_add(dr, DR_WARN, "owner-home", "sudo ocsb-provision --owner USER",
			"no owner in the configuration");
		return;
	}
	if (stat(o->home, &st) < 0) {
		doctor_add(dr, DR_FAIL, "owner-home", NULL, "%s: %s", o->home, strerror(errno));
		return;
	}
	snprintf(fix, sizeof(fix), "chmod 0700 '%s'", o->home);
	if (st.st_mode & S_IWOTH)
		doctor_add(dr, DR_FAIL, "owner-home", fix, "%s is world-writable (%04o)", o->home,
			st.st_mode & 07777);
	else if (st.st_mode & (S_IROTH | S_IXOTH))
		doctor_add(dr, DR_WARN, "owner-home", fix,
			"%s is %04o: every account (the agent too) reaches files left readable in "
			"it",
			o->home, st.st_mode & 07777);
	else
		doctor_add(
			dr, DR_OK, "owner-home", NULL, "%s is %04o", o->home, st.st_mode & 07777);
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
		doctor_add(dr, DR_OK, "owner-files", NULL,
			"no readable secrets (.ssh, .aws, .config, .docker, .kube, .netrc, "
			".git-credentials, .env) in %s (%zu files looked at)",
			o->home, s.files);
}

void doctor_check_sshd(struct doctor *dr)
{
	char spec[256], bad[1024], *out = NULL;
	const char *argv[] = {"/usr/sbin/sshd", "-T", "-C", spec, NULL};
	int rc, wrong;

	if (!dr->root) {
		doctor_add(dr, DR_WARN, "sshd", "sudo ocsb doctor",
			"the effective sshd settings need root to read (sshd -T)");
		return;
	}
	snprintf(spec, sizeof(spec), "user=%s,host=localhost,addr=127.0.0.1", dr->c->cfg.agent);
	rc = run_capture(argv, &out);
	if (rc != 0 || !out) {
		doctor_add(dr, DR_FAIL, "sshd", "sudo sshd -t", "sshd -T -C %s failed (exit %d)",
			spec, rc);
		free(out);
		return;
	}
	wrong = doctor_sshd_verdict(out, dr->c->cfg.agent, bad, sizeof(bad));
	dr->usepam = strstr(out, "\nusepam yes\n") ? 1 : strstr(out, "\nusepam no\n") ? 0 : -1;
	free(out);
	if (wrong)
		doctor_add(dr, DR_FAIL, "sshd", "sudo ocsb-provision", "for %s: %s",
			dr->c->cfg.agent, bad);
	else
		doctor_add(dr, DR_OK, "sshd", NULL,
			"for %s: forwarding off, no ~/.ssh/rc or environment, root-owned keys",
			dr->c->cfg.agent);
}

/* "ai-dev (1001), ai-two (1002)": the agents the live set holds; -errno if it cannot be read. */
static int netlock_covers(uid_t self, char *out, size_t n, int *ret_self)
{
	uid_t uids[NETLOCK_MAX_AGENTS + 1];
	int k = netlock_live_agents(uids, ARRAY_SIZE(uids));
	size_t len = 0;

	out[0] = '\0';
	*ret_self = 0;
	for (int i = 0; i < k && i < (int)ARRAY_SIZE(uids) && len < n; i++) {
		struct user_info u;

		*ret_self |= uids[i] == self;
		if (user_lookup_uid(uids[i], &u) == 0)
			len += (size_t)snprintf(out + len, n - len, "%s%s (%u)", len ? ", " : "",
				u.name, (unsigned)uids[i]);
		else
			len += (size_t)snprintf(out + len, n - len, "%suid %u (no account)",
				len ? ", " : "", (unsigned)uids[i]);
	}
	return k;
}

int doctor_routes_differ(
	const char *served, const unsigned *guard, size_t n, char *why, size_t whylen)
{
	unsigned want[NETLOCK_MAX_INJECT];
	size_t nw = 0, i = 0, k = 0;
	const char *p = served;

	/* "none", or ascending ports: what agentd's status says it serves. */
	while (strcmp(served, "none") != 0 && *p) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v == 0 || v > 65535 || nw == NETLOCK_MAX_INJECT ||
			(*end && *end != ' ')) {
			snprintf(why, whylen, "ocsb-agentd's route ports unreadable: '%.64s'",
				served);
			return 1;
		}
		want[nw++] = (unsigned)v;
		p = *end ? end + 1 : end;
	}
	/* Both ascending (the guard in rule order, which is route order): the first gap tells. */
	while (i < nw || k < n) {
		if (k == n || (i < nw && want[i] < guard[k])) {
			snprintf(why, whylen,
				"ocsb-agentd serves the route 127.0.0.1:%u but its netlock has no "
				"rule for it (the injector answers a port the table does not name)",
				want[i]);
			return 1;
		}
		if (i == nw || guard[k] < want[i]) {
			snprintf(why, whylen,
				"the netlock opens the route 127.0.0.1:%u that ocsb-agentd "
				"does not serve",
				guard[k]);
			return 1;
		}
		i++;
		k++;
	}
	return 0;
}

/*
 * The table the machine should hold (this configuration, every agent of the registry,
 * ocsb-inject's chain, agentd's routes as its guard holds them: what ocsb-provision
 * builds), and whom it covers. served: the route ports agentd's status names, NULL when
 * it did not answer. Reading the routes back from the guard alone would trust agentd's
 * tables to hold what it serves: a rebuild of its spec that lost them (issue 25) left both
 * tables equal to each other and to this check. So the guard is compared with what agentd
 * says it serves, and verified itself.
 */
static void doctor_check_netlock(struct doctor *dr, const char *served)
{
	struct netlock_spec nl = {0};
	struct user_info a;
	char err[512], covers[1024], stale[1024], routes[NETLOCK_MAX_INJECT * 6 + 8] = "none";
	int self = 0, k;

	if (user_lookup(dr->c->cfg.agent, &a) < 0) {
		doctor_add(dr, DR_FAIL, "netlock", "sudo ocsb-provision", "no account %s",
			dr->c->cfg.agent);
		return;
	}
	k = netlock_covers(a.uid, covers, sizeof(covers), &self);
	if (k >= 0 && !self) {
		doctor_add(dr, DR_FAIL, "netlock", "sudo ocsb-provision",
			"table inet %s does not cover %s (uid %u): its set %s holds %s",
			NETLOCK_TABLE, a.name, (unsigned)a.uid, NETLOCK_SET,
			covers[0] ? covers : "no uid");
		return;
	}
	nl.uid = a.uid;
	nl.proxy_port = dr->c->egress.off ? 0 : dr->c->cfg.proxy_port;
	nl.ports_lo = dr->c->cfg.ports_lo;
	nl.ports_hi = dr->c->cfg.ports_hi;
	nl.dns_allow = dr->c->egress.dns_allow;
	nl.proxy_uid = netlock_proxy_uid();
	/* An unreadable resolv.conf gives no nameserver, as it does to agentd and provision. */
	(void)netlock_inject_host(&nl, dr->c->paths.etc);
	if (netlock_registry(&nl, dr->c->paths.varlib, NULL, stale, sizeof(stale)) < 0 ||
		netlock_guard_routes(&nl) < 0) {
		snprintf(err, sizeof(err), "netlock: cannot read the agents registry or the guard");
		goto fail;
	}
	for (size_t i = 0, len = 0; i < nl.n_inject && len < sizeof(routes); i++)
		len += (size_t)snprintf(routes + len, sizeof(routes) - len, "%s%u", i ? " " : "",
			nl.inject_ports[i]);
	if (served) {
		if (doctor_routes_differ(served, nl.inject_ports, nl.n_inject, err, sizeof(err))) {
			doctor_add(dr, DR_FAIL, "netlock", "sudo systemctl restart ocsb-agentd",
				"%s", err);
			return;
		}
		if (netlock_guard_verify(&nl, err, sizeof(err)) != 0) {
			doctor_add(dr, DR_FAIL, "netlock", "sudo systemctl restart ocsb-agentd",
				"ocsb-agentd's guard: %s", err);
			return;
		}
	}
	if (netlock_verify(&nl, err, sizeof(err)) == 0) {
		doctor_add(dr, DR_OK, "netlock", NULL,
			"table inet %s live and equal to the configuration; covers %s; routes %s",
			NETLOCK_TABLE, covers, routes);
		return;
	}
fail:
	doctor_add(dr, DR_FAIL, "netlock",
		"sudo ocsb-provision (or start ocsb-agentd, which restores it)", "%s", err);
}

/* One instance's block of the status, when it ends. */
struct inst_block {
	const char *name, *state, *uptime, *error;
};

static void inst_flush(struct inst_block *b, unsigned *running, unsigned *starting,
	unsigned *failing, char *start, size_t sn, char *fail, size_t fn)
{
	size_t l;

	if (!b->name)
		return;
	if (b->state && !strcmp(b->state, "running")) {
		(*running)++;
	} else if (b->state && !strcmp(b->state, "starting") && !b->error) {
		/* agentd names an error once an instance is past its start time (READY_DEADLINE_MS). */
		(*starting)++;
		l = strlen(start);
		snprintf(start + l, sn - l, "%s%s (%s s)", l ? ", " : "", b->name,
			b->uptime ? b->uptime : "0");
	} else {
		(*failing)++;
		l = strlen(fail);
		snprintf(fail + l, fn - l, "%s%s (%s%s%s)", l ? ", " : "", b->name,
			b->state ? b->state : "no state", b->error ? ": " : "",
			b->error ? b->error : "");
	}
	memset(b, 0, sizeof(*b));
}

int doctor_instances_verdict(
	const struct strv *keys, const struct strv *values, char *detail, size_t n)
{
	struct inst_block b = {0};
	unsigned running = 0, starting = 0, failing = 0, total;
	char start[256] = "", fail[512] = "";
	int in = 0;

	for (size_t i = 0; i < keys->n && i < values->n; i++) {
		const char *k = keys->v[i], *v = values->v[i];

		if (!strcmp(k, "instance") || !strcmp(k, "proxy")) {
			inst_flush(&b, &running, &starting, &failing, start, sizeof(start), fail,
				sizeof(fail));
			in = !strcmp(k, "instance");
			if (in)
				b.name = v;
		} else if (in && !strcmp(k, "state")) {
			b.state = v;
		} else if (in && !strcmp(k, "uptime-s")) {
			b.uptime = v;
		} else if (in && !strcmp(k, "last-error")) {
			b.error = v;
		}
	}
	inst_flush(&b, &running, &starting, &failing, start, sizeof(start), fail, sizeof(fail));
	total = running + starting + failing;
	snprintf(detail, n, "%u of %u instance%s running%s%s%s%s", running, total,
		total == 1 ? "" : "s", start[0] ? "; starting: " : "", start,
		fail[0] ? "; not running: " : "", fail);
	return failing ? 1 : 0;
}

void doctor_check_agentd(struct doctor *dr)
{
	struct ctl_request rq = {.verb = CTL_STATUS};
	struct ctl_response resp = {0};
	char err[512];
	char detail[768];
	int up;

	up = ctl_call(dr->c->paths.ctl_sock, &rq, &resp, 5000, err, sizeof(err)) == 0 && resp.ok;
	/* The live table against the configuration and agentd's routes: root reads it itself. */
	if (dr->root)
		doctor_check_netlock(dr, up ? ctl_response_get(&resp, "route-ports") : NULL);
	if (!up) {
		doctor_add(dr, DR_FAIL, "agentd",
			"sudo ocsb-warden --foreground (or systemctl start ocsb-agentd)", "%s",
			resp.error ? resp.error : err);
		ctl_response_free(&resp);
		return;
	}
	if (!dr->root) {
		const char *v = ctl_response_get(&resp, "netlock");

		doctor_add(dr, v && !strcmp(v, "verified") ? DR_OK : DR_FAIL, "netlock",
			"sudo ocsb-provision", "ocsb-agentd reports the netlock %s",
			v ? v : "unknown");
	}
	if (ctl_response_get(&resp, "frozen") && !strcmp(ctl_response_get(&resp, "frozen"), "yes"))
		doctor_add(dr, DR_FAIL, "agentd", "sudo ocsb doctor; nft list ruleset",
			"the agent is frozen: the netlock could not be restored");
	/* An instance still within its start time is no failure: OpenCode takes a while. */
	if (doctor_instances_verdict(&resp.keys, &resp.values, detail, sizeof(detail)) == 0)
		doctor_add(dr, DR_OK, "opencode", NULL, "%s", detail);
	else
		doctor_add(dr, DR_FAIL, "opencode", "ocsb logs; ocsb restart", "%s", detail);
	ctl_response_free(&resp);
}

void doctor_check_proxy(struct doctor *dr)
{
	if (dr->c->egress.off) {
		doctor_add(dr, DR_OK, "proxy", NULL, "egress off: no proxy by design");
		return;
	}
	struct proxy px;
	int held;

	if (dr->root && proxy_init(&px, &dr->c->paths, dr->c->cfg.proxy_port) == 0) {
		/* The agent reaches this port whoever listens: it must be ocsb's squid. */
		held = procs_port_holder(dr->c->cfg.proxy_port, proxy_pid(&px));
		if (held == -EADDRINUSE) {
			doctor_add(dr, DR_FAIL, "proxy",
				"sudo systemctl disable --now squid; sudo ocsb-provision",
				"127.0.0.1:%u is held by a process that is not ocsb's squid: the "
				"agent's traffic would bypass ocsb's rules",
				dr->c->cfg.proxy_port);
			return;
		}
		if (held == 1) {
			doctor_add(dr, DR_OK, "proxy", NULL, "ocsb's squid listens on 127.0.0.1:%u",
				dr->c->cfg.proxy_port);
			return;
		}
	}
	if (procs_port_open(dr->c->cfg.proxy_port) == 1)
		doctor_add(dr, DR_OK, "proxy", NULL, "listening on 127.0.0.1:%u",
			dr->c->cfg.proxy_port);
	else
		doctor_add(dr, DR_FAIL, "proxy", "start ocsb-agentd (it runs squid)",
			"nothing listens on 127.0.0.1:%u", dr->c->cfg.proxy_port);
}

/*
 * The link maker's problems of its last run (issue 28): the owner cannot look into the
 * agent's home, so ocsb-provision and ocsb-agentd record them in <base>/<agent>.links
 * (escaped there; a byte that is not printable here ends the line anyway).
 */
static void doctor_mirror_links(struct doctor *dr, const char *base)
{
	char path[4300], fix[300], *data = NULL, *save = NULL;

	if (snprintf(path, sizeof(path), "%s/%s.links", base, dr->c->cfg.agent) >=
			(int)sizeof(path) ||
		fo_read(path, 64 * 1024, &data, NULL) < 0)
		return;
	snprintf(fix, sizeof(fix), "sudo ocsb mirror status; sudo ocsb-provision");
	for (char *l = strtok_r(data, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		for (char *c = l; *c; c++)
			if ((unsigned char)*c < 0x20 || (unsigned char)*c == 0x7f) {
				*c = '\0';
				break;
			}
		if (*l)
			doctor_add(dr, DR_WARN, "mirror", fix, "link maker in ~%s: %s",
				dr->c->cfg.agent, l);
	}
	free(data);
}

void doctor_check_features(struct doctor *dr)
{
	char path[4200];
	struct stat st;

	if (snprintf(path, sizeof(path), "%s/ocsb/%s/env", dr->c->paths.run, dr->c->cfg.agent) >=
		(int)sizeof(path))
		return;
	if (stat(path, &st) == 0)
		doctor_add(dr, DR_OK, "secrets", NULL, "handed over (%s)", path);
	else
		doctor_add(dr, DR_WARN, "secrets", "ocsb secrets set NAME",
			"none handed over to the agent (%s absent)", path);
	secrets_doctor_llm(dr);
	if (path_join(path, sizeof(path), dr->c->paths.varlib, "ocsb/mirror") < 0)
		return;
	if (stat(path, &st) == 0 && time(NULL) - st.st_mtime < 24 * 3600)
		doctor_add(dr, DR_OK, "mirror", NULL, "%s refreshed within a day", path);
	else
		doctor_add(dr, DR_WARN, "mirror", "restart ocsb-agentd", "%s %s", path,
			stat(path, &st) == 0 ? "older than a day" : "absent");
	doctor_mirror_links(dr, path);
}

int doctor_sysctl_fix(char *buf, size_t n, const char *name, int min)
{
	int len = snprintf(buf, n,
		"sudo sysctl -w %s=%d && echo '%s = %d' | sudo tee "
		"/etc/sysctl.d/60-ocsb-%s.conf",
		name, min, name, min, name);

	return len < 0 || (size_t)len >= n ? -1 : 0;
}

void doctor_check_sysctls(struct doctor *dr)
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
		doctor_sysctl_fix(fix, sizeof(fix), k[i].name, k[i].min);
		if (v >= k[i].min)
			doctor_add_machine(dr, DR_OK, "sysctl", NULL, "%s = %d", k[i].name, v);
		else
			doctor_add_machine(dr, k[i].st, "sysctl", fix,
				"%s = %d: the agent can plant links or files in /tmp that the "
				"owner "
				"then follows or writes",
				k[i].name, v);
	}
}

void doctor_check_groups(struct doctor *dr)
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
		doctor_add(dr, DR_FAIL, "agent-groups", "sudo ocsb-provision", "no account %s",
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
		doctor_add(dr, DR_FAIL, "agent-groups", fix, "%s is in %s", a.name, list);
	} else if (used) {
		doctor_add(dr, DR_WARN, "agent-groups", NULL, "%s is also in %s", a.name, list);
	} else {
		doctor_add(
			dr, DR_OK, "agent-groups", NULL, "%s has no supplementary group", a.name);
	}
}

void doctor_check_persistence(struct doctor *dr)
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
			doctor_add(dr, DR_FAIL, "persistence", fix,
				"%s lingers: its user services outlive every session and agentd",
				dr->c->cfg.agent);
		else
			doctor_add(dr, DR_OK, "persistence", NULL, "%s does not linger (%s absent)",
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
			doctor_add(dr, DR_OK, "persistence", NULL,
				"user@%u.service is masked: %s has no user manager (systemd-run "
				"--user, systemctl --user)",
				(unsigned)pw->pw_uid, dr->c->cfg.agent);
		else
			doctor_add(dr, DR_FAIL, "persistence", "sudo ocsb-provision",
				"user@%u.service is not masked: %s's user services would run "
				"outside ocsb-agentd's cgroup and outlive its stop",
				(unsigned)pw->pw_uid, dr->c->cfg.agent);
	}

	for (size_t i = 0; i < 2; i++) {
		char path[4096], *data = NULL;

		if (path_join(path, sizeof(path), dr->c->paths.etc, files[i]) < 0)
			continue;
		/* Debian's at.deny is root:daemon 0640: the owner cannot tell, root can. */
		if (fo_read(path, 1 << 20, &data, NULL) == -EACCES)
			doctor_add(dr, DR_WARN, "persistence", "sudo ocsb doctor",
				"%s cannot be read as %s: whether it lists %s needs root", path,
				dr->c->owner.name[0] ? dr->c->owner.name : "this user",
				dr->c->cfg.agent);
		else if (doctor_listed(data, dr->c->cfg.agent))
			doctor_add(dr, DR_OK, "persistence", NULL, "%s lists %s", path,
				dr->c->cfg.agent);
		else
			doctor_add(dr, DR_FAIL, "persistence", "sudo ocsb-provision",
				"%s does not list %s: its jobs would run after the agent is "
				"stopped",
				path, dr->c->cfg.agent);
		free(data);
	}
}
