/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the secrets formats (secrets/format.c, secrets/crypto.c): the set
 * (OCSBSET1/2), the sealed hand-over `ocsb secrets push` sends ocsb-agentd, agentd's record
 * at rest (OCSBREC1), the owner's passphrase box (OCSBBOX1), the public key file and the
 * environment file sourced by the agent's shells. The input is taken as each of them (the
 * keys are fixed, derived from a constant seed). Besides the sanitizers' findings, abort()
 * when:
 *   - a set that decodes is not encoded back to the very same bytes (one encoding per set),
 *     or holds an entry the setters would refuse (name, scope, value, route, order);
 *   - the environment file of a set, read back as sh reads single quotes, does not give
 *     each effective entry's value (the placeholder for an injected one), one export each;
 *   - sealing the input and opening it again does not give back the same set exactly when
 *     the input decodes as a set, or opens what does not (the push's round trip);
 *   - a record or a box sealed from the set does not open to it, or opens with one byte
 *     changed (ciphertext, nonce, salt or the parameters in the header);
 *   - the input taken as a sealed push, a record or a box fails without a message, a push
 *     that is not base64 text opens, or a public key file that parses does not render to
 *     the same bytes.
 * Boxes with key derivation parameters that cost more than a few milliseconds are not
 * opened as they are (their header checks are; the derivation is libsodium's).
 * Build and run: `make fuzz FUZZ_ONLY=secrets` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "secrets.h"
#include "fuzz_util.h"

static unsigned char pk[crypto_box_PUBLICKEYBYTES], sk[crypto_box_SECRETKEYBYTES];
static unsigned char reckey[crypto_aead_xchacha20poly1305_ietf_KEYBYTES];

#define B64 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="

/* The cheapest derivation the box takes: a box here costs a millisecond, not seconds. */
#define BOX_OPS 1
#define BOX_MEM 8192

static void init_once(void)
{
	static int done;
	unsigned char seed[crypto_box_SEEDBYTES];

	if (done)
		return;
	CHECK(sodium_init() >= 0);
	memset(seed, 0x42, sizeof(seed));
	CHECK(crypto_box_seed_keypair(pk, sk, seed) == 0);
	secrets_rec_key(sk, reckey);
	done = 1;
}

static uint64_t be64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

static void check_message(int r, const char *err)
{
	CHECK(r < 0 && err[0]);
}

/* Everything the setters would accept, and in the order the encoding requires. */
static void check_set(const struct secret_set *s)
{
	CHECK(s->n <= SECRETS_MAX_COUNT);
	for (size_t i = 0; i < s->n; i++) {
		const struct secret *e = &s->e[i];

		CHECK(secrets_scope_ok(e->scope) == 0 && secrets_name_ok(e->name, NULL, 0) == 0);
		CHECK(e->value && e->len >= 1 && e->len <= SECRETS_MAX_VALUE);
		CHECK(e->value[e->len] == '\0' && strlen(e->value) == e->len);
		CHECK(!e->route[0] || secrets_route_ok(e->route) == 0);
		if (i)
			CHECK(strcmp(s->e[i - 1].scope, e->scope) < 0 ||
				(!strcmp(s->e[i - 1].scope, e->scope) &&
					strcmp(s->e[i - 1].name, e->name) < 0));
		CHECK(secrets_set_find(s, e->scope, e->name) == (int)i);
	}
}

static void check_same_encoding(const struct secret_set *s, const uint8_t *p, size_t n)
{
	unsigned char *enc;
	size_t len;

	CHECK(secrets_set_encode(s, &enc, &len) == 0);
	CHECK(len == n && !memcmp(enc, p, n));
	secrets_free(enc);
}

/* The env file read as sh reads it: export NAME='...' with '\'' for a quote. */
static void check_env(const struct secret_set *s, const char *project)
{
	size_t idx[SECRETS_MAX_COUNT], n = secrets_effective(s, project, idx), len;
	char *env, *p, *val;

	CHECK(n <= s->n);
	for (size_t i = 0; i < n; i++) {
		const struct secret *e = &s->e[idx[i]];
		CHECK(!e->scope[0] || !strcmp(e->scope, project));
		if (i)
			CHECK(strcmp(s->e[idx[i - 1]].name, e->name) < 0);
	}
	CHECK(secrets_env_file(s, project, NULL, &env, &len) == 0);
	CHECK(strlen(env) == len);
	p = strchr(env, '\n');
	CHECK(env[0] == '#' && p);
	p++;
	val = malloc(SECRETS_MAX_VALUE + 1);
	CHECK(val != NULL);
	for (size_t i = 0; i < n; i++) {
		const struct secret *e = &s->e[idx[i]];
		size_t nl = strlen(e->name), k = 0;

		CHECK(!strncmp(p, "export ", 7) && !strncmp(p + 7, e->name, nl) &&
			!strncmp(p + 7 + nl, "='", 2));
		p += 7 + nl + 2;
		for (;;) {
			CHECK(*p != '\0' && k <= SECRETS_MAX_VALUE);
			if (*p != '\'') {
				val[k++] = *p++;
			} else if (!strncmp(p, "'\\''", 4)) {
				val[k++] = '\'';
				p += 4;
			} else {
				p++;
				break;
			}
		}
		CHECK(*p++ == '\n');
		if (e->route[0])
			CHECK(k == strlen(SECRETS_PLACEHOLDER) &&
				!memcmp(val, SECRETS_PLACEHOLDER, k));
		else
			CHECK(k == e->len && !memcmp(val, e->value, k));
	}
	CHECK(*p == '\0');
	free(val);
	secrets_free(env);
}

/* Sealed to agentd's key and opened again: the same set, or the same refusal. */
static void check_push(const uint8_t *data, size_t size, int decodes)
{
	struct secret_set *s = NULL;
	char *b64, err[512];
	int r;

	if (size > SECRETS_MAX_PUSH)
		return;
	CHECK(secrets_seal(pk, data, size, &b64) == 0);
	err[0] = '\0';
	r = secrets_unseal(pk, sk, b64, strlen(b64), &s, err, sizeof(err));
	CHECK((r == 0) == (decodes && size > 0));
	if (r == 0) {
		check_set(s);
		check_same_encoding(s, data, size);
		secrets_set_free(s);
	} else {
		check_message(r, err);
	}
	free(b64);
}

/* A record and a box of the set open to it, and not with one byte changed. */
static void check_sealed(const struct secret_set *s, const uint8_t *data, size_t size)
{
	struct buf rec = {0}, box = {0};
	struct secret_set *back = NULL;
	unsigned char *enc;
	size_t len, at;
	char err[512];
	const char *pass = size > 8 ? (const char *)data + size - 8 : "";
	size_t plen = size > 8 ? 8 : 0;

	CHECK(secrets_set_encode(s, &enc, &len) == 0);
	CHECK(secrets_rec_seal(reckey, s, (long long)size, &rec) == 0);
	CHECK(secrets_rec_open(reckey, (const unsigned char *)rec.data, rec.len, &back, err,
		      sizeof(err)) == 0);
	check_same_encoding(back, enc, len);
	secrets_set_free(back);
	at = (size * 7919) % rec.len;
	rec.data[at] ^= 0x01;
	err[0] = '\0';
	check_message(secrets_rec_open(reckey, (const unsigned char *)rec.data, rec.len, &back, err,
			      sizeof(err)),
		err);

	CHECK(secrets_box_seal(pass, plen, s, BOX_OPS, BOX_MEM, &box) == 0);
	CHECK(secrets_box_open(pass, plen, (const unsigned char *)box.data, box.len, &back, err,
		      sizeof(err)) == 0);
	check_same_encoding(back, enc, len);
	secrets_set_free(back);
	/* Any byte: the magic, the parameters (refused or a key of their own), salt, nonce. */
	at = (size * 104729) % box.len;
	box.data[at] ^= 0x01;
	err[0] = '\0';
	{
		int r = secrets_box_open(pass, plen, (const unsigned char *)box.data, box.len,
			&back, err, sizeof(err));
		check_message(r, err);
		CHECK(r == -EINVAL || r == -EBADMSG);
	}
	secrets_free(enc);
	buf_free(&rec);
	buf_free(&box);
}

/* The input as what the network, the disk or the owner hands over. */
static void check_foreign(const uint8_t *data, size_t size)
{
	struct secret_set *s = NULL;
	unsigned char key[crypto_box_PUBLICKEYBYTES];
	char err[512];
	int r;

	err[0] = '\0';
	r = secrets_unseal(pk, sk, (const char *)data, size, &s, err, sizeof(err));
	if (r == 0) {
		/* Only base64 text opens (one text per push). */
		for (size_t i = 0; i < size; i++)
			CHECK(data[i] && strchr(B64, data[i]));
		check_set(s);
		secrets_set_free(s);
	} else {
		check_message(r, err);
	}
	err[0] = '\0';
	s = NULL;
	r = secrets_rec_open(reckey, data, size, &s, err, sizeof(err));
	if (r == 0) {
		check_set(s);
		secrets_set_free(s);
	} else {
		check_message(r, err);
	}
	/* A box's header asks for the derivation's cost: only cheap ones are derived here. */
	if (size >= SECRETS_BOX_HEADER) {
		uint64_t ops = be64(data + 12), mem = be64(data + 20);
		int cheap = ops <= 3 && mem <= 65536;
		int refused = ops < crypto_pwhash_OPSLIMIT_MIN || ops > SECRETS_BOX_MAX_OPS ||
			mem < crypto_pwhash_MEMLIMIT_MIN || mem > SECRETS_BOX_MAX_MEM;

		if (cheap || refused || memcmp(data, SECRETS_BOX_MAGIC, 8)) {
			err[0] = '\0';
			s = NULL;
			r = secrets_box_open("pass", 4, data, size, &s, err, sizeof(err));
			if (r == 0) {
				check_set(s);
				secrets_set_free(s);
			} else {
				check_message(r, err);
			}
		}
	}
	if (secrets_pub_parse((const char *)data, size, key) == 0) {
		struct buf b = {0};
		CHECK(secrets_pub_render(key, &b) == 0);
		CHECK(b.len == size && !memcmp(b.data, data, size));
		buf_free(&b);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct secret_set *s = NULL;
	char err[512];
	int decodes;

	init_once();
	err[0] = '\0';
	decodes = secrets_set_decode(data, size, &s, err, sizeof(err)) == 0;
	if (decodes) {
		const char *project = "";

		check_set(s);
		check_same_encoding(s, data, size);
		for (size_t i = 0; i < s->n && !project[0]; i++)
			project = s->e[i].scope;
		check_env(s, "");
		check_env(s, project);
		check_sealed(s, data, size);
		secrets_set_free(s);
	} else {
		check_message(-1, err);
	}
	check_push(data, size, decodes);
	check_foreign(data, size);
	return 0;
}
