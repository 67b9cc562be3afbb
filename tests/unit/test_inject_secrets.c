/* SPDX-License-Identifier: MIT */
/*
 * Injected secrets in the secrets formats (issue 17): the route travels with the set
 * (OCSBSET2 only when some entry is injected, so older sets keep their one encoding), the
 * ssh env file holds a placeholder where an injected value would be, and the digest that
 * decides OpenCode restarts sees a switch between exported and injected.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "../../inject/inject.h"
#include "../../secrets/secrets.h"

#define VALUE "sk-ant-REAL-value-77"

static struct secret_set *two(void)
{
	struct secret_set *s = secrets_set_new();

	assert_non_null(s);
	assert_int_equal(secrets_set_put(s, "", "ANTHROPIC_API_KEY", VALUE, strlen(VALUE)), 0);
	assert_int_equal(secrets_set_put(s, "", "PLAIN_TOKEN", "plain-1", 7), 0);
	return s;
}

static void route_round_trip(void **state)
{
	struct secret_set *s = two(), *back = NULL;
	unsigned char *p;
	size_t n;
	char err[256];

	(void)state;
	/* Exported only: the old encoding, byte for byte. */
	assert_int_equal(secrets_set_encode(s, &p, &n), 0);
	assert_memory_equal(p, "OCSBSET1", 8);
	secrets_free(p);
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", "anthropic"), 0);
	assert_int_equal(secrets_set_route(s, "", "NOPE", "anthropic"), -ENOENT);
	assert_int_equal(secrets_set_route(s, "", "PLAIN_TOKEN", "bad\nroute"), -EINVAL);
	assert_int_equal(secrets_set_encode(s, &p, &n), 0);
	assert_memory_equal(p, "OCSBSET2", 8);
	assert_int_equal(secrets_set_decode(p, n, &back, err, sizeof(err)), 0);
	assert_string_equal(back->e[0].route, "anthropic");
	assert_string_equal(back->e[1].route, "");
	assert_string_equal(back->e[0].value, VALUE);
	secrets_set_free(back);
	/* Truncated anywhere: refused. */
	for (size_t cut = 10; cut < n; cut++)
		if (secrets_set_decode(p, cut, &back, err, sizeof(err)) == 0)
			fail_msg("accepted a set cut at %zu of %zu", cut, n);
	/* SET2 with no route in it is not canonical. */
	secrets_free(p);
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", ""), 0);
	assert_int_equal(secrets_set_encode(s, &p, &n), 0);
	{
		unsigned char *q = malloc(n + 4);
		size_t k = 10, m = 10;
		memcpy(q, "OCSBSET2", 8);
		memcpy(q + 8, p + 8, 2);
		/* each entry: copy it and append an empty route */
		for (size_t i = 0; i < 2; i++) {
			size_t sl = p[k], nl = p[k + 1 + sl], vl;
			size_t len = 1 + sl + 1 + nl;
			vl = (size_t)p[k + len] << 8 | p[k + len + 1];
			len += 2 + vl;
			memcpy(q + m, p + k, len);
			m += len;
			k += len;
			q[m++] = 0;
			q[m++] = 0;
		}
		assert_int_equal(secrets_set_decode(q, m, &back, err, sizeof(err)), -1);
		/* Control: the same bytes as SET1 without the empty routes decode. */
		assert_int_equal(secrets_set_decode(p, n, &back, err, sizeof(err)), 0);
		secrets_set_free(back);
		free(q);
	}
	secrets_free(p);
	secrets_set_free(s);
}

static void env_file_has_placeholder(void **state)
{
	struct secret_set *s = two();
	char *text;
	size_t len;

	(void)state;
	assert_int_equal(secrets_env_file(s, "", NULL, &text, &len), 0);
	/* Control: exported, the value is there. */
	assert_non_null(strstr(text, "export ANTHROPIC_API_KEY='" VALUE "'\n"));
	secrets_free(text);
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", "anthropic"), 0);
	assert_int_equal(secrets_env_file(s, "", NULL, &text, &len), 0);
	assert_null(strstr(text, VALUE));
	assert_non_null(strstr(text, "export ANTHROPIC_API_KEY='" SECRETS_PLACEHOLDER "'\n"));
	assert_non_null(strstr(text, "export PLAIN_TOKEN='plain-1'\n"));
	secrets_free(text);
	secrets_set_free(s);
}

/* Every project's injected overrides get a route of their own, after the first project's. */
static void routed_per_project(void **state)
{
	struct secret_set *s = two();
	static const char *const pr[] = {"shop", "cart", "other"};
	size_t idx[8], n;

	(void)state;
	assert_int_equal(secrets_set_put(s, "", "GIT_TOKEN", "g", 1), 0);
	assert_int_equal(secrets_set_put(s, "cart", "ANTHROPIC_API_KEY", "c", 1), 0);
	assert_int_equal(secrets_set_put(s, "other", "ANTHROPIC_API_KEY", "o", 1), 0);
	/* Control: nothing injected, nothing routed. */
	assert_int_equal(secrets_routed(s, pr, 3, idx, 8), 0);
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", "anthropic"), 0);
	assert_int_equal(secrets_set_route(s, "", "GIT_TOKEN", "https://git.example A: {}"), 0);
	assert_int_equal(secrets_set_route(s, "cart", "ANTHROPIC_API_KEY", "anthropic"), 0);
	/* other's override stays exported: no route of its own, none of the global's either */
	n = secrets_routed(s, pr, 3, idx, 8);
	assert_int_equal(n, 3);
	assert_string_equal(s->e[idx[0]].name, "ANTHROPIC_API_KEY");
	assert_string_equal(s->e[idx[0]].scope, "");
	assert_string_equal(s->e[idx[1]].name, "GIT_TOKEN");
	assert_string_equal(s->e[idx[2]].name, "ANTHROPIC_API_KEY");
	assert_string_equal(s->e[idx[2]].scope, "cart");
	/* The first project's order does not depend on the others. */
	assert_int_equal(secrets_routed(s, pr + 1, 1, idx, 8), 2);
	assert_string_equal(s->e[idx[0]].scope, "cart");
	assert_string_equal(s->e[idx[1]].name, "GIT_TOKEN");
	/* No projects: the global ones; too many: max + 1. */
	assert_int_equal(secrets_routed(s, NULL, 0, idx, 8), 2);
	assert_int_equal(secrets_routed(s, pr, 3, idx, 2), 3);
	secrets_set_free(s);
}

static void env_file_extra(void **state)
{
	struct secret_set *s = two();
	char *text;
	size_t len;

	(void)state;
	assert_int_equal(secrets_env_file(s, "", "export GIT_CONFIG_COUNT=1\n", &text, &len), 0);
	assert_int_equal(len, strlen(text));
	assert_non_null(strstr(text, "export PLAIN_TOKEN='plain-1'\nexport GIT_CONFIG_COUNT=1\n"));
	secrets_free(text);
	secrets_set_free(s);
}

static void digest_sees_the_route(void **state)
{
	struct secret_set *s = two();
	unsigned char key[crypto_generichash_KEYBYTES] = {1}, a[crypto_generichash_BYTES],
						     b[crypto_generichash_BYTES];

	(void)state;
	secrets_digest(s, "", key, a);
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", "anthropic"), 0);
	secrets_digest(s, "", key, b);
	assert_memory_not_equal(a, b, sizeof(a));
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", ""), 0);
	secrets_digest(s, "", key, b);
	assert_memory_equal(a, b, sizeof(a));
	secrets_set_free(s);
}

static void exported_llm_keys(void **state)
{
	struct secret_set *s = two();
	char names[128];

	(void)state;
	/* PLAIN_TOKEN is no LLM key; ANTHROPIC_API_KEY is, while exported. */
	assert_int_equal(secrets_exported_llm(s, names, sizeof(names)), 1);
	assert_string_equal(names, "ANTHROPIC_API_KEY");
	assert_int_equal(secrets_set_put(s, "shop", "OPENAI_API_KEY", "o", 1), 0);
	assert_int_equal(secrets_exported_llm(s, names, sizeof(names)), 2);
	assert_string_equal(names, "ANTHROPIC_API_KEY,OPENAI_API_KEY");
	assert_int_equal(secrets_set_route(s, "", "ANTHROPIC_API_KEY", "anthropic"), 0);
	assert_int_equal(secrets_set_route(s, "shop", "OPENAI_API_KEY", "openai"), 0);
	assert_int_equal(secrets_exported_llm(s, names, sizeof(names)), 0);
	assert_string_equal(names, "");
	secrets_set_free(s);
}

static void route_specs(void **state)
{
	struct inj_route r;
	char err[256];

	(void)state;
	assert_int_equal(inj_route_spec(&r, "openai", err, sizeof(err)), 0);
	assert_string_equal(r.host, "api.openai.com");
	assert_string_equal(r.htmpl, "Bearer {}");
	assert_int_equal(inj_route_spec(&r, "https://api.github.com Authorization: Bearer {}",
				 err, sizeof(err)),
		0);
	assert_string_equal(r.host, "api.github.com");
	assert_string_equal(r.hname, "Authorization");
	assert_int_equal(inj_route_spec(&r, "nosuchprovider", err, sizeof(err)), -1);
	assert_int_equal(inj_route_spec(&r, "https://api.github.com", err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(route_round_trip),
		cmocka_unit_test(env_file_has_placeholder),
		cmocka_unit_test(digest_sees_the_route),
		cmocka_unit_test(routed_per_project),
		cmocka_unit_test(env_file_extra),
		cmocka_unit_test(exported_llm_keys),
		cmocka_unit_test(route_specs),
	};

	if (sodium_init() < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
