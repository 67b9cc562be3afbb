/* SPDX-License-Identifier: MIT */
/*
 * ocsb-inject against a real TLS upstream on loopback, certificates made here by a test
 * CA: the key reaches an upstream whose chain and name verify, and only that one. An
 * untrusted CA or a certificate for another name fails the handshake before a byte of
 * the request (and so the key) is written. Also: the body framing holds end to end (what
 * follows the body never reaches the upstream) and the answer streams (the agent gets the
 * first event before the upstream has sent the second).
 */
#define _GNU_SOURCE
#include "unit.h"

#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "../../inject/inject.h"

#define KEY "sk-test-REAL-KEY-42"

struct pki {
	EVP_PKEY *ca_key, *other_ca_key, *leaf_key;
	X509 *ca, *other_ca;
	char ca_pem[8192], other_pem[8192];
};
static struct pki pki;

static void add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *e;

	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	assert_non_null(e);
	assert_int_equal(X509_add_ext(x, e, -1), 1);
	X509_EXTENSION_free(e);
}

/* A certificate for cn signed by issuer (self-signed when issuer is NULL: a CA). */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *ikey, long serial)
{
	X509 *x = X509_new();
	X509_NAME *name = X509_NAME_new();
	char san[300];

	assert_non_null(x);
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), serial);
	X509_gmtime_adj(X509_getm_notBefore(x), -3600);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
	X509_set_subject_name(x, name);
	X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
	if (!issuer) {
		add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE");
		add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		snprintf(san, sizeof(san), "DNS:%s", cn);
		add_ext(x, issuer, NID_subject_alt_name, san);
		add_ext(x, issuer, NID_ext_key_usage, "serverAuth");
	}
	assert_true(X509_sign(x, ikey ? ikey : key, EVP_sha256()) > 0);
	X509_NAME_free(name);
	return x;
}

static void pem_of(X509 *x, char *out, size_t n)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long len;

	PEM_write_bio_X509(b, x);
	len = BIO_get_mem_data(b, &p);
	assert_true(len > 0 && (size_t)len < n);
	memcpy(out, p, (size_t)len);
	out[len] = 0;
	BIO_free(b);
}

static int pki_setup(void **state)
{
	(void)state;
	pki.ca_key = EVP_EC_gen("P-256");
	pki.other_ca_key = EVP_EC_gen("P-256");
	pki.leaf_key = EVP_EC_gen("P-256");
	if (!pki.ca_key || !pki.other_ca_key || !pki.leaf_key)
		return -1;
	pki.ca = make_cert(pki.ca_key, "ocsb test CA", NULL, NULL, 1);
	pki.other_ca = make_cert(pki.other_ca_key, "ocsb test CA", NULL, NULL, 1);
	pem_of(pki.ca, pki.ca_pem, sizeof(pki.ca_pem));
	pem_of(pki.other_ca, pki.other_pem, sizeof(pki.other_pem));
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int pki_teardown(void **state)
{
	X509_free(pki.ca);
	X509_free(pki.other_ca);
	EVP_PKEY_free(pki.ca_key);
	EVP_PKEY_free(pki.other_ca_key);
	EVP_PKEY_free(pki.leaf_key);
	(void)state;
	return 0;
}

/*
 * The fake provider: one TLS connection, the leaf for cn signed by the CA (or the other
 * CA). It records what it received in rec (or "handshake failed"), answers with a first
 * event, waits for a byte on go (the agent has seen the first event), then sends the
 * second with usage and closes.
 */
struct upstream {
	pid_t pid;
	unsigned port;
	int go_w;
};

static size_t body_end(const char *p, size_t n)
{
	size_t h = inj_head_end(p, n);
	const char *cl;

	if (!h)
		return 0;
	cl = strcasestr(p, "\r\nContent-Length: ");
	if (cl && cl < p + h)
		return n >= h + strtoul(cl + 18, NULL, 10) ? h + strtoul(cl + 18, NULL, 10) : 0;
	if (strcasestr(p, "\r\nTransfer-Encoding: chunked"))
		return memmem(p + h, n - h, "0\r\n\r\n", 5) ? n : 0;
	return h;
}

static void upstream_serve(int lfd, const char *cn, int other_ca, int go_r, const char *rec)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	X509 *leaf = make_cert(pki.leaf_key, cn, other_ca ? pki.other_ca : pki.ca,
		other_ca ? pki.other_ca_key : pki.ca_key, 2);
	char buf[65536], c;
	size_t n = 0;
	struct pollfd lp = {.fd = lfd, .events = POLLIN};
	int fd, out;
	SSL *ssl;

	/* No connection within 2 s: nothing recorded (a refused request never connects). */
	if (poll(&lp, 1, 2000) <= 0)
		_exit(0);
	fd = accept(lfd, NULL, NULL);

	out = open(rec, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || out < 0 || SSL_CTX_use_certificate(ctx, leaf) != 1 ||
		SSL_CTX_use_PrivateKey(ctx, pki.leaf_key) != 1)
		_exit(3);
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	if (SSL_accept(ssl) != 1) {
		(void)!write(out, "handshake failed", 16);
		_exit(0);
	}
	while (!body_end(buf, n) && n < sizeof(buf) - 1) {
		int r = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = 0;
		/* Keep reading briefly after the end: whatever else the injector sends shows. */
	}
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	if (poll(&pf, 1, 200) > 0) {
		int r = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));
		if (r > 0)
			n += (size_t)r;
	}
	(void)!write(out, buf, n);
	close(out);
	static const char one[] =
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
		"event: message_start\ndata: {\"usage\":{\"input_tokens\":11}}\n\n";
	static const char two[] =
		"event: message_delta\ndata: {\"usage\":{\"output_tokens\":5}}\n\n";
	SSL_write(ssl, one, sizeof(one) - 1);
	pf = (struct pollfd){.fd = go_r, .events = POLLIN};
	if (poll(&pf, 1, 10000) > 0 && read(go_r, &c, 1) == 1)
		SSL_write(ssl, two, sizeof(two) - 1);
	SSL_shutdown(ssl);
	_exit(0);
}

static struct upstream upstream_start(const char *cn, int other_ca)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	struct upstream u;
	int go[2], lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
	assert_int_equal(pipe(go), 0);
	u.port = ntohs(a.sin_port);
	u.pid = fork();
	assert_true(u.pid >= 0);
	if (u.pid == 0) {
		close(go[1]);
		upstream_serve(lfd, cn, other_ca, go[0], unit_path("received"));
	}
	close(lfd);
	close(go[0]);
	u.go_w = go[1];
	return u;
}

/* What the upstream recorded ("" when it never accepted). */
static const char *received(void)
{
	static char buf[65536];

	if (access(unit_path("received"), F_OK) < 0)
		return "";
	unit_read(unit_path("received"), buf, sizeof(buf));
	return buf;
}

/*
 * The agent's side: sends req on one end of a socketpair while a child runs inj_serve on
 * the other; answer gets everything the agent read. first_event: read until the first
 * event, then tell the upstream to send the second (the stream was not buffered).
 */
static int agent_request(const char *host_name, const char *ca_pem, struct upstream *up,
	const char *req, size_t reqlen, char *answer, size_t n, int first_event)
{
	struct inj_route r;
	int sp[2], st;
	size_t got = 0;
	pid_t pid;

	memset(&r, 0, sizeof(r));
	snprintf(r.name, sizeof(r.name), "TEST_KEY");
	snprintf(r.host, sizeof(r.host), "%s", host_name);
	r.uport = up->port;
	snprintf(r.prefix, sizeof(r.prefix), "/v1");
	snprintf(r.hname, sizeof(r.hname), "x-api-key");
	snprintf(r.htmpl, sizeof(r.htmpl), "{}");
	r.key = KEY;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct inj_timeouts to = inj_timeouts_default;
		struct inj_worker *w;
		char err[512], line[512];
		long long in = 0, out = 0;
		int rp[2], status = 0;
		ssize_t k;

		close(sp[0]);
		to.upstream_ms = 5000;
		if (pipe2(rp, O_NONBLOCK) < 0 ||
			inj_worker_new(
				&r, ca_pem, strlen(ca_pem), rp[1], &to, &w, err, sizeof(err)) < 0)
			_exit(3);
		inj_serve_conn(w, sp[1]);
		/* The usage line: the status, the tokens, and never the key. */
		k = read(rp[0], line, sizeof(line) - 1);
		line[k > 0 ? k : 0] = 0;
		if (strstr(line, KEY))
			_exit(4);
		if (sscanf(line, "usage\t%*[^\t]\t%*[^\t]\t%d\t%*u\t%*u\t%lld\t%lld", &status, &in,
			    &out) != 3)
			_exit(6);
		if (status == 200 && (in != 11 || out != 5))
			_exit(5);
		inj_worker_free(w);
		_exit(status == 200 ? 0 : 1);
	}
	close(sp[1]);
	assert_int_equal(write(sp[0], req, reqlen), (ssize_t)reqlen);
	if (!first_event)
		(void)!write(up->go_w, "g", 1);
	for (;;) {
		ssize_t k = read(sp[0], answer + got, n - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
		answer[got] = 0;
		if (first_event == 1 && strstr(answer, "message_start")) {
			/* The second event is not sent yet: the first came through unbuffered. */
			assert_null(strstr(answer, "message_delta"));
			assert_int_equal(write(up->go_w, "g", 1), 1);
			first_event = 2;
		}
	}
	answer[got] = 0;
	close(sp[0]);
	close(up->go_w);
	assert_int_equal(waitpid(up->pid, NULL, 0), up->pid);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static const char post[] = "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1:9\r\n"
			   "x-api-key: placeholder-from-agent\r\nContent-Length: 5\r\n\r\n"
			   "hello"
			   "GET /v1/smuggled HTTP/1.1\r\nHost: evil.example\r\n\r\n";

static void trusted_ca_and_name_get_the_key(void **state)
{
	struct upstream up = upstream_start("localhost", 0);
	char answer[8192];

	(void)state;
	assert_int_equal(agent_request("localhost", pki.ca_pem, &up, post, strlen(post), answer,
				 sizeof(answer), 1),
		0);
	/* The upstream got the real key, its own Host, the body, and nothing after it. */
	assert_non_null(strstr(received(), "\r\nx-api-key: " KEY "\r\n"));
	assert_non_null(strstr(received(), "\r\nHost: localhost:"));
	assert_null(strstr(received(), "placeholder-from-agent"));
	assert_int_equal(strlen(strstr(received(), "\r\n\r\n")), 4 + 5);
	assert_null(strstr(received(), "smuggled"));
	/* The agent got the whole stream, and not the key. */
	assert_non_null(strstr(answer, "HTTP/1.1 200 OK\r\n"));
	assert_non_null(strstr(answer, "message_delta"));
	assert_null(strstr(answer, KEY));
}

static void chunked_body_relayed(void **state)
{
	static const char req[] = "POST /v1/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
				  "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nCookie: agent\r\n\r\n"
				  "GET /v1/smuggled HTTP/1.1\r\n\r\n";
	struct upstream up = upstream_start("localhost", 0);
	char answer[8192];

	(void)state;
	assert_int_equal(agent_request("localhost", pki.ca_pem, &up, req, strlen(req), answer,
				 sizeof(answer), 0),
		0);
	assert_non_null(strstr(received(), "\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"));
	assert_null(strstr(received(), "smuggled"));
	assert_null(strstr(received(), "Cookie"));
	assert_non_null(strstr(answer, "message_delta"));
}

/* An upstream whose certificate fails: a fixed 502, a failed handshake, never the key. */
static void refused_upstream(const char *cn, int other_ca)
{
	struct upstream up = upstream_start(cn, other_ca);
	char answer[8192];

	assert_int_equal(agent_request("localhost", pki.ca_pem, &up, post, strlen(post), answer,
				 sizeof(answer), 0),
		1);
	assert_string_equal(received(), "handshake failed");
	assert_non_null(strstr(answer, "HTTP/1.1 502 Bad Gateway\r\n"));
	assert_non_null(strstr(answer, "certificate was refused"));
	assert_null(strstr(answer, KEY));
}

static void untrusted_ca_never_sees_the_key(void **state)
{
	(void)state;
	refused_upstream("localhost", 1);
}

static void other_name_never_sees_the_key(void **state)
{
	(void)state;
	refused_upstream("other.example.test", 0);
}

static void refused_request_never_connects(void **state)
{
	static const char req[] = "GET http://evil.example/v1/x HTTP/1.1\r\n\r\n";
	struct upstream up = upstream_start("localhost", 0);
	char answer[8192];

	(void)state;
	assert_int_equal(agent_request("localhost", pki.ca_pem, &up, req, strlen(req), answer,
				 sizeof(answer), 0),
		1);
	assert_non_null(strstr(answer, "HTTP/1.1 400 Bad Request\r\n"));
	assert_null(strstr(answer, KEY));
	/* The upstream never got a connection: it recorded nothing. */
	assert_string_equal(received(), "");
}

/* A listener on 127.0.0.1 (any port): its descriptor, *a its address. */
static int tls_listener(struct sockaddr_in *a)
{
	socklen_t al = sizeof(*a);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*a = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)a, sizeof(*a)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)a, &al), 0);
	return lfd;
}

/* The upstream's TLS context: a certificate for localhost from the test CA. */
static SSL_CTX *leaf_ctx(void)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	X509 *leaf = make_cert(pki.leaf_key, "localhost", pki.ca, pki.ca_key, 2);

	SSL_CTX_use_certificate(ctx, leaf);
	SSL_CTX_use_PrivateKey(ctx, pki.leaf_key);
	return ctx;
}

/*
 * A worker of route TEST_KEY (upstream localhost:port) serving the agent's connection, in
 * a child; *agent gets the agent's end. The child's pid.
 */
static pid_t worker_on(unsigned port, int upstream_ms, int *agent)
{
	int sp[2];
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct inj_timeouts to = inj_timeouts_default;
		struct inj_route r;
		struct inj_worker *w;
		char err[512];

		close(sp[0]);
		memset(&r, 0, sizeof(r));
		snprintf(r.name, sizeof(r.name), "TEST_KEY");
		snprintf(r.host, sizeof(r.host), "localhost");
		r.uport = port;
		snprintf(r.hname, sizeof(r.hname), "x-api-key");
		snprintf(r.htmpl, sizeof(r.htmpl), "{}");
		r.key = KEY;
		to.upstream_ms = upstream_ms;
		if (inj_worker_new(
			    &r, pki.ca_pem, strlen(pki.ca_pem), -1, &to, &w, err, sizeof(err)) < 0)
			_exit(3);
		inj_serve_conn(w, sp[1]);
		_exit(0);
	}
	close(sp[1]);
	*agent = sp[0];
	return pid;
}

/*
 * Keep-alive on both legs: an upstream that frames its answers (a length) and keeps its
 * connection, and an agent that sends three requests on one connection. The upstream
 * accepts one TLS connection for all three; each answer arrives framed, the connection
 * stays open for the next; an answer that echoes the key shows it masked.
 */
static void kept_alive_both_ways(void **state)
{
	struct sockaddr_in a;
	int lfd = tls_listener(&a), agent, st;
	pid_t up, pid;

	(void)state;
	up = fork();
	assert_true(up >= 0);
	if (up == 0) {
		SSL_CTX *ctx = leaf_ctx();
		int conns = 0,
		    out = open(unit_path("received"), O_WRONLY | O_CREAT | O_TRUNC, 0600);

		for (;;) {
			struct pollfd lp = {.fd = lfd, .events = POLLIN};
			char buf[8192], ans[8400];
			size_t n = 0;
			if (poll(&lp, 1, 1500) <= 0)
				break;
			int fd = accept(lfd, NULL, NULL);
			SSL *ssl = SSL_new(ctx);
			SSL_set_fd(ssl, fd);
			if (SSL_accept(ssl) != 1)
				_exit(3);
			conns++;
			for (int req = 1;; req++) {
				size_t h;
				while (!(h = inj_head_end(buf, n))) {
					int r = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));
					if (r <= 0)
						goto next;
					n += (size_t)r;
				}
				/* The echo of the request's head, as some debug endpoints do. */
				int k = snprintf(ans, sizeof(ans),
					"HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nX-Seen: "
					"%s\r\n\r\n",
					h, KEY);
				memcpy(ans + k, buf, h);
				SSL_write(ssl, ans, k + (int)h);
				memmove(buf, buf + h, n - h);
				n -= h;
				(void)req;
			}
		next:
			SSL_free(ssl);
			close(fd);
		}
		dprintf(out, "connections %d\n", conns);
		_exit(0);
	}
	close(lfd);
	pid = worker_on(ntohs(a.sin_port), inj_timeouts_default.upstream_ms, &agent);
	for (int i = 0; i < 3; i++) {
		static const char req[] = "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n";
		char ans[8192];
		size_t got = 0, h = 0;
		unsigned long len = 0;

		assert_int_equal(write(agent, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
		/* One answer, framed by its length; the connection stays open. */
		while (!h || got < h + len) {
			ssize_t k = read(agent, ans + got, sizeof(ans) - 1 - got);
			assert_true(k > 0);
			got += (size_t)k;
			ans[got] = 0;
			if (!h && (h = inj_head_end(ans, got)))
				len = strtoul(strstr(ans, "Content-Length: ") + 16, NULL, 10);
		}
		assert_int_equal(got, h + len);
		assert_non_null(strstr(ans, "HTTP/1.1 200 OK\r\n"));
		assert_null(strstr(ans, "Connection: close"));
		/* The key, in the echoed header and in the echoed request, never shows. */
		assert_null(strstr(ans, KEY));
		assert_non_null(strstr(ans, "x-api-key: *******"));
	}
	close(agent);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(waitpid(up, &st, 0), up);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Three requests, one upstream connection. */
	assert_string_equal(received(), "connections 1\n");
}

/*
 * An upstream that says "Connection: close" on an answer without a body is never asked
 * again on that connection, even while it has not closed it yet: the second request of the
 * agent's connection goes on a new one (the first stays open, unread, to catch a reuse).
 */
static void upstream_close_honoured(void **state)
{
	struct sockaddr_in a;
	int lfd = tls_listener(&a), agent, st;
	pid_t up, pid;

	(void)state;
	up = fork();
	assert_true(up >= 0);
	if (up == 0) {
		SSL_CTX *ctx = leaf_ctx();
		SSL *kept[4];
		int conns = 0,
		    out = open(unit_path("received"), O_WRONLY | O_CREAT | O_TRUNC, 0600);

		for (; conns < 4; conns++) {
			struct pollfd lp = {.fd = lfd, .events = POLLIN};
			char buf[4096];
			size_t n = 0;
			if (poll(&lp, 1, 1500) <= 0)
				break;
			int fd = accept(lfd, NULL, NULL);
			SSL *ssl = SSL_new(ctx);
			SSL_set_fd(ssl, fd);
			if (SSL_accept(ssl) != 1)
				_exit(3);
			while (!inj_head_end(buf, n)) {
				int r = SSL_read(ssl, buf + n, (int)(sizeof(buf) - 1 - n));
				if (r <= 0)
					_exit(4);
				n += (size_t)r;
			}
			static const char ans[] =
				"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
			SSL_write(ssl, ans, sizeof(ans) - 1);
			kept[conns] = ssl; /* open, never read again */
		}
		dprintf(out, "connections %d\n", conns);
		(void)kept;
		_exit(0);
	}
	close(lfd);
	pid = worker_on(ntohs(a.sin_port), 3000, &agent);
	for (int i = 0; i < 2; i++) {
		static const char req[] = "DELETE /v1/x HTTP/1.1\r\nHost: x\r\n\r\n";
		char ans[1024];
		size_t got = 0;

		assert_int_equal(write(agent, req, sizeof(req) - 1), (ssize_t)(sizeof(req) - 1));
		while (!inj_head_end(ans, got)) {
			ssize_t k = read(agent, ans + got, sizeof(ans) - 1 - got);
			assert_true(k > 0);
			got += (size_t)k;
			ans[got] = 0;
		}
		if (!strstr(ans, "HTTP/1.1 204 No Content\r\n"))
			fail_msg("request %d: %s", i, ans);
	}
	close(agent);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(waitpid(up, &st, 0), up);
	assert_string_equal(received(), "connections 2\n");
}

/* A head that never ends: a fixed 408 after the timeout, no upstream connection. */
static void stalled_head_times_out(void **state)
{
	struct inj_route r;
	struct inj_worker *w;
	struct inj_timeouts to = inj_timeouts_default;
	char err[256], answer[1024];
	int sp[2], st;
	ssize_t n;
	pid_t pid;

	(void)state;
	memset(&r, 0, sizeof(r));
	snprintf(r.host, sizeof(r.host), "localhost");
	r.uport = 9;
	snprintf(r.hname, sizeof(r.hname), "x-api-key");
	snprintf(r.htmpl, sizeof(r.htmpl), "{}");
	r.key = KEY;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(sp[0]);
		to.head_ms = 500;
		if (inj_worker_new(
			    &r, pki.ca_pem, strlen(pki.ca_pem), -1, &to, &w, err, sizeof(err)) < 0)
			_exit(3);
		inj_serve_conn(w, sp[1]);
		_exit(0);
	}
	close(sp[1]);
	assert_int_equal(write(sp[0], "GET /v1/x HTTP/1.1\r\nX-A: 1\r\n", 29), 29);
	/*
	 * A byte every 100 ms: each read is quick, the head never ends. The deadline is for
	 * the whole head (500 ms here), so the 408 comes while the bytes still trickle.
	 */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 30; i++) {
		struct pollfd pf = {.fd = sp[0], .events = POLLIN};
		if (poll(&pf, 1, 100) > 0)
			break;
		(void)!write(sp[0], "X", 1);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1500);
	n = read(sp[0], answer, sizeof(answer) - 1);
	assert_true(n > 0);
	answer[n] = 0;
	assert_non_null(strstr(answer, "HTTP/1.1 408 Request Timeout\r\n"));
	assert_null(strstr(answer, KEY));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	close(sp[0]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			trusted_ca_and_name_get_the_key, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			chunked_body_relayed, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			untrusted_ca_never_sees_the_key, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			other_name_never_sees_the_key, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			refused_request_never_connects, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(stalled_head_times_out),
		cmocka_unit_test_setup_teardown(
			kept_alive_both_ways, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			upstream_close_honoured, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, pki_setup, pki_teardown);
}
