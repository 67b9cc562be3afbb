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

static void verify_close(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int sync_verify_start(
	struct sync_verifier *v, const struct sync_verify_in *in, char *why, size_t whylen)
{
	char gitdir_arg[PATH_MAX + 16], home[PATH_MAX + 8], objdir[PATH_MAX + 32],
		alt[PATH_MAX + 48], rep[256] = "";
	/* --fix-thin: the stream upload-pack sends may name bases the owner's store has. */
	char *argv[] = {VERIFY_GIT, gitdir_arg, "index-pack", "--stdin", "--fix-thin", NULL};
	char *envp[] = {"PATH=/usr/bin:/bin", "LC_ALL=C", home, objdir, alt,
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", NULL};
	int inp[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1}, repp[2] = {-1, -1};
	size_t replen = 0;

	memset(v, 0, sizeof(*v));
	v->pid = -1;
	v->in = v->out = v->err = -1;
	snprintf(gitdir_arg, sizeof(gitdir_arg), "--git-dir=%s", in->gitdir);
	snprintf(home, sizeof(home), "HOME=%s", in->home ? in->home : "/");
	/* Its store is the verified directory; the owner's is an alternate (read only). */
	snprintf(objdir, sizeof(objdir), "GIT_OBJECT_DIRECTORY=%s", in->outdir);
	snprintf(alt, sizeof(alt), "GIT_ALTERNATE_OBJECT_DIRECTORIES=%s", in->objects);
	if (pipe2(inp, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
		pipe2(repp, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		goto fail;
	}
	v->pid = fork();
	if (v->pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		goto fail;
	}
	if (v->pid == 0)
		verify_child(in, argv, envp, inp[0], outp[1], errp[1], repp[1]);
	verify_close(&inp[0]);
	verify_close(&outp[1]);
	verify_close(&errp[1]);
	verify_close(&repp[1]);
	/* Confinement or exec failed: its text, then EOF. */
	for (;;) {
		ssize_t r = read(repp[0], rep + replen, sizeof(rep) - 1 - replen);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || (replen += (size_t)r) + 1 >= sizeof(rep))
			break;
	}
	verify_close(&repp[0]);
	rep[replen] = '\0';
	if (replen) {
		snprintf(why, whylen, "%s", rep);
		goto fail;
	}
	v->in = inp[1];
	v->out = outp[0];
	v->err = errp[0];
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		verify_close(&inp[i]);
		verify_close(&outp[i]);
		verify_close(&errp[i]);
		verify_close(&repp[i]);
	}
	sync_verify_kill(v);
	return -1;
}

void sync_verify_feed(struct sync_verifier *v, const char *p, size_t n)
{
	while (n && v->in >= 0) {
		ssize_t w = write(v->in, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			/* It stopped reading (a refusal, EPIPE): finish says why. */
			verify_close(&v->in);
			return;
		}
		p += w, n -= (size_t)w;
		v->fed += (size_t)w;
	}
}

void sync_verify_kill(struct sync_verifier *v)
{
	if (v->pid > 0) {
		kill(v->pid, SIGKILL);
		while (waitpid(v->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	v->pid = -1;
	verify_close(&v->in);
	verify_close(&v->out);
	verify_close(&v->err);
}

int sync_verify_finish(struct sync_verifier *v, time_t deadline, char *ret_id, size_t idlen,
	char *why, size_t whylen)
{
	char out[256] = "", err[512] = "";
	size_t outlen = 0, errlen = 0;
	int st = 0;

	verify_close(&v->in); /* the end of the pack */
	while (v->out >= 0 || v->err >= 0) {
		struct pollfd pf[2];
		nfds_t n = 0;

		if (time(NULL) > deadline) {
			snprintf(why, whylen, "time limit reached (raise it with --timeout)");
			sync_verify_kill(v);
			return -1;
		}
		if (v->out >= 0)
			pf[n++] = (struct pollfd){.fd = v->out, .events = POLLIN};
		if (v->err >= 0)
			pf[n++] = (struct pollfd){.fd = v->err, .events = POLLIN};
		if (poll(pf, n, 1000) < 0) {
			if (errno == EINTR)
				continue;
			snprintf(why, whylen, "poll: %s", strerror(errno));
			sync_verify_kill(v);
			return -1;
		}
		for (nfds_t i = 0; i < n; i++) {
			if (!pf[i].revents)
				continue;
			if (pf[i].fd == v->out) {
				if (verify_drain(v->out, out, sizeof(out), &outlen) != 0)
					verify_close(&v->out);
			} else if (verify_drain(v->err, err, sizeof(err), &errlen) != 0) {
				verify_close(&v->err);
			}
		}
	}
	while (waitpid(v->pid, &st, 0) < 0 && errno == EINTR)
		;
	v->pid = -1;
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
		return -1;
	}
	/* "pack\t<id>\n": the name it gave what it wrote. */
	if (strncmp(out, "pack\t", 5) != 0 ||
		strspn(out + 5, "0123456789abcdef") != GIT_OID_HEXSZ ||
		out[5 + GIT_OID_HEXSZ] != '\n') {
		snprintf(why, whylen, "git index-pack gave no pack name");
		return -1;
	}
	snprintf(ret_id, idlen, "%.*s", GIT_OID_HEXSZ, out + 5);
	return 0;
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
		char why[640], id[GIT_OID_HEXSZ + 1], buf[65536];
		struct sync_verifier v;
		size_t l = strlen(e->d_name);
		struct stat st;
		ssize_t r;
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
		if (sync_verify_start(&v, in, why, sizeof(why)) < 0) {
			log_err("checking the fetched pack: %s; no ref was written", why);
			close(pfd);
			ret = -1;
			break;
		}
		while ((r = read(pfd, buf, sizeof(buf))) > 0 || (r < 0 && errno == EINTR))
			if (r > 0)
				sync_verify_feed(&v, buf, (size_t)r);
		close(pfd);
		if (sync_verify_finish(&v, in->deadline, id, sizeof(id), why, sizeof(why)) < 0) {
			log_err("checking the fetched pack: %s; no ref was written", why);
			ret = -1;
		} else {
			(*ret_n)++;
		}
	}
	closedir(d);
	return ret;
}
