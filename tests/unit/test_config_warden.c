/* SPDX-License-Identifier: MIT */
/*
 * The warden's reader of ocsb.conf (config_load_warden: config_warden_keywords, then
 * config_validate_shared) against the whole file's (config_keywords, then config_validate):
 * the same values where both accept, the same refusals for the warden's keywords, and only
 * the whole reader's refusals for the others.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "config.h"
#include "config_int.h"

/* Each reader's pass 1 and pass 2 over `text`, as config_load_with runs them on a file. */
static int read_warden(struct ocsb_config *c, const char *text, char *err, size_t errlen)
{
	config_defaults(c);
	err[0] = '\0';
	if (conf_parse_buf(text, strlen(text), "ocsb.conf", config_warden_keywords, c, err,
		    errlen) < 0)
		return -1;
	return config_validate_shared(c, err, errlen);
}

static int read_full(struct ocsb_config *c, const char *text, char *err, size_t errlen)
{
	config_defaults(c);
	err[0] = '\0';
	if (config_parse_buf(c, text, strlen(text), "ocsb.conf", err, errlen) < 0)
		return -1;
	return config_validate(c, err, errlen);
}

static void assert_strv_equal(const struct strv *a, const struct strv *b)
{
	assert_int_equal(a->n, b->n);
	for (size_t i = 0; i < a->n; i++)
		assert_string_equal(a->v[i], b->v[i]);
}

/* Every field the warden reads (warden/), and the mirror paths it counts. */
static void assert_warden_fields_equal(const struct ocsb_config *w, const struct ocsb_config *f)
{
	assert_string_equal(w->agent, f->agent);
	assert_string_equal(w->owner, f->owner);
	assert_strv_equal(&w->projects, &f->projects);
	assert_int_equal(w->ssh_port, f->ssh_port);
	assert_int_equal(w->proxy_port, f->proxy_port);
	assert_int_equal(w->ports_lo, f->ports_lo);
	assert_int_equal(w->ports_hi, f->ports_hi);
	assert_int_equal(w->ports_line, f->ports_line);
	assert_string_equal(w->opencode_bin, f->opencode_bin);
	assert_int_equal(w->opencode_bin_set, f->opencode_bin_set);
	assert_int_equal(w->opencode_port, f->opencode_port);
	assert_int_equal(w->opencode_port_line, f->opencode_port_line);
	assert_true(w->limit_memory == f->limit_memory);
	assert_true(w->limit_tasks == f->limit_tasks);
	assert_true(w->limit_cpu == f->limit_cpu);
	assert_int_equal(w->mirror.set, f->mirror.set);
	assert_strv_equal(&w->mirror.paths, &f->mirror.paths);
}

static void same_values(void **state)
{
	static const char *const files[] = {
		"",
		"# the defaults, said\nagent ai-dev\nssh-port 22\nproxy-port 3128\n",
		"agent bot-1\n"
		"owner alice\n"
		"project /home/alice/code/shop\n"
		"project \"/home/alice/my code/web\"\n"
		"key /root/alice.pub\n"
		"sync-key '/root/bob laptop.pub'\n"
		"shell /bin/zsh\n"
		"ssh-port 2222\n"
		"proxy-port 8080\n"
		"agent-ports 9000-9009\n"
		"opencode-bin /usr/local/lib/oc/bin/opencode\n"
		"opencode-port 5000\n"
		"limit-memory 512M\n"
		"limit-tasks none\n"
		"limit-cpu 150\n"
		"mirror .config/opencode .vimrc\n"
		"mirror .tmux.conf\n"
		"mirror-writable .vimrc\n"
		"mirror-noscan .config/opencode\n",
		"owner bob\nmirror none\nlimit-memory none\nlimit-tasks 64\nlimit-cpu auto\n",
		"owner bob\r\nagent-ports 1024-1024\r\nopencode-port 65000\r\nlimit-memory 4G\r\n",
		"project /srv/a\nproject /srv/b\nproject /srv/c\nopencode-port 7000\n"
		"agent-ports 7003-7010\nmirror .agents\n",
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct ocsb_config w, f;
		char err[512];

		if (read_full(&f, files[i], err, sizeof(err)) < 0)
			fail_msg("file %zu: the whole reader refused it: %s", i, err);
		if (read_warden(&w, files[i], err, sizeof(err)) < 0)
			fail_msg("file %zu: the warden's reader refused it: %s", i, err);
		assert_warden_fields_equal(&w, &f);
		config_free(&w);
		config_free(&f);
	}
}

/* Mistakes in keywords the warden does not use: the whole reader alone refuses them. */
static void others_wrong_warden_reads(void **state)
{
	static const char *const lines[] = {
		"mirror .ssh",
		"mirror ../x",
		"mirror .vimrc .vimrc",
		"mirror-writable .not-mirrored",
		"mirror-noscan /abs",
		"key relative.pub",
		"key",
		"sync-key \"/a/\\\"b\"",
		"shell bin/sh",
		"shell /bin/sh\nshell /bin/zsh",
	};

	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct ocsb_config w, f;
		char text[256], err[512];

		snprintf(text, sizeof(text), "owner alice\nagent-ports 9000-9009\n%s\n", lines[i]);
		if (read_full(&f, text, err, sizeof(err)) == 0)
			fail_msg("the whole reader accepted '%s'", lines[i]);
		config_free(&f);
		if (read_warden(&w, text, err, sizeof(err)) < 0)
			fail_msg("the warden's reader refused '%s': %s", lines[i], err);
		assert_string_equal(w.owner, "alice");
		assert_int_equal(w.ports_lo, 9000);
		assert_int_equal(w.ports_hi, 9009);
		/* The only value the mirror lines give the warden: whether any path is mirrored. */
		assert_int_equal(w.mirror.paths.n > 0, 1);
		config_free(&w);
	}
}

/*
 * Mistakes in the warden's keywords, or in the checks that guard the netlock: both refuse,
 * with the same message.
 */
static void warden_wrong_both_refuse(void **state)
{
	static const char *const files[] = {
		"ssh-port 9005\nagent-ports 9000-9009\n",
		"proxy-port 9000\nagent-ports 9000-9009\n",
		"agent-ports 18000-18500\n",
		"agent-ports 9009-9000\n",
		"agent-ports 80-90\n",
		"ssh-port 3128\n",
		"opencode-port 9000\nagent-ports 9000-9009\n",
		"opencode-port 2222\nssh-port 2222\n",
		"opencode-port 65535\nproject /srv/a\nproject /srv/b\n",
		"agent alice\nowner alice\n",
		"agent root\n",
		"agent Bad\n",
		"project relative\n",
		"project /srv/a/\n",
		"project /x/shop\nproject /y/shop\n",
		"project /srv/.hidden\n",
		"opencode-bin bin/opencode\n",
		"limit-memory 1M\n",
		"limit-tasks 1\n",
		"limit-cpu many\n",
		"ssh-port 22\nssh-port 2222\n",
		"agent-ports 9000-9009 9100-9109\n",
		"mirror\n",
		"agnet bot\n",
		"owner \"alice\n",
	};

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct ocsb_config w, f;
		char werr[512], ferr[512];

		if (read_full(&f, files[i], ferr, sizeof(ferr)) == 0)
			fail_msg("the whole reader accepted file %zu", i);
		if (read_warden(&w, files[i], werr, sizeof(werr)) == 0)
			fail_msg("the warden's reader accepted file %zu", i);
		assert_string_equal(werr, ferr);
		config_free(&w);
		config_free(&f);
	}
}

/* The two tables know the same keywords, and the shared ones alike. */
static void same_keywords(void **state)
{
	size_t nf = 0, nw = 0;

	for (const struct conf_kw *f = config_keywords; f->name; f++, nf++) {
		const struct conf_kw *w = config_warden_keywords;

		while (w->name && strcmp(w->name, f->name) != 0)
			w++;
		if (!w->name)
			fail_msg("keyword '%s' is not in the warden's table", f->name);
		if (w->handler == f->handler)
			assert_true(w->min_args == f->min_args && w->max_args == f->max_args &&
				    w->flags == f->flags);
		else if (w->handler == NULL)
			assert_true(w->min_args == 0 && w->max_args == CONF_MAX_ARGS && !w->flags);
		else
			assert_string_equal(f->name, "mirror");
	}
	for (const struct conf_kw *w = config_warden_keywords; w->name; w++)
		nw++;
	assert_int_equal(nf, nw);
}

/* Both readers log and refuse a missing file, or one that is not root's. */
static void files_refused(void **state)
{
	struct ocsb_config c;
	char path[PATH_MAX + 32];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/missing.conf", unit_dir);
	assert_int_equal(config_load_warden(&c, path), -1);
	config_free(&c);
	assert_int_equal(config_load_logged(&c, path), -1);
	config_free(&c);
	if (geteuid() == 0)
		return;
	snprintf(path, sizeof(path), "%s/ocsb.conf", unit_dir);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fputs("owner alice\n", fp);
	fclose(fp);
	assert_int_equal(config_load_warden(&c, path), -1);
	config_free(&c);
	assert_int_equal(config_load_logged(&c, path), -1);
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_values),
		cmocka_unit_test(others_wrong_warden_reads),
		cmocka_unit_test(warden_wrong_both_refuse),
		cmocka_unit_test(same_keywords),
		cmocka_unit_test_setup_teardown(files_refused, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
