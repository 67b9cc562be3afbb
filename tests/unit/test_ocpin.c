/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include <sys/sysmacros.h>

#include "../../provision/ocpin.h"
#include "opencode.h"
#include "opencode_pins.h"

/*
 * Root's takeover of a tree npm staged: exactly the manifest, or nothing. Every refusal
 * starts from the genuine tree, which the positive control accepts, and changes one thing.
 */

#define HELLO "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
/* The genuine tree: a/, a/hello (0644), a/run (0755), a/.bin/ -> ../run, link -> a/hello. */
static const char genuine[] = "d 0755 - a\n"
			      "d 0755 - a/.bin\n"
			      "l 0777 ../run a/.bin/run\n"
			      "f 0644 " HELLO " a/hello\n"
			      "f 0755 " HELLO " a/run\n"
			      "l 0777 a/hello link\n";

static int make_tree(void **state)
{
	if (unit_setup_dir(state) < 0)
		return -1;
	if (mkdir(unit_path("src"), 0755) < 0 || mkdir(unit_path("src/a"), 0755) < 0 ||
		mkdir(unit_path("src/a/.bin"), 0755) < 0 ||
		symlink("../run", unit_path("src/a/.bin/run")) < 0 ||
		symlink("a/hello", unit_path("src/link")) < 0 || mkdir(unit_path("dst"), 0700) < 0)
		return -1;
	unit_write(unit_path("src/a/hello"), "hello\n", 6, 0644);
	unit_write(unit_path("src/a/run"), "hello\n", 6, 0755);
	/* npm's own record: never taken over, never in the manifest. */
	mkdir(unit_path("src/node_modules"), 0755);
	unit_write(unit_path("src/" OCPIN_SKIP), "{}\n", 3, 0644);
	return 0;
}

/* ocpin_take of src against `text` (copying into dst when copy): its result, why in err. */
static int take(const char *text, int copy, char *err, size_t n)
{
	struct ocpin_manifest m = {0};
	char why[512] = "";
	int src, dst = -1, r;

	if (ocpin_parse(text, &m, why, sizeof(why)) < 0)
		fail_msg("manifest refused: %s", why);
	src = open(unit_path("src"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(src >= 0);
	if (copy) {
		dst = open(unit_path("dst"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		assert_true(dst >= 0);
	}
	err[0] = '\0';
	r = ocpin_take(src, dst, &m, err, n);
	close(src);
	if (dst >= 0)
		close(dst);
	ocpin_free(&m);
	return r;
}

/* A manifest with the node_modules directory the fixture also holds. */
static const char *with_nm(void)
{
	static char text[1024];

	snprintf(text, sizeof(text), "%sd 0755 - node_modules\n", genuine);
	return text;
}

static void genuine_tree_accepted_and_copied(void **state)
{
	char err[512], buf[64], target[64];
	struct stat st;
	ssize_t len;

	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 1);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 1);
	/* The copy is the same tree, with the same modes, and without npm's record. */
	assert_int_equal(unit_read(unit_path("dst/a/hello"), buf, sizeof(buf)), 6);
	assert_string_equal(buf, "hello\n");
	assert_int_equal(lstat(unit_path("dst/a/run"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	assert_int_equal(lstat(unit_path("dst/a/hello"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	len = readlink(unit_path("dst/link"), target, sizeof(target) - 1);
	assert_int_equal(len, 7);
	target[len] = '\0';
	assert_string_equal(target, "a/hello");
	assert_int_equal(lstat(unit_path("dst/" OCPIN_SKIP), &st), -1);
	/* The copy itself passes the same check. */
	assert_int_equal(rename(unit_path("src"), unit_path("old")), 0);
	assert_int_equal(rename(unit_path("dst"), unit_path("src")), 0);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 1);
}

static void extra_file_refused(void **state)
{
	char err[512];

	unit_write(unit_path("src/a/evil"), "x", 1, 0644);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 0);
	assert_string_equal(err, "a/evil: not in the pinned tree (an extra file)");
}

static void missing_file_refused(void **state)
{
	char err[512];

	assert_int_equal(unlink(unit_path("src/a/hello")), 0);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 0);
	assert_string_equal(err, "a/hello: missing (the pinned tree has a file there)");
}

static void changed_byte_refused(void **state)
{
	char err[512];

	unit_write(unit_path("src/a/run"), "hellO\n", 6, 0755);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 0);
	assert_err_prefix(err, "a/run: content differs (sha256 ");
}

static void symlink_for_file_refused(void **state)
{
	char err[512];

	assert_int_equal(unlink(unit_path("src/a/run")), 0);
	assert_int_equal(symlink("hello", unit_path("src/a/run")), 0);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 0);
	assert_string_equal(err, "a/run: a symbolic link where the pinned tree has a file");
}

static void mode_change_refused(void **state)
{
	char err[512];

	assert_int_equal(chmod(unit_path("src/a/hello"), 0755), 0);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 0);
	assert_string_equal(err, "a/hello: mode 0755, pinned 0644");
	/* Group-writable is a mode change too. */
	assert_int_equal(chmod(unit_path("src/a/hello"), 0664), 0);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 0);
	assert_string_equal(err, "a/hello: mode 0664, pinned 0644");
}

static void escaping_link_refused(void **state)
{
	char err[512];

	/* The pinned relative link, re-aimed out of the tree with "..". */
	assert_int_equal(unlink(unit_path("src/a/.bin/run")), 0);
	assert_int_equal(symlink("../../../etc/passwd", unit_path("src/a/.bin/run")), 0);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 0);
	assert_string_equal(err, "a/.bin/run: a link to '../../../etc/passwd', outside the tree");
	assert_int_equal(unlink(unit_path("src/a/.bin/run")), 0);
	assert_int_equal(symlink("/etc/passwd", unit_path("src/a/.bin/run")), 0);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 0);
	assert_string_equal(err, "a/.bin/run: a link to '/etc/passwd', outside the tree");
	/* Positive control: up and down again inside the tree. */
	assert_true(ocpin_link_inside("a/.bin/run", "../run"));
	assert_true(ocpin_link_inside("a/.bin/run", "../../a/run"));
	assert_false(ocpin_link_inside("a/.bin/run", "../../../a/run"));
	assert_false(ocpin_link_inside("link", "../x"));
}

static void unsafe_kinds_refused(void **state)
{
	char err[512];

	/* A second name for a pinned file. */
	assert_int_equal(link(unit_path("src/a/hello"), unit_path("hard")), 0);
	assert_int_equal(take(with_nm(), 1, err, sizeof(err)), 0);
	assert_string_equal(err, "a/hello: a hard link (2 names)");
	assert_int_equal(unlink(unit_path("hard")), 0);
	/* Set-id bits are refused before anything is compared. */
	assert_int_equal(chmod(unit_path("src/a/run"), 04755), 0);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 0);
	assert_string_equal(err, "a/run: setuid or setgid (mode 4755)");
	assert_int_equal(chmod(unit_path("src/a/run"), 0755), 0);
	/* A fifo is neither file, directory nor link (it would block a reader). */
	assert_int_equal(mkfifo(unit_path("src/a/pipe"), 0644), 0);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 0);
	assert_string_equal(err, "a/pipe: a device, fifo or socket");
	assert_int_equal(unlink(unit_path("src/a/pipe")), 0);
	/* A control byte in a name would forge lines in a log. */
	unit_write(unit_path("src/a/x\nok"), "x", 1, 0644);
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "a control character in a name"));
	assert_null(strchr(err, '\n'));
	assert_int_equal(unlink(unit_path("src/a/x\nok")), 0);
	/* Positive control: the same tree, put back, passes. */
	assert_int_equal(take(with_nm(), 0, err, sizeof(err)), 1);
}

static void bad_manifests_refused(void **state)
{
	static const char *const bad[][2] = {
		{"f 0644 " HELLO " ../escape\n", "line 1: path '../escape' is not relative"},
		{"d 0755 - a\nf 0644 " HELLO " a/../../b\n", "line 2: path 'a/../../b'"},
		{"f 0644 " HELLO " /etc/passwd\n", "line 1: path '/etc/passwd'"},
		{"f 0644 " HELLO " ./x\n", "line 1: path './x'"},
		{"l 0777 ../../x link\n", "line 1: link: bad link target"},
		{"l 0777 /etc/passwd link\n", "line 1: link: bad link target"},
		{"f 0644 nothex a\n", "line 1: a: bad value"},
		{"f 644 " HELLO " a\n", "line 1: mode '644'"},
		{"x 0644 - a\n", "line 1: not 'd|f|l MODE VALUE PATH'"},
		{"f 0644 " HELLO " b\nf 0644 " HELLO " a\n", "line 2: a: out of order"},
		{"f 0644 " HELLO " a/b\n", "line 1: a/b: its directory is not listed"},
	};
	struct ocpin_manifest m = {0};
	char why[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		if (ocpin_parse(bad[i][0], &m, why, sizeof(why)) != -EINVAL)
			fail_msg("accepted: %s", bad[i][0]);
		assert_err_prefix(why, bad[i][1]);
	}
	/* Positive control. */
	assert_int_equal(ocpin_parse(genuine, &m, why, sizeof(why)), 0);
	assert_int_equal(m.n, 6);
	ocpin_free(&m);
}

/* What the build carries: the version common/opencode.h names, the binary agentd runs. */
static void compiled_in_pins(void **state)
{
	struct ocpin_manifest m = {0};
	char why[512] = "", want[128];
	int bin = 0;

	snprintf(want, sizeof(want), "\"opencode-ai\": \"%s\"", OCSB_OPENCODE_VERSION);
	assert_non_null(strstr(oc_pin_package, want));
	snprintf(want, sizeof(want), "\"node_modules/opencode-ai\": {\n      \"version\": \"%s\"",
		OCSB_OPENCODE_VERSION);
	assert_non_null(strstr(oc_pin_lock, want));
	if (ocpin_parse(oc_pin_manifest, &m, why, sizeof(why)) < 0)
		fail_msg("conf/opencode/manifest-linux-x64.txt: %s", why);
	for (size_t i = 0; i < m.n; i++) {
		if (!strcmp(m.e[i].path, OCSB_OPENCODE_BIN_REL))
			bin = m.e[i].type == 'f' && m.e[i].mode == 0755;
		/* Root never takes over npm's own record, so it cannot be pinned. */
		assert_string_not_equal(m.e[i].path, OCPIN_SKIP);
		if (m.e[i].type != 'l')
			assert_int_equal(m.e[i].mode & 07022, 0);
	}
	assert_true(bin);
	ocpin_free(&m);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, make_tree, unit_teardown_dir)
	const struct CMUnitTest tests[] = {
		T(genuine_tree_accepted_and_copied),
		T(extra_file_refused),
		T(missing_file_refused),
		T(changed_byte_refused),
		T(symlink_for_file_refused),
		T(mode_change_refused),
		T(escaping_link_refused),
		T(unsafe_kinds_refused),
		cmocka_unit_test(bad_manifests_refused),
		cmocka_unit_test(compiled_in_pins),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
