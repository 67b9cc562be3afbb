/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "../../provision/provision.h"
#include "spawn.h"

/* edit(in, add): the result of harden_deny_edit for user "ai-dev", and whether it changed. */
static char *edit(const char *in, int add, int *ret_changed)
{
	struct buf b = {0};
	char *s;

	*ret_changed = harden_deny_edit(in, "ai-dev", add, &b);
	assert_true(*ret_changed >= 0);
	s = strdup(b.data ? b.data : "");
	buf_free(&b);
	return s;
}

static void deny_add_is_idempotent(void **state)
{
	int changed;
	char *a, *b;

	(void)state;
	a = edit(NULL, 1, &changed); /* no file yet: made, and marked as ocsb's */
	assert_int_equal(changed, 1);
	assert_string_equal(a,
		"# Made by ocsb-provision: removed with the last user it lists.\n"
		"ai-dev\n");
	b = edit(a, 1, &changed);
	assert_int_equal(changed, 0);
	assert_string_equal(b, a);
	free(b);
	/* Its last user removed, a file ocsb made goes (issue 28, item 8)... */
	b = edit(a, 0, &changed);
	assert_int_equal(changed, 2);
	assert_string_equal(b, "");
	free(b);
	/* ... unless someone added to it since. */
	b = edit("# Made by ocsb-provision: removed with the last user it lists.\nai-dev\nbob\n", 0,
		&changed);
	assert_int_equal(changed, 1);
	assert_string_equal(
		b, "# Made by ocsb-provision: removed with the last user it lists.\nbob\n");
	free(b);
	free(a);
	/* A file that was there before stays, emptied: at.deny's absence would deny everyone. */
	a = edit("ai-dev\n", 0, &changed);
	assert_int_equal(changed, 1);
	assert_string_equal(a, "");
	free(a);
	/* Other users are kept, in order; a file without a final newline gets one. */
	a = edit("daemon\nbob", 1, &changed);
	assert_int_equal(changed, 1);
	assert_string_equal(a, "daemon\nbob\nai-dev\n");
	free(a);
}

static void deny_match_is_exact(void **state)
{
	int changed;
	char *a;

	(void)state;
	/* A longer name or a prefix is another user. */
	a = edit("ai-dev2\nai-de\n", 1, &changed);
	assert_int_equal(changed, 1);
	assert_string_equal(a, "ai-dev2\nai-de\nai-dev\n");
	free(a);
	a = edit("ai-dev2\nai-dev\nbob\nai-dev\n", 0, &changed);
	assert_int_equal(changed, 1);
	assert_string_equal(a, "ai-dev2\nbob\n");
	free(a);
	a = edit("bob\n", 0, &changed);
	assert_int_equal(changed, 0);
	assert_string_equal(a, "bob\n");
	free(a);
}

static void limits_name_the_agent(void **state)
{
	struct buf b = {0};

	(void)state;
	assert_int_equal(harden_render_limits("ai-dev", &b), 0);
	assert_non_null(strstr(b.data, "\nai-dev hard core 0\n"));
	assert_non_null(strstr(b.data, "\nai-dev hard nproc "));
	/* Hard limits only: a soft one the agent could raise back is no limit. */
	assert_null(strstr(b.data, " soft "));
	buf_free(&b);
}

static const char debian_sshd[] = "@include common-auth\n"
				  "session    required     pam_loginuid.so\n"
				  "session    required     pam_limits.so\n"
				  "session    required     pam_env.so # [1]\n"
				  "@include common-password\n";

static void pam_line_after_limits_and_removed_exactly(void **state)
{
	struct buf a = {0}, b = {0}, c = {0};
	const char *limits, *ns, *env;

	(void)state;
	assert_int_equal(harden_pam_edit(debian_sshd, 1, &a), 1);
	limits = strstr(a.data, "pam_limits.so");
	ns = strstr(a.data, "pam_namespace.so mount_private");
	env = strstr(a.data, "pam_env.so");
	assert_non_null(ns);
	/* In the session stack, after pam_limits and before the rest of it. */
	assert_true(limits < ns && ns < env);
	assert_non_null(strstr(a.data, "\nsession    required     pam_namespace.so"));
	/* Idempotent; removal gives the original back, byte for byte. */
	assert_int_equal(harden_pam_edit(a.data, 1, &b), 0);
	assert_string_equal(b.data, a.data);
	assert_int_equal(harden_pam_edit(a.data, 0, &c), 1);
	assert_string_equal(c.data, debian_sshd);
	buf_free(&a);
	buf_free(&b);
	buf_free(&c);
	/* No pam_limits line: appended at the end. */
	assert_int_equal(harden_pam_edit("auth required pam_unix.so\n", 1, &a), 1);
	assert_non_null(strstr(a.data, "pam_unix.so\nsession    required     pam_namespace.so"));
	buf_free(&a);
}

/* The output grows (and moves) after the pam_limits line was seen: the insertion point
 * must survive that (it once was a pointer into the old buffer). */
static void pam_edit_long_file(void **state)
{
	struct buf in = {0}, out = {0}, back = {0};
	const char *ns;

	(void)state;
	assert_int_equal(buf_puts(&in, "session    required     pam_limits.so\n"), 0);
	for (int i = 0; i < 5000; i++)
		assert_int_equal(buf_printf(&in,
					 "# filler line %d of a long pam file, to make the "
					 "output buffer grow many times\n",
					 i),
			0);
	assert_int_equal(harden_pam_edit(in.data, 1, &out), 1);
	assert_int_equal(out.len,
		in.len +
			strlen("session    required     pam_namespace.so mount_private "
			       "# ocsb-provision: private /tmp, /proc and identity for "
			       "agent sessions") +
			1);
	ns = strstr(out.data, "pam_namespace.so");
	assert_non_null(ns);
	assert_true(ns < strstr(out.data, "# filler line 0 "));
	assert_int_equal(harden_pam_edit(out.data, 0, &back), 1);
	assert_string_equal(back.data, in.data);
	buf_free(&in);
	buf_free(&out);
	buf_free(&back);
}

static void namespace_entry_is_for_the_agent_only(void **state)
{
	struct buf b = {0};

	(void)state;
	assert_int_equal(harden_render_namespace("ai-dev", 0, &b), 0);
	/* "~user": polyinstantiation only for the listed user (namespace.conf(5)). */
	assert_non_null(strstr(b.data,
		"\n/tmp /tmp/ tmpfs:create=01777,root,root:mntopts=mode=1777,nosuid,nodev:"
		"iscript=ocsb-ai-dev.init ~ai-dev\n"));
	assert_non_null(strstr(b.data, "\n/dev/shm /dev/shm/ tmpfs:create=01777,root,root:"));
	/* Missing in a minimal container: made at login, root's, 1777 (octal: leading 0). */
	assert_non_null(strstr(b.data,
		"\n/run/lock /run/lock/ tmpfs:create=01777,root,root:mntopts=mode=1777,nosuid,"
		"nodev:noinit ~ai-dev\n"));
	assert_non_null(strstr(b.data, "\n/var/tmp /var/tmp/ tmpfs:"));
	assert_null(strstr(b.data, " ai-dev\n")); /* never an exclusion list */
	buf_free(&b);
	/* A polydir whose parent is missing is left out; /tmp never (it runs the init script). */
	assert_int_equal(harden_render_namespace("ai-dev", 0xf, &b), 0);
	assert_non_null(strstr(b.data, "\n/tmp /tmp/ tmpfs:"));
	assert_null(strstr(b.data, "/run/lock"));
	assert_null(strstr(b.data, "/dev/shm"));
	buf_free(&b);
}

static void init_script_is_valid_sh(void **state)
{
	const char *const argv[] = {"/bin/sh", "-n", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r = {0};
	struct buf b = {0};

	(void)state;
	assert_int_equal(harden_render_init("/var/lib/ocsb/identity/ai-dev",
				 "/run/ocsb/ai-dev/cgroups", "/etc/ocsb/ocsb.conf",
				 "/etc/systemd/system/user-1001.slice.d/ocsb.conf", 1001, &b),
		0);
	assert_non_null(strstr(b.data, "cg='/run/ocsb/ai-dev/cgroups'"));
	assert_non_null(strstr(b.data, "conf='/etc/ocsb/ocsb.conf'"));
	assert_non_null(strstr(b.data, "slice='/etc/systemd/system/user-1001.slice.d/ocsb.conf'"));
	assert_non_null(strstr(b.data, "uid=1001\n"));
	assert_non_null(strstr(b.data, "hidepid=invisible"));
	assert_non_null(strstr(b.data, "set -e\n"));
	o.input = b.data;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 0);
	spawn_result_free(&r);
	buf_free(&b);
}

/*
 * Issue 26: a listed cgroup that is missing is a refusal, not a skip, and what counts
 * is /proc/PID/cgroup after the write.
 */
static void init_script_fails_closed(void **state)
{
	struct buf b = {0};

	(void)state;
	assert_int_equal(harden_render_init("/i", "/run/ocsb/ai-dev/cgroups", "/etc/ocsb/ocsb.conf",
				 "/s", 1001, &b),
		0);
	assert_null(strstr(b.data, "[ ! -e \"$procs\" ] ||"));
	assert_non_null(strstr(b.data, "[ -e \"$procs\" ] || refuse"));
	assert_non_null(strstr(b.data, "in_cg \"$procs\" || refuse"));
	assert_non_null(strstr(b.data, "\"/proc/$PPID/cgroup\""));
	assert_non_null(strstr(b.data, "\nset -e\ntrap '[ $? -eq 0 ] || kill -9 $$' EXIT\n"));
	/* The end of the script: no list and limits configured is a refusal. */
	assert_non_null(strstr(b.data, "\nrefuse \"limits are configured in $conf"));
	buf_free(&b);
}

/* The script's head (up to its first line that acts) followed by tail: its status. */
static int head_then(const char *script, const char *tail)
{
	const char *const argv[] = {"/bin/sh", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r = {0};
	const char *z = strstr(script, "[ \"$1\" = /tmp ]");
	struct buf prog = {0};
	int st;

	assert_non_null(z);
	assert_int_equal(buf_printf(&prog, "%.*s%s", (int)(z - script), script, tail), 0);
	o.input = prog.data;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	st = r.status;
	spawn_result_free(&r);
	buf_free(&prog);
	return st;
}

/*
 * pam_namespace fails the session only for a script killed by a signal: an exit status
 * was ignored, so a failed step (set -e) or a refusal let the session in.
 */
static void init_script_failure_is_a_signal(void **state)
{
	struct buf b = {0};

	(void)state;
	assert_int_equal(harden_render_init("/i", "/c", "/f", "/s", 1001, &b), 0);
	assert_int_equal(head_then(b.data, "false\necho not reached\n"), 128 + 9);
	assert_int_equal(head_then(b.data, "exit 1\n"), 128 + 9);
	assert_int_equal(head_then(b.data, "echo x >/nonexistent/ocsb/f\n"), 128 + 9);
	/* Controls: a script that ends well, or exits 0 early, is not killed. */
	assert_int_equal(head_then(b.data, "true\n"), 0);
	assert_int_equal(head_then(b.data, "exit 0\n"), 0);
	buf_free(&b);
}

/* limits=LIMITS for CONF, from the script's own lines (between "limits=yes" and "n=0"). */
static void limits_read_as(const char *script, const char *conf_text, const char *want)
{
	const char *const argv[] = {"/bin/sh", NULL};
	struct spawn_opts o = {.capture = 1};
	struct spawn_result r = {0};
	const char *a = strstr(script, "\nlimits=yes\n"), *z = a ? strstr(a, "\nn=0\n") : NULL;
	char conf[] = "/tmp/test_harden_conf.XXXXXX";
	struct buf prog = {0};
	int fd = mkstemp(conf);

	assert_true(fd >= 0 && a && z);
	assert_int_equal(write(fd, conf_text, strlen(conf_text)), (ssize_t)strlen(conf_text));
	close(fd);
	assert_int_equal(buf_printf(&prog, "conf='%s'\n%.*secho \"$limits\"\n", conf,
				 (int)(z - a + 1), a),
		0);
	o.input = prog.data;
	assert_int_equal(spawn_run(argv, &o, &r), 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(r.output, want);
	spawn_result_free(&r);
	buf_free(&prog);
	unlink(conf);
}

/* Sessions without ocsb-agentd are let in only when all three limits are off. */
static void init_script_reads_limits_off_only_when_all_none(void **state)
{
	struct buf b = {0};

	(void)state;
	assert_int_equal(harden_render_init("/i", "/c", "/f", "/s", 1001, &b), 0);
	limits_read_as(b.data, "agent ai-dev\n", "yes\n"); /* the default: auto */
	limits_read_as(b.data, "limit-memory none\nlimit-tasks none\nlimit-cpu none\n", "no\n");
	limits_read_as(b.data,
		"  limit-memory none # off\n\tlimit-tasks\tnone\nlimit-cpu none  \n#limit-cpu 50\n",
		"no\n");
	limits_read_as(b.data, "limit-memory none\nlimit-tasks none\n", "yes\n");
	limits_read_as(b.data, "limit-memory 256M\nlimit-tasks none\nlimit-cpu none\n", "yes\n");
	/* Two lines are a configuration error; anything not plainly 'none' counts as on. */
	limits_read_as(b.data,
		"limit-memory none\nlimit-memory 1G\nlimit-tasks none\nlimit-cpu none\n", "yes\n");
	limits_read_as(b.data, "limit-memory none#x\nlimit-tasks none\nlimit-cpu none\n", "yes\n");
	limits_read_as(b.data, "limit-memory \"none\"\nlimit-tasks none\nlimit-cpu none\n", "yes\n");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deny_add_is_idempotent),
		cmocka_unit_test(deny_match_is_exact),
		cmocka_unit_test(limits_name_the_agent),
		cmocka_unit_test(pam_line_after_limits_and_removed_exactly),
		cmocka_unit_test(pam_edit_long_file),
		cmocka_unit_test(namespace_entry_is_for_the_agent_only),
		cmocka_unit_test(init_script_is_valid_sh),
		cmocka_unit_test(init_script_fails_closed),
		cmocka_unit_test(init_script_failure_is_a_signal),
		cmocka_unit_test(init_script_reads_limits_off_only_when_all_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
