/* SPDX-License-Identifier: MIT */
/*
 * The parts of the mirror that look at the owner's bytes: the secret scan, the .gitconfig
 * subset, link containment, name escaping. Pure functions: they run in the child that
 * holds the owner's rights (never in root) and in the unit tests.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mirror.h"

void mirror_aside_name(const char *name, int i, char *ret, size_t n)
{
	if (i <= 1)
		snprintf(ret, n, "%s.ocsb-aside", name);
	else
		snprintf(ret, n, "%s.ocsb-aside.%d", name, i);
}

void mirror_escape(const char *s, struct buf *out)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\n')
			buf_puts(out, "\\n");
		else if (c == '\t')
			buf_puts(out, "\\t");
		else if (c == '\\')
			buf_puts(out, "\\\\");
		else if (c < 0x20 || c == 0x7f)
			buf_printf(out, "\\x%02x", c);
		else
			buf_append(out, s, 1);
	}
}

/* ---- credential patterns ---- */

struct prefix {
	const char *pfx;
	size_t min_tail; /* characters of [A-Za-z0-9_-] after the prefix */
	const char *what;
	const char *env;
};

/* Order matters: the longest prefix of a family first. */
static const struct prefix prefixes[] = {
	{"sk-ant-", 20, "an Anthropic key", "ANTHROPIC_API_KEY"},
	{"sk-or-", 20, "an OpenRouter key", "OPENROUTER_API_KEY"},
	{"sk-proj-", 20, "an OpenAI key", "OPENAI_API_KEY"},
	{"sk-", 20, "an OpenAI-style key", "OPENAI_API_KEY"},
	{"github_pat_", 20, "a GitHub token", "GITHUB_TOKEN"},
	{"ghp_", 20, "a GitHub token", "GITHUB_TOKEN"},
	{"gho_", 20, "a GitHub token", "GITHUB_TOKEN"},
	{"ghu_", 20, "a GitHub token", "GITHUB_TOKEN"},
	{"ghs_", 20, "a GitHub token", "GITHUB_TOKEN"},
	{"ghr_", 20, "a GitHub token", "GITHUB_TOKEN"},
	{"glpat-", 20, "a GitLab token", "GITLAB_TOKEN"},
	{"xoxb-", 10, "a Slack token", "SLACK_BOT_TOKEN"},
	{"xoxp-", 10, "a Slack token", "SLACK_USER_TOKEN"},
	{"xoxa-", 10, "a Slack token", "SLACK_TOKEN"},
	{"AKIA", 16, "an AWS access key", "AWS_ACCESS_KEY_ID"},
	{"AIza", 30, "a Google API key", "GOOGLE_API_KEY"},
	{"gsk_", 20, "a Groq key", "GROQ_API_KEY"},
	{"hf_", 30, "a Hugging Face token", "HF_TOKEN"},
	{NULL, 0, NULL, NULL},
};

static int tokch(unsigned char c)
{
	return isalnum(c) || c == '_' || c == '-';
}

/* A known key prefix at s[i] (on a token boundary); the entry, or NULL. */
static const struct prefix *prefix_at(const char *s, size_t len, size_t i)
{
	static unsigned char first[256], first_set;

	/* The first bytes of the prefixes: most bytes of a file are rejected by one load. */
	if (!first_set) {
		for (const struct prefix *p = prefixes; p->pfx; p++)
			first[(unsigned char)p->pfx[0]] = 1;
		first_set = 1;
	}
	if (!first[(unsigned char)s[i]])
		return NULL;
	if (i > 0 && tokch((unsigned char)s[i - 1]))
		return NULL;
	for (const struct prefix *p = prefixes; p->pfx; p++) {
		size_t pl = strlen(p->pfx), t = 0;

		if (i + pl > len || memcmp(s + i, p->pfx, pl) != 0)
			continue;
		while (i + pl + t < len && tokch((unsigned char)s[i + pl + t]))
			t++;
		if (t >= p->min_tail)
			return p;
	}
	return NULL;
}

static const struct prefix *find_prefix(const char *s, size_t len, size_t *ret_at)
{
	for (size_t i = 0; i < len; i++) {
		const struct prefix *p = prefix_at(s, len, i);

		if (p) {
			if (ret_at)
				*ret_at = i;
			return p;
		}
	}
	return NULL;
}

/* Key names whose string values are credentials (compared without case, '_' and '-'). */
static int secret_key(const char *key)
{
	static const char *const exact[] = {"apikey", "token", "secret", "password", "passwd",
		"authorization", "auth", "bearer", "privatekey", "clientsecret", "credentials",
		"xapikey", "cookie", NULL};
	static const char *const suffix[] = {"token", "secret", "password", "apikey", NULL};
	char k[128];
	size_t n = 0;

	for (const char *c = key; *c && n < sizeof(k) - 1; c++)
		if (*c != '_' && *c != '-')
			k[n++] = (char)tolower((unsigned char)*c);
	k[n] = '\0';
	for (size_t i = 0; exact[i]; i++)
		if (!strcmp(k, exact[i]))
			return 1;
	for (size_t i = 0; suffix[i]; i++) {
		size_t sl = strlen(suffix[i]);
		if (n > sl && !strcmp(k + n - sl, suffix[i]))
			return 1;
	}
	return 0;
}

/* An environment-variable-like NAME from free text: upper case, [A-Z0-9_]. */
static void env_name(char *out, size_t n, const char *a, const char *b)
{
	size_t o = 0;
	const char *parts[2] = {a, b};

	for (int i = 0; i < 2; i++) {
		if (!parts[i] || !*parts[i])
			continue;
		if (o && o < n - 1)
			out[o++] = '_';
		for (const char *c = parts[i]; *c && o < n - 1; c++) {
			unsigned char ch = (unsigned char)*c;
			/* camelCase -> CAMEL_CASE */
			if (isupper(ch) && c != parts[i] && islower((unsigned char)c[-1]) &&
				o < n - 2)
				out[o++] = '_';
			out[o++] = isalnum(ch) ? (char)toupper(ch) : '_';
		}
	}
	out[o] = '\0';
	if (!o || isdigit((unsigned char)out[0]))
		snprintf(out, n, "OCSB_SECRET");
}

/* ---- JSON/JSONC: credentials replaced in place, everything else byte for byte ---- */

#define JDEPTH 64

struct jframe {
	char is_obj;
	char key[128]; /* current key (objects) */
};

struct jscan {
	const char *s;
	size_t len, i;
	struct jframe st[JDEPTH];
	int depth;
	struct buf *out;
	size_t copied; /* s[0..copied) is in out */
	struct strv *notes;
	int found;
};

/* Dotted key path of the value being read, for the report. */
static void jpath(const struct jscan *j, struct buf *b)
{
	for (int d = 0; d < j->depth; d++) {
		if (d)
			buf_puts(b, ".");
		if (j->st[d].is_obj)
			mirror_escape(j->st[d].key, b);
		else
			buf_puts(b, "[]");
	}
}

static int jancestor(const struct jscan *j, const char *key, int below)
{
	for (int d = 0; d < below; d++)
		if (j->st[d].is_obj && !strcmp(j->st[d].key, key))
			return 1;
	return 0;
}

/* Decide about one string value s[a..b) (without quotes). */
static void jvalue(struct jscan *j, size_t a, size_t b)
{
	const struct jframe *f = j->depth ? &j->st[j->depth - 1] : NULL;
	const char *key = f && f->is_obj ? f->key : "";
	const char *parent =
		j->depth >= 2 && j->st[j->depth - 2].is_obj ? j->st[j->depth - 2].key : "";
	const struct prefix *p = find_prefix(j->s + a, b - a, NULL);
	/* provider.<id>.options.apiKey: the provider it is configured under names it. */
	int provider_key = f && f->is_obj && !strcasecmp(key, "apiKey") && j->depth >= 3 &&
		jancestor(j, "provider", j->depth - 2) && j->st[1].is_obj && j->st[0].is_obj &&
		!strcmp(j->st[0].key, "provider");
	char name[96], what[96];
	struct buf line = {0};

	if (b == a ||
		(b - a > 5 && (!strncmp(j->s + a, "{env:", 5) || !strncmp(j->s + a, "{file:", 6))))
		return;
	/* MCP servers' environment blocks carry the servers' tokens. */
	if ((!strcmp(parent, "environment") || !strcmp(parent, "env")) &&
		jancestor(j, "mcp", j->depth - 2)) {
		env_name(name, sizeof(name), key, NULL);
		snprintf(what, sizeof(what), "an MCP server's environment value");
	} else if (provider_key) {
		/*
		 * Not the key's look: a short Anthropic key reads as "sk-" plus 20 characters,
		 * OpenAI's form, and OpenCode would then get the OpenAI key as its Anthropic one.
		 */
		env_name(name, sizeof(name), j->st[1].key, "API_KEY");
		snprintf(what, sizeof(what), "the API key of provider %.40s", j->st[1].key);
	} else if (p) {
		snprintf(name, sizeof(name), "%s", p->env);
		snprintf(what, sizeof(what), "%s", p->what);
	} else if (f && f->is_obj && secret_key(key)) {
		env_name(name, sizeof(name), parent, key);
		snprintf(what, sizeof(what), "a credential-like key");
	} else {
		return;
	}
	j->found++;
	buf_append(j->out, j->s + j->copied, a - j->copied);
	buf_printf(j->out, "{env:%s}", name);
	j->copied = b;
	buf_puts(&line, "key ");
	jpath(j, &line);
	buf_printf(&line, " (%s) withheld: run 'ocsb secrets set %s'", what, name);
	strv_push(j->notes, line.data);
	buf_free(&line);
}

static int jskip_ws(struct jscan *j)
{
	while (j->i < j->len) {
		char c = j->s[j->i];

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			j->i++;
		} else if (c == '/' && j->i + 1 < j->len && j->s[j->i + 1] == '/') {
			while (j->i < j->len && j->s[j->i] != '\n')
				j->i++;
		} else if (c == '/' && j->i + 1 < j->len && j->s[j->i + 1] == '*') {
			const char *e = NULL;

			for (size_t k = j->i + 2; k + 1 < j->len; k++)
				if (j->s[k] == '*' && j->s[k + 1] == '/') {
					e = j->s + k;
					break;
				}
			if (!e)
				return -1;
			j->i = (size_t)(e - j->s) + 2;
		} else {
			return 0;
		}
	}
	return 0;
}

/* A string at s[i] == '"': its content bounds; i after the closing quote. */
static int jstring(struct jscan *j, size_t *a, size_t *b)
{
	j->i++;
	*a = j->i;
	while (j->i < j->len) {
		char c = j->s[j->i];

		if (c == '\\') {
			j->i += 2;
			continue;
		}
		if (c == '"') {
			*b = j->i++;
			return 0;
		}
		if (c == '\n')
			return -1;
		j->i++;
	}
	return -1;
}

static int jparse(struct jscan *j)
{
	/* expect: 0 value, 1 key or '}', 2 ':' , 3 ',' or close */
	int expect = 0;

	for (;;) {
		size_t a, b;
		char c;

		if (jskip_ws(j) < 0)
			return -1;
		if (j->i >= j->len)
			return j->depth == 0 && expect == 3 ? 0 : -1;
		c = j->s[j->i];
		if (expect == 3) {
			if (c == ',') {
				j->i++;
				expect = j->depth && j->st[j->depth - 1].is_obj ? 1 : 0;
				continue;
			}
			if ((c == '}' || c == ']') && j->depth) {
				if ((c == '}') != (j->st[j->depth - 1].is_obj == 1))
					return -1;
				j->depth--;
				j->i++;
				expect = 3;
				if (j->depth == 0) {
					if (jskip_ws(j) < 0)
						return -1;
					return j->i == j->len ? 0 : -1;
				}
				continue;
			}
			return -1;
		}
		if (expect == 1) {
			/* JSONC allows a trailing comma: "}" right after it. */
			if (c == '}') {
				j->depth--;
				j->i++;
				expect = 3;
				if (j->depth == 0) {
					if (jskip_ws(j) < 0)
						return -1;
					return j->i == j->len ? 0 : -1;
				}
				continue;
			}
			if (c != '"' || jstring(j, &a, &b) < 0)
				return -1;
			snprintf(j->st[j->depth - 1].key, sizeof(j->st[0].key), "%.*s",
				(int)(b - a), j->s + a);
			expect = 2;
			continue;
		}
		if (expect == 2) {
			if (c != ':')
				return -1;
			j->i++;
			expect = 0;
			continue;
		}
		/* a value */
		if (c == '{' || c == '[') {
			if (j->depth >= JDEPTH)
				return -1;
			j->st[j->depth].is_obj = c == '{';
			j->st[j->depth].key[0] = '\0';
			j->depth++;
			j->i++;
			expect = c == '{' ? 1 : 0;
			continue;
		}
		if (c == ']' && j->depth && !j->st[j->depth - 1].is_obj) {
			/* empty array or trailing comma */
			j->depth--;
			j->i++;
			expect = 3;
			if (j->depth == 0) {
				if (jskip_ws(j) < 0)
					return -1;
				return j->i == j->len ? 0 : -1;
			}
			continue;
		}
		if (c == '"') {
			if (jstring(j, &a, &b) < 0)
				return -1;
			jvalue(j, a, b);
		} else if (isalnum((unsigned char)c) || c == '-') {
			while (j->i < j->len &&
				(isalnum((unsigned char)j->s[j->i]) || strchr("+-.", j->s[j->i])))
				j->i++;
		} else {
			return -1;
		}
		expect = 3;
		if (j->depth == 0) {
			if (jskip_ws(j) < 0)
				return -1;
			return j->i == j->len ? 0 : -1;
		}
	}
}

static int looks_json(const char *name, const char *data, size_t len)
{
	size_t nl = strlen(name);
	size_t i = 0;

	if ((nl >= 5 && !strcmp(name + nl - 5, ".json")) ||
		(nl >= 6 && !strcmp(name + nl - 6, ".jsonc")))
		return 1;
	while (i < len && isspace((unsigned char)data[i]))
		i++;
	return i < len && data[i] == '{';
}

/* Text files: "key: value" / "key=value" lines with a credential-looking value. */
static int text_scan(const char *s, size_t len, struct strv *notes)
{
	unsigned lineno = 1;
	int found = 0;
	size_t at;

	for (size_t i = 0; i < len;) {
		size_t e = i;
		const struct prefix *p;
		char line[400];

		while (e < len && s[e] != '\n')
			e++;
		p = find_prefix(s + i, e - i, &at);
		if (p) {
			snprintf(line, sizeof(line),
				"line %u: %s: file withheld; run 'ocsb secrets set %s'", lineno,
				p->what, p->env);
			strv_push(notes, line);
			found++;
		} else {
			/* key [:=] value, value >= 16 characters of a token with a digit */
			size_t k = i, ks, ke, v, ve;
			int digit = 0;
			char key[64];

			while (k < e &&
				(s[k] == ' ' || s[k] == '\t' || s[k] == '"' || s[k] == '\'' ||
					s[k] == '-' || s[k] == '#'))
				k++;
			ks = k;
			while (k < e &&
				(isalnum((unsigned char)s[k]) || s[k] == '_' || s[k] == '-'))
				k++;
			ke = k;
			while (k < e && (s[k] == ' ' || s[k] == '"' || s[k] == '\''))
				k++;
			if (ke > ks && ke - ks < sizeof(key) && k < e &&
				(s[k] == ':' || s[k] == '=')) {
				snprintf(key, sizeof(key), "%.*s", (int)(ke - ks), s + ks);
				k++;
				while (k < e && (s[k] == ' ' || s[k] == '"' || s[k] == '\''))
					k++;
				if (!strncasecmp(s + k, "bearer ", 7))
					k += 7;
				v = ve = k;
				while (ve < e &&
					(isalnum((unsigned char)s[ve]) ||
						strchr("_-.=+/", s[ve]))) {
					digit |= isdigit((unsigned char)s[ve]) != 0;
					ve++;
				}
				if (secret_key(key) && ve - v >= 16 && digit) {
					char nm[96];
					struct buf kb = {0};

					env_name(nm, sizeof(nm), key, NULL);
					mirror_escape(key, &kb);
					snprintf(line, sizeof(line),
						"line %u: key %.40s looks like a credential: file "
						"withheld; run 'ocsb secrets set %s'",
						lineno, kb.data ? kb.data : "", nm);
					buf_free(&kb);
					strv_push(notes, line);
					found++;
				}
			}
		}
		i = e + 1;
		lineno++;
	}
	return found;
}

int mirror_scan(const char *name, const char *data, size_t len, struct buf *out, struct strv *notes)
{
	if (looks_json(name, data, len) && memchr(data, '\0', len) == NULL) {
		struct jscan j = {.s = data, .len = len, .out = out, .notes = notes};
		size_t before = notes->n;

		if (jparse(&j) == 0) {
			if (!j.found)
				return MS_MIRRORED;
			buf_append(out, data + j.copied, len - j.copied);
			return MS_REDACTED;
		}
		/* Not parseable: judge it as text, so nothing slips through a syntax error. */
		while (notes->n > before)
			free(notes->v[--notes->n]), notes->v[notes->n] = NULL;
		out->len = 0;
		if (out->data)
			out->data[0] = '\0';
	}
	return text_scan(data, len, notes) ? MS_WITHHELD : MS_MIRRORED;
}

/* ---- .gitconfig subset ---- */

/* One value: quotes, escapes, comments; 0, or -1 on a control character or bad escape. */
static int git_value(const char *s, size_t len, struct buf *v)
{
	int q = 0;
	size_t trail = 0; /* unquoted trailing blanks are dropped */

	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (c == '"') {
			q = !q;
			trail = 0;
			continue;
		}
		if (!q && (c == '#' || c == ';'))
			break;
		if (c == '\\') {
			char n = i + 1 < len ? s[++i] : '\0';
			c = n == 'n' ? '\n' : n == 't' ? '\t' : n == 'b' ? '\b' : n;
			if (c != '"' && c != '\\')
				return -1; /* \n, \t, \b: nothing we mirror needs them */
			buf_append(v, &c, 1);
			trail = 0;
			continue;
		}
		if ((unsigned char)c < 0x20 && c != '\t')
			return -1;
		if (!q && (c == ' ' || c == '\t')) {
			if (!v->len)
				continue;
			trail++;
		} else {
			trail = 0;
		}
		buf_append(v, &c, 1);
	}
	if (q)
		return -1;
	v->len -= trail;
	if (v->data)
		v->data[v->len] = '\0';
	return 0;
}

static void git_quote(struct buf *out, const char *v)
{
	buf_puts(out, "\"");
	for (; *v; v++) {
		if (*v == '"' || *v == '\\')
			buf_puts(out, "\\");
		buf_append(out, v, 1);
	}
	buf_puts(out, "\"");
}

int mirror_gitconfig(const char *data, size_t len, struct buf *out, struct strv *notes)
{
	struct buf user = {0}, alias = {0}, core = {0};
	char section[64] = "", note[200];
	int sub = 0, kept = 0;
	unsigned dropped = 0, lineno = 0;

	for (size_t i = 0; i < len;) {
		size_t e = i, k;
		char key[64];
		struct buf v = {0};

		while (e < len && data[e] != '\n')
			e++;
		lineno++;
		k = i;
		while (k < e && (data[k] == ' ' || data[k] == '\t'))
			k++;
		if (k == e || data[k] == '#' || data[k] == ';') {
			i = e + 1;
			continue;
		}
		if (data[k] == '[') {
			size_t s = ++k, n = 0;

			while (k < e &&
				(isalnum((unsigned char)data[k]) || data[k] == '-' ||
					data[k] == '.'))
				k++;
			n = k - s < sizeof(section) ? k - s : sizeof(section) - 1;
			for (size_t x = 0; x < n; x++)
				section[x] = (char)tolower((unsigned char)data[s + x]);
			section[n] = '\0';
			/* [section "sub"] and [section.sub] are never mirrored. */
			sub = memchr(section, '.', n) != NULL || (k < e && data[k] != ']');
			i = e + 1;
			continue;
		}
		{
			size_t s = k, n;

			while (k < e && (isalnum((unsigned char)data[k]) || data[k] == '-'))
				k++;
			n = k - s < sizeof(key) ? k - s : sizeof(key) - 1;
			for (size_t x = 0; x < n; x++)
				key[x] = (char)tolower((unsigned char)data[s + x]);
			key[n] = '\0';
			while (k < e && (data[k] == ' ' || data[k] == '\t'))
				k++;
		}
		/* A value continued on the next line: not supported, dropped whole. */
		if (e > i && data[e - 1] == '\\') {
			dropped++;
			while (e < len && data[e - 1] == '\\') {
				e++;
				while (e < len && data[e] != '\n')
					e++;
			}
			i = e + 1;
			continue;
		}
		if (!sub &&
			((!strcmp(section, "user") &&
				 (!strcmp(key, "name") || !strcmp(key, "email"))) ||
				!strcmp(section, "alias") ||
				(!strcmp(section, "core") && !strcmp(key, "editor"))) &&
			key[0] && k < e && data[k] == '=') {
			if (git_value(data + k + 1, e - k - 1, &v) < 0 || !v.len) {
				snprintf(note, sizeof(note),
					"%s.%s (line %u): value with control characters or escapes "
					"not "
					"mirrored",
					section, key, lineno);
				strv_push(notes, note);
			} else {
				struct buf *to = !strcmp(section, "user") ? &user
					: !strcmp(section, "alias")	  ? &alias
									  : &core;
				buf_printf(to, "\t%s = ", key);
				git_quote(to, v.data);
				buf_puts(to, "\n");
				kept++;
			}
		} else if (key[0]) {
			if (!strcmp(section, "credential") || !strcmp(section, "include") ||
				!strcmp(section, "includeif") || !strcmp(section, "url") ||
				(!strcmp(section, "core") &&
					(!strcmp(key, "hookspath") || !strcmp(key, "sshcommand") ||
						!strcmp(key, "fsmonitor") ||
						!strcmp(key, "pager")))) {
				snprintf(note, sizeof(note), "%s%s%s (line %u): not mirrored",
					section, sub ? ".<sub>." : ".", key, lineno);
				strv_push(notes, note);
			} else {
				dropped++;
			}
		}
		buf_free(&v);
		i = e + 1;
	}
	buf_puts(out,
		"# Generated by ocsb from the owner's ~/.gitconfig: only user.name,\n"
		"# user.email, alias.* and core.editor are copied. Read-only.\n");
	if (user.len)
		buf_printf(out, "[user]\n%s", user.data);
	if (core.len)
		buf_printf(out, "[core]\n%s", core.data);
	if (alias.len)
		buf_printf(out, "[alias]\n%s", alias.data);
	if (dropped) {
		snprintf(note, sizeof(note), "%u other setting%s not mirrored", dropped,
			dropped == 1 ? "" : "s");
		strv_push(notes, note);
	}
	buf_free(&user);
	buf_free(&alias);
	buf_free(&core);
	return kept;
}

/* ---- names ---- */

int mirror_name_reserved(const char *path)
{
	const char *slash = strrchr(path, '/');

	return !strncmp(slash ? slash + 1 : path, MIRROR_TMP_PREFIX, strlen(MIRROR_TMP_PREFIX));
}

/* ---- links ---- */

int mirror_link_ok(const struct strv *roots, const char *path, const char *target)
{
	char fixed[4096];

	/* Absolute targets are rewritten by the reader: one that arrives is a lie. */
	if (!*target || target[0] == '/')
		return 0;
	for (size_t i = 0; i < roots->n; i++) {
		const char *root = roots->v[i];
		size_t rl = strlen(root);

		if (!strcmp(root, MIRROR_GITCONFIG) || strncmp(path, root, rl) != 0 ||
			path[rl] != '/' || !path[rl + 1])
			continue;
		/* root_abs "/": unused for a relative target. */
		if (mirror_link_inside(path + rl + 1, target, "/", fixed, sizeof(fixed)) &&
			!strcmp(fixed, target))
			return 1;
	}
	return 0;
}

int mirror_link_inside(
	const char *linkpath, const char *target, const char *root_abs, char *ret, size_t n)
{
	char comp[MIRROR_MAX_DEPTH * 2 + 64][256];
	size_t depth = 0, rl = strlen(root_abs);
	const char *p;
	struct buf out = {0};
	int ok = 0;

	if (!*target || strlen(target) > 2048)
		return 0;
	if (target[0] == '/') {
		if (strncmp(target, root_abs, rl) != 0 || (target[rl] != '/' && target[rl] != '\0'))
			return 0;
		target += rl;
	} else {
		/* start from the link's directory */
		const char *s = linkpath, *slash;

		while ((slash = strchr(s, '/')) != NULL) {
			if (depth >= ARRAY_SIZE(comp) || (size_t)(slash - s) >= sizeof(comp[0]))
				return 0;
			snprintf(comp[depth++], sizeof(comp[0]), "%.*s", (int)(slash - s), s);
			s = slash + 1;
		}
	}
	for (p = target; *p;) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == 0 || (len == 1 && *p == '.')) {
			/* nothing */
		} else if (len == 2 && !strncmp(p, "..", 2)) {
			if (depth == 0)
				return 0; /* climbs out of the tree */
			depth--;
		} else {
			if (depth >= ARRAY_SIZE(comp) || len >= sizeof(comp[0]))
				return 0;
			snprintf(comp[depth++], sizeof(comp[0]), "%.*s", (int)len, p);
		}
		p += len;
		while (*p == '/')
			p++;
	}
	/* relative to the link's directory: "../" per level of the link, then the path */
	{
		size_t up = 0;

		for (const char *s = linkpath; *s; s++)
			up += *s == '/';
		for (size_t i = 0; i < up; i++)
			buf_puts(&out, "../");
		for (size_t i = 0; i < depth; i++)
			buf_printf(&out, "%s%s", i ? "/" : "", comp[i]);
		if (!depth)
			buf_puts(&out, ".");
	}
	if (out.data && out.len < n) {
		memcpy(ret, out.data, out.len + 1);
		ok = 1;
	}
	buf_free(&out);
	return ok;
}
