/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "secrets.h"
#include "sysblock.h"
#include "util.h"

#define SET_MAGIC "OCSBSET1"
/* The same with a route after each value: written only when some secret is injected. */
#define SET_MAGIC2 "OCSBSET2"

static char alloc_error[640];

void *secrets_alloc(size_t n)
{
	void *p = sodium_malloc(n);
	struct rlimit rl;

	if (!p) {
		snprintf(alloc_error, sizeof(alloc_error), "out of memory for %zu bytes", n);
		return NULL;
	}
	/*
	 * sodium_malloc tries to lock and carries on if it cannot; a secret that may be
	 * swapped out is not what we promise, so the failure is an error here.
	 */
	if (sodium_mlock(p, n) < 0) {
		int e = errno;
		struct sysblock_facts f;
		char why[512];

		/* A container's filter answers EPERM too: the limit is then not the cause. */
		sysblock_facts(&f);
		if (sysblock_explain(why, sizeof(why), SYSBLOCK_MLOCK, e, &f) != SYSBLOCK_OTHER) {
			snprintf(alloc_error, sizeof(alloc_error),
				"cannot lock %zu bytes of memory for secrets: %s", n, why);
			sodium_free(p);
			return NULL;
		}
		getrlimit(RLIMIT_MEMLOCK, &rl);
		snprintf(alloc_error, sizeof(alloc_error),
			"cannot lock %zu bytes of memory for secrets: %s (RLIMIT_MEMLOCK %llu "
			"bytes; raise it, e.g. ulimit -l or LimitMEMLOCK=)",
			n, strerror(e), (unsigned long long)rl.rlim_cur);
		sodium_free(p);
		return NULL;
	}
	return p;
}

void secrets_free(void *p)
{
	if (p)
		sodium_free(p); /* wipes and unlocks */
}

const char *secrets_alloc_error(void)
{
	return alloc_error[0] ? alloc_error : "out of memory";
}

/*
 * Names ocsb sets for OpenCode, and names that change what a program loads or runs: a
 * pushed value must not silently replace the proxy, the server password or the loader.
 */
static const char *const reserved[] = {"HOME", "USER", "LOGNAME", "SHELL", "PATH", "LANG", "TERM",
	"PWD", "TMPDIR", "BASH_ENV", "ENV", "IFS", "PS4", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE",
	"NODE_OPTIONS", "NODE_PATH", NULL};
static const char *const reserved_prefix[] = {"LD_", "LC_", "OPENCODE_", "OCSB_", NULL};
static const char *const reserved_suffix[] = {"_PROXY", NULL};

int secrets_name_ok(const char *name, char *err, size_t errlen)
{
	size_t n = strnlen(name, SECRETS_MAX_NAME + 1);

	if (n == 0)
		return seterr(err, errlen, "empty secret name");
	if (n > SECRETS_MAX_NAME)
		return seterr(err, errlen, "secret name too long (at most %d characters)",
			SECRETS_MAX_NAME);
	if (name[0] >= '0' && name[0] <= '9')
		return seterr(
			err, errlen, "invalid secret name '%s': must not start with a digit", name);
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
			return seterr(err, errlen,
				"invalid secret name '%.64s': an environment variable name, "
				"[A-Z_][A-Z0-9_]* (upper case)",
				name);
	}
	for (size_t i = 0; reserved[i]; i++)
		if (!strcmp(name, reserved[i]))
			goto res;
	for (size_t i = 0; reserved_prefix[i]; i++)
		if (!strncmp(name, reserved_prefix[i], strlen(reserved_prefix[i])))
			goto res;
	for (size_t i = 0; reserved_suffix[i]; i++) {
		size_t k = strlen(reserved_suffix[i]);

		if (n >= k && !strcmp(name + n - k, reserved_suffix[i]))
			goto res;
	}
	return 0;
res:
	return seterr(err, errlen,
		"secret name '%s' is reserved: ocsb sets it or it changes how programs load "
		"(PATH, HOME, LD_*, LC_*, *_PROXY, OPENCODE_*, BASH_ENV, ...)",
		name);
}

int secrets_scope_ok(const char *scope)
{
	size_t n = strnlen(scope, SECRETS_MAX_NAME + 1);

	if (n == 0)
		return 0;
	if (n > SECRETS_MAX_NAME || scope[0] == '.')
		return -1;
	for (size_t i = 0; i < n; i++) {
		char c = scope[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			    c == '.' || c == '_' || c == '-'))
			return -1;
	}
	return 0;
}

struct secret_set *secrets_set_new(void)
{
	struct secret_set *s = secrets_alloc(sizeof(*s));

	if (s)
		memset(s, 0, sizeof(*s));
	return s;
}

void secrets_set_free(struct secret_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		secrets_free(s->e[i].value);
	secrets_free(s);
}

static int entry_cmp(
	const char *scope_a, const char *name_a, const char *scope_b, const char *name_b)
{
	int c = strcmp(scope_a, scope_b);

	return c ? c : strcmp(name_a, name_b);
}

int secrets_set_find(const struct secret_set *s, const char *scope, const char *name)
{
	for (size_t i = 0; i < s->n; i++)
		if (!entry_cmp(s->e[i].scope, s->e[i].name, scope, name))
			return (int)i;
	return -1;
}

static int value_ok(const char *value, size_t len)
{
	/* Environment strings end at NUL: a value holding one would be cut silently. */
	return len >= 1 && len <= SECRETS_MAX_VALUE && !memchr(value, '\0', len);
}

int secrets_set_put(
	struct secret_set *s, const char *scope, const char *name, const char *value, size_t len)
{
	struct secret *e;
	size_t pos;
	char *v;
	int i;

	if (secrets_scope_ok(scope) < 0 || secrets_name_ok(name, NULL, 0) < 0 ||
		(value && !value_ok(value, len)))
		return -EINVAL;
	v = NULL;
	if (value) {
		v = secrets_alloc(len + 1);
		if (!v)
			return -ENOMEM;
		memcpy(v, value, len);
		v[len] = '\0';
	}
	i = secrets_set_find(s, scope, name);
	if (i >= 0) {
		secrets_free(s->e[i].value);
		s->e[i].value = v;
		s->e[i].len = value ? len : 0;
		return 0;
	}
	if (s->n == SECRETS_MAX_COUNT) {
		secrets_free(v);
		return -ENOSPC;
	}
	/* Kept sorted: the encoding is canonical and the environment is in name order. */
	for (pos = 0; pos < s->n; pos++)
		if (entry_cmp(s->e[pos].scope, s->e[pos].name, scope, name) > 0)
			break;
	memmove(&s->e[pos + 1], &s->e[pos], (s->n - pos) * sizeof(s->e[0]));
	e = &s->e[pos];
	memset(e, 0, sizeof(*e));
	snprintf(e->scope, sizeof(e->scope), "%s", scope);
	snprintf(e->name, sizeof(e->name), "%s", name);
	e->value = v;
	e->len = value ? len : 0;
	s->n++;
	return 0;
}

int secrets_set_add_item(struct secret_set *s, const char *scope, const char *name,
	const char *value, size_t len, const char *route, char *err, size_t errlen)
{
	const struct secret *e;
	const char *how = NULL;
	int i = secrets_set_find(s, scope, name), r;

	if (!route)
		route = "";
	if (i < 0) {
		r = secrets_set_put(s, scope, name, value, len);
		if (r == 0 && route[0])
			secrets_set_route(s, scope, name, route);
		return r;
	}
	e = &s->e[i];
	if (strcmp(e->route, route) != 0)
		how = "with different routes";
	else if (value && (!e->value || e->len != len || memcmp(e->value, value, len) != 0))
		how = "with different values";
	if (!how)
		return 0;
	seterr(err, errlen,
		"%s (%s) is stored twice in the keyring, %s (an earlier replacement could not "
		"remove the old item): run 'ocsb secrets %s%s rm %s', then set it again",
		name, scope[0] ? scope : "global", how, scope[0] ? "--project " : "--global",
		scope, name);
	return -EEXIST;
}

int secrets_route_ok(const char *route)
{
	size_t n = strnlen(route, SECRETS_MAX_ROUTE + 1);

	if (n == 0 || n > SECRETS_MAX_ROUTE)
		return -1;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)route[i] < 0x20 || (unsigned char)route[i] > 0x7e)
			return -1;
	return 0;
}

int secrets_set_route(
	struct secret_set *s, const char *scope, const char *name, const char *route)
{
	int i = secrets_set_find(s, scope, name);

	if (i < 0)
		return -ENOENT;
	if (route[0] && secrets_route_ok(route) < 0)
		return -EINVAL;
	snprintf(s->e[i].route, sizeof(s->e[i].route), "%s", route);
	return 0;
}

size_t secrets_exported_llm(const struct secret_set *s, char *out, size_t n)
{
	static const char *const llm[] = {"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY",
		"GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY", "OPENROUTER_API_KEY",
		"MISTRAL_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY"};
	size_t count = 0, k = 0;

	if (n)
		out[0] = '\0';
	for (size_t i = 0; i < s->n; i++) {
		if (s->e[i].route[0])
			continue;
		for (size_t j = 0; j < sizeof(llm) / sizeof(llm[0]); j++) {
			if (strcmp(s->e[i].name, llm[j]) != 0)
				continue;
			if (k < n)
				k += (size_t)snprintf(out + k, n - k, "%s%s", count ? "," : "",
					s->e[i].name);
			count++;
		}
	}
	return count;
}

int secrets_set_del(struct secret_set *s, const char *scope, const char *name)
{
	int i = secrets_set_find(s, scope, name);

	if (i < 0)
		return -ENOENT;
	secrets_free(s->e[i].value);
	memmove(&s->e[i], &s->e[i + 1], (s->n - (size_t)i - 1) * sizeof(s->e[0]));
	s->n--;
	memset(&s->e[s->n], 0, sizeof(s->e[0]));
	return 0;
}

/*
 * "OCSBSET1", count (u16 BE), then per entry: scope length (u8), scope, name length (u8),
 * name, value length (u16 BE), value. Sorted by (scope, name), no duplicates.
 * "OCSBSET2" when some entry is injected: each entry then ends with route length (u16 BE)
 * and route (0 = exported).
 */
int secrets_set_encode(const struct secret_set *s, unsigned char **ret, size_t *ret_len)
{
	size_t n = 10, k = 0;
	unsigned char *p;
	int v2 = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (!s->e[i].value)
			return -EINVAL;
		n += 1 + strlen(s->e[i].scope) + 1 + strlen(s->e[i].name) + 2 + s->e[i].len;
		n += 2 + strlen(s->e[i].route);
		v2 |= s->e[i].route[0] != 0;
	}
	if (!v2)
		n -= 2 * s->n;
	p = secrets_alloc(n);
	if (!p)
		return -ENOMEM;
	memcpy(p, v2 ? SET_MAGIC2 : SET_MAGIC, 8);
	p[8] = (unsigned char)(s->n >> 8);
	p[9] = (unsigned char)s->n;
	k = 10;
	for (size_t i = 0; i < s->n; i++) {
		const struct secret *e = &s->e[i];
		size_t sl = strlen(e->scope), nl = strlen(e->name);

		p[k++] = (unsigned char)sl;
		memcpy(p + k, e->scope, sl);
		k += sl;
		p[k++] = (unsigned char)nl;
		memcpy(p + k, e->name, nl);
		k += nl;
		p[k++] = (unsigned char)(e->len >> 8);
		p[k++] = (unsigned char)e->len;
		memcpy(p + k, e->value, e->len);
		k += e->len;
		if (v2) {
			size_t rl = strlen(e->route);
			p[k++] = (unsigned char)(rl >> 8);
			p[k++] = (unsigned char)rl;
			memcpy(p + k, e->route, rl);
			k += rl;
		}
	}
	*ret = p;
	*ret_len = n;
	return 0;
}

int secrets_set_decode(
	const unsigned char *p, size_t n, struct secret_set **ret, char *err, size_t errlen)
{
	struct secret_set *s;
	char scope[SECRETS_MAX_NAME + 1], name[SECRETS_MAX_NAME + 1], why[200];
	char route[SECRETS_MAX_ROUTE + 1];
	size_t k = 10, count;
	int r = -1, v2, any_route = 0;

	if (n < 10 || (memcmp(p, SET_MAGIC, 8) != 0 && memcmp(p, SET_MAGIC2, 8) != 0))
		return seterr(err, errlen, "not an ocsb secret set (bad magic)");
	v2 = memcmp(p, SET_MAGIC2, 8) == 0;
	count = (size_t)p[8] << 8 | p[9];
	if (count > SECRETS_MAX_COUNT)
		return seterr(err, errlen, "secret set of %zu entries (at most %d)", count,
			SECRETS_MAX_COUNT);
	s = secrets_set_new();
	if (!s)
		return seterr(err, errlen, "%s", secrets_alloc_error());
	for (size_t i = 0; i < count; i++) {
		size_t sl, nl, vl;

		/* Every length is checked against what is left before it is used. */
		if (k + 1 > n || (sl = p[k]) > SECRETS_MAX_NAME || k + 1 + sl + 1 > n)
			goto trunc;
		memcpy(scope, p + k + 1, sl);
		scope[sl] = '\0';
		k += 1 + sl;
		if ((nl = p[k]) > SECRETS_MAX_NAME || k + 1 + nl + 2 > n)
			goto trunc;
		memcpy(name, p + k + 1, nl);
		name[nl] = '\0';
		k += 1 + nl;
		vl = (size_t)p[k] << 8 | p[k + 1];
		k += 2;
		if (vl > n - k)
			goto trunc;
		if (memchr(scope, '\0', sl) || secrets_scope_ok(scope) < 0) {
			seterr(err, errlen, "entry %zu: invalid scope", i + 1);
			goto out;
		}
		if (memchr(name, '\0', nl) || secrets_name_ok(name, why, sizeof(why)) < 0) {
			seterr(err, errlen, "entry %zu: %s", i + 1,
				memchr(name, '\0', nl) ? "invalid secret name" : why);
			goto out;
		}
		if (!value_ok((const char *)p + k, vl)) {
			seterr(err, errlen,
				"entry %zu (%s): value empty, longer than %d bytes or holding a "
				"NUL byte",
				i + 1, name, SECRETS_MAX_VALUE);
			goto out;
		}
		if (s->n &&
			entry_cmp(s->e[s->n - 1].scope, s->e[s->n - 1].name, scope, name) >= 0) {
			seterr(err, errlen, "entry %zu (%s): out of order or duplicated", i + 1,
				name);
			goto out;
		}
		if (secrets_set_put(s, scope, name, (const char *)p + k, vl) < 0) {
			seterr(err, errlen, "%s", secrets_alloc_error());
			goto out;
		}
		k += vl;
		if (v2) {
			size_t rl;
			if (k + 2 > n || (rl = (size_t)p[k] << 8 | p[k + 1]) > SECRETS_MAX_ROUTE ||
				rl > n - k - 2)
				goto trunc;
			memcpy(route, p + k + 2, rl);
			route[rl] = '\0';
			k += 2 + rl;
			if (rl && (memchr(route, '\0', rl) ||
					  secrets_set_route(s, scope, name, route) < 0)) {
				seterr(err, errlen, "entry %zu (%s): invalid route", i + 1, name);
				goto out;
			}
			any_route |= rl != 0;
		}
	}
	/* One encoding per set: SET2 only when some entry is injected. */
	if (v2 && !any_route) {
		seterr(err, errlen, "OCSBSET2 without an injected entry");
		goto out;
	}
	if (k != n) {
		seterr(err, errlen, "%zu bytes after the last entry", n - k);
		goto out;
	}
	*ret = s;
	s = NULL;
	r = 0;
	goto out;
trunc:
	seterr(err, errlen, "truncated secret set");
out:
	secrets_set_free(s);
	sodium_memzero(scope, sizeof(scope));
	sodium_memzero(name, sizeof(name));
	return r;
}

size_t secrets_effective(const struct secret_set *s, const char *project, size_t idx[])
{
	size_t n = 0;

	/* Global first, then project entries replace or join them; s is sorted by name. */
	for (size_t i = 0; i < s->n; i++)
		if (!s->e[i].scope[0])
			idx[n++] = i;
	for (size_t i = 0; project && project[0] && i < s->n; i++) {
		size_t j;

		if (strcmp(s->e[i].scope, project) != 0)
			continue;
		for (j = 0; j < n; j++)
			if (!strcmp(s->e[idx[j]].name, s->e[i].name))
				break;
		if (j < n) {
			idx[j] = i;
			continue;
		}
		/* Insert keeping name order. */
		for (j = n; j > 0 && strcmp(s->e[idx[j - 1]].name, s->e[i].name) > 0; j--)
			idx[j] = idx[j - 1];
		idx[j] = i;
		n++;
	}
	return n;
}

size_t secrets_routed(const struct secret_set *s, const char *const projects[], size_t np,
	size_t idx[], size_t max)
{
	static const char *const global[] = {""};
	size_t eff[SECRETS_MAX_COUNT], n = 0, over = 0;

	if (!np) {
		projects = global;
		np = 1;
	}
	for (size_t p = 0; p < np; p++) {
		size_t ne = secrets_effective(s, projects[p], eff);

		for (size_t i = 0; i < ne; i++) {
			size_t j;

			if (!s->e[eff[i]].route[0])
				continue;
			for (j = 0; j < n && idx[j] != eff[i]; j++)
				;
			if (j < n)
				continue;
			if (n == max)
				over = 1;
			else
				idx[n++] = eff[i];
		}
	}
	return n + over;
}

void secrets_digest(const struct secret_set *s, const char *project,
	const unsigned char key[crypto_generichash_KEYBYTES],
	unsigned char out[crypto_generichash_BYTES])
{
	crypto_generichash_state st;
	size_t idx[SECRETS_MAX_COUNT], n = secrets_effective(s, project, idx);

	crypto_generichash_init(&st, key, crypto_generichash_KEYBYTES, crypto_generichash_BYTES);
	for (size_t i = 0; i < n; i++) {
		const struct secret *e = &s->e[idx[i]];
		unsigned char len[2] = {(unsigned char)(e->len >> 8), (unsigned char)e->len};

		/* Lengths and separators: no two different sets hash the same stream. */
		crypto_generichash_update(&st, (const unsigned char *)e->name, strlen(e->name) + 1);
		crypto_generichash_update(&st, len, 2);
		crypto_generichash_update(&st, (const unsigned char *)e->value, e->len);
		/* Injected or exported changes what OpenCode is given: a change restarts it. */
		crypto_generichash_update(&st, (const unsigned char *)e->route, strlen(e->route) + 1);
	}
	crypto_generichash_final(&st, out, crypto_generichash_BYTES);
	sodium_memzero(&st, sizeof(st));
}

int secrets_env_file(const struct secret_set *s, const char *project, const char *extra,
	char **ret, size_t *ret_len)
{
	size_t idx[SECRETS_MAX_COUNT], n = secrets_effective(s, project, idx), cap = 128, k = 0;
	static const char head[] = "# ocsb secrets, written by ocsb-agentd; sourced by the "
				   "agent's login shells\n";
	char *p;

	for (size_t i = 0; i < n; i++)
		cap += 16 + strlen(s->e[idx[i]].name) + 4 * s->e[idx[i]].len +
		       sizeof(SECRETS_PLACEHOLDER);
	cap += extra ? strlen(extra) : 0;
	p = secrets_alloc(cap);
	if (!p)
		return -ENOMEM;
	memcpy(p, head, sizeof(head) - 1);
	k = sizeof(head) - 1;
	for (size_t i = 0; i < n; i++) {
		const struct secret *e = &s->e[idx[i]];

		k += (size_t)sprintf(p + k, "export %s='", e->name);
		/* An injected key never reaches the agent: the placeholder stands in for it. */
		if (e->route[0]) {
			k += (size_t)sprintf(p + k, "%s", SECRETS_PLACEHOLDER);
			memcpy(p + k, "'\n", 2);
			k += 2;
			continue;
		}
		/* Single quotes: nothing inside is interpreted; a quote is closed, escaped, reopened. */
		for (size_t j = 0; j < e->len; j++) {
			if (e->value[j] == '\'') {
				memcpy(p + k, "'\\''", 4);
				k += 4;
			} else {
				p[k++] = e->value[j];
			}
		}
		memcpy(p + k, "'\n", 2);
		k += 2;
	}
	if (extra) {
		memcpy(p + k, extra, strlen(extra));
		k += strlen(extra);
	}
	p[k] = '\0';
	*ret = p;
	*ret_len = k;
	return 0;
}
