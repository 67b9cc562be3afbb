/* SPDX-License-Identifier: MIT */
/*
 * Routes: the built-in providers, the owner's generic form, and the hand-over text
 * ocsb-agentd sends the injector. Messages never quote a key.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "inject.h"

/*
 * Each provider's API base as OpenCode's provider takes it (baseURL), and the header the
 * provider authenticates with.
 */
static const struct inj_provider providers[] = {
	{"anthropic", "https://api.anthropic.com/v1", "x-api-key: {}"},
	{"openai", "https://api.openai.com/v1", "Authorization: Bearer {}"},
	{"google", "https://generativelanguage.googleapis.com/v1beta", "x-goog-api-key: {}"},
	{"openrouter", "https://openrouter.ai/api/v1", "Authorization: Bearer {}"},
	{"mistral", "https://api.mistral.ai/v1", "Authorization: Bearer {}"},
	{"groq", "https://api.groq.com/openai/v1", "Authorization: Bearer {}"},
	{"deepseek", "https://api.deepseek.com/v1", "Authorization: Bearer {}"},
	{"xai", "https://api.x.ai/v1", "Authorization: Bearer {}"},
};

const struct inj_provider *inj_providers(size_t *ret_n)
{
	*ret_n = ARRAY_SIZE(providers);
	return providers;
}

const struct inj_provider *inj_provider_find(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(providers); i++)
		if (!strcmp(providers[i].name, name))
			return &providers[i];
	return NULL;
}

static int printable(const char *s, int spaces)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x21 + (spaces ? -1 : 0) || (unsigned char)*s > 0x7e)
			return 0;
	return 1;
}

static int host_ok(const char *h)
{
	size_t n = strlen(h);

	if (n == 0 || n > 253 || h[0] == '.' || h[0] == '-' || h[n - 1] == '.')
		return 0;
	for (; *h; h++)
		if (!isalnum((unsigned char)*h) && *h != '.' && *h != '-')
			return 0;
	return 1;
}

int inj_route_check(const struct inj_route *r, char *err, size_t errlen)
{
	const char *at = strstr(r->htmpl, "{}");

	if (!host_ok(r->host))
		return seterr(err, errlen, "upstream host: letters, digits, '.' and '-' only");
	if (r->uport == 0 || r->uport > 65535 || r->port > 65535)
		return seterr(err, errlen, "port out of range");
	if (r->prefix[0] && (r->prefix[0] != '/' || r->prefix[strlen(r->prefix) - 1] == '/' ||
				    !printable(r->prefix, 0) || strstr(r->prefix, "/.") ||
				    strchr(r->prefix, '?') || strchr(r->prefix, '%')))
		return seterr(err, errlen, "path prefix: /segment[/segment...], no dots or escapes");
	if (!r->hname[0])
		return seterr(err, errlen, "header name missing");
	for (const char *c = r->hname; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_')
			return seterr(err, errlen, "header name: letters, digits, '-' and '_' only");
	if (!at || strstr(at + 2, "{}") || !printable(r->htmpl, 1) || strchr(r->htmpl, '\t'))
		return seterr(err, errlen, "header value: printable text with exactly one {}");
	return 0;
}

static int copy(char *dst, size_t n, const char *src, size_t len)
{
	if (len >= n)
		return -1;
	memcpy(dst, src, len);
	dst[len] = 0;
	return 0;
}

int inj_route_from(
	struct inj_route *r, const char *base, const char *header, char *err, size_t errlen)
{
	const char *h, *slash, *colon, *hc;

	memset(r, 0, sizeof(*r));
	if (strncmp(base, "https://", 8) != 0)
		return seterr(err, errlen, "base URL: https://host[/prefix] (TLS only)");
	h = base + 8;
	slash = strchr(h, '/');
	if (!slash)
		slash = h + strlen(h);
	colon = memchr(h, ':', (size_t)(slash - h));
	if (copy(r->host, sizeof(r->host), h, (size_t)((colon ? colon : slash) - h)) < 0)
		return seterr(err, errlen, "base URL: host too long");
	r->uport = 443;
	if (colon) {
		char *e;
		unsigned long p = strtoul(colon + 1, &e, 10);
		if (e != slash || p == 0 || p > 65535)
			return seterr(err, errlen, "base URL: bad port");
		r->uport = (unsigned)p;
	}
	if (copy(r->prefix, sizeof(r->prefix), slash, strlen(slash)) < 0)
		return seterr(err, errlen, "base URL: path too long");
	/* "https://host/" and "https://host" mean the same: no prefix. */
	if (!strcmp(r->prefix, "/"))
		r->prefix[0] = 0;
	hc = strchr(header, ':');
	if (!hc || copy(r->hname, sizeof(r->hname), header, (size_t)(hc - header)) < 0)
		return seterr(err, errlen, "header: 'Name: value with {}'");
	hc++;
	while (*hc == ' ')
		hc++;
	if (copy(r->htmpl, sizeof(r->htmpl), hc, strlen(hc)) < 0)
		return seterr(err, errlen, "header: value too long");
	return inj_route_check(r, err, errlen);
}

int inj_route_spec(struct inj_route *r, const char *spec, char *err, size_t errlen)
{
	const struct inj_provider *p = inj_provider_find(spec);
	const char *sp = strchr(spec, ' ');
	char base[512];

	if (p)
		return inj_route_from(r, p->base, p->header, err, errlen);
	if (!sp || (size_t)(sp - spec) >= sizeof(base))
		return seterr(err, errlen,
			"'%.64s' is not a provider (anthropic, openai, google, openrouter, mistral, "
			"groq, deepseek, xai) nor 'https://host[/prefix]' with --header",
			spec);
	memcpy(base, spec, (size_t)(sp - spec));
	base[sp - spec] = 0;
	return inj_route_from(r, base, sp + 1, err, errlen);
}

int inj_git_insteadof(const struct inj_route *r, unsigned port, char *ret_base, size_t nb,
	char *ret_url, size_t nu)
{
	char uport[8] = "";
	int a, b;

	if (r->uport != 443)
		snprintf(uport, sizeof(uport), ":%u", r->uport % 65536);
	a = snprintf(ret_base, nb, "http://127.0.0.1:%u%s/", port % 65536, r->prefix);
	b = snprintf(ret_url, nu, "https://%s%s%s/", r->host, uport, r->prefix);
	return a < 0 || (size_t)a >= nb || b < 0 || (size_t)b >= nu ? -1 : 0;
}

char *inj_key_dup(const char *s, size_t n)
{
	char *k;

	if (sodium_init() < 0)
		return NULL;
	k = sodium_malloc(n + 1);
	if (!k)
		return NULL;
	memcpy(k, s, n);
	k[n] = 0;
	return k;
}

void inj_key_free(char *key)
{
	/* sodium_free wipes the whole allocation before unmapping it. */
	if (key)
		sodium_free(key);
}

void inj_conf_free(struct inj_conf *c)
{
	for (size_t i = 0; i < c->n; i++)
		inj_key_free(c->r[i].key);
	free(c->ca_pem);
	memset(c, 0, sizeof(*c));
}

/* Splits the next tab-separated field off *p (up to end); NULL when none is left. */
static const char *field(const char **p, const char *end, size_t *len)
{
	const char *s = *p, *t;

	if (s > end)
		return NULL;
	t = memchr(s, '\t', (size_t)(end - s));
	if (!t)
		t = end;
	*len = (size_t)(t - s);
	*p = t + 1;
	return s;
}

static int parse_uint(const char *s, size_t len, unsigned max, unsigned *ret)
{
	unsigned long v = 0;

	if (len == 0 || len > 5)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (v > max)
		return -1;
	*ret = (unsigned)v;
	return 0;
}

static int parse_route(const char *p, const char *end, struct inj_route *r, char *err, size_t errlen)
{
	const char *f[8];
	size_t l[8];

	for (int i = 0; i < 8; i++)
		if (!(f[i] = field(&p, end, &l[i])))
			return seterr(err, errlen, "route line: 8 fields after 'route'");
	if (p <= end)
		return seterr(err, errlen, "route line: extra fields");
	if (copy(r->name, sizeof(r->name), f[0], l[0]) < 0 ||
		parse_uint(f[1], l[1], 65535, &r->port) < 0 ||
		copy(r->host, sizeof(r->host), f[2], l[2]) < 0 ||
		parse_uint(f[3], l[3], 65535, &r->uport) < 0 ||
		copy(r->prefix, sizeof(r->prefix), f[4], l[4]) < 0 ||
		copy(r->hname, sizeof(r->hname), f[5], l[5]) < 0 ||
		copy(r->htmpl, sizeof(r->htmpl), f[6], l[6]) < 0 || l[7] == 0 || l[7] > INJ_KEY_MAX)
		return seterr(err, errlen, "route line: a field is empty, too long or not a number");
	if (!r->name[0] || !printable(r->name, 0) || !r->port)
		return seterr(err, errlen, "route line: bad name or port");
	if (inj_route_check(r, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < l[7]; i++)
		if ((unsigned char)f[7][i] < 0x21 || (unsigned char)f[7][i] > 0x7e)
			return seterr(err, errlen, "route %s: the key is not printable ASCII", r->name);
	r->key = inj_key_dup(f[7], l[7]);
	if (!r->key)
		return seterr(err, errlen, "out of memory");
	return 0;
}

int inj_conf_parse(const char *p, size_t n, struct inj_conf *ret, char *err, size_t errlen)
{
	const char *end = p + n;
	struct inj_conf c;

	memset(&c, 0, sizeof(c));
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol) {
			seterr(err, errlen, "hand-over: unterminated line");
			goto fail;
		}
		if (eol - p == 3 && !memcmp(p, "end", 3)) {
			if (eol + 1 != end) {
				seterr(err, errlen, "hand-over: bytes after 'end'");
				goto fail;
			}
			*ret = c;
			return 0;
		}
		if (eol - p > 6 && !memcmp(p, "route\t", 6)) {
			if (c.n == INJ_MAX_ROUTES) {
				seterr(err, errlen, "hand-over: more than %d routes", INJ_MAX_ROUTES);
				goto fail;
			}
			if (parse_route(p + 6, eol, &c.r[c.n], err, errlen) < 0)
				goto fail;
			for (size_t i = 0; i < c.n; i++)
				if (c.r[i].port == c.r[c.n].port || !strcmp(c.r[i].name, c.r[c.n].name)) {
					c.n++;
					seterr(err, errlen, "hand-over: two routes share a name or port");
					goto fail;
				}
			c.n++;
		} else if (eol - p > 5 && !memcmp(p, "peer\t", 5) && !c.have_peer) {
			unsigned long v = 0;
			size_t i = 5;
			for (; p + i < eol && p[i] >= '0' && p[i] <= '9' && v < 0xffffffffUL; i++)
				v = v * 10 + (unsigned long)(p[i] - '0');
			/* Root is never the agent: a peer of 0 would serve root's processes. */
			if (p + i != eol || i == 5 || v == 0 || v >= 0xffffffffUL) {
				seterr(err, errlen, "hand-over: bad peer line");
				goto fail;
			}
			c.peer = (uid_t)v;
			c.have_peer = 1;
		} else if (eol - p > 3 && !memcmp(p, "ca\t", 3) && !c.ca_pem) {
			unsigned len;
			if (parse_uint(p + 3, (size_t)(eol - p - 3), INJ_CA_MAX, &len) < 0 ||
				(size_t)(end - eol - 1) < len || !(c.ca_pem = malloc(len + 1))) {
				seterr(err, errlen, "hand-over: bad ca block");
				goto fail;
			}
			memcpy(c.ca_pem, eol + 1, len);
			c.ca_pem[len] = 0;
			c.ca_len = len;
			eol += len;
		} else {
			seterr(err, errlen, "hand-over: unknown line");
			goto fail;
		}
		p = eol + 1;
	}
	seterr(err, errlen, "hand-over: no 'end'");
fail:
	inj_conf_free(&c);
	return -1;
}

int inj_conf_render(const struct inj_conf *c, struct buf *out)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct inj_route *r = &c->r[i];
		if (buf_printf(out, "route\t%s\t%u\t%s\t%u\t%s\t%s\t%s\t%s\n", r->name, r->port,
			    r->host, r->uport, r->prefix, r->hname, r->htmpl,
			    r->key ? r->key : "") < 0)
			return -1;
	}
	if (c->have_peer && buf_printf(out, "peer\t%u\n", (unsigned)c->peer) < 0)
		return -1;
	if (c->ca_pem && (buf_printf(out, "ca\t%zu\n", c->ca_len) < 0 ||
				 buf_append(out, c->ca_pem, c->ca_len) < 0))
		return -1;
	return buf_puts(out, "end\n");
}

void inj_usage_init(struct inj_usage *u)
{
	memset(u, 0, sizeof(*u));
	u->in_tokens = u->out_tokens = -1;
}

/*
 * "name":<digits> in s (len bytes): the last value, or -1; *ret_at gets where its field
 * starts (left alone when none).
 */
static long long last_number(const char *s, size_t len, const char *name, size_t *ret_at)
{
	size_t nl = strlen(name);
	long long v = -1;

	for (size_t i = 0; i + nl + 2 < len; i++) {
		size_t j = i + nl + 2;
		if (s[i] != '"' || memcmp(s + i + 1, name, nl) || s[i + nl + 1] != '"')
			continue;
		while (j < len && (s[j] == ' ' || s[j] == ':'))
			j++;
		if (j < len && s[j] >= '0' && s[j] <= '9') {
			long long x = 0;
			while (j < len && s[j] >= '0' && s[j] <= '9' && x < 1000000000000LL)
				x = x * 10 + (s[j++] - '0');
			/* A number cut by the read's end is taken from the next window. */
			if (j < len) {
				v = x;
				*ret_at = i;
			}
		}
	}
	return v;
}

/*
 * Of the names of one count, the value of the field that comes last in the window: an
 * answer with both "prompt_tokens" and "input_tokens" counts the same whatever the reads.
 */
static void scan_count(long long *count, const char *s, size_t len, const char *const names[3])
{
	size_t best = 0, at;
	int found = 0;

	for (size_t i = 0; i < 3; i++) {
		long long v = last_number(s, len, names[i], &at);
		if (v >= 0 && (!found || at > best)) {
			*count = v;
			best = at;
			found = 1;
		}
	}
}

static void scan_tokens(struct inj_usage *u, const char *s, size_t len)
{
	static const char *const in[] = {"input_tokens", "prompt_tokens", "promptTokenCount"};
	static const char *const out[] = {
		"output_tokens", "completion_tokens", "candidatesTokenCount"};

	scan_count(&u->in_tokens, s, len, in);
	scan_count(&u->out_tokens, s, len, out);
}

void inj_usage_feed(struct inj_usage *u, const char *p, size_t n)
{
	char win[sizeof(u->tail) + 4096];

	u->resp_bytes += n;
	if (!u->status) {
		for (size_t i = 0; i < n && u->line_len < sizeof(u->line) - 1; i++)
			u->line[u->line_len++] = p[i];
		u->line[u->line_len] = 0;
		if (u->line_len >= 12 && !memcmp(u->line, "HTTP/1.", 7))
			u->status = atoi(u->line + 9);
	}
	/* Windows of the stream with the previous tail in front: a field split by a read. */
	while (n) {
		size_t take = n < 4096 ? n : 4096, wl;
		memcpy(win, u->tail, u->tail_len);
		memcpy(win + u->tail_len, p, take);
		wl = u->tail_len + take;
		scan_tokens(u, win, wl);
		u->tail_len = wl < sizeof(u->tail) ? wl : sizeof(u->tail);
		memcpy(u->tail, win + wl - u->tail_len, u->tail_len);
		p += take;
		n -= take;
	}
}

/* The usage line of one request: "usage\tROUTE\tDAY\tSTATUS\tREQ\tRESP\tIN\tOUT\n". */
int inj_usage_line(const char *route, time_t when, const struct inj_usage *u, char *out, size_t n)
{
	struct tm tm;
	char day[16];

	gmtime_r(&when, &tm);
	strftime(day, sizeof(day), "%Y-%m-%d", &tm);
	return snprintf(out, n, "usage\t%s\t%s\t%d\t%llu\t%llu\t%lld\t%lld\n", route, day,
		u->status, u->req_bytes, u->resp_bytes, u->in_tokens, u->out_tokens);
}

int inj_usage_add(struct inj_usage_row *rows, size_t *n, size_t max, const char *line)
{
	char route[65], day[11];
	int status;
	unsigned long long req, resp;
	long long in, out;
	size_t i;

	if (sscanf(line, "%64[^\t]\t%10[0-9-]\t%d\t%llu\t%llu\t%lld\t%lld", route, day, &status,
		    &req, &resp, &in, &out) != 7 || strlen(day) != 10)
		return -1;
	for (i = 0; i < *n; i++)
		if (!strcmp(rows[i].route, route) && !strcmp(rows[i].day, day))
			break;
	if (status < INJ_REFUSED)
		return -1;
	if (i == *n) {
		/* Full: the oldest row (the first) makes room. */
		if (*n == max) {
			memmove(rows, rows + 1, (max - 1) * sizeof(*rows));
			i = --*n;
		}
		memset(&rows[i], 0, sizeof(rows[i]));
		snprintf(rows[i].route, sizeof(rows[i].route), "%s", route);
		snprintf(rows[i].day, sizeof(rows[i].day), "%s", day);
		(*n)++;
	}
	if (status == INJ_REFUSED) {
		/* Answered by the injector itself: not a request the route made. */
		rows[i].refused++;
		return 0;
	}
	rows[i].n++;
	rows[i].req += req;
	rows[i].resp += resp;
	rows[i].in += in > 0 ? (unsigned long long)in : 0;
	rows[i].out += out > 0 ? (unsigned long long)out : 0;
	rows[i].st[status >= 200 && status < 600 ? status / 100 - 2 : 4]++;
	return 0;
}

int inj_usage_render(const struct inj_usage_row *rows, size_t n, struct buf *out)
{
	for (size_t i = 0; i < n; i++) {
		const struct inj_usage_row *r = &rows[i];
		if (buf_printf(out,
			    "%s\t%s\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\n",
			    r->route, r->day, r->n, r->req, r->resp, r->in, r->out, r->st[0], r->st[1],
			    r->st[2], r->st[3], r->st[4], r->refused) < 0)
			return -1;
	}
	return 0;
}

int inj_usage_parse(const char *text, struct inj_usage_row *rows, size_t *n, size_t max)
{
	*n = 0;
	for (const char *p = text; *p && *n < max;) {
		struct inj_usage_row *r = &rows[*n];
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char line[512];
		int k;

		/* One line at a time: scanf's "\t" would also take the newline. */
		if (len >= sizeof(line))
			return -1;
		memcpy(line, p, len);
		line[len] = 0;
		memset(r, 0, sizeof(*r));
		k = sscanf(line,
			"%64[^\t]\t%10[0-9-]\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%llu\t%"
			"llu\t%llu",
			r->route, r->day, &r->n, &r->req, &r->resp, &r->in, &r->out, &r->st[0],
			&r->st[1], &r->st[2], &r->st[3], &r->st[4], &r->refused);
		/* 12 fields: written before refusals were counted apart. */
		if (k != 12 && k != 13)
			return -1;
		(*n)++;
		if (!nl)
			break;
		p = nl + 1;
	}
	return 0;
}
