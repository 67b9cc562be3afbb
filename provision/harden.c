/* SPDX-License-Identifier: MIT */
/*
 * What the uid alone leaves open at the account level (docs/escape.md):
 *  - cron and at would run the agent's jobs after ocsb-agentd stopped it, outside any
 *    supervision: the agent is listed in /etc/cron.deny and /etc/at.deny;
 *  - its ssh sessions get no core files and a bounded number of processes through
 *    pam_limits (/etc/security/limits.d/ocsb-<agent>.conf); OpenCode gets the same
 *    limits from ocsb-agentd itself;
 *  - its ssh sessions get what ocsb-agentd gives OpenCode: a private /tmp, /var/tmp and
 *    /dev/shm, a /proc with hidepid and the fake identity, through pam_namespace (an entry
 *    for the agent only, an init script, and one marked line in /etc/pam.d/sshd).
 * Every file is rewritten atomically; --remove takes out only the agent's own lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup.h"
#include "fileops.h"
#include "identity.h"
#include "log.h"
#include "provision.h"

#define HARDEN_NPROC 4096

static const char *const deny_files[] = {"cron.deny", "at.deny"};

#define PAM_MARK "# ocsb-provision: private /tmp, /proc and identity for agent sessions"
#define PAM_LINE "session    required     pam_namespace.so mount_private " PAM_MARK

int harden_pam_edit(const char *in, int add, struct buf *out)
{
	size_t after = 0; /* offset in out, not a pointer: out grows (and moves) as we go */
	int have = 0, changed = 0, found = 0;

	for (const char *s = in ? in : ""; *s;) {
		size_t n = strcspn(s, "\n");
		int mine =
			n >= strlen(PAM_MARK) && strstr(s, PAM_MARK) && strstr(s, PAM_MARK) < s + n;

		if (mine && (!add || have)) {
			changed = 1;
		} else {
			if (buf_append(out, s, n) < 0 || buf_puts(out, "\n") < 0)
				return -1;
			/* After pam_limits (Debian's sshd), before the stack's end. */
			if (add && !mine && !found && n > 7 && !strncmp(s, "session", 7) &&
				strstr(s, "pam_limits.so") && strstr(s, "pam_limits.so") < s + n) {
				after = out->len;
				found = 1;
			}
		}
		have |= mine;
		s += n + (s[n] == '\n');
	}
	if (add && !have) {
		size_t at = found ? after : out->len;
		struct buf t = {0};

		if (buf_append(&t, out->data, at) < 0 || buf_puts(&t, PAM_LINE "\n") < 0 ||
			buf_append(&t, out->data + at, out->len - at) < 0) {
			buf_free(&t);
			return -1;
		}
		buf_free(out);
		*out = t;
		changed = 1;
	}
	return changed;
}

const char *const harden_polydirs[HARDEN_NPOLY] = {"/tmp", "/var/tmp", "/dev/shm", "/run/lock"};

/*
 * create=01777,root,root: a polydir that is missing at login (a minimal container has no
 * /run/lock: nothing there fills /run at boot) is made by pam_namespace as the machine
 * would make it, instead of failing every session of the agent (sshd's exit 254, no word
 * why). The mode is octal only with the leading 0 (strtoul base 0).
 */
int harden_render_namespace(const char *user, unsigned skip, struct buf *out)
{
	int r = buf_printf(out,
		"# Written by ocsb-provision; edits are overwritten.\n"
		"# pam_namespace, for %s only (~): its ssh sessions get fresh tmpfs instances.\n",
		user);

	for (size_t i = 0; r >= 0 && i < HARDEN_NPOLY; i++) {
		/* /tmp carries the init script (masks, cgroup): never left out. */
		if (i > 0 && (skip & (1U << i)))
			continue;
		r = buf_printf(out,
			"%s %s/ tmpfs:create=01777,root,root:mntopts=mode=1777,nosuid,nodev:%s%s%s "
			"~%s\n",
			harden_polydirs[i], harden_polydirs[i], i == 0 ? "iscript=ocsb-" : "noinit",
			i == 0 ? user : "", i == 0 ? ".init" : "", user);
	}
	return r < 0 ? r : 0;
}

/*
 * Which polydirs to leave out: those whose parent is not a directory here (pam_namespace
 * could not create them, and would fail every session). Named on stdout when applying.
 */
unsigned harden_polydirs_skip(int say, const char *agent)
{
	unsigned skip = 0;

	for (size_t i = 1; i < HARDEN_NPOLY; i++) {
		char parent[64];
		struct stat st;

		snprintf(parent, sizeof(parent), "%.*s",
			(int)(strrchr(harden_polydirs[i], '/') - harden_polydirs[i]), harden_polydirs[i]);
		if (stat(parent, &st) == 0 && S_ISDIR(st.st_mode))
			continue;
		skip |= 1U << i;
		if (say)
			printf("note: ssh sessions of %s get no private %s: %s is not a directory "
			       "here (left out of pam_namespace's entries)\n",
				agent, harden_polydirs[i], parent);
	}
	return skip;
}

int harden_render_init(const char *identity_dir, const char *cgroups_file, const char *conf_path,
	const char *slice_conf, unsigned uid, struct buf *out)
{
	int r = buf_printf(out,
		"#!/bin/sh\n"
		"# Written by ocsb-provision; edits are overwritten.\n"
		"# pam_namespace runs this as root in the new mount namespace of each ssh session\n"
		"# of the agent, once /tmp has its private tmpfs: the masks ocsb-agentd gives\n"
		"# OpenCode. Any failure refuses the session (fail closed): pam_namespace\n"
		"# (Linux-PAM 1.5) ignores this script's exit status and fails the session only\n"
		"# when the script dies by a signal, so every non-zero exit ends in SIGKILL.\n"
		"set -e\n"
		"trap '[ $? -eq 0 ] || kill -9 $$' EXIT\n"
		"[ \"$1\" = /tmp ] || exit 0\n"
		"id='%s'\n"
		"/bin/mount -t proc -o nosuid,nodev,noexec,hidepid=invisible proc /proc\n"
		"for f in /etc/machine-id /var/lib/dbus/machine-id; do\n"
		"\t[ ! -e \"$f\" ] || /bin/mount --bind -o ro \"$id/machine-id\" \"$f\"\n"
		"done\n"
		"/bin/mount --bind -o ro \"$id/boot_id\" /proc/sys/kernel/random/boot_id\n"
		"/bin/mount --bind -o ro \"$id/cmdline\" /proc/cmdline\n"
		"[ ! -d /sys/devices/virtual/dmi/id ] || "
		"/bin/mount --bind -o ro \"$id/dmi\" /sys/devices/virtual/dmi/id\n"
		"[ ! -d /dev/disk ] || /bin/mount -t tmpfs -o mode=0755,nosuid,nodev ocsb-disk "
		"/dev/disk\n",
		identity_dir);

	if (r < 0)
		return r;
	/*
	 * An exit status alone let the session in (issue 26): pam_namespace's inst_init
	 * fails the session only for a script killed by a signal (WIFSIGNALED), so the
	 * EXIT trap above turns every failure, set -e's included, into SIGKILL.
	 *
	 * The caller of pam_namespace (sshd's process for this session, the shell's parent
	 * to be) joins the cgroup ocsb-agentd runs OpenCode in: the session then shares
	 * OpenCode's memory, task and CPU limits and its freezer. Fail closed (issue 26):
	 * a session is let in only once /proc shows it in every listed cgroup; a missing
	 * list or a listed cgroup that is gone (agentd starting, stopping, restarting) is a
	 * refusal while limits are configured, since nothing else would hold the session.
	 */
	return buf_printf(out,
		"# The session joins the cgroup ocsb-agentd lists for the agent (root-owned, in\n"
		"# /run), and is refused unless /proc then shows it in every listed cgroup. With\n"
		"# no list (ocsb-agentd not running, starting or stopping) it is refused while\n"
		"# limits are configured (limit-memory, limit-tasks, limit-cpu: 'auto' by\n"
		"# default), since nothing would hold it: unless all three read 'none' in the\n"
		"# configuration, or systemd holds it in the agent's slice with ocsb's drop-in.\n"
		"cg='%s'\n"
		"conf='%s'\n"
		"slice='%s'\n"
		"uid=%u\n"
		"refuse() {\n"
		"\techo \"ocsb: session of uid $uid refused: $*\" >&2\n"
		"\t[ ! -x /usr/bin/logger ] || /usr/bin/logger -p authpriv.err -t ocsb -- \\\n"
		"\t\t\"session of uid $uid refused: $*\" || :\n"
		"\texit 1\n"
		"}\n"
		"# in_cg PROCS: 0 when $PPID is in the cgroup of PROCS, as /proc/$PPID/cgroup says.\n"
		"in_cg() {\n"
		"\tsub=${1%%/cgroup.procs}\n"
		"\tsub=${sub#/sys/fs/cgroup/}\n"
		"\twhile IFS= read -r line; do\n"
		"\t\tif [ -e /sys/fs/cgroup/cgroup.controllers ]; then\n"
		"\t\t\t[ \"$line\" != \"0::/$sub\" ] || return 0\n"
		"\t\t\tcontinue\n"
		"\t\tfi\n"
		"\t\trest=${line#*:}\n"
		"\t\tcase \",${rest%%%%:*},\" in\n"
		"\t\t*\",${sub%%%%/*},\"*) [ \"${rest#*:}\" != \"/${sub#*/}\" ] || return 0 ;;\n"
		"\t\tesac\n"
		"\tdone < \"/proc/$PPID/cgroup\"\n"
		"\treturn 1\n"
		"}\n"
		"limits=yes\n"
		"if [ -f \"$conf\" ]; then\n"
		"\tlimits=no\n"
		"\tfor k in memory tasks cpu; do\n"
		"\t\t[ \"$(grep -Ec \"^[[:space:]]*limit-$k([[:space:]]|\\$)\" \"$conf\")\" = 1 ] &&\n"
		"\t\t\tgrep -Eq \"^[[:space:]]*limit-$k[[:space:]]+none([[:space:]]+#.*)?[[:space:]]*\\$\" \\\n"
		"\t\t\t\"$conf\" || limits=yes\n"
		"\tdone\n"
		"fi\n"
		"n=0\n"
		"if [ -f \"$cg\" ]; then\n"
		"\twhile read -r procs; do\n"
		"\t\tcase $procs in\n"
		"\t\t/sys/fs/cgroup/*/cgroup.procs) ;;\n"
		"\t\t*) refuse \"$cg lists '$procs'\" ;;\n"
		"\t\tesac\n"
		"\t\t[ -e \"$procs\" ] || refuse \"$procs is gone (ocsb-agentd restarting?)\"\n"
		"\t\techo \"$PPID\" > \"$procs\" || refuse \"cannot join $procs\"\n"
		"\t\tn=$((n + 1))\n"
		"\tdone < \"$cg\"\n"
		"\t# Written is not joined: a cgroup removed and made again, a write that moved\n"
		"\t# nothing. What counts is where the kernel has the process now.\n"
		"\twhile read -r procs; do\n"
		"\t\tin_cg \"$procs\" || refuse \"not in the cgroup of $procs after joining it\"\n"
		"\tdone < \"$cg\"\n"
		"fi\n"
		"[ \"$n\" -eq 0 ] || exit 0\n"
		"[ \"$limits\" = yes ] || exit 0\n"
		"if [ -d /run/systemd/system ] && [ -f \"$slice\" ] &&\n"
		"\tgrep -q \"^[0-9]*:[^:]*:/user\\.slice/user-$uid\\.slice/\" \"/proc/$PPID/cgroup\"; then\n"
		"\texit 0\n"
		"fi\n"
		"refuse \"limits are configured in $conf and ocsb-agentd lists no cgroup in $cg \" \\\n"
		"\t\"(start ocsb-agentd, or set limit-memory, limit-tasks and limit-cpu to none)\"\n",
		cgroups_file, conf_path, slice_conf, uid);
}

/*
 * The first line of a deny file ocsb-provision made: its removal of the last agent then
 * takes the file too (issue 28, item 8). An absent at.deny (only root may use at) and an
 * empty one (everyone may) differ: a file that was there before is never removed. cron
 * and at compare whole lines with the user's name: this one names nobody.
 */
#define DENY_MARK "# Made by ocsb-provision: removed with the last user it lists."

int harden_deny_edit(const char *in, const char *user, int add, struct buf *out)
{
	size_t ul = strlen(user);
	int found = 0, changed = 0;

	for (const char *s = in ? in : ""; *s;) {
		size_t n = strcspn(s, "\n");
		int mine = n == ul && !strncmp(s, user, ul);

		/* Removing: every line naming the user goes; adding: a duplicate is kept once. */
		if (mine && (!add || found))
			changed = 1;
		else if (buf_append(out, s, n) < 0 || buf_puts(out, "\n") < 0)
			return -1;
		found |= mine;
		s += n + (s[n] == '\n');
	}
	if (add && !found) {
		if ((!in && buf_puts(out, DENY_MARK "\n") < 0) || buf_printf(out, "%s\n", user) < 0)
			return -1;
		changed = 1;
	}
	if (!add && out->len == strlen(DENY_MARK "\n") &&
		!memcmp(out->data, DENY_MARK "\n", out->len)) {
		out->len = 0;
		out->data[0] = '\0';
		return 2;
	}
	return changed;
}

int harden_render_limits(const char *user, struct buf *out)
{
	return buf_printf(out,
		"# Written by ocsb-provision for the agent's ssh sessions; edits are overwritten.\n"
		"%s hard core 0\n"
		"%s hard nproc %d\n",
		user, user, HARDEN_NPROC);
}

static int deny_update(struct prov *p, const char *name, int add)
{
	char path[4096], what[4300];
	struct buf out = {0};
	struct prov_file f;
	int r;

	if (prov_file_read(p, name, path, sizeof(path), &f) < 0)
		return -1;
	r = harden_deny_edit(f.data, p->cfg.agent, add, &out);
	snprintf(what, sizeof(what), "%s %s %s %s%s", add ? "add" : "remove", p->cfg.agent,
		add ? "to" : "from", path, r == 2 ? " (ocsb-provision made it: removed)" : "");
	r = prov_file_commit(p, path, &f, r, &out, r == 2, what);
	buf_free(&out);
	return r;
}

/* <etc>/<dir>/ocsb-<agent><suffix> */
static int etc_path(struct prov *p, char *out, size_t n, const char *dir, const char *suffix)
{
	char rel[256];

	if (snprintf(rel, sizeof(rel), "%s/ocsb-%s%s", dir, p->cfg.agent, suffix) >=
		(int)sizeof(rel))
		return -1;
	return path_join(out, n, p->paths.etc, rel);
}

/* pam_namespace is installed, and nothing else in namespace.conf would start applying. */
static int pam_namespace_usable(struct prov *p, char *why, size_t n)
{
	static const char *const mods[] = {"/lib/x86_64-linux-gnu/security/pam_namespace.so",
		"/usr/lib/x86_64-linux-gnu/security/pam_namespace.so",
		"/lib/aarch64-linux-gnu/security/pam_namespace.so",
		"/usr/lib/aarch64-linux-gnu/security/pam_namespace.so",
		"/usr/lib64/security/pam_namespace.so", "/lib/security/pam_namespace.so"};
	char path[4096], *data = NULL;
	int found = 0, other = 0;

	why[0] = '\0';

	for (size_t i = 0; i < sizeof(mods) / sizeof(mods[0]); i++)
		found |= access(mods[i], R_OK) == 0;
	if (!found) {
		snprintf(why, n, "pam_namespace.so is not installed (libpam-modules)");
		return 0;
	}
	/* Enabling the module for sshd would also enable the machine's own entries. */
	if (path_join(path, sizeof(path), p->paths.etc, "security/namespace.conf") == 0 &&
		fo_read(path, 1 << 20, &data, NULL) == 0)
		for (const char *s = data; *s;) {
			size_t l = strcspn(s, "\n"), sp = strspn(s, " \t");

			other |= sp < l && s[sp] != '#';
			s += l + (s[l] == '\n');
		}
	free(data);
	if (other) {
		snprintf(why, n, "the machine's namespace.conf has entries of its own");
		return 0;
	}
	return 1;
}

static int pam_update(struct prov *p, int add)
{
	char path[4096], what[4200];
	struct buf out = {0};
	struct prov_file f;
	int r;

	if (prov_file_read(p, "pam.d/sshd", path, sizeof(path), &f) < 0)
		return -1;
	if (!f.exists)
		return 0;
	r = harden_pam_edit(f.data, add, &out);
	snprintf(what, sizeof(what), "%s pam_namespace %s %s", add ? "add" : "remove",
		add ? "to" : "from", path);
	r = prov_file_commit(p, path, &f, r, &out, 0, what);
	buf_free(&out);
	return r;
}

int harden_ensure(struct prov *p)
{
	char path[4096], idir[4096], cgf[4096], rel[300], why[512], sdir[4096], slice[4096];
	struct buf b = {0};
	int r = -1;

	if (!p->cfg.agent[0])
		return 0;
	for (size_t i = 0; i < sizeof(deny_files) / sizeof(deny_files[0]); i++)
		if (deny_update(p, deny_files[i], 1) < 0)
			return -1;
	if (etc_path(p, path, sizeof(path), "security/limits.d", ".conf") < 0 ||
		harden_render_limits(p->cfg.agent, &b) < 0 ||
		prov_write_file(p, path, &b, 0644, NULL) < 0)
		goto out;
	/* The agent's fake identity: shared with ocsb-agentd, made once. */
	if (!identity_complete(p->paths.varlib, p->cfg.agent) &&
		prov_change(p, "write the fake identity of %s", p->cfg.agent)) {
		int e = identity_ensure(p->paths.varlib, p->cfg.agent, idir, sizeof(idir));

		if (e < 0) {
			log_err("%s: %s", idir, strerror(-e));
			goto out;
		}
		prov_done(p);
	}
	if (!pam_namespace_usable(p, why, sizeof(why))) {
		if (p->mode == PROV_APPLY)
			printf("note: ssh sessions of %s get no private /tmp: %s (ocsb doctor)\n",
				p->cfg.agent, why);
		r = 0;
		goto out;
	}
	buf_free(&b);
	memset(&b, 0, sizeof(b));
	snprintf(rel, sizeof(rel), "ocsb/%s/" AGENT_CGROUPS_FILE, p->cfg.agent);
	if (identity_dir(p->paths.varlib, p->cfg.agent, idir, sizeof(idir)) < 0 ||
		etc_path(p, path, sizeof(path), "security/namespace.d", ".init") < 0 ||
		path_join(cgf, sizeof(cgf), p->paths.run, rel) < 0 ||
		systemd_slice_paths(p, p->agent.uid, sdir, sizeof(sdir), slice, sizeof(slice)) < 0 ||
		harden_render_init(idir, cgf, p->config_path, slice, (unsigned)p->agent.uid, &b) < 0 ||
		prov_write_file(p, path, &b, 0755, NULL) < 0)
		goto out;
	buf_free(&b);
	memset(&b, 0, sizeof(b));
	if (etc_path(p, path, sizeof(path), "security/namespace.d", ".conf") < 0 ||
		harden_render_namespace(p->cfg.agent,
			harden_polydirs_skip(p->mode == PROV_APPLY, p->cfg.agent), &b) < 0 ||
		prov_write_file(p, path, &b, 0644, NULL) < 0)
		goto out;
	/* Last: the module only starts applying once its entry and script are in place. */
	r = pam_update(p, 1);
out:
	buf_free(&b);
	return r < 0 ? -1 : 0;
}

int harden_remove(struct prov *p)
{
	static const char *const files[][2] = {{"security/limits.d", ".conf"},
		{"security/namespace.d", ".conf"}, {"security/namespace.d", ".init"}};
	char path[4096];
	int r = 0;

	if (!p->cfg.agent[0])
		return 0;
	for (size_t i = 0; i < sizeof(deny_files) / sizeof(deny_files[0]); i++)
		if (deny_update(p, deny_files[i], 0) < 0)
			r = -1;
	/*
	 * First: no session may look for the entry once it is gone. The pam line serves every
	 * agent: it stays while others remain (their entries are their own files).
	 */
	if (!p->others && pam_update(p, 0) < 0)
		r = -1;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (etc_path(p, path, sizeof(path), files[i][0], files[i][1]) < 0 ||
			prov_remove_file(p, path, NULL) < 0)
			r = -1;
	return r;
}
