/* SPDX-License-Identifier: MIT */
/*
 * Logging: text from outside (the agent's names, git output, errors) reaches root's log and
 * terminal with every control byte escaped, and the escaped form reads one way only.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "log.h"

static const char *vis(const char *in, size_t len)
{
	static char out[512];

	log_vis(in, len, out, sizeof(out));
	return out;
}

#define VIS(s) vis(s, sizeof(s) - 1)

static void escape_table(void **state)
{
	(void)state;
	/* plain text and valid UTF-8 unchanged */
	assert_string_equal(VIS("main feature/x-1"), "main feature/x-1");
	assert_string_equal(VIS("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82"),
		"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82");
	/* C0 controls: ESC, BEL, backspace, NUL, vertical tab */
	assert_string_equal(VIS("a\033[31mred"), "a\\x1b[31mred");
	assert_string_equal(VIS("ring\a"), "ring\\x07");
	assert_string_equal(VIS("x\by"), "x\\x08y");
	assert_string_equal(VIS("nul\0x"), "nul\\x00x");
	assert_string_equal(VIS("\v"), "\\x0b");
	assert_string_equal(VIS("del\x7f"), "del\\x7f");
	/* line structure: no forged lines, one unambiguous escape each */
	assert_string_equal(VIS("one\ntwo\rthree\tfour"), "one\\ntwo\\rthree\\tfour");
	/* the backslash itself: a literal "\x1b" cannot pass for an escaped ESC */
	assert_string_equal(VIS("a\\x1b"), "a\\\\x1b");
	assert_string_equal(VIS("\\"), "\\\\");
	/* C1 controls in their UTF-8 form: CSI U+009B, OSC U+009D, U+0080 */
	assert_string_equal(VIS("\xc2\x9b" "31m"), "\\xc2\\x9b31m");
	assert_string_equal(VIS("\xc2\x9d" "0;t\xc2\x9c"), "\\xc2\\x9d0;t\\xc2\\x9c");
	assert_string_equal(VIS("\xc2\x80"), "\\xc2\\x80");
	/* U+00A0 and above are text */
	assert_string_equal(VIS("\xc2\xa0"), "\xc2\xa0");
	/* invalid UTF-8: a raw 8-bit CSI, a lone continuation, overlong, truncated, surrogate */
	assert_string_equal(VIS("\x9b" "31m"), "\\x9b31m");
	assert_string_equal(VIS("\x80"), "\\x80");
	assert_string_equal(VIS("\xc0\xaf"), "\\xc0\\xaf");
	assert_string_equal(VIS("ab\xe2\x80"), "ab\\xe2\\x80");
	assert_string_equal(VIS("\xed\xa0\x80"), "\\xed\\xa0\\x80");
	assert_string_equal(VIS("\xff\xfe"), "\\xff\\xfe");
	/* bidi override and zero-width space: text that reads as something else */
	assert_string_equal(VIS("evil\xe2\x80\xaetxt"), "evil\\xe2\\x80\\xaetxt");
	assert_string_equal(VIS("a\xe2\x80\x8b" "b"), "a\\xe2\\x80\\x8bb");
}

static void escape_truncates_whole_units(void **state)
{
	char out[8];

	(void)state;
	/* "ab" fits, "\x1b" (4 bytes) would not fit with the NUL: stop before it */
	assert_int_equal(log_vis("ab\033cd", 5, out, 6), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(log_vis("\033", 1, out, sizeof(out)), 4);
	assert_string_equal(out, "\\x1b");
	assert_int_equal(log_vis("x", 1, out, 1), 0);
	assert_string_equal(out, "");
}

/* The whole path: a log_* line on stderr carries no raw control byte. */
static void log_line_escaped(void **state)
{
	char path[PATH_MAX + 16], buf[1024];
	int fd, saved;
	ssize_t n;

	(void)state;
	snprintf(path, sizeof(path), "%s/err", unit_dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	log_init("test", LOG_TARGET_STDERR, 0);
	log_err("branch %s: %s", "x\033]0;owned\a\xc2\x9b" "2J", "line\nforged: yes\\");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_string_equal(buf, "test: error: branch x\\x1b]0;owned\\x07\\xc2\\x9b2J: "
				 "line\\nforged: yes\\\\\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escape_table),
		cmocka_unit_test(escape_truncates_whole_units),
		cmocka_unit_test_setup_teardown(log_line_escaped, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
