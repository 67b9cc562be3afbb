/* SPDX-License-Identifier: MIT */
/*
 * The owner's egress layer as text (issue 26): the supervisor, running as ocsb-agentd,
 * cannot read the owner's home; a child running as the owner prints the file
 * (egress_owner_read, `ocsb-agentd --owner-egress`) and the supervisor parses it with
 * egress_load_text. The rules, their files and lines, and the errors must be what
 * egress_load makes of the file itself.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "egress.h"
#include "paths.h"
#include "util.h"

#define OWNER_FILE "home/alice/.config/ocsb/egress.conf"

static void put_file(const char *rel, const char *text, mode_t mode)
{
	unit_write(unit_path(rel), text, strlen(text), mode);
}

static void layout(struct paths *p)
{
	assert_int_equal(paths_under(p, unit_dir), 0);
	assert_int_equal(mkdir(unit_path("etc"), 0755), 0);
	assert_int_equal(mkdir(unit_path("etc/ocsb"), 0755), 0);
	assert_int_equal(mkdir(unit_path("etc/ocsb/egress.d"), 0755), 0);
	assert_int_equal(mkdir(unit_path("home"), 0755), 0);
	assert_int_equal(mkdir(unit_path("home/alice"), 0755), 0);
	assert_int_equal(mkdir(unit_path("home/alice/.config"), 0755), 0);
	assert_int_equal(mkdir(unit_path("home/alice/.config/ocsb"), 0755), 0);
	put_file("etc/ocsb/egress.conf", "policy blocklist\ndns allow\nallow a.example\n", 0644);
	put_file("etc/ocsb/egress.d/10-a.conf", "allow-regex ^a\n", 0644);
}

/* What the owner's child prints, as the supervisor gets it. */
static int owner_text(char **ret, size_t *len, char *err, size_t errlen)
{
	return egress_owner_read(unit_path("home/alice"), getuid(), ret, len, err, errlen);
}

static void text_layer_is_the_file(void **state)
{
	struct egress f, t;
	struct paths p;
	char err[512], *text = NULL;
	size_t len = 0;

	(void)state;
	layout(&p);
	put_file(OWNER_FILE, "egress off\n# note\nconnect h.example:22\npolicy allowlist\n", 0600);
	assert_int_equal(egress_load_as(&f, &p, getuid(), unit_path("home/alice"), getuid(), err,
				 sizeof(err)),
		0);
	assert_int_equal(owner_text(&text, &len, err, sizeof(err)), 0);
	assert_int_equal(egress_load_text_as(&t, &p, getuid(), unit_path("home/alice"), text, len,
				 err, sizeof(err)),
		0);
	/* The same files in the same order, the owner's under its own name. */
	assert_int_equal(t.files.n, f.files.n);
	for (size_t i = 0; i < f.files.n; i++)
		assert_string_equal(t.files.v[i], f.files.v[i]);
	assert_string_equal(t.files.v[t.files.n - 1], unit_path(OWNER_FILE));
	/* The same rules, from the same file and line (squid's notes name them). */
	assert_int_equal(t.n, f.n);
	for (size_t i = 0; i < f.n; i++) {
		assert_string_equal(t.rules[i].value, f.rules[i].value);
		assert_string_equal(t.rules[i].file, f.rules[i].file);
		assert_int_equal(t.rules[i].line, f.rules[i].line);
	}
	assert_int_equal(t.rules[t.n - 1].line, 3);
	assert_int_equal(t.off, 1);
	assert_int_equal(t.off, f.off);
	assert_int_equal(t.policy, f.policy);
	assert_int_equal(t.dns_allow, f.dns_allow);
	egress_free(&f);
	egress_free(&t);
	free(text);
}

static void text_error_reads_as_the_file(void **state)
{
	struct egress e;
	struct paths p;
	char ferr[512], terr[512], want[600], *text = NULL;
	size_t len = 0;

	(void)state;
	layout(&p);
	put_file(OWNER_FILE, "allow b.example\nfrobnicate x\n", 0644);
	assert_true(egress_load_as(&e, &p, getuid(), unit_path("home/alice"), getuid(), ferr,
			    sizeof(ferr)) < 0);
	assert_int_equal(owner_text(&text, &len, terr, sizeof(terr)), 0);
	assert_int_equal(egress_load_text_as(&e, &p, getuid(), unit_path("home/alice"), text, len,
				 terr, sizeof(terr)),
		-EINVAL);
	snprintf(want, sizeof(want), "%s:2: ", unit_path(OWNER_FILE));
	assert_memory_equal(terr, want, strlen(want));
	assert_string_equal(terr, ferr);
	/* Nothing is left of a load that failed. */
	assert_int_equal(e.n, 0);
	assert_int_equal(e.files.n, 0);
	free(text);
}

static void no_file_no_layer(void **state)
{
	struct egress e;
	struct paths p;
	char err[512], *text = (char *)"x";
	size_t len = 9;

	(void)state;
	layout(&p);
	/* The owner's child: no file is no error, nothing printed. */
	assert_int_equal(owner_text(&text, &len, err, sizeof(err)), -ENOENT);
	assert_null(text);
	assert_int_equal(len, 0);
	assert_int_equal(egress_load_text_as(&e, &p, getuid(), unit_path("home/alice"), NULL, 0,
				 err, sizeof(err)),
		0);
	assert_int_equal(e.files.n, 2);
	assert_int_equal(e.n, 2);
	egress_free(&e);
	/* An empty text: a layer without rules. */
	assert_int_equal(egress_load_text_as(&e, &p, getuid(), unit_path("home/alice"), "", 0, err,
				 sizeof(err)),
		0);
	assert_int_equal(e.files.n, 3);
	assert_int_equal(e.n, 2);
	egress_free(&e);
}

/* The owner's child checks the file as egress_load does: on its descriptor. */
static void owner_read_checks_the_file(void **state)
{
	struct paths p;
	char err[512], *text = NULL;
	size_t len = 0;

	(void)state;
	layout(&p);
	put_file(OWNER_FILE, "allow b.example\n", 0666);
	assert_int_equal(owner_text(&text, &len, err, sizeof(err)), -EPERM);
	assert_non_null(strstr(err, "writable by group or others"));
	assert_null(text);
	assert_int_equal(unlink(unit_path(OWNER_FILE)), 0);
	put_file("home/alice/elsewhere.conf", "allow b.example\n", 0644);
	assert_int_equal(symlink(unit_path("home/alice/elsewhere.conf"), unit_path(OWNER_FILE)), 0);
	assert_int_equal(owner_text(&text, &len, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "symbolic links are not followed"));
	assert_null(text);
	/* control: the same file in its place is read */
	assert_int_equal(unlink(unit_path(OWNER_FILE)), 0);
	put_file(OWNER_FILE, "allow b.example\n", 0644);
	assert_int_equal(owner_text(&text, &len, err, sizeof(err)), 0);
	assert_int_equal(len, strlen("allow b.example\n"));
	assert_memory_equal(text, "allow b.example\n", len);
	free(text);
}

static void text_too_large_refused(void **state)
{
	struct egress e;
	struct paths p;
	char err[512];
	size_t big = 1024 * 1024 + 1;
	char *text = malloc(big);

	(void)state;
	assert_non_null(text);
	memset(text, '#', big);
	layout(&p);
	assert_int_equal(egress_load_text_as(&e, &p, getuid(), unit_path("home/alice"), text, big,
				 err, sizeof(err)),
		-EFBIG);
	assert_non_null(strstr(err, "too large"));
	free(text);
	/* And a text without the owner's home is a caller's mistake, refused. */
	assert_int_equal(
		egress_load_text_as(&e, &p, getuid(), NULL, "", 0, err, sizeof(err)), -EINVAL);
}

#define T(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(text_layer_is_the_file),
		T(text_error_reads_as_the_file),
		T(no_file_no_layer),
		T(owner_read_checks_the_file),
		T(text_too_large_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
