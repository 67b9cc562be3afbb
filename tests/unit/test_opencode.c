/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "opencode.h"
#include "../../provision/provision.h"

/*
 * opencode_bin_check decides whether root (agentd) may start a binary as the agent.
 * The system's own programs are the positive controls: they must pass, so a failure
 * elsewhere is the rule at work and not a check that refuses everything.
 */

static void system_binary_passes(void **state)
{
	char err[1024] = "";

	/* On Debian /bin is a root-owned link to usr/bin and sh a link to dash. */
	if (opencode_bin_check("/bin/sh", err, sizeof(err)) != 0)
		fail_msg("/bin/sh refused: %s", err);
	if (opencode_bin_check("/usr/bin/../bin/./sh", err, sizeof(err)) != 0)
		fail_msg("/usr/bin/../bin/./sh refused: %s", err);
	if (opencode_path_check("/bin/sh", err, sizeof(err)) != 0)
		fail_msg("opencode_path_check /bin/sh: %s", err);
	if (opencode_dir_check("/usr/bin", err, sizeof(err)) != 0)
		fail_msg("opencode_dir_check /usr/bin: %s", err);
}

static int write_exec(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);

	if (fd < 0 || write(fd, "#!/bin/sh\n", 10) != 10 || fchmod(fd, 0755) < 0)
		return -1;
	return close(fd);
}

/* "P: ..." where P is `path` or one of its parents: the message names the culprit. */
static void assert_names_parent(const char *err, const char *path)
{
	const char *colon = strchr(err, ':');
	size_t n;

	assert_non_null(colon);
	n = (size_t)(colon - err);
	if (n == 0 || strncmp(err, path, n) != 0 || (path[n] != '/' && path[n] != '\0'))
		fail_msg("the message does not start with %s or one of its parents: %s", path, err);
}

/* The test user's own tree: whoever owns it could swap the binary, so it is refused. */
static void user_tree_refused(void **state)
{
	char dir[PATH_MAX], bin[PATH_MAX], link[PATH_MAX], err[1024] = "";

	if (geteuid() == 0)
		skip(); /* the tree would be root's; tests/run-unit.sh runs this as nobody */
	assert_true(snprintf(dir, sizeof(dir), "%s/bin", unit_dir) < (int)sizeof(dir));
	assert_true(snprintf(bin, sizeof(bin), "%s/opencode", dir) < (int)sizeof(bin));
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(write_exec(bin), 0);
	assert_int_equal(chmod(unit_dir, 0755), 0);

	assert_int_equal(opencode_bin_check(bin, err, sizeof(err)), -EPERM);
	if (!strstr(err, "not owned by root"))
		fail_msg("want 'not owned by root', got: %s", err);
	assert_names_parent(err, bin);
	/* The message says what to do, not only what is wrong. */
	assert_non_null(strstr(err, "root-owned location"));

	/* A link to a good binary is no better when the link itself is the user's. */
	assert_true(snprintf(link, sizeof(link), "%s/sh", dir) < (int)sizeof(link));
	assert_int_equal(symlink("/bin/sh", link), 0);
	err[0] = '\0';
	assert_int_equal(opencode_bin_check(link, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "not owned by root"));
}

static void missing_gives_install_hint(void **state)
{
	char err[1024] = "";

	assert_int_equal(
		opencode_bin_check("/usr/bin/ocsb-no-such-opencode", err, sizeof(err)), -ENOENT);
	assert_string_equal(err,
		"/usr/bin/ocsb-no-such-opencode: not found; run: sudo "
		"ocsb-provision --install-opencode");
	err[0] = '\0';
	assert_int_equal(
		opencode_bin_check(OCSB_OPENCODE_PREFIX "-no-such/x/opencode", err, sizeof(err)),
		-ENOENT);
	assert_non_null(strstr(err, "is missing); run: sudo ocsb-provision --install-opencode"));
	/* npm and node are not OpenCode: no OpenCode hint for them. */
	err[0] = '\0';
	assert_int_equal(
		opencode_path_check("/usr/bin/ocsb-no-such-npm", err, sizeof(err)), -ENOENT);
	assert_null(strstr(err, "install-opencode"));
}

static void bad_forms(void **state)
{
	char err[1024] = "";

	assert_int_equal(opencode_bin_check("opencode", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "'opencode' is not an absolute path");
	assert_int_equal(opencode_bin_check("/usr/bin", err, sizeof(err)), -EISDIR);
	assert_string_equal(err, "/usr/bin: is a directory, not a program");
	assert_int_equal(opencode_bin_check("/bin/sh/x", err, sizeof(err)), -ENOTDIR);
	assert_int_equal(opencode_dir_check("/bin/sh", err, sizeof(err)), -ENOTDIR);
}

static void root_file_rules(void **state)
{
	char err[1024] = "";
	struct stat st;

	/* Root's, but not a program the agent can run. */
	assert_int_equal(opencode_bin_check("/etc/passwd", err, sizeof(err)), -EPERM);
	assert_string_equal(err,
		"/etc/passwd: not executable by others (mode 0644), so the agent "
		"cannot run it; fix: sudo chmod 755 /etc/passwd");
	/* A setuid program would run with its owner's rights when the agent starts it. */
	if (stat("/usr/bin/passwd", &st) == 0 && st.st_uid == 0 && (st.st_mode & S_ISUID)) {
		assert_int_equal(opencode_bin_check("/usr/bin/passwd", err, sizeof(err)), -EPERM);
		assert_non_null(strstr(err, "setuid or setgid"));
	}
}

/* The readiness probe's verdict: on the status line, or on a full buffer. */
static void probe_answer(void **state)
{
	char full[256];

	(void)state;
	assert_int_equal(opencode_probe_answer("HTTP/1.1 200", 12, 256), 0);
	assert_int_equal(opencode_probe_answer("HTTP/1.1 200 OK\r\n", 17, 256), 1);
	assert_int_equal(opencode_probe_answer("HTTP/1.0 200 OK\r\n", 17, 256), 1);
	assert_int_equal(opencode_probe_answer("HTTP/1.1 401 No\r\n", 17, 256), -1);
	assert_int_equal(opencode_probe_answer("HTTP/1.1\n200 OK\r\n", 17, 256), -1);
	memset(full, 'x', sizeof(full));
	full[255] = '\0';
	assert_int_equal(opencode_probe_answer(full, 255, 256), -1);
}

/* A failed npm ci: the cause told from npm's own words, its log kept from the stage. */
static void npm_failure_causes(void **state)
{
	assert_int_equal(npm_cause("npm ERR! code SELF_SIGNED_CERT_IN_CHAIN\n"
				   "npm ERR! request to https://registry.npmjs.org/opencode-ai "
				   "failed, reason: self-signed certificate in certificate chain\n"),
		NPM_CAUSE_TLS);
	assert_int_equal(npm_cause("npm ERR! code UNABLE_TO_GET_ISSUER_CERT_LOCALLY\n"),
		NPM_CAUSE_TLS);
	assert_int_equal(npm_cause("npm ERR! code ENOTFOUND\nnpm ERR! network request to "
				   "https://registry.npmjs.org failed\n"),
		NPM_CAUSE_NET);
	assert_int_equal(npm_cause("npm ERR! code EINTEGRITY\n"), NPM_CAUSE_OTHER);
	assert_int_equal(npm_cause(""), NPM_CAUSE_OTHER);
	assert_int_equal(npm_cause(NULL), NPM_CAUSE_OTHER);
}

static void npm_log_kept(void **state)
{
	char logs[4096], keep[4096], data[16] = "";
	FILE *f;

	snprintf(logs, sizeof(logs), "%s", unit_path("logs"));
	snprintf(keep, sizeof(keep), "%s", unit_path("opencode-npm.log"));
	assert_int_equal(npm_keep_log(logs, keep), -ENOENT);
	assert_int_equal(mkdir(logs, 0700), 0);
	assert_int_equal(npm_keep_log(logs, keep), -ENOENT);
	unit_write(unit_path("logs/2026-12-06T10_00_00_000Z-debug-0.log"), "old\n", 4, 0600);
	unit_write(unit_path("logs/2026-12-06T11_00_00_000Z-debug-0.log"), "new\n", 4, 0600);
	unit_write(unit_path("logs/notes.txt"), "no\n", 3, 0600);
	assert_int_equal(npm_keep_log(logs, keep), 0);
	assert_non_null(f = fopen(keep, "re"));
	assert_int_equal(fread(data, 1, sizeof(data) - 1, f), 4);
	fclose(f);
	assert_string_equal(data, "new\n");
	/* npm's account wrote the directory: a link as the newest log is not followed. */
	assert_int_equal(symlink("/etc/passwd", unit_path("logs/2026-12-06T12_00_00_000Z-debug-0.log")), 0);
	assert_int_equal(npm_keep_log(logs, keep), -ELOOP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(system_binary_passes),
		cmocka_unit_test(probe_answer),
		cmocka_unit_test_setup_teardown(
			user_tree_refused, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(missing_gives_install_hint),
		cmocka_unit_test(bad_forms),
		cmocka_unit_test(root_file_rules),
		cmocka_unit_test(npm_failure_causes),
		cmocka_unit_test_setup_teardown(npm_log_kept, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
