/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "doctor_int.h"
#include "config.h"
#include "ctl.h"
#include "fileops.h"
#include "args.h"
#include "log.h"
#include "paths.h"
#include "../inject/inject.h"
#include "../secrets/keyring.h"
#include "../secrets/secrets.h"

/*
 * `ocsb secrets`: the owner's side. Values come from a no-echo prompt or stdin, never
 * from argv (ps, shell history); they are kept in locked memory and leave this process
 * only into the keyring (or the passphrase box) and sealed to agentd's key.
 */

#define BOX_NAME "secrets.box"
#define PUSHED_NAME "secrets.pushed"
/* argon2id for the box: libsodium's "moderate" (about 0.8 s here), stored in the header. */
#define BOX_OPS crypto_pwhash_OPSLIMIT_MODERATE
#define BOX_MEM crypto_pwhash_MEMLIMIT_MODERATE
#define PUSH_TIMEOUT_MS 30000 /* agentd restarts instances before it answers */

struct sctx {
	struct paths paths;
	struct ocsb_config cfg; /* owned */
	int have_cfg;
	struct user_info me;
	char confdir[PATH_MAX]; /* ~/.config/ocsb */
	int use_file;
	int pass_fd;
	char *pass; /* owned, locked */
	size_t passlen;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb secrets [--global | --project NAME] [--file [--passphrase-fd N]] "
		"COMMAND\n"
		"  set NAME     store NAME (an environment variable name); the value is read\n"
		"               from a no-echo prompt, or from stdin when it is not a terminal\n"
		"    --inject PROVIDER   keep the key out of the sandbox: ocsb-inject adds it to\n"
		"               requests on the way out; PROVIDER is anthropic, openai, google,\n"
		"               openrouter, mistral, groq, deepseek or xai\n"
		"    --inject https://HOST[/PREFIX] --header 'NAME: VALUE with {}'  any other API;\n"
		"               git over https://HOST goes through it too (insteadOf)\n"
		"  list         names, scope, injected (route) or exported, when last pushed\n"
		"  rm NAME      remove NAME from the store\n"
		"  push         hand every secret, sealed, to ocsb-agentd; it restarts the\n"
		"               OpenCode instances whose secrets changed and says which\n"
		"Scope: the project around the current directory, or --project NAME, or\n"
		"--global (every project). A project's secret overrides a global one.\n"
		"Store: the Secret Service keyring; --file (or an existing\n"
		"~/.config/ocsb/secrets.box) uses the passphrase-encrypted file instead.\n"
		"See ocsb(1), SECRETS.\n");
}

/* ---- input ---- */

/* One line from fd into locked memory, without its newline; *ret NUL-terminated. */
static int read_line_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	char *p = secrets_alloc(max + 2);
	size_t n = 0;

	if (!p)
		return -ENOMEM;
	while (n < max + 1) {
		ssize_t k = read(fd, p + n, 1);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || p[n] == '\n')
			break;
		n++;
	}
	if (n > max) {
		secrets_free(p);
		return -EMSGSIZE;
	}
	if (n && p[n - 1] == '\r')
		n--;
	p[n] = '\0';
	*ret = p;
	*ret_len = n;
	return 0;
}

/* All of stdin (a pipe or file), at most max bytes, one trailing newline dropped. */
static int read_all_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	char *p = secrets_alloc(max + 2);
	size_t n = 0;

	if (!p)
		return -ENOMEM;
	for (;;) {
		ssize_t k = read(fd, p + n, max + 1 - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = -errno;

			secrets_free(p);
			return e;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n > max) {
			secrets_free(p);
			return -EMSGSIZE;
		}
	}
	if (n && p[n - 1] == '\n')
		n--;
	if (n && p[n - 1] == '\r')
		n--;
	p[n] = '\0';
	*ret = p;
	*ret_len = n;
	return 0;
}

/* Prompt on the terminal with echo off. */
static int prompt_tty(const char *prompt, size_t max, char **ret, size_t *ret_len)
{
	struct termios old, raw;
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY), r;

	if (fd < 0)
		return -ENOTTY;
	if (tcgetattr(fd, &old) < 0) {
		close(fd);
		return -ENOTTY;
	}
	raw = old;
	raw.c_lflag &= ~(tcflag_t)(ECHO | ECHONL);
	raw.c_lflag |= ICANON;
	if (write(fd, prompt, strlen(prompt)) < 0 || tcsetattr(fd, TCSAFLUSH, &raw) < 0) {
		close(fd);
		return -ENOTTY;
	}
	r = read_line_fd(fd, max, ret, ret_len);
	tcsetattr(fd, TCSAFLUSH, &old);
	if (write(fd, "\n", 1) < 0)
		r = r < 0 ? r : 0;
	close(fd);
	return r;
}

static int get_passphrase(struct sctx *x, int confirm)
{
	char *again = NULL;
	size_t alen = 0;
	int r;

	if (x->pass)
		return 0;
	if (x->pass_fd >= 0) {
		r = read_line_fd(x->pass_fd, 1024, &x->pass, &x->passlen);
	} else {
		r = prompt_tty("Passphrase for ~/.config/ocsb/" BOX_NAME ": ", 1024, &x->pass,
			&x->passlen);
		if (r == -ENOTTY) {
			log_err("no terminal to ask the passphrase on: use --passphrase-fd N");
			return -1;
		}
		if (r == 0 && confirm) {
			r = prompt_tty("Again, to confirm: ", 1024, &again, &alen);
			if (r == 0 && (alen != x->passlen || sodium_memcmp(again, x->pass, alen))) {
				secrets_free(again);
				log_err("the two passphrases differ: nothing was changed");
				return -1;
			}
			secrets_free(again);
		}
	}
	if (r < 0) {
		log_err("reading the passphrase: %s", strerror(-r));
		return -1;
	}
	if (x->passlen == 0) {
		log_err("empty passphrase refused");
		return -1;
	}
	return 0;
}

/* ---- stores ---- */

static int box_path(struct sctx *x, char *out, size_t n)
{
	return path_join(out, n, x->confdir, BOX_NAME);
}

static int box_exists(struct sctx *x)
{
	char path[PATH_MAX];
	struct stat st;

	return box_path(x, path, sizeof(path)) == 0 && lstat(path, &st) == 0;
}

/* Load the whole store; names only from the keyring unless with_values. */
static int store_load(struct sctx *x, struct secret_set *s, int with_values, int *ret_new)
{
	char path[PATH_MAX], err[1024], *data = NULL;
	struct secret_set *got = NULL;
	size_t len = 0;
	int r;

	if (ret_new)
		*ret_new = 0;
	if (!x->use_file) {
		r = keyring_load(s, with_values, err, sizeof(err));
		if (r < 0)
			log_err("%s", err);
		return r < 0 ? -1 : 0;
	}
	if (box_path(x, path, sizeof(path)) < 0)
		return -1;
	r = fo_read(path, SECRETS_MAX_SET + 1024, &data, &len);
	if (r == -ENOENT) {
		if (ret_new)
			*ret_new = 1;
		return 0;
	}
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	if (get_passphrase(x, 0) < 0) {
		free(data);
		return -1;
	}
	r = secrets_box_open(
		x->pass, x->passlen, (unsigned char *)data, len, &got, err, sizeof(err));
	free(data);
	if (r < 0) {
		log_err("%s: %s", path, err);
		return -1;
	}
	for (size_t i = 0; i < got->n; i++)
		secrets_set_put(s, got->e[i].scope, got->e[i].name, got->e[i].value, got->e[i].len);
	secrets_set_free(got);
	return 0;
}

static int box_save(struct sctx *x, const struct secret_set *s)
{
	char path[PATH_MAX];
	struct buf b = {0};
	int dfd, r;

	if (box_path(x, path, sizeof(path)) < 0)
		return -1;
	r = secrets_box_seal(x->pass, x->passlen, s, BOX_OPS, BOX_MEM, &b);
	if (r < 0) {
		log_err("sealing %s: %s", path, strerror(-r));
		return -1;
	}
	dfd = fo_mkdir_p(AT_FDCWD, x->confdir, 0700, (uid_t)-1, (gid_t)-1);
	r = dfd < 0 ? dfd : fo_write_at(dfd, BOX_NAME, b.data, b.len, 0600, (uid_t)-1, (gid_t)-1);
	if (dfd >= 0)
		close(dfd);
	buf_free(&b);
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	return 0;
}

/* ---- the pushed-at record: "SCOPE NAME UNIXTIME" lines, no values ---- */

static void pushed_load(struct sctx *x, struct secret_set *s)
{
	char path[PATH_MAX], *data = NULL, *line, *save = NULL;

	if (path_join(path, sizeof(path), x->confdir, PUSHED_NAME) < 0 ||
		fo_read(path, 256 * 1024, &data, NULL) < 0)
		return;
	for (line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char scope[80], name[80];
		long long t;
		int i;

		if (sscanf(line, "%79s %79s %lld", scope, name, &t) != 3)
			continue;
		i = secrets_set_find(s, strcmp(scope, "*") ? scope : "", name);
		if (i >= 0)
			s->e[i].pushed = t;
	}
	free(data);
}

static void pushed_save(struct sctx *x, const struct secret_set *s, long long now)
{
	struct buf b = {0};
	int dfd;

	buf_puts(&b, "# ocsb secrets push: scope name time (written by ocsb; no values)\n");
	for (size_t i = 0; i < s->n; i++)
		buf_printf(&b, "%s %s %lld\n", s->e[i].scope[0] ? s->e[i].scope : "*", s->e[i].name,
			now);
	dfd = fo_mkdir_p(AT_FDCWD, x->confdir, 0700, (uid_t)-1, (gid_t)-1);
	/* Only what `list` shows as PUSHED: not worth two fsyncs (journal commits) per push. */
	if (dfd < 0 ||
		fo_write_at_nosync(dfd, PUSHED_NAME, b.data, b.len, 0600, (uid_t)-1, (gid_t)-1) < 0)
		log_warn("could not record the push time in %s/%s", x->confdir, PUSHED_NAME);
	if (dfd >= 0)
		close(dfd);
	buf_free(&b);
}

/* ---- scope ---- */

static int resolve_scope(struct sctx *x, int global, const char *project, char *ret, size_t n)
{
	char cwd[PATH_MAX], pr[PATH_MAX];

	if (global) {
		ret[0] = '\0';
		return 0;
	}
	if (!x->have_cfg) {
		log_err("/etc/ocsb/ocsb.conf is missing (run 'sudo ocsb-provision'), so there is "
			"no project: use --global");
		return -1;
	}
	for (size_t i = 0; i < x->cfg.projects.n; i++) {
		const char *base = path_base(x->cfg.projects.v[i]);
		size_t l;

		if (project) {
			if (!strcmp(project, base))
				goto found;
			continue;
		}
		if (!getcwd(cwd, sizeof(cwd)) || !realpath(x->cfg.projects.v[i], pr))
			continue;
		l = strlen(pr);
		if (!strncmp(cwd, pr, l) && (cwd[l] == '\0' || cwd[l] == '/'))
			goto found;
		continue;
	found:
		if (secrets_scope_ok(base) < 0) {
			log_err("project name '%s' cannot be a secret scope", base);
			return -1;
		}
		snprintf(ret, n, "%s", base);
		return 0;
	}
	if (project)
		log_err("'%s' is not a project of agent %s (see /etc/ocsb/ocsb.conf)", project,
			x->cfg.agent);
	else
		log_err("the current directory is in no project of agent %s: cd into one, or "
			"use --project NAME or --global",
			x->cfg.agent);
	return -1;
}

/* ---- commands ---- */

static int do_set(struct sctx *x, const char *scope, const char *name, const char *route)
{
	struct secret_set *s = NULL;
	char err[512], prompt[160], *value = NULL;
	size_t len = 0;
	int r, rc = 1, fresh = 0;

	if (secrets_name_ok(name, err, sizeof(err)) < 0) {
		log_err("%s", err);
		return 2;
	}
	/*
	 * The passphrase store: the passphrase is asked (and checked, by opening the box)
	 * before the value, so a mistyped passphrase does not throw a typed value away.
	 */
	if (x->use_file) {
		s = secrets_set_new();
		if (!s || store_load(x, s, 1, &fresh) < 0)
			goto out;
		if (fresh && x->pass_fd < 0 && get_passphrase(x, 1) < 0)
			goto out;
		if (fresh && get_passphrase(x, 0) < 0)
			goto out;
	}
	if (isatty(STDIN_FILENO)) {
		snprintf(prompt, sizeof(prompt), "Value for %s (not shown): ", name);
		r = prompt_tty(prompt, SECRETS_MAX_VALUE, &value, &len);
	} else {
		r = read_all_fd(STDIN_FILENO, SECRETS_MAX_VALUE, &value, &len);
	}
	if (r == -EMSGSIZE) {
		log_err("%s: value longer than %d bytes", name, SECRETS_MAX_VALUE);
		rc = 2;
		goto out;
	}
	if (r < 0) {
		log_err("reading the value of %s: %s", name, strerror(-r));
		goto out;
	}
	if (len == 0 || memchr(value, '\0', len)) {
		log_err("%s: %s value refused", name, len ? "a NUL byte in the" : "an empty");
		rc = 2;
		goto out;
	}
	if (!x->use_file) {
		r = keyring_put(scope, name, value, route, err, sizeof(err));
		if (r < 0)
			log_err("%s", err);
		else
			rc = 0;
		goto out;
	}
	r = secrets_set_put(s, scope, name, value, len);
	if (r == -ENOSPC) {
		log_err("at most %d secrets", SECRETS_MAX_COUNT);
		goto out;
	}
	if (r == 0)
		r = secrets_set_route(s, scope, name, route);
	if (r < 0 || box_save(x, s) < 0)
		goto out;
	rc = 0;
out:
	if (rc == 0)
		printf("stored %s (%s, %s%s) in the %s; 'ocsb secrets push' hands it to the "
		       "agent\n",
			name, scope[0] ? scope : "global", route[0] ? "injected via " : "exported",
			route[0] ? route : "", x->use_file ? "passphrase file store" : "keyring");
	secrets_free(value);
	secrets_set_free(s);
	return rc;
}

static int do_rm(struct sctx *x, const char *scope, const char *name)
{
	struct secret_set *s = NULL;
	char err[512];
	int r, rc = 1;

	if (!x->use_file) {
		r = keyring_del(scope, name, err, sizeof(err));
		if (r == -ENOENT)
			log_err("no secret %s (%s) in the keyring", name,
				scope[0] ? scope : "global");
		else if (r < 0)
			log_err("%s", err);
		else
			rc = 0;
		goto out;
	}
	s = secrets_set_new();
	if (!s || store_load(x, s, 1, NULL) < 0)
		goto out;
	if (secrets_set_del(s, scope, name) < 0) {
		log_err("no secret %s (%s) in the file store", name, scope[0] ? scope : "global");
		goto out;
	}
	if (box_save(x, s) < 0)
		goto out;
	rc = 0;
out:
	if (rc == 0)
		printf("removed %s (%s); 'ocsb secrets push' takes it away from the agent\n", name,
			scope[0] ? scope : "global");
	secrets_set_free(s);
	return rc;
}

static int do_list(struct sctx *x)
{
	struct secret_set *s = secrets_set_new();

	if (!s || store_load(x, s, 0, NULL) < 0) {
		secrets_set_free(s);
		return 1;
	}
	pushed_load(x, s);
	if (!s->n)
		printf("no secrets (ocsb secrets set NAME)\n");
	else
		printf("%-32s %-20s %-28s %s\n", "NAME", "SCOPE", "KIND", "PUSHED");
	for (size_t i = 0; i < s->n; i++) {
		char when[64] = "never";
		time_t t = (time_t)s->e[i].pushed;
		struct tm tm;

		if (t && localtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		char kind[SECRETS_MAX_ROUTE + 16];
		const char *sp = strchr(s->e[i].route, ' ');

		/* A generic route shows its base URL; the header template is not a secret either. */
		if (s->e[i].route[0])
			snprintf(kind, sizeof(kind), "injected (%.*s)",
				sp ? (int)(sp - s->e[i].route) : (int)strlen(s->e[i].route),
				s->e[i].route);
		else
			snprintf(kind, sizeof(kind), "exported");
		printf("%-32s %-20s %-28s %s\n", s->e[i].name,
			s->e[i].scope[0] ? s->e[i].scope : "global", kind, when);
	}
	secrets_set_free(s);
	return 0;
}

static int do_push(struct sctx *x)
{
	struct secret_set *s = secrets_set_new();
	struct ctl_request rq = {.verb = CTL_SECRET_PUT};
	struct ctl_response resp = {0};
	unsigned char pk[crypto_box_PUBLICKEYBYTES], *plain = NULL;
	char pub[PATH_MAX], err[1024], *text = NULL;
	size_t plen = 0, tlen = 0, restarted = 0;
	int rc = 1;

	if (!s || store_load(x, s, 1, NULL) < 0)
		goto out;
	if (path_join(pub, sizeof(pub), x->paths.etc, SECRETS_PUB_REL) < 0)
		goto out;
	if (fo_read(pub, 4096, &text, &tlen) < 0 || secrets_pub_parse(text, tlen, pk) < 0) {
		log_err("%s: missing or not an ocsb public key (run 'sudo ocsb-provision')", pub);
		goto out;
	}
	if (secrets_set_encode(s, &plain, &plen) < 0)
		goto out;
	if (plen > SECRETS_MAX_PUSH) {
		log_err("the secrets take %zu bytes, more than one push carries (%d)", plen,
			SECRETS_MAX_PUSH);
		goto out;
	}
	if (secrets_seal(pk, plain, plen, &rq.sealed) < 0)
		goto out;
	if (ctl_call(x->paths.ctl_sock, &rq, &resp, PUSH_TIMEOUT_MS, err, sizeof(err)) < 0) {
		log_err("%s", err);
		goto out;
	}
	if (!resp.ok) {
		log_err("ocsb-agentd refused the secrets: %s", resp.error);
		goto out;
	}
	pushed_save(x, s, (long long)time(NULL));
	printf("pushed %zu secret%s to ocsb-agentd\n", s->n, s->n == 1 ? "" : "s");
	for (size_t i = 0; i < resp.keys.n; i++)
		if (!strcmp(resp.keys.v[i], "restarted")) {
			printf("restarted OpenCode instance %s\n", resp.values.v[i]);
			restarted++;
		}
	if (!restarted)
		printf("no running OpenCode instance needed a restart\n");
	rc = 0;
out:
	ctl_response_free(&resp);
	free(rq.sealed);
	free(text);
	secrets_free(plain);
	secrets_set_free(s);
	return rc;
}

int cmd_secrets(int argc, char **argv)
{
	static const char *const cmds[] = {"set", "list", "rm", "push", NULL};
	static const char *const opts[] = {"--global", "--project", "--inject", "--header",
		"--file", "--passphrase-fd", "--help", NULL};
	struct sctx x = {.pass_fd = -1};
	const char *project = NULL, *cmd = NULL, *name = NULL, *inject = NULL, *header = NULL;
	char route[SECRETS_MAX_ROUTE + 1] = "";
	char conf[PATH_MAX], err[1024], scope[SECRETS_MAX_NAME + 1];
	int global = 0, rc = 2, nargs = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--global")) {
			global = 1;
		} else if (!strcmp(a, "--project") && i + 1 < argc) {
			project = argv[++i];
		} else if (!strcmp(a, "--inject") && i + 1 < argc) {
			inject = argv[++i];
		} else if (!strcmp(a, "--header") && i + 1 < argc) {
			header = argv[++i];
		} else if (!strcmp(a, "--file")) {
			x.use_file = 1;
		} else if (!strcmp(a, "--passphrase-fd") && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v < 0 || v > INT_MAX || fcntl((int)v, F_GETFD) < 0) {
				log_err("--passphrase-fd: '%s' is not an open descriptor", argv[i]);
				return 2;
			}
			x.pass_fd = (int)v;
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--project") || !strcmp(a, "--inject") ||
			!strcmp(a, "--header") || !strcmp(a, "--passphrase-fd")) {
			log_err("option '%s' needs a value; see ocsb secrets --help", a);
			return 2;
		} else if (a[0] == '-') {
			return args_unknown("option", a, opts, "ocsb secrets --help");
		} else if (!cmd) {
			cmd = a;
		} else {
			name = a;
			nargs++;
		}
	}
	if (!cmd) {
		usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "set") && strcmp(cmd, "list") && strcmp(cmd, "rm") && strcmp(cmd, "push"))
		return args_unknown("command", cmd, cmds, "ocsb secrets --help");
	if (global && project) {
		log_err("--global and --project exclude each other");
		return 2;
	}
	if (!strcmp(cmd, "set") && nargs > 1) {
		/* The one mistake to stop loudly: a value typed on the command line. */
		log_err("set takes only a NAME: values are never read from the command "
			"line (ps and shell history would show them); type it at the prompt or "
			"pipe it on stdin");
		return 2;
	}
	if ((!strcmp(cmd, "set") || !strcmp(cmd, "rm")) && nargs == 0) {
		log_err("%s needs the NAME of the secret (ocsb secrets %s NAME, e.g. "
			"ANTHROPIC_API_KEY); see ocsb secrets --help",
			cmd, cmd);
		return 2;
	}
	if (!strcmp(cmd, "rm") && nargs > 1) {
		log_err("rm takes one NAME at a time; see ocsb secrets --help");
		return 2;
	}
	if ((!strcmp(cmd, "list") || !strcmp(cmd, "push")) && nargs != 0) {
		log_err("%s takes no NAME ('%s'); see ocsb secrets --help", cmd, name);
		return 2;
	}
	if ((inject || header) && strcmp(cmd, "set") != 0) {
		log_err("--inject and --header go with 'secrets set'");
		return 2;
	}
	if (header && !inject) {
		log_err("--header needs --inject https://HOST[/PREFIX]");
		return 2;
	}
	if (inject) {
		struct inj_route r;
		int n = header ? snprintf(route, sizeof(route), "%s %s", inject, header)
			       : snprintf(route, sizeof(route), "%s", inject);

		if (header && inj_provider_find(inject)) {
			log_err("--header goes with --inject https://...: provider %s has its own",
				inject);
			return 2;
		}
		if (n < 0 || (size_t)n >= sizeof(route) || secrets_route_ok(route) < 0 ||
			inj_route_spec(&r, route, err, sizeof(err)) < 0) {
			log_err("--inject: %s", n < 0 || (size_t)n >= sizeof(route) ? "too long" : err);
			return 2;
		}
	}
	if (sodium_init() < 0) {
		log_err("libsodium failed to initialize");
		return 1;
	}
	paths_default(&x.paths);
	if (user_lookup_uid(getuid(), &x.me) < 0 ||
		path_join(x.confdir, sizeof(x.confdir), x.me.home, ".config/ocsb") < 0) {
		log_err("cannot find the home directory of uid %u", (unsigned)getuid());
		return 1;
	}
	config_defaults(&x.cfg);
	if (path_join(conf, sizeof(conf), x.paths.etc, "ocsb/ocsb.conf") == 0 &&
		config_load(&x.cfg, conf, err, sizeof(err)) == 0)
		x.have_cfg = 1;
	/* Opting in once (--file) is remembered by the box itself. */
	if (box_exists(&x))
		x.use_file = 1;
	if (!strcmp(cmd, "set") || !strcmp(cmd, "rm")) {
		if (resolve_scope(&x, global, project, scope, sizeof(scope)) < 0)
			goto out;
		rc = !strcmp(cmd, "set") ? do_set(&x, scope, name, route) : do_rm(&x, scope, name);
	} else if (!strcmp(cmd, "list")) {
		rc = do_list(&x);
	} else if (!strcmp(cmd, "push")) {
		rc = do_push(&x);
	}
out:
	secrets_free(x.pass);
	config_free(&x.cfg);
	return rc;
}

void secrets_doctor_llm(struct doctor *dr)
{
	struct secret_set *s;
	char names[512], err[512];
	size_t n;

	/* The owner's keyring, names only; without a session bus there is nothing to ask. */
	if (geteuid() == 0 || !getenv("DBUS_SESSION_BUS_ADDRESS") || sodium_init() < 0)
		return;
	/* Locked memory (sodium_malloc) needs sodium_init: doctor has not called it. */
	s = secrets_set_new();
	if (!s || keyring_load(s, 0, err, sizeof(err)) < 0) {
		secrets_set_free(s);
		return;
	}
	n = secrets_exported_llm(s, names, sizeof(names));
	if (n)
		doctor_add(dr, DR_WARN, "secrets-exported",
			"ocsb secrets set NAME --inject PROVIDER; ocsb secrets push",
			"LLM key%s exported to the agent (it can read and send %s anywhere its "
			"egress allows): %s",
			n == 1 ? "" : "s", n == 1 ? "it" : "them", names);
	else
		doctor_add(dr, DR_OK, "secrets-exported", NULL,
			"no LLM key in the keyring is exported to the agent");
	secrets_set_free(s);
}
