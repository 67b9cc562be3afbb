/* SPDX-License-Identifier: MIT */
/*
 * A few probes run as the agent, each paired with the same probe as root (a missing tool
 * never counts as blocked).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <grp.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "fileops.h"
#include "json.h"
#include "landlock.h"
#include "log.h"
#include "loginshell.h"
#include "netlock.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"
#include "doctor_int.h"
#include "homecheck.h"
#include "mirror.h"

/* ---- a few probes as the agent, each paired with the same probe as root ---- */

static int tcp_connects(unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct pollfd pf;
	int fd, ok = 0, e = 0;
	socklen_t el = sizeof(e);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
		ok = 1;
	} else if (errno == EINPROGRESS) {
		pf.fd = fd;
		pf.events = POLLOUT;
		if (poll(&pf, 1, 2000) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0)
			ok = e == 0;
	}
	close(fd);
	return ok;
}

struct probe_arg {
	const char *home;
	unsigned port;
};

/* Exit bits: 1 = reached the owner's home listing, 2 = reached sshd on 127.0.0.1:22. */
static int probe_fn(void *arg, int outfd)
{
	const struct probe_arg *p = arg;
	char path[4200];
	int r = 0, fd;

	(void)outfd;
	snprintf(path, sizeof(path), "%s/.ssh", p->home);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		r |= 1;
		close(fd);
	}
	if (tcp_connects(p->port))
		r |= 2;
	return r;
}

void doctor_check_probes(struct doctor *dr)
{
	struct probe_arg pa = {.home = dr->c->owner.home, .port = 22};
	struct spawn_opts o = {.drop = 1, .timeout_ms = 10000};
	struct spawn_result r = {0};
	struct user_info a;
	int control = 0;
	struct stat st;
	char ssh_dir[4200];

	if (!dr->root) {
		doctor_add(
			dr, DR_WARN, "probes", "sudo ocsb doctor", "probes as the agent need root");
		return;
	}
	if (user_lookup(dr->c->cfg.agent, &a) < 0 || !dr->c->have_owner)
		return;
	/* Controls: root reaches both, or the probe would prove nothing. */
	snprintf(ssh_dir, sizeof(ssh_dir), "%s/.ssh", pa.home);
	control = (stat(ssh_dir, &st) == 0 ? 1 : 0) | (tcp_connects(pa.port) ? 2 : 0);
	o.uid = a.uid;
	o.gid = a.gid;
	o.user = a.name;
	if (spawn_fn(probe_fn, &pa, &o, &r) < 0) {
		doctor_add(dr, DR_FAIL, "probes", NULL, "cannot run a probe as %s", a.name);
		return;
	}
	if (control & 1)
		doctor_add(dr, r.status & 1 ? DR_FAIL : DR_OK, "probe-files",
			r.status & 1 ? "chmod 0700 ~/.ssh" : NULL, "%s %s open %s", a.name,
			r.status & 1 ? "CAN" : "cannot", ssh_dir);
	else
		doctor_add(dr, DR_WARN, "probe-files", NULL, "no %s to probe (control failed)",
			ssh_dir);
	if (control & 2)
		doctor_add(dr, r.status & 2 ? DR_FAIL : DR_OK, "probe-network",
			r.status & 2 ? "sudo ocsb-provision" : NULL,
			"%s %s connect to 127.0.0.1:22 (root can)", a.name,
			r.status & 2 ? "CAN" : "cannot");
	else
		doctor_add(dr, DR_WARN, "probe-network", NULL,
			"nothing listens on 127.0.0.1:22 to probe (control failed)");
	spawn_result_free(&r);
}

/*
 * What provisioning keeps in the agent's home and the agent may break (ocsb-provision then
 * skips it with a warning): looked at as the agent, so as root only.
 */
void doctor_check_agent_home(struct doctor *dr)
{
	struct user_info a;
	char why[256], what[300];
	int bad = 0;

	if (!dr->root || user_lookup(dr->c->cfg.agent, &a) < 0)
		return;
	for (size_t i = 0; i <= dr->c->cfg.projects.n; i++) {
		const char *name =
			i < dr->c->cfg.projects.n ? path_base(dr->c->cfg.projects.v[i]) : ".bashrc";
		int r = home_entry_check(&a, name, i < dr->c->cfg.projects.n, why, sizeof(why));

		if (r != 1)
			continue;
		snprintf(what, sizeof(what), "sudo -u %s rm -rf ~%s/%s && sudo ocsb-provision",
			a.name, a.name, name);
		doctor_add(dr, DR_WARN, "agent-home", what,
			"~%s/%s %s: ocsb-provision skips it (the agent's own doing)", a.name, name,
			why);
		bad++;
	}
	if (!bad)
		doctor_add(dr, DR_OK, "agent-home", NULL,
			"~%s/.bashrc and the clones are what ocsb-provision keeps there", a.name);
}

/*
 * The mirror's places in the agent's home: each path the tree holds (or reserves) must be
 * the mirror's link, else the agent does not see the owner's configs (issue 15). As root.
 */
struct place_doctor {
	struct doctor *dr;
	const char *agent;
	int bad;
};

static void place_doctor(void *arg, const char *rel, const char *why)
{
	struct place_doctor *pd = arg;
	char fix[600];

	if (!why)
		return;
	/* The run takes the place and keeps what it held aside: nothing of the agent's lost. */
	snprintf(fix, sizeof(fix), "sudo ocsb-provision (moves it to ~%s/%s.ocsb-aside)", pd->agent,
		rel);
	doctor_add(pd->dr, DR_WARN, "mirror-link", fix, "~%s/%s %s: the agent does not see your %s",
		pd->agent, rel, why, rel);
	pd->bad++;
}

void doctor_check_mirror_links(struct doctor *dr)
{
	struct user_info a;
	struct place_doctor pd = {dr, NULL, 0};
	int seen;

	if (!dr->root || user_lookup(dr->c->cfg.agent, &a) < 0)
		return;
	pd.agent = a.name;
	seen = mirror_places_check(&dr->c->cfg, &dr->c->paths, &a, place_doctor, &pd);
	if (seen > 0 && !pd.bad)
		doctor_add(dr, DR_OK, "mirror-link", NULL,
			"the mirror's %d place%s in ~%s link to the tree", seen,
			seen == 1 ? "" : "s", a.name);
}

/*
 * The agent's ssh session set-up, end to end: one session opened with the owner's sync
 * key (git-shell is its forced command), asking for a repository that does not exist.
 * git's answer proves sshd, PAM, pam_namespace and the init script let the session in; a
 * session that ends before any answer (sshd's exit 254) failed in that set-up, which
 * tells the client nothing. As the owner (root drops to the owner): the key is hers.
 */
void doctor_check_session_live(struct doctor *dr)
{
	char key[4200], pin[4200], port[16], dest[128], first[256];
	const char *argv[] = {"/usr/bin/ssh", "-F", "/dev/null", "-i", key, "-o",
		"IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o",
		pin, "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR", "-p", port, "--", dest,
		"git-upload-pack '/ocsb-doctor/no-such-repository'", NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 20000, .max_output = 4096};
	struct spawn_result r = {0};
	const char *out;
	struct stat st;

	if (!dr->c->have_owner || access(argv[0], X_OK) < 0 ||
		snprintf(key, sizeof(key), "%s/.config/ocsb/%s_sync_ed25519", dr->c->owner.home,
			dr->c->cfg.agent) >= (int)sizeof(key) ||
		stat(key, &st) < 0)
		return; /* no sync key (a remote owner's setup): nothing to open a session with */
	snprintf(pin, sizeof(pin), "UserKnownHostsFile=%s/.config/ocsb/known_hosts",
		dr->c->owner.home);
	snprintf(port, sizeof(port), "%u", dr->c->cfg.ssh_port ? dr->c->cfg.ssh_port : 22);
	snprintf(dest, sizeof(dest), "%s@localhost", dr->c->cfg.agent);
	if (getuid() == 0) {
		o.drop = 1;
		o.uid = dr->c->owner.uid;
		o.gid = dr->c->owner.gid;
		o.user = dr->c->owner.name;
	}
	if (spawn_run(argv, &o, &r) < 0) {
		doctor_add(dr, DR_WARN, "ssh-session", NULL, "cannot run %s", argv[0]);
		return;
	}
	out = r.output ? r.output : "";
	log_vis(out, strcspn(out, "\n"), first, sizeof(first));
	if (strstr(out, "does not appear to be a git repository") || strstr(out, "fatal: "))
		doctor_add(dr, DR_OK, "ssh-session", NULL,
			"an ssh session of %s opens (sshd, PAM, pam_namespace and its init script "
			"let it in; opened with the sync key)",
			dr->c->cfg.agent);
	else if (r.timed_out || strstr(out, "Permission denied") || strstr(out, "Host key verification") ||
		 strstr(out, "Connection refused") || strstr(out, "timed out"))
		doctor_add(dr, DR_WARN, "ssh-session", "sudo ocsb-provision",
			"could not open an ssh session of %s to check it: %s", dr->c->cfg.agent,
			first);
	else
		doctor_add(dr, DR_FAIL, "ssh-session",
			"sudo ocsb doctor (its ssh-sessions line), then sudo ocsb-provision",
			"ssh sessions of %s end before their command runs (ssh exit %d): their "
			"set-up failed (pam_namespace or its init script); sshd's log says why "
			"(journalctl -u ssh, /var/log/auth.log)",
			dr->c->cfg.agent, r.status);
	spawn_result_free(&r);
}
