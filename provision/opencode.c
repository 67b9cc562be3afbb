/* SPDX-License-Identifier: MIT */
/*
 * OpenCode: `--install-opencode` (npm into a root-owned prefix) and the check that the
 * binary ocsb-agentd will run is one only root can replace.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "ocpin.h"
#include "opencode.h"
#include "provision.h"
#include "spawn.h"
#include "dirs.h"
#include "testhook.h"
#include "opencode_pins.h"

#define NPM_TIMEOUT_MS (15 * 60 * 1000) /* two ~60 MB tarballs on a slow link */
#define VERSION_TIMEOUT_MS 60000
#define NOBODY_ID 65534 /* nobody:nogroup; only the uid matters, no passwd entry needed */
#define MARKER "ocsb/opencode-install"
#define TOOL_PATH OCSB_USER_PATH
/*
 * npm runs as this account of its own, never as root nor as nobody: no other process
 * shares its uid (none can ptrace or signal npm, none owns a file it could change), and
 * once npm is done root can kill every process of that uid without touching a service.
 */
#define NPM_USER "ocsb-npm"
#define NPM_GECOS "ocsb npm for ocsb-provision --install-opencode"

/* What this build installs: conf/opencode/, or a test's pins (OCSB_OPENCODE_PINS). */
struct pins {
	char *package; /* owned */
	char *lock; /* owned */
	struct ocpin_manifest tree;
};

int opencode_version_ok(const char *v)
{
	size_t n = strlen(v);

	/* An exact release: "latest" or a range would make "already installed" meaningless. */
	if (n == 0 || n > 32 || v[0] < '0' || v[0] > '9')
		return 0;
	return strspn(v, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-+") == n;
}

static int marker_path(struct prov *p, char *out, size_t n)
{
	return path_join(out, n, p->paths.varlib, MARKER);
}

/* --install-opencode ran here once: from then on --check watches the binary. */
static int marker_exists(struct prov *p)
{
	char path[PATH_MAX];
	struct stat st;

	return marker_path(p, path, sizeof(path)) == 0 && lstat(path, &st) == 0;
}

static int marker_write(struct prov *p, const char *version, const char *prefix)
{
	char path[PATH_MAX];
	struct buf b = {0};
	int r;

	if (marker_path(p, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	if (state_root(p) < 0)
		return -1;
	buf_printf(&b,
		"# written by ocsb-provision --install-opencode; do not edit\n"
		"version %s\nprefix %s\n",
		version, prefix);
	r = fo_same(path, b.data, b.len, 0644, 0, 0);
	if (r != 1)
		r = fo_write(path, b.data, b.len, 0644, 0, 0);
	else
		r = 0;
	buf_free(&b);
	if (r < 0)
		log_err("%s: %s", path, strerror(-r));
	return r;
}

/*
 * `BIN --version` as nobody, in a throw-away HOME and TMPDIR: the binary is code from
 * the network and needs no privilege to say its version (it writes under HOME, and
 * /tmp/opencode without a TMPDIR).
 */
static int run_version(const char *bin, char *ret, size_t n, char *why, size_t whylen)
{
	char home[] = "/tmp/ocsb-opencode.XXXXXX", env_home[64], env_tmp[64], how[64];
	char *const env[] = {env_home, env_tmp, "PATH=" TOOL_PATH, "LC_ALL=C",
		"OPENCODE_DISABLE_AUTOUPDATE=1", NULL};
	const char *argv[] = {bin, "--version", NULL};
	struct spawn_opts o = {.drop = 1,
		.uid = NOBODY_ID,
		.gid = NOBODY_ID,
		.envp = env,
		.cwd = home,
		.capture = 1,
		.timeout_ms = VERSION_TIMEOUT_MS};
	struct spawn_result res = {0};
	int r;

	if (!mkdtemp(home)) {
		snprintf(why, whylen, "%s: %s", home, strerror(errno));
		return -errno;
	}
	if (chown(home, NOBODY_ID, NOBODY_ID) < 0) {
		r = -errno;
		snprintf(why, whylen, "%s: %s", home, strerror(-r));
		rmdir(home);
		return r;
	}
	snprintf(env_home, sizeof(env_home), "HOME=%s", home);
	snprintf(env_tmp, sizeof(env_tmp), "TMPDIR=%s", home);
	r = spawn_run(argv, &o, &res);
	fo_rmtree(home);
	if (r < 0) {
		snprintf(why, whylen, "cannot run %s --version: %s", bin, strerror(-r));
		return r;
	}
	while (res.output_len && strchr("\r\n \t", res.output[res.output_len - 1]))
		res.output[--res.output_len] = '\0';
	if (res.status != 0) {
		snprintf(why, whylen, "%s --version: %s%s%.200s", bin,
			spawn_describe(&res, how, sizeof(how)), res.output_len ? ": " : "",
			res.output_len ? res.output : "");
		spawn_result_free(&res);
		return -EIO;
	}
	snprintf(ret, n, "%s", res.output ? res.output : "");
	spawn_result_free(&res);
	return 0;
}

/*
 * Walk the tree below dfd (consumed) without following links. fix = 0: 1 when every
 * entry is root's and nothing is writable by group or others or set-id, else 0 with the
 * first offender in why. fix = 1: make it so (the tree is root's fresh npm output in a
 * directory only root can enter). Negative errno on errors.
 */
static int tree_walk(int dfd, char *path, size_t cap, int fix, int depth, char *why, size_t n)
{
	size_t len = strlen(path);
	struct dirent *e;
	struct stat st;
	DIR *d;
	int r = 1;

	if (depth > 64) {
		close(dfd);
		snprintf(why, n, "%s: tree too deep", path);
		return -ELOOP;
	}
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while (r == 1 && (e = readdir(d)) != NULL) {
		int bad_owner, bad_mode;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (snprintf(path + len, cap - len, "/%s", e->d_name) >= (int)(cap - len)) {
			r = -ENAMETOOLONG;
			break;
		}
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			snprintf(why, n, "%s: %s", path, strerror(errno));
			break;
		}
		bad_owner = st.st_uid != 0 || (fix && st.st_gid != 0);
		bad_mode = !S_ISLNK(st.st_mode) && (st.st_mode & (022 | S_ISUID | S_ISGID));
		if (!fix && (bad_owner || bad_mode)) {
			snprintf(why, n, "%s: %s (mode %04o)", path,
				bad_owner		   ? "not owned by root"
					: st.st_mode & 022 ? "writable by group or others"
							   : "setuid or setgid",
				(unsigned)st.st_mode & 07777);
			r = 0;
			break;
		}
		if (fix && bad_owner &&
			fchownat(dirfd(d), e->d_name, 0, 0, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			snprintf(why, n, "chown %s: %s", path, strerror(errno));
			break;
		}
		if (fix && bad_mode &&
			fchmodat(dirfd(d), e->d_name, st.st_mode & 0755 & ~022, 0) < 0) {
			r = -errno;
			snprintf(why, n, "chmod %s: %s", path, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
				O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (sub < 0) {
				r = -errno;
				snprintf(why, n, "%s: %s", path, strerror(errno));
				break;
			}
			r = tree_walk(sub, path, cap, fix, depth + 1, why, n);
		}
		path[len] = '\0';
	}
	path[len] = '\0';
	closedir(d);
	return r;
}

static int tree_check(const char *dir, int fix, char *why, size_t n)
{
	char path[PATH_MAX];
	int dfd;

	snprintf(path, sizeof(path), "%s", dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		snprintf(why, n, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	return tree_walk(dfd, path, sizeof(path), fix, 0, why, n);
}

/* "version" of the opencode-ai package.json under prefix. */
static int package_version(const char *prefix, char *ret, size_t n)
{
	char path[PATH_MAX], *data = NULL, *s;
	size_t len;
	int r;

	if (snprintf(path, sizeof(path), "%s/node_modules/opencode-ai/package.json", prefix) >=
		(int)sizeof(path))
		return -ENAMETOOLONG;
	r = fo_read(path, 1 << 20, &data, NULL);
	if (r < 0)
		return r;
	s = strstr(data, "\"version\"");
	r = -EINVAL;
	if (s) {
		s += strlen("\"version\"");
		s += strspn(s, " \t\r\n");
		if (*s == ':') {
			s++;
			s += strspn(s, " \t\r\n");
		}
		if (*s == '"') {
			len = strcspn(++s, "\"\n");
			snprintf(ret, n, "%.*s", (int)len, s);
			r = 0;
		}
	}
	free(data);
	return r;
}

/*
 * 1 when prefix holds `version`, root's from / down and runnable; 0 with the reason in
 * why when it must be (re)installed.
 */
static int installed(const char *prefix, const char *version, const struct ocpin_manifest *tree,
	char *why, size_t n)
{
	char bin[PATH_MAX], err[1024], got[64];
	int dfd, r;

	if (snprintf(bin, sizeof(bin), "%s/%s", prefix, OCSB_OPENCODE_BIN_REL) >= (int)sizeof(bin))
		return -ENAMETOOLONG;
	r = opencode_bin_check(bin, err, sizeof(err));
	if (r == -ENOENT) {
		snprintf(why, n, "not installed");
		return 0;
	}
	if (r < 0) {
		snprintf(why, n, "%s", err);
		return 0;
	}
	/* A tree anyone else could have written into is not trusted, whatever it says. */
	r = tree_check(prefix, 0, err, sizeof(err));
	if (r <= 0) {
		snprintf(why, n, "%s", err);
		return 0;
	}
	/* Exactly the pinned tree, byte for byte: anything else is reinstalled. */
	dfd = open(prefix, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = dfd < 0 ? -errno : ocpin_take(dfd, -1, tree, err, sizeof(err));
	if (dfd >= 0)
		close(dfd);
	if (r <= 0) {
		snprintf(why, n, "not the pinned tree: %.900s",
			r < 0 && dfd < 0 ? strerror(-r) : err);
		return 0;
	}
	if (package_version(prefix, got, sizeof(got)) < 0) {
		snprintf(why, n, "no readable node_modules/opencode-ai/package.json");
		return 0;
	}
	if (strcmp(got, version) != 0) {
		snprintf(why, n, "%s is installed", got);
		return 0;
	}
	if (run_version(bin, got, sizeof(got), err, sizeof(err)) < 0) {
		snprintf(why, n, "%s", err);
		return 0;
	}
	if (strcmp(got, version) != 0) {
		snprintf(why, n, "%.400s --version says '%.32s'", bin, got);
		return 0;
	}
	return 1;
}

/* npm and the node it runs under, looked up in a fixed PATH and checked like OpenCode. */
static int find_tool(const char *name, char *ret, size_t n)
{
	/* OCSB_USER_PATH's directories: the install prefix's bin only when it is not /usr. */
	static const char *const dirs[] = {OCSB_PREFIX "/bin", "/usr/bin", "/bin"};
	char err[1024];
	struct stat st;

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(ret, n, "%s/%s", dirs[i], name);
		/* stat, not lstat: a dangling link (npm removed) counts as missing. */
		if (stat(ret, &st) < 0)
			continue;
		if (opencode_path_check(ret, err, sizeof(err)) < 0) {
			log_err("%s: refusing to run it as root: %s", name, err);
			return -EPERM;
		}
		return 0;
	}
	log_err("%s not found (looked in " TOOL_PATH "): install Node.js "
		"and npm first (Debian/Ubuntu: sudo apt-get install nodejs npm)",
		name);
	return -ENOENT;
}

/* "/opt/ocsb/opencode" -> "/opt/ocsb" and ".opencode.install.", the staging names. */
static void split_prefix(const char *prefix, char *parent, size_t n, char *stem, size_t sn)
{
	const char *base = path_base(prefix);

	snprintf(parent, n, "%.*s", (int)(base - prefix - 1), prefix);
	if (!parent[0])
		snprintf(parent, n, "/");
	snprintf(stem, sn, ".%s.install.", base);
}

/* Leftovers of a run killed mid-install (two copies of OpenCode: ~400 MB). */
static void remove_stale(const char *prefix)
{
	char path[PATH_MAX], parent[PATH_MAX], stem[NAME_MAX];
	struct dirent *e;
	DIR *d;

	split_prefix(prefix, parent, sizeof(parent), stem, sizeof(stem));
	d = opendir(parent);
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, stem, strlen(stem)) != 0)
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", parent, e->d_name) >= (int)sizeof(path))
			continue;
		if (fo_rmtree(path) < 0)
			log_warn("%s: cannot remove this leftover of an interrupted install", path);
	}
	closedir(d);
}

static void pins_free(struct pins *p)
{
	free(p->package);
	free(p->lock);
	ocpin_free(&p->tree);
}

#ifdef OCSB_TEST_BUILD
/*
 * Test hook (a test build, OCSB_TEST_HOOKS=1, and only with OCSB_OPENCODE_PREFIX): the pins
 * in the root-owned directory OCSB_OPENCODE_PINS instead of the compiled-in ones. 1 when
 * they were read into p and *manifest (the caller frees them), 0 when the hook is off.
 */
static int pins_hook(struct pins *p, char **manifest)
{
	const char *dir = TESTHOOK_ENV("OCSB_OPENCODE_PINS");
	const char *prefix = getenv("OCSB_OPENCODE_PREFIX");
	char why[1024], path[PATH_MAX];

	if (!dir || !*dir)
		return 0;
	/* Never for the real prefix: there only the repository's pins count. */
	if (!prefix || !*prefix) {
		log_err("OCSB_OPENCODE_PINS is a test hook: set OCSB_OPENCODE_PREFIX too");
		return -EINVAL;
	}
	if (opencode_dir_check(dir, why, sizeof(why)) < 0) {
		log_err("OCSB_OPENCODE_PINS: %s", why);
		return -EPERM;
	}
	if (path_join(path, sizeof(path), dir, "package.json") < 0 ||
		fo_read(path, 1 << 16, &p->package, NULL) < 0 ||
		path_join(path, sizeof(path), dir, "package-lock.json") < 0 ||
		fo_read(path, 1 << 20, &p->lock, NULL) < 0 ||
		path_join(path, sizeof(path), dir, "manifest-linux-x64.txt") < 0 ||
		fo_read(path, 1 << 22, manifest, NULL) < 0) {
		log_err("OCSB_OPENCODE_PINS: cannot read %s", path);
		return -EIO;
	}
	return 1;
}
#else
static int pins_hook(struct pins *p, char **manifest)
{
	return 0;
}
#endif

/*
 * The pins compiled in (or a test build's hook's, pins_hook). They must pin `version`: the
 * lockfile is the one tree this build can install.
 */
static int pins_load(const char *version, struct pins *ret)
{
	char want[96], why[1024], *manifest = NULL;
	struct pins p = {0};
	int r = -1, h;

	h = pins_hook(&p, &manifest);
	if (h < 0) {
		r = h;
		goto out;
	}
	if (h == 0) {
#if !defined(__x86_64__)
		log_err("OpenCode is pinned for linux x64 only (conf/opencode/): install it by "
			"hand and set opencode-bin");
		return -ENOTSUP;
#endif
		p.package = strdup(oc_pin_package);
		p.lock = strdup(oc_pin_lock);
		manifest = strdup(oc_pin_manifest);
		if (!p.package || !p.lock || !manifest)
			goto out;
	}
	snprintf(want, sizeof(want), "\"opencode-ai\": \"%s\"", version);
	if (!strstr(p.package, want)) {
		log_err("opencode-ai %s is not the version this build pins (conf/opencode/"
			"package.json): to change it, set OCSB_OPENCODE_VERSION, run "
			"tools/opencode-lock.sh and rebuild",
			version);
		goto out;
	}
	if (ocpin_parse(manifest, &p.tree, why, sizeof(why)) < 0) {
		log_err("the pinned OpenCode manifest: %s", why);
		goto out;
	}
	*ret = p;
	p = (struct pins){0};
	r = 0;
out:
	free(manifest);
	pins_free(&p);
	return r;
}

/* The uid and gid npm runs as, creating the account the first time. */
static int npm_account(uid_t *ret_uid, gid_t *ret_gid)
{
	return prov_system_account(NPM_USER, NPM_GECOS, 1, ret_uid, ret_gid);
}

/* Runs as the npm account: whatever npm left running (it has a session of its own). */
static int child_kill_all(void *arg, int outfd)
{
	(void)arg;
	(void)outfd;
	/* -1 as a non-root uid: every process of that uid but this one. */
	return kill(-1, SIGKILL) < 0 && errno != ESRCH ? 1 : 0;
}

static int npm_reap(uid_t uid, gid_t gid)
{
	struct spawn_opts o = {.drop = 1, .uid = uid, .gid = gid, .timeout_ms = 10000};
	struct spawn_result res = {0};
	int r = spawn_fn(child_kill_all, NULL, &o, &res);

	if (r == 0 && res.status != 0)
		r = -EIO;
	spawn_result_free(&res);
	if (r < 0)
		log_err("cannot stop what npm (%s) left running: %s", NPM_USER, strerror(-r));
	return r;
}

/*
 * `npm ci` of the pinned lockfile as the npm account, in stage/npm (its own, holding
 * root's package.json and lockfile) with HOME, TMPDIR and the cache in stage/home.
 */
static int run_npm(const char *npm, const char *stage, const struct pins *pins, uid_t uid,
	gid_t gid, const char *keep_log)
{
	char home[PATH_MAX], work[PATH_MAX], env_home[PATH_MAX + 8], env_tmp[PATH_MAX + 8];
	char env_cache[PATH_MAX + 24], how[64], path[PATH_MAX];
	/* Nothing of the caller's environment: npm's settings come from root's files only. */
	char *const env[] = {env_home, env_tmp, env_cache, "PATH=" TOOL_PATH, "LC_ALL=C",
		"npm_config_update_notifier=false", NULL};
	/*
	 * ci: exactly the lockfile, each package checked against its sha512, or nothing.
	 * --ignore-scripts: opencode-ai's postinstall only picks a platform binary, and we
	 * run the platform package's binary directly. No --prefix: it also moves npm's
	 * global config to <prefix>/etc/npmrc, so the machine's (CA file, proxy, registry)
	 * would be ignored; npm installs into its working directory instead.
	 */
	const char *argv[] = {npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", NULL};
	struct spawn_opts o = {.drop = 1,
		.uid = uid,
		.gid = gid,
		.envp = env,
		.cwd = work,
		.capture = 1,
		.timeout_ms = NPM_TIMEOUT_MS,
		.max_output = 64 * 1024};
	struct spawn_result res = {0};
	int r;

	if (path_join(home, sizeof(home), stage, "home") < 0 ||
		path_join(work, sizeof(work), stage, "npm") < 0)
		return -ENAMETOOLONG;
	snprintf(env_home, sizeof(env_home), "HOME=%s", home);
	snprintf(env_tmp, sizeof(env_tmp), "TMPDIR=%s", home);
	snprintf(env_cache, sizeof(env_cache), "npm_config_cache=%s/.npm", home);
	/* Made and filled while root's (stage is root's, 0711), then handed over. */
	if (mkdir(home, 0700) < 0 || mkdir(work, 0700) < 0) {
		log_err("%s: %s", stage, strerror(errno));
		return -errno;
	}
	r = path_join(path, sizeof(path), work, "package.json") < 0
		? -ENAMETOOLONG
		: fo_write(path, pins->package, strlen(pins->package), 0644, 0, 0);
	if (r == 0)
		r = path_join(path, sizeof(path), work, "package-lock.json") < 0
			? -ENAMETOOLONG
			: fo_write(path, pins->lock, strlen(pins->lock), 0644, 0, 0);
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return r;
	}
	if (chown(home, uid, gid) < 0 || chown(work, uid, gid) < 0) {
		log_err("%s: chown: %s", stage, strerror(errno));
		return -errno;
	}
	r = spawn_run(argv, &o, &res);
	if (npm_reap(uid, gid) < 0 && r >= 0)
		r = -EIO;
	if (r < 0) {
		log_err("cannot run %s: %s", npm, strerror(-r));
		spawn_result_free(&res);
		return r;
	}
	if (res.status != 0) {
		log_output(LOG_LVL_ERR, res.output, "npm ci (as %s): %s", NPM_USER,
			spawn_describe(&res, how, sizeof(how)));
		if (path_join(path, sizeof(path), home, ".npm/_logs") == 0)
			npm_explain(res.output, path, keep_log);
		r = -EIO;
	}
	spawn_result_free(&res);
	return r;
}

/*
 * Root's copy of what npm staged in stage/npm, in stage/prefix: 0 when it is exactly
 * the pinned tree, else -1 with the first difference logged and nothing taken over.
 */
static int take_over(const char *stage, const char *staged, const struct pins *pins)
{
	char work[PATH_MAX], why[1024];
	int src = -1, dst = -1, r, ok = 0;

	if (path_join(work, sizeof(work), stage, "npm") < 0)
		return -1;
	src = open(work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0 || mkdir(staged, 0700) < 0 ||
		(dst = open(staged, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		log_err("%s: %s", src < 0 ? work : staged, strerror(errno));
		goto out;
	}
	r = ocpin_take(src, dst, &pins->tree, why, sizeof(why));
	/* 1 = exactly the pinned tree, 0 = not, < 0 = could not tell: only 1 goes on. */
	if (r == 0)
		log_err("refusing what npm installed in %s: %s. Nothing was installed. If "
			"OCSB_OPENCODE_VERSION changed, run tools/opencode-lock.sh and rebuild; "
			"otherwise the download or the staging directory was tampered with",
			work, why);
	else if (r < 0)
		log_err("copying %s: %s", work, why);
	else if (fchmod(dst, 0755) < 0)
		log_err("%s: %s", staged, strerror(errno));
	else
		ok = 1;
out:
	if (src >= 0)
		close(src);
	if (dst >= 0)
		close(dst);
	return ok ? 0 : -1;
}

/*
 * npm as its own account into a staging directory next to the prefix, root's copy of
 * it checked against the pinned manifest, then swapped in with one rename: agentd never
 * sees a half-written tree, and a failed or killed run leaves the previous install.
 */
static int install(const char *prefix, const char *version, const struct pins *pins)
{
	char parent[PATH_MAX], stem[NAME_MAX], stage[PATH_MAX], staged[PATH_MAX], bin[PATH_MAX];
	char err[1024], got[64], keep[PATH_MAX];
	const char *base = path_base(prefix);
	char npm[PATH_MAX], node[PATH_MAX];
	struct stat st;
	uid_t uid;
	gid_t gid;
	int dfd, r;

	if (find_tool("npm", npm, sizeof(npm)) < 0 || find_tool("node", node, sizeof(node)) < 0 ||
		npm_account(&uid, &gid) < 0)
		return -1;
	split_prefix(prefix, parent, sizeof(parent), stem, sizeof(stem));
	if (lstat(parent, &st) < 0 && errno == ENOENT) {
		dfd = fo_mkdir_p(AT_FDCWD, parent, 0755, 0, 0);
		if (dfd < 0) {
			log_err("%s: %s", parent, strerror(-dfd));
			return dfd;
		}
		close(dfd);
	}
	/* Root-owned from / down, or whoever owns a directory could swap the tree later. */
	if (opencode_dir_check(parent, err, sizeof(err)) < 0) {
		log_err("cannot install OpenCode below %s: %s", parent, err);
		return -EPERM;
	}
	/* Only root's links on the way (just checked): work on the real path from here. */
	if (!realpath(parent, stage)) {
		log_err("%s: %s", parent, strerror(errno));
		return -errno;
	}
	snprintf(parent, sizeof(parent), "%s", stage);
	if (snprintf(stage, sizeof(stage), "%s/%sXXXXXX", parent, stem) >= (int)sizeof(stage))
		return -ENAMETOOLONG;
	if (!mkdtemp(stage)) {
		log_err("%s: %s", stage, strerror(errno));
		return -errno;
	}
	r = -1;
	if (path_join(staged, sizeof(staged), stage, "prefix") < 0 ||
		path_join(bin, sizeof(bin), staged, OCSB_OPENCODE_BIN_REL) < 0)
		goto out;
	/* o+x only: npm reaches its directories, nobody's `--version` the binary. */
	if (chmod(stage, 0711) < 0) {
		log_err("%s: %s", stage, strerror(errno));
		goto out;
	}
	/* npm's log of a failed run outlives the stage: next to the prefix, root's. */
	if (snprintf(keep, sizeof(keep), "%s/%s-npm.log", parent, base) >= (int)sizeof(keep))
		goto out;
	if (run_npm(npm, stage, pins, uid, gid, keep) < 0 || take_over(stage, staged, pins) < 0)
		goto out;
	/* Root made every entry; this proves it stays so (no group/other write, no set-id). */
	if (tree_check(staged, 0, err, sizeof(err)) <= 0) {
		log_err("%s: %s", staged, err);
		goto out;
	}
	if (opencode_bin_check(bin, err, sizeof(err)) < 0) {
		log_err("npm installed opencode-ai@%s, but %s", version, err);
		goto out;
	}
	if (run_version(bin, got, sizeof(got), err, sizeof(err)) < 0) {
		log_err("the installed OpenCode does not run: %s", err);
		goto out;
	}
	if (strcmp(got, version) != 0) {
		log_err("npm installed opencode-ai@%s but the binary says it is '%.32s'", version,
			got);
		goto out;
	}
	dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		log_err("%s: %s", parent, strerror(errno));
		goto out;
	}
	/* The old tree (if any) lands in the stage and goes with it. */
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
		r = renameat2(AT_FDCWD, staged, dfd, base, RENAME_EXCHANGE);
	else
		r = renameat(AT_FDCWD, staged, dfd, base);
	if (r < 0)
		log_err("moving %s to %s: %s", staged, prefix, strerror(errno));
	else if (fsync(dfd) < 0)
		log_warn("%s: fsync: %s", parent, strerror(errno));
	/* A failed run's log is of no use once a run worked. */
	if (r == 0)
		unlinkat(dfd, path_base(keep), 0);
	close(dfd);
out:
	if (fo_rmtree(stage) < 0)
		log_warn("%s: cannot remove the installer's temporary directory", stage);
	return r < 0 ? -1 : 0;
}

int opencode_install(struct prov *p, const char *version)
{
	const char *prefix = getenv("OCSB_OPENCODE_PREFIX");
	struct pins pins = {0};
	char why[1024];
	int r, hook = prefix && *prefix;

	/* Test hook: install somewhere else (for trying the installer on a live machine). */
	if (!hook)
		prefix = OCSB_OPENCODE_PREFIX;
	else if (prefix[0] != '/' || strlen(prefix) > 512 || !strcmp(prefix, "/") ||
		prefix[strlen(prefix) - 1] == '/') {
		log_err("OCSB_OPENCODE_PREFIX '%s': give an absolute path without a trailing '/'",
			prefix);
		return -EINVAL;
	}
	if (pins_load(version, &pins) < 0)
		return -1;
	if (p->mode == PROV_APPLY)
		remove_stale(prefix);
	r = installed(prefix, version, &pins.tree, why, sizeof(why));
	if (r < 0) {
		log_err("%s: %s", prefix, strerror(-r));
		pins_free(&pins);
		return r;
	}
	if (r == 1) {
		pins_free(&pins);
		printf("OpenCode %s: %s/%s\n", version, prefix, OCSB_OPENCODE_BIN_REL);
		/* Installed before the marker existed (by hand, or an older ocsb): adopt it. */
		if (p->mode == PROV_APPLY && !hook && !marker_exists(p))
			return marker_write(p, version, prefix) < 0 ? -1 : 0;
		return 0;
	}
	if (!prov_change(p, "install OpenCode %s into %s with npm (%s)", version, prefix, why)) {
		pins_free(&pins);
		return 0;
	}
	r = install(prefix, version, &pins);
	pins_free(&pins);
	if (r < 0)
		return -1;
	/* A test install elsewhere must not make --check watch the real prefix. */
	if (!hook && marker_write(p, version, prefix) < 0)
		return -1;
	printf("OpenCode %s: %s/%s\n", version, prefix, OCSB_OPENCODE_BIN_REL);
	prov_done(p);
	return 0;
}

/*
 * The binary is watched only once OpenCode is part of the setup (opencode-bin set, or
 * --install-opencode used): machines that provision accounts without it stay quiet.
 */
int opencode_preflight(struct prov *p, int installing)
{
	int r;

	p->opencode_managed = p->cfg.opencode_bin_set || marker_exists(p);
	if (!p->opencode_managed || installing)
		return 0;
	r = opencode_bin_check(p->cfg.opencode_bin, p->opencode_err, sizeof(p->opencode_err));
	if (r == 0)
		return 0;
	p->opencode_bad = 1;
	if (p->mode == PROV_CHECK)
		return 0;
	log_err("opencode-bin: %s", p->opencode_err);
	return -EINVAL;
}

int opencode_ensure(struct prov *p, int installed_now)
{
	if (!p->opencode_managed)
		return 0;
	if (p->mode == PROV_CHECK) {
		if (p->opencode_bad)
			prov_change(p, "OpenCode binary unusable: %s", p->opencode_err);
		return 0;
	}
	/* Installed in this run: the configured binary must be usable now. */
	if (installed_now && p->mode == PROV_APPLY &&
		opencode_bin_check(p->cfg.opencode_bin, p->opencode_err, sizeof(p->opencode_err)) <
			0) {
		log_err("opencode-bin: %s", p->opencode_err);
		return -1;
	}
	return 0;
}
