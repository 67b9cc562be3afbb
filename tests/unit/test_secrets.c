/* SPDX-License-Identifier: MIT */
/* The secrets formats: the set, sealed sets, the record at rest, the passphrase box. */
#define _GNU_SOURCE
#include "unit.h"

#include "../../secrets/secrets.h"

static int setup(void **state)
{
	(void)state;
	return sodium_init() < 0 ? -1 : 0;
}

static struct secret_set *sample(void)
{
	struct secret_set *s = secrets_set_new();

	assert_non_null(s);
	assert_int_equal(secrets_set_put(s, "", "B_KEY", "global-b", 8), 0);
	assert_int_equal(secrets_set_put(s, "shop", "B_KEY", "shop-b", 6), 0);
	assert_int_equal(secrets_set_put(s, "", "A_KEY", "it's", 4), 0);
	assert_int_equal(secrets_set_put(s, "blog", "C_KEY", "blog-c", 6), 0);
	return s;
}

static void names(void **state)
{
	char err[256];

	assert_int_equal(secrets_name_ok("ANTHROPIC_API_KEY", err, sizeof(err)), 0);
	assert_int_equal(secrets_name_ok("_X9", err, sizeof(err)), 0);
	assert_int_equal(secrets_name_ok("api_key", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "[A-Z_][A-Z0-9_]*"));
	assert_int_equal(secrets_name_ok("9KEY", err, sizeof(err)), -1);
	assert_int_equal(secrets_name_ok("A-B", err, sizeof(err)), -1);
	assert_int_equal(secrets_name_ok("", err, sizeof(err)), -1);
	char long_name[70];
	memset(long_name, 'K', 65);
	long_name[65] = '\0';
	assert_int_equal(secrets_name_ok(long_name, err, sizeof(err)), -1);
	long_name[64] = '\0';
	assert_int_equal(secrets_name_ok(long_name, err, sizeof(err)), 0);
	/* What ocsb sets for OpenCode, and what changes how programs load. */
	static const char *const reserved[] = {"PATH", "HOME", "LD_PRELOAD", "LD_LIBRARY_PATH",
		"HTTPS_PROXY", "NO_PROXY", "OPENCODE_SERVER_PASSWORD", "OPENCODE_PERMISSION",
		"BASH_ENV", "LC_ALL", "NODE_OPTIONS"};
	for (size_t i = 0; i < ARRAY_SIZE(reserved); i++) {
		if (secrets_name_ok(reserved[i], err, sizeof(err)) == 0)
			fail_msg("%s accepted", reserved[i]);
		assert_non_null(strstr(err, "reserved"));
	}
	assert_int_equal(secrets_scope_ok(""), 0);
	assert_int_equal(secrets_scope_ok("my-shop.v2_x"), 0);
	assert_int_equal(secrets_scope_ok(".."), -1);
	assert_int_equal(secrets_scope_ok("a/b"), -1);
	assert_int_equal(secrets_scope_ok("*"), -1);
}

static void set_operations(void **state)
{
	struct secret_set *s = sample();

	/* Sorted by (scope, name): global first. */
	assert_int_equal(s->n, 4);
	assert_string_equal(s->e[0].name, "A_KEY");
	assert_string_equal(s->e[1].name, "B_KEY");
	assert_string_equal(s->e[2].scope, "blog");
	assert_string_equal(s->e[3].scope, "shop");
	/* Replace keeps one entry. */
	assert_int_equal(secrets_set_put(s, "", "A_KEY", "new", 3), 0);
	assert_int_equal(s->n, 4);
	assert_string_equal(s->e[0].value, "new");
	assert_int_equal(secrets_set_put(s, "", "A_KEY", "a\0b", 3), -EINVAL);
	assert_int_equal(secrets_set_put(s, "", "A_KEY", "", 0), -EINVAL);
	assert_int_equal(secrets_set_put(s, "", "PATH", "x", 1), -EINVAL);
	assert_int_equal(secrets_set_put(s, "../x", "K", "x", 1), -EINVAL);
	assert_int_equal(secrets_set_del(s, "shop", "B_KEY"), 0);
	assert_int_equal(secrets_set_del(s, "shop", "B_KEY"), -ENOENT);
	assert_int_equal(s->n, 3);
	secrets_set_free(s);
	secrets_set_free(NULL);
}

/*
 * Keyring items as keyring_load adds them: two items of one (scope, name), which a store
 * whose removal of the old item failed leaves, are refused when their route or value
 * differs, instead of merged in the keyring's listing order.
 */
static void keyring_items(void **state)
{
	struct secret_set *s = secrets_set_new();
	char err[512] = "";

	assert_non_null(s);
	/* Control: distinct names, and the same item twice, load. */
	assert_int_equal(secrets_set_add_item(s, "", "A_KEY", "a", 1, NULL, err, sizeof(err)), 0);
	assert_int_equal(
		secrets_set_add_item(s, "", "B_KEY", "b", 1, "https://new.test", err, sizeof(err)), 0);
	assert_int_equal(
		secrets_set_add_item(s, "", "B_KEY", "b", 1, "https://new.test", err, sizeof(err)), 0);
	assert_int_equal(secrets_set_add_item(s, "shop", "B_KEY", "c", 1, "", err, sizeof(err)), 0);
	assert_int_equal(s->n, 3);
	assert_string_equal(s->e[1].route, "https://new.test");
	assert_string_equal(s->e[2].route, "");
	/* The key moved from one route host to another, the old item left behind. */
	assert_int_equal(
		secrets_set_add_item(s, "", "B_KEY", "b", 1, "https://old.test", err, sizeof(err)),
		-EEXIST);
	assert_string_equal(err,
		"B_KEY (global) is stored twice in the keyring, with different routes (an earlier "
		"replacement could not remove the old item): run 'ocsb secrets --global rm "
		"B_KEY', then set it again");
	assert_string_equal(s->e[1].route, "https://new.test");
	/* Exported before, injected now: different routes too. */
	assert_int_equal(secrets_set_add_item(s, "", "A_KEY", "a", 1, "anthropic", err, sizeof(err)),
		-EEXIST);
	/* The same route, another value; names only (no values) cannot tell. */
	assert_int_equal(
		secrets_set_add_item(s, "shop", "B_KEY", "d", 1, NULL, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "B_KEY (shop) is stored twice in the keyring, with different "
				    "values"));
	assert_non_null(strstr(err, "run 'ocsb secrets --project shop rm B_KEY'"));
	assert_int_equal(secrets_set_add_item(s, "shop", "B_KEY", NULL, 0, "", err, sizeof(err)), 0);
	/* An invalid item is for the caller to skip. */
	assert_int_equal(
		secrets_set_add_item(s, "", "PATH", "x", 1, NULL, err, sizeof(err)), -EINVAL);
	secrets_set_free(s);
}

static void set_limits(void **state)
{
	struct secret_set *s = secrets_set_new();
	char name[16], *big = malloc(SECRETS_MAX_VALUE + 1);

	memset(big, 'v', SECRETS_MAX_VALUE + 1);
	assert_int_equal(secrets_set_put(s, "", "BIG", big, SECRETS_MAX_VALUE), 0);
	assert_int_equal(secrets_set_put(s, "", "BIG", big, SECRETS_MAX_VALUE + 1), -EINVAL);
	for (int i = 1; i < SECRETS_MAX_COUNT; i++) {
		snprintf(name, sizeof(name), "K%d", i);
		assert_int_equal(secrets_set_put(s, "", name, "v", 1), 0);
	}
	assert_int_equal(secrets_set_put(s, "", "ONE_TOO_MANY", "v", 1), -ENOSPC);
	free(big);
	secrets_set_free(s);
}

static void effective_and_env(void **state)
{
	struct secret_set *s = sample();
	size_t idx[SECRETS_MAX_COUNT], n;
	char *text;
	size_t len;

	/* Global only. */
	n = secrets_effective(s, "", idx);
	assert_int_equal(n, 2);
	assert_string_equal(s->e[idx[1]].value, "global-b");
	/* The project overrides B_KEY; blog's C_KEY does not leak into shop. */
	n = secrets_effective(s, "shop", idx);
	assert_int_equal(n, 2);
	assert_string_equal(s->e[idx[0]].name, "A_KEY");
	assert_string_equal(s->e[idx[1]].value, "shop-b");
	n = secrets_effective(s, "blog", idx);
	assert_int_equal(n, 3);
	assert_string_equal(s->e[idx[2]].name, "C_KEY");
	/* Single quotes escaped: nothing in a value is interpreted by sh. */
	assert_int_equal(secrets_env_file(s, "shop", NULL, &text, &len), 0);
	assert_non_null(strstr(text, "\nexport A_KEY='it'\\''s'\nexport B_KEY='shop-b'\n"));
	assert_int_equal(len, strlen(text));
	assert_null(strstr(text, "global-b"));
	secrets_free(text);
	secrets_set_free(s);
}

static void digest_changes(void **state)
{
	unsigned char key[crypto_generichash_KEYBYTES] = {1}, d1[32], d2[32], d3[32];
	struct secret_set *s = sample();

	secrets_digest(s, "shop", key, d1);
	secrets_digest(s, "blog", key, d2);
	assert_memory_not_equal(d1, d2, 32);
	/* A change to blog only does not change shop's digest. */
	assert_int_equal(secrets_set_put(s, "blog", "C_KEY", "changed", 7), 0);
	secrets_digest(s, "shop", key, d3);
	assert_memory_equal(d1, d3, 32);
	/* A change to a global shop sees does. */
	assert_int_equal(secrets_set_put(s, "", "A_KEY", "changed", 7), 0);
	secrets_digest(s, "shop", key, d3);
	assert_memory_not_equal(d1, d3, 32);
	secrets_set_free(s);
}

static void set_roundtrip_and_strictness(void **state)
{
	struct secret_set *s = sample(), *t = NULL;
	unsigned char *p, *bad;
	char err[256];
	size_t n;

	assert_int_equal(secrets_set_encode(s, &p, &n), 0);
	assert_memory_equal(p, "OCSBSET1\0\4", 10);
	assert_int_equal(secrets_set_decode(p, n, &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_string_equal(t->e[i].scope, s->e[i].scope);
		assert_string_equal(t->e[i].name, s->e[i].name);
		assert_int_equal(t->e[i].len, s->e[i].len);
		assert_memory_equal(t->e[i].value, s->e[i].value, s->e[i].len);
	}
	secrets_set_free(t);
	bad = malloc(n + 1);
	/* Every truncation is refused, never read past. */
	for (size_t k = 0; k < n; k++)
		assert_int_equal(secrets_set_decode(p, k, &t, err, sizeof(err)), -1);
	/* Trailing bytes. */
	memcpy(bad, p, n);
	bad[n] = 'x';
	assert_int_equal(secrets_set_decode(bad, n + 1, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "after the last entry"));
	/* Bad magic. */
	memcpy(bad, p, n);
	bad[0] = 'X';
	assert_int_equal(secrets_set_decode(bad, n, &t, err, sizeof(err)), -1);
	/* A count beyond the limit. */
	memcpy(bad, p, n);
	bad[8] = 0xff;
	assert_int_equal(secrets_set_decode(bad, n, &t, err, sizeof(err)), -1);
	/* Out of order: swap the names of the first two (A_KEY, B_KEY, same length). */
	memcpy(bad, p, n);
	bad[10 + 1 + 1] = 'B';
	assert_int_equal(secrets_set_decode(bad, n, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "out of order or duplicated"));
	/* A lower-case name. */
	memcpy(bad, p, n);
	bad[10 + 1 + 1] = 'a';
	assert_int_equal(secrets_set_decode(bad, n, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "invalid secret name"));
	free(bad);
	secrets_free(p);
	secrets_set_free(s);
}

static void sealed_roundtrip_and_tamper(void **state)
{
	unsigned char pk[32], sk[32], pk2[32], sk2[32], *p;
	struct secret_set *s = sample(), *t = NULL;
	char *b64, err[256];
	size_t n, bl;

	crypto_box_keypair(pk, sk);
	crypto_box_keypair(pk2, sk2);
	assert_int_equal(secrets_set_encode(s, &p, &n), 0);
	assert_int_equal(secrets_seal(pk, p, n, &b64), 0);
	bl = strlen(b64);
	assert_int_equal(secrets_unseal(pk, sk, b64, bl, &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 4);
	secrets_set_free(t);
	/* Another key does not open it. */
	assert_int_equal(secrets_unseal(pk2, sk2, b64, bl, &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "do not open"));
	/* Any changed character of the base64 is refused. */
	for (size_t i = 0; i + 4 < bl; i += 7) {
		char saved = b64[i];

		b64[i] = b64[i] == 'A' ? 'B' : 'A';
		if (secrets_unseal(pk, sk, b64, bl, &t, err, sizeof(err)) == 0)
			fail_msg("tampered at %zu accepted", i);
		b64[i] = saved;
	}
	free(b64);
	/* A validly sealed but malformed set is refused by the set parser. */
	assert_int_equal(secrets_seal(pk, (const unsigned char *)"OCSBSET1\0\1", 10, &b64), 0);
	assert_int_equal(secrets_unseal(pk, sk, b64, strlen(b64), &t, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "truncated"));
	free(b64);
	secrets_free(p);
	secrets_set_free(s);
}

static void record_roundtrip_and_tamper(void **state)
{
	unsigned char sk[32], pk[32], key[32], key2[32];
	struct secret_set *s = sample(), *t = NULL;
	struct buf rec = {0};
	char err[256];

	crypto_box_keypair(pk, sk);
	secrets_rec_key(sk, key);
	sk[0] ^= 1;
	secrets_rec_key(sk, key2);
	assert_memory_not_equal(key, key2, 32);
	assert_int_equal(secrets_rec_seal(key, s, 1700000000, &rec), 0);
	assert_memory_equal(rec.data, SECRETS_REC_MAGIC, 8);
	/* No value in the clear. */
	assert_null(memmem(rec.data, rec.len, "global-b", 8));
	assert_int_equal(
		secrets_rec_open(key, (unsigned char *)rec.data, rec.len, &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 4);
	secrets_set_free(t);
	assert_int_equal(
		secrets_rec_open(key2, (unsigned char *)rec.data, rec.len, &t, err, sizeof(err)),
		-1);
	/* The header is authenticated: changing the time is detected. */
	rec.data[15] ^= 1;
	assert_int_equal(
		secrets_rec_open(key, (unsigned char *)rec.data, rec.len, &t, err, sizeof(err)),
		-1);
	rec.data[15] ^= 1;
	rec.data[rec.len - 1] ^= 1;
	assert_int_equal(
		secrets_rec_open(key, (unsigned char *)rec.data, rec.len, &t, err, sizeof(err)),
		-1);
	assert_int_equal(
		secrets_rec_open(key, (unsigned char *)rec.data, rec.len - 1, &t, err, sizeof(err)),
		-1);
	buf_free(&rec);
	secrets_set_free(s);
}

/* Cheap argon2id parameters: the format is under test, not the cost. */
#define OPS crypto_pwhash_OPSLIMIT_MIN
#define MEM (64 * 1024)

static void box_roundtrip_and_wrong_passphrase(void **state)
{
	struct secret_set *s = sample(), *t = NULL;
	struct buf box = {0};
	char err[256];
	unsigned char *p = NULL;

	assert_int_equal(secrets_box_seal("correct horse", 13, s, OPS, MEM, &box), 0);
	p = (unsigned char *)box.data;
	assert_memory_equal(p, SECRETS_BOX_MAGIC, 8);
	/* Parameters in the header, big-endian. */
	assert_int_equal(p[11], crypto_pwhash_ALG_ARGON2ID13);
	assert_int_equal(p[19], OPS);
	assert_int_equal((p[25] << 16) | (p[26] << 8) | p[27], MEM);
	assert_null(memmem(box.data, box.len, "global-b", 8));
	assert_int_equal(
		secrets_box_open("correct horse", 13, p, box.len, &t, err, sizeof(err)), 0);
	assert_int_equal(t->n, 4);
	assert_string_equal(t->e[0].value, "it's");
	secrets_set_free(t);
	/* A wrong passphrase: one clear error. */
	assert_int_equal(
		secrets_box_open("wrong horse", 11, p, box.len, &t, err, sizeof(err)), -EBADMSG);
	assert_string_equal(err, "wrong passphrase (or the secrets box was altered)");
	/* The parameters are authenticated: lowering them is detected, not obeyed silently. */
	p[19] = OPS + 1;
	assert_int_equal(
		secrets_box_open("correct horse", 13, p, box.len, &t, err, sizeof(err)), -EBADMSG);
	p[19] = OPS;
	/* Absurd parameters are refused before any work. */
	p[12] = 0xff;
	assert_int_equal(
		secrets_box_open("correct horse", 13, p, box.len, &t, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unsupported key derivation"));
	p[12] = 0;
	/* Truncated. */
	assert_int_equal(
		secrets_box_open("correct horse", 13, p, box.len - 1, &t, err, sizeof(err)),
		-EINVAL);
	assert_int_equal(
		secrets_box_open("correct horse", 13, p, 10, &t, err, sizeof(err)), -EINVAL);
	/* Out-of-range parameters are not written either. */
	assert_int_equal(secrets_box_seal("x", 1, s, 0, MEM, &box), -EINVAL);
	buf_free(&box);
	secrets_set_free(s);
}

/*
 * libsodium 1.0.18 decodes every byte from 0x80 up as '/': a public key file or a push with
 * one in place of a '/' was taken as the text with the '/' (found by
 * tests/fuzz/fuzz_secrets.c, regress-pubkey-non-ascii, regress-push-non-ascii). Only the
 * base64 alphabet is read now; the controls are the same texts with the '/'.
 */
static void base64_alphabet_only(void **state)
{
	unsigned char pk[32], sk[32], pk2[32], *p;
	struct secret_set *s = sample(), *t = NULL;
	struct buf b = {0};
	char *b64 = NULL, *slash = NULL, err[256];
	size_t n;

	(void)state;
	crypto_box_keypair(pk, sk);
	assert_int_equal(secrets_pub_render(pk, &b), 0);
	b.data[20] = '/';
	assert_int_equal(secrets_pub_parse(b.data, b.len, pk2), 0);
	b.data[20] = (char)0xb0;
	assert_int_equal(secrets_pub_parse(b.data, b.len, pk2), -EINVAL);
	buf_free(&b);

	assert_int_equal(secrets_set_encode(s, &p, &n), 0);
	/* A push whose text holds a '/' (almost every one does). */
	for (int i = 0; i < 100 && !slash; i++) {
		free(b64);
		assert_int_equal(secrets_seal(pk, p, n, &b64), 0);
		slash = strchr(b64, '/');
	}
	assert_non_null(slash);
	assert_int_equal(secrets_unseal(pk, sk, b64, strlen(b64), &t, err, sizeof(err)), 0);
	secrets_set_free(t);
	*slash = (char)0xff;
	assert_int_equal(secrets_unseal(pk, sk, b64, strlen(b64), &t, err, sizeof(err)), -1);
	assert_string_equal(err, "sealed secrets: invalid base64");
	free(b64);
	secrets_free(p);
	secrets_set_free(s);
}

static void keys(void **state)
{
	unsigned char pk[32], sk[32], pk2[32], sk2[32];
	struct buf b = {0};
	char path[PATH_MAX + 32], err[256];
	int fd;

	crypto_box_keypair(pk, sk);
	assert_int_equal(secrets_pub_render(pk, &b), 0);
	assert_int_equal(strncmp(b.data, "ocsb-secrets-pk-v1 ", 19), 0);
	assert_int_equal(secrets_pub_parse(b.data, b.len, pk2), 0);
	assert_memory_equal(pk, pk2, 32);
	assert_int_equal(secrets_pub_parse(b.data, b.len - 1, pk2), -EINVAL);
	b.data[20] = '!';
	assert_int_equal(secrets_pub_parse(b.data, b.len, pk2), -EINVAL);
	buf_free(&b);
	/* The private key: this test does not run as root, so its own file is refused. */
	snprintf(path, sizeof(path), "%s/secrets.key", unit_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, sk, 32), 32);
	close(fd);
	assert_int_equal(
		secrets_key_load(path, sk2, pk2, err, sizeof(err)), geteuid() == 0 ? 0 : -EPERM);
	snprintf(path, sizeof(path), "%s/missing.key", unit_dir);
	assert_int_equal(secrets_key_load(path, sk2, pk2, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "ocsb-provision"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test(set_operations),
		cmocka_unit_test(keyring_items),
		cmocka_unit_test(set_limits),
		cmocka_unit_test(effective_and_env),
		cmocka_unit_test(digest_changes),
		cmocka_unit_test(set_roundtrip_and_strictness),
		cmocka_unit_test(sealed_roundtrip_and_tamper),
		cmocka_unit_test(record_roundtrip_and_tamper),
		cmocka_unit_test(box_roundtrip_and_wrong_passphrase),
		cmocka_unit_test(base64_alphabet_only),
		cmocka_unit_test_setup_teardown(keys, unit_setup_dir, unit_teardown_dir),
	};

	if (setup(NULL) < 0)
		return 1;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
