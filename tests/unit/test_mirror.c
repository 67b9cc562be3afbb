/* SPDX-License-Identifier: MIT */
/*
 * The mirror: secret scan, .gitconfig subset, link containment, config keywords, and the
 * whole engine run unprivileged (owner = agent = the test's own uid; no drop, no chown).
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

/* ---- the engine, unprivileged ---- */

struct fixture {
	struct paths paths;
	struct user_info owner, agent;
	struct mirror_spec spec;
	struct mirror m;
};

static void put(const char *rel, const char *text)
{
	unit_write(unit_path(rel), text, strlen(text), 0644);
}

static void make_source(void)
{
	int fd;

	mkdir(unit_path("owner"), 0700);
	mkdir(unit_path("owner/.config"), 0700);
	mkdir(unit_path("owner/.config/opencode"), 0700);
	mkdir(unit_path("owner/.config/opencode/agent"), 0700);
	mkdir(unit_path("owner/.ssh"), 0700);
	mkdir(unit_path("agent"), 0700);
	mkdir(unit_path("elsewhere"), 0700);
	put("owner/.ssh/id_ed25519", "PRIVATE KEY\n");
	put("owner/.config/opencode/opencode.json",
		"{\"provider\": {\"anthropic\": {\"options\": {\"apiKey\": \"" ANT "\"}}}}\n");
	put("owner/.config/opencode/agent/review.md", "---\ndescription: reviews\n---\nReview.\n");
	put("owner/.config/opencode/new\nline.md", "odd name\n");
	put("owner/.gitconfig", "[user]\n\tname = A\n[credential]\n\thelper = store\n");
	assert_int_equal(
		symlink("agent/review.md", unit_path("owner/.config/opencode/in-link")), 0);
	assert_int_equal(
		symlink("../../.ssh/id_ed25519", unit_path("owner/.config/opencode/key")), 0);
	assert_int_equal(symlink("/etc/passwd", unit_path("owner/.config/opencode/abs")), 0);
	assert_int_equal(mkfifo(unit_path("owner/.config/opencode/fifo"), 0600), 0);
	fd = open(unit_path("owner/.config/opencode/huge.json"), O_WRONLY | O_CREAT | O_CLOEXEC,
		0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1LL << 40), 0); /* sparse: 1 TiB */
	close(fd);
}

/*
 * Let the file times fall clearly behind the clock: entries changed within a tick or two
 * of a refresh are read again by the next one (racy entries), whatever their stat says.
 */
static void settle(void)
{
	usleep(60 * 1000);
}

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	make_source();
	settle();
	assert_int_equal(paths_under(&f->paths, unit_path("root")), 0);
	assert_int_equal(user_lookup_uid(getuid(), &f->owner), 0);
	f->agent = f->owner;
	snprintf(f->owner.home, sizeof(f->owner.home), "%s", unit_path("owner"));
	snprintf(f->agent.home, sizeof(f->agent.home), "%s", unit_path("agent"));
	snprintf(f->agent.name, sizeof(f->agent.name), "ai-test");
	mirror_spec_defaults(&f->spec);
	assert_int_equal(mirror_init(&f->m, &f->paths, &f->owner, &f->agent, &f->spec), 0);
	assert_int_equal(f->m.drop, 0);
}

static void fixture_free(struct fixture *f)
{
	mirror_free(&f->m);
	mirror_spec_free(&f->spec);
}

static const char *tree(const struct fixture *f, const char *rel)
{
	static char p[4][PATH_MAX + 256];
	static unsigned i;
	char *r = p[i++ % 4];

	snprintf(r, sizeof(p[0]), "%s/%s", f->m.tree, rel);
	return r;
}

static mode_t lmode(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return 0;
	return st.st_mode;
}

static char *slurp(const char *path)
{
	char *d = NULL;
	size_t n;

	assert_int_equal(fo_read(path, 1 << 20, &d, &n), 0);
	return d;
}

static void engine_build(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	char *s;
	FILE *out;
	char *report = NULL;
	size_t rlen = 0;

	fixture_init(&f);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	/* files 0444, dirs 0555, content as in the source */
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), S_IFREG | 0444);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent")), S_IFDIR | f.m.dmode);
	assert_int_equal(lmode(tree(&f, ".config/opencode")), S_IFDIR | f.m.dmode);
	assert_int_equal(lmode(tree(&f, ".config")), S_IFDIR | f.m.dmode);
	assert_int_equal(lmode(tree(&f, ".config/opencode/new\nline.md")), S_IFREG | 0444);
	/* an inside link is a link; the others, the FIFO and the huge file are absent */
	assert_true(S_ISLNK(lmode(tree(&f, ".config/opencode/in-link"))));
	assert_int_equal(lmode(tree(&f, ".config/opencode/key")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/abs")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/fifo")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/huge.json")), 0);
	assert_int_equal(lmode(tree(&f, ".agents")), 0); /* not in the source */
	/* the secret withheld, the .gitconfig generated */
	s = slurp(tree(&f, ".config/opencode/opencode.json"));
	assert_null(strstr(s, "sk-ant-"));
	assert_non_null(strstr(s, "{env:ANTHROPIC_API_KEY}"));
	free(s);
	s = slurp(tree(&f, ".gitconfig"));
	assert_non_null(strstr(s, "name = \"A\""));
	assert_null(strstr(s, "store"));
	free(s);
	assert_true(st.written > 5);
	assert_int_equal(st.redacted, 1);
	/* the report names every skip with its reason, names escaped */
	out = open_memstream(&report, &rlen);
	assert_int_equal(mirror_status_print(f.m.status, 0, out), 0);
	fclose(out);
	assert_non_null(strstr(report, "skipped   .config/opencode/fifo\n          a FIFO"));
	assert_non_null(
		strstr(report, "skipped   .config/opencode/huge.json\n          larger than"));
	assert_non_null(strstr(report,
		"skipped   .config/opencode/key\n          link to ../../.ssh/id_ed25519 leaves"));
	assert_non_null(strstr(report, "skipped   .config/opencode/abs\n"));
	assert_non_null(strstr(report, "redacted  .config/opencode/opencode.json\n"));
	assert_non_null(strstr(report, "ocsb secrets set ANTHROPIC_API_KEY"));
	assert_non_null(strstr(report, "mirrored  .config/opencode/new\\nline.md\n"));
	assert_null(strstr(report, "AAAAAAAA"));
	free(report);
	fixture_free(&f);
}

static void engine_refresh_incremental(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct stat before, after;
	char *s;

	fixture_init(&f);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(stat(f.m.status, &before), 0);
	/* no change: nothing written, not even the status file */
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.written, 0);
	assert_int_equal(st.removed, 0);
	assert_true(st.unchanged >= 4);
	assert_int_equal(stat(f.m.status, &after), 0);
	assert_int_equal(before.st_ino, after.st_ino);
	/* a fresh process (agentd after provision) loads the manifest: still no writes */
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.written + st.removed, 0);
	/*
	 * Other options (a new fingerprint): every file is judged again once, and the
	 * manifest is saved for the next process even though no file changed.
	 */
	strv_free(&f.spec.paths);
	strv_push(&f.spec.paths, ".config/opencode/agent");
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	strv_push(&f.spec.noscan, ".config/opencode/agent");
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(f.m.n, 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.unchanged, 0);
	assert_int_equal(st.written + st.removed, 0);
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.unchanged, 2); /* the folder, and review.md not read again */
	mirror_spec_free(&f.spec);
	mirror_spec_defaults(&f.spec);
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	/* a change, a new file, a deletion */
	put("owner/.config/opencode/agent/review.md", "---\ndescription: changed\n---\n");
	put("owner/.config/opencode/agent/new.md", "new\n");
	assert_int_equal(unlink(unit_path("owner/.config/opencode/new\nline.md")), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.written, 2);
	assert_int_equal(st.removed, 1);
	s = slurp(tree(&f, ".config/opencode/agent/review.md"));
	assert_string_equal(s, "---\ndescription: changed\n---\n");
	free(s);
	assert_int_equal(lmode(tree(&f, ".config/opencode/new\nline.md")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/new.md")), S_IFREG | 0444);
	/* a whole directory goes */
	unlink(unit_path("owner/.config/opencode/agent/review.md"));
	unlink(unit_path("owner/.config/opencode/agent/new.md"));
	assert_int_equal(rmdir(unit_path("owner/.config/opencode/agent")), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent")), 0);
	/* dry run after a change: counted, not done */
	put("owner/.config/opencode/x.md", "x\n");
	assert_int_equal(mirror_refresh(&f.m, 1, &st), 0);
	assert_int_equal(st.written, 1);
	assert_int_equal(lmode(tree(&f, ".config/opencode/x.md")), 0);
	fixture_free(&f);
}

static void engine_links(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct strv ch = {0};
	char target[PATH_MAX], *s;
	ssize_t n;

	fixture_init(&f);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 2); /* .config/opencode and .gitconfig; .agents does not exist */
	strv_free(&ch);
	n = readlink(unit_path("agent/.config/opencode"), target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, tree(&f, ".config/opencode"));
	assert_int_equal(lmode(unit_path("agent/.config")), S_IFDIR | 0700);
	/* idempotent */
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 0);
	/* the agent redirects its link: replaced, never followed */
	assert_int_equal(unlink(unit_path("agent/.config/opencode")), 0);
	assert_int_equal(symlink(unit_path("elsewhere"), unit_path("agent/.config/opencode")), 0);
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 1);
	strv_free(&ch);
	assert_int_equal(lmode(unit_path("elsewhere/agent")), 0);
	n = readlink(unit_path("agent/.config/opencode"), target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, tree(&f, ".config/opencode"));
	/* ~/.gitconfig is the agent's own file, including the mirrored subset */
	s = slurp(unit_path("agent/.gitconfig"));
	assert_non_null(strstr(s, "[include]\n\tpath = "));
	assert_non_null(strstr(s, tree(&f, ".gitconfig")));
	free(s);
	assert_int_equal(lmode(unit_path("agent/.gitconfig")), S_IFREG | 0600);
	/* the agent's own real file is left alone */
	assert_int_equal(unlink(unit_path("agent/.gitconfig")), 0);
	put("agent/.gitconfig", "mine\n");
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 0);
	assert_int_equal(lmode(unit_path("agent/.gitconfig")), S_IFREG | 0644);
	/* unlink removes only our links */
	assert_int_equal(mirror_unlink(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 1);
	strv_free(&ch);
	assert_int_equal(lmode(unit_path("agent/.config/opencode")), 0);
	assert_int_equal(lmode(unit_path("agent/.gitconfig")), S_IFREG | 0644);
	fixture_free(&f);
}

/* A reader that lies: one directory, then one link whose target it chose. */
static const char *forged_target;

static void forge(struct buf *b, char kind, const char *path, const char *data)
{
	unsigned char state = MS_MIRRORED;
	uint32_t mode = kind == 'd' ? S_IFDIR | 0755 : S_IFLNK | 0777;
	uint64_t zero8 = 0;
	uint32_t pl = (uint32_t)strlen(path), dl = data ? (uint32_t)strlen(data) : 0, zero4 = 0;

	buf_append(b, &kind, 1);
	buf_append(b, &state, 1);
	buf_append(b, &mode, 4);
	for (int i = 0; i < 4; i++)
		buf_append(b, &zero8, 8); /* size, ino, mtime, ctime */
	buf_append(b, &pl, 4);
	buf_append(b, path, pl);
	buf_append(b, &zero4, 4); /* no detail */
	buf_append(b, &dl, 4);
	if (dl)
		buf_append(b, data, dl);
}

static int lying_reader(void *m, int outfd)
{
	struct buf b = {0};
	int r;

	(void)m;
	forge(&b, 'd', ".config/opencode", NULL);
	forge(&b, 'l', ".config/opencode/evil", forged_target);
	forge(&b, 'E', "", NULL);
	r = write(outfd, b.data, b.len) == (ssize_t)b.len ? 0 : 1;
	buf_free(&b);
	return r;
}

static void engine_link_from_a_lying_reader(void **state)
{
	static const char *const bad[] = {"/etc/passwd", "../../.ssh/id_ed25519", "../x/../../y",
		"../../../../../../etc/shadow"};
	struct fixture f;
	struct mirror_stats st;
	char target[PATH_MAX];
	ssize_t n;

	fixture_init(&f);
	f.m.reader = lying_reader;
	/* the control: a target inside the tree, as an honest reader sends it, is made */
	forged_target = "agent/review.md";
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	n = readlink(tree(&f, ".config/opencode/evil"), target, sizeof(target) - 1);
	assert_true(n > 0);
	target[n] = '\0';
	assert_string_equal(target, "agent/review.md");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		forged_target = bad[i];
		assert_int_equal(mirror_refresh(&f.m, 0, &st), -1);
		n = readlink(tree(&f, ".config/opencode/evil"), target, sizeof(target) - 1);
		assert_true(n > 0);
		target[n] = '\0';
		/* root made nothing: the earlier link is still there, unchanged */
		assert_string_equal(target, "agent/review.md");
	}
	fixture_free(&f);
}

/* A reader that names a directory's content but not the directory (below its root). */
static int orphan_reader(void *m, int outfd)
{
	struct buf b = {0};
	int r;

	(void)m;
	forge(&b, 'd', ".config/opencode/agent", NULL);
	forge(&b, 'E', "", NULL);
	r = write(outfd, b.data, b.len) == (ssize_t)b.len ? 0 : 1;
	buf_free(&b);
	return r;
}

/*
 * Found by tests/fuzz/fuzz_mirror_stream.c (corpus regress-orphan-entry): the unnamed
 * directory went as gone from the source, with the one just named in it, while the
 * manifest kept that one as present. Such a stream is refused, nothing removed.
 */
static void engine_orphan_from_a_lying_reader(void **state)
{
	struct fixture f;
	struct mirror_stats st;

	fixture_init(&f);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), S_IFREG | 0444);
	f.m.reader = orphan_reader;
	assert_int_equal(mirror_refresh(&f.m, 0, &st), -1);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), S_IFREG | 0444);
	assert_int_equal(lmode(tree(&f, ".config/opencode")), S_IFDIR | f.m.dmode);
	fixture_free(&f);
}

/* A reader whose report on a skipped file starts with a NUL: no report. */
static int nul_detail_reader(void *m, int outfd)
{
	static const char detail[] = "\0hidden";
	char kind = '-';
	unsigned char state = MS_SKIPPED;
	uint32_t mode = S_IFREG | 0644, pl = 21, dl = sizeof(detail) - 1, zero4 = 0;
	uint64_t zero8 = 0;
	struct buf b = {0};
	int r;

	(void)m;
	forge(&b, 'd', ".config/opencode", NULL);
	buf_append(&b, &kind, 1);
	buf_append(&b, &state, 1);
	buf_append(&b, &mode, 4);
	for (int i = 0; i < 4; i++)
		buf_append(&b, &zero8, 8);
	buf_append(&b, &pl, 4);
	buf_append(&b, ".config/opencode/fifo", pl);
	buf_append(&b, &dl, 4);
	buf_append(&b, detail, dl);
	buf_append(&b, &zero4, 4);
	forge(&b, 'E', "", NULL);
	r = write(outfd, b.data, b.len) == (ssize_t)b.len ? 0 : 1;
	buf_free(&b);
	return r;
}

/*
 * Found by tests/fuzz/fuzz_mirror_stream.c (corpus regress-nul-detail): the manifest kept
 * "" where the status file keeps nothing, so every later process saw a new report (a
 * notice, the status file rewritten) on every refresh.
 */
static void engine_nul_detail(void **state)
{
	struct fixture f;
	struct mirror_stats st;

	fixture_init(&f);
	f.m.reader = nul_detail_reader;
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_null(mirror_entry_find(&f.m, ".config/opencode/fifo")->detail);
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	f.m.reader = nul_detail_reader;
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(f.m.notices.n, 0);
	fixture_free(&f);
}

static void engine_writable_copy(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct strv ch = {0};
	char *s;

	fixture_init(&f);
	strv_push(&f.spec.writable, ".config/opencode");
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	strv_free(&ch);
	assert_int_equal(lmode(unit_path("agent/.config/opencode")), S_IFDIR | 0700);
	assert_int_equal(
		lmode(unit_path("agent/.config/opencode/agent/review.md")), S_IFREG | 0600);
	s = slurp(unit_path("agent/.config/opencode/" MIRROR_WRITABLE_MARK));
	assert_non_null(strstr(s, "writable copy"));
	free(s);
	/* the copy carries the redacted file, not the secret */
	s = slurp(unit_path("agent/.config/opencode/opencode.json"));
	assert_null(strstr(s, "sk-ant-"));
	free(s);
	/* the agent's edits survive the next run */
	put("agent/.config/opencode/agent/review.md", "edited\n");
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 0);
	s = slurp(unit_path("agent/.config/opencode/agent/review.md"));
	assert_string_equal(s, "edited\n");
	free(s);
	fixture_free(&f);
}

/* Rewrite `rel` with `text` and put its old mtime back: only ctime tells. */
static void rewrite_keep_mtime(const char *rel, const char *text)
{
	struct stat st;
	struct timespec ts[2];

	assert_int_equal(stat(unit_path(rel), &st), 0);
	put(rel, text);
	ts[0] = st.st_atim;
	ts[1] = st.st_mtim;
	assert_int_equal(utimensat(AT_FDCWD, unit_path(rel), ts, 0), 0);
}

static void engine_change_detection(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct stat a, b;
	char *s;

	fixture_init(&f);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	/* every entry accounted for: the quiet ones (left unsaid by the reader) too */
	assert_int_equal(st.written + st.removed, 0);
	assert_int_equal(st.unchanged + st.skipped, st.entries);
	assert_true(st.unchanged >= 5);

	/* same size, same mtime, same inode: the ctime gives the change away */
	assert_int_equal(stat(unit_path("owner/.config/opencode/agent/review.md"), &a), 0);
	rewrite_keep_mtime("owner/.config/opencode/agent/review.md",
		"---\ndescription: REVIEWS\n---\nReview.\n");
	assert_int_equal(stat(unit_path("owner/.config/opencode/agent/review.md"), &b), 0);
	assert_int_equal(a.st_size, b.st_size);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(a.st_mtim.tv_nsec, b.st_mtim.tv_nsec);
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.written, 1);
	s = slurp(tree(&f, ".config/opencode/agent/review.md"));
	assert_string_equal(s, "---\ndescription: REVIEWS\n---\nReview.\n");
	free(s);

	/* racy: a stat taken too close to the last refresh is not trusted, the file is read */
	f.m.scan_ns = 0;
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.unchanged, 0);
	assert_int_equal(st.written + st.removed, 0);
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_true(st.unchanged >= 5);

	/* a deleted file in an otherwise unchanged folder */
	assert_int_equal(unlink(unit_path("owner/.config/opencode/agent/review.md")), 0);
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.removed, 1);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), 0);

	/* a folder replaced by a file of the same name */
	put("owner/.config/opencode/agent/x.md", "x\n");
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(unlink(unit_path("owner/.config/opencode/agent/x.md")), 0);
	assert_int_equal(rmdir(unit_path("owner/.config/opencode/agent")), 0);
	put("owner/.config/opencode/agent", "now a file\n");
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent")), S_IFREG | 0444);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/x.md")), 0);
	s = slurp(tree(&f, ".config/opencode/agent"));
	assert_string_equal(s, "now a file\n");
	free(s);

	/* and back: a file replaced by a folder */
	assert_int_equal(unlink(unit_path("owner/.config/opencode/agent")), 0);
	mkdir(unit_path("owner/.config/opencode/agent"), 0700);
	put("owner/.config/opencode/agent/y.md", "y\n");
	settle();
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent")), S_IFDIR | f.m.dmode);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/y.md")), S_IFREG | 0444);

	/* a fresh process: the manifest and the scan time come from the status file */
	mirror_free(&f.m);
	assert_int_equal(mirror_init(&f.m, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_true(f.m.scan_ns > 0);
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(st.written + st.removed, 0);
	assert_int_equal(st.unchanged + st.skipped, st.entries);
	fixture_free(&f);
}

/*
 * The status file is the account's (ocsb-agentd's), read by the owner: found by
 * tests/fuzz/fuzz_mirror_status.c (corpus regress-*). A line given twice is not leaked
 * (under SANITIZE=1), its date reaches the owner's terminal escaped, and an empty
 * manifest renders (no qsort of NULL, under SANITIZE=1).
 */
static void status_file_hostile(void **state)
{
	static const char text[] = "ocsb-mirror 1\nfingerprint a\nfingerprint b\nboot x\nboot y\n"
				   "built \033]0;owned\007\033[2J\nend\n";
	struct mirror m;
	struct buf b = {0};
	char *report = NULL;
	size_t rlen = 0;
	FILE *out;

	(void)state;
	memset(&m, 0, sizeof(m));
	snprintf(m.status, sizeof(m.status), "%s", unit_path("x.status"));
	unit_write(m.status, text, strlen(text), 0644);
	assert_int_equal(mirror_load(&m), 0);
	assert_int_equal(m.n, 0);
	out = open_memstream(&report, &rlen);
	assert_int_equal(mirror_status_print(m.status, 0, out), 0);
	fclose(out);
	assert_null(strchr(report, '\033'));
	assert_null(strchr(report, '\007'));
	assert_non_null(strstr(report, "built \\x1b]0;owned\\x07\\x1b[2J: 0 mirrored"));
	free(report);
	assert_int_equal(mirror_render_status(&m, "test", &b), 0);
	assert_non_null(strstr(b.data, "\nend\n"));
	buf_free(&b);
	mirror_free(&m);
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

#define T(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

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
		cmocka_unit_test(config_keywords),
		cmocka_unit_test(link_output_lines),
		T(engine_build),
		T(engine_refresh_incremental),
		T(engine_change_detection),
		T(engine_links),
		T(engine_link_from_a_lying_reader),
		T(engine_orphan_from_a_lying_reader),
		T(engine_nul_detail),
		T(engine_writable_copy),
		T(status_file_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
