/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "../../cli/cli.h"
#include "fileops.h"
#include "util.h"

/* What sshd -T prints for the agent after provisioning (keys in lower case, one a line). */
static const char good_sshd[] = "port 22\n"
				"usepam yes\n"
				"permituserenvironment no\n"
				"permituserrc no\n"
				"disableforwarding yes\n"
				"allowagentforwarding no\n"
				"allowtcpforwarding no\n"
				"x11forwarding no\n"
				"permittunnel no\n"
				"authorizedkeysfile /etc/ocsb/keys/ai-dev\n";

static void sshd_good_settings_pass(void **state)
{
	char bad[512];

	(void)state;
	assert_int_equal(doctor_sshd_verdict(good_sshd, "ai-dev", bad, sizeof(bad)), 0);
	assert_string_equal(bad, "");
}

static void sshd_each_weakening_is_named(void **state)
{
	static const char *const weak[][2] = {
		{"permituserrc no", "permituserrc yes"},
		{"disableforwarding yes", "disableforwarding no"},
		{"permituserenvironment no", "permituserenvironment yes"},
		{"permittunnel no", "permittunnel point-to-point"},
		{"authorizedkeysfile /etc/ocsb/keys/ai-dev",
			"authorizedkeysfile .ssh/authorized_keys"},
		{"x11forwarding no\n", ""},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(weak) / sizeof(weak[0]); i++) {
		char text[1024], bad[512], key[64], *at;

		snprintf(text, sizeof(text), "%s", good_sshd);
		at = strstr(text, weak[i][0]);
		assert_non_null(at);
		memmove(at + strlen(weak[i][1]), at + strlen(weak[i][0]),
			strlen(at + strlen(weak[i][0])) + 1);
		memcpy(at, weak[i][1], strlen(weak[i][1]));
		assert_int_equal(doctor_sshd_verdict(text, "ai-dev", bad, sizeof(bad)), 1);
		/* The key is named in the finding. */
		snprintf(key, sizeof(key), "%.*s", (int)strcspn(weak[i][0], " "), weak[i][0]);
		assert_non_null(strstr(bad, key));
	}
}

static void deny_listing_is_exact(void **state)
{
	(void)state;
	assert_true(doctor_listed("daemon\nai-dev\n", "ai-dev"));
	assert_true(doctor_listed("ai-dev", "ai-dev"));
	assert_false(doctor_listed("ai-dev2\nxai-dev\n", "ai-dev"));
	assert_false(doctor_listed(NULL, "ai-dev"));
}

static void sensitive_paths(void **state)
{
	static const char *const yes[] = {".ssh/id_ed25519", ".aws/credentials", ".netrc",
		".git-credentials", ".docker/config.json", ".kube/config", "code/shop/.env",
		".env.local", ".config/gh/hosts.yml", ".config/some/api_token"};
	static const char *const no[] = {".ssh/id_ed25519.pub", ".ssh/known_hosts", ".bashrc",
		".config/Code/settings.json", "code/shop/README.md", ".environment"};

	(void)state;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!doctor_sensitive(yes[i]))
			fail_msg("%s should count as a secret", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (doctor_sensitive(no[i]))
			fail_msg("%s should not count as a secret", no[i]);
}

/* doctor's --json strings: common/json.c, tested in test_json.c */
static void status_names(void **state)
{
	(void)state;
	assert_string_equal(doctor_status_name(0), "OK");
	assert_string_equal(doctor_status_name(1), "WARN");
	assert_string_equal(doctor_status_name(2), "FAIL");
}

static void abstract_sockets_need_ocsb_shell_and_abi_6(void **state)
{
	(void)state;
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, 6), 0);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, 7), 0);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, 5), 2);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 1, -1), 2);
	/* Not ocsb-shell, or one the agent could replace: the fix is provisioning. */
	assert_int_equal(doctor_shell_verdict("/bin/bash", 1, 6), 1);
	assert_int_equal(doctor_shell_verdict("/bin/ocsb-shell2", 1, 6), 1);
	assert_int_equal(doctor_shell_verdict("/usr/local/sbin/ocsb-shell", 0, 6), 1);
	assert_int_equal(doctor_shell_verdict(NULL, 1, 6), 1);
}

/* ---- --fix: never through a link the owner swaps in after the scan ---- */

static int mode_of(const char *rel)
{
	char path[PATH_MAX + 64];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", unit_dir, rel);
	return lstat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static void put_file(const char *rel, mode_t mode)
{
	char path[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", unit_dir, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

static void fix_mode_cases(void)
{
	char why[128], p[PATH_MAX + 64], q[PATH_MAX + 64];
	struct stat seen;
	int home;

	snprintf(p, sizeof(p), "%s/home", unit_dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof(p), "%s/home/.aws", unit_dir);
	assert_int_equal(mkdir(p, 0755), 0);
	home = open(unit_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(home >= 0);

	/* control: the file the scan saw is fixed */
	put_file("home/.aws/credentials", 0644);
	snprintf(p, sizeof(p), "%s/home/.aws/credentials", unit_dir);
	assert_int_equal(lstat(p, &seen), 0);
	assert_int_equal(doctor_fix_mode(home, "home/.aws/credentials", &seen, getuid(), why,
				 sizeof(why)),
		0);
	assert_int_equal(mode_of("home/.aws/credentials"), 0600);

	/* swapped for a link to another file after the scan: the target keeps its mode */
	put_file("home/.netrc", 0644);
	put_file("target", 0644);
	snprintf(p, sizeof(p), "%s/home/.netrc", unit_dir);
	assert_int_equal(lstat(p, &seen), 0);
	assert_int_equal(unlink(p), 0);
	snprintf(q, sizeof(q), "%s/target", unit_dir);
	assert_int_equal(symlink(q, p), 0);
	assert_int_equal(
		doctor_fix_mode(home, "home/.netrc", &seen, getuid(), why, sizeof(why)), -1);
	assert_int_equal(mode_of("target"), 0644);
	assert_non_null(strstr(why, "symbolic link"));

	/* replaced by another regular file (a hard link to a file elsewhere) */
	assert_int_equal(unlink(p), 0);
	assert_int_equal(link(q, p), 0);
	assert_int_equal(
		doctor_fix_mode(home, "home/.netrc", &seen, getuid(), why, sizeof(why)), -1);
	assert_int_equal(mode_of("target"), 0644);
	assert_non_null(strstr(why, "another file"));

	/* a directory on the way swapped for a link: not followed */
	put_file("home/.aws/config", 0644);
	snprintf(p, sizeof(p), "%s/home/.aws/config", unit_dir);
	assert_int_equal(lstat(p, &seen), 0);
	snprintf(p, sizeof(p), "%s/home/.aws", unit_dir);
	snprintf(q, sizeof(q), "%s/home/.aws-old", unit_dir);
	assert_int_equal(rename(p, q), 0);
	snprintf(q, sizeof(q), "%s/elsewhere", unit_dir);
	assert_int_equal(mkdir(q, 0755), 0);
	put_file("elsewhere/config", 0644);
	assert_int_equal(symlink(q, p), 0);
	assert_int_equal(
		doctor_fix_mode(home, "home/.aws/config", &seen, getuid(), why, sizeof(why)), -1);
	assert_int_equal(mode_of("elsewhere/config"), 0644);
	assert_int_equal(mode_of("home/.aws-old/config"), 0644);
	assert_non_null(strstr(why, "symbolic link"));

	/* not the owner's: left alone */
	put_file("home/.pgpass", 0644);
	snprintf(p, sizeof(p), "%s/home/.pgpass", unit_dir);
	assert_int_equal(lstat(p, &seen), 0);
	assert_int_equal(doctor_fix_mode(home, "home/.pgpass", &seen, getuid() + 1, why,
				 sizeof(why)),
		-1);
	assert_int_equal(mode_of("home/.pgpass"), 0644);
	assert_non_null(strstr(why, "not to the owner"));
	close(home);
}

static void fix_mode_never_through_a_link(void **state)
{
	fo_no_openat2 = 0;
	fix_mode_cases();
}

static void fix_mode_never_through_a_link_without_openat2(void **state)
{
	fo_no_openat2 = 1;
	fix_mode_cases();
	fo_no_openat2 = 0;
}

/*
 * `ocsb doctor` (root) compares the route ports agentd serves with its guard's (issue 25:
 * a SIGHUP rebuilt both tables without them while the injector went on serving, and a
 * check that read the routes from the guard alone found nothing wrong).
 */
static void routes_compared_with_the_guard(void **state)
{
	const unsigned two[] = {18400, 18401};
	char why[256];

	(void)state;
	assert_int_equal(doctor_routes_differ("18400 18401", two, 2, why, sizeof(why)), 0);
	assert_int_equal(doctor_routes_differ("none", two, 0, why, sizeof(why)), 0);
	/* Served, not in the table: the SIGHUP of issue 25. */
	assert_int_equal(doctor_routes_differ("18400 18401", two, 0, why, sizeof(why)), 1);
	assert_string_equal(why,
		"ocsb-agentd serves the route 127.0.0.1:18400 but its netlock has no rule for it "
		"(the injector answers a port the table does not name)");
	assert_int_equal(doctor_routes_differ("18400 18401", two, 1, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "127.0.0.1:18401 but"));
	/* In the table, not served. */
	assert_int_equal(doctor_routes_differ("18401", two, 2, why, sizeof(why)), 1);
	assert_string_equal(
		why, "the netlock opens the route 127.0.0.1:18400 that ocsb-agentd does not serve");
	assert_int_equal(doctor_routes_differ("none", two, 1, why, sizeof(why)), 1);
	/* Not a list of ports: never "the same". */
	assert_int_equal(doctor_routes_differ("18400,18401", two, 2, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "unreadable"));
	assert_int_equal(doctor_routes_differ("0", two, 0, why, sizeof(why)), 1);
	assert_int_equal(doctor_routes_differ("", two, 0, why, sizeof(why)), 0);
}

/* A status as ocsb-agentd sends it: "key=value" items, in order. */
static int verdict(const char *const *kv, char *detail, size_t n)
{
	struct strv k = {0}, v = {0};
	int r;

	for (size_t i = 0; kv[i]; i++) {
		const char *eq = strchr(kv[i], '=');
		char key[64];

		assert_non_null(eq);
		snprintf(key, sizeof(key), "%.*s", (int)(eq - kv[i]), kv[i]);
		assert_int_equal(strv_push(&k, key), 0);
		assert_int_equal(strv_push(&v, eq + 1), 0);
	}
	r = doctor_instances_verdict(&k, &v, detail, n);
	strv_free(&k);
	strv_free(&v);
	return r;
}

/* OpenCode's normal start is no FAIL (issue 28); a crash, or a start past its time, is. */
static void instances_starting_are_not_failing(void **state)
{
	static const char *const head[] = {"version=0.1.0", "agent=ai-dev", "uptime-s=400",
		"netlock=verified", "proxy=squid", "state=running", "pid=10", "uptime-s=399",
		"restarts=0"};
	const char *kv[32];
	char d[768];
	size_t h = sizeof(head) / sizeof(head[0]);

	(void)state;
	memcpy(kv, head, sizeof(head));
	/* starting for 12 s, no error yet */
	kv[h] = "instance=shop", kv[h + 1] = "state=starting", kv[h + 2] = "pid=11",
	kv[h + 3] = "uptime-s=12", kv[h + 4] = "restarts=0", kv[h + 5] = NULL;
	assert_int_equal(verdict(kv, d, sizeof(d)), 0);
	assert_string_equal(d, "0 of 1 instance running; starting: shop (12 s)");
	/* running */
	kv[h + 1] = "state=running";
	assert_int_equal(verdict(kv, d, sizeof(d)), 0);
	assert_string_equal(d, "1 of 1 instance running");
	/* past its start time: agentd names the error */
	kv[h + 1] = "state=starting", kv[h + 5] = "last-error=not answering 61 s after start",
	       kv[h + 6] = NULL;
	assert_int_equal(verdict(kv, d, sizeof(d)), 1);
	assert_string_equal(d,
		"0 of 1 instance running; not running: shop (starting: not "
		"answering 61 s after start)");
	/* restarting after a crash, beside one running */
	kv[h + 1] = "state=restarting", kv[h + 5] = "last-error=exited with status 1",
	       kv[h + 6] = "instance=web", kv[h + 7] = "state=running", kv[h + 8] = NULL;
	assert_int_equal(verdict(kv, d, sizeof(d)), 1);
	assert_string_equal(d,
		"1 of 2 instances running; not running: shop (restarting: exited with status 1)");
	/* no instance at all: nothing fails (the proxy's state is not an instance's) */
	kv[h] = NULL;
	assert_int_equal(verdict(kv, d, sizeof(d)), 0);
	assert_string_equal(d, "0 of 0 instances running");
}

/*
 * Doctor's sysctl fixes compose (issue 28): followed one after another, as a user pastes
 * them, every setting is kept, not only the last. Run by sh with sudo and sysctl replaced
 * by stand-ins and /etc/sysctl.d redirected to a scratch directory.
 */
static void sysctl_fixes_compose(void **state)
{
	static const char *const names[] = {"fs.protected_symlinks", "fs.protected_hardlinks",
		"fs.protected_fifos", "fs.protected_regular"};
	char dir[] = "/tmp/ocsb-test-sysctl.XXXXXX", script[4096], fix[300], *out = NULL;
	size_t used;
	FILE *p;

	(void)state;
	assert_non_null(mkdtemp(dir));
	used = (size_t)snprintf(script, sizeof(script),
		"sudo() { \"$@\"; }\nsysctl() { :; }\n"
		"tee() { case $1 in /etc/sysctl.d/*) command tee \"%s/${1#/etc/sysctl.d/}\" ;; "
		"*) exit 9 ;; esac; }\n",
		dir);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char want[128];

		assert_int_equal(doctor_sysctl_fix(fix, sizeof(fix), names[i], 1), 0);
		snprintf(want, sizeof(want),
			"sudo sysctl -w %s=1 && echo '%s = 1' | sudo tee /etc/sysctl.d/", names[i],
			names[i]);
		assert_memory_equal(fix, want, strlen(want));
		used += (size_t)snprintf(
			script + used, sizeof(script) - used, "%s >/dev/null\n", fix);
		assert_true(used < sizeof(script));
	}
	snprintf(script + used, sizeof(script) - used, "cat \"%s\"/*.conf | sort\nrm -rf \"%s\"\n",
		dir, dir);
	p = popen(script, "r");
	assert_non_null(p);
	{
		char buf[1024];
		size_t got = fread(buf, 1, sizeof(buf) - 1, p);

		buf[got] = 0;
		out = strdup(buf);
	}
	assert_int_equal(pclose(p), 0);
	assert_string_equal(out,
		"fs.protected_fifos = 1\n"
		"fs.protected_hardlinks = 1\n"
		"fs.protected_regular = 1\n"
		"fs.protected_symlinks = 1\n");
	free(out);
	/* Too small a buffer is refused, not cut. */
	assert_int_equal(doctor_sysctl_fix(fix, 40, names[0], 1), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sshd_good_settings_pass),
		cmocka_unit_test_setup_teardown(
			fix_mode_never_through_a_link, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(fix_mode_never_through_a_link_without_openat2,
			unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(sshd_each_weakening_is_named),
		cmocka_unit_test(deny_listing_is_exact),
		cmocka_unit_test(sensitive_paths),
		cmocka_unit_test(status_names),
		cmocka_unit_test(abstract_sockets_need_ocsb_shell_and_abi_6),
		cmocka_unit_test(routes_compared_with_the_guard),
		cmocka_unit_test(instances_starting_are_not_failing),
		cmocka_unit_test(sysctl_fixes_compose),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
