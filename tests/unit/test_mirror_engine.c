/* SPDX-License-Identifier: MIT */
/*
 * The mirror's whole engine run unprivileged (owner = agent = the test's own uid; no drop,
 * no chown): build, incremental refresh, change detection, links, lying readers, a
 * writable copy, a hostile status file. The scanner and the rules: test_mirror.
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
	/*
	 * The agent's own directory in the place (OpenCode made it before the first link,
	 * issue 28): taken, what it held kept aside and said; a second time, the next name.
	 */
	for (int i = 1; i <= 2; i++) {
		char aside[80], line[PATH_MAX + 200];

		assert_int_equal(unlink(unit_path("agent/.config/opencode")), 0);
		assert_int_equal(mkdir(unit_path("agent/.config/opencode"), 0755), 0);
		put("agent/.config/opencode/opencode.json", "mine\n");
		/* dry: only said */
		assert_int_equal(mirror_link(&f.m, 1, &ch), 0);
		assert_int_equal(ch.n, 1);
		snprintf(aside, sizeof(aside), ".config/opencode.ocsb-aside%s", i == 1 ? "" : ".2");
		snprintf(line, sizeof(line),
			"~/.config/opencode is not ocsb's link: move it to ~/%s, link it to the "
			"mirror",
			aside);
		assert_string_equal(ch.v[0], line);
		strv_free(&ch);
		assert_int_equal(lmode(unit_path("agent/.config/opencode")) & S_IFMT, S_IFDIR);
		assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
		assert_int_equal(ch.n, 1);
		snprintf(line, sizeof(line),
			"~/.config/opencode was not ocsb's link: moved to ~/%s, linked to the "
			"mirror (%s)",
			aside, tree(&f, ".config/opencode"));
		assert_string_equal(ch.v[0], line);
		strv_free(&ch);
		n = readlink(unit_path("agent/.config/opencode"), target, sizeof(target) - 1);
		assert_true(n > 0);
		target[n] = '\0';
		assert_string_equal(target, tree(&f, ".config/opencode"));
		snprintf(line, sizeof(line), "agent/%s/opencode.json", aside);
		s = slurp(unit_path(line));
		assert_string_equal(s, "mine\n");
		free(s);
	}
	/* every name taken: left, and said */
	for (int i = 3; i <= MIRROR_ASIDE_MAX; i++) {
		char aside[80];

		snprintf(aside, sizeof(aside), "agent/.config/opencode.ocsb-aside.%d", i);
		put(aside, "x\n");
	}
	assert_int_equal(unlink(unit_path("agent/.config/opencode")), 0);
	put("agent/.config/opencode", "a file\n");
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 0); /* a problem line: logged, not a change */
	assert_int_equal(lmode(unit_path("agent/.config/opencode")) & S_IFMT, S_IFREG);
	assert_int_equal(mirror_link(&f.m, 1, &ch), 0);
	assert_int_equal(ch.n, 1); /* --check counts it */
	assert_non_null(strstr(ch.v[0], "are all taken: not linked"));
	strv_free(&ch);
	/* the owner's doctor reads it from the links file (the last real run's problems) */
	s = slurp(f.m.links);
	assert_non_null(strstr(s, "~/.config/opencode is not ocsb's link and "));
	assert_non_null(strstr(s, "are all taken: not linked"));
	free(s);
	assert_int_equal(unlink(unit_path("agent/.config/opencode")), 0);
	assert_int_equal(mirror_link(&f.m, 0, &ch), 0);
	assert_int_equal(ch.n, 1); /* control: free again, linked */
	strv_free(&ch);
	s = slurp(f.m.links);
	assert_string_equal(s, "");
	free(s);
	assert_int_equal(lmode(unit_path("agent/.config/opencode")), S_IFLNK | 0777);
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

/* A reader that names an entry as the writer names its temporary files. */
static int tmp_name_reader(void *m, int outfd)
{
	struct buf b = {0};
	int r;

	(void)m;
	forge(&b, 'd', ".config/opencode", NULL);
	forge(&b, 'd', ".config/opencode/.ocsb-tmp.agent", NULL);
	forge(&b, 'E', "", NULL);
	r = write(outfd, b.data, b.len) == (ssize_t)b.len ? 0 : 1;
	buf_free(&b);
	return r;
}

/*
 * Found by tests/fuzz/fuzz_mirror_stream.c (corpus regress-tmp-name): the writer made an
 * entry named as its temporary files are (".ocsb-tmp.*"), then the stream failed; what was
 * left could not be told from a temporary file left behind, and such a name can collide
 * with the next one. The writer refuses the name; the honest reader skips it.
 */
static void engine_tmp_name(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	const struct mirror_entry *e;

	fixture_init(&f);
	put("owner/.config/opencode/.ocsb-tmp.1.0", "the owner's file\n");
	assert_int_equal(mirror_refresh(&f.m, 0, &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/.ocsb-tmp.1.0")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), S_IFREG | 0444);
	e = mirror_entry_find(&f.m, ".config/opencode/.ocsb-tmp.1.0");
	assert_non_null(e);
	assert_int_equal(e->kind, '-');
	assert_int_equal(e->state, MS_SKIPPED);
	f.m.reader = tmp_name_reader;
	assert_int_equal(mirror_refresh(&f.m, 0, &st), -1);
	assert_int_equal(lmode(tree(&f, ".config/opencode/.ocsb-tmp.agent")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), S_IFREG | 0444);
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

#define T(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(engine_build),
		T(engine_refresh_incremental),
		T(engine_change_detection),
		T(engine_links),
		T(engine_link_from_a_lying_reader),
		T(engine_orphan_from_a_lying_reader),
		T(engine_nul_detail),
		T(engine_tmp_name),
		T(engine_writable_copy),
		T(status_file_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
