/* SPDX-License-Identifier: MIT */
/*
 * `ocsb egress learn|apply|allow|denied` (issue 29): the allowlist without writing rules by
 * hand. Root's files change here (drop-ins under /etc/ocsb/egress.d), each checked alone
 * and then with the whole set before it counts, and put back when the set refuses it; the
 * supervisor is asked to reload (RELOAD, root's) and we wait until squid has the rules.
 * The proxy's log is the agent's text: root reads its bytes, a child running as nobody
 * parses and counts them, and root checks what comes back before writing any of it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ctl.h"
#include "egress_log.h"
#include "fileops.h"
#include "log.h"
#include "spawn.h"

#define LEARN_FILE "ocsb-learn.conf"
#define ALLOW_FILE "50-allowed.conf"
#define LEARN_DEFAULT_MIN 60
#define LEARN_MAX_MIN 1440
#define LOG_MAX (256u * 1024 * 1024)
#define RELOAD_WAIT_MS 20000

static int need_root(const char *what)
{
	if (geteuid() == 0)
		return 0;
	log_err("%s is root's (it changes /etc/ocsb or reloads the supervisor): run 'sudo ocsb "
		"egress %s'",
		what, what);
	return -1;
}

static int dropin_path(const struct cli *c, const char *name, char *out, size_t n)
{
	char dir[4096];

	if (path_join(dir, sizeof(dir), c->paths.etc, "ocsb/egress.d") < 0 ||
		path_join(out, n, dir, name) < 0) {
		log_err("%s: path too long", c->paths.etc);
		return -1;
	}
	return 0;
}

/*
 * One change at a time: two `egress allow` at once would each write the file the other
 * read. An exclusive flock on /etc/ocsb (kept until exit). 0, or -1 said.
 */
static int lock_etc(const struct cli *c)
{
	char dir[4096];
	int fd;

	if (path_join(dir, sizeof(dir), c->paths.etc, "ocsb") < 0)
		return -1;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		log_err("%s: %s", dir, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return 0;
}

/* ---- the supervisor's reload, waited on ---- */

static int status_uint(const struct ctl_response *r, const char *key, unsigned *out)
{
	const char *v = ctl_response_get(r, key);

	if (!v)
		return -1;
	*out = (unsigned)strtoul(v, NULL, 10);
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/*
 * squid closes its port while it reconfigures: wait (at most 5 s) until it accepts again,
 * so a request right after "in force" meets the new rules, not a refused connection.
 */
static void proxy_answers(const struct cli *c)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET, .sin_port = htons((uint16_t)c->cfg.proxy_port)};

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sleep_ms(200);
	for (int i = 0; i < 50; i++) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

		if (fd < 0)
			return;
		ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return;
		sleep_ms(100);
	}
}

/*
 * RELOAD, then STATUS until the reload is done and squid has its rules. 0 in force (or no
 * supervisor: said), -1 when the supervisor refused the files or squid the rules (said).
 */
static int reload_wait(const struct cli *c)
{
	struct ctl_request rq = {.verb = CTL_RELOAD};
	struct ctl_response resp;
	unsigned reloads0, gen0;
	char err[1024];
	int r;

	r = ctl_call(c->paths.ctl_sock, &rq, &resp, 15000, err, sizeof(err));
	if (r == -ENOENT || r == -ECONNREFUSED) {
		printf("ocsb-agentd is not running: it reads the rules when it starts (a proxy "
		       "that ocsb-provision started takes them with sudo ocsb-provision)\n");
		return 0;
	}
	if (r < 0) {
		log_err("%s", err);
		return -1;
	}
	if (!resp.ok) {
		log_err("ocsb-agentd: %s", resp.error);
		ctl_response_free(&resp);
		return -1;
	}
	r = status_uint(&resp, "reloads", &reloads0) |
		status_uint(&resp, "egress-generation", &gen0);
	ctl_response_free(&resp);
	if (r < 0) {
		log_err("ocsb-agentd did not say which reload it made (an older version?)");
		return -1;
	}
	for (long waited = 0; waited < RELOAD_WAIT_MS; waited += 100) {
		unsigned reloads = 0, gen = 0, pgen = 0, failed = 0;
		const char *why;

		rq = (struct ctl_request){.verb = CTL_STATUS};
		if (ctl_call(c->paths.ctl_sock, &rq, &resp, 5000, err, sizeof(err)) < 0) {
			sleep_ms(100);
			continue;
		}
		if (!resp.ok) {
			ctl_response_free(&resp);
			sleep_ms(100);
			continue;
		}
		r = status_uint(&resp, "reloads", &reloads) |
			status_uint(&resp, "egress-generation", &gen) |
			status_uint(&resp, "proxy-generation", &pgen);
		if (r == 0 && reloads > reloads0 &&
			(why = ctl_response_get(&resp, "reload-error"))) {
			log_err("ocsb-agentd refused the new rules and keeps the ones it had: %s",
				why);
			ctl_response_free(&resp);
			return -1;
		}
		if ((why = ctl_response_get(&resp, "proxy-refused")))
			failed = (unsigned)strtoul(why, NULL, 10);
		/* Ours, not learn mode's end: the reload counted as well as the generation. */
		if (r == 0 && reloads > reloads0 && gen > gen0 && failed >= gen) {
			log_err("the proxy keeps its old rules: %s", strchr(why, ':') + 2);
			ctl_response_free(&resp);
			return -1;
		}
		ctl_response_free(&resp);
		if (r == 0 && reloads > reloads0 && gen > gen0 && pgen >= gen) {
			proxy_answers(c);
			printf("in force: ocsb-agentd reloaded and the proxy has the rules\n");
			return 0;
		}
		sleep_ms(100);
	}
	log_err("ocsb-agentd has not applied the rules after %d s: see 'ocsb status' and its log",
		RELOAD_WAIT_MS / 1000);
	return -1;
}

/* ---- root's drop-ins: checked alone, written, checked with the set, put back on refusal */

static int check_alone(const char *text, size_t len, const char *name)
{
	struct egress e = {0};
	char err[1024];
	int r = egress_parse_buf(&e, text, len, name, err, sizeof(err));

	if (r < 0)
		log_err("%s", err);
	egress_free(&e);
	return r;
}

static int check_proposal(const char *text, size_t len, const char *name)
{
	char err[1024];

	if (egress_proposal_check(text, len, name, err, sizeof(err)) == 0)
		return 0;
	log_err("%s (no proposal written)", err);
	return -1;
}

/* path holds text now (NULL: removed); old/old_len what to put back (old NULL: none). */
static int install(const struct cli *c, const char *path, const char *text, size_t len,
	const char *old, size_t old_len)
{
	struct egress e;
	char err[1024];
	int r;

	if (text) {
		/* The drop-in directory is root's, 0755, made on first use. */
		char dir[4096];
		int dfd;

		snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(path, '/') - path), path);
		dfd = fo_mkdir_p(AT_FDCWD, dir, 0755, 0, 0);
		if (dfd < 0) {
			log_err("%s: %s", dir, strerror(-dfd));
			return -1;
		}
		close(dfd);
	}
	r = text ? fo_write(path, text, len, 0644, 0, 0) : (unlink(path) < 0 ? -errno : 0);
	if (r < 0) {
		log_err("%s: %s", path, strerror(-r));
		return -1;
	}
	r = egress_load(&e, &c->paths, c->have_owner ? c->owner.home : NULL,
		c->have_owner ? c->owner.uid : (uid_t)-1, err, sizeof(err));
	egress_free(&e);
	if (r == 0)
		return 0;
	log_err("%s", err);
	if (old ? fo_write(path, old, old_len, 0644, 0, 0) : unlink(path))
		log_err("%s: could not be put back as it was: fix it by hand", path);
	else
		log_err("%s: put back as it was; nothing changed", path);
	return -1;
}

/* A change of root's: checked alone, installed (put back if refused), said, reloaded. */
static int put_in_force(const struct cli *c, const char *path, const char *text, size_t len,
	const char *old, size_t old_len, const char *said)
{
	if (check_alone(text, len, path) < 0 || install(c, path, text, len, old, old_len) < 0)
		return -1;
	printf("%s %s\n", said, path);
	return reload_wait(c);
}

/* ---- the log, read by root, counted by nobody ---- */

struct tally_job {
	const char *text;
	size_t len;
	int learn; /* 1: the proposal; 0: the refused table */
	time_t from, until;
	const struct egress *e;
	char machine[256];
};

static int tally_child(void *arg, int outfd)
{
	const struct tally_job *j = arg;
	struct egress_tally t = {0};
	struct egress_psl psl;
	struct buf out = {0};
	int r;

	if (egress_tally_text(&t, j->text, j->len, j->learn, (double)j->from, (double)j->until) < 0)
		return 3;
	if (j->learn) {
		if (egress_psl_load(&psl, EGRESS_PSL_FILE) < 0)
			memset(&psl, 0, sizeof(psl));
		r = egress_proposal_render(&t, &psl, j->from, j->until, j->machine, &out);
		egress_psl_free(&psl);
		if (r < 0)
			return 3;
		if (r == 0)
			buf_free(&out); /* nothing learned: no proposal */
	} else {
		egress_denied_render(&t, j->e, &out);
	}
	egress_tally_free(&t);
	r = out.len ? fo_write_all(outfd, out.data, out.len) : 0;
	buf_free(&out);
	return r < 0 ? 4 : 0;
}

/* The log's text, for root only unless it says otherwise; *ret freed by the caller. */
static int read_log(const struct cli *c, const char *verb, char **ret, size_t *len)
{
	int r = fo_read(c->proxy.access_log, LOG_MAX, ret, len);

	if (r == -EACCES)
		log_err("%s: permission denied: run 'sudo ocsb egress %s'", c->proxy.access_log,
			verb);
	else if (r == -ENOENT)
		log_err("%s: no log yet (has the proxy run? ocsb status shows it)",
			c->proxy.access_log);
	else if (r < 0)
		log_err("%s: %s", c->proxy.access_log, strerror(-r));
	return r;
}

static int run_tally(struct tally_job *j, struct spawn_result *res)
{
	struct user_info nobody;
	struct spawn_opts o = {.cwd = "/", .timeout_ms = 120000, .max_output = 64u << 20};

	if (gethostname(j->machine, sizeof(j->machine) - 1) < 0)
		snprintf(j->machine, sizeof(j->machine), "this machine");
	if (geteuid() == 0) {
		if (user_lookup("nobody", &nobody) < 0) {
			log_err("no account nobody to read the proxy's log as");
			return -1;
		}
		o.drop = 1;
		o.uid = nobody.uid;
		o.gid = nobody.gid;
	}
	if (spawn_fn(tally_child, j, &o, res) < 0 || res->status != 0) {
		log_err("reading the proxy's log failed (status %d%s)", res->status,
			res->timed_out ? ", timed out" : "");
		spawn_result_free(res);
		return -1;
	}
	return 0;
}

/* ---- learn ---- */

static int learn_start(struct cli *c, unsigned minutes)
{
	char path[4096], from[32], until[32], text[1024];
	time_t now = time(NULL);
	struct stat st;
	int n;

	if (need_root("learn start") < 0 || dropin_path(c, LEARN_FILE, path, sizeof(path)) < 0)
		return 1;
	if (c->egress.off) {
		log_err("egress is off: the agent has no proxy to learn through");
		return 1;
	}
	if (c->egress.policy != EGRESS_ALLOWLIST) {
		log_err("the policy is blocklist: everything not blocked passes already; learn "
			"mode builds an allowlist (set 'policy allowlist' in %s/ocsb/egress.conf "
			"and run sudo ocsb-provision first)",
			c->paths.etc);
		return 1;
	}
	if (c->egress.learn_until) {
		egress_time_utc(c->egress.learn_until, until, sizeof(until));
		log_err("%s: learn mode %s %s: 'sudo ocsb egress learn stop' first (it writes what "
			"that run learned)",
			c->egress.learn_file, c->egress.learning ? "is on until" : "ended at",
			until);
		return 1;
	}
	if (lstat(path, &st) == 0) {
		log_err("%s exists without a learn line: remove it, then start again", path);
		return 1;
	}
	egress_time_utc(now, from, sizeof(from));
	egress_time_utc(now + (time_t)minutes * 60, until, sizeof(until));
	n = snprintf(text, sizeof(text),
		"# Learn mode, written by `sudo ocsb egress learn start` on %s:\n"
		"# until the second time, what the allowlist refuses passes as the blocklist\n"
		"# would let it, and the proxy logs it as step `learn`. `sudo ocsb egress learn\n"
		"# stop` removes this file and writes what was learned as a proposal.\n"
		"learn %s %s\n",
		from, from, until);
	if (put_in_force(c, path, text, (size_t)n, NULL, 0, "learn mode written to") < 0)
		return 1;
	printf("learn mode on until %s (%u min): the agent may reach what the blocklist would "
	       "allow, and each such request is logged; 'ocsb status' shows the time left, "
	       "'sudo ocsb egress learn stop' writes the proposal\n",
		until, minutes);
	return 0;
}

/* A new name in egress.d for today's proposal: learned-2026-12-06-2140.conf, then -2... */
static int proposal_path(const struct cli *c, time_t t, char *out, size_t n)
{
	char name[64], stamp[32];
	struct tm tm;
	struct stat st;

	gmtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%d-%H%M", &tm);
	for (int i = 1; i < 100; i++) {
		if (i == 1)
			snprintf(name, sizeof(name), "learned-%s.conf", stamp);
		else
			snprintf(name, sizeof(name), "learned-%s-%d.conf", stamp, i);
		if (dropin_path(c, name, out, n) < 0)
			return -1;
		if (lstat(out, &st) < 0 && errno == ENOENT)
			return 0;
	}
	log_err("%s: 99 proposals of this minute already", out);
	return -1;
}

static int learn_stop(struct cli *c)
{
	char path[4096], prop[4096], *log = NULL, *old = NULL;
	size_t loglen = 0, oldlen = 0;
	struct tally_job j = {0};
	struct spawn_result res = {0};
	time_t now = time(NULL);
	int r;

	if (need_root("learn stop") < 0 || dropin_path(c, LEARN_FILE, path, sizeof(path)) < 0)
		return 1;
	if (!c->egress.learn_until) {
		log_err("learn mode is not on (no learn line in the egress rules): 'sudo ocsb "
			"egress learn start' begins it");
		return 1;
	}
	if (strcmp(c->egress.learn_file, path) != 0) {
		log_err("%s sets learn mode, not 'ocsb egress learn start': remove its learn line",
			c->egress.learn_file);
		return 1;
	}
	j.from = c->egress.learn_from;
	j.until = now < c->egress.learn_until ? now : c->egress.learn_until;
	if (j.until <= j.from)
		j.until = j.from + 1;
	/*
	 * Learning ends before the log is read, so nothing learned after goes unseen: the
	 * window is cut to now and kept until the proposal is written (a failure on the way
	 * leaves it for the next `learn stop`).
	 */
	if (fo_read(path, 1 << 20, &old, &oldlen) < 0) {
		log_err("%s: cannot be read", path);
		return 1;
	}
	if (j.until < c->egress.learn_until) {
		char a[32], b[32], text[512];
		int n;

		egress_time_utc(j.from, a, sizeof(a));
		egress_time_utc(j.until, b, sizeof(b));
		n = snprintf(text, sizeof(text),
			"# Learn mode, ended by `sudo ocsb egress learn stop`; the file goes once "
			"its\n# proposal is written.\nlearn %s %s\n",
			a, b);
		if (install(c, path, text, (size_t)n, old, oldlen) < 0 || reload_wait(c) < 0) {
			free(old);
			return 1;
		}
	}
	free(old);
	printf("learn mode off (it ran %ld min)\n", (long)((j.until - j.from + 59) / 60));
	if (read_log(c, "learn stop", &log, &loglen) < 0)
		return 1;
	j.text = log;
	j.len = loglen;
	j.learn = 1;
	r = run_tally(&j, &res);
	free(log);
	if (r < 0)
		return 1;
	if (!res.output_len) {
		spawn_result_free(&res);
		if (install(c, path, NULL, 0, NULL, 0) < 0)
			return 1;
		printf("nothing learned: every request of the run was allowed already or refused "
		       "for another reason; no proposal written\n");
		return reload_wait(c) < 0 ? 1 : 0;
	}
	/*
	 * What came back was made from the agent's text: root checks it is a proposal (its
	 * first statement, so nothing of it is in force) before writing it anywhere.
	 */
	if (proposal_path(c, now, prop, sizeof(prop)) < 0 ||
		check_proposal(res.output, res.output_len, prop) < 0 ||
		install(c, prop, res.output, res.output_len, NULL, 0) < 0) {
		spawn_result_free(&res);
		return 1;
	}
	fwrite(res.output, 1, res.output_len, stdout);
	printf("\nwritten: %s (NOT in force). Review it, then: sudo ocsb egress apply %s\n", prop,
		prop);
	spawn_result_free(&res);
	/* The window goes now; the reload also lets `ocsb status` list the proposal. */
	if (install(c, path, NULL, 0, NULL, 0) < 0)
		return 1;
	return reload_wait(c) < 0 ? 1 : 0;
}

/* ---- apply ---- */

/* What the file's rules change against the rules in force, one line each. */
static unsigned show_difference(const struct egress *now, const struct egress *f)
{
	unsigned changes = 0;

	for (size_t i = 0; i < f->n; i++) {
		const struct egress_rule *r = &f->rules[i];
		struct egress_verdict v;
		int k = r->kind;

		if (k == EGRESS_ALLOW || k == EGRESS_CONNECT || k == EGRESS_BLOCK) {
			char shown[300];

			egress_decide(now, r->value, k == EGRESS_CONNECT ? r->port : 443, &v);
			if (k == EGRESS_CONNECT)
				snprintf(shown, sizeof(shown), "%s:%u", r->value, r->port);
			else
				snprintf(shown, sizeof(shown), "%s", r->value);
			if (v.allow == (k != EGRESS_BLOCK)) {
				printf("  = %s %-40s already %s now (%s%s%s)\n",
					egress_kind_name(k), shown, v.allow ? "allowed" : "refused",
					v.tag, v.rule ? " " : "", v.rule ? v.rule->file : "");
				continue;
			}
			printf("  + %s %-40s %s now (%s)\n", egress_kind_name(k), shown,
				v.allow ? "allowed" : "refused", v.tag);
		} else {
			printf("  + %s %s\n", egress_kind_name(k), r->value);
		}
		changes++;
	}
	return changes;
}

/*
 * The settings the file would change (policy, egress, dns, learn): the rules in force with
 * the file read last on top, against the rules in force. How many lines it printed.
 */
static unsigned show_settings(const struct cli *c, const char *text, size_t len, const char *file)
{
	const struct egress *now = &c->egress;
	struct egress with;
	char err[1024];
	unsigned n = 0;

	if (egress_load(&with, &c->paths, c->have_owner ? c->owner.home : NULL,
		    c->have_owner ? c->owner.uid : (uid_t)-1, err, sizeof(err)) < 0)
		return 0;
	if (egress_parse_buf(&with, text, len, file, err, sizeof(err)) == 0) {
		if (with.policy != now->policy && ++n)
			printf("  ! policy %s (now %s)\n",
				with.policy == EGRESS_ALLOWLIST ? "allowlist" : "blocklist",
				now->policy == EGRESS_ALLOWLIST ? "allowlist" : "blocklist");
		if (with.off != now->off && ++n)
			printf("  ! egress %s (now %s)\n", with.off ? "off" : "on",
				now->off ? "off" : "on");
		if (with.dns_allow != now->dns_allow && ++n)
			printf("  ! dns %s (now %s)\n", with.dns_allow ? "allow" : "deny",
				now->dns_allow ? "allow" : "deny");
		if (with.learn_until != now->learn_until && ++n)
			printf("  ! learn mode %s\n", with.learning ? "on" : "set, not in force");
	}
	egress_free(&with);
	return n;
}

/* The file's text with its `proposal` statement turned into a comment. */
static int unpropose(const char *text, size_t len, struct buf *out)
{
	const char *p = text, *end = text + len;
	char stamp[32];
	int done = 0;

	egress_time_utc(time(NULL), stamp, sizeof(stamp));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);
		size_t w = strspn(p, " \t");

		if (!done && l >= w + 8 && !strncmp(p + w, "proposal", 8) &&
			(w + 8 == l || strchr(" \t\r\n#", p[w + 8]))) {
			if (buf_printf(out, "# applied by `sudo ocsb egress apply` on %s\n",
				    stamp) < 0)
				return -1;
			done = 1;
		} else if (buf_append(out, p, l) < 0) {
			return -1;
		}
		p += l;
	}
	return 0;
}

static int apply(struct cli *c, const char *file, int yes)
{
	char *text = NULL, *old = NULL, dir[4096], target[4096], *slash;
	size_t len = 0, oldlen = 0;
	struct egress f = {0};
	struct buf out = {0};
	char err[1024];
	unsigned changes;
	int r = 1, exists, proposal;

	if (need_root("apply") < 0)
		return 1;
	if ((r = fo_read(file, 1 << 20, &text, &len)) < 0) {
		log_err("%s: %s", file, strerror(-r));
		return 1;
	}
	r = 1;
	/* Checked as it is (a proposal's settings are refused), shown as it will be. */
	if (egress_parse_buf(&f, text, len, file, err, sizeof(err)) < 0) {
		log_err("%s (nothing applied)", err);
		goto out;
	}
	proposal = f.proposals.n > 0;
	egress_free(&f);
	if (unpropose(text, len, &out) < 0 ||
		egress_parse_buf(&f, out.data, out.len, file, err, sizeof(err)) < 0) {
		log_err("%s (nothing applied)", err);
		goto out;
	}
	/* A file of egress.d is made active where it is; any other is copied there. */
	slash = strrchr(file, '/');
	if (dropin_path(c, slash ? slash + 1 : file, target, sizeof(target)) < 0)
		goto out;
	snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(target, '/') - target), target);
	{
		char a[4096], b[4096];

		exists = realpath(file, a) && realpath(dir, b) && !strncmp(a, b, strlen(b)) &&
			a[strlen(b)] == '/' && !strchr(a + strlen(b) + 1, '/');
		if (exists)
			snprintf(target, sizeof(target), "%s", a);
	}
	if (strlen(target) < 6 || strcmp(target + strlen(target) - 5, ".conf") != 0) {
		log_err("%s: the name must end in .conf to be read from %s", file, dir);
		goto out;
	}
	if (!exists && fo_read(target, 1 << 20, &old, &oldlen) == 0) {
		log_err("%s exists: remove it, or rename %s", target, file);
		goto out;
	}
	if (exists && fo_read(target, 1 << 20, &old, &oldlen) < 0)
		old = NULL;
	printf("%s%s, against the rules in force:\n", file, proposal ? " (a proposal)" : "");
	changes = show_difference(&c->egress, &f) + show_settings(c, out.data, out.len, file);
	printf("%u rule%s change%s what the agent may reach\n", changes, changes == 1 ? "" : "s",
		changes == 1 ? "s" : "");
	if (!yes && !isatty(0)) {
		log_err("no terminal to ask on: add --yes to apply %s as %s (nothing applied)",
			file, target);
		goto out;
	}
	if (!yes) {
		char ans[16] = "";

		printf("apply it as %s? [y/N] ", target);
		fflush(stdout);
		if (!fgets(ans, sizeof(ans), stdin) || (ans[0] != 'y' && ans[0] != 'Y')) {
			printf("nothing applied\n");
			r = 0;
			goto out;
		}
	}
	r = put_in_force(c, target, out.data, out.len, old, oldlen, "applied:") < 0 ? 1 : 0;
out:
	egress_free(&f);
	buf_free(&out);
	free(text);
	free(old);
	return r;
}

/* ---- allow ---- */

/* HOST, or HOST:PORT ([v6]:PORT): the statement for it ("allow h", "connect h:22"). */
static int allow_line(const char *arg, char *out, size_t n)
{
	const char *colon = strrchr(arg, ':');
	int v6 = arg[0] == '[' || (colon && memchr(arg, ':', (size_t)(colon - arg)));
	unsigned long port = 0;

	if (arg[0] == '[' || (!v6 && colon)) {
		char *e;

		port = colon ? strtoul(colon + 1, &e, 10) : 0;
		if (!colon || !colon[1] || *e || port < 1 || port > 65535) {
			log_err("'%s': give HOST or HOST:PORT ([IPv6]:PORT)", arg);
			return -1;
		}
	}
	if (port == 80 || port == 443) {
		size_t hl = (size_t)(colon - arg);

		if (arg[0] == '[')
			snprintf(out, n, "allow %.*s", (int)(hl - 2), arg + 1);
		else
			snprintf(out, n, "allow %.*s", (int)hl, arg);
	} else {
		snprintf(out, n, "%s %s", port ? "connect" : "allow", arg);
	}
	return 0;
}

static int allow(struct cli *c, int argc, char **argv)
{
	char path[4096], stamp[32], *old = NULL;
	size_t oldlen = 0;
	struct buf text = {0};
	unsigned added = 0;
	int r = 1;

	if (need_root("allow") < 0 || dropin_path(c, ALLOW_FILE, path, sizeof(path)) < 0)
		return 1;
	if (fo_read(path, 1 << 20, &old, &oldlen) == 0)
		buf_append(&text, old, oldlen);
	else
		buf_puts(&text,
			"# Hosts added by `sudo ocsb egress allow HOST`, one line each with "
			"its date.\n");
	egress_time_utc(time(NULL), stamp, sizeof(stamp));
	for (int i = 0; i < argc; i++) {
		struct egress one = {0};
		struct egress_verdict v;
		char line[400], err[1024];
		const struct egress_rule *rule;

		if (allow_line(argv[i], line, sizeof(line)) < 0)
			goto out;
		if (egress_parse_buf(&one, line, strlen(line), argv[i], err, sizeof(err)) < 0) {
			log_err("%s (nothing added)",
				strchr(err, ' ') ? strchr(err, ' ') + 1 : err);
			egress_free(&one);
			goto out;
		}
		rule = &one.rules[0];
		egress_decide(&c->egress, rule->value,
			rule->kind == EGRESS_CONNECT ? rule->port : 443, &v);
		if (!strcmp(v.tag, "loopback-link-local")) {
			log_err("%s: loopback, link-local and the metadata service are never "
				"allowed; no rule lifts that (nothing added)",
				argv[i]);
			egress_free(&one);
			goto out;
		}
		if (v.allow && strcmp(v.tag, "learn") != 0) {
			printf("%s: already allowed (%s%s%s:%u)\n", argv[i], v.tag,
				v.rule ? " " : "", v.rule ? v.rule->file : "",
				v.rule ? v.rule->line : 0);
			egress_free(&one);
			continue;
		}
		egress_free(&one);
		if (buf_printf(&text, "%s  # sudo ocsb egress allow, %s\n", line, stamp) < 0)
			goto out;
		printf("%s: %s\n", argv[i], line);
		added++;
	}
	if (!added) {
		r = 0;
		goto out;
	}
	r = put_in_force(c, path, text.data, text.len, old, oldlen, "added to") < 0 ? 1 : 0;
out:
	buf_free(&text);
	free(old);
	return r;
}

/* ---- denied ---- */

/* --since: 30m, 2h, 7d, or a UTC day or time (2026-12-06, 2026-12-06T21:00:00Z). */
int egress_since(const char *s, time_t now, time_t *ret)
{
	char *e;
	unsigned long n = strtoul(s, &e, 10);
	struct tm tm = {0};
	const char *rest;

	if (e != s && s[0] >= '0' && s[0] <= '9' && e[0] && !e[1] && n > 0 && n <= 100000) {
		unsigned long unit = e[0] == 'm' ? 60
			: e[0] == 'h'		 ? 3600
			: e[0] == 'd'		 ? 86400
						 : 0;

		if (unit) {
			*ret = now - (time_t)(n * unit);
			return 0;
		}
	}
	rest = strptime(s, "%Y-%m-%d", &tm);
	if (rest && *rest == 'T')
		rest = strptime(rest, "T%H:%M:%SZ", &tm);
	if (!rest || *rest)
		return -1;
	*ret = timegm(&tm);
	return 0;
}

static int denied(struct cli *c, const char *since)
{
	struct tally_job j = {0};
	struct spawn_result res = {0};
	char *log = NULL, from[32];
	size_t loglen = 0;
	time_t now = time(NULL);

	if (!since)
		j.from = now - 86400;
	else if (egress_since(since, now, &j.from) < 0) {
		log_err("--since '%s': give 30m, 2h, 7d, or a UTC day or time (2026-12-06, "
			"2026-12-06T21:00:00Z)",
			since);
		return 2;
	}
	if (read_log(c, "denied", &log, &loglen) < 0)
		return 1;
	j.text = log;
	j.len = loglen;
	j.e = &c->egress;
	if (run_tally(&j, &res) < 0) {
		free(log);
		return 1;
	}
	free(log);
	egress_time_utc(j.from, from, sizeof(from));
	printf("refused since %s%s\n", from,
		since ? "" : " (the last 24 hours; --since to change)");
	/* The child read the agent's text: what it says is shown, never acted on. */
	for (const char *p = res.output ? res.output : ""; *p;) {
		size_t l = strcspn(p, "\n");
		char vis[4 * 4096];

		log_vis(p, l < 4096 ? l : 4096, vis, sizeof(vis));
		puts(vis);
		p += l + (p[l] ? 1 : 0);
	}
	spawn_result_free(&res);
	return 0;
}

int egress_learn_cmd(struct cli *c, int argc, char **argv)
{
	if (!strcmp(argv[0], "reload"))
		return need_root("reload") < 0 || reload_wait(c) < 0 ? 1 : 0;
	/* The rules read before the lock could be another change's past: read them again. */
	if (strcmp(argv[0], "denied") != 0 && geteuid() == 0) {
		char err[1024];

		if (lock_etc(c) < 0)
			return 1;
		egress_free(&c->egress);
		if (egress_load(&c->egress, &c->paths, c->have_owner ? c->owner.home : NULL,
			    c->have_owner ? c->owner.uid : (uid_t)-1, err, sizeof(err)) < 0) {
			log_err("%s", err);
			return 1;
		}
	}
	if (!strcmp(argv[0], "learn")) {
		unsigned long min = LEARN_DEFAULT_MIN;

		if (argc == 4)
			min = strtoul(argv[3], NULL, 10);
		return !strcmp(argv[1], "start") ? learn_start(c, (unsigned)min) : learn_stop(c);
	}
	if (!strcmp(argv[0], "apply"))
		return apply(c, argv[1], argc == 3);
	if (!strcmp(argv[0], "allow"))
		return allow(c, argc - 1, argv + 1);
	return denied(c, argc == 3 ? argv[2] : NULL);
}

/* The shapes egress_learn_cmd takes: 0, or 2 with one line. */
int egress_learn_args(int argc, char **argv)
{
	const char *sub = argv[0];

	if (!strcmp(sub, "learn")) {
		char *e = NULL;
		unsigned long min = 0;

		if (argc < 2 || (strcmp(argv[1], "start") && strcmp(argv[1], "stop"))) {
			log_err("learn: say start [--minutes N] or stop; see ocsb --help");
			return 2;
		}
		if (!strcmp(argv[1], "start") && argc >= 3) {
			if (argc != 4 || strcmp(argv[2], "--minutes")) {
				log_err("learn start: the one option is --minutes N; see ocsb "
					"--help");
				return 2;
			}
			min = strtoul(argv[3], &e, 10);
			if (*e || !argv[3][0] || min < 1 || min > LEARN_MAX_MIN) {
				log_err("--minutes: a number from 1 to %d", LEARN_MAX_MIN);
				return 2;
			}
		} else if (argc > 2) {
			log_err("learn %s: unexpected argument '%s'", argv[1], argv[2]);
			return 2;
		}
		return 0;
	}
	if (!strcmp(sub, "reload")) {
		if (argc > 1) {
			log_err("reload: unexpected argument '%s'", argv[1]);
			return 2;
		}
		return 0;
	}
	if (!strcmp(sub, "apply")) {
		if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "--yes"))) {
			log_err("apply: give FILE [--yes]; see ocsb --help");
			return 2;
		}
		return 0;
	}
	if (!strcmp(sub, "allow")) {
		if (argc < 2) {
			log_err("allow: give HOST or HOST:PORT (one or more)");
			return 2;
		}
		return 0;
	}
	if (argc == 1 || (argc == 3 && !strcmp(argv[1], "--since")))
		return 0;
	log_err("denied: the one option is --since WHEN (30m, 2h, 7d, 2026-12-06)");
	return 2;
}
