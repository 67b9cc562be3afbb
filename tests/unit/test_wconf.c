/* SPDX-License-Identifier: MIT */
/*
 * The warden's values of ocsb.conf (wconf.h): what ocsb-provision --warden-config prints
 * for a file the whole reader accepts is read back by the warden to the same values, the
 * limits resolved; a record that is cut short, reordered, out of bounds or followed by
 * anything is refused whole; a refusal line is handed on as the reason.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "config.h"
#include "opencode.h"
#include "wconf.h"

static const char *conf_text = "agent ai-dev\n"
			       "owner dev\n"
			       "project /home/dev/code/app\n"
			       "project \"/home/dev/my code/app2\"\n"
			       "proxy-port 3130\n"
			       "agent-ports 8000-8099\n"
			       "opencode-port 5000\n"
			       "limit-memory 512M\n"
			       "limit-tasks 400\n"
			       "limit-cpu 150\n"
			       "mirror ~/.config/opencode\n";

/* The record of conf_text, as the one-shot renders it. */
static void record_of(const char *text, struct buf *out)
{
	struct ocsb_config c;
	char err[1024];

	config_defaults(&c);
	assert_int_equal(
		config_parse_buf(&c, text, strlen(text), "ocsb.conf", err, sizeof(err)), 0);
	if (config_validate(&c, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(config_render_warden(&c, out), 0);
	config_free(&c);
}

static int parse(const char *rec, struct wconf *w, char *err, size_t n)
{
	return wconf_parse(rec, strlen(rec), w, err, n);
}

static void round_trip(void **state)
{
	struct buf b = {0};
	struct wconf w;
	char err[256];

	(void)state;
	record_of(conf_text, &b);
	assert_int_equal(wconf_parse(b.data, b.len, &w, err, sizeof(err)), 0);
	assert_string_equal(w.agent, "ai-dev");
	assert_string_equal(w.owner, "dev");
	assert_int_equal(w.proxy_port, 3130);
	assert_int_equal(w.ports_lo, 8000);
	assert_int_equal(w.ports_hi, 8099);
	assert_int_equal(w.opencode_port, 5000);
	assert_string_equal(w.opencode_bin, OCSB_OPENCODE_BIN);
	assert_true(w.memory_max == 512ULL << 20);
	assert_int_equal(w.tasks_max, 400);
	assert_int_equal(w.cpu_percent, 150);
	assert_int_equal(w.mirror, 1);
	assert_int_equal(w.projects.n, 2);
	assert_string_equal(w.projects.v[0], "/home/dev/code/app");
	assert_string_equal(w.projects.v[1], "/home/dev/my code/app2");
	wconf_free(&w);
	buf_free(&b);
}

/* Limits left to `auto` reach the warden resolved, never as the marker; none is 0. */
static void limits_resolved(void **state)
{
	struct buf b = {0};
	struct wconf w;
	char err[256];

	(void)state;
	record_of("agent ai-dev\nowner dev\nlimit-tasks none\nmirror none\n", &b);
	assert_int_equal(wconf_parse(b.data, b.len, &w, err, sizeof(err)), 0);
	assert_true(w.memory_max > 0 && w.memory_max != OCSB_LIMIT_AUTO);
	assert_int_equal(w.tasks_max, 0);
	assert_true(w.cpu_percent >= 100);
	assert_int_equal(w.mirror, 0);
	assert_int_equal(w.projects.n, 0);
	wconf_free(&w);
	buf_free(&b);
}

static void refusal_handed_on(void **state)
{
	struct wconf w;
	char err[256];

	(void)state;
	assert_int_equal(parse("error /etc/ocsb/ocsb.conf:3: unknown keyword 'prxy-port'\n", &w,
				 err, sizeof(err)),
		-1);
	assert_string_equal(err, "/etc/ocsb/ocsb.conf:3: unknown keyword 'prxy-port'");
}

/* Each mutation of a good record is refused whole, with the line it stopped at. */
static void malformed_refused(void **state)
{
	static const char *const bad[][2] = {
		{"ocsb-warden-config 1\n", "ocsb-warden-config 2\n"},
		{"agent ai-dev\n", "agent root;x\n"},
		{"agent ai-dev\n", ""},
		{"proxy-port 3130\n", "proxy-port 0\n"},
		{"proxy-port 3130\n", "proxy-port 65536\n"},
		{"proxy-port 3130\n", "proxy-port 3130 \n"},
		{"proxy-port 3130\n", "proxy-port -1\n"},
		{"agent-ports 8000 8099\n", "agent-ports 8099 8000\n"},
		{"agent-ports 8000 8099\n", "agent-ports 8000\n"},
		{"limits 536870912 400 150\n", "limits 536870912 400\n"},
		{"limits 536870912 400 150\n", "limits 536870912 400 99999999999\n"},
		{"mirror 1\n", "mirror 2\n"},
		{"project /home/dev/code/app\n", "project relative/app\n"},
		{"project /home/dev/code/app\n", "project /home/dev/code/.hidden\n"},
		{"end\n", ""},
		{"end\n", "end\nproject /x\n"},
		{"opencode-port 5000\n", "owner dev\n"},
	};
	struct buf b = {0};
	char err[256];

	(void)state;
	record_of(conf_text, &b);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char rec[8192], *at = strstr(b.data, bad[i][0]);
		struct wconf w;

		assert_non_null(at);
		snprintf(rec, sizeof(rec), "%.*s%s%s", (int)(at - b.data), b.data, bad[i][1],
			at + strlen(bad[i][0]));
		if (parse(rec, &w, err, sizeof(err)) != -1)
			fail_msg("accepted: %s", rec);
		assert_non_null(strstr(err, "malformed record, line "));
	}
	/* The control: the record itself passes. */
	{
		struct wconf w;

		assert_int_equal(parse(b.data, &w, err, sizeof(err)), 0);
		wconf_free(&w);
	}
	buf_free(&b);
	/* Not text, or too long. */
	assert_int_equal(wconf_parse("ocsb\0", 5, &(struct wconf){0}, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(limits_resolved),
		cmocka_unit_test(refusal_handed_on),
		cmocka_unit_test(malformed_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
