/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "unit.h"

#include "ctl.h"
#include "util.h"

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* A string of n copies of c, in one of 4 rotating buffers. */
static const char *rep(char c, size_t n)
{
	static char bufs[4][CTL_MAX_FRAME + 2];
	static unsigned next;
	char *b = bufs[next++ % 4];

	assert_true(n <= CTL_MAX_FRAME + 1);
	memset(b, c, n);
	b[n] = '\0';
	return b;
}

/* ---- requests: format -> parse ---- */

static void roundtrip(const struct ctl_request *in, const char *want)
{
	struct buf b = {0};
	struct ctl_request out;
	char err[256] = "";

	assert_int_equal(ctl_format_request(in, &b), 0);
	assert_string_equal(b.data, want);
	if (ctl_parse_request(b.data, b.len, &out, err, sizeof(err)) < 0)
		fail_msg("'%s' refused: %s", b.data, err);
	assert_int_equal(out.verb, in->verb);
	assert_string_equal(out.arg, in->arg);
	assert_int_equal(out.count, in->count);
	if (in->sealed)
		assert_string_equal(out.sealed, in->sealed);
	else
		assert_null(out.sealed);
	ctl_request_free(&out);
	assert_null(out.sealed);
	buf_free(&b);
}

static void request_roundtrip_every_verb(void **state)
{
	char name64[72];

	roundtrip(&(struct ctl_request){.verb = CTL_STATUS}, "OCSB/1 STATUS\n");
	roundtrip(&(struct ctl_request){.verb = CTL_RESTART}, "OCSB/1 RESTART\n");
	roundtrip(
		&(struct ctl_request){.verb = CTL_RESTART, .arg = "shop"}, "OCSB/1 RESTART shop\n");
	roundtrip(&(struct ctl_request){.verb = CTL_RESTART, .arg = "My_site-2.0"},
		"OCSB/1 RESTART My_site-2.0\n");
	snprintf(name64, sizeof(name64), "%s", rep('p', 64));
	{
		struct ctl_request rq = {.verb = CTL_RESTART};
		char want[128];

		memcpy(rq.arg, name64, 65);
		snprintf(want, sizeof(want), "OCSB/1 RESTART %s\n", name64);
		roundtrip(&rq, want);
	}
	roundtrip(&(struct ctl_request){.verb = CTL_LOGS}, "OCSB/1 LOGS\n");
	roundtrip(&(struct ctl_request){.verb = CTL_LOGS, .count = 1}, "OCSB/1 LOGS 1\n");
	roundtrip(&(struct ctl_request){.verb = CTL_LOGS, .count = 10000}, "OCSB/1 LOGS 10000\n");
	roundtrip(&(struct ctl_request){.verb = CTL_WEB}, "OCSB/1 WEB\n");
	roundtrip(&(struct ctl_request){.verb = CTL_PING}, "OCSB/1 PING\n");
	roundtrip(&(struct ctl_request){.verb = CTL_SECRET_PUT, .sealed = "c2VhbGVkIGJveA=="},
		"OCSB/1 SECRET-PUT\nsealed c2VhbGVkIGJveA==\n");
	roundtrip(&(struct ctl_request){.verb = CTL_SECRET_PUT, .sealed = "QUI="},
		"OCSB/1 SECRET-PUT\nsealed QUI=\n");
	{
		struct ctl_request rq = {
			.verb = CTL_SECRET_PUT, .sealed = (char *)rep('A', CTL_MAX_SEALED)};
		struct buf want = {0};

		buf_printf(&want, "OCSB/1 SECRET-PUT\nsealed %s\n", rq.sealed);
		roundtrip(&rq, want.data);
		buf_free(&want);
	}
}

/* Fields that do not belong to the verb are left out, not sent. */
static void request_format_ignores_other_fields(void **state)
{
	struct buf b = {0};

	assert_int_equal(
		ctl_format_request(
			&(struct ctl_request){
				.verb = CTL_STATUS, .arg = "x", .count = 5, .sealed = "QUJD"},
			&b),
		0);
	assert_string_equal(b.data, "OCSB/1 STATUS\n");
	/* out is overwritten, not appended to. */
	assert_int_equal(ctl_format_request(&(struct ctl_request){.verb = CTL_PING}, &b), 0);
	assert_string_equal(b.data, "OCSB/1 PING\n");
	buf_free(&b);
}

static void request_format_refuses_invalid(void **state)
{
	struct ctl_request rq = {.verb = CTL_RESTART};
	struct buf b = {0};

	assert_int_equal(ctl_format_request(&(struct ctl_request){.verb = 0}, &b), -EINVAL);
	assert_int_equal(ctl_format_request(&(struct ctl_request){.verb = 99}, &b), -EINVAL);
	assert_int_equal(
		ctl_format_request(&(struct ctl_request){.verb = CTL_RESTART, .arg = "../x"}, &b),
		-EINVAL);
	/* A space or newline in an argument must not smuggle in a field or a line. */
	assert_int_equal(
		ctl_format_request(&(struct ctl_request){.verb = CTL_RESTART, .arg = "a b"}, &b),
		-EINVAL);
	assert_int_equal(
		ctl_format_request(
			&(struct ctl_request){.verb = CTL_RESTART, .arg = "a\nOCSB/1 PING"}, &b),
		-EINVAL);
	assert_int_equal(ctl_format_request(&(struct ctl_request){.verb = CTL_SECRET_PUT,
						    .sealed = "QUJD\nsealed QUJD"},
				 &b),
		-EINVAL);
	assert_int_equal(
		ctl_format_request(&(struct ctl_request){.verb = CTL_LOGS, .count = 10001}, &b),
		-EINVAL);
	assert_int_equal(
		ctl_format_request(&(struct ctl_request){.verb = CTL_SECRET_PUT}, &b), -EINVAL);
	/* An arg without its terminating NUL is not read past the field. */
	memset(rq.arg, 'a', sizeof(rq.arg));
	assert_int_equal(ctl_format_request(&rq, &b), -EINVAL);
	assert_true(b.len == 0);
	/* The arg is not part of SECRET-PUT: it is left out, not sent. */
	assert_int_equal(
		ctl_format_request(
			&(struct ctl_request){.verb = CTL_SECRET_PUT, .arg = "K", .sealed = "QUJD"},
			&b),
		0);
	assert_string_equal(b.data, "OCSB/1 SECRET-PUT\nsealed QUJD\n");
	buf_free(&b);
}

static void verb_names(void **state)
{
	assert_string_equal(ctl_verb_name(CTL_STATUS), "STATUS");
	assert_string_equal(ctl_verb_name(CTL_SECRET_PUT), "SECRET-PUT");
	assert_null(ctl_verb_name(0));
	assert_null(ctl_verb_name(7));
}

/* ---- requests: every malformed one, with its exact message ---- */

static void request_err(const char *payload, size_t len, const char *want)
{
	struct ctl_request rq, sentinel;
	char err[512] = "";

	memset(&rq, 0x5a, sizeof(rq));
	memcpy(&sentinel, &rq, sizeof(rq));
	if (ctl_parse_request(payload, len, &rq, err, sizeof(err)) != -1)
		fail_msg("accepted: '%.*s'", (int)len, payload);
	if (strcmp(err, want) != 0)
		fail_msg("'%.*s': error '%s', expected '%s'", (int)len, payload, err, want);
	/* Output parameters are set only on success. */
	assert_memory_equal(&rq, &sentinel, sizeof(rq));
}

#define REQ_ERR(lit, want) request_err((lit), sizeof(lit) - 1, (want))

static void request_bad_version(void **state)
{
	REQ_ERR("OCSB/2 STATUS\n", "unsupported protocol version 2");
	REQ_ERR("OCSB/0 STATUS\n", "unsupported protocol version 0");
	REQ_ERR("OCSB/10 STATUS\n", "unsupported protocol version 10");
	REQ_ERR("OCSB/2 NONSENSE a b c\n", "unsupported protocol version 2");
	REQ_ERR("OCSB/01 STATUS\n", "malformed protocol version '01'");
	REQ_ERR("OCSB/ STATUS\n", "malformed protocol version ''");
	REQ_ERR("OCSB/1.0 STATUS\n", "malformed protocol version '1.0'");
	REQ_ERR("OCSB/1234567890 STATUS\n", "malformed protocol version '1234567890'");
	REQ_ERR("ocsb/1 STATUS\n", "not an ocsb request (expected 'OCSB/1 ...')");
	REQ_ERR("GET / HTTP/1.1\n", "not an ocsb request (expected 'OCSB/1 ...')");
	REQ_ERR("OCSB\n", "not an ocsb request (expected 'OCSB/1 ...')");
}

static void request_bad_line(void **state)
{
	REQ_ERR("OCSB/1\n", "missing verb (expected 'OCSB/1 VERB')");
	REQ_ERR("\n", "empty request line");
	REQ_ERR("OCSB/1  STATUS\n",
		"malformed request line (fields are separated by single spaces)");
	REQ_ERR("OCSB/1 STATUS \n",
		"malformed request line (fields are separated by single spaces)");
	REQ_ERR(" OCSB/1 STATUS\n",
		"malformed request line (fields are separated by single spaces)");
	REQ_ERR("OCSB/1 \n", "malformed request line (fields are separated by single spaces)");
}

static void request_unknown_verb(void **state)
{
	char payload[256], want[256];

	REQ_ERR("OCSB/1 FOO\n",
		"unknown verb 'FOO' (expected STATUS, RESTART, LOGS, WEB, PING or SECRET-PUT)");
	REQ_ERR("OCSB/1 status\n",
		"unknown verb 'status' (expected STATUS, RESTART, LOGS, WEB, PING or SECRET-PUT)");
	REQ_ERR("OCSB/1 STATUSX\n",
		"unknown verb 'STATUSX' (expected STATUS, RESTART, LOGS, WEB, "
		"PING or SECRET-PUT)");
	REQ_ERR("OCSB/1 SECRET\n",
		"unknown verb 'SECRET' (expected STATUS, RESTART, LOGS, WEB, "
		"PING or SECRET-PUT)");
	/* A long token is cut in the message: it goes back to the peer and into logs. */
	snprintf(payload, sizeof(payload), "OCSB/1 %s\n", rep('V', 200));
	snprintf(want, sizeof(want),
		"unknown verb '%s...' (expected STATUS, RESTART, LOGS, WEB, PING or SECRET-PUT)",
		rep('V', 40));
	request_err(payload, strlen(payload), want);
}

static void request_extra_arguments(void **state)
{
	REQ_ERR("OCSB/1 STATUS now\n", "STATUS takes no argument");
	REQ_ERR("OCSB/1 WEB x\n", "WEB takes no argument");
	REQ_ERR("OCSB/1 PING 1 2 3 4 5\n", "PING takes no argument");
	REQ_ERR("OCSB/1 RESTART a b\n", "RESTART takes at most one argument (a project name)");
	REQ_ERR("OCSB/1 LOGS 5 6\n", "LOGS takes at most one argument (a line count)");
	REQ_ERR("OCSB/1 SECRET-PUT A\nsealed QUJD\n",
		"SECRET-PUT takes no argument (names are inside the sealed set)");
	REQ_ERR("OCSB/1 SECRET-PUT A B\nsealed QUJD\n",
		"SECRET-PUT takes no argument (names are inside the sealed set)");
}

static void request_bad_project(void **state)
{
	char payload[256], want[256];

	REQ_ERR("OCSB/1 RESTART ../x\n", "invalid project name '../x': must not start with '.'");
	REQ_ERR("OCSB/1 RESTART .x\n", "invalid project name '.x': must not start with '.'");
	REQ_ERR("OCSB/1 RESTART ..\n", "invalid project name '..': must not start with '.'");
	REQ_ERR("OCSB/1 RESTART a/b\n",
		"invalid project name 'a/b': character '/' not allowed "
		"(letters, digits, '.', '_', '-')");
	REQ_ERR("OCSB/1 RESTART x;rm\n",
		"invalid project name 'x;rm': character ';' not allowed "
		"(letters, digits, '.', '_', '-')");
	REQ_ERR("OCSB/1 RESTART $HOME\n",
		"invalid project name '$HOME': character '$' not "
		"allowed (letters, digits, '.', '_', '-')");
	snprintf(payload, sizeof(payload), "OCSB/1 RESTART %s\n", rep('p', 65));
	snprintf(want, sizeof(want), "invalid project name '%s...': 65 characters, at most 64",
		rep('p', 40));
	request_err(payload, strlen(payload), want);
}

static void request_bad_count(void **state)
{
	REQ_ERR("OCSB/1 LOGS 0\n", "invalid line count '0' (1..10000)");
	REQ_ERR("OCSB/1 LOGS 10001\n", "invalid line count '10001' (1..10000)");
	REQ_ERR("OCSB/1 LOGS 99999\n", "invalid line count '99999' (1..10000)");
	REQ_ERR("OCSB/1 LOGS 4294967297\n", "invalid line count '4294967297' (1..10000)");
	REQ_ERR("OCSB/1 LOGS 007\n", "invalid line count '007' (1..10000)");
	REQ_ERR("OCSB/1 LOGS -1\n", "invalid line count '-1' (1..10000)");
	REQ_ERR("OCSB/1 LOGS +5\n", "invalid line count '+5' (1..10000)");
	REQ_ERR("OCSB/1 LOGS 12a\n", "invalid line count '12a' (1..10000)");
	REQ_ERR("OCSB/1 LOGS all\n", "invalid line count 'all' (1..10000)");
}

static void request_bad_secret_put(void **state)
{
	struct buf b = {0};

	REQ_ERR("OCSB/1 SECRET-PUT\n", "SECRET-PUT needs a second line 'sealed BASE64'");
	REQ_ERR("OCSB/1 SECRET-PUT\nseal QUJD\n", "line 2 of SECRET-PUT must be 'sealed BASE64'");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed\n", "line 2 of SECRET-PUT must be 'sealed BASE64'");
	REQ_ERR("OCSB/1 SECRET-PUT\n\n", "line 2 of SECRET-PUT must be 'sealed BASE64'");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed \n", "empty sealed value");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QUJD\nsealed QUJD\n",
		"unexpected line 3 (SECRET-PUT takes one body line)");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QUJD\n\n",
		"unexpected line 3 (SECRET-PUT takes one body line)");
	buf_free(&b);
	buf_printf(&b, "OCSB/1 SECRET-PUT\nsealed %s\n", rep('A', CTL_MAX_SEALED + 4));
	request_err(b.data, b.len, "sealed value too long (45060 characters, at most 45056)");
	buf_free(&b);
}

static void request_bad_base64(void **state)
{
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QUJ\n",
		"invalid base64 in sealed value: length 3 is not a multiple of 4");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QUJDR\n",
		"invalid base64 in sealed value: length 5 is not a multiple of 4");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QU!D\n",
		"invalid base64 in sealed value: character '!' at position 3");
	/* base64url is not the standard alphabet. */
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QU-_\n",
		"invalid base64 in sealed value: character '-' at position 3");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QU J\n",
		"invalid base64 in sealed value: character ' ' at position 3");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QQ=A\n",
		"invalid base64 in sealed value: character '=' at position 3");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed Q===\n",
		"invalid base64 in sealed value: character '=' at position 2");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed ====\n",
		"invalid base64 in sealed value: character '=' at position 1");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QQ==QUJD\n",
		"invalid base64 in sealed value: character '=' at position 3");
	/* One sealed box, one spelling: bits after the last byte must be zero (as libsodium). */
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QR==\n",
		"invalid base64 in sealed value: non-zero padding bits");
	REQ_ERR("OCSB/1 SECRET-PUT\nsealed QUJ=\n",
		"invalid base64 in sealed value: non-zero padding bits");
}

static void request_good_base64(void **state)
{
	static const char *const good[] = {"QQ==", "QUI=", "QUJD", "+/+/", "AAAAAA==", "////"};
	struct ctl_request rq;
	char payload[128], err[256];

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		snprintf(payload, sizeof(payload), "OCSB/1 SECRET-PUT\nsealed %s\n", good[i]);
		if (ctl_parse_request(payload, strlen(payload), &rq, err, sizeof(err)) < 0)
			fail_msg("%s refused: %s", good[i], err);
		assert_string_equal(rq.sealed, good[i]);
		ctl_request_free(&rq);
	}
}

static void request_bytes(void **state)
{
	struct ctl_request rq;
	char err[256], *big;

	REQ_ERR("OCSB/1 STATUS\r\n",
		"invalid byte 0x0d at offset 13 of the request (only "
		"printable ASCII and newlines)");
	REQ_ERR("OCSB/1\tSTATUS\n",
		"invalid byte 0x09 at offset 6 of the request (only printable "
		"ASCII and newlines)");
	REQ_ERR("OCSB/1 STA\0TUS\n",
		"invalid byte 0x00 at offset 10 of the request (only "
		"printable ASCII and newlines)");
	REQ_ERR("OCSB/1 STATUS\n\0",
		"invalid byte 0x00 at offset 14 of the request (only "
		"printable ASCII and newlines)");
	REQ_ERR("OCSB/1 STATUS\x1b[2J\n",
		"invalid byte 0x1b at offset 13 of the request (only "
		"printable ASCII and newlines)");
	REQ_ERR("OCSB/1 STATUS\x7f\n",
		"invalid byte 0x7f at offset 13 of the request (only "
		"printable ASCII and newlines)");
	REQ_ERR("OCSB/1 RESTART caf\xc3\xa9\n",
		"invalid byte 0xc3 at offset 18 of the request "
		"(only printable ASCII and newlines)");
	REQ_ERR("OCSB/1 STATUS", "request does not end with a newline");
	REQ_ERR("", "empty request");
	REQ_ERR("OCSB/1 STATUS\nextra\n", "unexpected line 2 (STATUS takes no body)");
	REQ_ERR("OCSB/1 PING\n\n", "unexpected line 2 (PING takes no body)");
	REQ_ERR("OCSB/1 RESTART shop\nOCSB/1 RESTART blog\n",
		"unexpected line 2 (RESTART takes no body)");

	/* Over CTL_MAX_FRAME: refused by size alone. */
	big = malloc(CTL_MAX_FRAME + 1);
	assert_non_null(big);
	memset(big, 'a', CTL_MAX_FRAME + 1);
	request_err(big, CTL_MAX_FRAME + 1, "request too long (65537 bytes, at most 65536)");
	free(big);

	/* The length is what counts, not a NUL: no reading past len. */
	assert_int_equal(ctl_parse_request("OCSB/1 PING\nxyz", 12, &rq, err, sizeof(err)), 0);
	assert_int_equal(rq.verb, CTL_PING);
	/* A NULL err is allowed. */
	assert_int_equal(ctl_parse_request("OCSB/9 PING\n", 12, &rq, NULL, 0), -1);
}

/* ---- responses ---- */

static void response_err_case(const char *payload, size_t len, const char *want)
{
	struct ctl_response r = {.ok = 7};
	char err[512] = "";

	if (ctl_parse_response(payload, len, &r, err, sizeof(err)) != -1)
		fail_msg("accepted: '%.*s'", (int)len, payload);
	if (strcmp(err, want) != 0)
		fail_msg("'%.*s': error '%s', expected '%s'", (int)len, payload, err, want);
	assert_int_equal(r.ok, 7);
	assert_null(r.error);
	assert_null(r.keys.v);
}

#define RSP_ERR(lit, want) response_err_case((lit), sizeof(lit) - 1, (want))

static void response_parse_ok_repeated_keys(void **state)
{
	static const char text[] = "OCSB/1 OK\n"
				   "instance shop\n"
				   "url http://127.0.0.1:4096\n"
				   "instance blog\n"
				   "url http://127.0.0.1:4097\n"
				   "note  two  spaces \n"
				   "empty \n"
				   "a.b_c-9 x\n";
	struct ctl_response r;
	char err[256];

	assert_int_equal(ctl_parse_response(text, sizeof(text) - 1, &r, err, sizeof(err)), 0);
	assert_true(r.ok);
	assert_null(r.error);
	assert_int_equal(r.keys.n, 7);
	assert_int_equal(r.values.n, 7);
	assert_string_equal(r.keys.v[2], "instance");
	assert_string_equal(r.values.v[2], "blog");
	assert_string_equal(r.values.v[3], "http://127.0.0.1:4097");
	assert_string_equal(ctl_response_get(&r, "instance"), "shop");
	assert_string_equal(ctl_response_get(&r, "url"), "http://127.0.0.1:4096");
	/* The separator is one space; the rest, spaces included, is the value. */
	assert_string_equal(ctl_response_get(&r, "note"), " two  spaces ");
	assert_string_equal(ctl_response_get(&r, "empty"), "");
	assert_string_equal(ctl_response_get(&r, "a.b_c-9"), "x");
	assert_null(ctl_response_get(&r, "missing"));
	assert_null(ctl_response_get(&r, "Instance"));
	ctl_response_free(&r);
	assert_null(r.keys.v);
	ctl_response_free(&r);

	assert_int_equal(ctl_parse_response("OCSB/1 OK\n", 10, &r, err, sizeof(err)), 0);
	assert_true(r.ok);
	assert_int_equal(r.keys.n, 0);
	assert_null(ctl_response_get(&r, "x"));
	ctl_response_free(&r);
}

static void response_parse_err(void **state)
{
	static const char text[] = "OCSB/1 ERR permission denied: uid 1001 is not the owner\n"
				   "hint ask the owner\n";
	struct ctl_response r;
	char err[256];

	assert_int_equal(ctl_parse_response(text, sizeof(text) - 1, &r, err, sizeof(err)), 0);
	assert_false(r.ok);
	assert_string_equal(r.error, "permission denied: uid 1001 is not the owner");
	assert_string_equal(ctl_response_get(&r, "hint"), "ask the owner");
	ctl_response_free(&r);
	assert_null(r.error);
	assert_int_equal(ctl_parse_response("OCSB/1 ERR  x\n", 14, &r, err, sizeof(err)), 0);
	assert_string_equal(r.error, " x");
	ctl_response_free(&r);
}

static void response_parse_bad(void **state)
{
	RSP_ERR("OCSB/1 ERR\n", "ERR without a message");
	RSP_ERR("OCSB/1 ERR \n", "ERR without a message");
	RSP_ERR("OCSB/1 OK extra\n", "unexpected text after OK");
	RSP_ERR("OCSB/1 OKAY\n", "unexpected text after OK");
	RSP_ERR("OCSB/1 MAYBE\n", "unknown status 'MAYBE' (expected OK or ERR)");
	RSP_ERR("OCSB/1 ok\n", "unknown status 'ok' (expected OK or ERR)");
	RSP_ERR("OCSB/1 \n", "unknown status '' (expected OK or ERR)");
	RSP_ERR("OCSB/1\n", "missing status (expected OK or ERR)");
	RSP_ERR("OCSB/2 OK\n", "unsupported protocol version 2");
	RSP_ERR("HTTP/1.1 200 OK\n", "not an ocsb response (expected 'OCSB/1 ...')");
	RSP_ERR("OCSB/1 OK\nBad value\n",
		"invalid key 'Bad' on line 2 (expected [a-z0-9._-], at most 64)");
	RSP_ERR("OCSB/1 OK\nurl x\nk/y v\n",
		"invalid key 'k/y' on line 3 (expected [a-z0-9._-], at most 64)");
	RSP_ERR("OCSB/1 OK\n value\n",
		"invalid key '' on line 2 (expected [a-z0-9._-], at most 64)");
	RSP_ERR("OCSB/1 OK\nkey\n", "line 2 has no value (expected 'key value')");
	RSP_ERR("OCSB/1 OK\n\n", "empty line 2");
	RSP_ERR("OCSB/1 OK\nk v\n\nk v\n", "empty line 3");
	RSP_ERR("OCSB/1 OK\nk v", "response does not end with a newline");
	RSP_ERR("OCSB/1 OK\nk v\tw\n",
		"invalid byte 0x09 at offset 13 of the response (only "
		"printable ASCII and newlines)");
	RSP_ERR("OCSB/1 OK\nk \0\n",
		"invalid byte 0x00 at offset 12 of the response (only "
		"printable ASCII and newlines)");
	RSP_ERR("", "empty response");
}

static void response_bad_key_length(void **state)
{
	struct buf b = {0};
	struct ctl_response r;
	char err[256];

	buf_printf(&b, "OCSB/1 OK\n%s v\n", rep('k', 64));
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	ctl_response_free(&r);
	buf_free(&b);
	buf_printf(&b, "OCSB/1 OK\n%s v\n", rep('k', 65));
	response_err_case(b.data, b.len,
		"invalid key 'kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...' on line 2 (expected "
		"[a-z0-9._-], at most 64)");
	buf_free(&b);
}

static void response_build_roundtrip(void **state)
{
	struct ctl_response r;
	struct buf b = {0};
	char err[256];

	assert_int_equal(ctl_response_ok(&b), 0);
	assert_int_equal(ctl_response_add(&b, "instance", "%s", "shop"), 0);
	assert_int_equal(ctl_response_add(&b, "url", "http://127.0.0.1:%d", 4096), 0);
	assert_int_equal(ctl_response_add(&b, "instance", "%s", "blog"), 0);
	assert_int_equal(ctl_response_add(&b, "empty", "%s", ""), 0);
	assert_string_equal(b.data,
		"OCSB/1 OK\ninstance shop\nurl http://127.0.0.1:4096\ninstance blog\nempty \n");
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	assert_true(r.ok);
	assert_int_equal(r.keys.n, 4);
	assert_string_equal(r.values.v[2], "blog");
	assert_string_equal(ctl_response_get(&r, "empty"), "");
	ctl_response_free(&r);

	/* ok starts over: it discards what out held. */
	assert_int_equal(ctl_response_ok(&b), 0);
	assert_string_equal(b.data, "OCSB/1 OK\n");
	buf_free(&b);
}

static void response_sanitize(void **state)
{
	struct ctl_response r;
	struct buf b = {0};
	char err[256];

	assert_int_equal(ctl_response_ok(&b), 0);
	assert_int_equal(ctl_response_add(&b, "log", "%s", "a\nb\r\tc\x01\x7f\xc3\xa9\x1b[2Jd"), 0);
	assert_int_equal(ctl_response_add(&b, "inject", "%s", "x\nstate running\nOCSB/1 OK"), 0);
	assert_string_equal(b.data,
		"OCSB/1 OK\n"
		"log a b  c?????[2Jd\n"
		"inject x state running OCSB/1 OK\n");
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	assert_int_equal(r.keys.n, 2);
	assert_null(ctl_response_get(&r, "state"));
	ctl_response_free(&r);

	assert_int_equal(
		ctl_response_err(&b, "cannot restart %s:\n%s", "shop", "exit 1\x1b[31m\n"), 0);
	assert_string_equal(b.data, "OCSB/1 ERR cannot restart shop: exit 1?[31m \n");
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	assert_false(r.ok);
	assert_string_equal(r.error, "cannot restart shop: exit 1?[31m ");
	ctl_response_free(&r);
	buf_free(&b);
}

static void response_err_build(void **state)
{
	struct ctl_response r;
	struct buf b = {0};
	char err[256];

	/* A handler that fails half-way turns its partial OK into an ERR. */
	assert_int_equal(ctl_response_ok(&b), 0);
	assert_int_equal(ctl_response_add(&b, "instance", "%s", "shop"), 0);
	assert_int_equal(ctl_response_err(&b, "no such project '%s'", "blog"), 0);
	assert_string_equal(b.data, "OCSB/1 ERR no such project 'blog'\n");
	/* Keys may follow an ERR. */
	assert_int_equal(ctl_response_add(&b, "hint", "%s", "see ocsb status"), 0);
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	assert_string_equal(ctl_response_get(&r, "hint"), "see ocsb status");
	ctl_response_free(&r);

	assert_int_equal(ctl_response_err(&b, "%s", ""), 0);
	assert_string_equal(b.data, "OCSB/1 ERR unspecified error\n");

	assert_int_equal(ctl_response_err(&b, "%s", rep('e', 5000)), 0);
	assert_int_equal(b.len, strlen("OCSB/1 ERR ") + CTL_MAX_ERROR + 1);
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	assert_string_equal(r.error, rep('e', CTL_MAX_ERROR));
	ctl_response_free(&r);

	/* Only newline-like bytes become spaces; the line stays one line. */
	assert_int_equal(ctl_response_err(&b, "%s", "\n"), 0);
	assert_string_equal(b.data, "OCSB/1 ERR  \n");
	buf_free(&b);
}

static void response_add_refuses(void **state)
{
	struct buf b = {0};

	/* Nothing started. */
	assert_int_equal(ctl_response_add(&b, "k", "%s", "v"), -EINVAL);
	assert_int_equal(ctl_response_ok(&b), 0);
	assert_int_equal(ctl_response_add(&b, "Key", "%s", "v"), -EINVAL);
	assert_int_equal(ctl_response_add(&b, "", "%s", "v"), -EINVAL);
	assert_int_equal(ctl_response_add(&b, "a b", "%s", "v"), -EINVAL);
	assert_int_equal(ctl_response_add(&b, "k\n", "%s", "v"), -EINVAL);
	assert_int_equal(ctl_response_add(&b, rep('k', 65), "%s", "v"), -EINVAL);
	assert_int_equal(ctl_response_add(&b, rep('k', 64), "%s", "v"), 0);
	assert_int_equal(b.len, 10 + 64 + 3);
	buf_free(&b);
}

/* The payload never grows past one frame; the line that would not fit leaves out unchanged. */
static void response_add_size_limit(void **state)
{
	struct ctl_response r;
	struct buf b = {0};
	char err[256];
	size_t left;

	assert_int_equal(ctl_response_ok(&b), 0);
	while (b.len + 1000 + 3 <= CTL_MAX_FRAME)
		assert_int_equal(ctl_response_add(&b, "l", "%s", rep('x', 1000)), 0);
	left = CTL_MAX_FRAME - b.len;
	assert_int_equal(ctl_response_add(&b, "l", "%s", rep('x', left - 2)), -EMSGSIZE);
	assert_int_equal(ctl_response_add(&b, "l", "%s", rep('x', CTL_MAX_FRAME + 1)), -EMSGSIZE);
	assert_int_equal(b.len, CTL_MAX_FRAME - left);
	/* Exactly full is allowed, and parses. */
	assert_int_equal(ctl_response_add(&b, "l", "%s", rep('x', left - 3)), 0);
	assert_int_equal(b.len, CTL_MAX_FRAME);
	assert_int_equal(ctl_parse_response(b.data, b.len, &r, err, sizeof(err)), 0);
	ctl_response_free(&r);
	assert_int_equal(ctl_response_add(&b, "l", "%s", ""), -EMSGSIZE);
	assert_int_equal(b.len, CTL_MAX_FRAME);
	buf_free(&b);
}

/* ---- ctl_reader_feed ---- */

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[0], F_SETFL, O_NONBLOCK), 0);
}

static void frame(struct buf *b, const char *payload, size_t len)
{
	unsigned char h[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16),
		(unsigned char)(len >> 8), (unsigned char)len};

	assert_int_equal(buf_append(b, h, 4), 0);
	assert_int_equal(buf_append(b, payload, len), 0);
}

static void write_all(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

static void reader_one_byte_writes(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int sv[2];

	pair(sv);
	frame(&b, "OCSB/1 PING\n", 12);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	for (size_t i = 0; i < b.len; i++) {
		write_all(sv[1], b.data + i, 1);
		assert_int_equal(ctl_reader_feed(&r, sv[0]), i + 1 == b.len ? 1 : 0);
	}
	assert_int_equal(r.have, 12);
	assert_memory_equal(r.buf, "OCSB/1 PING\n", 13);
	/* A complete frame stays complete until reset. */
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 1);
	ctl_reader_reset(&r);
	assert_null(r.buf);
	assert_int_equal(r.hdr_have, 0);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	ctl_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
	buf_free(&b);
}

static void reader_two_frames_one_write(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int sv[2];

	pair(sv);
	frame(&b, "OCSB/1 STATUS\n", 14);
	frame(&b, "OCSB/1 LOGS 5\n", 14);
	write_all(sv[1], b.data, b.len);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 1);
	assert_string_equal(r.buf, "OCSB/1 STATUS\n");
	/* The second frame was not read into the first's buffer: it is still in the socket. */
	ctl_reader_reset(&r);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 1);
	assert_string_equal(r.buf, "OCSB/1 LOGS 5\n");
	assert_int_equal(r.have, 14);
	ctl_reader_reset(&r);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);
	buf_free(&b);
}

static void reader_bad_length(void **state)
{
	static const unsigned char lens[][4] = {
		{0, 0, 0, 0}, {0, 1, 0, 1}, {0xff, 0xff, 0xff, 0xff}, {0x80, 0, 0, 0}};
	struct ctl_reader r = {0};
	int sv[2];

	for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
		pair(sv);
		write_all(sv[1], lens[i], 4);
		write_all(sv[1], "abcd", 4);
		assert_int_equal(ctl_reader_feed(&r, sv[0]), -EPROTO);
		/* Refused before allocating: a peer chooses this number. */
		assert_null(r.buf);
		assert_int_equal(r.need, 0);
		/* And it stays refused. */
		assert_int_equal(ctl_reader_feed(&r, sv[0]), -EPROTO);
		ctl_reader_reset(&r);
		close(sv[0]);
		close(sv[1]);
	}
}

static void reader_max_frame(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	size_t off = 0;
	int sv[2], got = 0;
	ssize_t k;

	pair(sv);
	assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
	frame(&b, rep('x', CTL_MAX_FRAME), CTL_MAX_FRAME);
	while (!got) {
		if (off < b.len) {
			k = write(sv[1], b.data + off, b.len - off);
			assert_true(k > 0 || errno == EAGAIN);
			if (k > 0)
				off += (size_t)k;
		}
		got = ctl_reader_feed(&r, sv[0]);
		assert_true(got >= 0);
	}
	assert_int_equal(off, b.len);
	assert_int_equal(r.have, CTL_MAX_FRAME);
	assert_int_equal(r.buf[CTL_MAX_FRAME], '\0');
	ctl_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
	buf_free(&b);
}

static void reader_eof(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int sv[2];

	/* In the middle of a payload. */
	pair(sv);
	frame(&b, "OCSB/1 STATUS\n", 14);
	write_all(sv[1], b.data, 10);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);

	/* In the middle of the header. */
	pair(sv);
	write_all(sv[1], b.data, 2);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	assert_int_equal(r.hdr_have, 2);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);

	/* Between frames. */
	pair(sv);
	close(sv[1]);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), -ECONNRESET);
	ctl_reader_reset(&r);
	close(sv[0]);
	buf_free(&b);
}

/* A descriptor left blocking by mistake must not stall the daemon's loop. */
static void reader_blocking_fd(void **state)
{
	struct ctl_reader r = {0};
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	alarm(5);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	write_all(sv[1], "\0\0\0\2", 4);
	assert_int_equal(ctl_reader_feed(&r, sv[0]), 0);
	assert_non_null(r.buf);
	alarm(0);
	ctl_reader_reset(&r);
	close(sv[0]);
	close(sv[1]);
}

static void reader_pipe(void **state)
{
	struct ctl_reader r = {0};
	struct buf b = {0};
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	frame(&b, "OCSB/1 WEB\n", 11);
	write_all(p[1], b.data, b.len);
	assert_int_equal(ctl_reader_feed(&r, p[0]), 1);
	assert_string_equal(r.buf, "OCSB/1 WEB\n");
	ctl_reader_reset(&r);
	assert_int_equal(ctl_reader_feed(&r, p[0]), 0);
	assert_int_equal(ctl_reader_feed(&r, -1), -EBADF);
	close(p[1]);
	assert_int_equal(ctl_reader_feed(&r, p[0]), -ECONNRESET);
	close(p[0]);
	buf_free(&b);
}

/* ---- blocking frame helpers ---- */

static void frames_send_recv(void **state)
{
	char *got = NULL;
	size_t n = 0;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(ctl_send_frame(sv[0], "OCSB/1 OK\n", 10, 1000), 0);
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), 0);
	assert_int_equal(n, 10);
	assert_string_equal(got, "OCSB/1 OK\n");
	free(got);
	assert_int_equal(ctl_send_frame(sv[0], "", 0, 1000), -EMSGSIZE);
	assert_int_equal(
		ctl_send_frame(sv[0], rep('x', CTL_MAX_FRAME + 1), CTL_MAX_FRAME + 1, 1000),
		-EMSGSIZE);

	/* Bad lengths, from a peer. */
	write_all(sv[0], "\0\0\0\0", 4);
	got = NULL;
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), -EPROTO);
	assert_null(got);
	write_all(sv[0], "\0\1\0\1", 4);
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), -EPROTO);
	assert_null(got);

	/* End of file in the middle of a frame. */
	write_all(sv[0], "\0\0\0\5ab", 6);
	close(sv[0]);
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 1000), -ECONNRESET);
	assert_null(got);
	close(sv[1]);
}

static void frames_recv_timeout(void **state)
{
	char *got = NULL;
	size_t n;
	long t0;
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	/* A header and part of the payload, then nothing. */
	write_all(sv[0], "\0\0\0\5ab", 6);
	t0 = now_ms();
	assert_int_equal(ctl_recv_frame(sv[1], &got, &n, 200), -ETIMEDOUT);
	assert_in_range(now_ms() - t0, 190, 1500);
	assert_null(got);
	close(sv[0]);
	close(sv[1]);
}

/* A peer that does not read: the send gives up at the deadline instead of blocking. */
static void frames_send_timeout(void **state)
{
	int sv[2], small = 4096;
	long t0;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	t0 = now_ms();
	assert_int_equal(
		ctl_send_frame(sv[0], rep('x', CTL_MAX_FRAME), CTL_MAX_FRAME, 200), -ETIMEDOUT);
	assert_in_range(now_ms() - t0, 190, 1500);
	close(sv[0]);
	close(sv[1]);
}

/* A peer gone: an error, not SIGPIPE (which would kill the test binary). */
static void frames_send_closed(void **state)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(ctl_send_frame(sv[0], "x\n", 2, 1000), -EPIPE);
	close(sv[0]);
}

static void peer_credentials(void **state)
{
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int sv[2], fd;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(ctl_peer(sv[0], &uid, &gid, &pid), 0);
	assert_int_equal(uid, geteuid());
	assert_int_equal(gid, getegid());
	assert_int_equal(pid, getpid());
	assert_int_equal(ctl_peer(sv[1], NULL, NULL, NULL), 0);
	close(sv[0]);
	close(sv[1]);
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	uid = 12345;
	assert_int_equal(ctl_peer(fd, &uid, NULL, NULL), -ENOTSOCK);
	assert_int_equal(uid, 12345);
	close(fd);
}

/* ---- ctl_call against a server in a child process ---- */

enum srv_mode {
	SRV_ECHO, /* answer each request with what it saw, and the peer's credentials */
	SRV_ERR_CLOSE, /* refuse at once, before reading, as for an unknown uid */
	SRV_SILENT, /* read the request, never answer */
	SRV_PARTIAL, /* half a frame, then nothing */
	SRV_CLOSE, /* close without answering */
	SRV_BADLEN, /* a frame length above the limit */
	SRV_GARBAGE, /* a well-framed answer that is not a response */
};

static int listen_at(const char *path, int backlog)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, backlog), 0);
	return fd;
}

/* The daemon's side, the way agentd will do it: non-blocking reader, poll, parse, answer. */
static int serve_echo(int c)
{
	struct ctl_reader rd = {0};
	struct ctl_request rq;
	struct pollfd p = {.fd = c, .events = POLLIN};
	struct buf out = {0};
	char err[256];
	uid_t uid;
	gid_t gid;
	pid_t pid;
	int r;

	if (fcntl(c, F_SETFL, O_NONBLOCK) < 0)
		return 10;
	while ((r = ctl_reader_feed(&rd, c)) == 0)
		if (poll(&p, 1, 5000) != 1)
			return 11;
	if (r != 1)
		return 12;
	if (ctl_peer(c, &uid, &gid, &pid) < 0)
		return 13;
	if (ctl_parse_request(rd.buf, rd.have, &rq, err, sizeof(err)) < 0) {
		ctl_response_err(&out, "%s", err);
	} else {
		ctl_response_ok(&out);
		ctl_response_add(&out, "verb", "%s", ctl_verb_name(rq.verb));
		ctl_response_add(&out, "arg", "%s", rq.arg);
		ctl_response_add(&out, "count", "%u", rq.count);
		ctl_response_add(&out, "sealed", "%s", rq.sealed ? rq.sealed : "-");
		ctl_response_add(&out, "uid", "%u", (unsigned)uid);
		ctl_response_add(&out, "gid", "%u", (unsigned)gid);
		ctl_response_add(&out, "pid", "%d", (int)pid);
		ctl_request_free(&rq);
	}
	r = ctl_send_frame(c, out.data, out.len, 5000);
	ctl_reader_reset(&rd);
	buf_free(&out);
	return r < 0 ? 14 : 0;
}

static int serve_one(int c, enum srv_mode mode)
{
	struct buf out = {0};
	char junk[64];
	int r;

	switch (mode) {
	case SRV_ECHO:
		return serve_echo(c);
	case SRV_ERR_CLOSE:
		ctl_response_err(&out, "permission denied: uid %d refused", 1001);
		r = ctl_send_frame(c, out.data, out.len, 5000);
		buf_free(&out);
		return r < 0 ? 20 : 0;
	case SRV_SILENT:
		if (read(c, junk, sizeof(junk)) <= 0)
			return 21;
		pause();
		return 0;
	case SRV_PARTIAL:
		if (write(c, "\0\0\0\x0aOCSB/", 9) != 9)
			return 22;
		pause();
		return 0;
	case SRV_CLOSE:
		return read(c, junk, sizeof(junk)) <= 0 ? 23 : 0;
	case SRV_BADLEN:
		return write(c, "\x7f\0\0\0OCSB", 8) == 8 ? 0 : 24;
	case SRV_GARBAGE:
		return write(c, "\0\0\0\x0aOCSB/2 OK\n", 14) == 14 ? 0 : 25;
	}
	return 26;
}

/* Fork a server on lfd for `conns` connections; the parent keeps no copy of lfd. */
static pid_t server_start(int lfd, enum srv_mode mode, int conns)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* Never outlive the test, whatever the client does. */
		alarm(10);
		for (int i = 0; i < conns; i++) {
			int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), r;

			if (c < 0)
				_exit(30);
			r = serve_one(c, mode);
			close(c);
			if (r)
				_exit(r);
		}
		_exit(0);
	}
	close(lfd);
	return pid;
}

static void server_wait(pid_t pid, int kill_it)
{
	int st;

	if (kill_it)
		kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	if (!kill_it && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("server: status 0x%x", st);
}

static void call_echo_every_verb(void **state)
{
	const char *path = unit_path("agentd.sock");
	struct ctl_request rqs[] = {
		{.verb = CTL_STATUS},
		{.verb = CTL_RESTART, .arg = "shop"},
		{.verb = CTL_LOGS, .count = 200},
		{.verb = CTL_WEB},
		{.verb = CTL_PING},
		{.verb = CTL_SECRET_PUT, .sealed = (char *)rep('A', CTL_MAX_SEALED)},
	};
	pid_t pid = server_start(listen_at(path, 8), SRV_ECHO, (int)ARRAY_SIZE(rqs));
	char err[512], num[32];

	for (size_t i = 0; i < ARRAY_SIZE(rqs); i++) {
		struct ctl_response r;

		if (ctl_call(path, &rqs[i], &r, 5000, err, sizeof(err)) != 0)
			fail_msg("ctl_call %s: %s", ctl_verb_name(rqs[i].verb), err);
		assert_true(r.ok);
		assert_string_equal(ctl_response_get(&r, "verb"), ctl_verb_name(rqs[i].verb));
		assert_string_equal(ctl_response_get(&r, "arg"), rqs[i].arg);
		snprintf(num, sizeof(num), "%u", rqs[i].count);
		assert_string_equal(ctl_response_get(&r, "count"), num);
		assert_string_equal(
			ctl_response_get(&r, "sealed"), rqs[i].sealed ? rqs[i].sealed : "-");
		/* What the server learnt from SO_PEERCRED is us. */
		snprintf(num, sizeof(num), "%u", (unsigned)geteuid());
		assert_string_equal(ctl_response_get(&r, "uid"), num);
		snprintf(num, sizeof(num), "%u", (unsigned)getegid());
		assert_string_equal(ctl_response_get(&r, "gid"), num);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		assert_string_equal(ctl_response_get(&r, "pid"), num);
		ctl_response_free(&r);
	}
	server_wait(pid, 0);
}

static void call_refused_with_err(void **state)
{
	const char *path = unit_path("agentd.sock");
	struct ctl_request rq = {
		.verb = CTL_SECRET_PUT, .arg = "K", .sealed = (char *)rep('Q', 8192)};
	pid_t pid = server_start(listen_at(path, 8), SRV_ERR_CLOSE, 3);
	struct ctl_response r;
	char err[512];

	/* The daemon may close before our request is out: its ERR is still what we report. */
	for (int i = 0; i < 3; i++) {
		if (ctl_call(path, &rq, &r, 5000, err, sizeof(err)) != 0)
			fail_msg("ctl_call: %s", err);
		assert_false(r.ok);
		assert_string_equal(r.error, "permission denied: uid 1001 refused");
		ctl_response_free(&r);
	}
	server_wait(pid, 0);
}

static void call_expect_fail(const char *path, int timeout_ms, int want_rc, const char *want_err)
{
	struct ctl_response r = {.ok = 7};
	char err[512] = "";
	long t0 = now_ms();

	assert_int_equal(ctl_call(path, &(struct ctl_request){.verb = CTL_STATUS}, &r, timeout_ms,
				 err, sizeof(err)),
		want_rc);
	/* Within the deadline, with some slack for a loaded machine. */
	assert_true(now_ms() - t0 < timeout_ms + 1000);
	if (strcmp(err, want_err) != 0)
		fail_msg("error '%s', expected '%s'", err, want_err);
	assert_int_equal(r.ok, 7);
}

static void call_server_failures(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	pid_t pid;

	pid = server_start(listen_at(path, 8), SRV_CLOSE, 1);
	snprintf(want, sizeof(want), "ocsb-agentd at %s closed the connection without answering",
		path);
	call_expect_fail(path, 2000, -ECONNRESET, want);
	server_wait(pid, 0);
	unlink(path);

	pid = server_start(listen_at(path, 8), SRV_BADLEN, 1);
	snprintf(want, sizeof(want), "bad answer from ocsb-agentd at %s: invalid frame length",
		path);
	call_expect_fail(path, 2000, -EPROTO, want);
	server_wait(pid, 0);
	unlink(path);

	pid = server_start(listen_at(path, 8), SRV_GARBAGE, 1);
	snprintf(want, sizeof(want),
		"bad answer from ocsb-agentd at %s: unsupported protocol version 2", path);
	call_expect_fail(path, 2000, -EPROTO, want);
	server_wait(pid, 0);
}

static void call_timeouts(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	long t0;
	pid_t pid;

	snprintf(want, sizeof(want), "ocsb-agentd at %s did not answer within 300 ms", path);
	pid = server_start(listen_at(path, 8), SRV_SILENT, 1);
	t0 = now_ms();
	call_expect_fail(path, 300, -ETIMEDOUT, want);
	assert_true(now_ms() - t0 >= 290);
	server_wait(pid, 1);
	unlink(path);

	pid = server_start(listen_at(path, 8), SRV_PARTIAL, 1);
	call_expect_fail(path, 300, -ETIMEDOUT, want);
	server_wait(pid, 1);
	unlink(path);
}

/* Listening but never accepting: connect succeeds into the backlog, no answer comes. */
static void call_never_accepted(void **state)
{
	const char *path = unit_path("agentd.sock");
	int lfd = listen_at(path, 8);
	char want[512];

	snprintf(want, sizeof(want), "ocsb-agentd at %s did not answer within 200 ms", path);
	call_expect_fail(path, 200, -ETIMEDOUT, want);
	close(lfd);
}

/* A full backlog: connect cannot complete, and gives up at the deadline. */
static void call_backlog_full(void **state)
{
	const char *path = unit_path("agentd.sock");
	int lfd = listen_at(path, 0), fds[64], n = 0, fd;
	char want[512];

	while (n < (int)ARRAY_SIZE(fds) && (fd = ctl_connect(path, 50)) >= 0)
		fds[n++] = fd;
	assert_true(n < (int)ARRAY_SIZE(fds));
	assert_int_equal(ctl_connect(path, 50), -ETIMEDOUT);
	snprintf(want, sizeof(want),
		"ocsb-agentd at %s is not accepting connections (timed out after 200 ms)", path);
	call_expect_fail(path, 200, -ETIMEDOUT, want);
	while (n > 0)
		close(fds[--n]);
	close(lfd);
}

static void call_unreachable(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	int lfd;

	snprintf(want, sizeof(want),
		"cannot reach ocsb-agentd at %s: No such file or directory (is it running? sudo "
		"ocsb-agentd --foreground)",
		path);
	call_expect_fail(path, 1000, -ENOENT, want);
	assert_int_equal(ctl_connect(path, 1000), -ENOENT);

	/* A socket file left behind by a daemon that is gone. */
	lfd = listen_at(path, 1);
	close(lfd);
	snprintf(want, sizeof(want),
		"cannot reach ocsb-agentd at %s: Connection refused (is it running? sudo "
		"ocsb-agentd --foreground)",
		path);
	call_expect_fail(path, 1000, -ECONNREFUSED, want);
	unlink(path);

	assert_int_equal(ctl_connect(rep('p', 200), 1000), -ENAMETOOLONG);
}

static void call_permission_denied(void **state)
{
	const char *path = unit_path("agentd.sock");
	char want[512];
	int lfd;

	if (geteuid() == 0)
		skip(); /* root ignores the socket's mode */
	lfd = listen_at(path, 1);
	assert_int_equal(chmod(path, 0), 0);
	snprintf(want, sizeof(want),
		"cannot reach ocsb-agentd at %s: Permission denied (only root and the owner may "
		"use it)",
		path);
	call_expect_fail(path, 1000, -EACCES, want);
	close(lfd);
}

static void call_invalid_request(void **state)
{
	struct ctl_response r;
	char err[512];

	assert_int_equal(ctl_call("/nonexistent/agentd.sock",
				 &(struct ctl_request){.verb = CTL_RESTART, .arg = "../etc"}, &r,
				 1000, err, sizeof(err)),
		-EINVAL);
	assert_string_equal(err, "invalid RESTART request: Invalid argument");
}

#define T(f) cmocka_unit_test(f)
#define D(f) cmocka_unit_test_setup_teardown(f, unit_setup_dir, unit_teardown_dir)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(request_roundtrip_every_verb),
		T(request_format_ignores_other_fields),
		T(request_format_refuses_invalid),
		T(verb_names),
		T(request_bad_version),
		T(request_bad_line),
		T(request_unknown_verb),
		T(request_extra_arguments),
		T(request_bad_project),
		T(request_bad_count),
		T(request_bad_secret_put),
		T(request_bad_base64),
		T(request_good_base64),
		T(request_bytes),
		T(response_parse_ok_repeated_keys),
		T(response_parse_err),
		T(response_parse_bad),
		T(response_bad_key_length),
		T(response_build_roundtrip),
		T(response_sanitize),
		T(response_err_build),
		T(response_add_refuses),
		T(response_add_size_limit),
		T(reader_one_byte_writes),
		T(reader_two_frames_one_write),
		T(reader_bad_length),
		T(reader_max_frame),
		T(reader_eof),
		T(reader_blocking_fd),
		T(reader_pipe),
		T(frames_send_recv),
		T(frames_recv_timeout),
		T(frames_send_timeout),
		T(frames_send_closed),
		T(peer_credentials),
		D(call_echo_every_verb),
		D(call_refused_with_err),
		D(call_server_failures),
		D(call_timeouts),
		D(call_never_accepted),
		D(call_backlog_full),
		D(call_unreachable),
		D(call_permission_denied),
		D(call_invalid_request),
	};

	/* A server that closed on us must be an error return, never a SIGPIPE. */
	signal(SIGPIPE, SIG_DFL);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
