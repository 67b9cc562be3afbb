/* SPDX-License-Identifier: MIT */
/*
 * The sync helpers without a repository: ref names, escaping, the content gate, pkt-line
 * framing, the advertisement and report-status.
 */
#define _GNU_SOURCE
#include "sync_unit.h"

static int ref_ok(const char *name)
{
	char why[128];
	return sync_ref_name_ok(name, why, sizeof(why));
}

static void refs_good(void **state)
{
	assert_true(ref_ok("refs/heads/main"));
	assert_true(ref_ok("refs/heads/feature/x-1_2"));
	/* Plain non-ASCII letters are fine: only deceptive code points are refused. */
	assert_true(ref_ok("refs/heads/caf\xc3\xa9"));
}

static void refs_outside_heads(void **state)
{
	assert_false(ref_ok("HEAD"));
	assert_false(ref_ok("refs/tags/v1"));
	assert_false(ref_ok("refs/remotes/origin/main"));
	assert_false(ref_ok("refs/heads/"));
	assert_false(ref_ok("refs/headsx/main"));
	assert_false(ref_ok("refs/heads/HEAD"));
}

static void refs_git_syntax(void **state)
{
	assert_false(ref_ok("refs/heads/a..b"));
	assert_false(ref_ok("refs/heads/../../config"));
	assert_false(ref_ok("refs/heads/a//b"));
	assert_false(ref_ok("refs/heads/.hidden"));
	assert_false(ref_ok("refs/heads/a.lock"));
	assert_false(ref_ok("refs/heads/a b"));
	assert_false(ref_ok("refs/heads/a~1"));
	assert_false(ref_ok("refs/heads/a^"));
	assert_false(ref_ok("refs/heads/a:b"));
	assert_false(ref_ok("refs/heads/a*"));
	assert_false(ref_ok("refs/heads/a@{1}"));
	assert_false(ref_ok("refs/heads/a\\b"));
	assert_false(ref_ok("refs/heads/a/"));
}

static void refs_control_and_bidi(void **state)
{
	char why[128];

	assert_false(ref_ok("refs/heads/a\x1b[31mred"));
	assert_false(ref_ok("refs/heads/a\nb"));
	assert_false(ref_ok("refs/heads/a\x7f"));
	assert_false(ref_ok("refs/heads/a\xc2\x85")); /* C1 NEL */
	/* U+202A..U+202E, U+2066..U+2069 */
	assert_false(ref_ok("refs/heads/evil\xe2\x80\xaetxt.exe"));
	assert_false(ref_ok("refs/heads/a\xe2\x80\xaa"));
	assert_false(ref_ok("refs/heads/a\xe2\x81\xa6"));
	assert_false(ref_ok("refs/heads/a\xe2\x81\xa9"));
	assert_false(ref_ok("refs/heads/a\xe2\x80\x8b")); /* zero width space */
	assert_false(ref_ok("refs/heads/a\xff"));
	assert_false(ref_ok("refs/heads/a\xc0\xaf")); /* overlong '/' */
	assert_int_equal(sync_ref_name_ok("refs/heads/x\xe2\x80\xae", why, sizeof(why)), 0);
	assert_non_null(strstr(why, "U+202E"));
}

static void refs_length(void **state)
{
	char name[SYNC_REF_MAX + 2];

	memset(name, 'a', sizeof(name) - 1);
	memcpy(name, "refs/heads/", 11);
	name[SYNC_REF_MAX] = '\0';
	assert_true(ref_ok(name));
	name[SYNC_REF_MAX] = 'a';
	name[SYNC_REF_MAX + 1] = '\0';
	assert_false(ref_ok(name));
}

static void escape(void **state)
{
	char out[128];
	const char *s = "a\x1b[0m\xe2\x80\xae\xff\\z\xc3\xa9";

	sync_escape(s, strlen(s), out, sizeof(out));
	assert_string_equal(out, "a\\x1b[0m\\xe2\\x80\\xae\\xff\\x5cz\xc3\xa9");
	sync_escape(s, strlen(s), out, 6);
	assert_true(strlen(out) < 6);
}

/* Escaped text goes back to its bytes before a log line (which escapes once, itself). */
static void unescape_round_trip(void **state)
{
	char esc[128], raw[128], vis[256];
	const char *s = "a\x1b[0m\xe2\x80\xae\xff\\z\xc3\xa9 \\x1b";

	sync_escape(s, strlen(s), esc, sizeof(esc));
	assert_string_equal(sync_unescape(esc, raw, sizeof(raw)), s);
	log_vis(raw, strlen(raw), vis, sizeof(vis));
	assert_string_equal(vis, "a\\x1b[0m\\xe2\\x80\\xae\\xff\\\\z\xc3\xa9 \\\\x1b");
	/* an escaped NUL ends the text; a lone backslash or a short escape stays */
	assert_string_equal(sync_unescape("ab\\x00cd", raw, sizeof(raw)), "ab");
	assert_string_equal(sync_unescape("a\\x4", raw, sizeof(raw)), "a\\x4");
	assert_string_equal(sync_unescape("abcdef", raw, 4), "abc");
}

static void shell_quote(void **state)
{
	char out[64];

	assert_int_equal(sync_shell_quote("/home/ai-dev/shop", out, sizeof(out)), 0);
	assert_string_equal(out, "'/home/ai-dev/shop'");
	assert_int_equal(sync_shell_quote("/h/it's", out, sizeof(out)), 0);
	assert_string_equal(out, "'/h/it'\\''s'");
	assert_int_equal(sync_shell_quote("/a/very/long/path", out, 8), -1);
}

static unsigned classify(const char *path, unsigned om, unsigned nm, const char *od, const char *nd)
{
	struct sync_entry e = {.path = path,
		.old_mode = om,
		.new_mode = nm,
		.old_data = od,
		.old_len = od ? strlen(od) : 0,
		.new_data = nd,
		.new_len = nd ? strlen(nd) : 0};
	return sync_review_classify(&e);
}

#define F 0100644
#define X 0100755
#define L 0120000

static void gate_attributes(void **state)
{
	assert_int_equal(
		classify(".gitattributes", 0, F, NULL, "*.c filter=evil\n"), SYNC_FLAG_ATTR_DRIVER);
	assert_int_equal(
		classify("sub/.gitattributes", 0, F, NULL, "*.x diff=x\n"), SYNC_FLAG_ATTR_DRIVER);
	assert_int_equal(classify(".gitattributes", 0, F, NULL, "[attr]m merge=ours\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* Unchanged driver lines, text/eol settings and -diff are not drivers being added. */
	assert_int_equal(classify(".gitattributes", F, F, "*.c filter=lfs\n",
				 "*.c filter=lfs\n*.txt text eol=lf\n*.bin -diff\n"),
		0);
	assert_int_equal(classify(".gitattributes", F, F, "*.c filter=lfs\r\n",
				 "*.c filter=lfs\r\n*.h filter=evil\r\n"),
		SYNC_FLAG_ATTR_DRIVER);
	assert_int_equal(classify("notes/gitattributes.md", 0, F, NULL, "filter=x"), 0);
	/* A deletion adds nothing. */
	assert_int_equal(classify(".gitattributes", F, 0, "*.c filter=evil\n", NULL), 0);
}

/*
 * Found with fuzz_sync_gate (helper's note, checked with git check-attr): a macro turns a
 * driver on from a line that names none, and a dropped unset line turns one on again.
 */
static void gate_attributes_macros_and_unsets(void **state)
{
	/* A macro the old file defines, used by a new line. */
	assert_int_equal(classify(".gitattributes", F, F, "[attr]m filter=x\n",
				 "[attr]m filter=x\n*.c m\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* A name git does not define, in a file that cannot see the definition. */
	assert_int_equal(classify("sub/.gitattributes", 0, F, NULL, "*.c m\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* An unset driver line dropped: the driver of another line is on again. */
	assert_int_equal(classify(".gitattributes", F, F, "*.c filter=x\n*.c -filter\n",
				 "*.c filter=x\n"),
		SYNC_FLAG_ATTR_DRIVER);
	assert_int_equal(classify("sub/.gitattributes", F, F, "*.c !m\n", ""),
		SYNC_FLAG_ATTR_DRIVER);
	/* A quoted pattern git cannot unquote ("\e") is a plain field: attributes follow it. */
	assert_int_equal(classify(".gitattributes", 0, F, NULL, "\"\\e*.c filter=x\n"),
		SYNC_FLAG_ATTR_DRIVER);
	assert_int_equal(classify(".gitattributes", 0, F, NULL, "\"a b\"filter=x\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* git parses a line up to a NUL in it: a quote closed after it closes nothing. */
	{
		static const char nd[] = "\"x filter=y\0\" -z\n";
		struct sync_entry e = {.path = ".gitattributes",
			.new_mode = F,
			.new_data = nd,
			.new_len = sizeof(nd) - 1};

		assert_int_equal(sync_review_classify(&e), SYNC_FLAG_ATTR_DRIVER);
	}
	/* Positive controls: what git defines itself and runs nothing is not flagged. */
	assert_int_equal(classify(".gitattributes", 0, F, NULL,
				 "* text=auto eol=lf\n*.png binary\n*.md linguist-documentation\n"
				 "*.c -diff\n*.sh whitespace=trailing-space\n# m filter=x\n"),
		0);
	assert_int_equal(classify(".gitattributes", F, F, "*.c text\n*.png -text\n", "*.c text\n"),
		0);
	/* Unchanged risky lines are the owner's: not flagged. */
	assert_int_equal(classify(".gitattributes", F, F, "*.c m\n*.c -filter\n",
				 "*.c m\n*.c -filter\n*.h text\n"),
		0);
}

/* Found by tests/fuzz/fuzz_sync_gate.c (corpus regress-attr-*): lines git reads as drivers. */
static void gate_attributes_git_syntax(void **state)
{
	/* CR is one of git's blanks: "*.c\rfilter=evil" sets filter=evil (git check-attr). */
	assert_int_equal(classify(".gitattributes", 0, F, NULL, "*.c\rfilter=evil\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* An attribute may follow a quoted pattern with no blank between them. */
	assert_int_equal(classify(".gitattributes", 0, F, NULL, "\"*.c\"filter=evil\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* A link's target is no .gitattributes git read: its text cannot vouch for a line. */
	assert_int_equal(classify(".gitattributes", L, F, "* filter=evil", "* filter=evil\n"),
		SYNC_FLAG_ATTR_DRIVER);
	/* The same line in an old regular file is still not new. */
	assert_int_equal(classify(".gitattributes", F, F, "* filter=lfs", "* filter=lfs\n"), 0);
}

/*
 * Found by tests/fuzz/fuzz_sync_gate.c (corpus regress-attr-old-after-nul): git reads a
 * .gitattributes from the index up to its first NUL (git check-attr --cached), so an old
 * line after a NUL set nothing and does not make the same line in the new file old.
 */
static void gate_attributes_old_nul(void **state)
{
	static const char old[] = "junk\0\n* diff=evil\n", nw[] = "* diff=evil\n";
	struct sync_entry e = {.path = ".gitattributes",
		.old_mode = F,
		.new_mode = F,
		.old_data = old,
		.old_len = sizeof(old) - 1,
		.new_data = nw,
		.new_len = sizeof(nw) - 1};

	assert_int_equal(sync_review_classify(&e), SYNC_FLAG_ATTR_DRIVER);
	/* The line the NUL cuts is read up to it; nothing after it is. */
	e.old_data = "* diff=evil\0x\n* diff=evil\n";
	e.old_len = 26;
	assert_int_equal(sync_review_classify(&e), 0);
	e.old_data = "* x\0\n* diff=evil\n";
	e.old_len = 17;
	assert_int_equal(sync_review_classify(&e), SYNC_FLAG_ATTR_DRIVER);
	/* Before the NUL, the line is still the owner's. */
	e.old_data = "* diff=evil\n\0";
	e.old_len = 13;
	assert_int_equal(sync_review_classify(&e), 0);
}

/* Contents read in part (review.c reads the first MiB): the rest is not vouched for. */
static void gate_cut(void **state)
{
	struct sync_entry e = {.path = ".gitattributes",
		.old_mode = F,
		.new_mode = F,
		.old_data = "# x\n",
		.old_len = 4,
		.new_data = "# x\n",
		.new_len = 4};

	assert_int_equal(sync_review_classify(&e), 0);
	e.new_cut = 1;
	assert_int_equal(sync_review_classify(&e), SYNC_FLAG_ATTR_DRIVER);
	e.path = "link";
	e.old_mode = 0;
	e.new_mode = L;
	e.new_data = "inside";
	e.new_len = 6;
	assert_int_equal(sync_review_classify(&e), SYNC_FLAG_SYMLINK_OUT);
	e.new_cut = 0;
	assert_int_equal(sync_review_classify(&e), 0);
}

static void gate_paths(void **state)
{
	assert_int_equal(classify(".gitmodules", 0, F, NULL, NULL), SYNC_FLAG_GITMODULES);
	assert_int_equal(classify("vendor/lib", 0, 0160000, NULL, NULL), SYNC_FLAG_GITMODULES);
	assert_int_equal(classify(".husky/pre-commit", 0, F, NULL, NULL), SYNC_FLAG_HOOK);
	assert_int_equal(classify(".githooks/pre-push", 0, F, NULL, NULL), SYNC_FLAG_HOOK);
	assert_int_equal(classify(".pre-commit-config.yaml", 0, F, NULL, NULL), SYNC_FLAG_HOOK);
	assert_int_equal(classify("a/.GIT/config", 0, F, NULL, NULL), SYNC_FLAG_DOTGIT);
	assert_int_equal(classify(".git", 0, F, NULL, NULL), SYNC_FLAG_DOTGIT);
	assert_int_equal(classify(".github/workflows/ci.yml", 0, F, NULL, NULL), SYNC_FLAG_CI);
	assert_int_equal(classify(".gitlab-ci.yml", 0, F, NULL, NULL), SYNC_FLAG_CI);
	assert_int_equal(classify("Jenkinsfile", 0, F, NULL, NULL), SYNC_FLAG_CI);
	assert_int_equal(classify(".circleci/config.yml", 0, F, NULL, NULL), SYNC_FLAG_CI);
	assert_int_equal(classify(".envrc", 0, F, NULL, NULL), SYNC_FLAG_ENVRC);
	assert_int_equal(classify(".vscode/tasks.json", 0, F, NULL, NULL), SYNC_FLAG_EDITOR);
	assert_int_equal(classify(".vscode/settings.json", 0, F, NULL, NULL), SYNC_FLAG_EDITOR);
	assert_int_equal(classify(".idea/workspace.xml", 0, F, NULL, NULL), SYNC_FLAG_EDITOR);
	/* Positive controls: ordinary files raise nothing. */
	assert_int_equal(classify("src/main.c", 0, F, NULL, NULL), 0);
	assert_int_equal(classify("docs/husky.md", 0, F, NULL, NULL), 0);
	assert_int_equal(classify(".github/CODEOWNERS", 0, F, NULL, NULL), 0);
	assert_int_equal(classify(".vscode/README", 0, F, NULL, NULL), 0);
	assert_int_equal(classify(".gitignore", 0, F, NULL, NULL), 0);
}

static void gate_symlinks(void **state)
{
	assert_int_equal(classify("pw", 0, L, NULL, "/etc/passwd"), SYNC_FLAG_SYMLINK_OUT);
	assert_int_equal(classify("a", 0, L, NULL, "../x"), SYNC_FLAG_SYMLINK_OUT);
	assert_int_equal(classify("d/a", 0, L, NULL, "../../x"), SYNC_FLAG_SYMLINK_OUT);
	assert_int_equal(classify("d/a", 0, L, NULL, "x/../../../y"), SYNC_FLAG_SYMLINK_OUT);
	assert_int_equal(classify("d/a", 0, L, NULL, ""), SYNC_FLAG_SYMLINK_OUT);
	/*
	 * A ".." after a name climbs from wherever the name leads, and it may be a link of the
	 * tree: with "d" -> ".", "d/d/../.." is above the root (found by fuzz_sync_gate.c,
	 * corpus regress-link-through-name).
	 */
	assert_int_equal(classify("a", 0, L, NULL, "d/d/../.."), SYNC_FLAG_SYMLINK_OUT);
	assert_int_equal(classify("x/a", 0, L, NULL, "../d/../y"), SYNC_FLAG_SYMLINK_OUT);
	/* Inside the tree. */
	assert_int_equal(classify("d/a", 0, L, NULL, "../x"), 0);
	assert_int_equal(classify("d/e/a", 0, L, NULL, "./../../x"), 0);
	assert_int_equal(classify("a", 0, L, NULL, "d/x"), 0);
}

static void gate_exec(void **state)
{
	assert_int_equal(classify("run.sh", 0, X, NULL, NULL), SYNC_FLAG_NEW_EXEC);
	assert_int_equal(classify("run.sh", F, X, NULL, NULL), SYNC_FLAG_NEW_EXEC);
	assert_int_equal(classify("run.sh", X, X, NULL, NULL), 0);
	assert_int_equal(classify("run.sh", X, F, NULL, NULL), 0);
	assert_int_equal(classify(".husky/pre-commit", 0, X, NULL, NULL),
		SYNC_FLAG_HOOK | SYNC_FLAG_NEW_EXEC);
}

static void gate_lfsconfig(void **state)
{
	assert_int_equal(classify(".lfsconfig", 0, F, NULL, NULL), SYNC_FLAG_LFSCONFIG);
	assert_int_equal(classify(".lfsconfig", F, F, NULL, NULL), SYNC_FLAG_LFSCONFIG);
	/* git-lfs reads only the top one. */
	assert_int_equal(classify("sub/.lfsconfig", 0, F, NULL, NULL), 0);
	assert_int_equal(classify(".lfsconfig", F, 0, NULL, NULL), 0);
}

static void gate_wants_data(void **state)
{
	assert_true(sync_review_wants_data(".gitattributes", F));
	assert_true(sync_review_wants_data("x/y", L));
	assert_false(sync_review_wants_data("x/y", F));
	assert_false(sync_review_wants_data(".gitattributes", 0160000));
}

static void flag_names(void **state)
{
	for (unsigned f = 1; f < (1u << SYNC_FLAG_COUNT); f <<= 1) {
		assert_string_not_equal(sync_flag_name(f), "unknown");
		assert_string_not_equal(sync_flag_text(f), "unknown");
	}
}

/* --- pkt-line framing, advertisement and report-status (push.c's protocol) */

static long pkt(const char *s, enum sync_pkt_type *t, const char **d, size_t *l)
{
	return sync_pkt_parse(s, strlen(s), t, d, l);
}

static void pkt_parse_good(void **state)
{
	enum sync_pkt_type t;
	const char *d;
	size_t l;

	assert_int_equal(pkt("0000", &t, &d, &l), 4);
	assert_int_equal(t, SYNC_PKT_FLUSH);
	assert_int_equal(pkt("0009hello0000", &t, &d, &l), 9);
	assert_int_equal(t, SYNC_PKT_DATA);
	assert_int_equal(l, 5);
	assert_memory_equal(d, "hello", 5);
	/* Upper-case hex is accepted as git does; an empty data packet is 0004. */
	assert_int_equal(pkt("000Aabcdef", &t, &d, &l), 10);
	assert_int_equal(pkt("0004", &t, &d, &l), 4);
	assert_int_equal(t, SYNC_PKT_DATA);
	assert_int_equal(l, 0);
}

static void pkt_parse_incomplete(void **state)
{
	enum sync_pkt_type t;
	const char *d;
	size_t l;

	/* Short input is "need more", never a read past the end. */
	assert_int_equal(sync_pkt_parse("", 0, &t, &d, &l), 0);
	assert_int_equal(sync_pkt_parse("00", 2, &t, &d, &l), 0);
	assert_int_equal(pkt("0009hell", &t, &d, &l), 0);
	assert_int_equal(pkt("fff0", &t, &d, &l), 0);
}

static void pkt_parse_hostile(void **state)
{
	enum sync_pkt_type t;
	const char *d;
	size_t l;

	assert_int_equal(pkt("00x9hello", &t, &d, &l), -1); /* bad hex */
	assert_int_equal(pkt("-009hello", &t, &d, &l), -1);
	assert_int_equal(pkt(" 009hello", &t, &d, &l), -1);
	assert_int_equal(pkt("0001", &t, &d, &l), -1); /* v2 delimiter */
	assert_int_equal(pkt("0002", &t, &d, &l), -1);
	assert_int_equal(pkt("0003", &t, &d, &l), -1);
	assert_int_equal(pkt("fff1", &t, &d, &l), -1); /* longer than git allows */
	assert_int_equal(pkt("ffff", &t, &d, &l), -1);
}

static void pkt_format(void **state)
{
	char out[SYNC_PKT_MAX + 16], *big;
	enum sync_pkt_type t;
	const char *d;
	size_t l;

	assert_int_equal(sync_pkt_format(out, sizeof(out), "hello", 5), 9);
	assert_memory_equal(out, "0009hello", 9);
	assert_int_equal(sync_pkt_format(out, 8, "hello", 5), -1); /* does not fit */
	big = calloc(1, SYNC_PKT_MAX);
	assert_non_null(big);
	memset(big, 'a', SYNC_PKT_MAX - 4);
	assert_int_equal(sync_pkt_format(out, sizeof(out), big, SYNC_PKT_MAX - 4), SYNC_PKT_MAX);
	assert_memory_equal(out, "fff0", 4);
	/* Round trip through the parser. */
	assert_int_equal(sync_pkt_parse(out, SYNC_PKT_MAX, &t, &d, &l), SYNC_PKT_MAX);
	assert_int_equal(l, SYNC_PKT_MAX - 4);
	assert_int_equal(sync_pkt_format(out, sizeof(out), big, SYNC_PKT_MAX - 3), -1);
	free(big);
}

#define OID1 "1111111111111111111111111111111111111111"
#define LONG "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static int adv(const char *s)
{
	char name[64];
	const char *caps;
	size_t cl;
	git_oid id;

	return sync_adv_parse(s, strlen(s), &id, name, sizeof(name), &caps, &cl);
}

static void adv_lines(void **state)
{
	static const char first[] = OID1 " refs/heads/main\0report-status ofs-delta quiet "
					 "agent=git/2.39\n";
	char name[64];
	const char *caps;
	size_t cl;
	git_oid id;
	char hex[GIT_OID_HEXSZ + 1];

	assert_int_equal(
		sync_adv_parse(first, sizeof(first) - 1, &id, name, sizeof(name), &caps, &cl), 0);
	assert_string_equal(name, "refs/heads/main");
	assert_string_equal(git_oid_tostr(hex, sizeof(hex), &id), OID1);
	assert_non_null(caps);
	assert_true(sync_caps_has(caps, cl, "report-status"));
	assert_true(sync_caps_has(caps, cl, "quiet"));
	assert_true(sync_caps_has(caps, cl, "agent"));
	assert_false(sync_caps_has(caps, cl, "report"));
	assert_false(sync_caps_has(caps, cl, "no-thin"));
	assert_false(sync_caps_has(caps, cl, "ofs"));
	assert_int_equal(sync_adv_parse(OID1 " refs/heads/x\n", strlen(OID1 " refs/heads/x\n"), &id,
				 name, sizeof(name), &caps, &cl),
		0);
	assert_null(caps);
	/* Hostile: short id, bad hex, no space, empty name, control bytes, overlong name. */
	assert_int_equal(adv("1111 refs/heads/x"), -1);
	assert_int_equal(adv("g111111111111111111111111111111111111111 refs/heads/x"), -1);
	assert_int_equal(adv(OID1 "xrefs/heads/x"), -1);
	assert_int_equal(adv(OID1 " \n"), -1);
	assert_int_equal(adv(OID1 " refs/heads/a\033[2J"), -1);
	assert_int_equal(adv(OID1 " refs/heads/" LONG), -1);
}

static int report_run(const char *const *pkts, size_t np, struct sync_report *r, int *st,
	char (*why)[256], const char *const *refs, size_t n)
{
	memset(r, 0, sizeof(*r));
	memset(st, 0, n * sizeof(*st));
	r->refs = refs;
	r->n = n;
	r->state = st;
	r->why = why;
	for (size_t i = 0; i < np; i++) {
		int rr = pkts[i] ? sync_report_feed(r, SYNC_PKT_DATA, pkts[i], strlen(pkts[i]))
				 : sync_report_feed(r, SYNC_PKT_FLUSH, NULL, 0);
		if (rr < 0)
			break;
	}
	return sync_report_finish(r);
}

static void report_status(void **state)
{
	static const char *const refs[] = {"refs/heads/main", "refs/heads/b"};
	struct sync_report r;
	int st[2];
	char why[2][256];

	{
		const char *const p[] = {
			"unpack ok\n", "ok refs/heads/main\n", "ok refs/heads/b\n", NULL};
		assert_int_equal(report_run(p, 4, &r, st, why, refs, 2), 0);
		assert_int_equal(st[0], 1);
		assert_int_equal(st[1], 1);
	}
	{
		const char *const p[] = {"unpack ok\n", "ok refs/heads/main\n",
			"ng refs/heads/b Working directory has unstaged changes\n", NULL};
		assert_int_equal(report_run(p, 4, &r, st, why, refs, 2), 1);
		assert_int_equal(st[1], 2);
		assert_string_equal(why[1], "Working directory has unstaged changes");
	}
	{
		/* The reason is the agent's text: escaped for the terminal. */
		const char *const p[] = {"unpack ok\n", "ok refs/heads/main\n",
			"ng refs/heads/b bad\033[31m\n", NULL};
		assert_int_equal(report_run(p, 4, &r, st, why, refs, 2), 1);
		assert_null(strchr(why[1], '\033'));
	}
	{
		const char *const p[] = {"unpack index-pack abnormal exit\n",
			"ng refs/heads/main unpacker error\n", NULL};
		assert_int_equal(report_run(p, 3, &r, st, why, refs, 2), 1);
		assert_int_equal(r.unpack, 2);
	}
}

static void report_status_hostile(void **state)
{
	static const char *const refs[] = {"refs/heads/main", "refs/heads/b"};
	struct sync_report r;
	int st[2];
	char why[2][256];

	{
		/* Missing flush: the stream ended early. */
		const char *const p[] = {
			"unpack ok\n", "ok refs/heads/main\n", "ok refs/heads/b\n"};
		assert_int_equal(report_run(p, 3, &r, st, why, refs, 2), -1);
	}
	{
		/* A ref without an answer is not a success. */
		const char *const p[] = {"unpack ok\n", "ok refs/heads/main\n", NULL};
		assert_int_equal(report_run(p, 3, &r, st, why, refs, 2), -1);
	}
	{
		/* A refusal cannot be overwritten by a later "ok". */
		const char *const p[] = {"unpack ok\n", "ng refs/heads/main no\n",
			"ok refs/heads/main\n", "ok refs/heads/b\n", NULL};
		assert_int_equal(report_run(p, 5, &r, st, why, refs, 2), -1);
	}
	{
		/* A ref that was not pushed, a prefix of one, no unpack line, garbage. */
		const char *const p1[] = {"unpack ok\n", "ok refs/heads/other\n", NULL};
		const char *const p2[] = {"unpack ok\n", "ok refs/heads/mai\n", NULL};
		const char *const p3[] = {"ok refs/heads/main\n", "ok refs/heads/b\n", NULL};
		const char *const p4[] = {"unpack ok\n", "okrefs/heads/main\n", NULL};
		const char *const p5[] = {NULL};
		assert_int_equal(report_run(p1, 3, &r, st, why, refs, 2), -1);
		assert_int_equal(report_run(p2, 3, &r, st, why, refs, 2), -1);
		assert_int_equal(report_run(p3, 3, &r, st, why, refs, 2), -1);
		assert_int_equal(report_run(p4, 3, &r, st, why, refs, 2), -1);
		assert_int_equal(report_run(p5, 1, &r, st, why, refs, 2), -1);
	}
	{
		/* Data after the flush. */
		const char *const p[] = {"unpack ok\n", "ok refs/heads/main\n", "ok refs/heads/b\n",
			NULL, "ok refs/heads/b\n"};
		assert_int_equal(report_run(p, 5, &r, st, why, refs, 2), -1);
	}
}

/* --- the pack's bytes in upload-pack's answer (sync_band_feed) */

struct band_out {
	char buf[256];
	size_t n;
};

static void band_emit(void *arg, const char *p, size_t n)
{
	struct band_out *o = arg;

	assert_true(o->n + n <= sizeof(o->buf));
	memcpy(o->buf + o->n, p, n);
	o->n += n;
}

static void band_demux(void **state)
{
	/* An advertisement line, a flush, NAK, progress (band 2), the pack in two band-1
	 * packets around a band-2 one, an error (band 3), a flush. */
	static const char stream[] =
		"003d1111111111111111111111111111111111111111 refs/heads/main\n"
		"0000"
		"0008NAK\n"
		"000b\002Count\n"
		"0009\001PACK"
		"000a\002prog\n"
		"000a\001\000\000\000\002x"
		"0008\003err"
		"0000";
	const size_t len = sizeof(stream) - 1;

	(void)state;
	/* Whatever the chunks (every split in two, then byte by byte), the same bytes. */
	for (size_t cut = 0; cut <= len; cut++) {
		struct sync_band d = {0};
		struct band_out o = {0};

		sync_band_feed(&d, stream, cut, band_emit, &o);
		sync_band_feed(&d, stream + cut, len - cut, band_emit, &o);
		assert_false(d.bad);
		assert_int_equal(o.n, 9);
		assert_memory_equal(o.buf, "PACK\000\000\000\002x", 9);
	}
	{
		struct sync_band d = {0};
		struct band_out o = {0};

		for (size_t i = 0; i < len; i++)
			sync_band_feed(&d, stream + i, 1, band_emit, &o);
		assert_int_equal(o.n, 9);
	}
	/* Bad lengths stop it for good: not hex, 1-4, over the maximum. */
	{
		static const char *const bad[] = {"00x8NAK\n", "0004", "0003", "fff1"};

		for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
			struct sync_band d = {0};
			struct band_out o = {0};

			sync_band_feed(&d, bad[i], strlen(bad[i]), band_emit, &o);
			assert_true(d.bad);
			sync_band_feed(&d, "0009\001PACK", 9, band_emit, &o);
			assert_int_equal(o.n, 0);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(refs_good),
		cmocka_unit_test(refs_outside_heads),
		cmocka_unit_test(refs_git_syntax),
		cmocka_unit_test(refs_control_and_bidi),
		cmocka_unit_test(refs_length),
		cmocka_unit_test(escape),
		cmocka_unit_test(unescape_round_trip),
		cmocka_unit_test(shell_quote),
		cmocka_unit_test(gate_attributes),
		cmocka_unit_test(gate_attributes_git_syntax),
		cmocka_unit_test(gate_attributes_old_nul),
		cmocka_unit_test(gate_attributes_macros_and_unsets),
		cmocka_unit_test(gate_cut),
		cmocka_unit_test(gate_paths),
		cmocka_unit_test(gate_symlinks),
		cmocka_unit_test(gate_exec),
		cmocka_unit_test(gate_lfsconfig),
		cmocka_unit_test(gate_wants_data),
		cmocka_unit_test(flag_names),
		cmocka_unit_test(band_demux),
		cmocka_unit_test(pkt_parse_good),
		cmocka_unit_test(pkt_parse_incomplete),
		cmocka_unit_test(pkt_parse_hostile),
		cmocka_unit_test(pkt_format),
		cmocka_unit_test(adv_lines),
		cmocka_unit_test(report_status),
		cmocka_unit_test(report_status_hostile),
	};

	return sync_unit_run(tests, sizeof(tests) / sizeof(tests[0]));
}
