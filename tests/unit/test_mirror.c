/* SPDX-License-Identifier: MIT */
/*
 * The mirror: secret scan, .gitconfig subset, link containment, config keywords, the link
 * maker's output lines. The engine itself: test_mirror_engine.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

#include "config.h"
#include "fileops.h"
#include "mirror.h"
#include "mirror_int.h"

#define ANT "sk-ant-api03-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

static int scan(const char *name, const char *text, struct buf *out, struct strv *notes)
{
	return mirror_scan(name, text, strlen(text), out, notes);
}

static int notes_have(const struct strv *n, const char *needle)
{
	for (size_t i = 0; i < n->n; i++)
		if (strstr(n->v[i], needle))
			return 1;
	return 0;
}

/* ---- secret scan ---- */

static void json_provider_key_redacted(void **state)
{
	const char *in = "{\n  \"$schema\": \"https://opencode.ai/config.json\",\n"
			 "  \"provider\": {\"anthropic\": {\"options\": {\"apiKey\": \"" ANT
			 "\"}}},\n  \"model\": \"anthropic/claude\"\n}\n";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(scan("opencode.json", in, &out, &notes), MS_REDACTED);
	assert_null(strstr(out.data, "sk-ant-"));
	assert_non_null(strstr(out.data, "\"apiKey\": \"{env:ANTHROPIC_API_KEY}\""));
	/* everything else byte for byte */
	assert_non_null(strstr(out.data, "\"model\": \"anthropic/claude\"\n}\n"));
	assert_int_equal(notes.n, 1);
	assert_true(notes_have(&notes, "provider.anthropic.options.apiKey"));
	assert_true(notes_have(&notes, "ocsb secrets set ANTHROPIC_API_KEY"));
	assert_false(notes_have(&notes, "AAAA")); /* never the value */
	buf_free(&out);
	strv_free(&notes);
}

/*
 * A short Anthropic key reads as OpenAI's "sk-" form; under provider.anthropic it is
 * Anthropic's all the same (issue 15: it was replaced by {env:OPENAI_API_KEY}).
 */
static void json_provider_names_the_key(void **state)
{
	const char *in = "{\"provider\": {\"anthropic\": {\"options\": {\"apiKey\": "
			 "\"sk-ant-x123456789abcdefg\"}}, \"mistral\": {\"options\": "
			 "{\"apiKey\": \"sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX\"}}}}";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(scan("opencode.json", in, &out, &notes), MS_REDACTED);
	assert_non_null(strstr(out.data, "\"apiKey\": \"{env:ANTHROPIC_API_KEY}\""));
	assert_non_null(strstr(out.data, "\"apiKey\": \"{env:MISTRAL_API_KEY}\""));
	assert_null(strstr(out.data, "OPENAI"));
	assert_true(notes_have(&notes, "the API key of provider anthropic"));
	assert_false(notes_have(&notes, "x123456789")); /* never the value */
	buf_free(&out);
	strv_free(&notes);
}

static void json_mcp_environment_redacted(void **state)
{
	const char *in =
		"{\"mcp\": {\"gh\": {\"type\": \"local\", \"command\": [\"gh-mcp\"],"
		" \"environment\": {\"GITHUB_TOKEN\": \"plainvalue\", \"DEBUG\": \"1\"}}}}";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(scan("opencode.json", in, &out, &notes), MS_REDACTED);
	assert_null(strstr(out.data, "plainvalue"));
	assert_non_null(strstr(out.data, "{env:GITHUB_TOKEN}"));
	assert_non_null(strstr(out.data, "\"command\": [\"gh-mcp\"]"));
	assert_true(notes_have(&notes, "mcp.gh.environment.GITHUB_TOKEN"));
	assert_true(notes_have(&notes, "ocsb secrets set GITHUB_TOKEN"));
	buf_free(&out);
	strv_free(&notes);
}

static void json_clean_untouched(void **state)
{
	const char *in = "{\"agent\": {\"x\": {\"maxTokens\": 4000, \"tokenizer\": \"bpe\","
			 " \"description\": \"uses a token budget\"}},"
			 " \"provider\": {\"a\": {\"options\": {\"apiKey\": \"{env:A_KEY}\"}}},"
			 " \"list\": [1, 2.5e3, true, null, \"s\"]}";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(scan("opencode.json", in, &out, &notes), MS_MIRRORED);
	assert_int_equal(notes.n, 0);
	buf_free(&out);
	strv_free(&notes);
}

static void jsonc_comments_and_trailing_commas(void **state)
{
	const char *in = "// my config\n{\n  /* block */ \"token\": \"abcdef0123456789\", // tok\n"
			 "  \"arr\": [1, 2,],\n}\n";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(scan("opencode.jsonc", in, &out, &notes), MS_REDACTED);
	assert_null(strstr(out.data, "abcdef0123456789"));
	assert_non_null(strstr(out.data, "// my config\n"));
	assert_non_null(strstr(out.data, "/* block */"));
	buf_free(&out);
	strv_free(&notes);
}

static void text_with_key_withheld(void **state)
{
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(scan("agent/a.md", "Use ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 here\n",
				 &out, &notes),
		MS_WITHHELD);
	assert_true(notes_have(&notes, "line 1: a GitHub token"));
	assert_true(notes_have(&notes, "ocsb secrets set GITHUB_TOKEN"));
	strv_free(&notes);
	assert_int_equal(
		scan("x.env", "\n\nAPI_KEY=abcd1234efgh5678ijkl\n", &out, &notes), MS_WITHHELD);
	assert_true(notes_have(&notes, "line 3: key API_KEY"));
	strv_free(&notes);
	/* prose about tokens, a word ending in "sk-": not credentials */
	assert_int_equal(scan("command/c.md",
				 "---\ndescription: count tokens\n---\ntoken: see docs\n"
				 "a task-abcdefghijklmnopqrstuvwxyz item\n",
				 &out, &notes),
		MS_MIRRORED);
	assert_int_equal(notes.n, 0);
	buf_free(&out);
	strv_free(&notes);
}

static void broken_json_judged_as_text(void **state)
{
	struct buf out = {0};
	struct strv notes = {0};

	/* unterminated: not parseable, so the whole file is withheld */
	assert_int_equal(
		scan("opencode.json", "{\"apiKey\": \"" ANT "\"", &out, &notes), MS_WITHHELD);
	strv_free(&notes);
	assert_int_equal(scan("opencode.json", "{\"a\": \"ok\"", &out, &notes), MS_MIRRORED);
	buf_free(&out);
	strv_free(&notes);
}

/* ---- .gitconfig ---- */

static void gitconfig_subset(void **state)
{
	const char *in = "[user]\n\tname = Alice Example\n\temail = \"alice@example.com\" # me\n"
			 "[credential]\n\thelper = store\n"
			 "[include]\n\tpath = ~/.gitconfig.private\n"
			 "[url \"git@private.example:\"]\n\tinsteadOf = https://private.example/\n"
			 "[core]\n\teditor = vim\n\thooksPath = /tmp/hooks\n\tautocrlf = false\n"
			 "[alias]\n\tco = checkout\n\tlg = \"log --graph\"\n"
			 "[user \"evil\"]\n\tname = nope\n";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(mirror_gitconfig(in, strlen(in), &out, &notes), 5);
	assert_non_null(strstr(out.data,
		"[user]\n\tname = \"Alice Example\"\n"
		"\temail = \"alice@example.com\"\n"));
	assert_non_null(strstr(out.data, "\teditor = \"vim\"\n"));
	assert_non_null(strstr(out.data, "\tco = \"checkout\"\n\tlg = \"log --graph\"\n"));
	assert_null(strstr(out.data, "store"));
	assert_null(strstr(out.data, "private"));
	assert_null(strstr(out.data, "hooks"));
	assert_null(strstr(out.data, "nope"));
	assert_true(notes_have(&notes, "credential.helper"));
	assert_true(notes_have(&notes, "include.path"));
	assert_true(notes_have(&notes, "url.<sub>.insteadof"));
	assert_true(notes_have(&notes, "core.hookspath"));
	buf_free(&out);
	strv_free(&notes);
}

static void gitconfig_control_chars_dropped(void **state)
{
	const char *in = "[user]\n\tname = \"a\\nb\"\n\temail = x@y\n";
	struct buf out = {0};
	struct strv notes = {0};

	assert_int_equal(mirror_gitconfig(in, strlen(in), &out, &notes), 1);
	assert_null(strstr(out.data, "\tname"));
	assert_true(notes_have(&notes, "user.name"));
	buf_free(&out);
	strv_free(&notes);
}

/* ---- links, paths, names ---- */

static void link_containment(void **state)
{
	char t[256];
	const char *root = "/home/alice/.config/opencode";

	assert_int_equal(
		mirror_link_inside("agent/a.md", "../command/c.md", root, t, sizeof(t)), 1);
	assert_string_equal(t, "../command/c.md");
	assert_int_equal(mirror_link_inside("a.md", "agent/x.md", root, t, sizeof(t)), 1);
	assert_string_equal(t, "agent/x.md");
	assert_int_equal(mirror_link_inside(
				 "a/b.md", "/home/alice/.config/opencode/c.md", root, t, sizeof(t)),
		1);
	assert_string_equal(t, "../c.md");
	assert_int_equal(
		mirror_link_inside("a.md", "../../.ssh/id_ed25519", root, t, sizeof(t)), 0);
	assert_int_equal(mirror_link_inside("a.md", "..", root, t, sizeof(t)), 0);
	assert_int_equal(mirror_link_inside("a.md", "/etc/shadow", root, t, sizeof(t)), 0);
	assert_int_equal(
		mirror_link_inside("a.md", "/home/alice/.config/opencodex/y", root, t, sizeof(t)),
		0);
	assert_int_equal(mirror_link_inside("x/a.md", "./../../etc", root, t, sizeof(t)), 0);
	assert_int_equal(mirror_link_inside("a.md", "", root, t, sizeof(t)), 0);
}

/* Root's side: a link record is checked again, whatever the reader says. */
static void link_checked_again_by_root(void **state)
{
	struct strv roots = {0};
	char t[256];

	strv_push(&roots, ".config/opencode");
	strv_push(&roots, ".agents");
	strv_push(&roots, ".gitconfig");
	/* what an honest reader sends */
	assert_int_equal(
		mirror_link_inside("agent/a.md", "../command/c.md", "/h/.config/opencode", t, sizeof(t)),
		1);
	assert_int_equal(mirror_link_ok(&roots, ".config/opencode/agent/a.md", t), 1);
	assert_int_equal(mirror_link_ok(&roots, ".agents/x", "skills/y.md"), 1);
	assert_int_equal(mirror_link_ok(&roots, ".agents/a/b", "../../.agents/c"), 0);
	/* absolute, climbing out, out of its own root, not normal form */
	assert_int_equal(mirror_link_ok(&roots, ".agents/x", "/etc/shadow"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/x", "/home/alice/.agents/y"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/x", "../.ssh/id_ed25519"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/a/x", "../../.ssh/id_ed25519"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/a/x", "../../../../etc/shadow"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/a/x", "../b/../../../x"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/a/x", "./y"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agents/x", ""), 0);
	/* only below a configured root; never the root itself, never .gitconfig */
	assert_int_equal(mirror_link_ok(&roots, ".agents", "x"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".agentsx/y", "z"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".ssh/x", "y"), 0);
	assert_int_equal(mirror_link_ok(&roots, ".gitconfig/x", "y"), 0);
	strv_free(&roots);
}

static void path_rules(void **state)
{
	char err[256];

	assert_int_equal(mirror_path_ok(".config/opencode", err, sizeof(err)), 0);
	assert_int_equal(mirror_path_ok(".gitconfig", err, sizeof(err)), 0);
	assert_int_equal(mirror_path_ok("/etc", err, sizeof(err)), -1);
	assert_int_equal(mirror_path_ok("a/../b", err, sizeof(err)), -1);
	assert_int_equal(mirror_path_ok("a//b", err, sizeof(err)), -1);
	assert_int_equal(mirror_path_ok("a/", err, sizeof(err)), -1);
	assert_int_equal(mirror_path_ok(".ssh", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "never mirrored"));
	assert_int_equal(mirror_path_ok(".ssh/config", err, sizeof(err)), -1);
	assert_int_equal(mirror_path_ok(".config/ocsb", err, sizeof(err)), -1);
	assert_int_equal(mirror_path_ok(".config", err, sizeof(err)), -1); /* holds .config/ocsb */
	assert_int_equal(mirror_path_ok("a\nb", err, sizeof(err)), -1);
}

static void escape_names(void **state)
{
	struct buf b = {0};

	mirror_escape("a\nb\tc\\d\x01", &b);
	assert_string_equal(b.data, "a\\nb\\tc\\\\d\\x01");
	buf_free(&b);
}

static void aside_names(void **state)
{
	char b[64];

	mirror_aside_name("opencode", 1, b, sizeof(b));
	assert_string_equal(b, "opencode.ocsb-aside");
	mirror_aside_name("opencode", 2, b, sizeof(b));
	assert_string_equal(b, "opencode.ocsb-aside.2");
	mirror_aside_name("opencode", MIRROR_ASIDE_MAX, b, sizeof(b));
	assert_string_equal(b, "opencode.ocsb-aside.9");
	mirror_aside_name("opencode", 1, b, 5);
	assert_string_equal(b, "open");
}

static void config_keywords(void **state)
{
	struct ocsb_config c;
	char err[512];
	const char *good = "mirror .config/opencode .agents\nmirror-writable .agents\n"
			   "mirror-noscan .config/opencode/agent\n";
	const char *bad = "agent ai-dev\n\nmirror ../etc\n";

	config_defaults(&c);
	assert_int_equal(c.mirror.paths.n, 3);
	assert_int_equal(config_parse_buf(&c, good, strlen(good), "t.conf", err, sizeof(err)), 0);
	assert_int_equal(c.mirror.paths.n, 2); /* the defaults replaced */
	assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
	config_free(&c);

	config_defaults(&c);
	assert_int_equal(config_parse_buf(&c, bad, strlen(bad), "t.conf", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "t.conf:3:"));
	config_free(&c);

	config_defaults(&c);
	assert_int_equal(config_parse_buf(&c, "mirror none\n", 12, "t.conf", err, sizeof(err)), 0);
	assert_int_equal(c.mirror.paths.n, 0);
	config_free(&c);

	config_defaults(&c);
	assert_int_equal(config_parse_buf(&c, "mirror .agents\nmirror-writable .x\n", 34, "t.conf",
				 err, sizeof(err)),
		0);
	assert_int_equal(config_validate(&c, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not one of the mirrored paths"));
	config_free(&c);
}

struct link_lines {
	char text[4][64];
	int problem[4];
	int n;
};

static void link_line_seen(void *arg, const char *text, int problem)
{
	struct link_lines *ll = arg;

	assert_true(ll->n < 4);
	snprintf(ll->text[ll->n], sizeof(ll->text[0]), "%s", text);
	ll->problem[ll->n++] = problem;
}

/*
 * The link maker's output is the agent's. ocsb-provision took the text of a problem line
 * at l + 2: past the end of a bare "!" (found by tests/fuzz/fuzz_agentd_output.c, corpus
 * regress-bare-bang; under SANITIZE=1 the old reading fails here on the exact-size copy).
 */
static void link_output_lines(void **state)
{
	static const char text[] = "link ~/.agents\n\n! ~/.x: not replaced\n!";
	char *out = malloc(sizeof(text));
	struct link_lines ll = {0};

	(void)state;
	assert_non_null(out);
	memcpy(out, text, sizeof(text));
	mirror_link_output(out, link_line_seen, &ll);
	assert_int_equal(ll.n, 3);
	assert_string_equal(ll.text[0], "link ~/.agents");
	assert_int_equal(ll.problem[0], 0);
	assert_string_equal(ll.text[1], "~/.x: not replaced");
	assert_int_equal(ll.problem[1], 1);
	assert_string_equal(ll.text[2], "");
	assert_int_equal(ll.problem[2], 1);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_provider_key_redacted),
		cmocka_unit_test(json_provider_names_the_key),
		cmocka_unit_test(json_mcp_environment_redacted),
		cmocka_unit_test(json_clean_untouched),
		cmocka_unit_test(jsonc_comments_and_trailing_commas),
		cmocka_unit_test(text_with_key_withheld),
		cmocka_unit_test(broken_json_judged_as_text),
		cmocka_unit_test(gitconfig_subset),
		cmocka_unit_test(gitconfig_control_chars_dropped),
		cmocka_unit_test(link_containment),
		cmocka_unit_test(link_checked_again_by_root),
		cmocka_unit_test(path_rules),
		cmocka_unit_test(escape_names),
		cmocka_unit_test(aside_names),
		cmocka_unit_test(config_keywords),
		cmocka_unit_test(link_output_lines),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
