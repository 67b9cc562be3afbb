/* SPDX-License-Identifier: MIT */
/*
 * The mirror written by its account, not root (issue 26): the writer owns the tree and
 * keeps its directories 0555 (u+w only while it changes one), rewrites the status file in
 * place, and gets the reader's stream from `ocsb-agentd --mirror-read` (mirror_read_here);
 * the link maker works without the manifest (mirror_link_here); the watcher
 * (`--mirror-watch`, mirrorwatch_watcher) tells of changes by one byte a burst. Run
 * unprivileged: owner, agent and account are the test's own uid.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "unit.h"

#include "../../agentd/agentd.h"
#include "fileops.h"
#include "mirror.h"
#include "paths.h"
#include "util.h"

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

static void mk(const char *rel)
{
	assert_int_equal(mkdir(unit_path(rel), 0755), 0);
}

static void settle(void)
{
	usleep(60 * 1000);
}

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	mk("root");
	mk("owner");
	mk("agent");
	mk("owner/.config");
	mk("owner/.config/opencode");
	mk("owner/.config/opencode/agent");
	mk("owner/.config/opencode/command");
	put("owner/.config/opencode/opencode.json", "{\"theme\": \"x\"}\n");
	put("owner/.config/opencode/agent/review.md", "Review.\n");
	put("owner/.config/opencode/agent/old.md", "Old.\n");
	put("owner/.config/opencode/command/x.md", "X.\n");
	put("owner/.gitconfig", "[user]\n\tname = A\n");
	settle();
	assert_int_equal(paths_under(&f->paths, unit_path("root")), 0);
	assert_int_equal(user_lookup_uid(getuid(), &f->owner), 0);
	f->agent = f->owner;
	snprintf(f->owner.home, sizeof(f->owner.home), "%s", unit_path("owner"));
	snprintf(f->agent.home, sizeof(f->agent.home), "%s", unit_path("agent"));
	snprintf(f->agent.name, sizeof(f->agent.name), "ai-test");
	mirror_spec_defaults(&f->spec);
	assert_int_equal(mirror_init(&f->m, &f->paths, &f->owner, &f->agent, &f->spec), 0);
	/* As the supervisor sets it: the tree's owner is not root. */
	f->m.dmode = 0555;
}

static int chmod_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)ftw;
	if (flag == FTW_D || flag == FTW_DP)
		chmod(path, 0755);
	(void)st;
	return 0;
}

static void fixture_free(struct fixture *f)
{
	mirror_free(&f->m);
	mirror_spec_free(&f->spec);
	/* 0555 directories: the teardown could not empty them. */
	nftw(unit_path("root"), chmod_one, 16, FTW_PHYS);
}

/* What `ocsb-agentd --mirror-read` prints, as the supervisor collects it. */
static void read_stream(struct fixture *f, struct buf *out)
{
	char *d = NULL;
	size_t n = 0;
	int fd;

	fd = open(unit_path("stream"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	/* Its own manifest from the status file, as the exec'd reader loads it. */
	assert_int_equal(mirror_read_here(&f->m, fd), 0);
	close(fd);
	/* It went to the owner's home: back to a directory that outlives the test. */
	assert_int_equal(chdir("/"), 0);
	assert_int_equal(fo_read(unit_path("stream"), 64u << 20, &d, &n), 0);
	buf_free(out);
	buf_append(out, d ? d : "", n);
	free(d);
}

static int refresh(struct fixture *f, struct mirror_stats *st)
{
	struct buf s = {0};
	int64_t t = mirror_scan_start();
	int r;

	read_stream(f, &s);
	/* The supervisor's writer child loads the manifest from disk too. */
	assert_int_equal(mirror_load(&f->m), 0);
	r = mirror_apply(&f->m, s.data, s.len, 0, t, st);
	buf_free(&s);
	return r;
}

static mode_t lmode(const char *path)
{
	struct stat st;

	return lstat(path, &st) < 0 ? 0 : st.st_mode;
}

static const char *tree(const struct fixture *f, const char *rel)
{
	static char p[4][PATH_MAX + 256];
	static unsigned i;
	char *r = p[i++ % 4];

	snprintf(r, sizeof(p[0]), "%s/%s", f->m.tree, rel);
	return r;
}

static void dirs_are_0555(const struct fixture *f)
{
	assert_int_equal(lmode(f->m.tree), S_IFDIR | 0555);
	assert_int_equal(lmode(tree(f, ".config")), S_IFDIR | 0555);
	assert_int_equal(lmode(tree(f, ".config/opencode")), S_IFDIR | 0555);
	assert_int_equal(lmode(tree(f, ".config/opencode/agent")), S_IFDIR | 0555);
}

static void writer_owns_a_0555_tree(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct stat s1, s2;
	char *d;

	(void)state;
	fixture_init(&f);
	assert_int_equal(refresh(&f, &st), 0);
	assert_true(st.written > 0);
	dirs_are_0555(&f);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/review.md")), S_IFREG | 0444);
	assert_int_equal(lmode(tree(&f, ".gitconfig")), S_IFREG | 0444);
	assert_int_equal(stat(f.m.status, &s1), 0);

	/* A no-change refresh writes nothing and leaves the directories as they are. */
	settle();
	assert_int_equal(refresh(&f, &st), 0);
	assert_int_equal(st.written, 0);
	assert_int_equal(st.removed, 0);

	/* Changes in a 0555 directory: a file rewritten, one deleted, a directory added. */
	put("owner/.config/opencode/agent/review.md", "Review twice.\n");
	assert_int_equal(unlink(unit_path("owner/.config/opencode/agent/old.md")), 0);
	mk("owner/.config/opencode/skill");
	put("owner/.config/opencode/skill/s.md", "Skill.\n");
	settle();
	assert_int_equal(refresh(&f, &st), 0);
	assert_true(st.written >= 3);
	assert_int_equal(st.removed, 1);
	d = NULL;
	{
		size_t n;

		assert_int_equal(
			fo_read(tree(&f, ".config/opencode/agent/review.md"), 4096, &d, &n), 0);
	}
	assert_string_equal(d, "Review twice.\n");
	free(d);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/old.md")), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/skill")), S_IFDIR | 0555);
	/* Every directory the writer opened has its mode back. */
	dirs_are_0555(&f);

	/* A whole directory gone from the source: removed from the 0555 tree. */
	assert_int_equal(unlink(unit_path("owner/.config/opencode/command/x.md")), 0);
	assert_int_equal(rmdir(unit_path("owner/.config/opencode/command")), 0);
	settle();
	assert_int_equal(refresh(&f, &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/command")), 0);
	dirs_are_0555(&f);

	/* The status file is rewritten in place (root gave it its group), ended by "end". */
	assert_int_equal(stat(f.m.status, &s2), 0);
	assert_int_equal(s1.st_ino, s2.st_ino);
	{
		char *data = NULL;
		size_t n = 0;

		assert_int_equal(fo_read(f.m.status, 1 << 20, &data, &n), 0);
		assert_true(n > 5);
		assert_memory_equal(data + n - 5, "\nend\n", 5);
		free(data);
	}
	fixture_free(&f);
}

/* A status file cut short (a crash mid-rewrite) is not trusted: every entry again. */
static void status_cut_short_not_trusted(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	char *data = NULL;
	size_t n = 0;

	(void)state;
	fixture_init(&f);
	assert_int_equal(refresh(&f, &st), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_true(f.m.n > 0); /* control: the whole file is trusted */
	assert_int_equal(fo_read(f.m.status, 1 << 20, &data, &n), 0);
	assert_int_equal(truncate(f.m.status, (off_t)(n - 4)), 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(f.m.n, 0);
	free(data);
	/* The next refresh reads every file and compares: nothing to write, the file whole. */
	settle();
	assert_int_equal(refresh(&f, &st), 0);
	assert_int_equal(st.written, 0);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_true(f.m.n > 0);
	fixture_free(&f);
}

/* `ocsb-agentd --mirror-link`: no manifest (the agent cannot read it), the tree says. */
static void link_maker_without_manifest(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct mirror fresh;
	char target[PATH_MAX + 64], got[PATH_MAX + 64], *out = NULL;
	ssize_t n;
	size_t len = 0;
	int fd;

	(void)state;
	fixture_init(&f);
	assert_int_equal(refresh(&f, &st), 0);
	assert_int_equal(mirror_init(&fresh, &f.paths, &f.owner, &f.agent, &f.spec), 0);
	assert_int_equal(fresh.n, 0);
	fd = open(unit_path("lines"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(mirror_link_here(&fresh, 0, 0, fd), 0);
	close(fd);
	snprintf(target, sizeof(target), "%s/.config/opencode", f.m.tree);
	n = readlink(unit_path("agent/.config/opencode"), got, sizeof(got) - 1);
	assert_true(n > 0);
	got[n] = '\0';
	assert_string_equal(got, target);
	/* .agents is not in the tree (the owner has none, nothing reserved): no dangling link */
	assert_int_equal(lmode(unit_path("agent/.agents")), 0);
	/* ~/.gitconfig: the agent's own file including the mirror's */
	assert_int_equal(lmode(unit_path("agent/.gitconfig")), S_IFREG | 0600);
	assert_int_equal(fo_read(unit_path("lines"), 1 << 20, &out, &len), 0);
	assert_non_null(strstr(out, "link ~/.config/opencode -> "));
	free(out);
	mirror_free(&fresh);
	fixture_free(&f);
}

/* The modes refuse to run as anyone but the account their job is for. */
static void modes_refuse_another_uid(void **state)
{
	struct fixture f;

	(void)state;
	fixture_init(&f);
	f.m.owner_uid = getuid() + 1;
	assert_int_equal(mirror_read_here(&f.m, 1), 2);
	f.m.agent_uid = getuid() + 1;
	assert_int_equal(mirror_link_here(&f.m, 1, 0, 1), 2);
	fixture_free(&f);
}

/* A stream cut short changes nothing and removes nothing. */
static void truncated_stream_changes_nothing(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	struct buf s = {0};

	(void)state;
	fixture_init(&f);
	assert_int_equal(refresh(&f, &st), 0);
	assert_int_equal(unlink(unit_path("owner/.config/opencode/agent/old.md")), 0);
	settle();
	read_stream(&f, &s);
	assert_true(s.len > 10);
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(mirror_apply(&f.m, s.data, s.len - 3, 0, mirror_scan_start(), &st), -1);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/old.md")), S_IFREG | 0444);
	dirs_are_0555(&f);
	/* control: the whole stream removes it */
	assert_int_equal(mirror_load(&f.m), 0);
	assert_int_equal(mirror_apply(&f.m, s.data, s.len, 0, mirror_scan_start(), &st), 0);
	assert_int_equal(lmode(tree(&f, ".config/opencode/agent/old.md")), 0);
	buf_free(&s);
	fixture_free(&f);
}

/* Bytes from the watcher within ms: how many (all that came, the pipe drained). */
static int bytes_within(int fd, int ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	char b[64];
	ssize_t n;

	if (poll(&pf, 1, ms) != 1 || !(pf.revents & POLLIN))
		return 0;
	usleep(50 * 1000);
	n = read(fd, b, sizeof(b));
	return n > 0 ? (int)n : 0;
}

/*
 * The watcher in a 0700 home and ~/.config: a byte when its watches are in place, one per
 * burst of changes, none for a name that leads to no mirrored path; a new directory
 * watched once a refresh rewrote the status file; its end when its reader is gone.
 */
static void watcher_tells_of_changes(void **state)
{
	struct fixture f;
	struct mirror_stats st;
	int p[2], status = -1;
	pid_t pid;

	(void)state;
	fixture_init(&f);
	assert_int_equal(chmod(unit_path("owner"), 0700), 0);
	assert_int_equal(chmod(unit_path("owner/.config"), 0700), 0);
	assert_int_equal(refresh(&f, &st), 0);
	mirror_free(&f.m);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		_exit(mirrorwatch_watcher(&f.m, p[1]));
	}
	close(p[1]);
	assert_int_equal(bytes_within(p[0], 5000), 1); /* ready */
	put("owner/.config/opencode/command/new.md", "New.\n");
	put("owner/.config/opencode/command/new2.md", "New.\n");
	assert_int_equal(bytes_within(p[0], 2000), 1); /* one burst, one byte */
	put("owner/.bash_history", "ls\n");
	assert_int_equal(bytes_within(p[0], 400), 0); /* not on the way to a root */
	put("owner/.config/opencode/opencode.json", "{\"theme\": \"y\"}\n");
	assert_int_equal(bytes_within(p[0], 2000), 1); /* positive control of the above */
	mk("owner/.config/opencode/newdir");
	assert_int_equal(bytes_within(p[0], 2000), 1);
	/* The refresh the byte asks for: the new directory in the status file, then watched. */
	settle();
	assert_int_equal(refresh(&f, &st), 0);
	mirror_free(&f.m);
	assert_int_equal(bytes_within(p[0], 2000), 1);
	put("owner/.config/opencode/newdir/deep.md", "Deep.\n");
	assert_int_equal(bytes_within(p[0], 2000), 1);
	/* Its reader gone: it ends by itself. */
	close(p[0]);
	for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(10 * 1000);
	if (status == -1)
		kill(pid, SIGKILL);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	fixture_free(&f);
}

#define T(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(writer_owns_a_0555_tree),
		T(status_cut_short_not_trusted),
		T(link_maker_without_manifest),
		T(modes_refuse_another_uid),
		T(truncated_stream_changes_nothing),
		T(watcher_tells_of_changes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
