/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SECRETS_H
#define OCSB_SECRETS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sodium.h>

#include "util.h"

/*
 * Secrets: API keys of the owner, handed to the agent's OpenCode. One implementation of
 * each format lives here (docs/secrets.md describes them byte by byte):
 *   - the set: every (scope, name, value) entry, canonical and bounded ("OCSBSET1");
 *   - the sealed set: crypto_box_seal of a set to agentd's public key (`ocsb secrets push`);
 *   - the record: agentd's copy at rest, XChaCha20-Poly1305 under a key derived from its
 *     private key, header as associated data ("OCSBREC1");
 *   - the box: the owner's opt-in passphrase store, XChaCha20-Poly1305 under an argon2id
 *     key, parameters in the header ("OCSBBOX1").
 * Plaintext lives only in sodium_malloc'd, mlock'ed memory, wiped on free.
 */

#define SECRETS_MAX_COUNT 64
#define SECRETS_MAX_NAME 64
#define SECRETS_MAX_VALUE 4096
#define SECRETS_MAX_ROUTE 512
#define SECRETS_MAX_SET \
	(SECRETS_MAX_COUNT * (SECRETS_MAX_VALUE + 2 * SECRETS_MAX_NAME + SECRETS_MAX_ROUTE + 6) + 10)
/* What the agent's environment holds in place of an injected secret's value. */
#define SECRETS_PLACEHOLDER "ocsb-injected"
/* What one push may carry: bounded by the control frame (ctl.h CTL_MAX_SEALED). */
#define SECRETS_MAX_PUSH 32768

/* Files, relative to struct paths roots. */
#define SECRETS_KEY_REL "ocsb/agentd/secrets.key" /* varlib: private key, 0600 */
/* Who may own the key besides root: the supervisor's account (ocsb-warden gives it the key). */
#define SECRETS_KEY_USER "ocsb-agentd"
#define SECRETS_REC_REL "ocsb/agentd/secrets.rec" /* varlib: the record at rest, root 0600 */
#define SECRETS_PUB_REL "ocsb/agentd-secrets.pub" /* etc: public key, root 0644 */

struct secret {
	char scope[SECRETS_MAX_NAME + 1]; /* "" = global, else a project name */
	char name[SECRETS_MAX_NAME + 1];
	char *value; /* owned: locked memory, NUL-terminated; NULL when only names are known */
	size_t len;
	long long pushed; /* `ocsb secrets list`: unix time of the last push, 0 = never */
	/*
	 * "" exported (the value goes into the agent's environment); else injected, never
	 * shown to the agent: a provider name ("anthropic") or "https://host[/prefix]
	 * Header: template with {}" (issue 17, inject/).
	 */
	char route[SECRETS_MAX_ROUTE + 1];
};

struct secret_set {
	struct secret e[SECRETS_MAX_COUNT]; /* sorted by (scope, name), unique */
	size_t n;
};

/* Locked memory: sodium_malloc + an explicit mlock whose failure is reported. */
void *secrets_alloc(size_t n);
void secrets_free(void *p); /* wipes; NULL is a no-op */
/* Message for the user when secrets_alloc returned NULL (RLIMIT_MEMLOCK, ENOMEM). */
const char *secrets_alloc_error(void);

/*
 * Names are environment variable names, [A-Z_][A-Z0-9_]*, at most 64 characters, and
 * not one ocsb sets itself or one that changes how programs load (PATH, HOME, LD_*,
 * *_PROXY, OPENCODE_*, BASH_ENV...). 0 or -1 with a message.
 */
int secrets_name_ok(const char *name, char *err, size_t errlen);
/* "" (global) or a project name as agentd uses it: [A-Za-z0-9._-], not starting with '.'. */
int secrets_scope_ok(const char *scope);

/* The set (in locked memory); free with secrets_set_free (NULL is a no-op). */
struct secret_set *secrets_set_new(void);
void secrets_set_free(struct secret_set *s);
/* Add or replace; the value is copied into locked memory. 0, -EINVAL, -ENOSPC, -ENOMEM. */
int secrets_set_put(
	struct secret_set *s, const char *scope, const char *name, const char *value, size_t len);
/* Marks (scope, name) injected through route ("" = exported). 0, -ENOENT, -EINVAL. */
int secrets_set_route(
	struct secret_set *s, const char *scope, const char *name, const char *route);
/*
 * One keyring item into s: value (NULL: names only) and route (NULL or "": exported). A
 * second item of a (scope, name) already in s, with another route or value, is refused:
 * which one won would hang on the keyring's listing order, and a key the owner moved to
 * another route could go to the old one. 0 (added, or the same again), -EEXIST (err says
 * what to do), -EINVAL (an invalid item: skip it), -ENOSPC, -ENOMEM.
 */
int secrets_set_add_item(struct secret_set *s, const char *scope, const char *name,
	const char *value, size_t len, const char *route, char *err, size_t errlen);
/* A route text as stored: printable ASCII, 1..SECRETS_MAX_ROUTE bytes. */
int secrets_route_ok(const char *route);
/*
 * The names of exported (not injected) secrets that are LLM provider keys by their name
 * (ANTHROPIC_API_KEY, OPENAI_API_KEY...), comma-separated into out: their count.
 * `ocsb doctor` WARNs for them: the agent can read and send them anywhere.
 */
size_t secrets_exported_llm(const struct secret_set *s, char *out, size_t n);
/* Index of (scope, name) or -1. */
int secrets_set_find(const struct secret_set *s, const char *scope, const char *name);
/* 0 removed, -ENOENT. */
int secrets_set_del(struct secret_set *s, const char *scope, const char *name);

/* Canonical encoding into locked memory (*ret, free with secrets_free). */
int secrets_set_encode(const struct secret_set *s, unsigned char **ret, size_t *ret_len);
/* Strict decoding: anything not canonical is refused with a message. */
int secrets_set_decode(
	const unsigned char *p, size_t n, struct secret_set **ret, char *err, size_t errlen);

/*
 * The entries that apply to OpenCode of `project`: the global ones, each replaced by the
 * project's entry of the same name (project overrides global). idx gets indices into s,
 * sorted by name; returns the count.
 */
size_t secrets_effective(const struct secret_set *s, const char *project, size_t idx[]);
/*
 * The injected entries that get a route (issue 17), in route order: the first project's
 * effective set in name order, then each further project's own injected entries not yet
 * listed (no projects: the global ones). Route i of the list is route i of the injector,
 * whatever the injector makes of it. idx gets at most max indices into s; returns the
 * count, or max + 1 when some entry did not fit.
 */
size_t secrets_routed(const struct secret_set *s, const char *const projects[], size_t np,
	size_t idx[], size_t max);
/* A keyed digest of the effective entries of project (to see whether a push changes them). */
void secrets_digest(const struct secret_set *s, const char *project,
	const unsigned char key[crypto_generichash_KEYBYTES],
	unsigned char out[crypto_generichash_BYTES]);
/*
 * The environment file for sh: "export NAME='value'\n" lines, quotes escaped, in locked
 * memory (*ret NUL-terminated, free with secrets_free). extra (no secret: the injected
 * routes' git settings), when not NULL, is appended as it is.
 */
int secrets_env_file(const struct secret_set *s, const char *project, const char *extra,
	char **ret, size_t *ret_len);

/* ---- keys ---- */

/*
 * agentd's private key file: exactly 32 bytes, a regular file owned by root, mode 0600 or
 * stricter, not a link. -ENOENT missing, -EPERM bad owner/mode, -EINVAL bad size.
 */
int secrets_key_load(const char *path, unsigned char sk[crypto_box_SECRETKEYBYTES],
	unsigned char pk[crypto_box_PUBLICKEYBYTES], char *err, size_t errlen);
/* The public key file: "ocsb-secrets-pk-v1 BASE64\n". */
int secrets_pub_render(const unsigned char pk[crypto_box_PUBLICKEYBYTES], struct buf *out);
int secrets_pub_parse(const char *text, size_t len, unsigned char pk[crypto_box_PUBLICKEYBYTES]);

/* ---- sealed sets (push) ---- */

/* Seal plain to pk as base64 text (*ret malloc'd: it is ciphertext). */
int secrets_seal(const unsigned char pk[crypto_box_PUBLICKEYBYTES], const unsigned char *plain,
	size_t len, char **ret);
/* Open base64 sealed text: a set in locked memory, or -1 with a message (tampered...). */
int secrets_unseal(const unsigned char pk[crypto_box_PUBLICKEYBYTES],
	const unsigned char sk[crypto_box_SECRETKEYBYTES], const char *b64, size_t b64len,
	struct secret_set **ret, char *err, size_t errlen);

/* ---- the record at rest (agentd) ---- */

#define SECRETS_REC_MAGIC "OCSBREC1"
#define SECRETS_REC_HEADER (8 + 8 + 24 + 4)
void secrets_rec_key(const unsigned char sk[crypto_box_SECRETKEYBYTES],
	unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES]);
int secrets_rec_seal(const unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES],
	const struct secret_set *s, long long stored, struct buf *out);
int secrets_rec_open(const unsigned char key[crypto_aead_xchacha20poly1305_ietf_KEYBYTES],
	const unsigned char *p, size_t n, struct secret_set **ret, char *err, size_t errlen);

/* ---- the passphrase box (owner) ---- */

#define SECRETS_BOX_MAGIC "OCSBBOX1"
#define SECRETS_BOX_HEADER (8 + 4 + 8 + 8 + crypto_pwhash_SALTBYTES + 24 + 4)
/* Bounds on what a box header may ask for: a crafted file cannot make us use 64 GiB. */
#define SECRETS_BOX_MAX_OPS 32
#define SECRETS_BOX_MAX_MEM (1024ULL * 1024 * 1024)
int secrets_box_seal(const char *pass, size_t passlen, const struct secret_set *s,
	unsigned long long ops, size_t mem, struct buf *out);
/*
 * -EBADMSG: wrong passphrase or altered file (one error: AEAD cannot tell them apart);
 * -EINVAL: not a box or unsupported parameters. err says which for the user.
 */
int secrets_box_open(const char *pass, size_t passlen, const unsigned char *p, size_t n,
	struct secret_set **ret, char *err, size_t errlen);

#endif
