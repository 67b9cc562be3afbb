/* SPDX-License-Identifier: MIT */
/*
 * The confinement of `ocsb sync pull`'s child (fetch.c), the process that downloads,
 * indexes, checks and reviews what the agent sent: libgit2's pack indexer and object
 * parsers, and git rev-list, are the code a hostile repository aims at. The child is
 * confined before it reads a byte from the agent, and keeps no more than it needs:
 *
 * - Landlock (any ABI): read the project's git directory (and the object stores its
 *   alternates name), write only the quarantine directory its download goes to
 *   (objects/ocsb-incoming/pack: make, write, truncate and remove files there); read and
 *   run what git rev-list needs (/usr, the loader's cache, /dev/null). Nothing else of
 *   the owner's: not ~/.ssh, not ~/.config/ocsb's keys, not the work tree, and no write to
 *   .git/config, hooks, refs or the owner's packs. ABI 4+ also handles TCP bind and
 *   connect with no rule granting them; ABI 6+ scopes abstract Unix sockets and signals.
 * - seccomp (an allow list; anything else answers ENOSYS): no socket, connect, bind,
 *   sendmsg or recvmsg (the one connection it has is the socket pair the parent relays the
 *   SSH channel over), no ptrace, no namespaces, io_uring, BPF or keyrings; ioctl only to
 *   ask whether a descriptor is a terminal; signals only to itself (its git child dies
 *   with it: PR_SET_PDEATHSIG); chmod changes nothing and chown is refused (Landlock
 *   does not cover a file's mode or owner). On Debian 12's kernel 6.1 (Landlock ABI 3) this is what
 *   keeps it off the network and off the owner's other processes.
 * - no_new_privs, no core file, a new session (no controlling terminal to push input to).
 *
 * Without Landlock (a kernel before 5.13 or with it disabled) the child runs with seccomp
 * and no_new_privs only, and the pull says so on stderr; `ocsb doctor` says it too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <seccomp.h>

#include "landlock.h"
#include "log.h"
#include "sync.h"
#include "testhook.h"

#define LL_READ (OCSB_LANDLOCK_FS_READ_FILE | OCSB_LANDLOCK_FS_READ_DIR)
#define LL_RUN (LL_READ | OCSB_LANDLOCK_FS_EXECUTE)
/* The quarantine: libgit2's indexer writes pack_git2_* and renames it to pack-*.pack/.idx. */
#define LL_INCOMING                                                          \
	(LL_READ | OCSB_LANDLOCK_FS_WRITE_FILE | OCSB_LANDLOCK_FS_MAKE_REG | \
		OCSB_LANDLOCK_FS_REMOVE_FILE | OCSB_LANDLOCK_FS_TRUNCATE)

/* git rev-list: the program, its libraries and loader (wherever a release keeps them). */
static const char *const run_dirs[] = {"/usr", "/lib", "/lib64", "/bin"};

static int confine_landlock(const struct sync_confine_in *in, long abi, char *err, size_t errlen)
{
	int rs, r;

	rs = landlock_ruleset_new(
		abi, OCSB_LANDLOCK_SCOPE_ABSTRACT_UNIX | OCSB_LANDLOCK_SCOPE_SIGNAL);
	if (rs < 0) {
		snprintf(err, errlen, "creating a Landlock ruleset: %s", strerror(-rs));
		return rs;
	}
	for (size_t i = 0; i < in->nread; i++) {
		/* An alternate that names no directory: libgit2 and git skip it too. */
		r = landlock_allow_path(rs, in->read[i], LL_READ, abi);
		if (r < 0 && !(i > 0 && r == -ENOENT)) {
			snprintf(
				err, errlen, "Landlock rule for %s: %s", in->read[i], strerror(-r));
			goto fail;
		}
	}
	r = landlock_allow_path(rs, in->incoming, LL_INCOMING, abi);
	if (r < 0) {
		snprintf(err, errlen, "Landlock rule for %s: %s", in->incoming, strerror(-r));
		goto fail;
	}
	for (size_t i = 0; i < ARRAY_SIZE(run_dirs); i++) {
		r = landlock_allow_path(rs, run_dirs[i], LL_RUN, abi);
		if (r < 0 && r != -ENOENT) {
			snprintf(
				err, errlen, "Landlock rule for %s: %s", run_dirs[i], strerror(-r));
			goto fail;
		}
	}
	/* The loader's cache (a missing one only slows the loader down). */
	r = landlock_allow_path(rs, "/etc/ld.so.cache", OCSB_LANDLOCK_FS_READ_FILE, abi);
	if (r < 0 && r != -ENOENT) {
		snprintf(err, errlen, "Landlock rule for /etc/ld.so.cache: %s", strerror(-r));
		goto fail;
	}
	/* git's stdin and stdout (sync_git_start): a device anyone may read and write. */
	r = landlock_allow_path(
		rs, "/dev/null", OCSB_LANDLOCK_FS_READ_FILE | OCSB_LANDLOCK_FS_WRITE_FILE, abi);
	if (r < 0) {
		snprintf(err, errlen, "Landlock rule for /dev/null: %s", strerror(-r));
		goto fail;
	}
	/* git index-pack's temporary file names (git reads /dev/urandom, not getrandom). */
	r = landlock_allow_path(rs, "/dev/urandom", OCSB_LANDLOCK_FS_READ_FILE, abi);
	if (r < 0 && r != -ENOENT) {
		snprintf(err, errlen, "Landlock rule for /dev/urandom: %s", strerror(-r));
		goto fail;
	}
	r = landlock_enforce(rs);
	if (r < 0)
		snprintf(err, errlen, "applying Landlock: %s", strerror(-r));
	return r;
fail:
	close(rs);
	return r;
}

/* What the child and git rev-list (after execve, the filter goes with it) call. */
static const int allowed[] = {
	/* files and descriptors */
	SCMP_SYS(read),
	SCMP_SYS(write),
	SCMP_SYS(readv),
	SCMP_SYS(writev),
	SCMP_SYS(pread64),
	SCMP_SYS(pwrite64),
	SCMP_SYS(preadv),
	SCMP_SYS(pwritev),
	SCMP_SYS(preadv2),
	SCMP_SYS(pwritev2),
	SCMP_SYS(lseek),
	SCMP_SYS(close),
	SCMP_SYS(close_range),
	SCMP_SYS(open),
	SCMP_SYS(openat),
	SCMP_SYS(stat),
	SCMP_SYS(fstat),
	SCMP_SYS(lstat),
	SCMP_SYS(newfstatat),
	SCMP_SYS(statx),
	SCMP_SYS(statfs),
	SCMP_SYS(fstatfs),
	SCMP_SYS(access),
	SCMP_SYS(faccessat),
	SCMP_SYS(faccessat2),
	SCMP_SYS(readlink),
	SCMP_SYS(readlinkat),
	SCMP_SYS(getdents),
	SCMP_SYS(getdents64),
	SCMP_SYS(getcwd),
	SCMP_SYS(chdir),
	SCMP_SYS(fchdir),
	SCMP_SYS(fcntl),
	SCMP_SYS(dup),
	SCMP_SYS(dup2),
	SCMP_SYS(dup3),
	SCMP_SYS(pipe),
	SCMP_SYS(pipe2),
	SCMP_SYS(fsync),
	SCMP_SYS(fdatasync),
	SCMP_SYS(ftruncate),
	SCMP_SYS(fallocate),
	SCMP_SYS(fadvise64),
	SCMP_SYS(rename),
	SCMP_SYS(renameat),
	SCMP_SYS(renameat2),
	SCMP_SYS(unlink),
	SCMP_SYS(unlinkat),
	SCMP_SYS(mkdir),
	SCMP_SYS(mkdirat),
	SCMP_SYS(umask),
	SCMP_SYS(poll),
	SCMP_SYS(ppoll),
	SCMP_SYS(select),
	SCMP_SYS(pselect6),
	SCMP_SYS(shutdown),
	/* memory */
	SCMP_SYS(brk),
	SCMP_SYS(mmap),
	SCMP_SYS(munmap),
	SCMP_SYS(mprotect),
	SCMP_SYS(mremap),
	SCMP_SYS(madvise),
	/* the process, its git child, time */
	SCMP_SYS(exit),
	SCMP_SYS(exit_group),
	SCMP_SYS(getpid),
	SCMP_SYS(gettid),
	SCMP_SYS(getppid),
	SCMP_SYS(getuid),
	SCMP_SYS(geteuid),
	SCMP_SYS(getgid),
	SCMP_SYS(getegid),
	SCMP_SYS(getgroups),
	SCMP_SYS(getresuid),
	SCMP_SYS(getresgid),
	SCMP_SYS(getpgrp),
	SCMP_SYS(getrlimit),
	SCMP_SYS(prlimit64),
	SCMP_SYS(getrusage),
	SCMP_SYS(set_tid_address),
	SCMP_SYS(set_robust_list),
	SCMP_SYS(rseq),
	SCMP_SYS(arch_prctl),
	SCMP_SYS(prctl),
	SCMP_SYS(sched_getaffinity),
	SCMP_SYS(sched_yield),
	SCMP_SYS(uname),
	SCMP_SYS(sysinfo),
	SCMP_SYS(getrandom),
	SCMP_SYS(clock_gettime),
	SCMP_SYS(clock_getres),
	SCMP_SYS(clock_nanosleep),
	SCMP_SYS(nanosleep),
	SCMP_SYS(gettimeofday),
	SCMP_SYS(time),
	SCMP_SYS(times),
	SCMP_SYS(futex),
	SCMP_SYS(rt_sigaction),
	SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(rt_sigreturn),
	SCMP_SYS(sigaltstack),
	SCMP_SYS(restart_syscall),
	SCMP_SYS(wait4),
	SCMP_SYS(waitid),
	SCMP_SYS(fork),
	SCMP_SYS(vfork),
	SCMP_SYS(execve),
};

/* Refused with EPERM rather than ENOSYS: what a probe of the network gets told. */
static const int refused[] = {
	SCMP_SYS(socket),
	SCMP_SYS(socketpair),
	SCMP_SYS(connect),
	SCMP_SYS(bind),
	SCMP_SYS(listen),
	SCMP_SYS(accept),
	SCMP_SYS(accept4),
	SCMP_SYS(sendto),
	SCMP_SYS(sendmsg),
	SCMP_SYS(sendmmsg),
	SCMP_SYS(recvfrom),
	SCMP_SYS(recvmsg),
	SCMP_SYS(recvmmsg),
	SCMP_SYS(ptrace),
	SCMP_SYS(process_vm_readv),
	SCMP_SYS(process_vm_writev),
};

/*
 * Landlock does not cover a file's mode (no right for chmod, at any ABI): a child free to
 * chmod could open the owner's home or .git/hooks to the agent (0777), by path or by a
 * descriptor it may only read. libgit2's indexer sets its pack's mode by path and fails
 * if it cannot, so these answer success and change nothing (the parent gives the packs it
 * moves in their mode). chown and the rest of the attribute calls are not allowed at all.
 */
static const int pretended[] = {
	SCMP_SYS(chmod),
	SCMP_SYS(fchmod),
	SCMP_SYS(fchmodat),
};

/* isatty() and non-blocking mode; never TIOCSTI (input pushed into a terminal). */
static const unsigned long ioctls[] = {TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX};

static int confine_seccomp(int no_fork, char *err, size_t errlen)
{
	const unsigned long newns = CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET |
		CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWCGROUP;
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	scmp_datum_t self = (scmp_datum_t)getpid();
	int r = 0;

	if (!f) {
		snprintf(err, errlen, "seccomp_init failed");
		return -ENOMEM;
	}
	/* A name this libseccomp or architecture lacks is skipped: not allowed is safe. */
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		if (allowed[i] >= 0 &&
			!(no_fork &&
				(allowed[i] == SCMP_SYS(fork) || allowed[i] == SCMP_SYS(vfork))))
			(void)seccomp_rule_add(f, SCMP_ACT_ALLOW, allowed[i], 0);
	for (size_t i = 0; i < ARRAY_SIZE(refused) && r == 0; i++)
		if (refused[i] >= 0)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), refused[i], 0);
	for (size_t i = 0; i < ARRAY_SIZE(pretended) && r == 0; i++)
		if (pretended[i] >= 0)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(0), pretended[i], 0);
	/*
	 * fork for git rev-list, never into a new namespace; clone3's flags are out of reach
	 * (ENOSYS: glibc falls back to clone). no_fork: threads only, so that nothing of the
	 * process outlives it (the pack's verifier: no descendant keeps its files open).
	 */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, newns | (no_fork ? CLONE_THREAD : 0),
				no_fork ? CLONE_THREAD : 0));
	/* Signals to itself only (abort, raise): not to the owner's other processes. */
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, self));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, self));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(tkill), 1,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, self));
	for (size_t i = 0; i < ARRAY_SIZE(ioctls) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
			SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)ioctls[i]));
	if (r == 0)
		r = seccomp_load(f);
	seccomp_release(f);
	if (r < 0)
		snprintf(err, errlen, "seccomp filter not loaded: %s", strerror(-r));
	return r;
}

int sync_confine(
	const struct sync_confine_in *in, struct sync_confined *out, char *err, size_t errlen)
{
	struct rlimit nocore = {0, 0};
	long abi;
	int r;

	memset(out, 0, sizeof(*out));
	/* No terminal to push input into, and the parent's Ctrl-C is the parent's. */
	(void)setsid();
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "no_new_privs: %s", strerror(errno));
		return -1;
	}
	out->nnp = 1;
	/* A core file would land in the work tree, with the child's memory in it. */
	(void)setrlimit(RLIMIT_CORE, &nocore);
	abi = landlock_abi();
	if (TESTHOOK_ENV("OCSB_TEST_SYNC_NO_LANDLOCK"))
		abi = 0; /* a test build: run as on a kernel without Landlock */
#ifdef OCSB_TEST_BUILD
	{
		/* A test build: as on an older kernel (t-93: 3, Debian 12's 6.1; 1). */
		const char *cap = TESTHOOK_ENV("OCSB_TEST_SYNC_LANDLOCK_ABI");

		if (cap && atol(cap) < abi)
			abi = atol(cap);
	}
#endif
	if (abi > 0) {
		r = confine_landlock(in, abi, err, errlen);
		/* Filtered (a container's seccomp) or disabled: as without Landlock, said. */
		if (r == -EPERM || r == -ENOSYS || r == -EOPNOTSUPP)
			abi = 0;
		else if (r < 0)
			return -1;
		err[0] = '\0';
	}
	out->abi = abi > 0 ? abi : 0;
	out->net = abi >= 4;
	out->scoped = abi >= 6;
	if (confine_seccomp(in->no_fork, err, errlen) < 0)
		return -1;
	out->seccomp = 1;
	return 0;
}

void sync_confined_describe(const struct sync_confined *c, char *out, size_t n)
{
	if (c->abi > 0)
		snprintf(out, n, "landlock ABI %ld (files%s%s), seccomp, no_new_privs", c->abi,
			c->net ? ", tcp" : "", c->scoped ? ", scopes" : "");
	else
		snprintf(out, n,
			"NO landlock (kernel without it: files unconfined), seccomp, "
			"no_new_privs");
}

#ifdef OCSB_TEST_BUILD
/*
 * Test hooks (a test build, OCSB_TEST_HOOKS=1): the child tries what a compromised one
 * would, once before and once after sync_confine, and says what happened on stderr
 * (t-93), and OCSB_TEST_SYNC_NO_LANDLOCK / OCSB_TEST_SYNC_LANDLOCK_ABI (in sync_confine)
 * make it run as on a kernel without Landlock or with an older ABI:
 * OCSB_TEST_SYNC_PROBE_OPEN (paths to read, ':'-separated),
 * OCSB_TEST_SYNC_PROBE_CREATE (files to create, then removed), OCSB_TEST_SYNC_PROBE_CHMOD
 * (paths to chmod 0777, then set back), OCSB_TEST_SYNC_PROBE_CONNECT (an IPv4
 * address:port).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

static void probe_each(const char *list, const char *phase, const char *what)
{
	char buf[4096], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		int create = !strcmp(what, "create");
		int fd = create ? open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)
				: open(p, O_RDONLY | O_CLOEXEC);
		int e = errno;

		if (fd >= 0) {
			close(fd);
			if (create)
				unlink(p);
		}
		log_warn("sync probe %s: %s %s: %s", phase, what, p, fd >= 0 ? "ok" : strerror(e));
	}
}

/* chmod 0777, then the mode it had: "ok" when the mode changed. */
static void probe_chmod(const char *list, const char *phase)
{
	char buf[4096], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", list);
	for (char *p = strtok_r(buf, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
		struct stat before, after;
		int r = -1, e = 0;

		if (stat(p, &before) == 0) {
			r = chmod(p, 0777);
			e = errno;
			if (stat(p, &after) == 0 &&
				(after.st_mode & 07777) != (before.st_mode & 07777))
				(void)chmod(p, before.st_mode & 07777);
			else
				r = r == 0 ? 1 : r;
		}
		log_warn("sync probe %s: chmod %s: %s", phase, p,
			r == 0		 ? "ok"
				: r == 1 ? "unchanged"
					 : strerror(e));
	}
}

void sync_confine_probe(const char *phase)
{
	const char *open_list = TESTHOOK_ENV("OCSB_TEST_SYNC_PROBE_OPEN");
	const char *create_list = TESTHOOK_ENV("OCSB_TEST_SYNC_PROBE_CREATE");
	const char *chmod_list = TESTHOOK_ENV("OCSB_TEST_SYNC_PROBE_CHMOD");
	const char *conn = TESTHOOK_ENV("OCSB_TEST_SYNC_PROBE_CONNECT");

	if (open_list)
		probe_each(open_list, phase, "open");
	if (create_list)
		probe_each(create_list, phase, "create");
	if (chmod_list)
		probe_chmod(chmod_list, phase);
	if (conn) {
		struct sockaddr_in sa = {.sin_family = AF_INET};
		char host[64];
		const char *colon = strrchr(conn, ':');
		int fd, r = -1, e;

		snprintf(host, sizeof(host), "%.*s", colon ? (int)(colon - conn) : 0, conn);
		sa.sin_port = htons((unsigned short)(colon ? atoi(colon + 1) : 0));
		inet_pton(AF_INET, host, &sa.sin_addr);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		e = errno;
		if (fd >= 0) {
			r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
			e = errno;
			close(fd);
		}
		log_warn("sync probe %s: connect %s: %s%s", phase, conn, fd < 0 ? "socket: " : "",
			r == 0 ? "ok" : strerror(e));
	}
}
#endif
