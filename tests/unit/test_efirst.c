/* SPDX-License-Identifier: MIT */
/*
 * The egress rules of a first provisioning (provision/efirst.c, issue 29): ecosystems by
 * file name, git hosts from remote URLs, the built-in providers, and the file
 * the template becomes. The squid side of the same rules: test_egress_squid.
 */
#define _GNU_SOURCE
#include "unit.h"

#include <sodium.h>

#include "../../inject/inject.h"
#include "../../provision/efirst.h"

static int has_line(const struct efirst *f, int section, const char *hosts, const char *why)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->l[i].section == section && !strcmp(f->l[i].hosts, hosts) &&
			(!why || !strcmp(f->l[i].why, why)))
			return 1;
	return 0;
}

static void files_name_ecosystems(void **state)
{
	static const struct {
		const char *file, *eco, *host;
	} want[] = {
		{"package.json", "npm", "registry.npmjs.org"},
		{"package-lock.json", "npm", "registry.npmjs.org"},
		{"yarn.lock", "npm", "registry.npmjs.org"},
		{"requirements.txt", "PyPI", "pypi.org"},
		{"pyproject.toml", "PyPI", "files.pythonhosted.org"},
		{"Cargo.toml", "crates.io", "static.crates.io"},
		{"Cargo.lock", "crates.io", "index.crates.io"},
		{"go.mod", "Go", "proxy.golang.org"},
		{"debian/control", "Debian", "deb.debian.org"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		int k = efirst_file_find(want[i].file);

		if (k < 0)
			fail_msg("%s: not a known file", want[i].file);
		assert_string_equal(efirst_file_eco((size_t)k), want[i].eco);
		assert_non_null(strstr(efirst_file_hosts((size_t)k), want[i].host));
	}
	/* Names are exact: case, a prefix or a path elsewhere is not the file. */
	assert_int_equal(efirst_file_find("Makefile"), -1);
	assert_int_equal(efirst_file_find("PACKAGE.JSON"), -1);
	assert_int_equal(efirst_file_find("package.json.bak"), -1);
	assert_int_equal(efirst_file_find("control"), -1);
	assert_int_equal(efirst_file_find(""), -1);
	assert_null(efirst_file(efirst_n_files()));
	assert_null(efirst_file_hosts(efirst_n_files()));
}

static void remote_hosts(void **state)
{
	static const struct {
		const char *url, *host;
	} good[] = {
		{"https://github.com/alice/shop.git", "github.com"},
		{"https://alice:tok@GitLab.Example.com:8443/x/y", "gitlab.example.com"},
		{"http://git.example.org/r", "git.example.org"},
		{"ssh://git@codeberg.org:2222/a/b.git", "codeberg.org"},
		{"git://git.kernel.org/pub/scm/git/git.git", "git.kernel.org"},
		{"git@github.com:alice/shop.git", "github.com"},
		{"bitbucket.org:team/repo", "bitbucket.org"},
		{"https://git.example", "git.example"},
		{"https://git.example.org Authorization: Bearer {}", "git.example.org"},
		{"https://1password.example.com/x", "1password.example.com"},
		{"https://a-b.c0.example.io/x", "a-b.c0.example.io"},
	};
	static const char *const bad[] = {
		"/srv/git/shop.git",
		"../shop",
		"file:///srv/git/shop.git",
		"https://localhost/x",
		"git@gitserver:shop.git",
		"https://[2001:db8::1]/x",
		"https://a_b.example/x",
		"https:///x",
		"https://.example.com/",
		"https://example.com./",
		"./a:b",
		"https://ex\nample.com/",
		"ftp://example.com/x",
		"",
		"https://github..com/x",
		"https://-a.example.com/",
		"https://a-.example.com/",
		"https://10.0.0.5/repo.git",
		"git@192.168.1.2:repo.git",
		"https://a.b.123/",
		"https://"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.example.com/",
	};
	char host[256];

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (efirst_remote_host(good[i].url, host, sizeof(host)) < 0)
			fail_msg("%s: refused", good[i].url);
		assert_string_equal(host, good[i].host);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (efirst_remote_host(bad[i], host, sizeof(host)) == 0)
			fail_msg("'%s': accepted as %s", bad[i], host);
	/* Too long for the buffer: refused, not cut. */
	assert_int_equal(efirst_remote_host("https://abcdefgh.example.com/", host, 8), -1);
}

static void add_dedups_and_masks(void **state)
{
	struct efirst *f = calloc(1, sizeof(*f));
	char hosts[32];

	(void)state;
	assert_non_null(f);
	assert_int_equal(efirst_add(f, EFIRST_REGISTRY, "registry.npmjs.org", "npm: first"), 0);
	assert_int_equal(efirst_add(f, EFIRST_OPENCODE, "registry.npmjs.org", "OpenCode"), 0);
	assert_int_equal(f->n, 1);
	assert_string_equal(f->l[0].why, "npm: first");
	/* A reason is one comment line: newlines and other control bytes are masked. */
	assert_int_equal(efirst_add(f, EFIRST_GIT, "git.example.org", "git: a\nallow evil.com"), 0);
	assert_string_equal(f->l[1].why, "git: a?allow evil.com");
	while (f->n < EFIRST_MAX_LINES) {
		snprintf(hosts, sizeof(hosts), "h%zu.example", f->n);
		assert_int_equal(efirst_add(f, EFIRST_GIT, hosts, "x"), 0);
	}
	assert_int_equal(efirst_add(f, EFIRST_GIT, "one-more.example", "x"), -ENOSPC);
	free(f);
}

/* ocsb-inject's built-in providers and the ones the rules know are the same hosts. */
static void providers_match_inject(void **state)
{
	struct efirst *f = calloc(1, sizeof(*f));
	const struct inj_provider *ip;
	size_t n;

	(void)state;
	assert_non_null(f);
	efirst_providers_all(f);
	ip = inj_providers(&n);
	assert_int_equal(f->n, n);
	for (size_t i = 0; i < n; i++) {
		char host[256];

		assert_int_equal(efirst_remote_host(ip[i].base, host, sizeof(host)), 0);
		if (!has_line(f, EFIRST_PROVIDER, host, NULL))
			fail_msg("%s (%s): not among the providers the rules allow", ip[i].name,
				host);
	}
	free(f);
}

/* The section says once why every provider is there. */
static void providers_all_said_once(void **state)
{
	static const char tmpl[] = EFIRST_MARK "\n";
	struct efirst *f = calloc(1, sizeof(*f));
	struct buf out = {0};

	(void)state;
	assert_non_null(f);
	efirst_providers_all(f);
	assert_true(f->all_providers);
	assert_int_equal(efirst_render(tmpl, strlen(tmpl), f, &out), 0);
	assert_non_null(strstr(out.data,
		"# Model providers: every built-in one;\n# delete those you do not use.\n"
		"allow api.anthropic.com "));
	assert_non_null(strstr(out.data, "# anthropic\n"));
	buf_free(&out);
	free(f);
}

static void render_replaces_the_mark(void **state)
{
	static const char tmpl[] = "# head\npolicy allowlist\n\n" EFIRST_MARK
				   "\n\n# tail\nexpect-block http://10.0.0.1/\n";
	struct efirst *f = calloc(1, sizeof(*f));
	struct buf out = {0};

	(void)state;
	assert_non_null(f);
	assert_int_equal(efirst_add(f, EFIRST_OPENCODE, "models.dev", "OpenCode: models"), 0);
	assert_int_equal(
		efirst_add(f, EFIRST_PROVIDER, "api.x.ai", "xai: the secret XAI_API_KEY"), 0);
	assert_int_equal(efirst_add(f, EFIRST_REGISTRY, "proxy.golang.org sum.golang.org",
				 "Go: go.mod in ~/code/tool"),
		0);
	assert_int_equal(efirst_render(tmpl, strlen(tmpl), f, &out), 0);
	/* Sections in a fixed order whatever the order found; the empty one says so. */
	assert_string_equal(out.data,
		"# head\npolicy allowlist\n\n"
		"# Model providers.\n"
		"allow api.x.ai                                 # xai: the secret XAI_API_KEY\n\n"
		"# Package registries of the ecosystems found in the projects.\n"
		"allow proxy.golang.org sum.golang.org          # Go: go.mod in ~/code/tool\n\n"
		"# The git hosts of the projects' remotes: none found.\n\n"
		"# OpenCode itself.\n"
		"allow models.dev                               # OpenCode: models\n\n"
		"# tail\nexpect-block http://10.0.0.1/\n");
	buf_free(&out);
	/* No mark, or two: refused, nothing half-made is written. */
	assert_int_equal(efirst_render("policy allowlist\n", 17, f, &out), -EINVAL);
	buf_free(&out);
	assert_int_equal(efirst_render(EFIRST_MARK "\n" EFIRST_MARK "\n",
				 2 * strlen(EFIRST_MARK) + 2, f, &out),
		-EINVAL);
	buf_free(&out);
	free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(files_name_ecosystems),
		cmocka_unit_test(remote_hosts),
		cmocka_unit_test(add_dedups_and_masks),
		cmocka_unit_test(providers_match_inject),
		cmocka_unit_test(providers_all_said_once),
		cmocka_unit_test(render_replaces_the_mark),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
