/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secrets.h"
#include "util.h"

#define PUB_PREFIX "ocsb-secrets-pk-v1 "
#define REC_KDF_CONTEXT "ocsb secrets at-rest key v1"

static void put_be32(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)(v >> 24);
	p[1] = (unsigned char)(v >> 16);
	p[2] = (unsigned char)(v >> 8);
	p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be64(unsigned char *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static uint64_t get_be64(const unsigned char *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/*
 * Only the base64 alphabet: libsodium 1.0.18's sodium_base642bin decodes every byte from
 * 0x80 up as '/' (a text with one is taken for another), so the alphabet is checked here.
 */
static int b64_alphabet(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			    c == '+' || c == '/' || c == '='))
			return 0;
	}
	return 1;
}

/* ---- keys ---- */

/*
 * The key's owner: root (as ocsb-provision makes it), or the supervisor's account, which
 * ocsb-warden gives it to at start (issue 26: the supervisor opens the pushes as itself).
 * Either way nobody else may read or replace it.
 */
static int key_owner_ok(uid_t uid)
{
	struct user_info u;

	return uid == 0 || (user_lookup(SECRETS_KEY_USER, &u) == 0 && u.uid == uid && u.uid != 0);
}

int secrets_key_load(const char *path, unsigned char sk[crypto_box_SECRETKEYBYTES],
	unsigned char pk[crypto_box_PUBLICKEYBYTES], char *err, size_t errlen)
{
	struct stat st;
	ssize_t k;
	int fd, r = -EINVAL;

	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		seterr(err, errlen, "%s: %s%s", path, strerror(errno),
			errno == ENOENT ? " (run ocsb-provision to create it)" : "");
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		seterr(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	/* Anyone else able to read or replace it could open every pushed secret. */
	if (!key_owner_ok(st.st_uid) || (st.st_mode & 077)) {
		r = -EPERM;
		seterr(err, errlen,
			"%s: owner uid %u mode %04o; must be owned by root or %s with mode 0600 "
			"(run ocsb-provision to fix, then push the secrets again)",
			path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), SECRETS_KEY_USER);
		goto out;
	}
	if (st.st_size != crypto_box_SECRETKEYBYTES) {
		seterr(err, errlen, "%s: %lld bytes, expected %d", path, (long long)st.st_size,
			crypto_box_SECRETKEYBYTES);
		goto out;
	}
	k = read(fd, sk, crypto_box_SECRETKEYBYTES);
	if (k != crypto_box_SECRETKEYBYTES) {
		seterr(err, errlen, "%s: short read", path);
		sodium_memzero(sk, crypto_box_SECRETKEYBYTES);
		goto out;
	}
	crypto_scalarmult_base(pk, sk);
	r = 0;
out:
	close(fd);
	return r;
}

int secrets_pub_render(const unsigned char pk[crypto_box_PUBLICKEYBYTES], struct buf *out)
{
	char b64[sodium_base64_ENCODED_LEN(
		crypto_box_PUBLICKEYBYTES, sodium_base64_VARIANT_ORIGINAL)];

	sodium_bin2base64(
		b64, sizeof(b64), pk, crypto_box_PUBLICKEYBYTES, sodium_base64_VARIANT_ORIGINAL);
	return buf_printf(out, PUB_PREFIX "%s\n", b64);
}

int secrets_pub_parse(const char *text, size_t len, unsigned char pk[crypto_box_PUBLICKEYBYTES])
{
	size_t plen = strlen(PUB_PREFIX), got = 0;
	const char *end = NULL;

	if (len < plen + 2 || memcmp(text, PUB_PREFIX, plen) != 0 || text[len - 1] != '\n' ||
		!b64_alphabet(text + plen, len - plen - 1))
		return -EINVAL;
	if (sodium_base642bin(pk, crypto_box_PUBLICKEYBYTES, text + plen, len - plen - 1, NULL,
		    &got, &end, sodium_base64_VARIANT_ORIGINAL) < 0 ||
		got != crypto_box_PUBLICKEYBYTES || end != text + len - 1)
		return -EINVAL;
	return 0;
}

/* ---- sealed sets ---- */

int secrets_seal(const unsigned char pk[crypto_box_PUBLICKEYBYTES], const unsigned char *plain,
	size_t len, char **ret)
{
	size_t clen = len + crypto_box_SEALBYTES,
	       blen = sodium_base64_ENCODED_LEN(clen, sodium_base64_VARIANT_ORIGINAL);
	unsigned char *c = malloc(clen);
	char *b = malloc(blen);

	if (!c || !b || crypto_box_seal(c, plain, len, pk) < 0) {
		free(c);
		free(b);
		return -ENOMEM;
	}
	sodium_bin2base64(b, blen, c, clen, sodium_base64_VARIANT_ORIGINAL);
	free(c);
	*ret = b;
	return 0;
}

int secrets_unseal(const unsigned char pk[crypto_box_PUBLICKEYBYTES],
	const unsigned char sk[crypto_box_SECRETKEYBYTES], const char *b64, size_t b64len,
	struct secret_set **ret, char *err, size_t errlen)
{
	size_t clen = 0, cap = b64len / 4 * 3 + 3;
	unsigned char *c = malloc(cap), *plain = NULL;
	int r = -1;

	if (!c)
		return seterr(err, errlen, "out of memory");
	if (!b64_alphabet(b64, b64len) ||
		sodium_base642bin(c, cap, b64, b64len, NULL, &clen, NULL,
			sodium_base64_VARIANT_ORIGINAL) < 0) {
		seterr(err, errlen, "sealed secrets: invalid base64");
		goto out;
	}
	if (clen <= crypto_box_SEALBYTES || clen - crypto_box_SEALBYTES > SECRETS_MAX_PUSH) {
		seterr(err, errlen, "sealed secrets: %zu bytes, expected %d to %d", clen,
			crypto_box_SEALBYTES + 1, crypto_box_SEALBYTES + SECRETS_MAX_PUSH);
		goto out;
	}
	plain = secrets_alloc(clen - crypto_box_SEALBYTES);
	if (!plain) {
		seterr(err, errlen, "%s", secrets_alloc_error());
		goto out;
	}
	if (crypto_box_seal_open(plain, c, clen, pk, sk) < 0) {
		seterr(err, errlen,
			"sealed secrets do not open with this ocsb-agentd's key (altered, or "
			"sealed to another key: was ocsb-provision re-run? push again)");
		goto out;
	}
	r = secrets_set_decode(plain, clen - crypto_box_SEALBYTES, ret, err, errlen);
out:
	free(c);
	secrets_free(plain);
	return r;
}

/* ---- the record at rest ---- */

void secrets_rec_key(const unsigned char sk[crypto_box_SECRETKEYBYTES],
	unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES])
{
	/* A key of its own for the record, bound to the private key by a keyed hash. */
	crypto_generichash(key, crypto_aead_xchacha20poly1305_ietf_KEYBYTES,
		(const unsigned char *)REC_KDF_CONTEXT, strlen(REC_KDF_CONTEXT), sk,
		crypto_box_SECRETKEYBYTES);
}

/*
 * magic "OCSBREC1" | stored (u64 BE, unix time) | nonce (24) | ciphertext length (u32 BE)
 * | ciphertext; the 44-byte header is the associated data.
 */
int secrets_rec_seal(const unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES],
	const struct secret_set *s, long long stored, struct buf *out)
{
	unsigned char *plain = NULL, hdr[SECRETS_REC_HEADER], *c = NULL;
	unsigned long long clen = 0;
	size_t plen;
	int r;

	r = secrets_set_encode(s, &plain, &plen);
	if (r < 0)
		return r;
	memcpy(hdr, SECRETS_REC_MAGIC, 8);
	put_be64(hdr + 8, (uint64_t)stored);
	randombytes_buf(hdr + 16, 24);
	put_be32(hdr + 40, (uint32_t)(plen + crypto_aead_xchacha20poly1305_ietf_ABYTES));
	c = malloc(plen + crypto_aead_xchacha20poly1305_ietf_ABYTES);
	if (!c) {
		r = -ENOMEM;
		goto out;
	}
	crypto_aead_xchacha20poly1305_ietf_encrypt(
		c, &clen, plain, plen, hdr, sizeof(hdr), NULL, hdr + 16, key);
	out->len = 0;
	r = buf_append(out, hdr, sizeof(hdr));
	if (!r)
		r = buf_append(out, c, (size_t)clen);
out:
	free(c);
	secrets_free(plain);
	return r;
}

int secrets_rec_open(const unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES],
	const unsigned char *p, size_t n, struct secret_set **ret, char *err, size_t errlen)
{
	unsigned char *plain;
	unsigned long long plen = 0;
	size_t clen;
	int r;

	if (n < SECRETS_REC_HEADER || memcmp(p, SECRETS_REC_MAGIC, 8) != 0)
		return seterr(err, errlen, "not an ocsb secrets record");
	clen = get_be32(p + 40);
	if (clen != n - SECRETS_REC_HEADER || clen < crypto_aead_xchacha20poly1305_ietf_ABYTES ||
		clen > SECRETS_MAX_SET + crypto_aead_xchacha20poly1305_ietf_ABYTES)
		return seterr(err, errlen, "secrets record: length mismatch");
	plain = secrets_alloc(clen);
	if (!plain)
		return seterr(err, errlen, "%s", secrets_alloc_error());
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, p + SECRETS_REC_HEADER,
		    clen, p, SECRETS_REC_HEADER, p + 16, key) < 0) {
		secrets_free(plain);
		return seterr(err, errlen,
			"secrets record does not decrypt (altered, or from another key)");
	}
	r = secrets_set_decode(plain, (size_t)plen, ret, err, errlen);
	secrets_free(plain);
	return r;
}

/* ---- the passphrase box ---- */

/*
 * magic "OCSBBOX1" | algorithm (u32 BE, 2 = argon2id13) | opslimit (u64 BE) | memlimit
 * (u64 BE, bytes) | salt (16) | nonce (24) | ciphertext length (u32 BE) | ciphertext; the
 * 72-byte header is the associated data, so the parameters cannot be changed unnoticed.
 */
static int box_key(unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES], const char *pass,
	size_t passlen, const unsigned char *salt, unsigned long long ops, size_t mem)
{
	return crypto_pwhash(key, crypto_aead_xchacha20poly1305_ietf_KEYBYTES, pass, passlen, salt,
		ops, mem, crypto_pwhash_ALG_ARGON2ID13);
}

int secrets_box_seal(const char *pass, size_t passlen, const struct secret_set *s,
	unsigned long long ops, size_t mem, struct buf *out)
{
	unsigned char hdr[SECRETS_BOX_HEADER], *plain = NULL, *c = NULL, *key = NULL;
	unsigned long long clen = 0;
	size_t plen;
	int r;

	if (ops < crypto_pwhash_OPSLIMIT_MIN || ops > SECRETS_BOX_MAX_OPS ||
		mem < crypto_pwhash_MEMLIMIT_MIN || mem > SECRETS_BOX_MAX_MEM)
		return -EINVAL;
	r = secrets_set_encode(s, &plain, &plen);
	if (r < 0)
		return r;
	memcpy(hdr, SECRETS_BOX_MAGIC, 8);
	put_be32(hdr + 8, crypto_pwhash_ALG_ARGON2ID13);
	put_be64(hdr + 12, ops);
	put_be64(hdr + 20, mem);
	randombytes_buf(hdr + 28, crypto_pwhash_SALTBYTES);
	randombytes_buf(hdr + 28 + crypto_pwhash_SALTBYTES, 24);
	put_be32(hdr + 68, (uint32_t)(plen + crypto_aead_xchacha20poly1305_ietf_ABYTES));
	key = secrets_alloc(crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
	c = malloc(plen + crypto_aead_xchacha20poly1305_ietf_ABYTES);
	if (!key || !c) {
		r = -ENOMEM;
		goto out;
	}
	if (box_key(key, pass, passlen, hdr + 28, ops, mem) < 0) {
		r = -ENOMEM;
		goto out;
	}
	crypto_aead_xchacha20poly1305_ietf_encrypt(c, &clen, plain, plen, hdr, sizeof(hdr), NULL,
		hdr + 28 + crypto_pwhash_SALTBYTES, key);
	out->len = 0;
	r = buf_append(out, hdr, sizeof(hdr));
	if (!r)
		r = buf_append(out, c, (size_t)clen);
out:
	free(c);
	secrets_free(key);
	secrets_free(plain);
	return r;
}

int secrets_box_open(const char *pass, size_t passlen, const unsigned char *p, size_t n,
	struct secret_set **ret, char *err, size_t errlen)
{
	unsigned char *key = NULL, *plain = NULL;
	unsigned long long ops, mem, plen = 0;
	size_t clen;
	int r = -EINVAL;

	if (n < SECRETS_BOX_HEADER || memcmp(p, SECRETS_BOX_MAGIC, 8) != 0) {
		seterr(err, errlen, "not an ocsb secrets box");
		return -EINVAL;
	}
	ops = get_be64(p + 12);
	mem = get_be64(p + 20);
	if (get_be32(p + 8) != crypto_pwhash_ALG_ARGON2ID13 || ops < crypto_pwhash_OPSLIMIT_MIN ||
		ops > SECRETS_BOX_MAX_OPS || mem < crypto_pwhash_MEMLIMIT_MIN ||
		mem > SECRETS_BOX_MAX_MEM) {
		seterr(err, errlen,
			"secrets box: unsupported key derivation (algorithm %u, opslimit %llu, "
			"memlimit %llu)",
			get_be32(p + 8), ops, mem);
		return -EINVAL;
	}
	clen = get_be32(p + 68);
	if (clen != n - SECRETS_BOX_HEADER || clen < crypto_aead_xchacha20poly1305_ietf_ABYTES ||
		clen > SECRETS_MAX_SET + crypto_aead_xchacha20poly1305_ietf_ABYTES) {
		seterr(err, errlen, "secrets box: length mismatch (truncated?)");
		return -EINVAL;
	}
	key = secrets_alloc(crypto_aead_xchacha20poly1305_ietf_KEYBYTES);
	plain = secrets_alloc(clen);
	if (!key || !plain) {
		seterr(err, errlen, "%s", secrets_alloc_error());
		r = -ENOMEM;
		goto out;
	}
	if (box_key(key, pass, passlen, p + 28, ops, (size_t)mem) < 0) {
		seterr(err, errlen, "secrets box: key derivation failed (out of memory?)");
		r = -ENOMEM;
		goto out;
	}
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, p + SECRETS_BOX_HEADER,
		    clen, p, SECRETS_BOX_HEADER, p + 28 + crypto_pwhash_SALTBYTES, key) < 0) {
		seterr(err, errlen, "wrong passphrase (or the secrets box was altered)");
		r = -EBADMSG;
		goto out;
	}
	r = secrets_set_decode(plain, (size_t)plen, ret, err, errlen) < 0 ? -EINVAL : 0;
out:
	secrets_free(key);
	secrets_free(plain);
	return r;
}
