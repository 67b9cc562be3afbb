/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "../../provision/provision.h"

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
	a = edit(NULL, 1, &changed); /* no file yet */
	assert_int_equal(changed, 1);
	assert_string_equal(a, "ai-dev\n");
	b = edit(a, 1, &changed);
	assert_int_equal(changed, 0);
	assert_string_equal(b, a);
	free(a);
	free(b);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deny_add_is_idempotent),
		cmocka_unit_test(deny_match_is_exact),
		cmocka_unit_test(limits_name_the_agent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
