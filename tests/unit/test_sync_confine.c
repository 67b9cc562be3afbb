/* SPDX-License-Identifier: MIT */
/*
 * The pull's confined child and its handover (sync/confine.c, sync/handover.c): what the
 * parent accepts from the child (a round trip of every record, then hostile records, each
 * next to the honest one it differs from), and what the confinement leaves a process (a
 * forked child confined to a scratch "git directory": reads there, writes its quarantine,
 * nothing else; no socket; no signal to its parent; a chmod that changes nothing; each
 * with the same call made before the confinement as the positive control).
 */
#define _GNU_SOURCE
#include "sync_unit.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.h"

#define TIP "1111111111111111111111111111111111111111"
#define OLD "2222222222222222222222222222222222222222"

static int feed(struct sync_ho *h, const char *line)
{
	char err[256];

	return sync_ho_feed(h, line, strlen(line), err, sizeof(err));
}

static void ho_round_trip(void **state)
{
	struct sync_ho h = {0};
	struct sync_branch b = {0};
	struct sync_rfile d = {.path = "a\tb\x1b[31m.txt", .add = 3, .del = 1};
	struct buf out = {0};
	char err[256];

	(void)state;
	snprintf(b.name, sizeof(b.name), "feature/x");
	git_oid_fromstr(&b.tip, TIP);
	git_oid_fromstr(&b.old, OLD);
	b.have_old = 1;
	b.state = "forced";
	b.have_local = 1;
	b.ahead = 4;
	b.commits = 4;
	b.files = 1;
	b.ins = 3;
	b.del = 1;
	assert_int_equal(sync_ho_put_branch(&out, &b), 0);
	assert_int_equal(sync_ho_put_stat(&out, &d), 0);
	assert_int_equal(sync_ho_put_flag(&out, d.path, SYNC_FLAG_HOOK, 1), 0);
	assert_int_equal(buf_puts(&out, "skip\t"), 0);
	assert_int_equal(sync_ho_put_text(&out,
				 "refs/heads/\xe2\x80\xae"
				 "evil"),
		0);
	assert_int_equal(buf_puts(&out, "\tbidi\nmemo\treview\twrite\nend\n"), 0);
	for (char *s = out.data, *nl; (nl = strchr(s, '\n')); s = nl + 1)
		assert_true(sync_ho_feed(&h, s, (size_t)(nl - s), err, sizeof(err)) >= 0);
	assert_int_equal(sync_ho_finish(&h, err, sizeof(err)), 0);
	assert_int_equal(h.nb, 1);
	assert_string_equal(h.br[0].name, "feature/x");
	assert_string_equal(h.br[0].state, "forced");
	assert_true(h.br[0].have_old && h.br[0].have_local && !h.br[0].have_base);
	assert_int_equal(h.br[0].ahead, 4);
	/* The path arrives escaped, tab and ESC included, and is shown so. */
	assert_string_equal(h.stat[0].data, "    a\\x09b\\x1b[31m.txt | +3 -1\n");
	assert_int_equal(h.nfl, 1);
	assert_int_equal(h.fl[0].flag, SYNC_FLAG_HOOK);
	assert_true(h.fl[0].is_new);
	assert_string_equal(h.fl[0].branch, "feature/x");
	assert_int_equal(h.skipped.n, 1);
	assert_int_equal(h.memo_review, SYNC_HO_MEMO_WRITE);
	assert_int_equal(h.memo_unrelated, SYNC_HO_MEMO_NONE);
	sync_ho_free(&h);
	buf_free(&out);
}

/* One honest record, then each hostile variant on its own (the branch record first). */
static void ho_hostile(void **state)
{
	static const char *const bad[] = {
		"branch\t../../heads/main\t" TIP "\t-\tnew\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\x1b\t" TIP "\t-\tnew\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t-\tup to date\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t" TIP "\tnew\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t" TIP "\tforced\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t" OLD "\tmerged\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t1111\t-\tnew\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t-\tnew\t2\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t-\tnew\t0\t-1\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0",
		"branch\tmain\t" TIP "\t-\tnew\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0",
		"stat\tx\x1b[2J\t1\t1\t-",
		"stat\tx\\\t1\t1\t-",
		"flag\tx\tno-such-flag\t0",
		"skip\tevil\x9b\tx",
		"memo\treview\tmaybe",
		"deleted\tfeature\tzz",
		"nonsense",
	};
	const char *good = "branch\tmain\t" TIP "\t-\tnew\t0\t0\t0\t1\t-\t0\t0\t0\t0\t0\t0\t0\t0";
	struct sync_ho h = {0};

	(void)state;
	assert_true(feed(&h, good) >= 0);
	assert_int_equal(feed(&h, "stat\tx\\x1b[2J\t1\t1\t-"), SYNC_HO_RESULT);
	assert_int_equal(feed(&h, "flag\tx\thook\t0"), SYNC_HO_RESULT);
	/* The same branch twice. */
	assert_int_equal(feed(&h, good), -1);
	sync_ho_free(&h);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct sync_ho g = {0};

		if (strncmp(bad[i], "branch", 6) != 0)
			assert_true(feed(&g, good) >= 0);
		if (feed(&g, bad[i]) != -1)
			fail_msg("accepted: %s", bad[i]);
		sync_ho_free(&g);
	}
	{
		/* A record after the end, no end, a deleted branch that is also fetched. */
		struct sync_ho g = {0};
		char err[256];

		assert_int_equal(sync_ho_finish(&g, err, sizeof(err)), -1);
		assert_true(feed(&g, good) >= 0);
		assert_true(feed(&g, "deleted\tmain\t" OLD) >= 0);
		assert_true(feed(&g, "end") >= 0);
		assert_int_equal(sync_ho_finish(&g, err, sizeof(err)), -1);
		assert_int_equal(feed(&g, "end"), -1);
		sync_ho_free(&g);
	}
	{
		/* At most SYNC_STAT_FILES lines and one "more" per branch. */
		struct sync_ho g = {0};

		assert_true(feed(&g, good) >= 0);
		for (int i = 0; i < SYNC_STAT_FILES; i++)
			assert_true(feed(&g, "stat\tx\t1\t1\t-") >= 0);
		assert_true(feed(&g, "more\t5") >= 0);
		assert_int_equal(feed(&g, "stat\tx\t1\t1\t-"), -1);
		sync_ho_free(&g);
	}
}

/* --- the confinement, in a forked child: one byte per probe, 1 = allowed */

static char scratch[] = "/tmp/ocsb-confine-XXXXXX";

static int can_open(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC, 0600);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

static int can_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return 0;
	close(fd);
	return 1;
}

/* chmod of path to 0777 took effect (then put back to 0600). */
static int can_chmod(const char *path)
{
	struct stat st;
	int r = chmod(path, 0777) == 0 && stat(path, &st) == 0 && (st.st_mode & 07777) == 0777;

	(void)chmod(path, 0600);
	return r;
}

/*
 * What a process can do: read in git/, read outside, create in git/ and in the
 * quarantine, a socket, a signal to its parent (0), chmod a file outside.
 */
static void probes(const char *dir, char *out)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/git/HEAD", dir);
	out[0] = (char)can_open(p, O_RDONLY);
	snprintf(p, sizeof(p), "%s/secret", dir);
	out[1] = (char)can_open(p, O_RDONLY);
	snprintf(p, sizeof(p), "%s/git/hook", dir);
	out[2] = (char)can_open(p, O_WRONLY | O_CREAT | O_TRUNC);
	unlink(p);
	snprintf(p, sizeof(p), "%s/git/in/pack/x", dir);
	out[3] = (char)can_open(p, O_WRONLY | O_CREAT | O_TRUNC);
	unlink(p);
	out[4] = (char)can_socket();
	out[5] = (char)(kill(getppid(), 0) == 0);
	snprintf(p, sizeof(p), "%s/secret", dir);
	out[6] = (char)can_chmod(p);
}

static void confine_child(void **state)
{
	char p[512], before[7], after[7], r[2 * sizeof(before) + 1] = {0};
	int fds[2], st;
	pid_t pid;
	long abi = landlock_abi();

	(void)state;
	assert_non_null(mkdtemp(scratch));
	snprintf(p, sizeof(p), "%s/git", scratch);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/git/in", scratch);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/git/in/pack", scratch);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(p, sizeof(p), "%s/git/HEAD", scratch);
	assert_true(can_open(p, O_WRONLY | O_CREAT));
	snprintf(p, sizeof(p), "%s/secret", scratch);
	assert_true(can_open(p, O_WRONLY | O_CREAT));
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char git[512], in[512], err[256];
		const char *reads[] = {git};
		struct sync_confine_in ci = {.read = reads, .nread = 1, .incoming = in};
		struct sync_confined c;
		char both[sizeof(before) + sizeof(after)];

		snprintf(git, sizeof(git), "%s/git", scratch);
		snprintf(in, sizeof(in), "%s/git/in/pack", scratch);
		probes(scratch, before);
		if (sync_confine(&ci, &c, err, sizeof(err)) < 0) {
			fprintf(stderr, "# sync_confine: %s\n", err);
			_exit(2);
		}
		probes(scratch, after);
		memcpy(both, before, sizeof(before));
		memcpy(both + sizeof(before), after, sizeof(after));
		if (write(fds[1], both, sizeof(both)) != (ssize_t)sizeof(both))
			_exit(3);
		_exit(c.seccomp && c.nnp && c.abi == (abi > 0 ? abi : 0) ? 0 : 4);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], r, sizeof(r)), 14);
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	/* Before: everything works (the positive controls). */
	assert_memory_equal(r, "\1\1\1\1\1\1\1", 7);
	/* Confined: git/ readable, the quarantine writable; no socket, no signal out. */
	assert_int_equal(r[7], 1);
	assert_int_equal(r[10], 1);
	assert_int_equal(r[11], 0);
	assert_int_equal(r[12], 0);
	/* chmod answers success and changes nothing (Landlock has no right for it). */
	assert_int_equal(r[13], 0);
	if (abi > 0) {
		assert_int_equal(r[8], 0); /* a file next to .git */
		assert_int_equal(r[9], 0); /* a hook */
	} else {
		fprintf(stderr, "# no Landlock here: the file probes are not confined\n");
	}
	snprintf(p, sizeof(p), "rm -rf '%s'", scratch);
	assert_int_equal(system(p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ho_round_trip),
		cmocka_unit_test(ho_hostile),
		cmocka_unit_test(confine_child),
	};

	return sync_unit_run(tests, ARRAY_SIZE(tests));
}
