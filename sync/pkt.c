/* SPDX-License-Identifier: MIT */
/*
 * git's pkt-line framing (protocol v0) and the receive-pack replies push.c reads:
 * the ref advertisement and report-status. Pure functions on bytes the agent sends,
 * so every length and every field is checked here and unit-tested with hostile input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync.h"

static int sync_hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

long sync_pkt_parse(const char *buf, size_t avail, enum sync_pkt_type *ret_type,
	const char **ret_data, size_t *ret_len)
{
	long len = 0;

	if (avail < 4)
		return 0;
	for (int i = 0; i < 4; i++) {
		int v = sync_hexval(buf[i]);

		if (v < 0)
			return -1;
		len = len * 16 + v;
	}
	if (len == 0) {
		*ret_type = SYNC_PKT_FLUSH;
		*ret_data = NULL;
		*ret_len = 0;
		return 4;
	}
	/* 0001-0003: delimiter/response-end (protocol v2) or impossible; never in v0. */
	if (len < 4 || len > SYNC_PKT_MAX)
		return -1;
	if ((size_t)len > avail)
		return 0;
	*ret_type = SYNC_PKT_DATA;
	*ret_data = buf + 4;
	*ret_len = (size_t)len - 4;
	return len;
}

long sync_pkt_format(char *out, size_t n, const char *data, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t total = len + 4;

	if (total > SYNC_PKT_MAX || total > n)
		return -1;
	for (int i = 3; i >= 0; i--) {
		out[i] = hex[total & 15];
		total >>= 4;
	}
	memcpy(out + 4, data, len);
	return (long)len + 4;
}

int sync_adv_parse(const char *data, size_t len, git_oid *ret_oid, char *ret_name, size_t namelen,
	const char **ret_caps, size_t *ret_capslen)
{
	const char *name, *nul, *end;
	char hex[GIT_OID_HEXSZ + 1];

	if (len && data[len - 1] == '\n')
		len--;
	if (len < GIT_OID_HEXSZ + 2 || data[GIT_OID_HEXSZ] != ' ')
		return -1;
	for (int i = 0; i < GIT_OID_HEXSZ; i++)
		if (sync_hexval(data[i]) < 0)
			return -1;
	memcpy(hex, data, GIT_OID_HEXSZ);
	hex[GIT_OID_HEXSZ] = '\0';
	if (git_oid_fromstr(ret_oid, hex) < 0)
		return -1;
	name = data + GIT_OID_HEXSZ + 1;
	end = data + len;
	nul = memchr(name, '\0', (size_t)(end - name));
	*ret_caps = NULL;
	*ret_capslen = 0;
	if (nul) {
		*ret_caps = nul + 1;
		*ret_capslen = (size_t)(end - nul - 1);
		end = nul;
	}
	if (end == name || (size_t)(end - name) >= namelen)
		return -1;
	for (const char *p = name; p < end; p++)
		if ((unsigned char)*p <= ' ' || *p == 0x7f)
			return -1;
	memcpy(ret_name, name, (size_t)(end - name));
	ret_name[end - name] = '\0';
	return 0;
}

static int sync_haves_add(struct sync_adv *adv, const git_oid *id)
{
	if (adv->nhaves == adv->cap) {
		size_t cap = adv->cap ? 2 * adv->cap : 64;
		git_oid *v = realloc(adv->haves, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		adv->haves = v;
		adv->cap = cap;
	}
	git_oid_cpy(&adv->haves[adv->nhaves++], id);
	return 0;
}

int sync_adv_feed(
	struct sync_adv *adv, const char *data, size_t len, struct sync_push_cmd *cmds, size_t n)
{
	const char *caps;
	size_t capslen;
	char name[1024];
	git_oid id;

	if (++adv->count > SYNC_PUSH_MAX_ADVERTISED)
		return -E2BIG;
	if (sync_adv_parse(data, len, &id, name, sizeof(name), &caps, &capslen) < 0) {
		/* A name we cannot hold is no ref we push to: only its id matters. */
		if (len > GIT_OID_HEXSZ && data[GIT_OID_HEXSZ] == ' ' &&
			git_oid_fromstrn(&id, data, GIT_OID_HEXSZ) == 0)
			return sync_haves_add(adv, &id);
		return -EPROTO;
	}
	if (adv->count == 1 && caps) {
		adv->capslen = capslen < sizeof(adv->caps) ? capslen : sizeof(adv->caps) - 1;
		memcpy(adv->caps, caps, adv->capslen);
	}
	if (git_oid_is_zero(&id))
		return 0; /* "capabilities^{}" of an empty repository */
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, cmds[i].dst))
			git_oid_cpy(&cmds[i].old_id, &id);
	return sync_haves_add(adv, &id);
}

void sync_adv_free(struct sync_adv *adv)
{
	free(adv->haves);
	adv->haves = NULL;
	adv->nhaves = adv->cap = 0;
}

int sync_caps_has(const char *caps, size_t len, const char *name)
{
	size_t nl = strlen(name);

	for (size_t i = 0; caps && i < len;) {
		const char *sp = memchr(caps + i, ' ', len - i);
		size_t l = sp ? (size_t)(sp - (caps + i)) : len - i;

		if ((l == nl || (l > nl && caps[i + nl] == '=')) && !memcmp(caps + i, name, nl))
			return 1;
		i += l + 1;
	}
	return 0;
}

int sync_report_feed(struct sync_report *r, enum sync_pkt_type type, const char *data, size_t len)
{
	const char *sp;
	size_t k;
	int ng;

	if (r->flushed) {
		snprintf(r->err, sizeof(r->err), "data after the end of the status report");
		return -1;
	}
	if (type == SYNC_PKT_FLUSH) {
		r->flushed = 1;
		return 0;
	}
	if (len && data[len - 1] == '\n')
		len--;
	if (!r->unpack) {
		/* "unpack ok" or "unpack <reason>": always the first line. */
		if (len < 7 || memcmp(data, "unpack ", 7) != 0) {
			snprintf(
				r->err, sizeof(r->err), "status report does not start with unpack");
			return -1;
		}
		if (len == 9 && !memcmp(data + 7, "ok", 2)) {
			r->unpack = 1;
		} else {
			r->unpack = 2;
			sync_escape(data + 7, len - 7, r->unpack_why, sizeof(r->unpack_why));
		}
		return 0;
	}
	if (len > 3 && !memcmp(data, "ok ", 3))
		ng = 0;
	else if (len > 3 && !memcmp(data, "ng ", 3))
		ng = 1;
	else {
		snprintf(r->err, sizeof(r->err), "unexpected line in the status report");
		return -1;
	}
	data += 3, len -= 3;
	sp = ng ? memchr(data, ' ', len) : NULL;
	k = sp ? (size_t)(sp - data) : len;
	for (size_t i = 0; i < r->n; i++) {
		if (strlen(r->refs[i]) != k || memcmp(r->refs[i], data, k) != 0)
			continue;
		/* One answer per ref: a second one would let a liar overwrite a refusal. */
		if (r->state[i]) {
			snprintf(r->err, sizeof(r->err), "two statuses for one ref");
			return -1;
		}
		r->state[i] = ng ? 2 : 1;
		r->why[i][0] = '\0';
		if (ng)
			sync_escape(sp ? sp + 1 : "", sp ? len - k - 1 : 0, r->why[i],
				sizeof(r->why[i]));
		return 0;
	}
	snprintf(r->err, sizeof(r->err), "status for a ref that was not pushed");
	return -1;
}

int sync_report_finish(struct sync_report *r)
{
	int refused = 0;

	if (r->err[0])
		return -1;
	if (!r->flushed || !r->unpack) {
		snprintf(r->err, sizeof(r->err), "status report cut short");
		return -1;
	}
	if (r->unpack == 2)
		refused = 1;
	for (size_t i = 0; i < r->n; i++) {
		if (!r->state[i] && r->unpack == 1) {
			snprintf(r->err, sizeof(r->err), "no status for %.200s", r->refs[i]);
			return -1;
		}
		if (r->state[i] == 2)
			refused = 1;
	}
	return refused;
}

/*
 * The pack's bytes in upload-pack's answer: every pkt-line whose payload starts with band
 * 1 (side-band-64k), the band byte dropped. The advertisement, ACK/NAK lines and bands 2
 * and 3 start with other bytes and are skipped. Framing is checked as sync_pkt_parse
 * does; a bad length stops the demux for good (d->bad).
 */
void sync_band_feed(struct sync_band *d, const char *p, size_t n,
	void (*emit)(void *arg, const char *p, size_t n), void *arg)
{
	while (n && !d->bad) {
		if (d->left == 0) {
			long len = 0;

			d->hdr[d->hlen++] = *p++, n--;
			if (d->hlen < 4)
				continue;
			d->hlen = 0;
			for (int i = 0; i < 4; i++) {
				int v = sync_hexval(d->hdr[i]);

				if (v < 0) {
					d->bad = 1;
					return;
				}
				len = len * 16 + v;
			}
			if (len == 0)
				continue; /* flush */
			if (len < 5 || len > SYNC_PKT_MAX) {
				d->bad = 1;
				return;
			}
			d->left = (size_t)len - 4;
			d->band = -1;
			continue;
		}
		if (d->band < 0) {
			d->band = (unsigned char)*p++, n--;
			d->left--;
			continue;
		}
		{
			size_t k = n < d->left ? n : d->left;

			if (d->band == 1)
				emit(arg, p, k);
			p += k, n -= k, d->left -= k;
		}
	}
}
