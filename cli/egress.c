/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "egress_log.h"
#include "fileops.h"
#include "args.h"
#include "log.h"
#include "spawn.h"

#define CURL "/usr/bin/curl"

static int egress_render(struct cli *c)
{
	struct buf out = {0};

	if (proxy_render(&c->proxy, &c->egress, &out) < 0)
		return 1;
	fwrite(out.data, 1, out.len, stdout);
	buf_free(&out);
	return 0;
}

/*
 * One check as the agent: did the request reach its destination? Denials by the proxy
 * carry X-Squid-Error (plain HTTP) or a 403 answer to CONNECT; the netlock refuses the
 * connection itself (curl exit 7).
 */
static int run_check(struct cli *c, const struct user_info *agent, const struct egress_rule *r,
	char *detail, size_t n)
{
	char hp[80], hsp[80], home[4200];
	char *env[] = {hp, hsp, home, "PATH=/usr/bin:/bin", "LC_ALL=C", NULL};
	const char *argv[64];
	struct spawn_opts o = {.drop = 1,
		.uid = agent->uid,
		.gid = agent->gid,
		.user = agent->name,
		.cwd = "/",
		.capture = 1,
		.timeout_ms = 20000};
	struct spawn_result res;
	size_t a = 0;
	int reached;

	snprintf(hp, sizeof(hp), "http_proxy=http://127.0.0.1:%u", c->cfg.proxy_port);
	snprintf(hsp, sizeof(hsp), "https_proxy=http://127.0.0.1:%u", c->cfg.proxy_port);
	/* No HOME: the agent's ~/.curlrc must not steer its own checks. */
	snprintf(home, sizeof(home), "HOME=/nonexistent");
	o.envp = env;
	argv[a++] = CURL;
	argv[a++] = "-q"; /* first: read no curlrc at all */
	argv[a++] = "-sS";
	argv[a++] = "-o";
	argv[a++] = "/dev/null";
	argv[a++] = "-D";
	argv[a++] = "-";
	argv[a++] = "--max-time";
	argv[a++] = "10";
	argv[a++] = "-w";
	argv[a++] = "\nocsb-code=%{http_code} ocsb-connect=%{http_connect}\n";
	for (size_t i = 0; i < r->curl_args.n && a < 60; i++)
		argv[a++] = r->curl_args.v[i];
	argv[a++] = "--";
	argv[a++] = r->value;
	argv[a] = NULL;
	if (spawn_run(argv, &o, &res) < 0) {
		snprintf(detail, n, "cannot run %s (apt-get install curl)", CURL);
		return -1;
	}
	if (res.status > 128 || res.timed_out) {
		/* Killed (the agent owns the process too): no verdict either way. */
		snprintf(detail, n, "inconclusive: curl %s",
			res.timed_out ? "timed out" : "was killed");
		spawn_result_free(&res);
		return 2;
	}
	if (res.status == 0 && res.output && !strstr(res.output, "X-Squid-Error:")) {
		const char *code = strstr(res.output, "ocsb-code=");
		snprintf(detail, n, "reached (HTTP %.3s)", code ? code + 10 : "?");
		reached = 1;
	} else {
		const char *sq = res.output ? strstr(res.output, "X-Squid-Error: ") : NULL;
		const char *cn = res.output ? strstr(res.output, "ocsb-connect=") : NULL;

		if (sq)
			snprintf(detail, n, "refused by the proxy (%.*s)",
				(int)strcspn(sq + 15, "\r\n"), sq + 15);
		else if (cn && strncmp(cn + 13, "000", 3) != 0)
			snprintf(
				detail, n, "refused by the proxy (CONNECT answered %.3s)", cn + 13);
		else
			snprintf(detail, n, "not reached (curl exit %d)", res.status);
		reached = 0;
	}
	spawn_result_free(&res);
	return reached;
}

static int egress_verify(struct cli *c)
{
	struct user_info agent;
	unsigned pass = 0, failed = 0;

	if (geteuid() != 0) {
		log_err("the checks run as the agent %s: run 'sudo ocsb egress verify'",
			c->cfg.agent);
		return 2;
	}
	if (user_lookup(c->cfg.agent, &agent) < 0) {
		log_err("no account %s: run 'sudo ocsb-provision' first", c->cfg.agent);
		return 2;
	}
	printf("%-6s %-13s %-40s %s\n", "RESULT", "EXPECT", "URL", "WHAT HAPPENED");
	for (size_t i = 0; i < c->egress.n; i++) {
		const struct egress_rule *r = &c->egress.rules[i];
		char detail[256];
		int want, got;

		if (r->kind != EGRESS_EXPECT_PASS && r->kind != EGRESS_EXPECT_BLOCK)
			continue;
		want = r->kind == EGRESS_EXPECT_PASS;
		got = run_check(c, &agent, r, detail, sizeof(detail));
		if (got < 0) {
			log_err("%s", detail);
			return 1;
		}
		/* An inconclusive check counts as failed: nothing was proven. */
		if (got == want)
			pass++;
		else
			failed++;
		printf("%-6s %-13s %-40s %s  (%s:%u)\n", got == want ? "pass" : "FAIL",
			want ? "expect-pass" : "expect-block", r->value, detail, r->file, r->line);
	}
	printf("egress verify: %u passed, %u failed\n", pass, failed);
	return failed ? 1 : 0;
}

static void print_lines(const struct egress *e, const char *data, size_t len)
{
	const char *p = data, *end = data + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		char line[4096], out[4600], vis[4 * sizeof(out)];
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (l < sizeof(line)) {
			memcpy(line, p, l);
			line[l] = '\0';
			/* Host names and methods are what the agent asked for: no raw controls. */
			if (egress_log_line(e, line, out, sizeof(out)) == 0) {
				log_vis(out, strlen(out), vis, sizeof(vis));
				puts(vis);
			}
		}
		p += l + 1;
	}
	fflush(stdout);
}

static int egress_logs(struct cli *c, int follow)
{
	char *data = NULL;
	size_t len = 0;
	off_t pos;
	int fd, in = -1;

	fd = open(c->proxy.access_log, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES)
			log_err("%s: permission denied: run 'sudo ocsb egress logs'",
				c->proxy.access_log);
		else
			log_err("%s: %s (has the proxy run yet? sudo ocsb-provision starts it)",
				c->proxy.access_log, strerror(errno));
		return 1;
	}
	if (fo_read(c->proxy.access_log, 256 * 1024 * 1024, &data, &len) == 0) {
		print_lines(&c->egress, data, len);
		free(data);
	}
	if (!follow) {
		close(fd);
		return 0;
	}
	pos = (off_t)len;
	/* Wait for writes instead of polling the file on a timer. */
	in = inotify_init1(IN_CLOEXEC);
	if (in < 0 || inotify_add_watch(in, c->proxy.access_log, IN_MODIFY) < 0) {
		log_err("inotify: %s", strerror(errno));
		close(fd);
		return 1;
	}
	for (;;) {
		char ev[4096], chunk[65536];
		ssize_t n;

		if (read(in, ev, sizeof(ev)) < 0 && errno != EINTR)
			break;
		while ((n = pread(fd, chunk, sizeof(chunk), pos)) > 0) {
			/* Print whole lines only; keep a partial one for the next round. */
			const char *last = NULL;
			for (ssize_t i = n - 1; i >= 0; i--)
				if (chunk[i] == '\n') {
					last = chunk + i;
					break;
				}
			if (!last)
				break;
			print_lines(&c->egress, chunk, (size_t)(last - chunk + 1));
			pos += last - chunk + 1;
		}
	}
	close(in);
	close(fd);
	return 0;
}

int egress_args(int argc, char **argv)
{
	static const char *const subs[] = {
		"render", "verify", "logs", "denied", "allow", "learn", "apply", "reload", NULL};
	static const char *const logs_opts[] = {"-f", NULL};
	size_t k;

	if (argc < 1) {
		log_err("say render, verify, logs, denied, allow, learn, apply or reload; see ocsb "
			"--help");
		return 2;
	}
	for (k = 0; subs[k] && strcmp(argv[0], subs[k]); k++)
		;
	if (!subs[k])
		return args_unknown("subcommand", argv[0], subs, "ocsb --help");
	if (k >= 3)
		return egress_learn_args(argc, argv);
	if (!strcmp(argv[0], "logs") && argc == 2 && strcmp(argv[1], "-f"))
		return args_unknown("option", argv[1], logs_opts, "ocsb --help");
	if (argc > (strcmp(argv[0], "logs") ? 1 : 2)) {
		log_err("%s: unexpected argument '%s'; see ocsb --help", argv[0], argv[argc - 1]);
		return 2;
	}
	return 0;
}

int cmd_egress(struct cli *c, int argc, char **argv)
{
	int r = egress_args(argc, argv);

	if (r)
		return r;
	if (!strcmp(argv[0], "render"))
		return egress_render(c);
	if (!strcmp(argv[0], "verify"))
		return egress_verify(c);
	if (!strcmp(argv[0], "logs"))
		return egress_logs(c, argc == 2);
	return egress_learn_cmd(c, argc, argv);
}
