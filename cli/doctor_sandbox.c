/* SPDX-License-Identifier: MIT */
/*
 * The checks of `ocsb doctor` on the agent's sandbox and sessions: Landlock and its reason
 * when absent (a container's filter or the kernel), the system calls a container may refuse,
 * abstract sockets, the sync pull's confinement, pam_namespace's entries and one real ssh
 * session of the agent. Moved out of doctor_checks.c (which keeps the other areas).
 */
#define _GNU_SOURCE
#include "sysblock.h"
#include "testhook.h"
#include "doctor_int.h"

int doctor_shell_verdict(const char *login_shell, int shell_safe, long abi)
{
	if (!login_shell || strcmp(path_base(login_shell), OCSB_SHELL_NAME) != 0 || !shell_safe)
		return 1;
	return abi >= 6 ? 0 : 2;
}

/* ssh sessions: ocsb-shell as the login shell applies the abstract-socket scope. */
static void check_abstract(struct doctor *dr, long abi, const char *llwhy, const char *llfix)
{
	struct passwd *pw = getpwnam(dr->c->cfg.agent);
	const char *shell = pw ? pw->pw_shell : NULL;
	struct stat st;
	int safe = shell && stat(shell, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
		!(st.st_mode & 022);

	switch (doctor_shell_verdict(shell, safe, abi)) {
	case 0:
		doctor_add(dr, DR_OK, "abstract-sockets", NULL,
			"ssh sessions of %s start under %s: a Landlock scope keeps them from "
			"other users' abstract Unix sockets, like OpenCode",
			dr->c->cfg.agent, shell);
		break;
	case 2:
		doctor_add(dr, DR_WARN, "abstract-sockets", llfix,
			"no Landlock scope (%s): %s and OpenCode can connect to other users' "
			"abstract Unix sockets (X11, some D-Bus and IDE helpers listen there; keep "
			"no secrets behind them)",
			llwhy, shell);
		break;
	default:
		doctor_add(dr, DR_WARN, "abstract-sockets",
			"sudo ocsb-provision (makes ocsb-shell the agent's login shell)",
			"ssh sessions of %s can connect to other users' abstract Unix sockets "
			"(X11, "
			"some D-Bus and IDE helpers listen there): its login shell is %s, not a "
			"root-owned ocsb-shell",
			dr->c->cfg.agent, shell ? shell : "(no such user)");
	}
}

/*
 * ocsb sync pull reads what the agent sent in a confined child (sync/confine.c): Landlock
 * keeps it to the project's .git; without Landlock it has seccomp and no_new_privs only.
 */
static void check_sync_confine(struct doctor *dr, long abi, const char *llwhy, const char *llfix)
{
	if (TESTHOOK_ENV("OCSB_TEST_SYNC_NO_LANDLOCK")) {
		abi = 0; /* a test build: as on a kernel without Landlock */
		llwhy = "kernel too old (a test build's stand-in)";
		llfix = NULL;
	}
	if (abi > 0)
		doctor_add(dr, DR_OK, "sync-confine", NULL,
			"ocsb sync pull reads the agent's data in a child confined by Landlock "
			"(ABI %ld: the project's .git read-only, writes to its quarantine only%s), "
			"seccomp (no network but the relayed ssh channel) and no_new_privs",
			abi, abi >= 4 ? ", no TCP" : "");
	else
		doctor_add(dr, DR_WARN, "sync-confine",
			llfix ? llfix : "a kernel with Landlock (>= 5.13, lsm=landlock)",
			"no Landlock (%s): ocsb sync pull reads the agent's data in a child with "
			"seccomp and no_new_privs only, which can read and write every file you "
			"can (sync runs unconfined there and says so)",
			llwhy);
}

/*
 * Landlock's state in words: "yes", or why not (the fix is returned). A container's seccomp filter (EPERM or
 * ENOSYS on a kernel that has Landlock) is not a kernel too old; the fix differs.
 */
static const char *landlock_state(long abi, int err, char *why, size_t n)
{
	struct sysblock_facts f;
	char line[512];

	if (abi >= 6) {
		snprintf(why, n, "yes");
		return NULL;
	}
	if (abi > 0) {
		snprintf(why, n, "kernel too old: Landlock ABI %ld, scopes need 6", abi);
		return "a kernel >= 6.12 (Landlock ABI 6)";
	}
	sysblock_facts(&f);
	switch (sysblock_explain(line, sizeof(line), SYSBLOCK_LANDLOCK, err, &f)) {
	case SYSBLOCK_SECCOMP:
		snprintf(why, n, "filtered by seccomp: %s", line);
		return "the container's setting named in this line";
	case SYSBLOCK_KERNEL:
		snprintf(why, n, "kernel too old: %s", line);
		return "a kernel >= 6.12 (Landlock ABI 6)";
	case SYSBLOCK_LSM_OFF:
		snprintf(why, n, "%s", line);
		return "landlock in lsm= on the kernel command line";
	default:
		snprintf(why, n, "landlock_create_ruleset: %s", strerror(err));
		return "a kernel >= 6.12 with Landlock enabled";
	}
}

/*
 * The system calls ocsb cannot do without, tried here: a container's seccomp filter
 * applies to every process in it, this one included. keyctl: every child ocsb starts as
 * another user joins a session keyring of its own (OpenCode, npm, git); mlock: secrets are
 * kept in locked memory. Refused, the supervisor cannot run OpenCode or hold secrets.
 */
void doctor_check_syscalls(struct doctor *dr)
{
	static const enum sysblock_call need[] = {SYSBLOCK_KEYCTL, SYSBLOCK_MLOCK};
	struct sysblock_facts f;
	char line[512];
	int bad = 0;

	sysblock_facts(&f);
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		int e = sysblock_probe(need[i]);

		if (sysblock_explain(line, sizeof(line), need[i], e, &f) == SYSBLOCK_OTHER)
			continue;
		doctor_add(dr, DR_FAIL, "syscalls", "the container's setting named in this line",
			"%s", line);
		bad = 1;
	}
	if (!bad)
		doctor_add(dr, DR_OK, "syscalls", NULL, "keyctl and mlock pass%s",
			f.seccomp == 2 ? " the seccomp filter this runs under (the container's)" : "");
}

/*
 * What pam_namespace needs of the agent's entry, or it fails every ssh session of the
 * agent (sshd's exit 254, nothing said to the client): each polydir exists, or the entry
 * creates it and its parent exists; the init script is root's and executable. 0 when all
 * hold; else a FAIL is added and -1 returned.
 */
static int check_session_setup(struct doctor *dr, const char *conf)
{
	char *text = NULL, init[4200];
	struct stat st;
	int bad = 0;

	if (fo_read(conf, 1 << 16, &text, NULL) < 0)
		return 0;
	for (char *s = text; *s && !bad;) {
		size_t l = strcspn(s, "\n"), d = strcspn(s, " \t\n");
		char dir[256], parent[256], *slash;

		if (s[0] != '#' && d > 0 && d < sizeof(dir)) {
			int create = memmem(s, l, ":create", 7) != NULL;

			snprintf(dir, sizeof(dir), "%.*s", (int)d, s);
			snprintf(parent, sizeof(parent), "%s", dir);
			slash = strrchr(parent, '/');
			if (slash)
				*(slash == parent ? slash + 1 : slash) = '\0';
			if (stat(dir, &st) == 0 ? !S_ISDIR(st.st_mode)
						: !create || stat(parent, &st) < 0 ||
							  !S_ISDIR(st.st_mode)) {
				doctor_add(dr, DR_FAIL, "ssh-sessions",
					"sudo ocsb-provision (writes the entry again: it creates "
					"what is missing or leaves it out)",
					"every ssh session of %s fails (sshd exits 254): %s names %s, "
					"which %s",
					dr->c->cfg.agent, conf, dir,
					create ? "cannot be created here" : "does not exist");
				bad = 1;
			}
		}
		s += l + (s[l] == '\n');
	}
	free(text);
	if (!bad && snprintf(init, sizeof(init), "%.*s.init", (int)(strlen(conf) - 5), conf) <
			    (int)sizeof(init) &&
		(stat(init, &st) < 0 || st.st_uid != 0 || !(st.st_mode & S_IXUSR))) {
		doctor_add(dr, DR_FAIL, "ssh-sessions", "sudo ocsb-provision",
			"every ssh session of %s fails: its init script %s is missing or not "
			"root's and executable",
			dr->c->cfg.agent, init);
		bad = 1;
	}
	return bad ? -1 : 0;
}

/* What OpenCode gets that the agent's ssh sessions do not: said plainly. */
void doctor_check_sessions(struct doctor *dr)
{
	char *mounts = NULL;
	long abi = landlock_abi();
	int lerr = abi < 0 ? errno : 0;
	int hidepid = 0, session_ns = 0;
	char llwhy[640];
	const char *llfix = landlock_state(abi, lerr, llwhy, sizeof(llwhy));
	char pam[4096], conf[4096], *text = NULL;
	struct stat st;

	/* Provisioning's pam_namespace entry for the agent, and its line in sshd's stack. */
	if (path_join(pam, sizeof(pam), dr->c->paths.etc, "pam.d/sshd") == 0 &&
		fo_read(pam, 1 << 20, &text, NULL) == 0 && strstr(text, "pam_namespace.so") &&
		strstr(text, "# ocsb-provision") &&
		snprintf(conf, sizeof(conf), "%s/security/namespace.d/ocsb-%s.conf",
			dr->c->paths.etc, dr->c->cfg.agent) < (int)sizeof(conf) &&
		stat(conf, &st) == 0)
		session_ns = 1;
	free(text);

	if (fo_read("/proc/self/mountinfo", 1 << 20, &mounts, NULL) == 0) {
		for (char *s = mounts; s && *s;) {
			size_t l = strcspn(s, "\n");
			char line[1024];

			snprintf(line, sizeof(line), "%.*s", (int)l, s);
			if (strstr(line, " /proc ") && strstr(line, " - proc ") &&
				(strstr(line, "hidepid=2") || strstr(line, "hidepid=invisible")))
				hidepid = 1;
			s += l + (s[l] == '\n');
		}
	}
	free(mounts);
	doctor_add(dr, abi >= 6 ? DR_OK : DR_WARN, "opencode-sandbox", llfix,
		"OpenCode runs with a private /tmp and /dev/shm, its own /proc (hidepid), fake "
		"machine-id, boot_id, kernel command line and DMI ids; Landlock scope for abstract "
		"sockets and signals: %s%s%s",
		abi >= 6 ? "" : "no (", llwhy, abi >= 6 ? "" : ")");
	if (session_ns && dr->usepam == 0)
		doctor_add(dr, DR_WARN, "ssh-sessions", "UsePAM yes in sshd_config",
			"the pam_namespace entry for %s is inert: sshd runs with UsePAM no, so its "
			"ssh sessions get NO private namespace",
			dr->c->cfg.agent);
	else if (session_ns && check_session_setup(dr, conf) < 0)
		; /* said */
	else if (session_ns)
		doctor_add(dr, DR_OK, "ssh-sessions", NULL,
			"ssh sessions of %s get a private /tmp, /var/tmp and /dev/shm, their own "
			"/proc (hidepid) and the fake identity (pam_namespace, %s)",
			dr->c->cfg.agent, pam);
	else
		doctor_add(dr, DR_WARN, "ssh-sessions",
			"sudo ocsb-provision (needs pam_namespace.so)",
			"ssh sessions of %s get NO private namespace: they share /tmp and /dev/shm "
			"with everyone, see every process and the real machine-id, boot_id and "
			"kernel command line",
			dr->c->cfg.agent);
	check_abstract(dr, abi, llwhy, llfix);
	check_sync_confine(dr, abi, llwhy, llfix);
	if (session_ns && !hidepid)
		doctor_add(dr, DR_OK, "proc", NULL,
			"OpenCode and the agent's ssh sessions mount their own /proc with hidepid "
			"(the machine's /proc is unchanged)");
	else if (hidepid)
		doctor_add(dr, DR_OK, "proc", NULL,
			"/proc is mounted with hidepid: other users' processes "
			"are hidden from the agent's ssh sessions");
	else
		doctor_add(dr, DR_WARN, "proc",
			"opt in: sudo mount -o remount,hidepid=invisible,gid=GROUP /proc (GROUP: "
			"the owner's and monitoring tools' group; and in /etc/fstab)",
			"/proc shows every process: the agent's ssh sessions can read the owner's "
			"command lines");
}
