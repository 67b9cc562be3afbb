/* SPDX-License-Identifier: MIT */
/*
 * The parent's check of what the pull's confined child kept (pull.c): the child may have
 * been turned by what the agent sent, and the pack and index it leaves in the quarantine
 * are then its own. An index git trusts maps ids to contents without git hashing them
 * again on reading: a forged one could give an id the owner has already (or one upstream
 * will send later) contents of the agent's choosing. So its index is never used. The pack's
 * bytes go to `git index-pack --stdin`, which hashes every object, refuses an id the
 * store has with other contents (its collision check) and a pack that is not whole, and
 * writes its own pack and index. It runs confined as the child is (it parses the agent's
 * data too: git's own pack code, the one that reads these objects later), writing only
 * objects/ocsb-verified/pack, which the child cannot reach, and with threads but no
 * fork: once it is reaped, nothing of it holds the files the parent then moves in.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sync.h"
#include "util.h"

#define VERIFY_GIT "/usr/bin/git"

/* Between fork and exec: confine, then git; a failure goes back as text, then _exit. */
__attribute__((noreturn)) static void verify_child(const struct sync_verify_in *in,
	char *const *argv, char *const *envp, int infd, int outfd, int errfd, int reportfd)
{
	struct sync_confined c;
	char why[256];
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || dup2(infd, 0) < 0 || dup2(outfd, 1) < 0 ||
		dup2(errfd, 2) < 0) {
		snprintf(why, sizeof(why), "%s", strerror(errno));
		goto fail;
	}
	/* Only its pipes reach git: not the SSH socket, the quarantine or the lock. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		for (int fd = 3; fd < 4096; fd++)
			if (fd != reportfd)
				close(fd);
	if (sync_confine(in->confine, &c, why, sizeof(why)) < 0)
		goto fail;
	execve(argv[0], argv, envp);
	snprintf(why, sizeof(why), "cannot run %s: %s", argv[0], strerror(errno));
fail:
	if (write(reportfd, why, strlen(why)) < 0)
		_exit(127);
	_exit(127);
}

/* Read what fd has into b (up to n - 1 bytes kept); 1 at EOF, 0, -errno. */
static int verify_drain(int fd, char *b, size_t n, size_t *len)
{
	char tmp[4096];
	ssize_t r = read(fd, tmp, sizeof(tmp));

	if (r < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (r == 0)
		return 1;
	for (ssize_t i = 0; i < r && *len + 1 < n; i++)
		b[(*len)++] = tmp[i];
	b[*len] = '\0';
	return 0;
}

/*
 * One pack: its bytes (from packfd) into git index-pack --stdin; its answer ("pack\t<id>")
 * in ret_id. 0, or -1 with why set.
 */
static int verify_one(const struct sync_verify_in *in, int packfd, char *ret_id, size_t idlen,
	char *why, size_t whylen)
{
	char gitdir_arg[PATH_MAX + 16], home[PATH_MAX + 8], objdir[PATH_MAX + 32],
		alt[PATH_MAX + 48], out[256] = "", err[512] = "", rep[256] = "";
	char *argv[] = {VERIFY_GIT, gitdir_arg, "index-pack", "--stdin", NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", home, objdir, alt,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", NULL};
	int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1}, repp[2] = {-1, -1};
	size_t outlen = 0, errlen = 0, replen = 0, bufoff = 0, buflen = 0;
	char buf[65536];
	int st = 0, ret = -1, in_eof = 0, out_eof = 0, err_eof = 0;
	pid_t pid = -1;

	snprintf(gitdir_arg, sizeof(gitdir_arg), "--git-dir=%s", in->gitdir);
	snprintf(home, sizeof(home), "HOME=%s", in->home ? in->home : "/");
	/* Its store is the verified directory; the owner's is an alternate (read only). */
	snprintf(objdir, sizeof(objdir), "GIT_OBJECT_DIRECTORY=%s", in->outdir);
	snprintf(alt, sizeof(alt), "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s", in->objects);
	if (pipe2(inp, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		pipe2(repp, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		goto out;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		verify_child(in, argv, envp, inp[0], outp[1], errp[1], repp[1]);
	close(inp[0]), inp[0] = -1;
	close(outp[1]), outp[1] = -1;
	close(errp[1]), errp[1] = -1;
	close(repp[1]), repp[1] = -1;
	/* Confinement or exec failed: its text, then EOF. */
	for (;;) {
		ssize_t r = read(repp[0], rep + replen, sizeof(rep) - 1 - replen);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (replen += (size_t)r) + 1 >= sizeof(rep))
			break;
	}
	rep[replen] = '\0';
	if (replen) {
		snprintf(why, whylen, "%s", rep);
		goto out;
	}
	fcntl(inp[1], F_SETFL, O_NONBLOCK);
	while (!out_eof || !err_eof) {
		struct pollfd pf[3];
		nfds_t n = 0;
		int k;

		if (time(NULL) > in->deadline) {
			snprintf(why, whylen, "time limit reached (raise it with --timeout)");
			goto out;
		}
		if (!in_eof && bufoff == buflen) {
			ssize_t r = read(packfd, buf, sizeof(buf));

			if (r < 0 && errno != EINTR) {
				snprintf(why, whylen, "reading the pack: %s", strerror(errno));
				goto out;
			}
			if (r == 0) {
				in_eof = 1;
				close(inp[1]), inp[1] = -1;
			} else if (r > 0) {
				bufoff = 0, buflen = (size_t)r;
			}
		}
		if (inp[1] >= 0)
			pf[n++] = (struct pollfd){.fd = inp[1], .events = POLLOUT};
		if (!out_eof)
			pf[n++] = (struct pollfd){.fd = outp[0], .events = POLLIN};
		if (!err_eof)
			pf[n++] = (struct pollfd){.fd = errp[0], .events = POLLIN};
		if (poll(pf, n, 1000) < 0) {
			if (errno == EINTR)
				continue;
			snprintf(why, whylen, "poll: %s", strerror(errno));
			goto out;
		}
		for (nfds_t i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == inp[1]) {
				ssize_t w = write(inp[1], buf + bufoff, buflen - bufoff);

				if (w > 0) {
					bufoff += (size_t)w;
				} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
					/* It stopped reading (a refusal): its stderr says why. */
					in_eof = 1;
					close(inp[1]), inp[1] = -1;
				}
			} else if (pf[i].fd == outp[0]) {
				k = verify_drain(outp[0], out, sizeof(out), &outlen);
				out_eof = k != 0;
			} else {
				k = verify_drain(errp[0], err, sizeof(err), &errlen);
				err_eof = k != 0;
			}
		}
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	pid = -1;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		char line[200], esc[400];
		size_t l = strcspn(err, "\n");

		snprintf(line, sizeof(line), "%.*s", (int)l, err);
		sync_escape(line, strlen(line), esc, sizeof(esc));
		if (WIFSIGNALED(st))
			snprintf(why, whylen, "git index-pack died (signal %d)", WTERMSIG(st));
		else
			snprintf(why, whylen, "git index-pack refused it: %s",
				esc[0] ? esc : "no message");
		goto out;
	}
	/* "pack\t<id>\n": the name it gave what it wrote. */
	if (strncmp(out, "pack\t", 5) != 0 ||
		strspn(out + 5, "0123456789abcdef") != GIT_OID_HEXSZ ||
		out[5 + GIT_OID_HEXSZ] != '\n') {
		snprintf(why, whylen, "git index-pack gave no pack name");
		goto out;
	}
	snprintf(ret_id, idlen, "%.*s", GIT_OID_HEXSZ, out + 5);
	ret = 0;
out:
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	for (int i = 0; i < 2; i++) {
		if (inp[i] >= 0)
			close(inp[i]);
		if (outp[i] >= 0)
			close(outp[i]);
		if (errp[i] >= 0)
			close(errp[i]);
		if (repp[i] >= 0)
			close(repp[i]);
	}
	return ret;
}

int sync_pack_verify(const struct sync_verify_in *in, unsigned *ret_n)
{
	DIR *d;
	struct dirent *e;
	int fd = dup(in->inpackfd), ret = 0;

	*ret_n = 0;
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		log_err("%s/%s/pack: %s", in->objects, SYNC_INCOMING, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	while (ret == 0 && (e = readdir(d))) {
		char why[640], id[GIT_OID_HEXSZ + 1];
		size_t l = strlen(e->d_name);
		struct stat st;
		int pfd;

		/* Only what libgit2's indexer names a kept pack; its index is ignored. */
		if (l != 5 + GIT_OID_HEXSZ + 5 || strncmp(e->d_name, "pack-", 5) != 0 ||
			strcmp(e->d_name + l - 5, ".pack") != 0)
			continue;
		pfd = openat(
			in->inpackfd, e->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (pfd < 0 || fstat(pfd, &st) < 0 || !S_ISREG(st.st_mode)) {
			log_err("the fetched pack %s: %s; no ref was written", e->d_name,
				pfd < 0 ? strerror(errno) : "not a regular file");
			if (pfd >= 0)
				close(pfd);
			ret = -1;
			break;
		}
		/* Blocking reads from here on (O_NONBLOCK only kept a FIFO from hanging open). */
		fcntl(pfd, F_SETFL, 0);
		if (verify_one(in, pfd, id, sizeof(id), why, sizeof(why)) < 0) {
			log_err("checking the fetched pack: %s; no ref was written", why);
			ret = -1;
		} else {
			(*ret_n)++;
		}
		close(pfd);
	}
	closedir(d);
	return ret;
}
