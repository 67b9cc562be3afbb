/* SPDX-License-Identifier: MIT */
/*
 * A mistyped command or option gets one line with the nearest valid word, not a page of
 * usage (issue 28): `ocsb stauts`, `ocsb sync pul`, `ocsb-provision --ownr`.
 */
#define _GNU_SOURCE
#include "unit.h"

#include <getopt.h>

#include "args.h"
#include "log.h"

static const char *const commands[] = {"status", "web", "restart", "logs", "egress", "sync",
	"secrets", "usage", "mirror", "doctor", "help", NULL};

static void nearest_word(void **state)
{
	static const char *const subs[] = {"push", "pull", "status", "init", NULL};
	static const char *const opts[] = {"--owner", "--agent", "--project", "--purge", NULL};

	(void)state;
	/* a swap of neighbours is one edit */
	assert_string_equal(args_nearest("stauts", commands), "status");
	assert_string_equal(args_nearest("sycn", commands), "sync");
	assert_string_equal(args_nearest("secerts", commands), "secrets");
	/* a letter missing, one too many, one changed */
	assert_string_equal(args_nearest("pul", subs), "pull");
	assert_string_equal(args_nearest("pushh", subs), "push");
	assert_string_equal(args_nearest("--ownr", opts), "--owner");
	assert_string_equal(args_nearest("--projetc", opts), "--project");
	/* the start of exactly one word */
	assert_string_equal(args_nearest("doc", commands), "doctor");
	assert_string_equal(args_nearest("mir", commands), "mirror");
	/* the start of several, or nothing close: no guess */
	assert_null(args_nearest("s", commands));
	assert_string_equal(args_nearest("se", commands), "secrets");
	assert_null(args_nearest("pu", subs));
	assert_null(args_nearest("frobnicate", commands));
	assert_null(args_nearest("--xyz", opts));
	/* one letter: every other letter is as near */
	assert_null(args_nearest("-x", (const char *const[]){"-f", "-n", NULL}));
	assert_null(args_nearest("", commands));
	/* longer than the table holds: no guess, no overflow */
	assert_null(
		args_nearest("statusstatusstatusstatusstatusstatusstatusstatusstatusstatusstatus"
			     "status",
			commands));
}

static const struct option longopts[] = {
	{"owner", required_argument, NULL, 'o'},
	{"project", required_argument, NULL, 'p'},
	{"purge", no_argument, NULL, 'P'},
	{"dry-run", no_argument, NULL, 'd'},
	{"verbose", no_argument, NULL, 'v'},
	{NULL, 0, NULL, 0},
};

/* getopt_long over args as the programs call it; the one line it logs for the first error. */
static const char *bad(char **args)
{
	static char out[1024];
	char path[PATH_MAX + 16];
	int argc = 0, c, fd, saved, r = 0;
	ssize_t n;

	while (args[argc])
		argc++;
	snprintf(path, sizeof(path), "%s/err", unit_dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	assert_int_equal(dup2(fd, 2), 2);
	log_init("prog", LOG_TARGET_STDERR, 0);
	optind = 0; /* glibc: start over */
	opterr = 0;
	while (!r && (c = getopt_long(argc, args, ":v", longopts, NULL)) != -1)
		if (c == '?' || c == ':')
			r = args_getopt_error(c, args, longopts, "prog --help");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, out, sizeof(out) - 1, 0);
	close(fd);
	assert_true(n >= 0);
	out[n] = '\0';
	assert_int_equal(r, n > 0 ? 2 : 0);
	return out;
}

#define BAD(...) bad((char *[]){"prog", __VA_ARGS__, NULL})

static void one_line_per_bad_option(void **state)
{
	(void)state;
	assert_string_equal(BAD("--ownr", "alice"),
		"prog: error: unknown option '--ownr' (did you mean '--owner'?); see prog "
		"--help\n");
	assert_string_equal(BAD("--ownr=alice"),
		"prog: error: unknown option '--ownr' (did you mean '--owner'?); see prog "
		"--help\n");
	assert_string_equal(
		BAD("--frob"), "prog: error: unknown option '--frob'; see prog --help\n");
	assert_string_equal(BAD("-v", "--owner"),
		"prog: error: option '--owner' needs a value; see prog --help\n");
	assert_string_equal(BAD("--dry-run=yes"),
		"prog: error: option '--dry-run' takes no value; see prog --help\n");
	assert_string_equal(BAD("--p"),
		"prog: error: ambiguous option '--p' (--project, --purge); see prog --help\n");
	assert_string_equal(BAD("-x"), "prog: error: unknown option '-x'; see prog --help\n");
	/* a short one inside a group, after a long one: the letter is named, not the long one */
	assert_string_equal(
		BAD("--verbose", "-vx"), "prog: error: unknown option '-x'; see prog --help\n");
	/* positive control: good options, no line */
	assert_string_equal(BAD("--owner", "alice", "--pro=x", "-v"), "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nearest_word),
		cmocka_unit_test_setup_teardown(
			one_line_per_bad_option, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
