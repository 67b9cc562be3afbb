/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "../../secrets/secrets.h"
#include "sysblock.h"

static const struct sysblock_facts filtered_618 = {2, 6, 18, SYSBLOCK_CT_NSPAWN};
static const struct sysblock_facts bare_61 = {0, 6, 1, SYSBLOCK_CT_NONE};
static const struct sysblock_facts bare_510 = {0, 5, 10, SYSBLOCK_CT_NONE};

/* The three: nspawn's EPERM for keyctl, mlock and Landlock on 6.18. */
static void filter_is_not_the_kernel(void **state)
{
	(void)state;
	assert_int_equal(
		sysblock_classify(SYSBLOCK_KEYCTL, EPERM, &filtered_618), SYSBLOCK_SECCOMP);
	assert_int_equal(sysblock_classify(SYSBLOCK_MLOCK, EPERM, &filtered_618), SYSBLOCK_SECCOMP);
	assert_int_equal(
		sysblock_classify(SYSBLOCK_LANDLOCK, EPERM, &filtered_618), SYSBLOCK_SECCOMP);
	/* LXC answers ENOSYS ("errno 38"): a filter still, on a kernel that has the call. */
	assert_int_equal(
		sysblock_classify(SYSBLOCK_LANDLOCK, ENOSYS, &filtered_618), SYSBLOCK_SECCOMP);
	assert_int_equal(
		sysblock_classify(SYSBLOCK_KEYCTL, -ENOSYS, &filtered_618), SYSBLOCK_SECCOMP);
}

static void kernel_too_old(void **state)
{
	struct sysblock_facts filtered_510 = bare_510;

	(void)state;
	/* No filter, ENOSYS: the kernel. */
	assert_int_equal(sysblock_classify(SYSBLOCK_LANDLOCK, ENOSYS, &bare_61), SYSBLOCK_KERNEL);
	assert_int_equal(sysblock_classify(SYSBLOCK_LANDLOCK, ENOSYS, &bare_510), SYSBLOCK_KERNEL);
	/* A filter, but a kernel before Landlock (5.13): the kernel, not the filter. */
	filtered_510.seccomp = 2;
	assert_int_equal(
		sysblock_classify(SYSBLOCK_LANDLOCK, ENOSYS, &filtered_510), SYSBLOCK_KERNEL);
	/* ...and with EPERM the filter, whatever the kernel. */
	assert_int_equal(
		sysblock_classify(SYSBLOCK_LANDLOCK, EPERM, &filtered_510), SYSBLOCK_SECCOMP);
}

static void not_a_block(void **state)
{
	(void)state;
	/* mlock over RLIMIT_MEMLOCK (ENOMEM), or EPERM with a limit of 0 and no filter. */
	assert_int_equal(sysblock_classify(SYSBLOCK_MLOCK, ENOMEM, &filtered_618), SYSBLOCK_OTHER);
	assert_int_equal(sysblock_classify(SYSBLOCK_MLOCK, EPERM, &bare_61), SYSBLOCK_OTHER);
	assert_int_equal(sysblock_classify(SYSBLOCK_KEYCTL, EDQUOT, &filtered_618), SYSBLOCK_OTHER);
	assert_int_equal(sysblock_classify(SYSBLOCK_NCALLS, EPERM, &filtered_618), SYSBLOCK_OTHER);
	/* Landlock built in, not in lsm= at boot. */
	assert_int_equal(
		sysblock_classify(SYSBLOCK_LANDLOCK, EOPNOTSUPP, &bare_61), SYSBLOCK_LSM_OFF);
}

static void lines_name_call_and_setting(void **state)
{
	struct sysblock_facts f = filtered_618;
	char line[600];

	(void)state;
	assert_int_equal(
		sysblock_explain(line, sizeof(line), SYSBLOCK_KEYCTL, EPERM, &f), SYSBLOCK_SECCOMP);
	assert_non_null(strstr(line,
		"keyctl: Operation not permitted, refused by systemd-nspawn's "
		"seccomp filter"));
	assert_non_null(strstr(line, "--system-call-filter=@keyring"));
	assert_null(strchr(line, '\n'));
	f.ct = SYSBLOCK_CT_DOCKER;
	sysblock_explain(line, sizeof(line), SYSBLOCK_MLOCK, EPERM, &f);
	assert_non_null(strstr(line, "Docker's"));
	assert_non_null(strstr(line, "--security-opt seccomp=unconfined"));
	f.ct = SYSBLOCK_CT_LXC;
	sysblock_explain(line, sizeof(line), SYSBLOCK_KEYCTL, ENOSYS, &f);
	assert_non_null(strstr(line, "security.syscalls.deny"));
	/* No container found: every kind's setting. */
	f.ct = SYSBLOCK_CT_NONE;
	sysblock_explain(line, sizeof(line), SYSBLOCK_LANDLOCK, EPERM, &f);
	assert_non_null(strstr(line, "landlock_create_ruleset"));
	assert_non_null(strstr(line, "systemd-nspawn: --system-call-filter="));
	assert_non_null(strstr(line, "Docker, Podman"));
	assert_non_null(strstr(line, "Incus/LXD"));
	assert_int_equal(sysblock_explain(line, sizeof(line), SYSBLOCK_LANDLOCK, ENOSYS, &bare_510),
		SYSBLOCK_KERNEL);
	assert_string_equal(
		line, "landlock_create_ruleset: not in this kernel (5.10; it needs Linux 5.13)");
	assert_int_equal(
		sysblock_explain(line, sizeof(line), SYSBLOCK_MLOCK, ENOMEM, &f), SYSBLOCK_OTHER);
	assert_string_equal(line, "");
}

static void facts_parsed(void **state)
{
	(void)state;
	assert_int_equal(sysblock_parse_status("Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n"), 2);
	assert_int_equal(sysblock_parse_status("Name:\tx\nSeccomp:\t0\n"), 0);
	assert_int_equal(sysblock_parse_status("Name:\tx\nSeccomp_filters:\t1\n"), -1);
	assert_int_equal(sysblock_parse_status("Seccomp:\tx\n"), -1);
	assert_int_equal(sysblock_parse_status(NULL), -1);
	assert_int_equal(sysblock_ct_from_name("systemd-nspawn\n"), SYSBLOCK_CT_NSPAWN);
	assert_int_equal(sysblock_ct_from_name("docker"), SYSBLOCK_CT_DOCKER);
	assert_int_equal(sysblock_ct_from_name("podman\n"), SYSBLOCK_CT_PODMAN);
	assert_int_equal(sysblock_ct_from_name("lxc-libvirt"), SYSBLOCK_CT_LXC);
	assert_int_equal(sysblock_ct_from_name("incus"), SYSBLOCK_CT_LXC);
	assert_int_equal(sysblock_ct_from_name("wsl"), SYSBLOCK_CT_OTHER);
	assert_int_equal(sysblock_ct_from_name(""), SYSBLOCK_CT_NONE);
}

/*
 * A real filter, as a container applies it (EPERM for the three calls), in a child: the
 * facts see it and the probes report what it refuses. Positive control: the same probes
 * in the parent, where nothing filters (unless this runs in such a container itself).
 */
static void under_a_real_filter(void **state)
{
	struct sysblock_facts here;
	int st;
	pid_t pid;

	(void)state;
	sysblock_facts(&here);
	if (here.seccomp != 2) {
		assert_int_equal(
			sysblock_classify(SYSBLOCK_KEYCTL, sysblock_probe(SYSBLOCK_KEYCTL), &here),
			SYSBLOCK_OTHER);
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
		struct sysblock_facts f;
		int ok = ctx && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
			seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(keyctl), 0) == 0 &&
			seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(mlock), 0) == 0 &&
			seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
				SCMP_SYS(landlock_create_ruleset), 0) == 0 &&
			seccomp_load(ctx) == 0;

		if (!ok)
			_exit(10);
		sysblock_facts(&f);
		if (f.seccomp != 2)
			_exit(11);
		if (sysblock_classify(SYSBLOCK_KEYCTL, sysblock_probe(SYSBLOCK_KEYCTL), &f) !=
			SYSBLOCK_SECCOMP)
			_exit(12);
		if (sysblock_classify(SYSBLOCK_MLOCK, sysblock_probe(SYSBLOCK_MLOCK), &f) !=
			SYSBLOCK_SECCOMP)
			_exit(13);
		/* ocsb-agentd's and provisioning's locked memory for secrets says the same. */
		if (sodium_init() < 0 || secrets_alloc(32) != NULL ||
			!strstr(secrets_alloc_error(),
				"cannot lock 32 bytes of memory for secrets: "
				"mlock: Operation not permitted, refused by") ||
			strstr(secrets_alloc_error(), "RLIMIT_MEMLOCK"))
			_exit(15);
		if (f.kernel_major > 5 &&
			sysblock_classify(SYSBLOCK_LANDLOCK, sysblock_probe(SYSBLOCK_LANDLOCK),
				&f) != SYSBLOCK_SECCOMP)
			_exit(14);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(filter_is_not_the_kernel),
		cmocka_unit_test(kernel_too_old),
		cmocka_unit_test(not_a_block),
		cmocka_unit_test(lines_name_call_and_setting),
		cmocka_unit_test(facts_parsed),
		cmocka_unit_test(under_a_real_filter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
