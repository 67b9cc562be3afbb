/* SPDX-License-Identifier: MIT */
/*
 * The tree's ownership (docs/mirror.md, issue 26): the account ocsb-agentd sets aside an old
 * tree of root's (mirror_own_tree), and root makes the directories and the status file the
 * account cannot make, converting an old tree by descriptor (mirror_prepare, ocsb-provision).
 * The writer itself is mirror_priv.c.
 */
#define _GNU_SOURCE
#include "mirror_int.h"

/* ---- the tree's owner: an old tree of root's is set aside ---- */

int mirror_own_tree(struct mirror *m)
{
	char name[32];
	struct stat st;
	int dfd, r = -1;

	dfd = fo_open_dir(AT_FDCWD, m->dir);
	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0) {
		log_err("mirror: %s: %s", m->dir, strerror(-dfd));
		return -1;
	}
	if (fstatat(dfd, "tree", &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_uid == geteuid()) {
		close(dfd);
		return 0;
	}
	/* Same directory: a rename needs no right on the directory moved, only on <dir>. */
	for (int n = 0; n < 100; n++) {
		snprintf(name, sizeof(name), "tree.old-%d", n);
		if (renameat2(dfd, "tree", dfd, name, RENAME_NOREPLACE) == 0) {
			r = 1;
			break;
		}
		if (errno != EEXIST) {
			log_err("mirror: %s: cannot set aside the tree of uid %u: %s", m->tree,
				(unsigned)st.st_uid, strerror(errno));
			break;
		}
	}
	close(dfd);
	if (r < 0)
		return -1;
	log_notice("mirror: %s belonged to uid %u (an earlier version): set aside as %s/%s for "
		   "root to remove (ocsb-provision), a new tree is built",
		m->tree, (unsigned)st.st_uid, m->dir, name);
	/* The manifest, here and for the reader, describes the old tree: every entry again. */
	mirror_forget(m);
	if (mirror_status_write(m, "", 0) < 0)
		log_warn("mirror: %s: cannot empty it: the next reader reads it", m->status);
	return 1;
}

/* ---- root: the directories the account cannot make, an old tree converted ---- */

/*
 * Give the entries below dfd to uid:gid, children before their directory: the tree is
 * root's own (0555 root) until its last step, so nothing in it can have been swapped.
 */
static int adopt_at(int dfd, uid_t uid, gid_t gid, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if (depth > MIRROR_MAX_DEPTH + 8)
		return -ELOOP;
	fd = dup(dfd);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		r = -errno;
		if (fd >= 0)
			close(fd);
		return r;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, DIR_FLAGS);
			struct stat sst;

			/* Only root's directories are walked: nobody else can change them. */
			if (sub >= 0 && fstat(sub, &sst) == 0 && sst.st_uid != 0) {
				close(sub);
				continue;
			}
			if (sub < 0 || adopt_at(sub, uid, gid, depth + 1) < 0 ||
				fchown(sub, uid, gid) < 0)
				r = -EIO;
			if (sub >= 0)
				close(sub);
		} else if (fchownat(dirfd(d), de->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
		}
	}
	closedir(d);
	return r;
}

int mirror_prepare(struct mirror *m, int dry, struct strv *changes)
{
	char name[300];
	struct stat st;
	int bfd = -1, dfd = -1, tfd = -1, fd, r = -1;

	if (!m->tree_user[0] || geteuid() != 0) {
		log_err("mirror: mirror_prepare is root's, with the account set");
		return -1;
	}
	if (dry) {
		/* What an apply would change: an owner or group to give. */
		if (stat(m->dir, &st) == 0 &&
			(st.st_uid != m->tree_uid || st.st_gid != m->agent_gid))
			strv_push(changes, "give the mirror's directory to");
		else if (lstat(m->tree, &st) == 0 && st.st_uid != m->tree_uid)
			strv_push(changes, "give the mirror's tree to");
		return 0;
	}
	bfd = fo_mkdir_p(AT_FDCWD, m->base, 0755, 0, 0);
	if (bfd < 0 || fstat(bfd, &st) < 0 || st.st_uid != 0 ||
		((st.st_mode & 07777) != 0755 && fchmod(bfd, 0755) < 0)) {
		log_err("mirror: %s: %s", m->base, bfd < 0 ? strerror(-bfd) : "not root's");
		goto out;
	}
	dfd = fo_mkdir_p(bfd, m->agent, 0750, 0, m->agent_gid);
	if (dfd < 0 || fstat(dfd, &st) < 0) {
		log_err("mirror: %s: %s", m->dir, strerror(dfd < 0 ? -dfd : errno));
		goto out;
	}
	/*
	 * A tree of root's (an earlier version) is converted. Even in a <dir> the account
	 * already has (the warden gave it): a root-owned directory there can only be that
	 * tree or one the supervisor set aside, never one moved in from elsewhere (moving a
	 * directory to another parent needs write access to the directory itself).
	 */
	{
		tfd = openat(dfd, "tree", DIR_FLAGS);
		if (tfd >= 0 && fstat(tfd, &st) == 0 && st.st_uid == 0) {
			if (adopt_at(tfd, m->tree_uid, m->tree_gid, 0) < 0 ||
				fchown(tfd, m->tree_uid, m->tree_gid) < 0) {
				log_err("mirror: %s: cannot give it to %s", m->tree, m->tree_user);
				goto out;
			}
			strv_push(changes, "give the mirror's tree to");
		}
	}
	if (fstat(dfd, &st) < 0)
		goto out;
	if (st.st_uid != m->tree_uid || st.st_gid != m->agent_gid || (st.st_mode & 07777) != 0750) {
		if (fchown(dfd, m->tree_uid, m->agent_gid) < 0 || fchmod(dfd, 0750) < 0) {
			log_err("mirror: %s: owner and mode: %s", m->dir, strerror(errno));
			goto out;
		}
		strv_push(changes, "give the mirror's directory to");
	}
	/* Trees the supervisor set aside (root's, of an earlier version): root removes them. */
	for (int n = 0; n < 100; n++) {
		snprintf(name, sizeof(name), "tree.old-%d", n);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (mirror_rm_at(dfd, name, 0, 0) < 0)
			log_warn("mirror: %s/%s: cannot remove it", m->dir, name);
	}
	/*
	 * The status and the links files: the account rewrites them in place, the owner's
	 * group reads them.
	 */
	for (int k = 0; k < 2; k++) {
		const char *path = k ? m->links : m->status;

		snprintf(name, sizeof(name), "%s.%s", m->agent, k ? "links" : "status");
		fd = openat(
			bfd, name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0640);
		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			log_err("mirror: %s: %s", path, fd < 0 ? strerror(errno) : "not a file");
			if (fd >= 0)
				close(fd);
			goto out;
		}
		if ((st.st_uid != m->tree_uid || st.st_gid != m->owner_gid ||
			    (st.st_mode & 07777) != 0640) &&
			(fchown(fd, m->tree_uid, m->owner_gid) < 0 || fchmod(fd, 0640) < 0)) {
			log_err("mirror: %s: owner and mode: %s", path, strerror(errno));
			close(fd);
			goto out;
		}
		close(fd);
	}
	r = 0;
out:
	if (tfd >= 0)
		close(tfd);
	if (dfd >= 0)
		close(dfd);
	if (bfd >= 0)
		close(bfd);
	return r;
}
