/* SPDX-License-Identifier: MIT */
/*
 * `ocsb doctor [--fix] [--json]`: is the sandbox intact? One line per check, OK / WARN /
 * FAIL with the command that fixes it; exit 1 when anything FAILs. As the owner it checks
 * what the owner can see (her home, the supervisor's status); as root also the effective
 * sshd settings, the live nftables table and a few escape probes run as the agent, each
 * paired with the same probe as root. `--fix` prints the fixes; as root it applies those
 * that are local and reversible (file modes); kernel-wide settings are only printed.
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
#include "args.h"
#include "log.h"
#include "loginshell.h"
#include "netlock.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"
#include "doctor_int.h"

const char *doctor_status_name(int st)
{
	return st == DR_OK ? "OK" : st == DR_WARN ? "WARN" : "FAIL";
}

static void add_v(struct doctor *dr, int machine, enum dr_status st, const char *name,
	const char *fix, const char *fmt, va_list ap)
{
	struct dr_check *k;

	if (dr->n == dr->cap) {
		size_t cap = dr->cap ? dr->cap * 2 : 32;
		struct dr_check *v = realloc(dr->v, cap * sizeof(*v));

		if (!v)
			return;
		dr->v = v;
		dr->cap = cap;
	}
	k = &dr->v[dr->n++];
	memset(k, 0, sizeof(*k));
	snprintf(k->name, sizeof(k->name), "%s", name);
	k->st = st;
	k->machine = machine;
	snprintf(k->fix, sizeof(k->fix), "%s", fix ? fix : "");
	vsnprintf(k->detail, sizeof(k->detail), fmt, ap);
}

void doctor_add(struct doctor *dr, enum dr_status st, const char *name, const char *fix,
	const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_v(dr, 0, st, name, fix, fmt, ap);
	va_end(ap);
}

void doctor_add_machine(struct doctor *dr, enum dr_status st, const char *name, const char *fix,
	const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_v(dr, 1, st, name, fix, fmt, ap);
	va_end(ap);
}

/* ---- pure parts (unit-tested) ---- */

/*
 * The settings sshd -T must show for the agent (design invariant 6). Returns how many
 * are wrong or missing and lists them ("permituserrc=yes, ...") in bad.
 */
int doctor_sshd_verdict(const char *sshd_t, const char *agent, char *bad, size_t n)
{
	static const char *const want[][2] = {
		{"disableforwarding", "yes"},
		{"permituserrc", "no"},
		{"permituserenvironment", "no"},
		{"permittunnel", "no"},
		{"allowagentforwarding", "no"},
		{"allowtcpforwarding", "no"},
		{"x11forwarding", "no"},
	};
	size_t used = 0;
	int wrong = 0;
	char akf[128];

	bad[0] = '\0';
	snprintf(akf, sizeof(akf), "/etc/ocsb/keys/%s", agent);
	for (size_t i = 0; i <= sizeof(want) / sizeof(want[0]); i++) {
		const char *key =
			i < sizeof(want) / sizeof(want[0]) ? want[i][0] : "authorizedkeysfile";
		const char *val = i < sizeof(want) / sizeof(want[0]) ? want[i][1] : akf;
		char got[256] = "(missing)";
		size_t kl = strlen(key);

		for (const char *s = sshd_t; s && *s;) {
			size_t l = strcspn(s, "\n");

			if (l > kl && !strncmp(s, key, kl) && s[kl] == ' ') {
				snprintf(got, sizeof(got), "%.*s", (int)(l - kl - 1), s + kl + 1);
				break;
			}
			s += l + (s[l] == '\n');
		}
		/* AuthorizedKeysFile: %u may be expanded or not; anything else is a finding. */
		if (!strcmp(got, val) ||
			(i == sizeof(want) / sizeof(want[0]) && !strcmp(got, "/etc/ocsb/keys/%u")))
			continue;
		wrong++;
		if (used < n)
			used += (size_t)snprintf(bad + used, n - used, "%s%s=%s (want %s)",
				used ? ", " : "", key, got, val);
	}
	return wrong;
}

/* 1 when the deny file text lists user on a line of its own. */
int doctor_listed(const char *text, const char *user)
{
	size_t ul = strlen(user);

	for (const char *s = text; s && *s;) {
		size_t l = strcspn(s, "\n");

		if (l == ul && !strncmp(s, user, ul))
			return 1;
		s += l + (s[l] == '\n');
	}
	return 0;
}

/* Is a file under the owner's home a secret by its path (relative to the home)? */
int doctor_sensitive(const char *rel)
{
	static const char *const dirs[] = {
		".ssh/", ".aws/", ".docker/", ".kube/", ".gnupg/", ".azure/", ".password-store/"};
	static const char *const files[] = {".netrc", ".git-credentials", ".pgpass", ".npmrc",
		".pypirc", ".vault-token", ".my.cnf"};
	static const char *const words[] = {
		"token", "secret", "credential", "auth", "password", "key", "hosts.yml", ".env"};
	const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (!strncmp(rel, dirs[i], strlen(dirs[i])))
			return !strstr(base, ".pub") && strcmp(base, "known_hosts") != 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (!strcmp(rel, files[i]))
			return 1;
	if (!strcmp(base, ".env") || !strncmp(base, ".env.", 5))
		return 1;
	/* Under ~/.config, by name: most files there are settings, not secrets. */
	if (!strncmp(rel, ".config/", 8))
		for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (strcasestr(base, words[i]))
				return 1;
	return 0;
}

/* ---- output ---- */

static void print_check(const struct dr_check *k)
{
	/* File names under the owner's home are anyone's bytes: no raw controls. */
	char vis[4 * sizeof(k->detail)];

	log_vis(k->detail, strlen(k->detail), vis, sizeof(vis));
	printf("%-4s %-16s %s\n", doctor_status_name(k->st), k->name, vis);
	log_vis(k->fix, strlen(k->fix), vis, sizeof(vis));
	if (k->st != DR_OK && k->fix[0])
		printf("     %-16s fix: %s\n", "", vis);
}

/*
 * ocsb's own checks decide the exit status and the summary; machine-wide kernel settings
 * (not ocsb's to set) are listed apart after them, with their own count.
 */
static int report(struct doctor *dr)
{
	unsigned fails = 0, warns = 0, mfails = 0, mwarns = 0, machine = 0;
	struct buf b = {0};

	for (size_t i = 0; i < dr->n; i++) {
		unsigned *f = dr->v[i].machine ? &mfails : &fails;
		unsigned *w = dr->v[i].machine ? &mwarns : &warns;

		*f += dr->v[i].st == DR_FAIL;
		*w += dr->v[i].st == DR_WARN;
		machine += dr->v[i].machine;
	}
	if (dr->json) {
		buf_puts(&b, "{\"checks\":[");
		for (size_t i = 0; i < dr->n; i++) {
			buf_printf(&b, "%s{\"check\":", i ? "," : "");
			json_buf_str(&b, dr->v[i].name);
			buf_printf(&b, ",\"scope\":\"%s\",\"status\":\"%s\",\"detail\":",
				dr->v[i].machine ? "machine" : "ocsb",
				doctor_status_name(dr->v[i].st));
			json_buf_str(&b, dr->v[i].detail);
			buf_puts(&b, ",\"fix\":");
			json_buf_str(&b, dr->v[i].fix);
			buf_puts(&b, "}");
		}
		buf_printf(&b,
			"],\"fail\":%u,\"warn\":%u,\"machine_fail\":%u,\"machine_warn\":%u}\n",
			fails, warns, mfails, mwarns);
		fwrite(b.data, 1, b.len, stdout);
		buf_free(&b);
	} else {
		for (size_t i = 0; i < dr->n; i++)
			if (!dr->v[i].machine)
				print_check(&dr->v[i]);
		if (machine) {
			printf("machine-wide kernel settings (not ocsb's; yours to change):\n");
			for (size_t i = 0; i < dr->n; i++)
				if (dr->v[i].machine)
					print_check(&dr->v[i]);
		}
		printf("doctor: %u FAIL, %u WARN, %zu checks", fails, warns, dr->n - machine);
		if (machine)
			printf("; machine-wide: %u FAIL, %u WARN", mfails, mwarns);
		printf("\n");
	}
	return fails ? 1 : 0;
}

int doctor_args(int argc, char **argv, int *ret_fix, int *ret_json)
{
	static const char *const opts[] = {"--fix", "--json", NULL};
	int fix = 0, json = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--fix"))
			fix = 1;
		else if (!strcmp(argv[i], "--json"))
			json = 1;
		else
			return args_unknown(argv[i][0] == '-' ? "option" : "argument", argv[i],
				opts, "ocsb --help");
	}
	if (ret_fix)
		*ret_fix = fix;
	if (ret_json)
		*ret_json = json;
	return 0;
}

int cmd_doctor(struct cli *c, int argc, char **argv)
{
	struct doctor dr = {.c = c, .root = geteuid() == 0, .usepam = -1};
	int r;

	if ((r = doctor_args(argc, argv, &dr.fix, &dr.json)) != 0)
		return r;
	doctor_check_deps(&dr);
	doctor_check_syscalls(&dr);
	doctor_check_owner_home(&dr);
	doctor_check_sshd(&dr);
	doctor_check_agentd(&dr);
	doctor_check_proxy(&dr);
	doctor_check_features(&dr);
	doctor_check_sysctls(&dr);
	doctor_check_groups(&dr);
	doctor_check_persistence(&dr);
	doctor_check_agent_home(&dr);
	doctor_check_mirror_links(&dr);
	doctor_check_sessions(&dr);
	doctor_check_session_live(&dr);
	doctor_check_probes(&dr);
	r = report(&dr);
	free(dr.v);
	return r;
}
