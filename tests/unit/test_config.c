/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include "config.h"
#include "gitident.h"
#include "opencode.h"

/* Parse `text` over the defaults; -1 with err set on error. */
static int parse(struct ocsb_config *c, const char *text, char *err, size_t errlen)
{
	config_defaults(c);
	err[0] = '\0';
	return config_parse_buf(c, text, strlen(text), "ocsb.conf", err, errlen);
}

static void good_file(void **state)
{
	const char *text = "# every keyword once, projects and keys twice\n"
			   "agent bot-1\n"
			   "owner alice\n"
			   "project /home/alice/code/shop\n"
			   "project \"/home/alice/my code/web\"\n"
			   "key /root/alice.pub\n"
			   "key '/root/bob laptop.pub'\n"
			   "shell /bin/zsh\n"
			   "ssh-port 2222\n"
			   "proxy-port 8080\n"
			   "agent-ports 9000-9009\n"
			   "opencode-bin /usr/local/lib/oc/bin/opencode\n"
			   "opencode-port 5000\n";
	struct ocsb_config c;
	char err[512];

	assert_int_equal(parse(&c, text, err, sizeof(err)), 0);
	assert_string_equal(c.agent, "bot-1");
	assert_string_equal(c.owner, "alice");
	assert_int_equal(c.projects.n, 2);
	assert_string_equal(c.projects.v[0], "/home/alice/code/shop");
	assert_string_equal(c.projects.v[1], "/home/alice/my code/web");
	assert_int_equal(c.keys.n, 2);
	assert_string_equal(c.keys.v[0], "/root/alice.pub");
	assert_string_equal(c.keys.v[1], "/root/bob laptop.pub");
	assert_string_equal(c.shell, "/bin/zsh");
	assert_int_equal(c.ssh_port, 2222);
	assert_int_equal(c.proxy_port, 8080);
	assert_int_equal(c.ports_lo, 9000);
	assert_int_equal(c.ports_hi, 9009);
	assert_string_equal(c.opencode_bin, "/usr/local/lib/oc/bin/opencode");
	assert_true(c.opencode_bin_set);
	assert_int_equal(c.opencode_port, 5000);
	assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
	config_free(&c);
}

static void empty_file_gives_defaults(void **state)
{
	struct ocsb_config c;
	char err[512];

	assert_int_equal(parse(&c, "# nothing set\n", err, sizeof(err)), 0);
	assert_string_equal(c.agent, OCSB_DEFAULT_AGENT);
	assert_string_equal(c.owner, "");
	assert_int_equal(c.projects.n, 0);
	assert_string_equal(c.shell, OCSB_DEFAULT_SHELL);
	assert_int_equal(c.ssh_port, OCSB_DEFAULT_SSH_PORT);
	assert_int_equal(c.proxy_port, OCSB_DEFAULT_PROXY_PORT);
	assert_string_equal(c.opencode_bin, OCSB_OPENCODE_BIN);
	assert_false(c.opencode_bin_set);
	assert_int_equal(c.opencode_port, OCSB_DEFAULT_OPENCODE_PORT);
	assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
	config_free(&c);
}

/* The bad line is always line 3, after a comment and a good line. */
static void expect_bad(const char *line, const char *want)
{
	char text[512], err[512];
	struct ocsb_config c;

	snprintf(text, sizeof(text), "# test\nproject /srv/a\n%s\n", line);
	if (parse(&c, text, err, sizeof(err)) != -1)
		fail_msg("accepted: %s", line);
	assert_err_prefix(err, want);
	config_free(&c);
}

static void bad_agent(void **state)
{
	char line[64];

	expect_bad("agent Root", "ocsb.conf:3: 'Root' is not a valid user name");
	expect_bad("agent 'a b'", "ocsb.conf:3: 'a b' is not a valid user name");
	expect_bad("agent a b", "ocsb.conf:3: 'agent' takes 1 value, got 2");
	expect_bad("agent -x", "ocsb.conf:3: '-x' is not a valid user name");
	expect_bad("agent 1abc", "ocsb.conf:3: '1abc' is not a valid user name");
	expect_bad("agent a$", "ocsb.conf:3: 'a$' is not a valid user name");
	expect_bad("agent ''", "ocsb.conf:3: '' is not a valid user name");
	/* 33 characters: one too many. */
	snprintf(line, sizeof(line), "agent a%s", "bcdefghijklmnopqrstuvwxyz0123456");
	assert_int_equal(strlen(line), 6 + 33);
	expect_bad(line, "ocsb.conf:3: 'abcdefghijklmnopqrstuvwxyz0123456' is not a valid");
	expect_bad("owner Alice", "ocsb.conf:3: 'Alice' is not a valid user name");
}

static void agent_32_chars(void **state)
{
	const char *name = "abcdefghijklmnopqrstuvwxyz012345";
	struct ocsb_config c;
	char text[64], err[512];

	assert_int_equal(strlen(name), 32);
	snprintf(text, sizeof(text), "agent %s\n", name);
	assert_int_equal(parse(&c, text, err, sizeof(err)), 0);
	assert_string_equal(c.agent, name);
	config_free(&c);
}

static void bad_paths(void **state)
{
	expect_bad("project code/shop", "ocsb.conf:3: 'code/shop' is not an absolute path");
	expect_bad("project ''", "ocsb.conf:3: '' is not an absolute path");
	expect_bad("key id.pub", "ocsb.conf:3: 'id.pub' is not an absolute path");
	expect_bad("shell bash", "ocsb.conf:3: 'bash' is not an absolute path");
	expect_bad("project /srv/a", "ocsb.conf:3: project '/srv/a' listed twice");
	expect_bad("project '/srv/a\"b'",
		"ocsb.conf:3: project '/srv/a\"b': quotes and backslashes are not supported");
	expect_bad("project '/srv/a\\b'",
		"ocsb.conf:3: project '/srv/a\\b': quotes and backslashes are not supported");
	expect_bad("key '/root/\"k.pub'",
		"ocsb.conf:3: key '/root/\"k.pub': quotes and backslashes are not supported");
}

static void bad_ports(void **state)
{
	expect_bad("ssh-port 0", "ocsb.conf:3: 0 is out of range (1..65535)");
	expect_bad("ssh-port 70000", "ocsb.conf:3: 70000 is out of range (1..65535)");
	expect_bad("proxy-port 65536", "ocsb.conf:3: 65536 is out of range (1..65535)");
	expect_bad("ssh-port -22", "ocsb.conf:3: '-22' is not a number");
	expect_bad("ssh-port", "ocsb.conf:3: 'ssh-port' takes 1 value, got 0");
	expect_bad("opencode-port 80", "ocsb.conf:3: 80 is out of range (1024..65535)");
	expect_bad("opencode-port 65536", "ocsb.conf:3: 65536 is out of range (1024..65535)");
	expect_bad("opencode-port x", "ocsb.conf:3: 'x' is not a number");
	expect_bad(
		"opencode-bin bin/opencode", "ocsb.conf:3: 'bin/opencode' is not an absolute path");
	expect_bad("opencode-bin /opt/oc/",
		"ocsb.conf:3: opencode-bin '/opt/oc/': give the path without a trailing '/'");
	expect_bad("opencode-bin '/opt/a\"b'",
		"ocsb.conf:3: opencode-bin '/opt/a\"b': quotes and backslashes are not supported");
}

static void port_bounds(void **state)
{
	struct ocsb_config c;
	char err[512];

	assert_int_equal(parse(&c, "ssh-port 1\nproxy-port 65535\n", err, sizeof(err)), 0);
	assert_int_equal(c.ssh_port, 1);
	assert_int_equal(c.proxy_port, 65535);
	config_free(&c);
}

static void bad_keywords(void **state)
{
	expect_bad("ssh_port 22", "ocsb.conf:3: unknown keyword 'ssh_port'");
	expect_bad("Agent bot", "ocsb.conf:3: unknown keyword 'Agent'");
	expect_bad("include /etc/other.conf", "ocsb.conf:3: unknown keyword 'include'");
	expect_bad("agent-ports 9000", "ocsb.conf:3: '9000' is not a port range LOW-HIGH");
	expect_bad("agent-ports 9010-9000", "ocsb.conf:3: port range 9010-9000 is empty");
	expect_bad("agent-ports 80-90", "ocsb.conf:3: 80 is out of range (1024..65535)");
}

/* agent-ports is open to every agent: never over the route ports (18400-18415). */
static void agent_ports_beside_routes(void **state)
{
	struct ocsb_config c;
	char err[512];

	expect_bad("agent-ports 18000-18999",
		"ocsb.conf:3: agent-ports 18000-18999 overlaps the injector's route ports "
		"18400-18415: choose a range outside them (e.g. 18000-18399 or 18416-18999)");
	expect_bad("agent-ports 18415-18415", "ocsb.conf:3: agent-ports 18415-18415 overlaps");
	expect_bad("agent-ports 18300-18400", "ocsb.conf:3: agent-ports 18300-18400 overlaps");
	/* Controls: the adjacent ranges either side. */
	assert_int_equal(parse(&c, "agent-ports 18000-18399\n", err, sizeof(err)), 0);
	assert_int_equal(c.ports_hi, 18399);
	config_free(&c);
	assert_int_equal(parse(&c, "agent-ports 18416-18999\n", err, sizeof(err)), 0);
	assert_int_equal(c.ports_lo, 18416);
	config_free(&c);
}

static void duplicates(void **state)
{
	struct ocsb_config c;
	char err[512];

	assert_int_equal(parse(&c, "agent a\n\nagent b\n", err, sizeof(err)), -1);
	assert_string_equal(err, "ocsb.conf:3: 'agent' given twice (first on line 1)");
	config_free(&c);
	assert_int_equal(parse(&c, "ssh-port 2\n#\n#\nssh-port 3\n", err, sizeof(err)), -1);
	assert_string_equal(err, "ocsb.conf:4: 'ssh-port' given twice (first on line 1)");
	config_free(&c);
}

/* ---- config_validate ---- */

static int validate(struct ocsb_config *c, char *err, size_t errlen)
{
	err[0] = '\0';
	return config_validate(c, err, errlen);
}

static void validate_users(void **state)
{
	struct ocsb_config c;
	char err[512];

	config_defaults(&c);
	snprintf(c.owner, sizeof(c.owner), "alice");
	assert_int_equal(validate(&c, err, sizeof(err)), 0);
	snprintf(c.agent, sizeof(c.agent), "alice");
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err, "the agent and the owner are the same user 'alice'");
	snprintf(c.agent, sizeof(c.agent), "root");
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err, "the agent cannot be root");
	config_free(&c);
}

static void validate_ports(void **state)
{
	struct ocsb_config c;
	char err[512];

	config_defaults(&c);
	c.ssh_port = 3128;
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err, "ssh-port and proxy-port are both 3128");
	c.ssh_port = 3129;
	assert_int_equal(validate(&c, err, sizeof(err)), 0);
	config_free(&c);
}

/* One OpenCode port per project from opencode-port up: none may be taken already. */
static void validate_opencode_ports(void **state)
{
	struct ocsb_config c;
	char err[512];

	config_defaults(&c);
	assert_int_equal(validate(&c, err, sizeof(err)), 0);
	c.opencode_port = 3128;
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err,
		"the OpenCode ports 3128-3128 (opencode-port, one per project) include proxy-port "
		"3128");
	/* Two projects: 3127 and 3128. */
	c.opencode_port = 3127;
	assert_int_equal(validate(&c, err, sizeof(err)), 0);
	assert_int_equal(strv_push(&c.projects, "/home/alice/a"), 0);
	assert_int_equal(strv_push(&c.projects, "/home/alice/b"), 0);
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err,
		"the OpenCode ports 3127-3128 (opencode-port, one per project) include proxy-port "
		"3128");
	c.opencode_port = 2221;
	c.ssh_port = 2222;
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err,
		"the OpenCode ports 2221-2222 (opencode-port, one per project) include ssh-port "
		"2222");
	c.opencode_port = 8099;
	c.ports_lo = 8000;
	c.ports_hi = 8099;
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err,
		"the OpenCode ports 8099-8100 (opencode-port, one per project) "
		"overlap agent-ports 8000-8099");
	c.opencode_port = 8100;
	assert_int_equal(validate(&c, err, sizeof(err)), 0);
	c.opencode_port = 65535;
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err,
		"opencode-port 65535: the OpenCode ports (one per project, 2) "
		"must lie in 1024..65535");
	/* opencode-bin may be set from code too: the same form rules as in the file. */
	c.opencode_port = 4096;
	snprintf(c.opencode_bin, sizeof(c.opencode_bin), "opencode");
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err, "'opencode' is not an absolute path");
	config_free(&c);
}

static void validate_folder_names(void **state)
{
	struct ocsb_config c;
	char err[512];

	config_defaults(&c);
	assert_int_equal(strv_push(&c.projects, "/home/alice/code/shop"), 0);
	assert_int_equal(strv_push(&c.projects, "/home/alice/web"), 0);
	assert_int_equal(validate(&c, err, sizeof(err)), 0);
	assert_int_equal(strv_push(&c.projects, "/srv/other/shop"), 0);
	assert_int_equal(validate(&c, err, sizeof(err)), -1);
	assert_string_equal(err,
		"projects '/home/alice/code/shop' and '/srv/other/shop' share the "
		"folder name 'shop'");
	config_free(&c);
}

static void validate_bad_folder_names(void **state)
{
	static const char *const bad[] = {
		"/home/alice/.hidden", "/home/alice/..", "/home/a/.", "/home/alice/my code"};
	struct ocsb_config c;
	char err[512];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		config_defaults(&c);
		assert_int_equal(strv_push(&c.projects, bad[i]), 0);
		if (validate(&c, err, sizeof(err)) != -1)
			fail_msg("project '%s' accepted", bad[i]);
		assert_non_null(strstr(err, "folder name"));
		config_free(&c);
	}
}

/*
 * The clone is named after the last component: "/srv/b/shop/" is "shop" too, and
 * "/" has no name at all. Either normalising or refusing such paths is fine; letting
 * them through is not (repos.c would use the whole path as the clone's name).
 */
static void validate_trailing_slash(void **state)
{
	struct ocsb_config c;
	char err[512];

	int r;

	config_defaults(&c);
	assert_int_equal(strv_push(&c.projects, "/home/alice/shop"), 0);
	assert_int_equal(strv_push(&c.projects, "/srv/b/shop/"), 0);
	r = validate(&c, err, sizeof(err));
	config_free(&c);
	if (r == 0)
		fail_msg(
			"'/home/alice/shop' and '/srv/b/shop/' both accepted (same folder 'shop')");

	config_defaults(&c);
	assert_int_equal(strv_push(&c.projects, "/"), 0);
	r = validate(&c, err, sizeof(err));
	config_free(&c);
	if (r == 0)
		fail_msg("project '/' accepted: it has no folder name");
}

/*
 * prov.c puts --project and --key values straight into the config, so pass 2 must
 * refuse what pass 1 refuses in the file: relative paths, and quotes or backslashes
 * that config_render would write unescaped between double quotes.
 */
static void validate_paths_not_from_file(void **state)
{
	static const struct {
		const char *project, *key;
	} bad[] = {
		{"code/shop", NULL},
		{NULL, "alice.pub"},
		{"/home/a\"b/shop", NULL},
		{"/home/a\\b/shop", NULL},
		{NULL, "/root/k\".pub"},
	};
	struct ocsb_config c;
	char err[512];

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		int r;

		config_defaults(&c);
		if (bad[i].project)
			assert_int_equal(strv_push(&c.projects, bad[i].project), 0);
		if (bad[i].key)
			assert_int_equal(strv_push(&c.keys, bad[i].key), 0);
		r = validate(&c, err, sizeof(err));
		config_free(&c);
		if (r == 0)
			fail_msg("config_validate accepted %s '%s'",
				bad[i].project ? "project" : "key",
				bad[i].project ? bad[i].project : bad[i].key);
	}
}

/* ---- config_render ---- */

static void assert_same_config(const struct ocsb_config *a, const struct ocsb_config *b)
{
	assert_string_equal(a->agent, b->agent);
	assert_string_equal(a->owner, b->owner);
	assert_int_equal(a->projects.n, b->projects.n);
	for (size_t i = 0; i < a->projects.n; i++)
		assert_string_equal(a->projects.v[i], b->projects.v[i]);
	assert_int_equal(a->keys.n, b->keys.n);
	for (size_t i = 0; i < a->keys.n; i++)
		assert_string_equal(a->keys.v[i], b->keys.v[i]);
	assert_string_equal(a->shell, b->shell);
	assert_int_equal(a->git_author_agent, b->git_author_agent);
	assert_int_equal(a->ssh_port, b->ssh_port);
	assert_int_equal(a->proxy_port, b->proxy_port);
	assert_string_equal(a->opencode_bin, b->opencode_bin);
	assert_int_equal(a->opencode_bin_set, b->opencode_bin_set);
	assert_int_equal(a->opencode_port, b->opencode_port);
	assert_int_equal(a->limit_memory, b->limit_memory);
	assert_int_equal(a->limit_tasks, b->limit_tasks);
	assert_int_equal(a->limit_cpu, b->limit_cpu);
}

/* Render c, parse the result over the defaults, compare. */
static void round_trip(const struct ocsb_config *c)
{
	struct ocsb_config back;
	struct buf out = {0};
	char err[512];

	assert_int_equal(config_render(c, &out), 0);
	assert_non_null(out.data);
	config_defaults(&back);
	if (config_parse_buf(&back, out.data, out.len, "rendered", err, sizeof(err)) < 0) {
		fprintf(stderr, "%s", out.data);
		buf_free(&out);
		config_free(&back);
		fail_msg("the rendered file (above) does not parse: %s", err);
	}
	assert_same_config(c, &back);
	config_free(&back);
	buf_free(&out);
}

static void render_round_trip(void **state)
{
	struct ocsb_config c;

	config_defaults(&c);
	round_trip(&c);
	snprintf(c.agent, sizeof(c.agent), "bot-7");
	snprintf(c.owner, sizeof(c.owner), "alice");
	assert_int_equal(strv_push(&c.projects, "/home/alice/code/shop"), 0);
	assert_int_equal(strv_push(&c.projects, "/home/alice/my code/it's #1"), 0);
	assert_int_equal(strv_push(&c.keys, "/root/alice laptop.pub"), 0);
	snprintf(c.shell, sizeof(c.shell), "/usr/bin/zsh");
	c.ssh_port = 2222;
	c.proxy_port = 8080;
	c.git_author_agent = 1;
	round_trip(&c);
	snprintf(c.opencode_bin, sizeof(c.opencode_bin), "/srv/open code/bin/opencode");
	c.opencode_bin_set = 1;
	c.opencode_port = 5000;
	round_trip(&c);
	config_free(&c);
}

/* A shell the parser accepts must come back the same, or the parser must refuse it. */
static void render_round_trip_shell(void **state)
{
	struct ocsb_config c;
	char err[512];

	if (parse(&c, "shell \"/opt/my shell/bin/sh\"\n", err, sizeof(err)) < 0) {
		config_free(&c);
		return;
	}
	round_trip(&c);
	config_free(&c);
}

/* The mirrored paths of text, rendered and parsed again: the same paths. */
static void mirror_round_trip(const char *text)
{
	struct ocsb_config c, back;
	struct buf out = {0};
	char err[512];

	if (parse(&c, text, err, sizeof(err)) < 0)
		fail_msg("refused: %s", err);
	assert_int_equal(config_render(&c, &out), 0);
	config_defaults(&back);
	if (config_parse_buf(&back, out.data, out.len, "rendered", err, sizeof(err)) < 0)
		fail_msg("the rendered file does not parse: %s", err);
	assert_int_equal(back.mirror.set, 1);
	assert_int_equal(back.mirror.paths.n, c.mirror.paths.n);
	for (size_t i = 0; i < c.mirror.paths.n; i++)
		assert_string_equal(back.mirror.paths.v[i], c.mirror.paths.v[i]);
	buf_free(&out);
	config_free(&c);
	config_free(&back);
}

/*
 * Paths of several `mirror` lines were rendered on one line, which the parser refuses
 * past 31 values or 4096 bytes: ocsb-provision wrote a file it could not read back (found
 * by tests/fuzz/fuzz_config.c, regress-mirror-many-paths). A path named "none" must not
 * end up alone on a line, where it means nothing (regress-mirror-none-path).
 */
static void render_many_mirror_paths(void **state)
{
	struct buf text = {0};
	char path[1001];

	(void)state;
	for (int line = 0; line < 2; line++) {
		assert_int_equal(buf_puts(&text, "mirror"), 0);
		for (int i = 0; i < 20; i++)
			assert_int_equal(buf_printf(&text, " .p%d", line * 20 + i), 0);
		assert_int_equal(buf_puts(&text, "\n"), 0);
	}
	mirror_round_trip(text.data);
	/* Long paths: three fit in one line of the file, five do not. */
	text.len = 0;
	memset(path, 'x', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	for (int line = 0; line < 2; line++) {
		assert_int_equal(buf_puts(&text, "mirror"), 0);
		for (int i = 0; i < 3; i++) {
			path[0] = (char)('a' + line * 3 + i);
			assert_int_equal(buf_printf(&text, " %s", path), 0);
		}
		assert_int_equal(buf_puts(&text, "\n"), 0);
	}
	mirror_round_trip(text.data);
	text.len = 0;
	assert_int_equal(buf_puts(&text, "mirror"), 0);
	for (int i = 0; i < 30; i++)
		assert_int_equal(buf_printf(&text, " .q%d", i), 0);
	assert_int_equal(buf_puts(&text, "\nmirror .q30 none\n"), 0);
	mirror_round_trip(text.data);
	buf_free(&text);
}

static void render_documents_every_keyword(void **state)
{
	static const char *const kws[] = {"agent", "owner", "project", "key", "shell",
		"agent-git-author", "ssh-port", "proxy-port", "agent-ports", "opencode-bin",
		"opencode-port", "limit-memory", "limit-tasks", "limit-cpu"};
	struct ocsb_config c;
	struct buf out = {0};

	config_defaults(&c);
	assert_int_equal(config_render(&c, &out), 0);
	/* Each keyword is set or shown commented out, right after a line explaining it. */
	for (size_t i = 0; i < ARRAY_SIZE(kws); i++) {
		char set[32], off[32];
		long at;

		snprintf(set, sizeof(set), "\n%s ", kws[i]);
		snprintf(off, sizeof(off), "\n#%s ", kws[i]);
		at = strstr(out.data, set)	? strstr(out.data, set) - out.data
			: strstr(out.data, off) ? strstr(out.data, off) - out.data
						: -1;
		if (at < 0)
			fail_msg("'%s' is not in the rendered file:\n%s", kws[i], out.data);
		/* The line before: out.data[at] is its newline. */
		while (at > 0 && out.data[at - 1] != '\n')
			at--;
		if (strncmp(out.data + at, "# ", 2) != 0)
			fail_msg("no comment line before '%s':\n%s", kws[i], out.data);
	}
	buf_free(&out);
	config_free(&c);
}

/* agent-git-author: owner (the default) or agent, once; and the identity it sets. */
static void agent_git_author(void **state)
{
	char env[GITIDENT_ENV_MAX][GITIDENT_LINE], name[96], email[160], err[512];
	struct ocsb_config c;

	assert_int_equal(parse(&c, "agent-git-author agent\n", err, sizeof(err)), 0);
	assert_true(c.git_author_agent);
	config_free(&c);
	assert_int_equal(parse(&c, "agent-git-author owner\n", err, sizeof(err)), 0);
	assert_false(c.git_author_agent);
	config_free(&c);
	assert_int_equal(parse(&c, "\n", err, sizeof(err)), 0);
	assert_false(c.git_author_agent);
	config_free(&c);
	expect_bad("agent-git-author alice", "ocsb.conf:3: agent-git-author 'alice': 'owner'");
	expect_bad("agent-git-author", "ocsb.conf:3:");

	gitident_agent("ai-dev", "Box-7.example.org", name, sizeof(name), email, sizeof(email));
	assert_string_equal(name, "ai-dev (ocsb agent)");
	assert_string_equal(email, "ai-dev@box-7.ocsb");
	/* A host name git would carry into every commit as it is: not taken. */
	gitident_agent("ai-dev", "a\nb", name, sizeof(name), email, sizeof(email));
	assert_string_equal(email, "ai-dev@localhost.ocsb");
	gitident_agent("ai-dev", "-x", name, sizeof(name), email, sizeof(email));
	assert_string_equal(email, "ai-dev@localhost.ocsb");
	assert_int_equal(gitident_env("bot", "h", 0, env), 2);
	assert_string_equal(env[0], "GIT_COMMITTER_NAME=bot (ocsb agent)");
	assert_string_equal(env[1], "GIT_COMMITTER_EMAIL=bot@h.ocsb");
	assert_int_equal(gitident_env("bot", "h", 1, env), 4);
	assert_string_equal(env[2], "GIT_AUTHOR_NAME=bot (ocsb agent)");
	assert_string_equal(env[3], "GIT_AUTHOR_EMAIL=bot@h.ocsb");
}

static void limits(void **state)
{
	struct ocsb_config c;
	char err[512];
	uint64_t mem;
	unsigned tasks, cpu;

	assert_int_equal(
		parse(&c, "limit-memory 512M\nlimit-tasks 300\nlimit-cpu 150\n", err, sizeof(err)),
		0);
	config_limits(&c, &mem, &tasks, &cpu);
	assert_int_equal(mem, 512ULL << 20);
	assert_int_equal(tasks, 300);
	assert_int_equal(cpu, 150);
	config_free(&c);

	assert_int_equal(parse(&c, "limit-memory none\nlimit-tasks none\nlimit-cpu none\n", err,
				 sizeof(err)),
		0);
	config_limits(&c, &mem, &tasks, &cpu);
	assert_int_equal(mem, 0);
	assert_int_equal(tasks, 0);
	assert_int_equal(cpu, 0);
	config_free(&c);

	/* auto: half the memory, 4096 tasks, half the CPUs (at least one). */
	assert_int_equal(parse(&c, "limit-memory auto\n", err, sizeof(err)), 0);
	config_limits(&c, &mem, &tasks, &cpu);
	assert_true(mem > 0);
	assert_true(mem < (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)sysconf(_SC_PAGESIZE));
	assert_int_equal(tasks, 4096);
	assert_true(cpu >= 100);
	config_free(&c);

	assert_int_equal(parse(&c, "\nlimit-memory 5X\n", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ocsb.conf:2: limit-memory '5X'"));
	config_free(&c);
	assert_int_equal(parse(&c, "limit-memory 1M\n", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "at least 16M"));
	config_free(&c);
	assert_int_equal(parse(&c, "limit-tasks 10\n", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "ocsb.conf:1: limit-tasks: "));
	config_free(&c);
	assert_int_equal(parse(&c, "limit-cpu 99999999999\n", err, sizeof(err)), -1);
	config_free(&c);
	assert_int_equal(parse(&c, "limit-memory 99999999999T\n", err, sizeof(err)), -1);
	config_free(&c);
}

static void limits_round_trip(void **state)
{
	struct ocsb_config c;
	char err[512];

	if (parse(&c, "limit-memory 1G\nlimit-tasks none\nlimit-cpu 50\n", err, sizeof(err)) < 0)
		fail_msg("%s", err);
	round_trip(&c);
	config_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_file),
		cmocka_unit_test(empty_file_gives_defaults),
		cmocka_unit_test(bad_agent),
		cmocka_unit_test(agent_32_chars),
		cmocka_unit_test(bad_paths),
		cmocka_unit_test(bad_ports),
		cmocka_unit_test(port_bounds),
		cmocka_unit_test(bad_keywords),
		cmocka_unit_test(agent_ports_beside_routes),
		cmocka_unit_test(duplicates),
		cmocka_unit_test(validate_users),
		cmocka_unit_test(validate_ports),
		cmocka_unit_test(validate_opencode_ports),
		cmocka_unit_test(validate_folder_names),
		cmocka_unit_test(validate_bad_folder_names),
		cmocka_unit_test(validate_trailing_slash),
		cmocka_unit_test(validate_paths_not_from_file),
		cmocka_unit_test(render_round_trip),
		cmocka_unit_test(render_round_trip_shell),
		cmocka_unit_test(render_many_mirror_paths),
		cmocka_unit_test(render_documents_every_keyword),
		cmocka_unit_test(agent_git_author),
		cmocka_unit_test(limits),
		cmocka_unit_test(limits_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
