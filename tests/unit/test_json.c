/* SPDX-License-Identifier: MIT */
/*
 * The one JSON string writer: whatever bytes a name holds (the agent chose them), the
 * result is one valid JSON string, and nothing a terminal acts on survives decoding raw.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "json.h"

static const char *js(const char *in)
{
	static char out[1024];
	struct buf b = {0};

	assert_int_equal(json_buf_str(&b, in), 0);
	snprintf(out, sizeof(out), "%s", b.data);
	buf_free(&b);
	return out;
}

static void plain_and_utf8_unchanged(void **state)
{
	(void)state;
	assert_string_equal(js(""), "\"\"");
	assert_string_equal(js("feature/x-1 ok"), "\"feature/x-1 ok\"");
	assert_string_equal(js("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82"),
		"\"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82\"");
}

static void quotes_and_backslash(void **state)
{
	(void)state;
	assert_string_equal(js("a\"b\\c"), "\"a\\\"b\\\\c\"");
	/* a literal backslash-x cannot pass for an escaped byte */
	assert_string_equal(js("\\x1b"), "\"\\\\x1b\"");
}

static void control_characters(void **state)
{
	(void)state;
	/* what doctor's --json always wrote: C0 as \u00XX */
	assert_string_equal(js("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\u000ad\\u0001\"");
	assert_string_equal(js("\033[31m\t\r"), "\"\\u001b[31m\\u0009\\u000d\"");
	assert_string_equal(js("del\x7f"), "\"del\\u007f\"");
	/* C1 CSI in UTF-8, a bidi override, a zero-width space */
	assert_string_equal(js("\xc2\x9b"
			       "2J"),
		"\"\\u009b2J\"");
	assert_string_equal(js("txt\xe2\x80\xaegpj.exe"), "\"txt\\u202egpj.exe\"");
	assert_string_equal(js("a\xe2\x80\x8b"
			       "b"),
		"\"a\\u200bb\"");
}

static void invalid_utf8_spelled_out(void **state)
{
	(void)state;
	/* a stray continuation byte, a truncated sequence, an overlong '/', a surrogate */
	assert_string_equal(js("a\x80z"), "\"a\\\\x80z\"");
	assert_string_equal(js("end\xe2\x82"), "\"end\\\\xe2\\\\x82\"");
	assert_string_equal(js("\xc0\xaf"), "\"\\\\xc0\\\\xaf\"");
	assert_string_equal(js("\xed\xa0\x80"), "\"\\\\xed\\\\xa0\\\\x80\"");
	/* positive control: the same code points, well formed, stay as they are */
	assert_string_equal(js("\xc2\xa9/\xe2\x82\xac"), "\"\xc2\xa9/\xe2\x82\xac\"");
}

static void file_writer_matches(void **state)
{
	char *mem = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&mem, &len);

	(void)state;
	assert_non_null(f);
	json_fput_str(f, "q\"\n\xff");
	fclose(f);
	assert_string_equal(mem, js("q\"\n\xff"));
	assert_string_equal(mem, "\"q\\\"\\u000a\\\\xff\"");
	free(mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_and_utf8_unchanged),
		cmocka_unit_test(quotes_and_backslash),
		cmocka_unit_test(control_characters),
		cmocka_unit_test(invalid_utf8_spelled_out),
		cmocka_unit_test(file_writer_matches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
