/* SPDX-License-Identifier: MIT */
/*
 * Privilege drop of spawn: needs root. tests/run-unit.sh runs binaries named test_priv*
 * as root (all others as nobody); without root the whole binary is one skip, with why.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <linux/securebits.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "unit.h"

#include "spawn.h"

#include "session.h"

static void drop_id(void **state)
{
	const char *argv[] = {"/usr/bin/id", "-u", NULL};
	const char *gargv[] = {"/usr/bin/id", "-G", NULL};
	struct spawn_opts o = {.capture = 1, .drop = 1, .uid = 65534, .gid = 65534};
	struct spawn_result r;

	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_string_equal(r.output, "65534\n");
	spawn_result_free(&r);
	/* No supplementary groups kept from root. */
	assert_int_equal(spawn_run(gargv, &o, &r), 0);
	assert_string_equal(r.output, "65534\n");
	spawn_result_free(&r);
}

static int fn_regain_root(void *arg, int outfd)
{
	uid_t ru, eu, su;

	getresuid(&ru, &eu, &su);
	dprintf(outfd, "uid %u %u %u nnp %d setuid %d seteuid %d", ru, eu, su,
		prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), setuid(0), seteuid(0));
	return 0;
}

static void drop_cannot_regain_root(void **state)
{
	struct spawn_opts o = {.drop = 1, .uid = 65534, .gid = 65534};
	struct spawn_result r;

	assert_int_equal(spawn_fn(fn_regain_root, NULL, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.output, "uid 65534 65534 65534 nnp 1 setuid -1 seteuid -1");
	spawn_result_free(&r);
}

/*
 * Issue 14: a child dropped to nobody shared the session of root's terminal: /dev/tty
 * opened (its controlling terminal, whatever the pty's owner) and TIOCSTI typed into
 * it, as root's inherited stderr did too.
 */
static int check_drop_session(void)
{
	struct spawn_opts o = {.drop = 1, .uid = 65534, .gid = 65534, .timeout_ms = 5000};

	return session_check_spawn(&o);
}

static void drop_own_session_no_terminal(void **state)
{
	session_in_child(check_drop_session, 10, "a dropped child and root's terminal");
}

/* stderr of a dropping child is never root's: here a file root opened. */
static int fn_stderr(void *arg, int outfd)
{
	struct stat st, mine;

	fstat(2, &st);
	dprintf(outfd, "%s", S_ISFIFO(st.st_mode) ? "fifo" : "other");
	/* The file root's stderr names is not reachable through fd 2. */
	if (fstat(2, &mine) == 0 && st.st_ino == *(ino_t *)arg)
		dprintf(outfd, " same");
	dprintf(2, "from the child \033]0;title\007\n");
	return 0;
}

static int check_drop_stderr(void)
{
	struct spawn_opts o = {.drop = 1, .uid = 65534, .gid = 65534, .timeout_ms = 5000};
	struct spawn_result r;
	FILE *f = tmpfile();
	char buf[256] = "";
	struct stat st;
	ino_t ino;

	session_diag = dup(2);
	if (!f || dup2(fileno(f), 2) < 0 || fstat(2, &st) < 0)
		session_fail(1, "no temp file");
	ino = st.st_ino;
	if (spawn_fn(fn_stderr, &ino, &o, &r) != 0 || r.status != 0)
		session_fail(2, "spawn_fn failed");
	if (strcmp(r.output, "fifo") != 0)
		session_fail(3, "the child's stderr: %s, not a pipe", r.output);
	spawn_result_free(&r);
	if (pread(2, buf, sizeof(buf) - 1, 0) <= 0 ||
		strcmp(buf, "from the child \\x1b]0;title\\x07\n") != 0)
		session_fail(4, "root's stderr got \"%s\"", buf);
	return 0;
}

static void drop_stderr_is_a_pipe(void **state)
{
	session_in_child(check_drop_stderr, 10, "stderr of a dropped child");
}

static int check_regain(void)
{
	const char *argv[] = {"/usr/bin/id", "-u", NULL};
	struct spawn_opts o = {.drop = 1, .uid = 65534, .gid = 65534, .timeout_ms = 5000};
	struct spawn_result r;
	FILE *f = tmpfile();
	char buf[1024] = "";
	int rc;

	session_diag = dup(2);
	if (!f || dup2(fileno(f), 2) < 0)
		session_fail(1, "no temp file");
	/*
	 * The fault: capabilities survive setresuid (SECBIT_NO_SETUID_FIXUP), as they would
	 * after PR_SET_KEEPCAPS or with a kernel that got it wrong.
	 */
	if (prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0) < 0)
		session_fail(2, "PR_SET_SECUREBITS: %s", strerror(errno));
	rc = spawn_run(argv, &o, &r);
	if (rc != -SPAWN_EREGAIN)
		session_fail(3, "spawn_run: %d (%s), expected -SPAWN_EREGAIN", rc, strerror(-rc));
	if (r.status != SPAWN_EXIT_REGAIN)
		session_fail(4, "exit status %d, expected %d", r.status, SPAWN_EXIT_REGAIN);
	rc = spawn_fn(fn_regain_root, NULL, &o, &r);
	if (rc != -SPAWN_EREGAIN)
		session_fail(5, "spawn_fn: %d (%s), expected -SPAWN_EREGAIN", rc, strerror(-rc));
	if (pread(2, buf, sizeof(buf) - 1, 0) <= 0 ||
		!strstr(buf,
			"ocsb: spawn: dropped to uid 65534 gid 65534, but setgid(0) still "
			"works: the drop is not permanent, not running\n") ||
		!strstr(buf,
			"/usr/bin/id: the child dropped to uid 65534 gid 65534 could take back"))
		session_fail(6, "stderr: %s", buf);
	/* Control: without the fault the same child runs. */
	if (prctl(PR_SET_SECUREBITS, 0, 0, 0, 0) < 0)
		session_fail(7, "PR_SET_SECUREBITS 0: %s", strerror(errno));
	o.capture = 1;
	if (spawn_run(argv, &o, &r) != 0 || strcmp(r.output, "65534\n") != 0)
		session_fail(8, "control: the child did not run as 65534");
	spawn_result_free(&r);
	return 0;
}

static void drop_regain_detected(void **state)
{
	session_in_child(check_regain, 10, "a drop that does not hold");
}

/*
 * The groups come from getgrouplist() before the fork, as initgroups() would set them:
 * a user that some group of this machine lists as a member gets that group.
 */
static void drop_groups_of_user(void **state)
{
	const char *argv[] = {"/usr/bin/id", "-G", NULL};
	struct spawn_opts o = {.capture = 1, .drop = 1, .uid = 65534, .gid = 65534};
	struct spawn_result r;
	struct group *g;
	char member[64] = "", want[32];
	gid_t gid = 0;

	setgrent();
	while ((g = getgrent()))
		if (g->gr_gid != 65534 && g->gr_mem[0] && getpwnam(g->gr_mem[0]) &&
			strlen(g->gr_mem[0]) < sizeof(member)) {
			snprintf(member, sizeof(member), "%s", g->gr_mem[0]);
			gid = g->gr_gid;
			break;
		}
	endgrent();
	if (!member[0])
		skip(); /* no group with members here */
	o.user = member;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 0);
	snprintf(want, sizeof(want), " %u", (unsigned)gid);
	if (!strstr(r.output, want) && strncmp(r.output, want + 1, strlen(want + 1)) != 0)
		fail_msg("%s's groups as nobody: %s, without %u", member, r.output, (unsigned)gid);
	assert_non_null(strstr(r.output, "65534"));
	spawn_result_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(drop_id),
		cmocka_unit_test(drop_cannot_regain_root),
		cmocka_unit_test(drop_own_session_no_terminal),
		cmocka_unit_test(drop_stderr_is_a_pipe),
		cmocka_unit_test(drop_regain_detected),
		cmocka_unit_test(drop_groups_of_user),
	};

	if (geteuid() != 0) {
		printf("1..1\nok 1 - privilege drop # SKIP needs root (sudo make test-unit)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
