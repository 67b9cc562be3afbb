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

/* Run fn with stderr going to a file; what it wrote, in a static buffer. */
static const char *captured(void (*fn)(void))
{
	static char buf[8192];
	char path[PATH_MAX + 16];
	int fd, saved;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/out", unit_dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	return buf;
}

static void npm_failed(void)
{
	log_init("test", LOG_TARGET_STDERR, 0);
	log_output(LOG_LVL_ERR,
		"\nnpm ERR! code SELF_SIGNED_CERT_IN_CHAIN\r\nnpm ERR! \033[31mred\n"
		"test: error: forged\n\n",
		"npm ci (as %s): exit 1", "ocsb-npm");
}

static void one_line(void)
{
	log_init("test", LOG_TARGET_STDERR, 0);
	log_output(LOG_LVL_ERR, "sshd: bad option\n", "sshd -t: exit 255");
	log_output(LOG_LVL_WARN, NULL, "git fetch: exit 128");
	log_output(LOG_LVL_ERR, "\n \n", "useradd x: exit 9");
}

static void long_output(void)
{
	char out[4096] = "";

	log_init("test", LOG_TARGET_STDERR, 0);
	for (int i = 1; i <= LOG_OUTPUT_LINES + 5; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "line %d\n", i);
	log_output(LOG_LVL_ERR, out, "tool: exit 1");
}

static void journal_lines(void)
{
	setenv("JOURNAL_STREAM", "8:1", 1);
	log_init("test", LOG_TARGET_DAEMON, 0);
	log_output(LOG_LVL_WARN, "first\nsecond", "squid -k parse: exit 1");
	unsetenv("JOURNAL_STREAM");
	log_init("test", LOG_TARGET_STDERR, 0);
}

/*
 * A command's output of several lines (npm's error, sshd -t, git) is shown as lines, each
 * indented and escaped on its own, not as one line full of \n (issue 28); one line stays
 * one line.
 */
static void output_as_lines(void **state)
{
	const char *s;

	(void)state;
	assert_string_equal(captured(npm_failed),
		"test: error: npm ci (as ocsb-npm): exit 1:\n"
		"  npm ERR! code SELF_SIGNED_CERT_IN_CHAIN\n"
		"  npm ERR! \\x1b[31mred\n"
		"  test: error: forged\n");
	assert_string_equal(captured(one_line),
		"test: error: sshd -t: exit 255: sshd: bad option\n"
		"test: warning: git fetch: exit 128\n"
		"test: error: useradd x: exit 9\n");
	s = captured(long_output);
	assert_non_null(strstr(s,
		"test: error: tool: exit 1:\n  (5 lines before these not shown)\n"
		"  line 6\n"));
	assert_non_null(strstr(s, "  line 45\n"));
	assert_null(strstr(s, "line 5\n"));
	assert_string_equal(captured(journal_lines),
		"<4>squid -k parse: exit 1:\n<4>  first\n"
		"<4>  second\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escape_table),
		cmocka_unit_test(escape_truncates_whole_units),
		cmocka_unit_test_setup_teardown(
			log_line_escaped, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(output_as_lines, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
