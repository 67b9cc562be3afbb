/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the rules a first provisioning writes (provision/efirst.c): the
 * input's first line is a git remote URL as `git config` would print it (the owner's text),
 * the rest a reason. Besides the sanitizers' findings, abort() when:
 *   - efirst_remote_host accepts a URL and gives a host that is empty, holds a byte other
 *     than [a-z0-9.-], has no dot, starts with '.' or '-', ends with '.', or is not in
 *     the URL (case aside);
 *   - the file made from the template with that host and reason does not parse, is not
 *     `policy allowlist`, does not allow exactly that host, or allows anything else;
 *   - a reason's comment holds a byte that is not printable ASCII.
 * Build and run: `make fuzz FUZZ_ONLY=efirst` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../provision/efirst.h"
#include "egress.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_quiet(argc, argv);
	return 0;
}

static void check_host(const char *url, const char *h)
{
	size_t n = strlen(h);

	CHECK(n > 0 && strchr(h, '.'));
	CHECK(h[0] != '.' && h[0] != '-' && h[n - 1] != '.');
	CHECK(strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789.-") == n);
	CHECK(strcasestr(url, h) != NULL);
}

static void check_file(const char *host, const struct buf *text)
{
	struct egress e = {0};
	char err[512];
	size_t allows = 0;

	CHECK(egress_parse_buf(&e, text->data, text->len, "egress.conf", err, sizeof(err)) == 0);
	CHECK(e.policy == EGRESS_ALLOWLIST);
	for (size_t i = 0; i < e.n; i++) {
		CHECK(e.rules[i].kind == EGRESS_ALLOW);
		CHECK(!strcmp(e.rules[i].value, host));
		allows++;
	}
	CHECK(allows == 1);
	egress_free(&e);
	for (const char *c = strchr(text->data, '#'); c && *c; c++)
		CHECK(*c == '\n' || (*c >= 0x20 && *c <= 0x7e));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char tmpl[] = "policy allowlist\n" EFIRST_MARK "\n";
	char *in = strndup((const char *)data, size), host[256];
	struct efirst *f;
	struct buf text = {0};
	char *why;

	if (!in)
		return 0;
	why = strchr(in, '\n');
	if (why)
		*why++ = '\0';
	if (efirst_remote_host(in, host, sizeof(host)) < 0) {
		free(in);
		return 0;
	}
	check_host(in, host);
	f = calloc(1, sizeof(*f));
	CHECK(f != NULL);
	CHECK(efirst_add(f, EFIRST_GIT, host, why ? why : "") == 0);
	CHECK(efirst_render(tmpl, strlen(tmpl), f, &text) == 0);
	check_file(host, &text);
	buf_free(&text);
	free(f);
	free(in);
	return 0;
}
