/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for what the agent's git-receive-pack sends `ocsb sync push` (sync/pkt.c)
 * and for the names and text of the agent that sync shows (sync/check.c). The input is read
 * as the reply of a receive-pack, pkt-lines from the first byte: the advertisement up to
 * its flush (sync_adv_feed, sync_adv_parse, sync_caps_has), then report-status
 * (sync_report_feed/finish); the same bytes are also payloads to frame and parse back,
 * a ref name (sync_ref_name_ok) and text to escape (sync_escape/sync_unescape).
 * Properties, abort() when broken:
 *   - a pkt-line parses to its own length, its payload just after the 4 digits, and no
 *     shorter prefix of it parses; what sync_pkt_format frames parses back to the same
 *     payloads and flushes, in order, and it refuses exactly what exceeds SYNC_PKT_MAX;
 *   - an advertisement line that parses is rebuilt byte for byte from its fields, its name
 *     has no byte below '!'; after the advertisement each command's old_id is the id of
 *     the last line naming its ref, the haves are the lines' non-zero ids, in order;
 *   - sync_caps_has agrees with a plain split of the list;
 *   - report-status ends in exactly one of: done (every ref answered ok), refused (one ng
 *     or unpack failed), protocol error (with a message); every reason is escaped;
 *   - a ref name that is accepted is a branch, valid for git, and displays as itself;
 *   - sync_escape's output holds no control, bidi or invisible character and no bare
 *     backslash, is cut only at a whole character, and sync_unescape gives the text back.
 * Build and run: `make fuzz FUZZ_ONLY=sync_pkt` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "sync.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	git_libgit2_init();
	fuzz_quiet(argc, argv);
	return 0;
}

/* --- one pkt-line */

/* The 4 length digits (hex, either case), -1 when one is not a hex digit. */
static long hex4(const char *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		int c = (unsigned char)p[i];

		if (!isxdigit(c))
			return -1;
		v = v * 16 + (isdigit(c) ? c - '0' : tolower(c) - 'a' + 10);
	}
	return v;
}

static long check_one_pkt(
	const char *p, size_t avail, enum sync_pkt_type *type, const char **d, size_t *len)
{
	long r = sync_pkt_parse(p, avail, type, d, len);

	long want = avail < 4 ? -2 : hex4(p);

	CHECK(r >= -1 && r <= (long)SYNC_PKT_MAX);
	if (r == 0) {
		CHECK(avail < 4 || (want >= 4 && want <= SYNC_PKT_MAX && (size_t)want > avail));
		return r;
	}
	if (r < 0) {
		CHECK(want == -1 || (want >= 1 && want <= 3) || want > SYNC_PKT_MAX);
		return r;
	}
	CHECK((size_t)r <= avail);
	if (*type == SYNC_PKT_FLUSH) {
		CHECK(r == 4 && want == 0 && *d == NULL && *len == 0);
	} else {
		CHECK(*type == SYNC_PKT_DATA && r >= 4 && *d == p + 4 && *len == (size_t)r - 4);
		CHECK(want == r);
	}
	/* Cut anywhere before its end, it asks for more. */
	for (size_t k = 0; k < (size_t)r; k = k < 5 ? k + 1 : k * 3) {
		enum sync_pkt_type t2;
		const char *d2;
		size_t l2;

		CHECK(sync_pkt_parse(p, k, &t2, &d2, &l2) == 0);
	}
	return r;
}

/* --- the advertisement */

struct adv_oracle {
	git_oid last[3]; /* the id of the last line naming cmds[i].dst */
	int seen[3];
	git_oid *haves;
	size_t nhaves;
};

/* A parsed line, rebuilt from its fields, is the line (the id in either case of hex). */
static void check_adv_line(const char *data, size_t len)
{
	char name[1024], hex[GIT_OID_HEXSZ + 1];
	const char *caps = (const char *)1;
	size_t capslen = 7, nl, body;
	git_oid id;

	memset(name, 0x5a, sizeof(name));
	if (sync_adv_parse(data, len, &id, name, sizeof(name), &caps, &capslen) < 0)
		return;
	nl = len && data[len - 1] == '\n';
	body = len - nl;
	CHECK(strlen(name) > 0 && strlen(name) < sizeof(name));
	for (const char *c = name; *c; c++)
		CHECK((unsigned char)*c > ' ' && *c != 0x7f);
	git_oid_tostr(hex, sizeof(hex), &id);
	CHECK(body >= GIT_OID_HEXSZ + 1 + strlen(name));
	CHECK(!strncasecmp(hex, data, GIT_OID_HEXSZ) && data[GIT_OID_HEXSZ] == ' ');
	CHECK(!memcmp(data + GIT_OID_HEXSZ + 1, name, strlen(name)));
	if (caps) {
		const char *nul = data + GIT_OID_HEXSZ + 1 + strlen(name);

		CHECK(*nul == '\0' && caps == nul + 1);
		CHECK(caps + capslen == data + body);
	} else {
		CHECK(capslen == 0 && GIT_OID_HEXSZ + 1 + strlen(name) == body);
	}
}

static void oracle_have(struct adv_oracle *o, const git_oid *id)
{
	o->haves = realloc(o->haves, (o->nhaves + 1) * sizeof(*o->haves));
	CHECK(o->haves != NULL);
	git_oid_cpy(&o->haves[o->nhaves++], id);
}

/* What the oracle expects of one line, from sync_adv_parse alone. */
static void oracle_line(
	struct adv_oracle *o, const struct sync_push_cmd *cmds, const char *data, size_t len)
{
	char name[1024];
	const char *caps;
	size_t capslen;
	git_oid id;

	if (sync_adv_parse(data, len, &id, name, sizeof(name), &caps, &capslen) < 0) {
		if (len > GIT_OID_HEXSZ && data[GIT_OID_HEXSZ] == ' ' &&
			git_oid_fromstrn(&id, data, GIT_OID_HEXSZ) == 0)
			oracle_have(o, &id);
		return;
	}
	if (git_oid_is_zero(&id))
		return;
	for (int i = 0; i < 3; i++)
		if (!strcmp(name, cmds[i].dst)) {
			git_oid_cpy(&o->last[i], &id);
			o->seen[i] = 1;
		}
	oracle_have(o, &id);
}

/* sync_caps_has against a plain split on spaces. */
static int caps_oracle(const char *caps, size_t len, const char *name)
{
	size_t nl = strlen(name), i = 0;

	while (i <= len) {
		size_t j = i;

		while (j < len && caps[j] != ' ')
			j++;
		if (j - i >= nl && !memcmp(caps + i, name, nl) &&
			(j - i == nl || caps[i + nl] == '='))
			return 1;
		i = j + 1;
	}
	return 0;
}

static void check_caps(const char *caps, size_t len)
{
	static const char *const names[] = {
		"report-status", "quiet", "ofs-delta", "no-thin", "agent", "side-band-64k", "a"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(sync_caps_has(caps, len, names[i]) == caps_oracle(caps, len, names[i]));
	/* Every name of the list itself is found. */
	for (size_t i = 0; i < len;) {
		const char *sp = memchr(caps + i, ' ', len - i);
		size_t l = sp ? (size_t)(sp - (caps + i)) : len - i;
		const char *eq = memchr(caps + i, '=', l);
		size_t nl = eq ? (size_t)(eq - (caps + i)) : l;

		if (nl && !memchr(caps + i, '\0', nl)) {
			char *nm = fuzz_strndup(caps + i, nl);

			CHECK(sync_caps_has(caps, len, nm) == 1);
			free(nm);
		}
		i += l + 1;
	}
}

/* --- report-status */

static void check_report_end(struct sync_report *r, int fed_ok)
{
	int fin = sync_report_finish(r), refused = r->unpack == 2, unanswered = 0;

	for (size_t i = 0; i < r->n; i++) {
		CHECK(r->state[i] >= 0 && r->state[i] <= 2);
		refused |= r->state[i] == 2;
		unanswered |= r->state[i] == 0;
		for (const char *c = r->why[i]; *c; c++)
			CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
	}
	for (const char *c = r->unpack_why; *c; c++)
		CHECK((unsigned char)*c >= 0x20 && *c != 0x7f);
	if (!fed_ok || !r->flushed || !r->unpack || (r->unpack == 1 && unanswered)) {
		CHECK(fin == -1 && r->err[0]);
		return;
	}
	CHECK(fin == (refused ? 1 : 0));
	/* Done means every ref has its "ok". */
	if (fin == 0)
		for (size_t i = 0; i < r->n; i++)
			CHECK(r->state[i] == 1);
}

/* --- the stream: advertisement, flush, report-status */

static void check_stream(const char *p, size_t n)
{
	struct sync_push_cmd cmds[3];
	struct adv_oracle o = {0};
	struct sync_adv adv = {0};
	const char *const refs[] = {"refs/heads/main", "refs/heads/b", "refs/heads/x"};
	int st[3] = {0}, phase = 0, fed_ok = 1, adv_ok = 1;
	char why[3][256];
	struct sync_report r = {.refs = refs, .n = 3, .state = st, .why = why};
	size_t off = 0;

	memset(cmds, 0, sizeof(cmds));
	for (int i = 0; i < 3; i++)
		snprintf(cmds[i].dst, sizeof(cmds[i].dst), "%s", refs[i]);
	memset(why, 0, sizeof(why));
	while (off < n) {
		enum sync_pkt_type type;
		const char *d;
		size_t len;
		long k = check_one_pkt(p + off, n - off, &type, &d, &len);

		if (k <= 0)
			break;
		off += (size_t)k;
		if (phase == 0) {
			int ar;

			if (type == SYNC_PKT_FLUSH) {
				phase = 1;
				continue;
			}
			check_adv_line(d, len);
			ar = sync_adv_feed(&adv, d, len, cmds, 3);
			CHECK(ar == 0 || ar == -EPROTO || ar == -E2BIG);
			if (ar == 0)
				oracle_line(&o, cmds, d, len);
			if (ar < 0) {
				adv_ok = 0;
				phase = 2; /* push.c stops at the first bad line */
			}
			continue;
		}
		if (phase == 1 && fed_ok && !r.flushed) {
			if (sync_report_feed(&r, type, d, len) < 0) {
				CHECK(r.err[0]);
				fed_ok = 0;
			}
		}
	}
	/* The advertisement, fed line by line, is what its lines say. */
	if (adv_ok) {
		CHECK(adv.nhaves == o.nhaves);
		for (size_t i = 0; i < o.nhaves; i++)
			CHECK(git_oid_equal(&adv.haves[i], &o.haves[i]));
		for (int i = 0; i < 3; i++)
			CHECK(o.seen[i] ? git_oid_equal(&cmds[i].old_id, &o.last[i])
					: git_oid_is_zero(&cmds[i].old_id));
	}
	CHECK(adv.capslen < sizeof(adv.caps));
	check_caps(adv.caps, adv.capslen);
	if (phase >= 1)
		check_report_end(&r, fed_ok);
	sync_adv_free(&adv);
	free(o.haves);
}

/* --- framing: payloads cut from the input, framed, parsed back */

static void check_framing(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	size_t cap = 0, len = 0, np = 0;
	char *out = NULL;
	struct {
		const char *p; /* NULL: a flush */
		size_t n;
	} pl[64];
	static char big[SYNC_PKT_MAX + 8];

	/* First byte: how to cut; then [len hi][len lo][payload] records. */
	while (in.n && np < 64) {
		unsigned how = fuzz_byte(&in);
		size_t want, got;
		long k;

		if (how % 7 == 0) {
			pl[np].p = NULL;
			pl[np++].n = 0;
			want = 0;
		} else {
			want = how % 5 == 0 ? fuzz_u16(&in) : how % 64;
			if (how == 255) {
				/* The bounds themselves: the largest payload and one byte more. */
				want = SYNC_PKT_MAX - 4 + (fuzz_byte(&in) & 1);
				if (!big[0])
					memset(big, 'x', sizeof(big));
				pl[np].p = big;
				pl[np].n = want;
			} else {
				pl[np].p = fuzz_take(&in, want, &got);
				pl[np].n = got;
			}
			np++;
		}
		if (len + pl[np - 1].n + 8 > cap) {
			cap = 2 * cap + pl[np - 1].n + 64;
			out = realloc(out, cap);
			CHECK(out != NULL);
		}
		if (!pl[np - 1].p) {
			memcpy(out + len, "0000", 4);
			len += 4;
			continue;
		}
		k = sync_pkt_format(out + len, cap - len, pl[np - 1].p, pl[np - 1].n);
		if (pl[np - 1].n + 4 > SYNC_PKT_MAX) {
			CHECK(k == -1);
			np--;
			continue;
		}
		CHECK(k == (long)pl[np - 1].n + 4);
		/* Too small a buffer: refused, nothing written past it. */
		CHECK(sync_pkt_format(out + len, (size_t)k - 1, pl[np - 1].p, pl[np - 1].n) == -1);
		len += (size_t)k;
	}
	for (size_t i = 0, off = 0; out && i <= np; i++) {
		enum sync_pkt_type type;
		const char *d;
		size_t l;
		long k = sync_pkt_parse(out + off, len - off, &type, &d, &l);

		if (i == np) {
			CHECK(k == 0 && off == len);
			break;
		}
		CHECK(k > 0);
		if (!pl[i].p) {
			CHECK(type == SYNC_PKT_FLUSH);
		} else {
			CHECK(type == SYNC_PKT_DATA && l == pl[i].n);
			CHECK(l == 0 || !memcmp(d, pl[i].p, l));
		}
		off += (size_t)k;
	}
	free(out);
}

/* --- names and text of the agent's */

static void check_escape(const char *s, size_t len)
{
	size_t full = 4 * len + 1, o;
	char *out = malloc(full), *back = malloc(len + 1), small[17];
	const char *nul = memchr(s, '\0', len);

	CHECK(out && back);
	sync_escape(s, len, out, full);
	o = strlen(out);
	for (size_t i = 0; i < o;) {
		unsigned cp;
		size_t l = log_utf8_decode((const unsigned char *)out + i, o - i, &cp);

		CHECK(l > 0 && !log_cp_unsafe(cp));
		if (cp == '\\')
			CHECK(out[i + 1] == 'x' && isxdigit((unsigned char)out[i + 2]) &&
				isxdigit((unsigned char)out[i + 3]));
		i += l;
	}
	/* Back to the text, up to its first NUL (an escaped NUL ends sync_unescape). */
	sync_unescape(out, back, len + 1);
	CHECK(strlen(back) == (nul ? (size_t)(nul - s) : len) && !memcmp(back, s, strlen(back)));
	/* Cut short: a prefix of the whole, never half a character or half an escape. */
	for (size_t n = 1; n <= sizeof(small); n += 5) {
		size_t sl;

		sync_escape(s, len, small, n);
		sl = strlen(small);
		CHECK(sl < n && !memcmp(small, out, sl));
		CHECK(sl == o || out[sl] != 'x' || sl == 0 || out[sl - 1] != '\\');
	}
	free(out);
	free(back);
}

static void check_ref_name(const char *s, size_t len)
{
	char *name = fuzz_strndup(s, len), why[128] = "", esc[4 * SYNC_REF_MAX + 8];
	int valid = 0;

	if (!sync_ref_name_ok(name, why, sizeof(why))) {
		CHECK(why[0]);
		free(name);
		return;
	}
	CHECK(strlen(name) <= SYNC_REF_MAX && !strncmp(name, "refs/heads/", 11));
	CHECK(git_reference_name_is_valid(&valid, name) == 0 && valid);
	CHECK(strcmp(name, "refs/heads/HEAD") != 0);
	/* An accepted name needs no escaping: it shows as itself. */
	sync_escape(name, strlen(name), esc, sizeof(esc));
	CHECK(!strcmp(esc, name));
	free(name);
}

/*
 * The pull's band demux (sync_band_feed): the pack read out of upload-pack's answer by the
 * parent, on its way to git index-pack. Against an oracle that frames the whole input
 * with sync_pkt_parse: band 1's payloads exactly, up to the first malformed packet (where
 * the demux is bad for good and emits nothing more), whatever the chunks.
 */
struct band_sink {
	char *buf;
	size_t n, cap;
};

static void band_sink_emit(void *arg, const char *p, size_t n)
{
	struct band_sink *o = arg;

	CHECK(o->n + n <= o->cap);
	memcpy(o->buf + o->n, p, n);
	o->n += n;
}

static void check_band(const char *p, size_t n)
{
	struct band_sink want = {malloc(n + 1), 0, n}, whole = {malloc(n + 1), 0, n},
			 bytes = {malloc(n + 1), 0, n};
	struct sync_band d1 = {0}, d2 = {0};
	size_t off = 0;
	int bad = 0;

	CHECK(want.buf && whole.buf && bytes.buf);
	while (off < n) {
		enum sync_pkt_type t;
		const char *data;
		size_t len;
		long k = sync_pkt_parse(p + off, n - off, &t, &data, &len);

		if (k == 0)
			break; /* cut: the demux waits for the rest */
		/* A length of 4 (an empty data packet) is refused by the demux only. */
		if (k < 0 || (t == SYNC_PKT_DATA && len == 0)) {
			bad = 1;
			break;
		}
		if (t == SYNC_PKT_DATA && (unsigned char)data[0] == 1)
			band_sink_emit(&want, data + 1, len - 1);
		off += (size_t)k;
	}
	sync_band_feed(&d1, p, n, band_sink_emit, &whole);
	for (size_t i = 0; i < n; i++)
		sync_band_feed(&d2, p + i, 1, band_sink_emit, &bytes);
	CHECK(d1.bad == d2.bad);
	CHECK(whole.n == bytes.n && !memcmp(whole.buf, bytes.buf, whole.n));
	if (bad)
		CHECK(d1.bad);
	if (!bad && !d1.bad) {
		/* Whole packets agree; a cut last packet may have emitted part of its payload. */
		CHECK(whole.n >= want.n && !memcmp(whole.buf, want.buf, want.n));
	}
	free(want.buf);
	free(whole.buf);
	free(bytes.buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;

	check_stream(s, size);
	check_band(s, size);
	check_framing(data, size);
	check_escape(s, size);
	check_ref_name(s, size < 400 ? size : 400);
	/* A ref name, after the first line feed (the first line is a pkt-line's length). */
	{
		const char *nl = memchr(s, '\n', size);

		if (nl)
			check_ref_name(nl + 1,
				(size_t)(s + size - nl - 1) < 400 ? (size_t)(s + size - nl - 1)
								  : 400);
	}
	return 0;
}
