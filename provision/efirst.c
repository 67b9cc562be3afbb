/* SPDX-License-Identifier: MIT */
/*
 * The egress rules of a first provisioning (issue 29): which hosts the agent needs, and
 * why, from facts the scan gathered (efirst.h). No I/O here.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "efirst.h"

#define ARRAY_N(a) (sizeof(a) / sizeof((a)[0]))

/*
 * Manifest and lock files by name only: the scan never reads them. Every registry a
 * file could point at is out of reach of a name; these are the ecosystems' defaults.
 */
static const struct {
	const char *file, *eco, *hosts;
} files[] = {
	{"package.json", "npm", "registry.npmjs.org"},
	{"package-lock.json", "npm", "registry.npmjs.org"},
	{"npm-shrinkwrap.json", "npm", "registry.npmjs.org"},
	{"yarn.lock", "npm", "registry.npmjs.org"},
	{"pnpm-lock.yaml", "npm", "registry.npmjs.org"},
	{"requirements.txt", "PyPI", "pypi.org files.pythonhosted.org"},
	{"pyproject.toml", "PyPI", "pypi.org files.pythonhosted.org"},
	{"setup.py", "PyPI", "pypi.org files.pythonhosted.org"},
	{"Pipfile", "PyPI", "pypi.org files.pythonhosted.org"},
	{"poetry.lock", "PyPI", "pypi.org files.pythonhosted.org"},
	{"uv.lock", "PyPI", "pypi.org files.pythonhosted.org"},
	{"Cargo.toml", "crates.io", "crates.io static.crates.io index.crates.io"},
	{"Cargo.lock", "crates.io", "crates.io static.crates.io index.crates.io"},
	{"go.mod", "Go", "proxy.golang.org sum.golang.org"},
	{"go.sum", "Go", "proxy.golang.org sum.golang.org"},
	{"debian/control", "Debian", "deb.debian.org security.debian.org"},
};

/* The built-in providers of ocsb-inject (inject/conf.c: a unit test keeps the two alike). */
static const struct {
	const char *name, *host;
} providers[] = {
	{"anthropic", "api.anthropic.com"},
	{"openai", "api.openai.com"},
	{"google", "generativelanguage.googleapis.com"},
	{"openrouter", "openrouter.ai"},
	{"mistral", "api.mistral.ai"},
	{"groq", "api.groq.com"},
	{"deepseek", "api.deepseek.com"},
	{"xai", "api.x.ai"},
};

size_t efirst_n_files(void)
{
	return ARRAY_N(files);
}

const char *efirst_file(size_t i)
{
	return i < ARRAY_N(files) ? files[i].file : NULL;
}

const char *efirst_file_eco(size_t i)
{
	return i < ARRAY_N(files) ? files[i].eco : NULL;
}

const char *efirst_file_hosts(size_t i)
{
	return i < ARRAY_N(files) ? files[i].hosts : NULL;
}

int efirst_file_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_N(files); i++)
		if (!strcmp(files[i].file, name))
			return (int)i;
	return -1;
}

int efirst_add(struct efirst *f, int section, const char *hosts, const char *why)
{
	struct efirst_line *l;

	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->l[i].hosts, hosts))
			return 0;
	if (f->n == EFIRST_MAX_LINES || strlen(hosts) >= sizeof(l->hosts))
		return -ENOSPC;
	l = &f->l[f->n++];
	l->section = section;
	snprintf(l->hosts, sizeof(l->hosts), "%s", hosts);
	snprintf(l->why, sizeof(l->why), "%s", why);
	/* A reason goes into a comment of one line: a newline in a path would end it. */
	for (char *c = l->why; *c; c++)
		if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
			*c = '?';
	return 0;
}

/*
 * host[:port] at s, ending at one of `ends` or the end: lower-cased into out. A name as the
 * egress rules take it (labels of 1..63 letters, digits and '-', not at a label's ends),
 * with a dot; never an IP literal: a remote at 10.0.0.5 must not open a private address
 * by itself (allow beats the private-network refusal), the owner allows it by hand.
 */
static int take_host(const char *s, const char *ends, char *out, size_t n)
{
	size_t len = strcspn(s, ends), label = 0, dots = 0;

	if (len == 0 || len >= n || len > 253)
		return -1;
	for (size_t i = 0; i <= len; i++) {
		char c = i < len ? s[i] : '.';

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c == '.') {
			if (label == 0 || label > 63 || out[i - 1] == '-' || out[i - label] == '-')
				return -1;
			dots += i < len;
			label = 0;
		} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
			label++;
		} else {
			return -1;
		}
		if (i < len)
			out[i] = c;
	}
	out[len] = '\0';
	/* The last label is the top-level domain: all digits, it was an IPv4 address. */
	return dots && strspn(strrchr(out, '.') + 1, "0123456789") < strlen(strrchr(out, '.') + 1)
		? 0
		: -1;
}

int efirst_remote_host(const char *url, char *out, size_t n)
{
	static const char *const schemes[] = {
		"https://", "http://", "ssh://", "git://", "git+ssh://", "ssh+git://"};
	const char *s = NULL, *at, *colon;

	for (size_t i = 0; i < ARRAY_N(schemes) && !s; i++)
		if (!strncmp(url, schemes[i], strlen(schemes[i])))
			s = url + strlen(schemes[i]);
	if (s) {
		at = strchr(s, '@');
		if (at && at < s + strcspn(s, "/"))
			s = at + 1;
		return take_host(s, ":/ ", out, n);
	}
	/* scp-like: [user@]host:path, the ':' before any '/' (else a local path). */
	if (strstr(url, "://"))
		return -1;
	colon = strchr(url, ':');
	if (!colon || colon > url + strcspn(url, "/"))
		return -1;
	at = strchr(url, '@');
	s = at && at < colon ? at + 1 : url;
	return take_host(s, ":", out, n);
}

void efirst_providers_all(struct efirst *f)
{
	for (size_t i = 0; i < ARRAY_N(providers); i++) {
		char why[EFIRST_MAX_WHY];

		snprintf(why, sizeof(why), "%s", providers[i].name);
		efirst_add(f, EFIRST_PROVIDER, providers[i].host, why);
	}
	f->all_providers = 1;
}

void efirst_opencode(struct efirst *f)
{
	efirst_add(f, EFIRST_OPENCODE, "models.opencode.ai models.dev",
		"OpenCode: the models list it fetches at start");
	efirst_add(f, EFIRST_OPENCODE, "opencode.ai api.opencode.ai",
		"OpenCode: its site and API (sharing, its own models)");
	efirst_add(f, EFIRST_OPENCODE, "registry.npmjs.org",
		"OpenCode: its plugin package (@opencode-ai/plugin), installed at start");
}

static const char *const section_title[EFIRST_N_SECTIONS] = {
	"# Model providers.\n",
	"# Package registries of the ecosystems found in the projects.\n",
	"# The git hosts of the projects' remotes.\n",
	"# OpenCode itself.\n",
};

static int render_lines(const struct efirst *f, struct buf *out)
{
	int r = 0;

	for (int s = 0; s < EFIRST_N_SECTIONS; s++) {
		int any = 0;

		for (size_t i = 0; i < f->n; i++) {
			const struct efirst_line *l = &f->l[i];

			if (l->section != s)
				continue;
			if (!any++)
				r |= buf_puts(out,
					s == EFIRST_PROVIDER && f->all_providers
						? "# Model providers: every built-in one;\n"
						  "# delete those you do not use.\n"
						: section_title[s]);
			r |= buf_printf(out, "allow %-40s # %s\n", l->hosts, l->why);
		}
		if (!any && s == EFIRST_GIT)
			r |= buf_puts(
				out, "# The git hosts of the projects' remotes: none found.\n");
		if (!any && s == EFIRST_REGISTRY)
			r |= buf_puts(out,
				"# Package registries: no manifest or lock file found in "
				"the projects.\n");
		r |= buf_puts(out, "\n");
	}
	return r < 0 ? -ENOMEM : 0;
}

int efirst_render(const char *tmpl, size_t len, const struct efirst *f, struct buf *out)
{
	const char *end = tmpl + len, *mark = NULL;
	size_t ml = strlen(EFIRST_MARK);

	for (const char *l = tmpl; l < end;) {
		const char *nl = memchr(l, '\n', (size_t)(end - l));
		size_t ll = nl ? (size_t)(nl - l) : (size_t)(end - l);

		if (ll == ml && !memcmp(l, EFIRST_MARK, ml)) {
			if (mark)
				return -EINVAL;
			mark = l;
		}
		l += ll + (nl ? 1 : 0);
	}
	if (!mark)
		return -EINVAL;
	if (buf_append(out, tmpl, (size_t)(mark - tmpl)) < 0 || render_lines(f, out) < 0)
		return -ENOMEM;
	mark += ml;
	if (mark < end && *mark == '\n')
		mark++;
	/* One blank line between the sections and what follows the mark. */
	while (mark < end && *mark == '\n')
		mark++;
	return buf_append(out, mark, (size_t)(end - mark)) < 0 ? -ENOMEM : 0;
}
