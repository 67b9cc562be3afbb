/* SPDX-License-Identifier: MIT */
/*
 * The owner's key masked in what the upstream answers. The request carries the real key
 * upstream; an upstream that echoes it back (a debug endpoint, "invalid x-api-key: sk-..."
 * in an error, a header quoted in a body) would hand it to the agent, which must never see
 * it. The answer streams through here on its way to the agent.
 *
 * One Aho-Corasick automaton over all the forms of the key. Its state after a byte is the
 * longest suffix of the stream that is a prefix of some form, so:
 *   - what must be held back is read off the state: the longest suffix that is a proper
 *     prefix of a form (keep[]). Everything before it cannot be part of a form that is not
 *     yet complete and goes out at once: an event ending "\n\n" is never delayed.
 *   - the time is linear in the input, whatever the input: a byte deepens the state by one
 *     at most, a failure link makes it shallower by one at least, and a node has at most one
 *     child per form. A run of the key's first byte costs two steps a byte, not the key's
 *     length (no restart per position as in a naive search).
 * A form found ends at the current byte; its start lies in the held bytes (they are a prefix
 * of it). The masks are kept as a queue of runs (unions of forms found, disjoint, in order)
 * and applied as bytes are released, once no form still to come can cover them. A run is 8
 * bytes at least (INJ_REDACT_MIN) and runs are apart, so the queue needs hold/8 entries.
 * All memory is sized by inj_redact_init and never grows: nothing holding a form of the key
 * is ever realloc'd, and everything that held one is wiped when freed.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inject.h"

struct inj_redact_run {
	unsigned long long start, end; /* stream positions, both masked */
};

/* Node 0 is the root; 0 as a child or sibling means none. */
struct inj_redact_ac {
	uint32_t root[256]; /* the root's transitions, failures included */
	uint32_t nnodes;
	uint32_t *first; /* first child */
	uint32_t *next; /* next sibling */
	uint32_t *fail; /* the longest proper suffix that is a node */
	uint32_t *depth;
	uint32_t *outl; /* length of the longest form that is a suffix, 0 none */
	uint32_t *keep; /* length of the longest suffix with a child: bytes to hold */
	unsigned char *ch; /* the byte into the node: the forms themselves, spread out */
	void *mem; /* owned: all the arrays above */
	size_t memlen;
};

/*
 * The forms. The key reaches an answer as the upstream read it: raw (a header quoted as
 * text), percent-encoded (a URL or query echoed; encoders differ in hex case), JSON-escaped
 * (a request dump as JSON; '/' escaped or not, both are common), base64 (an Authorization:
 * Basic header, a whole request encoded), in the standard and the URL-safe alphabet.
 *
 * base64 writes 3 bytes as 4 characters, character j holding bits 6j..6j+5 of the text.
 * The key sits inside a longer text at a byte offset of which only o = offset mod 3
 * matters: its bits are 8o..8(o+klen)-1. Character j depends on the key alone when
 * 6j >= 8o and 6j+5 <= 8(o+klen)-1, i.e. for j in [ceil(8o/6), floor(8(o+klen)/6)). The
 * characters at either end mix key bits with the unknown bytes around it (or padding), so
 * they are not part of the pattern: they stay visible, at most 4 bits of the key at each end,
 * which a key of 8 bytes or more can spare. The three alignments give three patterns.
 */
enum {
	F_RAW,
	F_PCT_UPPER,
	F_PCT_LOWER,
	F_JSON,
	F_JSON_SLASH_KEPT,
	F_B64,
	F_B64_END = F_B64 + 2,
	F_B64URL,
	F_B64URL_END = F_B64URL + 2,
	F_COUNT
};

static const char b64_std[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static void put(char *p, size_t *len, char c)
{
	if (p)
		p[*len] = c;
	(*len)++;
}

/* RFC 3986 unreserved: the bytes a percent-encoder leaves as they are. */
static int unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		c == '-' || c == '.' || c == '_' || c == '~';
}

static void put_json(char *p, size_t *len, unsigned char c, int slash)
{
	static const char hex[] = "0123456789abcdef";
	static const char shortesc[0x20] = {
		['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't'};

	if (c == '"' || c == '\\' || (c == '/' && slash)) {
		put(p, len, '\\');
		put(p, len, (char)c);
	} else if (c < 0x20 && shortesc[c]) {
		put(p, len, '\\');
		put(p, len, shortesc[c]);
	} else if (c < 0x20) {
		put(p, len, '\\');
		put(p, len, 'u');
		put(p, len, '0');
		put(p, len, '0');
		put(p, len, hex[c >> 4]);
		put(p, len, hex[c & 15]);
	} else {
		put(p, len, (char)c);
	}
}

/* Form `kind` of key k (n bytes) into p when not NULL: its length. */
static size_t form(const unsigned char *k, size_t n, int kind, char *p)
{
	const char *hex = kind == F_PCT_LOWER ? "0123456789abcdef" : "0123456789ABCDEF";
	const char *alpha = kind >= F_B64URL ? b64_url : b64_std;
	size_t len = 0, o = 0;

	switch (kind) {
	case F_RAW:
		if (p)
			memcpy(p, k, n);
		return n;
	case F_PCT_UPPER:
	case F_PCT_LOWER:
		for (size_t i = 0; i < n; i++) {
			if (unreserved(k[i])) {
				put(p, &len, (char)k[i]);
				continue;
			}
			put(p, &len, '%');
			put(p, &len, hex[k[i] >> 4]);
			put(p, &len, hex[k[i] & 15]);
		}
		return len;
	case F_JSON:
	case F_JSON_SLASH_KEPT:
		for (size_t i = 0; i < n; i++)
			put_json(p, &len, k[i], kind == F_JSON);
		return len;
	default:
		o = (size_t)(kind >= F_B64URL ? kind - F_B64URL : kind - F_B64);
		for (size_t j = (8 * o + 5) / 6; j < 8 * (o + n) / 6; j++) {
			/* Bit 6j of the text is bit b of the key, counted from its first MSB. */
			size_t b = 6 * j - 8 * o;
			unsigned w = (unsigned)k[b / 8] << 8;

			if (b / 8 + 1 < n)
				w |= k[b / 8 + 1];
			put(p, &len, alpha[(w >> (10 - b % 8)) & 63]);
		}
		return len;
	}
}

static uint32_t child(const struct inj_redact_ac *ac, uint32_t u, unsigned char c)
{
	for (uint32_t v = ac->first[u]; v; v = ac->next[v])
		if (ac->ch[v] == c)
			return v;
	return 0;
}

/* The state after c from st: the hot path. */
static inline uint32_t step(const struct inj_redact_ac *ac, uint32_t st, unsigned char c)
{
	uint32_t v;

	while (st) {
		if ((v = child(ac, st, c)))
			return v;
		st = ac->fail[st];
	}
	return ac->root[c];
}

static void ac_free(struct inj_redact_ac *ac)
{
	if (!ac)
		return;
	if (ac->mem) {
		explicit_bzero(ac->mem, ac->memlen);
		free(ac->mem);
	}
	explicit_bzero(ac, sizeof(*ac));
	free(ac);
}

static struct inj_redact_ac *ac_build(const struct inj_redact *r)
{
	struct inj_redact_ac *ac = calloc(1, sizeof(*ac));
	uint32_t *queue = NULL, head = 0, tail = 0, nn = 1;
	size_t total = 1;

	for (size_t i = 0; i < r->npat; i++)
		total += r->plen[i];
	if (!ac || total > UINT32_MAX)
		goto fail;
	ac->memlen = total * (6 * sizeof(uint32_t) + 1);
	ac->mem = calloc(1, ac->memlen);
	queue = malloc(total * sizeof(*queue));
	if (!ac->mem || !queue)
		goto fail;
	ac->first = ac->mem;
	ac->next = ac->first + total;
	ac->fail = ac->next + total;
	ac->depth = ac->fail + total;
	ac->outl = ac->depth + total;
	ac->keep = ac->outl + total;
	ac->ch = (unsigned char *)(ac->keep + total);

	/* The trie. */
	for (size_t i = 0; i < r->npat; i++) {
		uint32_t v = 0, u;

		for (size_t j = 0; j < r->plen[i]; j++) {
			unsigned char c = (unsigned char)r->pat[i][j];

			if (!(u = child(ac, v, c))) {
				u = nn++;
				ac->ch[u] = c;
				ac->depth[u] = ac->depth[v] + 1;
				ac->next[u] = ac->first[v];
				ac->first[v] = u;
			}
			v = u;
		}
		ac->outl[v] = (uint32_t)r->plen[i];
	}
	ac->nnodes = nn;
	for (uint32_t v = ac->first[0]; v; v = ac->next[v])
		ac->root[ac->ch[v]] = v;

	/* Failure links breadth first: a node's are computed from shallower nodes only. */
	queue[tail++] = 0;
	while (head < tail) {
		uint32_t u = queue[head++];

		for (uint32_t v = ac->first[u]; v; v = ac->next[v]) {
			ac->fail[v] = u ? step(ac, ac->fail[u], ac->ch[v]) : 0;
			if (!ac->outl[v])
				ac->outl[v] = ac->outl[ac->fail[v]];
			ac->keep[v] = ac->first[v] ? ac->depth[v] : ac->keep[ac->fail[v]];
			queue[tail++] = v;
		}
	}
	free(queue);
	return ac;
fail:
	free(queue);
	ac_free(ac);
	return NULL;
}

static int known(const struct inj_redact *r, const char *p, size_t len)
{
	for (size_t i = 0; i < r->npat; i++)
		if (r->plen[i] == len && memcmp(r->pat[i], p, len) == 0)
			return 1;
	return 0;
}

int inj_redact_init(struct inj_redact *r, const char *key, size_t klen)
{
	size_t maxlen = 0;

	memset(r, 0, sizeof(*r));
	if (klen < INJ_REDACT_MIN)
		return 0;
	for (int kind = 0; kind < F_COUNT && r->npat < INJ_REDACT_MAXPAT; kind++) {
		size_t len = form((const unsigned char *)key, klen, kind, NULL);
		char *p;

		if (len < INJ_REDACT_MIN)
			continue;
		if (!(p = malloc(len + 1)))
			goto fail;
		form((const unsigned char *)key, klen, kind, p);
		p[len] = '\0';
		if (known(r, p, len)) {
			explicit_bzero(p, len);
			free(p);
			continue;
		}
		r->pat[r->npat] = p;
		r->plen[r->npat++] = len;
		if (len > maxlen)
			maxlen = len;
	}
	if (!(r->ac = ac_build(r)))
		goto fail;
	/*
	 * The hold is shorter than the longest form. Twice that lets it slide forward by
	 * pointer and be moved back to the start only after as many bytes went out.
	 */
	r->hcap = 2 * maxlen;
	r->hbuf = malloc(r->hcap);
	r->s.qcap = r->sa.qcap = maxlen / INJ_REDACT_MIN + 64;
	r->s.q = calloc(r->s.qcap, sizeof(*r->s.q));
	r->sa.q = calloc(r->sa.qcap, sizeof(*r->sa.q));
	if (!r->hbuf || !r->s.q || !r->sa.q)
		goto fail;
	r->hold = r->hbuf;
	return 0;
fail:
	inj_redact_free(r);
	return -1;
}

void inj_redact_free(struct inj_redact *r)
{
	for (size_t i = 0; i < r->npat && i < INJ_REDACT_MAXPAT; i++) {
		if (r->pat[i]) {
			explicit_bzero(r->pat[i], r->plen[i]);
			free(r->pat[i]);
		}
	}
	if (r->hbuf) {
		explicit_bzero(r->hbuf, r->hcap);
		free(r->hbuf);
	}
	ac_free(r->ac);
	free(r->s.q);
	free(r->sa.q);
	explicit_bzero(r, sizeof(*r));
}

static struct inj_redact_run *q_at(struct inj_redact_scan *sc, size_t i)
{
	i += sc->qhead;
	return &sc->q[i >= sc->qcap ? i - sc->qcap : i];
}

static void q_pop_front(struct inj_redact_scan *sc)
{
	sc->qhead = sc->qhead + 1 == sc->qcap ? 0 : sc->qhead + 1;
	sc->qlen--;
}

/* A form of len bytes ends at position end: its bytes join the runs to mask. */
static void found(struct inj_redact_scan *sc, unsigned long long end, uint32_t len)
{
	unsigned long long start = end + 1 - len;
	struct inj_redact_run *b;

	/* Its start is among the bytes held, never released (they are a prefix of it). */
	if (start < sc->done)
		start = sc->done;
	/* Runs that start inside it end before it ends: they are part of it. */
	while (sc->qlen && q_at(sc, sc->qlen - 1)->start >= start)
		sc->qlen--;
	/* The last run touches it: they are one run. */
	if (sc->qlen) {
		b = q_at(sc, sc->qlen - 1);
		if (b->end + 1 >= start) {
			b->end = end;
			return;
		}
	}
	b = q_at(sc, sc->qlen++);
	b->start = start;
	b->end = end;
}

/*
 * Scans in until its end or until the queue of runs is full: the bytes consumed. The
 * forms found are counted in *hits.
 */
static size_t scan(const struct inj_redact_ac *ac, struct inj_redact_scan *sc,
	const unsigned char *in, size_t n, unsigned long long *hits)
{
	uint32_t st = sc->state;
	size_t i = 0;

	while (i < n && sc->qlen < sc->qcap) {
		if (st == 0) {
			/* Nothing under way: most bytes start no form. */
			while (i < n && !(st = ac->root[in[i]]))
				i++;
			if (i == n)
				break;
		} else {
			st = step(ac, st, in[i]);
		}
		i++;
		if (ac->outl[st]) {
			found(sc, sc->pos + i - 1, ac->outl[st]);
			(*hits)++;
		}
	}
	sc->state = st;
	sc->pos += i;
	return i;
}

/*
 * Releases the bytes up to position upto: dst holds them from position sc->done on, and
 * the runs that cover them are masked there.
 */
static void release(struct inj_redact_scan *sc, unsigned long long upto, char *dst)
{
	unsigned long long a = sc->done;

	while (a < upto) {
		struct inj_redact_run *m;
		unsigned long long b;

		while (sc->qlen && q_at(sc, 0)->end < a)
			q_pop_front(sc);
		if (!sc->qlen)
			break;
		m = q_at(sc, 0);
		if (m->start > a) {
			a = m->start;
			continue;
		}
		b = m->end + 1 < upto ? m->end + 1 : upto;
		memset(dst + (a - sc->done), '*', b - a);
		a = b;
	}
	while (sc->qlen && q_at(sc, 0)->end < upto)
		q_pop_front(sc);
	sc->done = upto;
}

/*
 * The stream's release: the bytes up to upto appended to out, from the hold (positions
 * before pos0, where this call's input begins) and from in, then masked. On failure out
 * is put back and what was copied into it wiped.
 */
static int release_out(struct inj_redact *r, unsigned long long upto, unsigned long long pos0,
	const char *in, struct buf *out)
{
	struct inj_redact_scan *sc = &r->s;
	unsigned long long a = sc->done, hstart = pos0 - r->nhold;
	size_t off = out->len;
	int k = 0;

	if (upto <= a)
		return 0;
	if (a < pos0)
		k = buf_append(
			out, r->hold + (a - hstart), (size_t)((upto < pos0 ? upto : pos0) - a));
	if (k == 0 && upto > pos0)
		k = buf_append(out, in + ((a > pos0 ? a : pos0) - pos0),
			(size_t)(upto - (a > pos0 ? a : pos0)));
	if (k < 0) {
		explicit_bzero(out->data + off, out->len - off);
		out->len = off;
		if (out->data)
			out->data[off] = '\0';
		return -1;
	}
	release(sc, upto, out->data + off);
	return 0;
}

/*
 * The stream starts afresh: what was not released is dropped (after a failure: it is never
 * sent unmasked, and the struct stays consistent for the next call).
 */
static void drop(struct inj_redact *r)
{
	r->s.state = 0;
	r->s.done = r->s.pos;
	r->s.qlen = 0;
	r->hold = r->hbuf;
	r->nhold = 0;
}

int inj_redact_feed(struct inj_redact *r, const char *in, size_t n, struct buf *out)
{
	const struct inj_redact_ac *ac = r->ac;
	struct inj_redact_scan *sc = &r->s;
	unsigned long long pos0 = sc->pos;
	size_t i = 0, keep;

	if (!ac)
		return n && buf_append(out, in, n) < 0 ? -1 : 0;
	if (n == 0)
		return 0;
	while (i < n) {
		i += scan(ac, sc, (const unsigned char *)in + i, n - i, &r->hits);
		/* The queue is full (or all is scanned): out with what no form can still cover. */
		if (release_out(r, sc->pos - ac->keep[sc->state], pos0, in, out) < 0) {
			drop(r);
			return -1;
		}
	}
	/* The new hold: the last keep bytes of the old hold followed by in. */
	keep = ac->keep[sc->state];
	if (keep <= n) {
		r->hold = r->hbuf;
		memmove(r->hold, in + (n - keep), keep);
	} else {
		size_t kept = keep - n; /* from the old hold, its tail */
		char *from = r->hold + (r->nhold - kept);

		if ((size_t)(from - r->hbuf) + keep > r->hcap) {
			memmove(r->hbuf, from, kept);
			from = r->hbuf;
		}
		memcpy(from + kept, in, n);
		r->hold = from;
	}
	r->nhold = keep;
	return 0;
}

int inj_redact_flush(struct inj_redact *r, struct buf *out)
{
	struct inj_redact_scan *sc = &r->s;

	if (!r->ac)
		return 0;
	if (release_out(r, sc->pos, sc->pos, NULL, out) < 0) {
		drop(r);
		return -1;
	}
	/* What went out can no longer be masked: no form may start in it. */
	drop(r);
	return 0;
}

size_t inj_redact_all(struct inj_redact *r, char *p, size_t n)
{
	const struct inj_redact_ac *ac = r->ac;
	struct inj_redact_scan *sc = &r->sa;
	unsigned long long hits = 0;
	size_t i = 0;

	if (!ac)
		return 0;
	sc->state = 0;
	sc->pos = sc->done = 0;
	sc->qhead = sc->qlen = 0;
	while (i < n) {
		i += scan(ac, sc, (const unsigned char *)p + i, n - i, &hits);
		release(sc, i < n ? sc->pos - ac->keep[sc->state] : n, p + sc->done);
	}
	r->hits += hits;
	return (size_t)hits;
}
