/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's messages: requests and responses, formatted and parsed (pure).
 */
#define _GNU_SOURCE
#include "ctl_unit.h"

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
	assert_string_equal(ctl_verb_name(CTL_RELOAD), "RELOAD");
	assert_null(ctl_verb_name(8));
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
		"unknown verb 'FOO' (expected STATUS, RESTART, LOGS, WEB, PING, SECRET-PUT or RELOAD)");
	REQ_ERR("OCSB/1 status\n",
		"unknown verb 'status' (expected STATUS, RESTART, LOGS, WEB, PING, SECRET-PUT or RELOAD)");
	REQ_ERR("OCSB/1 STATUSX\n",
		"unknown verb 'STATUSX' (expected STATUS, RESTART, LOGS, WEB, "
		"PING, SECRET-PUT or RELOAD)");
	REQ_ERR("OCSB/1 SECRET\n",
		"unknown verb 'SECRET' (expected STATUS, RESTART, LOGS, WEB, "
		"PING, SECRET-PUT or RELOAD)");
	/* A long token is cut in the message: it goes back to the peer and into logs. */
	snprintf(payload, sizeof(payload), "OCSB/1 %s\n", rep('V', 200));
	snprintf(want, sizeof(want),
		"unknown verb '%s...' (expected STATUS, RESTART, LOGS, WEB, PING, SECRET-PUT or RELOAD)",
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

#define T(f) cmocka_unit_test(f)

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
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
