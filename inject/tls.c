/* SPDX-License-Identifier: MIT */
/*
 * The upstream side: TLS with OpenSSL, the chain verified against the system's CAs (or
 * the PEM ocsb-agentd handed over, for tests) and the certificate checked for the
 * route's host name. The key is written only after SSL_connect succeeded with both
 * checks, so an upstream that fails them never sees it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "inject.h"

struct inj_tls {
	SSL_CTX *ctx; /* owned */
};

struct inj_conn {
	int fd;
	SSL *ssl; /* owned */
	char err[160]; /* why the last write or read failed, for the owner's log */
};

static void ssl_error(char *err, size_t errlen, const char *what)
{
	unsigned long e = ERR_get_error();
	char buf[256] = "";

	if (e)
		ERR_error_string_n(e, buf, sizeof(buf));
	ERR_clear_error();
	seterr(err, errlen, "%s%s%s", what, buf[0] ? ": " : "", buf);
}

static int load_pem(SSL_CTX *ctx, const char *pem, size_t len)
{
	X509_STORE *store = SSL_CTX_get_cert_store(ctx);
	BIO *bio = BIO_new_mem_buf(pem, (int)len);
	X509 *x;
	int n = 0;

	if (!bio)
		return -1;
	while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
		if (X509_STORE_add_cert(store, x) == 1)
			n++;
		X509_free(x);
	}
	ERR_clear_error();
	BIO_free(bio);
	return n > 0 ? 0 : -1;
}

int inj_tls_new(const char *ca_pem, size_t ca_len, struct inj_tls **ret, char *err, size_t errlen)
{
	struct inj_tls *t = calloc(1, sizeof(*t));

	if (!t)
		return seterr(err, errlen, "out of memory");
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (!t->ctx) {
		ssl_error(err, errlen, "SSL_CTX_new");
		goto fail;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	/*
	 * An answer without a length ends with the connection, close_notify or not; answers
	 * with a length or chunked are checked for completeness by serve.c itself.
	 */
	SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* Verification is not optional: SSL_connect fails on an unverified chain. */
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	if (ca_pem) {
		if (load_pem(t->ctx, ca_pem, ca_len) < 0) {
			seterr(err, errlen, "no CA certificate in the handed-over PEM");
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
		ssl_error(err, errlen, "loading the system's CA certificates");
		goto fail;
	}
	*ret = t;
	return 0;
fail:
	inj_tls_free(t);
	return -1;
}

void inj_tls_free(struct inj_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

static int wait_fd(int fd, short ev, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	return r > 0 ? 0 : -1;
}

static int tcp_connect(const char *host, unsigned port, int timeout_ms, char *err, size_t errlen)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG}, *res, *a;
	char portstr[8];
	int fd = -1, r;

	snprintf(portstr, sizeof(portstr), "%u", port);
	r = getaddrinfo(host, portstr, &hints, &res);
	if (r)
		return seterr(err, errlen, "resolving %s: %s", host, gai_strerror(r));
	for (a = res; a; a = a->ai_next) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);

		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			continue;
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 ||
			(errno == EINPROGRESS && wait_fd(fd, POLLOUT, timeout_ms) == 0 &&
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0))
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return seterr(err, errlen, "connecting to %s:%u failed", host, port);
	/* Blocking from here: reads and writes are bounded by the socket's timeouts. */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	/* A request's head and body go out as they are written, not after a delayed ACK. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	return fd;
}

int inj_conn_open(struct inj_tls *t, const char *host, unsigned port, int timeout_ms,
	struct inj_conn **ret, char *err, size_t errlen)
{
	struct inj_conn *c = calloc(1, sizeof(*c));
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
	long vr;

	if (!c)
		return seterr(err, errlen, "out of memory");
	c->fd = tcp_connect(host, port, timeout_ms, err, errlen);
	if (c->fd < 0) {
		free(c);
		return -1;
	}
	/* The handshake's reads and writes time out like the connect. */
	setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	c->ssl = SSL_new(t->ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1 ||
		SSL_set_tlsext_host_name(c->ssl, host) != 1 || SSL_set1_host(c->ssl, host) != 1) {
		ssl_error(err, errlen, "TLS setup");
		goto fail;
	}
	SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (SSL_connect(c->ssl) != 1) {
		vr = SSL_get_verify_result(c->ssl);
		if (vr != X509_V_OK) {
			ERR_clear_error();
			seterr(err, errlen, "TLS to %s:%u refused: certificate %s", host, port,
				X509_verify_cert_error_string(vr));
		} else {
			ssl_error(err, errlen, "TLS handshake failed");
		}
		goto fail;
	}
	/* Belt and braces: SSL_VERIFY_PEER already made SSL_connect fail otherwise. */
	if (SSL_get_verify_result(c->ssl) != X509_V_OK) {
		seterr(err, errlen, "TLS to %s:%u: certificate not verified", host, port);
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	inj_conn_close(c);
	return -1;
}

int inj_conn_write(struct inj_conn *c, const void *p, size_t n)
{
	const char *s = p;

	while (n) {
		int w = SSL_write(c->ssl, s, n > 1 << 30 ? 1 << 30 : (int)n);
		if (w <= 0) {
			int e = errno, se = SSL_get_error(c->ssl, w);
			unsigned long le = ERR_get_error();
			char lib[120] = "";

			if (le)
				ERR_error_string_n(le, lib, sizeof(lib));
			snprintf(c->err, sizeof(c->err), "TLS write: error %d, %s%s%s", se,
				se == SSL_ERROR_SYSCALL ? strerror(e) : "", lib[0] ? " " : "", lib);
			ERR_clear_error();
			return -1;
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

ssize_t inj_conn_read(struct inj_conn *c, void *p, size_t n)
{
	int r = SSL_read(c->ssl, p, n > 1 << 30 ? 1 << 30 : (int)n);

	if (r > 0)
		return r;
	int e = SSL_get_error(c->ssl, r);
	ERR_clear_error();
	return e == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

int inj_conn_reusable(struct inj_conn *c)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};

	/*
	 * Idle, nothing may be readable: bytes would be an answer to no request, and an end
	 * of file (or close_notify) is the upstream closing it.
	 */
	return SSL_pending(c->ssl) == 0 && poll(&p, 1, 0) == 0;
}

const char *inj_conn_error(const struct inj_conn *c)
{
	return c && c->err[0] ? c->err : "no detail";
}

void inj_conn_drop(struct inj_conn *c)
{
	if (!c)
		return;
	SSL_free(c->ssl);
	ERR_clear_error();
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

void inj_conn_close(struct inj_conn *c)
{
	if (!c)
		return;
	if (c->ssl) {
		SSL_shutdown(c->ssl);
		SSL_free(c->ssl);
	}
	ERR_clear_error();
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}
