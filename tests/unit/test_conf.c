/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include "unit.h"

#include "conf.h"
#include "util.h"

/* ---- conf_split ---- */

/* Split `text` (copied: conf_split works in place); returns argc. */
static int split(const char *text, char **argv, int max, char *line, size_t n, char *err)
{
	snprintf(line, n, "%s", text);
	err[0] = '\0';
	return conf_split(line, argv, max, err, 256);
}

static void split_words(void **state)
{
	char line[256], err[256], *argv[8];

	assert_int_equal(split("  alpha\tbeta   gamma  ", argv, 8, line, sizeof(line), err), 3);
	assert_string_equal(argv[0], "alpha");
	assert_string_equal(argv[1], "beta");
	assert_string_equal(argv[2], "gamma");
	assert_int_equal(split("", argv, 8, line, sizeof(line), err), 0);
	assert_int_equal(split(" \t ", argv, 8, line, sizeof(line), err), 0);
}

static void split_comments(void **state)
{
	char line[256], err[256], *argv[8];

	assert_int_equal(split("# all comment", argv, 8, line, sizeof(line), err), 0);
	assert_int_equal(split("   #indented", argv, 8, line, sizeof(line), err), 0);
	assert_int_equal(split("key value # trailing", argv, 8, line, sizeof(line), err), 2);
	assert_string_equal(argv[1], "value");
	/* '#' starts a comment only at the start of a word. */
	assert_int_equal(split("key a#b", argv, 8, line, sizeof(line), err), 2);
	assert_string_equal(argv[1], "a#b");
	assert_int_equal(split("key \"# not a comment\"", argv, 8, line, sizeof(line), err), 2);
	assert_string_equal(argv[1], "# not a comment");
}

static void split_double_quotes(void **state)
{
	char line[256], err[256], *argv[8];

	assert_int_equal(split("k \"a b\" \"say \\\"hi\\\"\" \"c:\\\\dir\" \"x\\qy\" \"\"", argv, 8,
				 line, sizeof(line), err),
		6);
	assert_string_equal(argv[1], "a b");
	assert_string_equal(argv[2], "say \"hi\"");
	assert_string_equal(argv[3], "c:\\dir");
	/* Only \" and \\ are escapes; any other backslash stays. */
	assert_string_equal(argv[4], "x\\qy");
	assert_string_equal(argv[5], "");
}

static void split_single_quotes(void **state)
{
	char line[256], err[256], *argv[8];

	/* Nothing is special inside single quotes. */
	assert_int_equal(split("k 'a \"b\" \\\\ #c' ''", argv, 8, line, sizeof(line), err), 3);
	assert_string_equal(argv[1], "a \"b\" \\\\ #c");
	assert_string_equal(argv[2], "");
}

static void split_mixed_word(void **state)
{
	char line[256], err[256], *argv[8];

	assert_int_equal(
		split("k a\"b c\"d x'y z'\"w\" tail", argv, 8, line, sizeof(line), err), 4);
	assert_string_equal(argv[1], "ab cd");
	assert_string_equal(argv[2], "xy zw");
	assert_string_equal(argv[3], "tail");
}

static void split_unterminated(void **state)
{
	char line[256], err[256], *argv[8];

	assert_int_equal(split("k \"abc", argv, 8, line, sizeof(line), err), -1);
	assert_string_equal(err, "unterminated double quote");
	assert_int_equal(split("k 'abc", argv, 8, line, sizeof(line), err), -1);
	assert_string_equal(err, "unterminated single quote");
	/* An escaped quote does not close the string. */
	assert_int_equal(split("k \"abc\\\"", argv, 8, line, sizeof(line), err), -1);
	assert_string_equal(err, "unterminated double quote");
}

static void split_too_many(void **state)
{
	char line[256], err[256], *argv[4];

	assert_int_equal(split("a b c d", argv, 4, line, sizeof(line), err), 4);
	assert_string_equal(argv[3], "d");
	assert_int_equal(split("a b c d e", argv, 4, line, sizeof(line), err), -1);
	assert_string_equal(err, "too many values (at most 3)");
	/* A trailing comment is not a value. */
	assert_int_equal(split("a b c d # e f", argv, 4, line, sizeof(line), err), 4);
}

/* ---- conf_parse_buf ---- */

struct ctx {
	char name[64];
	unsigned long port;
	int nlist;
	char list[8][64];
	int calls;
	unsigned last_line;
	int argv_terminated;
};

static int kw_name(
	void *p, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ctx *c = p;

	c->calls++;
	c->last_line = loc->line;
	snprintf(c->name, sizeof(c->name), "%s", argv[0]);
	return 0;
}

static int kw_list(
	void *p, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ctx *c = p;

	c->calls++;
	c->last_line = loc->line;
	c->argv_terminated = argv[argc] == NULL;
	for (int i = 0; i < argc && c->nlist < 8; i++)
		snprintf(c->list[c->nlist++], sizeof(c->list[0]), "%s", argv[i]);
	return 0;
}

static int kw_port(
	void *p, const struct conf_loc *loc, int argc, char **argv, char *err, size_t errlen)
{
	struct ctx *c = p;

	c->calls++;
	c->last_line = loc->line;
	return conf_uint(argv[0], 1, 65535, &c->port, err, errlen);
}

static const struct conf_kw kws[] = {
	{"name", 1, 1, kw_name, CONF_ONCE},
	{"list", 1, 3, kw_list, 0},
	{"port", 1, 1, kw_port, 0},
	{"flag", 0, 0, NULL, 0},
	{NULL, 0, 0, NULL, 0},
};

/* Parse a buffer of `len` bytes (it may hold NULs) with the table above. */
static int parse(const char *buf, size_t len, struct ctx *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	return conf_parse_buf(buf, len, "t.conf", kws, c, err, errlen);
}

#define PARSE(text, c, err) parse((text), strlen(text), (c), (err), sizeof(err))

static void parse_good(void **state)
{
	const char *text = "# header\n"
			   "\n"
			   "name  foo\n"
			   "   \t\n"
			   "list a \"b c\"   # three at most\n"
			   "port 2222\n"
			   "flag\n"
			   "list d"; /* no final newline */
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE(text, &c, err), 0);
	assert_string_equal(err, "");
	assert_string_equal(c.name, "foo");
	assert_int_equal(c.port, 2222);
	assert_int_equal(c.nlist, 3);
	assert_string_equal(c.list[1], "b c");
	assert_string_equal(c.list[2], "d");
	assert_true(c.argv_terminated);
	/* Blank and comment lines call nothing; line numbers count them. */
	assert_int_equal(c.calls, 4);
	assert_int_equal(c.last_line, 8);
}

static void parse_unknown_keyword(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("name a\n\n# comment\nbogus 1\nname b\n", &c, err), -1);
	assert_string_equal(err, "t.conf:4: unknown keyword 'bogus'");
	/* Keywords are case-sensitive. */
	assert_int_equal(PARSE("Name a\n", &c, err), -1);
	assert_string_equal(err, "t.conf:1: unknown keyword 'Name'");
}

static void parse_argument_count(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("# x\nname\n", &c, err), -1);
	assert_string_equal(err, "t.conf:2: 'name' takes 1 value, got 0");
	assert_int_equal(PARSE("name a b\n", &c, err), -1);
	assert_string_equal(err, "t.conf:1: 'name' takes 1 value, got 2");
	assert_int_equal(PARSE("list a b c d\n", &c, err), -1);
	assert_string_equal(err, "t.conf:1: 'list' takes 1 to 3 values, got 4");
	assert_int_equal(PARSE("\n\nflag x\n", &c, err), -1);
	assert_string_equal(err, "t.conf:3: 'flag' takes 0 values, got 1");
	/* Quoting makes one value of many words. */
	assert_int_equal(PARSE("name \"a b\"\n", &c, err), 0);
	assert_string_equal(c.name, "a b");
}

static void parse_once(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("\nname a\nlist x\nlist y\nname b\n", &c, err), -1);
	assert_string_equal(err, "t.conf:5: 'name' given twice (first on line 2)");
	/* Keywords without CONF_ONCE repeat freely. */
	assert_int_equal(PARSE("list x\nlist y\nlist z\n", &c, err), 0);
	assert_int_equal(c.nlist, 3);
}

static void parse_handler_error(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("name a\nport 70000\n", &c, err), -1);
	assert_string_equal(err, "t.conf:2: 70000 is out of range (1..65535)");
	assert_int_equal(PARSE("\n\n\nport x1\n", &c, err), -1);
	assert_string_equal(err, "t.conf:4: 'x1' is not a number");
}

static void parse_split_error(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("name a\n\nlist \"abc\n", &c, err), -1);
	assert_string_equal(err, "t.conf:3: unterminated double quote");
}

static void parse_crlf(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("name foo\r\nlist a b\r\n\r\n# c\r\nport 22\r\n", &c, err), 0);
	assert_string_equal(c.name, "foo");
	assert_string_equal(c.list[1], "b");
	assert_int_equal(c.port, 22);
	assert_int_equal(PARSE("name foo\r\n\r\nbad\r\n", &c, err), -1);
	assert_string_equal(err, "t.conf:3: unknown keyword 'bad'");
}

static void parse_nul_byte(void **state)
{
	static const char text[] = "name a\nlist x\0y\n";
	static const char comment[] = "name a\n# x\0y\n";
	char err[512];
	struct ctx c;

	/* sizeof - 1: the NUL in the middle is data, the final one is not. */
	assert_int_equal(parse(text, sizeof(text) - 1, &c, err, sizeof(err)), -1);
	assert_string_equal(err, "t.conf:2: NUL byte in line");
	assert_int_equal(parse(comment, sizeof(comment) - 1, &c, err, sizeof(err)), -1);
	assert_string_equal(err, "t.conf:2: NUL byte in line");
}

static void parse_control_chars(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(PARSE("name a\x01\n", &c, err), -1);
	assert_string_equal(err, "t.conf:1: control character 0x01 in line");
	assert_int_equal(PARSE("\nname \x1b[31mred\n", &c, err), -1);
	assert_string_equal(err, "t.conf:2: control character 0x1b in line");
	assert_int_equal(PARSE("# \x7f\n", &c, err), -1);
	assert_string_equal(err, "t.conf:1: control character 0x7f in line");
	/* A tab is a separator, not a control character. */
	assert_int_equal(PARSE("name\ta\n", &c, err), 0);
	/* Bytes >= 0x80 (UTF-8) are allowed. */
	assert_int_equal(PARSE("name \xc3\xa9t\xc3\xa9\n", &c, err), 0);
	assert_string_equal(c.name, "\xc3\xa9t\xc3\xa9");
}

static void parse_long_line(void **state)
{
	size_t n = CONF_MAX_LINE + 64;
	char *text = malloc(n), err[512];
	struct ctx c;

	assert_non_null(text);
	/* Exactly CONF_MAX_LINE bytes: accepted. */
	memset(text, 'x', CONF_MAX_LINE);
	memcpy(text, "# ", 2);
	text[CONF_MAX_LINE] = '\n';
	assert_int_equal(parse(text, CONF_MAX_LINE + 1, &c, err, sizeof(err)), 0);
	/* One more on the second line: refused with that line's number. */
	memcpy(text, "name a\n", 7);
	memset(text + 7, 'x', CONF_MAX_LINE + 1);
	memcpy(text + 7, "# ", 2);
	assert_int_equal(parse(text, 7 + CONF_MAX_LINE + 1, &c, err, sizeof(err)), -1);
	assert_string_equal(err, "t.conf:2: line longer than 4096 bytes");
	free(text);
}

static void parse_empty(void **state)
{
	char err[512];
	struct ctx c;

	assert_int_equal(parse("", 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.calls, 0);
	assert_int_equal(PARSE("\n\n# only comments\n   \n", &c, err), 0);
	assert_int_equal(c.calls, 0);
}

/* ---- conf_parse_file ---- */

static const char good_file[] = "name fromfile\nport 8080\n";

/* unit_dir/etc (mode dmode) holding ocsb.conf (mode fmode); returns the file's path. */
static const char *make_conf(mode_t dmode, mode_t fmode)
{
	const char *dir = unit_path("etc"), *file = unit_path("etc/ocsb.conf");

	assert_int_equal(mkdir(dir, 0700), 0);
	unit_write(file, good_file, strlen(good_file), fmode);
	assert_int_equal(chmod(dir, dmode), 0);
	return file;
}

static int load(const char *path, uid_t owner, struct ctx *c, char *err, size_t errlen)
{
	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	return conf_parse_file(path, owner, kws, c, err, errlen);
}

static void file_accepted(void **state)
{
	const char *path = make_conf(0755, 0644);
	char err[512];
	struct ctx c;

	/* The positive control for the refusals below: same file, right modes and owner. */
	assert_int_equal(load(path, getuid(), &c, err, sizeof(err)), 0);
	assert_string_equal(c.name, "fromfile");
	assert_int_equal(c.port, 8080);
	assert_int_equal(load(path, (uid_t)-1, &c, err, sizeof(err)), 0);
}

static void file_group_writable(void **state)
{
	const char *path = make_conf(0755, 0664);
	char err[512];
	struct ctx c;

	assert_int_equal(load(path, getuid(), &c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "writable by group or others"));
	assert_string_equal(c.name, "");
}

static void file_world_writable(void **state)
{
	const char *path = make_conf(0755, 0646);
	char err[512];
	struct ctx c;

	assert_int_equal(load(path, getuid(), &c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "writable by group or others"));
	assert_string_equal(c.name, "");
}

static void file_symlink(void **state)
{
	const char *path = make_conf(0755, 0644), *link = unit_path("etc/link.conf");
	char err[512];
	struct ctx c;

	assert_int_equal(symlink("ocsb.conf", link), 0);
	assert_int_equal(load(link, getuid(), &c, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "not a regular file"));
	/* Not even when ownership is not checked. */
	assert_int_equal(load(link, (uid_t)-1, &c, err, sizeof(err)), -EINVAL);
	assert_string_equal(c.name, "");
	(void)path;
}

/*
 * The checks and the read are one descriptor: while another process keeps exchanging a
 * good file and a group-writable one under the name, a parse either refuses or reads the
 * good one, never the content of the file it refused. (Checked by name and opened again,
 * the bad content got through within a few thousand tries.)
 */
static void file_swapped_between_check_and_read(void **state)
{
	const char *path = make_conf(0755, 0644), *other = unit_path("etc/other.conf");
	static const char bad[] = "name writable\n";
	int ok = 0, refused = 0, leaked = 0;
	struct timespec t0, now;
	char err[512];
	struct ctx c;
	pid_t pid;

	unit_write(other, bad, strlen(bad), 0664);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		for (;;)
			renameat2(AT_FDCWD, path, AT_FDCWD, other, RENAME_EXCHANGE);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 200000 && !leaked; i++) {
		int r = load(path, getuid(), &c, err, sizeof(err));

		if (r == 0 && !strcmp(c.name, "writable"))
			leaked++;
		else if (r == 0)
			ok++;
		else
			refused++;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= 3 && ok && refused)
			break;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	print_message("# swapped: %d good, %d refused, %d read the group-writable file\n", ok,
		refused, leaked);
	assert_int_equal(leaked, 0);
	assert_true(ok > 0); /* the control: the good file is read while it is there */
}

static void file_symlinked_directory(void **state)
{
	char err[512];
	struct ctx c;

	make_conf(0755, 0644);
	assert_int_equal(symlink("etc", unit_path("etc2")), 0);
	assert_true(load(unit_path("etc2/ocsb.conf"), getuid(), &c, err, sizeof(err)) < 0);
	assert_string_equal(c.name, "");
}

static void file_group_writable_dir(void **state)
{
	const char *path = make_conf(0775, 0644);
	char err[512];
	struct ctx c;

	assert_int_equal(load(path, getuid(), &c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "its directory"));
	assert_string_equal(c.name, "");
}

static void file_world_writable_dir(void **state)
{
	const char *path = make_conf(01777, 0644);
	char err[512];
	struct ctx c;

	/* Sticky or not, a world-writable directory lets others swap the file. */
	assert_int_equal(load(path, getuid(), &c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "its directory"));
	assert_string_equal(c.name, "");
}

static void file_wrong_owner(void **state)
{
	const char *path = make_conf(0755, 0644);
	uid_t want = 0;
	char err[512];
	struct ctx c;

	/* Root passes any owner check: give the files away and require a third uid. */
	if (geteuid() == 0) {
		assert_int_equal(lchown(path, 65534, 65534), 0);
		assert_int_equal(lchown(unit_path("etc"), 65534, 65534), 0);
		want = 65533;
	}
	assert_int_equal(load(path, want, &c, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "is owned by uid"));
	assert_string_equal(c.name, "");
}

static void file_missing(void **state)
{
	char err[512];
	struct ctx c;

	make_conf(0755, 0644);
	assert_int_equal(load(unit_path("etc/none.conf"), getuid(), &c, err, sizeof(err)), -ENOENT);
	assert_int_equal(
		load(unit_path("nodir/ocsb.conf"), getuid(), &c, err, sizeof(err)), -ENOENT);
}

static void file_not_regular(void **state)
{
	char err[512];
	struct ctx c;

	make_conf(0755, 0644);
	assert_int_equal(mkdir(unit_path("etc/sub.conf"), 0755), 0);
	assert_int_equal(load(unit_path("etc/sub.conf"), getuid(), &c, err, sizeof(err)), -EINVAL);
}

static void file_too_large(void **state)
{
	size_t n = 2 * 1024 * 1024;
	const char *path = make_conf(0755, 0644);
	char *big = malloc(n), err[512];
	struct ctx c;

	/* Valid content (comment lines): only the size is wrong. */
	assert_non_null(big);
	memset(big, '#', n);
	for (size_t i = 63; i < n; i += 64)
		big[i] = '\n';
	memcpy(big, "name big\n", 9);
	unit_write(path, big, n, 0644);
	free(big);
	assert_true(load(path, getuid(), &c, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "too large"));
	assert_string_equal(c.name, "");
}

static void file_syntax_error(void **state)
{
	const char *path = make_conf(0755, 0644);
	char err[512], want[PATH_MAX + 64];
	struct ctx c;

	unit_write(path, "name a\nport 0\n", 14, 0644);
	assert_int_equal(load(path, getuid(), &c, err, sizeof(err)), -EINVAL);
	snprintf(want, sizeof(want), "%s:2: 0 is out of range (1..65535)", path);
	assert_string_equal(err, want);
}

/* ---- value parsers ---- */

static void uint_ranges(void **state)
{
	unsigned long v = 777;
	char err[256];

	assert_int_equal(conf_uint("0", 0, 10, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 0);
	assert_int_equal(conf_uint("10", 0, 10, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 10);
	assert_int_equal(conf_uint("007", 0, 10, &v, err, sizeof(err)), 0);
	assert_int_equal(v, 7);
	v = 777;
	assert_int_equal(conf_uint("11", 0, 10, &v, err, sizeof(err)), -1);
	assert_string_equal(err, "11 is out of range (0..10)");
	assert_int_equal(conf_uint("1", 2, 10, &v, err, sizeof(err)), -1);
	assert_string_equal(err, "1 is out of range (2..10)");
	/* ret is set only on success. */
	assert_int_equal(v, 777);
}

static void uint_not_numbers(void **state)
{
	static const char *const bad[] = {"", "-1", "+1", " 5", "5 ", "5x", "0x10", "1e3",
		"18446744073709551616", "99999999999999999999999"};
	unsigned long v = 777;
	char err[256];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		err[0] = '\0';
		if (conf_uint(bad[i], 0, ~0UL, &v, err, sizeof(err)) != -1)
			fail_msg("conf_uint accepted '%s'", bad[i]);
		assert_non_null(strstr(err, "is not a number"));
	}
	assert_int_equal(v, 777);
}

static void bool_values(void **state)
{
	static const char *const yes[] = {"yes", "true", "on"},
				 *const no[] = {"no", "false", "off"};
	static const char *const bad[] = {"", "maybe", "1", "0", "Yes", "yes "};
	char err[256];
	int v;

	for (size_t i = 0; i < 3; i++) {
		v = -1;
		assert_int_equal(conf_bool(yes[i], &v, err, sizeof(err)), 0);
		assert_int_equal(v, 1);
		v = -1;
		assert_int_equal(conf_bool(no[i], &v, err, sizeof(err)), 0);
		assert_int_equal(v, 0);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		v = -1;
		if (conf_bool(bad[i], &v, err, sizeof(err)) != -1)
			fail_msg("conf_bool accepted '%s'", bad[i]);
		assert_int_equal(v, -1);
		assert_non_null(strstr(err, "is not yes or no"));
	}
}

#define FILE_TEST(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(split_words),
		cmocka_unit_test(split_comments),
		cmocka_unit_test(split_double_quotes),
		cmocka_unit_test(split_single_quotes),
		cmocka_unit_test(split_mixed_word),
		cmocka_unit_test(split_unterminated),
		cmocka_unit_test(split_too_many),
		cmocka_unit_test(parse_good),
		cmocka_unit_test(parse_unknown_keyword),
		cmocka_unit_test(parse_argument_count),
		cmocka_unit_test(parse_once),
		cmocka_unit_test(parse_handler_error),
		cmocka_unit_test(parse_split_error),
		cmocka_unit_test(parse_crlf),
		cmocka_unit_test(parse_nul_byte),
		cmocka_unit_test(parse_control_chars),
		cmocka_unit_test(parse_long_line),
		cmocka_unit_test(parse_empty),
		FILE_TEST(file_accepted),
		FILE_TEST(file_group_writable),
		FILE_TEST(file_world_writable),
		FILE_TEST(file_symlink),
		FILE_TEST(file_swapped_between_check_and_read),
		FILE_TEST(file_symlinked_directory),
		FILE_TEST(file_group_writable_dir),
		FILE_TEST(file_world_writable_dir),
		FILE_TEST(file_wrong_owner),
		FILE_TEST(file_missing),
		FILE_TEST(file_not_regular),
		FILE_TEST(file_too_large),
		FILE_TEST(file_syntax_error),
		cmocka_unit_test(uint_ranges),
		cmocka_unit_test(uint_not_numbers),
		cmocka_unit_test(bool_values),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
