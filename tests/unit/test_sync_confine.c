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

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>
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

/* --- the parent's check of the child's pack (sync/verify.c) */

static char vscratch[] = "/tmp/ocsb-verify-XXXXXX";

/* Run a shell line in vscratch; its first line of output into out (may be NULL). */
static int sh(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sh(char *out, size_t n, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	if (out) {
		out[0] = '\0';
		if (fgets(out, (int)n, f))
			out[strcspn(out, "\n")] = '\0';
	}
	while (fgetc(f) != EOF)
		;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * The index of a one-object pack made to name the id `id` (40 hex) instead: what a turned
 * child could leave (idx v2: the fan-out and the one id; offsets and CRC kept).
 */
static void forge_idx(const char *path, const char *id)
{
	unsigned char b[4096], raw[20];
	int fd = chmod(path, 0644) == 0 ? open(path, O_RDWR) : -1; /* git makes it 0444 */
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, b, sizeof(b));
	assert_true(n >= 8 + 1024 + 20);
	for (int i = 0; i < 20; i++)
		assert_int_equal(sscanf(id + 2 * i, "%2hhx", &raw[i]), 1);
	for (int i = 0; i < 256; i++) {
		uint32_t c = htonl(i >= raw[0] ? 1 : 0);

		memcpy(b + 8 + 4 * i, &c, 4);
	}
	memcpy(b + 8 + 1024, raw, 20);
	assert_int_equal(pwrite(fd, b, (size_t)n, 0), n);
	close(fd);
}

static void verify_forged_index(void **state)
{
	char a[64], b[64], pk[64], out[256];
	unsigned moved = 0;

	(void)state;
	if (access("/usr/bin/git", X_OK) != 0)
		skip();
	assert_non_null(mkdtemp(vscratch));
	/* The owner's object A (loose); the agent's pack holds one blob, B. */
	assert_int_equal(
		sh(NULL, 0, "cd %s && git init -q o && git init -q --bare t", vscratch), 0);
	assert_int_equal(
		sh(a, sizeof(a), "cd %s/o && echo owner | git hash-object -w --stdin", vscratch),
		0);
	assert_int_equal(
		sh(b, sizeof(b), "cd %s && echo agent | git --git-dir=t hash-object -w --stdin",
			vscratch),
		0);
	assert_int_equal(sh(pk, sizeof(pk), "cd %s && echo %s | git --git-dir=t pack-objects t/p",
				 vscratch, b),
		0);
	assert_int_equal(strlen(pk), 40);
	/* The child's index names the owner's A for the agent's bytes. */
	snprintf(out, sizeof(out), "%s/t/p-%s.idx", vscratch, pk);
	forge_idx(out, a);
	/* Positive control: that index, moved in as it is, makes A read as the agent's. */
	assert_int_equal(
		sh(NULL, 0,
			"cd %s && cp -r o c && cp t/p-%s.pack c/.git/objects/pack/pack-%s.pack && "
			"cp t/p-%s.idx c/.git/objects/pack/pack-%s.idx",
			vscratch, pk, pk, pk, pk),
		0);
	assert_int_equal(sh(out, sizeof(out), "cd %s/c && git cat-file -p %s", vscratch, a), 0);
	assert_string_equal(out, "agent");
	/* Through the check: git's own index goes in, A stays the owner's, B is there. */
	assert_int_equal(
		sh(NULL, 0,
			"cd %s && mkdir -p o/.git/objects/%s/pack && cp t/p-%s.pack "
			"o/.git/objects/%s/pack/pack-%s.pack && cp t/p-%s.idx "
			"o/.git/objects/%s/pack/pack-%s.idx",
			vscratch, SYNC_INCOMING, pk, SYNC_INCOMING, pk, pk, SYNC_INCOMING, pk),
		0);
	/* sync_incoming_prepare empties the quarantine (those two): the files again after it. */
	{
		char objects[512], inc[600], outdir[600], outpack[640], gitdir[512];
		const char *reads[] = {gitdir};
		struct sync_confine_in conf = {.read = reads, .nread = 1, .no_fork = 1};
		struct sync_verify_in in = {.gitdir = gitdir,
			.objects = objects,
			.inpackfd = -1,
			.outdir = outdir,
			.confine = &conf,
			.deadline = time(NULL) + 60};
		unsigned removed = 0, n = 0;
		int vfd = -1;

		snprintf(gitdir, sizeof(gitdir), "%s/o/.git/", vscratch);
		snprintf(objects, sizeof(objects), "%s/o/.git/objects", vscratch);
		assert_int_equal(
			sync_incoming_prepare(objects, inc, sizeof(inc), &in.inpackfd, &removed),
			0);
		assert_int_equal(removed, 2);
		assert_int_equal(sh(NULL, 0,
					 "cd %s && cp t/p-%s.pack %s/pack/pack-%s.pack && cp "
					 "t/p-%s.idx %s/pack/pack-%s.idx",
					 vscratch, pk, inc, pk, pk, inc, pk),
			0);
		assert_int_equal(sync_verified_prepare(objects, outdir, sizeof(outdir), &vfd), 0);
		snprintf(outpack, sizeof(outpack), "%s/pack", outdir);
		conf.incoming = outpack;
		assert_int_equal(sync_pack_verify(&in, &n), 0);
		assert_int_equal(n, 1);
		sync_incoming_clear(in.inpackfd); /* as the pull: the child's files go */
		assert_int_equal(sync_incoming_commit(vfd, objects, &moved), 0);
		assert_int_equal(moved, 1);
		close(vfd);
		/* A pack whose bytes are damaged: refused, nothing moved. */
		assert_int_equal(
			sh(NULL, 0,
				"cd %s && cp t/p-%s.pack %s/pack/pack-%s.pack && chmod u+w "
				"%s/pack/* && printf 'XXXX' | "
				"dd of=%s/pack/pack-%s.pack bs=1 seek=20 conv=notrunc 2>/dev/null "
				"&& cp t/p-%s.idx %s/pack/pack-%s.idx",
				vscratch, pk, inc, pk, inc, inc, pk, pk, inc, pk),
			0);
		assert_int_equal(sync_verified_prepare(objects, outdir, sizeof(outdir), &vfd), 0);
		assert_int_equal(sync_pack_verify(&in, &n), -1);
		close(vfd);
		close(in.inpackfd);
	}
	assert_int_equal(sh(out, sizeof(out), "cd %s/o && git cat-file -p %s", vscratch, a), 0);
	assert_string_equal(out, "owner");
	assert_int_equal(sh(out, sizeof(out), "cd %s/o && git cat-file -p %s", vscratch, b), 0);
	assert_string_equal(out, "agent");
	assert_int_equal(sh(NULL, 0,
				 "cd %s/o && for i in .git/objects/pack/*.idx; do git verify-pack "
				 "$i || exit 1; done && git fsck >/dev/null 2>&1",
				 vscratch),
		0);
	assert_int_equal(sh(NULL, 0, "rm -rf '%s'", vscratch), 0);
}

/* --- the confined download itself (libgit2's, through the in-memory handle of haves.c) */

static char dscratch[] = "/tmp/ocsb-download-XXXXXX";

/*
 * In a child confined as the pull's (the owner's git directory and the agent's read-only,
 * the quarantine written), in working directory cwd: download the agent's branches into
 * the quarantine through the handle haves.c makes. Its exit status: 0 downloaded and the
 * pack is in the quarantine; 5 the download failed (libgit2's message on stderr).
 */
static int confined_download(const char *cwd)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		char git[512], agent[512], store[512], in[600], url[600], err[256];
		const char *reads[] = {git, agent};
		struct sync_confine_in ci = {.read = reads, .nread = 2, .incoming = in};
		struct sync_confined c;
		git_repository *repo = NULL, *dl = NULL;
		git_remote *rem = NULL;
		git_odb *odb = NULL;
		git_odb_backend *be = NULL;
		git_remote_create_options ro;
		git_fetch_options fo;
		char *spec = "+refs/heads/*:refs/remotes/agent/*";
		git_strarray arr = {&spec, 1};
		DIR *d;
		struct dirent *e;
		int packs = 0;

		snprintf(git, sizeof(git), "%s/owner/.git", dscratch);
		snprintf(agent, sizeof(agent), "%s/agent", dscratch);
		snprintf(store, sizeof(store), "%s/owner/.git/objects/ocsb-incoming", dscratch);
		snprintf(in, sizeof(in), "%s/pack", store);
		snprintf(url, sizeof(url), "file://%s", agent);
		if (git_repository_open(&repo, git) < 0 || git_repository_odb(&odb, repo) < 0 ||
			git_odb_backend_pack(&be, store) < 0 || git_odb_add_backend(odb, be, 1000) < 0 ||
			sync_haves_repo(&dl, repo, NULL, NULL, 0) < 0) {
			fprintf(stderr, "# setting up: %s\n", git_error_last()->message);
			_exit(2);
		}
		if (chdir(cwd) < 0 || sync_confine(&ci, &c, err, sizeof(err)) < 0) {
			fprintf(stderr, "# confining: %s\n", err);
			_exit(3);
		}
		git_remote_create_options_init(&ro, GIT_REMOTE_CREATE_OPTIONS_VERSION);
		ro.repository = dl;
		ro.flags = GIT_REMOTE_CREATE_SKIP_INSTEADOF | GIT_REMOTE_CREATE_SKIP_DEFAULT_FETCHSPEC;
		git_fetch_options_init(&fo, GIT_FETCH_OPTIONS_VERSION);
		if (git_remote_create_with_opts(&rem, url, &ro) < 0 ||
			git_remote_download(rem, &arr, &fo) < 0) {
			fprintf(stderr, "# download in %s: %s\n", cwd, git_error_last()->message);
			_exit(5);
		}
		if (!(d = opendir(in)))
			_exit(6);
		while ((e = readdir(d)))
			packs += strlen(e->d_name) > 5 &&
				 !strcmp(e->d_name + strlen(e->d_name) - 5, ".pack");
		closedir(d);
		_exit(packs == 1 ? 0 : 7);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * libgit2 >= 1.7 writes the shallow roots after every download, to "shallow" in the
 * handle's git directory; the in-memory handle has none, so to the working directory.
 * The pull's child works in the quarantine (fetch.c): there the download succeeds. The
 * control, where it exists: the same download with the owner's git directory (read-only
 * to the child) as the working directory fails on that write (libgit2 1.5 writes nothing).
 */
static void download_in_quarantine(void **state)
{
	char p[1024], in[600];
	int maj = 0, min = 0, rev = 0;

	(void)state;
	assert_non_null(mkdtemp(dscratch));
	assert_int_equal(sh(NULL, 0,
				 "cd %s && git init -q agent && git -C agent -c user.name=a "
				 "-c user.email=a@a commit -q --allow-empty -m one && "
				 "git init -q owner && mkdir -p owner/.git/objects/ocsb-incoming/pack",
				 dscratch),
		0);
	snprintf(in, sizeof(in), "%s/owner/.git/objects/ocsb-incoming/pack", dscratch);
	assert_int_equal(confined_download(in), 0);
	git_libgit2_version(&maj, &min, &rev);
	assert_int_equal(sh(NULL, 0, "rm -f %s/*", in), 0);
	snprintf(p, sizeof(p), "%s/owner/.git", dscratch);
	if (landlock_abi() <= 0)
		fprintf(stderr, "# no Landlock here: the control (a read-only working directory) "
				"cannot fail\n");
	else if (maj > 1 || (maj == 1 && min >= 7))
		assert_int_equal(confined_download(p), 5);
	else
		fprintf(stderr, "# libgit2 %d.%d writes no shallow roots: the control applies from "
				"1.7 (Debian 13)\n", maj, min);
	assert_int_equal(sh(NULL, 0, "rm -rf '%s'", dscratch), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ho_round_trip),
		cmocka_unit_test(ho_hostile),
		cmocka_unit_test(confine_child),
		cmocka_unit_test(verify_forged_index),
		cmocka_unit_test(download_in_quarantine),
	};

	return sync_unit_run(tests, ARRAY_SIZE(tests));
}
