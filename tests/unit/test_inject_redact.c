/* SPDX-License-Identifier: MIT */
/*
 * The key masked in relayed answers (inject/redact.c). Each form is checked against an
 * encoder written here or OpenSSL's base64, every masked answer is paired with the same
 * bytes that are not a form passing untouched, and the streaming code is compared with a
 * naive search (every form at every position) over random texts cut at random places.
 */
#define _GNU_SOURCE
#include "unit.h"

#include <openssl/evp.h>

#include "../../inject/inject.h"

#define KEY "sk-ant-api03-Xq7_aZ0~9.kD4mQ2"
/* A key every form of which differs: reserved bytes, JSON escapes, '/' */
#define ODD_KEY "k3y/with+odd \"bytes\"\\ 0123~~~~~~"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 16);
}

static double ms_since(long long t0)
{
	return (double)(mono_us() - t0) / 1000.0;
}

#ifdef __SANITIZE_ADDRESS__
#define SLOWER 10 /* the sanitizers' cost: the bounds are about complexity, not the build */
#else
#define SLOWER 1
#endif

/* The answer as the naive search masks it: every form at every position. */
static char *naive_mask(const struct inj_redact *r, const char *in, size_t n)
{
	char *m = malloc(n + 1);

	assert_non_null(m);
	memcpy(m, in, n);
	m[n] = '\0';
	for (size_t i = 0; i < r->npat; i++)
		for (size_t at = 0; at + r->plen[i] <= n; at++)
			if (memcmp(in + at, r->pat[i], r->plen[i]) == 0)
				memset(m + at, '*', r->plen[i]);
	return m;
}

/* The longest suffix of in that is a proper prefix of a form. */
static size_t naive_hold(const struct inj_redact *r, const char *in, size_t n)
{
	size_t best = 0;

	for (size_t i = 0; i < r->npat; i++)
		for (size_t l = r->plen[i] - 1; l > best; l--)
			if (l <= n && memcmp(in + n - l, r->pat[i], l) == 0) {
				best = l;
				break;
			}
	return best;
}

static int has_form(const struct inj_redact *r, const char *p, size_t n)
{
	for (size_t i = 0; i < r->npat; i++)
		if (memmem(p, n, r->pat[i], r->plen[i]))
			return 1;
	return 0;
}

/* in fed in pieces cut at cuts[0..ncut) (increasing), then flushed: into out. */
static void run_cuts(struct inj_redact *r, const char *in, size_t n, const size_t *cuts,
	size_t ncut, struct buf *out)
{
	size_t at = 0;

	out->len = 0;
	for (size_t i = 0; i <= ncut; i++) {
		size_t to = i < ncut ? cuts[i] : n;

		assert_int_equal(inj_redact_feed(r, in + at, to - at, out), 0);
		at = to;
	}
	assert_int_equal(inj_redact_flush(r, out), 0);
	assert_int_equal(r->nhold, 0);
	assert_int_equal(out->len, n);
}

static void key_init(struct inj_redact *r, const char *key)
{
	assert_int_equal(inj_redact_init(r, key, strlen(key)), 0);
	assert_true(r->npat > 0);
}

static const char *find_form(const struct inj_redact *r, const char *want)
{
	for (size_t i = 0; i < r->npat; i++)
		if (r->plen[i] == strlen(want) && memcmp(r->pat[i], want, r->plen[i]) == 0)
			return r->pat[i];
	return NULL;
}

static void forms_listed(void **state)
{
	struct inj_redact r;

	(void)state;
	key_init(&r, ODD_KEY);
	/* raw, %XX twice, JSON twice, base64 and base64url at 3 alignments each */
	assert_int_equal(r.npat, 11);
	assert_non_null(find_form(&r, ODD_KEY));
	assert_non_null(find_form(&r, "k3y%2Fwith%2Bodd%20%22bytes%22%5C%200123~~~~~~"));
	assert_non_null(find_form(&r, "k3y%2fwith%2bodd%20%22bytes%22%5c%200123~~~~~~"));
	assert_non_null(find_form(&r, "k3y\\/with+odd \\\"bytes\\\"\\\\ 0123~~~~~~"));
	assert_non_null(find_form(&r, "k3y/with+odd \\\"bytes\\\"\\\\ 0123~~~~~~"));
	assert_non_null(find_form(&r, "azN5L3dpdGgrb2RkICJieXRlcyJcIDAxMjN+fn5+fn"));
	assert_non_null(find_form(&r, "azN5L3dpdGgrb2RkICJieXRlcyJcIDAxMjN-fn5-fn"));
	assert_non_null(find_form(&r, "szeS93aXRoK29kZCAiYnl0ZXMiXCAwMTIzfn5+fn5+"));
	assert_non_null(find_form(&r, "szeS93aXRoK29kZCAiYnl0ZXMiXCAwMTIzfn5-fn5-"));
	assert_non_null(find_form(&r, "rM3kvd2l0aCtvZGQgImJ5dGVzIlwgMDEyM35+fn5+f"));
	assert_non_null(find_form(&r, "rM3kvd2l0aCtvZGQgImJ5dGVzIlwgMDEyM35-fn5-f"));
	for (size_t i = 0; i < r.npat; i++)
		assert_true(r.plen[i] >= INJ_REDACT_MIN);
	inj_redact_free(&r);

	/* A plain token: its percent-encoding and JSON are itself, listed once. */
	key_init(&r, KEY);
	/* raw, base64 at 3 alignments (Python's base64 module), base64url where it differs */
	assert_int_equal(r.npat, 5);
	assert_non_null(find_form(&r, KEY));
	assert_non_null(find_form(&r, "c2stYW50LWFwaTAzLVhxN19hWjB+OS5rRDRtUT"));
	assert_non_null(find_form(&r, "c2stYW50LWFwaTAzLVhxN19hWjB-OS5rRDRtUT"));
	assert_non_null(find_form(&r, "NrLWFudC1hcGkwMy1YcTdfYVowfjkua0Q0bVEy"));
	assert_non_null(find_form(&r, "zay1hbnQtYXBpMDMtWHE3X2FaMH45LmtENG1RM"));
	assert_null(find_form(&r, "sk%2Dant"));
	for (size_t i = 0; i < r.npat; i++)
		for (size_t j = 0; j < i; j++)
			assert_false(r.plen[i] == r.plen[j] &&
				memcmp(r.pat[i], r.pat[j], r.plen[i]) == 0);
	inj_redact_free(&r);

	/* Control bytes: short escapes and \u00XX. */
	key_init(&r, "tab\there\x01nl\n-0123");
	assert_non_null(find_form(&r, "tab\\there\\u0001nl\\n-0123"));
	assert_non_null(find_form(&r, "tab%09here%01nl%0A-0123"));
	inj_redact_free(&r);
	inj_redact_free(&r); /* a freed struct is fine */
}

static void each_form_masked(void **state)
{
	static const char *const keys[] = {KEY, ODD_KEY};
	struct buf out = {0};

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		struct inj_redact r;

		key_init(&r, keys[k]);
		for (size_t i = 0; i < r.npat; i++) {
			char in[512], want[512];
			size_t n;

			n = (size_t)snprintf(in, sizeof(in), "{\"error\":\"bad key %.*s\"}",
				(int)r.plen[i], r.pat[i]);
			memcpy(want, in, n);
			memset(want + 18, '*', r.plen[i]);
			assert_true(has_form(&r, in, n)); /* the control: it is there */
			run_cuts(&r, in, n, NULL, 0, &out);
			assert_memory_equal(out.data, want, n);
			assert_false(has_form(&r, out.data, out.len));
			assert_int_equal(r.hits, i + 1);
		}
		/* The same answer with the form's last byte changed passes as it is. */
		{
			char in[512];
			size_t n = (size_t)snprintf(in, sizeof(in), "bad key %s", r.pat[0]);

			in[n - 1] ^= 1;
			run_cuts(&r, in, n, NULL, 0, &out);
			assert_memory_equal(out.data, in, n);
		}
		inj_redact_free(&r);
	}
	buf_free(&out);
}

/*
 * base64 as OpenSSL writes it, of texts holding the key at every offset, with every
 * length after it (so every padding): no base64 character the key alone decides survives.
 */
static void base64_at_every_alignment(void **state)
{
	static const char *const keys[] = {KEY, ODD_KEY, "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7"};
	struct buf out = {0};

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		size_t klen = strlen(keys[k]);
		struct inj_redact r;

		key_init(&r, keys[k]);
		for (size_t pre = 0; pre < 6; pre++) {
			for (size_t post = 0; post < 4; post++) {
				unsigned char text[128], enc[256];
				size_t tn = pre + klen + post, en, stars = 0, j;

				for (size_t i = 0; i < pre; i++)
					text[i] = (unsigned char)("user:"[i % 5]);
				memcpy(text + pre, keys[k], klen);
				memset(text + pre + klen, '@', post);
				en = (size_t)EVP_EncodeBlock(enc, text, (int)tn);
				for (int url = 0; url < 2; url++) {
					if (url)
						for (j = 0; j < en; j++)
							enc[j] = enc[j] == '+'	? '-'
								: enc[j] == '/' ? '_'
										: enc[j];
					run_cuts(&r, (char *)enc, en, NULL, 0, &out);
					/* The key's characters, the ones only its bits decide. */
					for (j = (8 * pre + 5) / 6; j < 8 * (pre + klen) / 6; j++)
						assert_int_equal(out.data[j], '*');
					for (j = 0; j < en; j++)
						stars += out.data[j] == '*';
					assert_int_equal(
						stars, 8 * (pre + klen) / 6 - (8 * pre + 5) / 6);
					stars = 0;
				}
			}
		}
		/* The control: the key's base64 cut short by one character is not masked. */
		{
			unsigned char enc[256];
			size_t en = (size_t)EVP_EncodeBlock(
				enc, (const unsigned char *)keys[k], (int)klen);

			en = 8 * klen / 6 - 1;
			run_cuts(&r, (char *)enc, en, NULL, 0, &out);
			assert_memory_equal(out.data, enc, en);
		}
		inj_redact_free(&r);
	}
	buf_free(&out);
}

static void split_at_every_byte(void **state)
{
	struct inj_redact r;
	struct buf out = {0};

	(void)state;
	key_init(&r, ODD_KEY);
	for (size_t i = 0; i < r.npat; i++) {
		char in[512], want[512];
		size_t n = (size_t)snprintf(
			in, sizeof(in), "data: %.*s\n\n", (int)r.plen[i], r.pat[i]);
		size_t *cuts = calloc(n, sizeof(*cuts));

		assert_non_null(cuts);
		memcpy(want, in, n);
		memset(want + 6, '*', r.plen[i]);
		for (size_t c = 0; c <= n; c++) {
			run_cuts(&r, in, n, &c, 1, &out);
			assert_memory_equal(out.data, want, n);
		}
		/* One byte a call: the form is held back whole, then masked. */
		for (size_t c = 0; c + 1 < n; c++)
			cuts[c] = c + 1;
		run_cuts(&r, in, n, cuts, n - 1, &out);
		assert_memory_equal(out.data, want, n);
		/* Split in three inside the form. */
		cuts[0] = 8;
		cuts[1] = 6 + r.plen[i] - 1;
		run_cuts(&r, in, n, cuts, 2, &out);
		assert_memory_equal(out.data, want, n);
		free(cuts);
	}
	inj_redact_free(&r);
	buf_free(&out);
}

static void overlapping(void **state)
{
	struct inj_redact r;
	struct buf out = {0};
	char in[64];

	(void)state;
	/* Occurrences every byte: the whole run is masked. */
	key_init(&r, "aaaaaaaaaa");
	snprintf(in, sizeof(in), "x%sx", "aaaaaaaaaaaaaaaaaaaaaaaaa");
	run_cuts(&r, in, strlen(in), NULL, 0, &out);
	assert_string_equal(out.data, "x*************************x");
	assert_int_equal(r.hits, 16);
	/* One short of the key: no occurrence. */
	run_cuts(&r, "xaaaaaaaaax", 11, NULL, 0, &out);
	assert_string_equal(out.data, "xaaaaaaaaax");
	inj_redact_free(&r);

	/* Occurrences sharing a few bytes, fed in two. */
	key_init(&r, "abcabcab");
	snprintf(in, sizeof(in), "xabcabcabcabcabxabcabcaXabcabcab");
	for (size_t c = 0; c <= strlen(in); c++) {
		run_cuts(&r, in, strlen(in), &c, 1, &out);
		assert_string_equal(out.data, "x**************xabcabcaX********");
	}
	inj_redact_free(&r);

	/* A form inside a longer one (the raw key starts its percent-encoding): one run. */
	key_init(&r, "abcdefgh%");
	for (size_t c = 0; c <= 13; c++) {
		run_cuts(&r, "xabcdefgh%25x", 13, &c, 1, &out);
		assert_string_equal(out.data, "x***********x");
	}
	assert_int_equal(r.hits, 2 * 14);
	snprintf(in, sizeof(in), "xabcdefgh%%25x");
	assert_int_equal(inj_redact_all(&r, in, strlen(in)), 2);
	assert_string_equal(in, "x***********x");
	inj_redact_free(&r);
	buf_free(&out);
}

/*
 * The streaming code against the naive search: after every call the output is the naive
 * masking of all that was fed but the held bytes, the held bytes are the longest suffix
 * that starts a form, and the total keeps the input's length.
 */
static void differential(void **state)
{
	static const char *const keys[] = {"abababab", "aabaabaaab", "ab/ab/ab", "a\"b\\a\"b\\"};
	struct buf out = {0};
	char text[400];

	(void)state;
	for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
		struct inj_redact r;

		key_init(&r, keys[k]);
		for (int round = 0; round < 300; round++) {
			size_t n = 0, at = 0;
			char *want;

			/* Pieces of forms and of the key's bytes, so that forms overlap and break. */
			while (n < sizeof(text) - 64) {
				size_t i = rnd() % r.npat, len = 1 + rnd() % r.plen[i];

				if (rnd() % 3 == 0) {
					text[n++] = keys[k][rnd() % strlen(keys[k])];
					continue;
				}
				/* a form's head or tail */
				memcpy(text + n, r.pat[i] + (rnd() % 2 ? 0 : r.plen[i] - len), len);
				n += len;
			}
			want = naive_mask(&r, text, n);
			out.len = 0;
			while (at < n) {
				size_t piece = rnd() % 4 ? 1 + rnd() % 7 : 1 + rnd() % 80;

				if (piece > n - at)
					piece = n - at;
				assert_int_equal(inj_redact_feed(&r, text + at, piece, &out), 0);
				at += piece;
				assert_int_equal(r.nhold, naive_hold(&r, text, at));
				assert_memory_equal(r.hold, text + at - r.nhold, r.nhold);
				assert_int_equal(out.len, at - r.nhold);
				assert_memory_equal(out.data, want, out.len);
			}
			assert_int_equal(inj_redact_flush(&r, &out), 0);
			assert_int_equal(out.len, n);
			assert_memory_equal(out.data, want, n);
			assert_false(has_form(&r, out.data, n));
			free(want);
		}
		inj_redact_free(&r);
	}
	buf_free(&out);
}

/*
 * A long answer dense with forms: more runs to mask than the queue holds at once (the
 * stream releases before it is full), and the hold moved back to the start of its room
 * (one byte a call). The stream, one byte at a time and inj_redact_all agree with the
 * naive search.
 */
static void dense_answer(void **state)
{
	const size_t n = 20000;
	struct inj_redact r;
	struct buf out = {0};
	char *text = malloc(n + 128), *want, *copy;
	size_t len = 0, hits = 0;

	(void)state;
	assert_non_null(text);
	key_init(&r, ODD_KEY);
	assert_true(n / (r.plen[0] + 1) > r.s.qcap);
	while (len < n) {
		size_t i = rnd() % r.npat, cut = rnd() % 4 == 0; /* a form, or all but its end */

		memcpy(text + len, r.pat[i], r.plen[i] - cut);
		len += r.plen[i] - cut;
		text[len++] = (char)(' ' + rnd() % 95);
	}
	want = naive_mask(&r, text, len);
	for (size_t i = 0; i < len; i++)
		hits += want[i] == '*' && text[i] != '*';
	assert_true(hits > len / 2); /* the control: the answer is mostly forms */

	run_cuts(&r, text, len, NULL, 0, &out);
	assert_memory_equal(out.data, want, len);

	out.len = 0;
	for (size_t at = 0; at < len; at++) {
		assert_int_equal(inj_redact_feed(&r, text + at, 1, &out), 0);
		assert_int_equal(r.nhold, naive_hold(&r, text, at + 1));
		assert_memory_equal(r.hold, text + at + 1 - r.nhold, r.nhold);
		assert_true(r.hold + r.nhold <= r.hbuf + r.hcap);
	}
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_memory_equal(out.data, want, len);

	copy = malloc(len);
	assert_non_null(copy);
	memcpy(copy, text, len);
	assert_true(inj_redact_all(&r, copy, len) > r.s.qcap);
	assert_memory_equal(copy, want, len);

	free(copy);
	free(want);
	free(text);
	inj_redact_free(&r);
	buf_free(&out);
}

static void prefix_released_by_flush(void **state)
{
	struct inj_redact r;
	struct buf out = {0};
	char in[128];
	size_t n;

	(void)state;
	key_init(&r, KEY);
	n = (size_t)snprintf(in, sizeof(in), "hello %.*s", (int)strlen(KEY) - 1, KEY);
	assert_int_equal(inj_redact_feed(&r, in, n, &out), 0);
	assert_int_equal(out.len, 6);
	assert_int_equal(r.nhold, strlen(KEY) - 1);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_int_equal(out.len, n);
	assert_memory_equal(out.data, in, n);
	assert_int_equal(r.nhold, 0);
	/* The control: the last byte instead of the flush completes the key. */
	out.len = 0;
	assert_int_equal(inj_redact_feed(&r, in, n, &out), 0);
	assert_int_equal(inj_redact_feed(&r, KEY + strlen(KEY) - 1, 1, &out), 0);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_int_equal(out.len, n + 1);
	assert_memory_equal(out.data, "hello *****", 11);
	assert_int_equal(out.data[n], '*');
	inj_redact_free(&r);
	buf_free(&out);
}

static void nothing_held_that_starts_nothing(void **state)
{
	static const char ev[] = "event: x\ndata: {}\n\n";
	struct inj_redact r;
	struct buf out = {0};

	(void)state;
	key_init(&r, KEY);
	assert_int_equal(inj_redact_feed(&r, ev, strlen(ev), &out), 0);
	assert_int_equal(r.nhold, 0);
	assert_string_equal(out.data, ev);
	/* The control: an event ending in the key's first bytes keeps them back, only them. */
	out.len = 0;
	assert_int_equal(inj_redact_feed(&r, "data: sk-a", 10, &out), 0);
	assert_int_equal(r.nhold, 4);
	assert_int_equal(out.len, 6);
	assert_memory_equal(out.data, "data: ", 6);
	/* The held suffix shrinks to the longest one still starting the key. */
	assert_int_equal(inj_redact_feed(&r, "nsk-an", 6, &out), 0);
	assert_int_equal(r.nhold, 5);
	assert_memory_equal(r.hold, "sk-an", 5);
	assert_int_equal(out.len, 11);
	assert_memory_equal(out.data, "data: sk-an", 11);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	inj_redact_free(&r);
	buf_free(&out);
}

static void short_key_redacts_nothing(void **state)
{
	static const char in[] = "echo short12 short123";
	struct inj_redact r;
	struct buf out = {0};
	char head[64];

	(void)state;
	assert_int_equal(inj_redact_init(&r, "short12", 7), 0);
	assert_int_equal(r.npat, 0);
	assert_int_equal(inj_redact_feed(&r, in, strlen(in), &out), 0);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_string_equal(out.data, in);
	snprintf(head, sizeof(head), "%s", in);
	assert_int_equal(inj_redact_all(&r, head, strlen(head)), 0);
	assert_string_equal(head, in);
	inj_redact_free(&r);
	/* The control: 8 bytes are looked for. */
	out.len = 0;
	key_init(&r, "short123");
	assert_int_equal(inj_redact_feed(&r, in, strlen(in), &out), 0);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_string_equal(out.data, "echo short12 ********");
	inj_redact_free(&r);
	buf_free(&out);
	/* A zeroed struct passes everything. */
	memset(&r, 0, sizeof(r));
	assert_int_equal(inj_redact_feed(&r, in, strlen(in), &out), 0);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_string_equal(out.data, in);
	inj_redact_free(&r);
	buf_free(&out);
}

static void whole_head(void **state)
{
	struct inj_redact r;
	struct buf out = {0};
	unsigned char b64[64];
	char head[512], want[512];
	int n;

	(void)state;
	key_init(&r, KEY);
	EVP_EncodeBlock(b64, (const unsigned char *)"u:" KEY, (int)strlen("u:" KEY));
	n = snprintf(head, sizeof(head),
		"HTTP/1.1 401 Unauthorized\r\n"
		"X-Echo-Api-Key: %s\r\n"
		"X-Echo-Auth: Basic %s\r\n"
		"Content-Length: 0\r\n\r\n",
		KEY, b64);
	/* Mid-stream: the head does not disturb what the stream holds back. */
	assert_int_equal(inj_redact_feed(&r, "x sk-ant", 8, &out), 0);
	assert_int_equal(r.nhold, 6);
	memcpy(want, head, (size_t)n + 1);
	assert_int_equal(inj_redact_all(&r, head, (size_t)n), 2);
	assert_int_equal(strlen(head), (size_t)n);
	assert_false(has_form(&r, head, (size_t)n));
	memset(want + 43, '*', strlen(KEY));
	assert_memory_equal(head, want, 43 + strlen(KEY) + 2);
	assert_non_null(strstr(head, "X-Echo-Auth: Basic dTp"));
	assert_int_equal(r.nhold, 6);
	assert_int_equal(inj_redact_feed(&r, KEY + 6, strlen(KEY) - 6, &out), 0);
	assert_int_equal(inj_redact_flush(&r, &out), 0);
	assert_int_equal(out.len, 2 + strlen(KEY));
	assert_int_equal(strspn(out.data + 2, "*"), strlen(KEY));
	assert_int_equal(r.hits, 3);
	/* The control: a head without the key comes out as it was. */
	memcpy(head, "HTTP/1.1 200 OK\r\nX-Key: sk-ant-api03\r\n\r\n", 41);
	memcpy(want, head, 41);
	assert_int_equal(inj_redact_all(&r, head, 40), 0);
	assert_memory_equal(head, want, 41);
	inj_redact_free(&r);
	buf_free(&out);
}

/* n bytes through r in pieces of piece, flushed: ms; out's length checked. */
static double timed(struct inj_redact *r, const char *in, size_t n, size_t piece, struct buf *out)
{
	long long t0 = mono_us();

	out->len = 0;
	for (size_t at = 0; at < n; at += piece)
		assert_int_equal(
			inj_redact_feed(r, in + at, piece < n - at ? piece : n - at, out), 0);
	assert_int_equal(inj_redact_flush(r, out), 0);
	assert_int_equal(out->len, n);
	return ms_since(t0);
}

static double best_of_3(
	struct inj_redact *r, const char *in, size_t n, size_t piece, struct buf *out)
{
	double best = 1e9;

	for (int i = 0; i < 3; i++) {
		double t = timed(r, in, n, piece, out);

		best = t < best ? t : best;
	}
	return best;
}

static void timing(void **state)
{
	static const char tok[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-";
	const size_t mib = 1 << 20;
	char *text = malloc(mib), *key = malloc(INJ_KEY_MAX + 1);
	struct inj_redact r;
	struct buf out = {0};
	double t, t_init;
	long long t0;
	size_t stars = 0;

	(void)state;
	assert_non_null(text);
	assert_non_null(key);
	/* A 100-byte key, an answer of JSON-ish text holding it 16 times. */
	for (size_t i = 0; i < 100; i++)
		key[i] = tok[rnd() % 64];
	for (size_t i = 0; i < mib; i++)
		text[i] = (char)(' ' + rnd() % 95);
	for (size_t i = 0; i < 16; i++)
		memcpy(text + i * (mib / 16) + 999, key, 100);
	assert_int_equal(inj_redact_init(&r, key, 100), 0);
	t = best_of_3(&r, text, mib, 16384, &out);
	for (size_t i = 0; i < mib; i++)
		stars += out.data[i] == '*' && text[i] != '*';
	assert_int_equal(stars, 1600);
	print_message("# redact: 1 MiB in 16 KiB pieces, 100-byte token key (%zu forms): %.2f ms\n",
		r.npat, t);
	assert_true(t < 10.0 * SLOWER);
	inj_redact_free(&r);
	/* ... a printable key, every form distinct. */
	for (size_t i = 0; i < 100; i++)
		key[i] = (char)(' ' + rnd() % 95);
	for (size_t i = 0; i < 16; i++)
		memcpy(text + i * (mib / 16) + 999, key, 100);
	assert_int_equal(inj_redact_init(&r, key, 100), 0);
	t = best_of_3(&r, text, mib, 16384, &out);
	assert_false(has_form(&r, out.data, mib));
	print_message("# redact: 1 MiB in 16 KiB pieces, 100-byte printable key (%zu forms): "
		      "%.2f ms\n",
		r.npat, t);
	assert_true(t < 10.0 * SLOWER);
	inj_redact_free(&r);

	/* The worst a hostile upstream can do: one byte repeated, the key that byte. */
	memset(key, 'a', INJ_KEY_MAX);
	memset(text, 'a', mib);
	t0 = mono_us();
	assert_int_equal(inj_redact_init(&r, key, INJ_KEY_MAX), 0);
	t_init = ms_since(t0);
	t = best_of_3(&r, text, mib, 16384, &out);
	assert_int_equal(memchr(out.data, 'a', mib), NULL);
	print_message("# redact: 1 MiB of 'a', 4096-byte key of 'a': %.2f ms (init %.2f ms)\n", t,
		t_init);
	assert_true(t < 50.0 * SLOWER);
	inj_redact_free(&r);

	/* ... the key one byte off: never found, always 4095 bytes held. */
	key[INJ_KEY_MAX - 1] = 'b';
	assert_int_equal(inj_redact_init(&r, key, INJ_KEY_MAX), 0);
	t = best_of_3(&r, text, mib, 16384, &out);
	assert_memory_equal(out.data, text, mib);
	print_message("# redact: 1 MiB of 'a', key 'a'x4095 'b': %.2f ms\n", t);
	assert_true(t < 50.0 * SLOWER);
	/* ... fed one byte a call (1-byte TLS records): the hold slides, it is not copied. */
	t = timed(&r, text, mib / 4, 1, &out);
	print_message("# redact: 256 KiB of 'a' one byte a call, same key: %.2f ms\n", t);
	assert_true(t < 100.0 * SLOWER);
	inj_redact_free(&r);

	/* A printable 4096-byte key: its forms and the automaton. */
	for (size_t i = 0; i < INJ_KEY_MAX; i++)
		key[i] = (char)(' ' + rnd() % 95);
	t0 = mono_us();
	assert_int_equal(inj_redact_init(&r, key, INJ_KEY_MAX), 0);
	t_init = ms_since(t0);
	memcpy(text + 5000, r.pat[1], r.plen[1]);
	t = best_of_3(&r, text, mib, 16384, &out);
	assert_false(has_form(&r, out.data, mib));
	print_message("# redact: init with a printable 4096-byte key (%zu forms): %.2f ms; "
		      "1 MiB: %.2f ms\n",
		r.npat, t_init, t);
	assert_true(t_init < 100.0 * SLOWER);
	inj_redact_free(&r);

	buf_free(&out);
	free(text);
	explicit_bzero(key, INJ_KEY_MAX);
	free(key);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(forms_listed),
		cmocka_unit_test(each_form_masked),
		cmocka_unit_test(base64_at_every_alignment),
		cmocka_unit_test(split_at_every_byte),
		cmocka_unit_test(overlapping),
		cmocka_unit_test(differential),
		cmocka_unit_test(dense_answer),
		cmocka_unit_test(prefix_released_by_flush),
		cmocka_unit_test(nothing_held_that_starts_nothing),
		cmocka_unit_test(short_key_redacts_nothing),
		cmocka_unit_test(whole_head),
		cmocka_unit_test(timing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
