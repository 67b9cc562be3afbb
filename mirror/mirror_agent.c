/* SPDX-License-Identifier: MIT */
/*
 * The mirror's link maker (docs/mirror.md): a child running as the agent makes the links
 * (or writable copies) in the agent's home; root starts it and collects its report.
 */
#define _GNU_SOURCE
#include "mirror_int.h"

/* ---- the agent's side: links in its home (a child running as the agent) ---- */

struct linkjob {
	struct mirror *m;
	int dry;
	int remove;
};

static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0) {
		/* the parent is gone; nothing to do */
	}
}

/* Copy the tree entry src (fd-relative) into the agent's dst, as the agent. */
static int agent_copy_tree(int sfd, const char *sname, int dfd, const char *dname, int depth)
{
	struct stat st;
	int r = 0;

	if (depth > MIRROR_MAX_DEPTH || fstatat(sfd, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -ELOOP;
	if (S_ISLNK(st.st_mode)) {
		char t[4096];
		ssize_t n = readlinkat(sfd, sname, t, sizeof(t) - 1);

		if (n < 0)
			return -errno;
		t[n] = '\0';
		return symlinkat(t, dfd, dname) < 0 ? -errno : 0;
	}
	if (S_ISREG(st.st_mode)) {
		char *data = NULL;
		size_t len = 0;

		r = fo_read_at(sfd, sname, MIRROR_MAX_FILE + 65536, &data, &len);
		if (r == 0)
			r = fo_write_at(dfd, dname, data, len, 0600, (uid_t)-1, (gid_t)-1);
		free(data);
		return r;
	}
	if (S_ISDIR(st.st_mode)) {
		int s2, d2, fd2;
		DIR *d;
		struct dirent *de;

		if (mkdirat(dfd, dname, 0700) < 0 && errno != EEXIST)
			return -errno;
		s2 = openat(sfd, sname, DIR_FLAGS);
		d2 = openat(dfd, dname, DIR_FLAGS);
		if (s2 < 0 || d2 < 0) {
			r = -errno;
			goto out;
		}
		fd2 = dup(s2);
		d = fd2 >= 0 ? fdopendir(fd2) : NULL;
		if (!d) {
			r = -errno;
			goto out;
		}
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
				agent_copy_tree(s2, de->d_name, d2, de->d_name, depth + 1) < 0)
				r = -EIO;
		closedir(d);
	out:
		if (s2 >= 0)
			close(s2);
		if (d2 >= 0)
			close(d2);
		return r;
	}
	return 0;
}

static const char writable_note[] =
	"This is the agent's own writable copy of the owner's configuration, made by\n"
	"ocsb-provision (mirror-writable). Changes stay here and are not copied back;\n"
	"the owner's later changes are not applied. Delete this folder and run\n"
	"'sudo ocsb-provision' for a fresh copy.\n";

/*
 * ~/.gitconfig is the agent's own file (git writes it for `git config --global`, and
 * would follow a link into the read-only tree and fail): it includes the mirrored subset.
 */
static void gitconfig_render(const struct mirror *m, struct buf *b)
{
	buf_printf(b,
		"# Written by ocsb-provision for %s. The owner's name, email, aliases and editor\n"
		"# come from the read-only mirror below; settings of your own (git config\n"
		"# --global) are added after it and win.\n"
		"[include]\n\tpath = %s/%s\n",
		m->agent, m->tree, MIRROR_GITCONFIG);
}

static int agent_link_gitconfig(struct linkjob *j, int out, int pfd, int have,
	const struct stat *st, const char *cur, ssize_t n)
{
	struct buf want = {0}, inc = {0};
	char *data = NULL;
	size_t len = 0;
	int ours = 0;

	gitconfig_render(j->m, &want);
	buf_printf(&inc, "path = %s/%s", j->m->tree, MIRROR_GITCONFIG);
	if (have && S_ISREG(st->st_mode) &&
		fo_read_at(pfd, MIRROR_GITCONFIG, 1024 * 1024, &data, &len) == 0) {
		ours = len == want.len && !memcmp(data, want.data, len);
		if (!ours && !memmem(data, len, inc.data, inc.len) && !j->remove)
			say(out,
				"! ~/.gitconfig is the agent's own and does not include the "
				"mirror: add "
				"'[include] %s' to it",
				inc.data);
	}
	if (j->remove) {
		if (ours || (n >= 0 && mirror_path_under(cur, j->m->tree))) {
			say(out, "remove ~/.gitconfig (the include of the mirror)");
			if (!j->dry)
				unlinkat(pfd, MIRROR_GITCONFIG, 0);
		}
	} else if (!have || (n >= 0 && mirror_path_under(cur, j->m->tree))) {
		/* Missing, or a link of an earlier version into the tree: the agent's file. */
		say(out, "write ~/.gitconfig (includes the owner's git identity from the mirror)");
		if (!j->dry &&
			fo_write_at(pfd, MIRROR_GITCONFIG, want.data, want.len, 0600, (uid_t)-1,
				(gid_t)-1) < 0)
			say(out, "! ~/.gitconfig: %s", strerror(errno));
	} else if (n >= 0) {
		say(out, "! ~/.gitconfig is a link of the agent's: left alone");
	}
	free(data);
	buf_free(&want);
	buf_free(&inc);
	return 0;
}

static int agent_link_one(struct linkjob *j, int out, const char *rel)
{
	struct mirror *m = j->m;
	char target[PATH_MAX * 2], cur[PATH_MAX * 2], name[256], tmp[64], pdir[PATH_MAX];
	const char *slash = strrchr(rel, '/');
	struct stat st;
	ssize_t n;
	int pfd, have;

	snprintf(target, sizeof(target), "%s/%s", m->tree, rel);
	snprintf(name, sizeof(name), "%s", slash ? slash + 1 : rel);
	snprintf(pdir, sizeof(pdir), "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".");
	/* The agent's own directories: created 0700 by the agent, never through a link. */
	pfd = j->dry || j->remove ? fo_open_dir(AT_FDCWD, pdir)
				  : fo_mkdir_p(AT_FDCWD, pdir, 0700, (uid_t)-1, (gid_t)-1);
	if (pfd < 0) {
		if (!(j->dry || j->remove) || pfd != -ENOENT)
			say(out, "! ~/%s: %s: not linked", rel, strerror(-pfd));
		else if (!j->remove)
			say(out, "link ~/%s -> %s", rel, target);
		return 0;
	}
	have = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	n = have && S_ISLNK(st.st_mode) ? readlinkat(pfd, name, cur, sizeof(cur) - 1) : -1;
	if (n >= 0)
		cur[n] = '\0';
	if (!strcmp(rel, MIRROR_GITCONFIG) && !mirror_writable(m, rel)) {
		agent_link_gitconfig(j, out, pfd, have, &st, cur, n);
		close(pfd);
		return 0;
	}
	if (j->remove) {
		/* Only our own links; a writable copy is the agent's data and stays. */
		if (n >= 0 && mirror_path_under(cur, m->tree)) {
			say(out, "remove link ~/%s", rel);
			if (!j->dry)
				unlinkat(pfd, name, 0);
		}
		close(pfd);
		return 0;
	}
	if (mirror_writable(m, rel)) {
		int tfd;

		/* A copy made earlier, or the agent's own file: the agent's data, left alone. */
		if (have && !(n >= 0 && mirror_path_under(cur, m->tree))) {
			close(pfd);
			return 0;
		}
		say(out, "copy %s to ~/%s (writable, the agent's own)", target, rel);
		if (j->dry) {
			close(pfd);
			return 0;
		}
		tfd = fo_open_dir(AT_FDCWD, m->tree);
		snprintf(tmp, sizeof(tmp), ".ocsb-copy.%ld", (long)getpid());
		if (tfd < 0 || agent_copy_tree(tfd, rel, pfd, tmp, 0) < 0) {
			say(out, "! ~/%s: copy failed", rel);
		} else {
			int cfd = openat(pfd, tmp, DIR_FLAGS);

			if (cfd >= 0) {
				fo_write_at(cfd, MIRROR_WRITABLE_MARK, writable_note,
					sizeof(writable_note) - 1, 0600, (uid_t)-1, (gid_t)-1);
				close(cfd);
			}
			/* Our link makes way (a directory cannot be renamed over a link). */
			if (n >= 0)
				unlinkat(pfd, name, 0);
			if (renameat(pfd, tmp, pfd, name) < 0)
				say(out, "! ~/%s: %s", rel, strerror(errno));
		}
		if (tfd >= 0)
			close(tfd);
		close(pfd);
		return 0;
	}
	if (n >= 0 && !strcmp(cur, target)) {
		close(pfd);
		return 0;
	}
	if (have && n < 0) {
		say(out,
			"! ~/%s exists and is not ocsb's link: left alone (remove it to get the "
			"mirror)",
			rel);
		close(pfd);
		return 0;
	}
	say(out, "link ~/%s -> %s", rel, target);
	if (!j->dry) {
		/* A link of the agent's (to /etc, anywhere) is replaced, never followed. */
		snprintf(tmp, sizeof(tmp), ".ocsb-link.%ld", (long)getpid());
		unlinkat(pfd, tmp, 0);
		if (symlinkat(target, pfd, tmp) < 0 || renameat(pfd, tmp, pfd, name) < 0) {
			say(out, "! ~/%s: %s", rel, strerror(errno));
			unlinkat(pfd, tmp, 0);
		}
	}
	close(pfd);
	return 0;
}

/* Something at `rel` in the tree (a file, a directory, the generated .gitconfig, a link). */
static int in_tree(const struct mirror *m, const char *rel)
{
	char name[256], dir[PATH_MAX];
	const char *slash = strrchr(rel, '/');
	struct stat st;
	int tfd, pfd, r;

	tfd = fo_open_dir(AT_FDCWD, m->tree);
	if (tfd < 0)
		return 0;
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - rel) : 1, slash ? rel : ".");
	snprintf(name, sizeof(name), "%s", slash ? slash + 1 : rel);
	pfd = fo_open_dir(tfd, dir);
	close(tfd);
	if (pfd < 0)
		return 0;
	r = fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	close(pfd);
	return r;
}

static int agent_link_child(void *arg, int out)
{
	struct linkjob *j = arg;
	const struct mirror *m = j->m;

	umask(077);
	for (size_t i = 0; i < m->spec->paths.n; i++) {
		const char *rel = m->spec->paths.v[i];
		const struct mirror_entry *e = mirror_entry_find(m, rel);

		/*
		 * Only what the tree holds (or reserves): no dangling links. Without the
		 * manifest (ocsb-agentd --mirror-link: the agent cannot read the status
		 * file), the tree itself says.
		 */
		if (!j->remove && (!e || !mirror_entry_on_disk(e)) && !mirror_reserved(m, rel) &&
			(m->n || !in_tree(m, rel)))
			continue;
		agent_link_one(j, out, rel);
	}
	return 0;
}

struct link_out {
	struct strv *changes; /* borrowed */
	int dry;
};

static void link_line(void *arg, const char *text, int problem)
{
	struct link_out *lo = arg;

	if (problem) {
		log_warn("mirror: %s", text);
		/* --check and --dry-run count a place that is not linked as a difference. */
		if (lo->dry)
			strv_push(lo->changes, text);
		return;
	}
	strv_push(lo->changes, text);
}

static int run_as_agent(struct mirror *m, int dry, int remove, struct strv *changes)
{
	struct link_out lo;
	struct spawn_opts o = {.drop = m->drop,
		.uid = m->agent_uid,
		.gid = m->agent_gid,
		.user = m->drop ? m->agent : NULL,
		.cwd = m->agent_home,
		.timeout_ms = 60000};
	struct linkjob j = {.m = m, .dry = dry, .remove = remove};
	struct spawn_result res;
	char how[64];
	int r;

	r = spawn_fn(agent_link_child, &j, &o, &res);
	if (r < 0) {
		log_err("mirror: cannot run as %s in %s: %s", m->agent, m->agent_home,
			strerror(-r));
		return -1;
	}
	if (res.status != 0) {
		log_err("mirror: linking as %s failed (%s)", m->agent,
			spawn_describe(&res, how, sizeof(how)));
		spawn_result_free(&res);
		return -1;
	}
	lo.changes = changes;
	lo.dry = dry;
	if (res.output)
		mirror_link_output(res.output, link_line, &lo);
	spawn_result_free(&res);
	return 0;
}

void mirror_link_output(char *out, void (*fn)(void *arg, const char *text, int problem), void *arg)
{
	for (char *save = NULL, *l = strtok_r(out, "\n", &save); l;
		l = strtok_r(NULL, "\n", &save)) {
		/* "! why": a problem; a bare "!" says none, and nothing past it is read. */
		if (l[0] == '!')
			fn(arg, l[1] ? l + 2 : l + 1, 1);
		else
			fn(arg, l, 0);
	}
}

int mirror_link(struct mirror *m, int dry, struct strv *changes)
{
	return run_as_agent(m, dry, 0, changes);
}

int mirror_unlink(struct mirror *m, int dry, struct strv *changes)
{
	return run_as_agent(m, dry, 1, changes);
}

int mirror_link_here(struct mirror *m, int dry, int remove, int outfd)
{
	struct linkjob j = {.m = m, .dry = dry, .remove = remove};
	int fd;

	/* Only as the agent: a root or another account's link maker would act for it. */
	if (geteuid() != m->agent_uid || getuid() != m->agent_uid) {
		log_err("mirror: the link maker runs as %s (uid %u), not uid %u", m->agent,
			(unsigned)m->agent_uid, (unsigned)geteuid());
		return 2;
	}
	fd = open(m->agent_home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fchdir(fd) < 0) {
		log_err("mirror: %s: %s", m->agent_home, strerror(errno));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	close(fd);
	return agent_link_child(&j, outfd);
}
