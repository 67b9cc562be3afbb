/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <signal.h>
#include <time.h>

#include "unit.h"

#include "fileops.h"

static mode_t mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Names in unit_dir other than `keep...` (NULL-terminated): temp files left behind. */
static int stray_entries(const char *const keep[])
{
	DIR *d = opendir(unit_dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		int known = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");

		for (size_t i = 0; keep[i]; i++)
			known |= !strcmp(e->d_name, keep[i]);
		if (!known) {
			fprintf(stderr, "# left behind: %s\n", e->d_name);
			n++;
		}
	}
	closedir(d);
	return n;
}

/* ---- fo_write ---- */

static void write_mode_ignores_umask(void **state)
{
	const char *path = unit_path("f");
	mode_t old = umask(077);
	char got[64];

	assert_int_equal(fo_write(path, "abc", 3, 0644, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(mode_of(path), 0644);
	umask(0);
	assert_int_equal(fo_write(path, "defg", 4, 0600, (uid_t)-1, (gid_t)-1), 0);
	umask(old);
	assert_int_equal(mode_of(path), 0600);
	assert_int_equal(unit_read(path, got, sizeof(got)), 4);
	assert_string_equal(got, "defg");
}

static void write_replaces_atomically(void **state)
{
	static const char *const keep[] = {"f", "old", NULL};
	const char *path = unit_path("f");
	char got[64];

	unit_write(path, "old content", 11, 0644);
	/* A second name for the old inode: an in-place rewrite would change it too. */
	assert_int_equal(link(path, unit_path("old")), 0);
	assert_int_equal(fo_write(path, "new", 3, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(unit_read(path, got, sizeof(got)), 3);
	assert_string_equal(got, "new");
	assert_int_equal(mode_of(path), 0640);
	unit_read(unit_path("old"), got, sizeof(got));
	assert_string_equal(got, "old content");
	assert_int_equal(stray_entries(keep), 0);
}

static void write_empty(void **state)
{
	const char *path = unit_path("empty");
	struct stat st;

	assert_int_equal(fo_write(path, "", 0, 0600, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 0);
	assert_int_equal(st.st_uid, geteuid());
}

/*
 * A link planted as the final component is never written through. fo_write
 * either refuses or replaces the link itself with a regular file: both leave
 * the target alone.
 */
static void write_final_symlink(void **state)
{
	const char *target = unit_path("target"), *link = unit_path("link");
	char got[64];
	int r;

	unit_write(target, "secret", 6, 0600);
	assert_int_equal(symlink(target, link), 0);
	r = fo_write(link, "evil", 4, 0644, (uid_t)-1, (gid_t)-1);
	unit_read(target, got, sizeof(got));
	assert_string_equal(got, "secret");
	assert_int_equal(mode_of(target), 0600);
	if (r < 0) {
		struct stat st;

		assert_int_equal(lstat(link, &st), 0);
		assert_true(S_ISLNK(st.st_mode));
	} else {
		assert_int_equal(unit_read(link, got, sizeof(got)), 4);
		assert_int_equal(mode_of(link), 0644);
	}
	/* A dangling link must not create its target either. */
	assert_int_equal(symlink(unit_path("created"), unit_path("dangling")), 0);
	fo_write(unit_path("dangling"), "x", 1, 0644, (uid_t)-1, (gid_t)-1);
	assert_false(exists(unit_path("created")));
}

static void intermediate_symlink(void **state)
{
	char got[64];
	int fd;

	assert_int_equal(mkdir(unit_path("real"), 0700), 0);
	unit_write(unit_path("real/f"), "orig", 4, 0600);
	assert_int_equal(symlink("real", unit_path("via")), 0);

	/* Positive control: the same calls through the real directory work. */
	fd = fo_open_dir(AT_FDCWD, unit_path("real"));
	assert_true(fd >= 0);
	close(fd);

	assert_true(fo_open_dir(AT_FDCWD, unit_path("via")) < 0);
	assert_true(fo_open_dir(AT_FDCWD, unit_path("via/")) < 0);
	assert_true(fo_mkdir_p(AT_FDCWD, unit_path("via/sub"), 0700, (uid_t)-1, (gid_t)-1) < 0);
	assert_false(exists(unit_path("real/sub")));
	assert_true(fo_write(unit_path("via/f"), "evil", 4, 0644, (uid_t)-1, (gid_t)-1) < 0);
	assert_true(fo_write(unit_path("via/new"), "evil", 4, 0644, (uid_t)-1, (gid_t)-1) < 0);
	assert_false(exists(unit_path("real/new")));
	unit_read(unit_path("real/f"), got, sizeof(got));
	assert_string_equal(got, "orig");
	assert_int_equal(mode_of(unit_path("real/f")), 0600);
	assert_true(fo_unlink(unit_path("via/f")) < 0);
	assert_true(exists(unit_path("real/f")));
}

static void dotdot_refused(void **state)
{
	assert_int_equal(mkdir(unit_path("a"), 0700), 0);
	assert_int_equal(
		fo_write(unit_path("a/../f"), "x", 1, 0644, (uid_t)-1, (gid_t)-1), -EINVAL);
	assert_int_equal(fo_write(unit_path("a/.."), "x", 1, 0644, (uid_t)-1, (gid_t)-1), -EINVAL);
	assert_false(exists(unit_path("f")));
	assert_int_equal(fo_open_dir(AT_FDCWD, unit_path("a/..")), -EINVAL);
	assert_int_equal(
		fo_mkdir_p(AT_FDCWD, unit_path("a/../b"), 0700, (uid_t)-1, (gid_t)-1), -EINVAL);
	assert_false(exists(unit_path("b")));
}

static void write_missing_parent(void **state)
{
	assert_int_equal(fo_write(unit_path("no/f"), "x", 1, 0644, (uid_t)-1, (gid_t)-1), -ENOENT);
	assert_false(exists(unit_path("no")));
}

/* ---- fo_mkdir_p ---- */

static void mkdir_p_nested(void **state)
{
	mode_t old = umask(077);
	int fd, fd2;

	fd = fo_mkdir_p(AT_FDCWD, unit_path("x/y/z"), 0751, (uid_t)-1, (gid_t)-1);
	umask(old);
	assert_true(fd >= 0);
	assert_int_equal(mode_of(unit_path("x")), 0751);
	assert_int_equal(mode_of(unit_path("x/y")), 0751);
	assert_int_equal(mode_of(unit_path("x/y/z")), 0751);
	/* The fd returned is the last directory. */
	assert_int_equal(mkdirat(fd, "inside", 0700), 0);
	assert_true(exists(unit_path("x/y/z/inside")));
	/* Relative to a directory fd, and again over existing directories. */
	fd2 = fo_mkdir_p(fd, "r/s", 0700, (uid_t)-1, (gid_t)-1);
	assert_true(fd2 >= 0);
	close(fd2);
	assert_int_equal(mode_of(unit_path("x/y/z/r/s")), 0700);
	close(fd);
	fd = fo_mkdir_p(AT_FDCWD, unit_path("x/y/z"), 0700, (uid_t)-1, (gid_t)-1);
	assert_true(fd >= 0);
	close(fd);
}

static void mkdir_p_over_file(void **state)
{
	unit_write(unit_path("file"), "x", 1, 0600);
	assert_int_equal(
		fo_mkdir_p(AT_FDCWD, unit_path("file/sub"), 0700, (uid_t)-1, (gid_t)-1), -ENOTDIR);
}

/* ---- fo_mkdir_p losing the race to another process ---- */

static uid_t race_uid = (uid_t)-1;

static void race_make(int dirfd, const char *name)
{
	assert_int_equal(mkdirat(dirfd, name, 0777), 0);
	assert_int_equal(fchmodat(dirfd, name, 0777, 0), 0);
	if (race_uid != (uid_t)-1)
		assert_int_equal(fchownat(dirfd, name, race_uid, (gid_t)-1, AT_SYMLINK_NOFOLLOW), 0);
}

static void mkdir_p_lost_race(void **state)
{
	struct stat st;
	uid_t other;
	int fd;

	fo_test_race = race_make;
	/* Made by the same owner at the same moment: adopted, with the mode asked for. */
	race_uid = (uid_t)-1;
	fd = fo_mkdir_p(AT_FDCWD, unit_path("mine"), 0700, (uid_t)-1, (gid_t)-1);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(mode_of(unit_path("mine")), 0700);
	/*
	 * Made by someone who is neither root nor the owner asked for: not adopted (no chown,
	 * no chmod). As root the racer is uid 4242; unprivileged it is ourselves, and the
	 * owner asked for is another uid.
	 */
	race_uid = geteuid() == 0 ? 4242 : (uid_t)-1;
	other = geteuid() == 0 ? 4343 : geteuid() + 1;
	fd = fo_mkdir_p(AT_FDCWD, unit_path("theirs"), 0700, other, (gid_t)-1);
	fo_test_race = NULL;
	race_uid = (uid_t)-1;
	assert_int_equal(fd, -EPERM);
	assert_int_equal(mode_of(unit_path("theirs")), 0777);
	assert_int_equal(lstat(unit_path("theirs"), &st), 0);
	assert_int_equal(st.st_uid, geteuid() == 0 ? 4242 : geteuid());
}

/* ---- fo_open_beneath ---- */

static void beneath_cases(void)
{
	struct stat st;
	int dfd, fd;

	assert_int_equal(mkdir(unit_path("d"), 0700), 0);
	assert_int_equal(mkdir(unit_path("d/sub"), 0700), 0);
	assert_int_equal(mkdir(unit_path("out"), 0700), 0);
	unit_write(unit_path("d/sub/f"), "x", 1, 0600);
	unit_write(unit_path("out/f"), "x", 1, 0600);
	assert_int_equal(symlink(unit_path("out"), unit_path("d/ldir")), 0);
	assert_int_equal(symlink(unit_path("out/f"), unit_path("d/lfile")), 0);
	dfd = open(unit_path("d"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(dfd >= 0);
	/* the control */
	fd = fo_open_beneath(dfd, "sub/f", O_RDONLY);
	assert_true(fd >= 0);
	close(fd);
	/* a link on the way: refused */
	fd = fo_open_beneath(dfd, "ldir/f", O_PATH);
	assert_true(fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV);
	/* a link as the last name: opened itself with O_PATH, refused otherwise */
	fd = fo_open_beneath(dfd, "lfile", O_PATH);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	close(fd);
	assert_int_equal(fo_open_beneath(dfd, "lfile", O_RDONLY), -ELOOP);
	/* out of the tree */
	assert_true(fo_open_beneath(dfd, "../out/f", O_PATH) < 0);
	assert_int_equal(fo_open_beneath(dfd, unit_path("out/f"), O_PATH), -EINVAL);
	close(dfd);
}

static void open_beneath(void **state)
{
	fo_no_openat2 = 0;
	beneath_cases();
}

static void open_beneath_without_openat2(void **state)
{
	fo_no_openat2 = 1;
	beneath_cases();
	fo_no_openat2 = 0;
}

/* ---- fo_read ---- */

static void read_limits(void **state)
{
	const char *path = unit_path("f");
	char *data = NULL, big[20000];
	size_t len = 0;

	unit_write(path, "0123456789", 10, 0644);
	assert_int_equal(fo_read(path, 10, &data, &len), 0);
	assert_int_equal(len, 10);
	assert_memory_equal(data, "0123456789", 11); /* NUL-terminated */
	free(data);
	data = NULL;
	assert_int_equal(fo_read(path, 9, &data, &len), -EFBIG);
	assert_null(data);

	/* Larger than the first read buffer: read whole. */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (char)('a' + i % 26);
	unit_write(path, big, sizeof(big), 0644);
	assert_int_equal(fo_read(path, sizeof(big), &data, &len), 0);
	assert_int_equal(len, sizeof(big));
	assert_memory_equal(data, big, sizeof(big));
	free(data);

	unit_write(path, "", 0, 0644);
	data = NULL;
	assert_int_equal(fo_read(path, 10, &data, &len), 0);
	assert_non_null(data);
	assert_int_equal(len, 0);
	assert_string_equal(data, "");
	free(data);
}

static void on_alarm(int sig)
{
	(void)sig;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (t1.tv_sec - t0->tv_sec) * 1000L + (t1.tv_nsec - t0->tv_nsec) / 1000000L;
}

static void read_fifo(void **state)
{
	struct sigaction sa = {.sa_handler = on_alarm}, old;
	const char *path = unit_path("fifo");
	char *data = NULL;
	struct timespec t0;
	int r;

	assert_int_equal(mkfifo(path, 0600), 0);
	/* No SA_RESTART: if the open blocks, the alarm turns the hang into -EINTR. */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	alarm(3);
	r = fo_read(path, 100, &data, NULL);
	alarm(0);
	sigaction(SIGALRM, &old, NULL);
	assert_true(elapsed_ms(&t0) < 2000);
	assert_int_equal(r, -EINVAL);
	assert_null(data);
}

static void read_not_regular(void **state)
{
	char *data = NULL;

	assert_int_equal(mkdir(unit_path("d"), 0700), 0);
	assert_true(fo_read(unit_path("d"), 100, &data, NULL) < 0);
	assert_null(data);
	unit_write(unit_path("t"), "t", 1, 0600);
	assert_int_equal(symlink("t", unit_path("l")), 0);
	assert_int_equal(fo_read(unit_path("l"), 100, &data, NULL), -ELOOP);
	assert_null(data);
	assert_int_equal(fo_read(unit_path("none"), 100, &data, NULL), -ENOENT);
}

/* ---- fo_same ---- */

static void same_checks(void **state)
{
	const char *path = unit_path("f");

	assert_int_equal(fo_write(path, "content", 7, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_same(path, "content", 7, 0640, (uid_t)-1, (gid_t)-1), 1);
	assert_int_equal(fo_same(path, "content", 7, 0640, geteuid(), getegid()), 1);
	assert_int_equal(fo_same(path, "CONTENT", 7, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_same(path, "content!", 8, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_same(path, "conten", 6, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_same(path, "content", 7, 0644, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_same(path, "content", 7, 0640, geteuid() + 1, (gid_t)-1), 0);
	assert_int_equal(fo_same(path, "content", 7, 0640, (uid_t)-1, getegid() + 1), 0);
	assert_int_equal(fo_same(unit_path("none"), "content", 7, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_same(unit_path("no/f"), "content", 7, 0640, (uid_t)-1, (gid_t)-1), 0);
	/* A link to an identical file is not the file. */
	assert_int_equal(symlink("f", unit_path("l")), 0);
	assert_int_equal(fo_same(unit_path("l"), "content", 7, 0640, (uid_t)-1, (gid_t)-1), 0);
}

/* ---- fo_unlink ---- */

static void unlink_cases(void **state)
{
	assert_int_equal(fo_unlink(unit_path("none")), 0);
	assert_int_equal(fo_unlink(unit_path("nodir/none")), 0);
	unit_write(unit_path("f"), "x", 1, 0600);
	assert_int_equal(fo_unlink(unit_path("f")), 0);
	assert_false(exists(unit_path("f")));
	/* A link is removed, not its target. */
	unit_write(unit_path("t"), "x", 1, 0600);
	assert_int_equal(symlink("t", unit_path("l")), 0);
	assert_int_equal(fo_unlink(unit_path("l")), 0);
	assert_false(exists(unit_path("l")));
	assert_true(exists(unit_path("t")));
	assert_int_equal(mkdir(unit_path("d"), 0700), 0);
	assert_true(fo_unlink(unit_path("d")) < 0);
	assert_true(exists(unit_path("d")));
}

/* The no-fsync variant keeps the rest: mode, replacement, links never followed, no temp left. */
static void write_nosync_same_guarantees(void **state)
{
	const char *target = unit_path("target");
	const char *const keep[] = {"target", "link", "f", NULL};
	char got[64];
	int dfd = open(unit_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	assert_true(dfd >= 0);
	assert_int_equal(fo_write_at_nosync(dfd, "f", "one", 3, 0640, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(fo_write_at_nosync(dfd, "f", "second", 6, 0400, (uid_t)-1, (gid_t)-1), 0);
	assert_int_equal(unit_read(unit_path("f"), got, sizeof(got)), 6);
	assert_string_equal(got, "second");
	assert_int_equal(mode_of(unit_path("f")), 0400);
	unit_write(target, "secret", 6, 0600);
	assert_int_equal(symlink(target, unit_path("link")), 0);
	assert_int_equal(fo_write_at_nosync(dfd, "link", "evil", 4, 0644, (uid_t)-1, (gid_t)-1), 0);
	unit_read(target, got, sizeof(got));
	assert_string_equal(got, "secret");
	assert_true(fo_write_at_nosync(dfd, "a/b", "x", 1, 0644, (uid_t)-1, (gid_t)-1) < 0);
	assert_int_equal(stray_entries(keep), 0);
	close(dfd);
}

#define T(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(write_mode_ignores_umask),
		T(write_replaces_atomically),
		T(write_empty),
		T(write_final_symlink),
		T(write_nosync_same_guarantees),
		T(intermediate_symlink),
		T(dotdot_refused),
		T(write_missing_parent),
		T(mkdir_p_nested),
		T(mkdir_p_over_file),
		T(mkdir_p_lost_race),
		T(open_beneath),
		T(open_beneath_without_openat2),
		T(read_limits),
		T(read_fifo),
		T(read_not_regular),
		T(same_checks),
		T(unlink_cases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
