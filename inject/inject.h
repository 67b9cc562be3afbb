/* SPDX-License-Identifier: MIT */
#ifndef OCSB_INJECT_H
#define OCSB_INJECT_H

/*
 * ocsb-inject: the agent's way to an API whose key it must never see (issue 17). One
 * loopback listener per route takes plain HTTP/1.1 from the agent, the request head is
 * rewritten (the agent's credentials dropped, the route's header with the real key added,
 * Host pinned to the upstream), and the request goes to the route's upstream host only,
 * over TLS verified against the system's CAs and the host name. Connections are kept
 * alive on both legs (the agent's for several requests, a small pool of verified TLS
 * connections per route); answers are streamed back as they arrive, with every form of the
 * key masked (redact.c).
 *
 * Processes: the injector's first process (daemon.c) holds the keys in locked memory,
 * accepts on agentd's listeners, checks that the connecting socket is the agent's (the
 * peer's uid by sock_diag, common/sockdiag.c) and passes each connection to the worker of
 * its route.
 * A worker (one process per route, serve.c) holds that route's key alone and parses what
 * the agent sends; one thread per agent connection, at most INJ_ROUTE_CONNS of them.
 */

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "util.h"

/* The account ocsb-provision makes for the injector; the comment marks it as ocsb's. */
#define INJ_USER "ocsb-inject"
#define INJ_GECOS "ocsb credential injector"
/* Route i listens on 127.0.0.1:INJ_PORT_BASE + i. */
#define INJ_PORT_BASE 18400
#define INJ_MAX_ROUTES 16
#define INJ_HEAD_MAX 16384 /* the agent's request head, bytes */
#define INJ_MAX_HEADERS 100
#define INJ_KEY_MAX 4096
#define INJ_CA_MAX (256 * 1024) /* a CA bundle handed over for tests */
#define INJ_CONF_MAX (INJ_MAX_ROUTES * (INJ_KEY_MAX + 2048) + INJ_CA_MAX + 64)

struct inj_route {
	char name[65]; /* the secret's name: ANTHROPIC_API_KEY */
	unsigned port; /* listens on 127.0.0.1:port */
	char host[254]; /* the upstream host name (TLS name checked against it) */
	unsigned uport; /* the upstream port, 443 */
	char prefix[256]; /* the only paths the route reaches: "" (all) or "/v1" */
	char hname[64]; /* the header carrying the key: "x-api-key" */
	char htmpl[256]; /* its value, "{}" standing for the key: "Bearer {}" */
	char *key; /* owned: wiped on free */
};

struct inj_conf {
	struct inj_route r[INJ_MAX_ROUTES];
	size_t n;
	uid_t peer; /* the only account whose connections are served (agentd's agent) */
	int have_peer; /* 0: no "peer" line, every connection is refused */
	char *ca_pem; /* owned: PEM CA certificates trusted instead of the system's, or NULL */
	size_t ca_len;
};

void inj_conf_free(struct inj_conf *c);
/* A key's copy in locked memory (sodium_malloc: never swapped, guarded, wiped on free). */
char *inj_key_dup(const char *s, size_t n);
void inj_key_free(char *key);
/*
 * The hand-over from ocsb-agentd (over a socketpair, never argv, env or a file):
 *   route\tNAME\tPORT\tHOST\tUPORT\tPREFIX\tHEADER\tTEMPLATE\tKEY\n   (one per route)
 *   peer\tUID\n                        (the account allowed to connect: agentd's agent)
 *   ca\tLEN\n followed by LEN bytes of PEM                             (optional, tests)
 *   end\n
 * Keys and templates are printable ASCII (templates may hold spaces), one "{}" each.
 * 0, or -1 with a message that never holds a key.
 */
int inj_conf_parse(const char *p, size_t n, struct inj_conf *ret, char *err, size_t errlen);
/* The text inj_conf_parse reads (agentd's side and tests). */
int inj_conf_render(const struct inj_conf *c, struct buf *out);
/* A route's fields (not its key) as the owner wrote them, checked: 0 or -1 + message. */
int inj_route_check(const struct inj_route *r, char *err, size_t errlen);
/* Found at the end of a complete head: offset just past "\r\n\r\n", or 0. */
size_t inj_head_end(const char *p, size_t n);

/* How the body after the head is framed. */
enum inj_body { INJ_BODY_NONE, INJ_BODY_LENGTH, INJ_BODY_CHUNKED };

struct inj_req {
	char method[16];
	enum inj_body body;
	unsigned long long clen; /* INJ_BODY_LENGTH */
	int close; /* the agent sent "Connection: close": its connection ends after the answer */
	int status; /* a refusal: the status to answer with (0 = accepted) */
	const char *why; /* a refusal: a short fixed text for the agent and the log */
};

/*
 * Rewrites the agent's request head (n bytes, ending in "\r\n\r\n") for route r with
 * key into out. 0 accepted (req filled), -1 refused (req->status and req->why set: the
 * text is a constant that never holds the key nor anything the agent sent).
 */
int inj_rewrite(const struct inj_route *r, const char *key, const char *head, size_t n,
	struct buf *out, struct inj_req *req);

/*
 * The upstream's answer head. INJ_BODY_CLOSE: the body ends when the upstream closes (no
 * length, no chunked); the agent gets it chunked, so an answer cut by an error is never
 * taken for a whole one.
 */
#define INJ_BODY_CLOSE 3
#define INJ_RESP_HEAD_MAX 65536
struct inj_resp {
	int status;
	int body; /* enum inj_body or INJ_BODY_CLOSE */
	unsigned long long clen;
	int upstream_close; /* the upstream's connection cannot be reused after this answer */
	int client_close; /* the head sent to the agent says "Connection: close" */
	int te_lines; /* Transfer-Encoding lines seen (more than one: refused) */
};
/*
 * Parses the upstream's answer head (n bytes, ending in "\r\n\r\n") to a request made with
 * method, and writes the head the agent gets into out: hop-by-hop headers dropped, the
 * framing written again from what was parsed, "Connection: close" when close_client or
 * when the body is delimited by the close. 0, or -1 for a head that is not HTTP/1.x or
 * whose framing is ambiguous (two lengths, a length beside chunked): the agent gets 502.
 */
int inj_resp_head(const char *head, size_t n, const char *method, int close_client,
	struct inj_resp *resp, struct buf *out);

/* The fixed error answer for a status and reason (no key, no request header in it). */
int inj_error_answer(int status, const char *why, struct buf *out);

/*
 * Chunked body decoder that re-encodes what it passes: strips chunk extensions and
 * trailers, stops at the last chunk, refuses anything malformed. Feed bytes as they
 * come; out gets what to send upstream.
 */
struct inj_chunked {
	int decode; /* 1: out gets the data alone (an answer decoded to be masked) */
	int state;
	unsigned long long left; /* bytes of chunk data still to pass */
	size_t linelen; /* of the size or trailer line being read */
	int done;
};
/* Bytes of in consumed (what follows the body is never consumed), or -1 malformed. */
ssize_t inj_chunked_feed(struct inj_chunked *c, const char *in, size_t n, struct buf *out);

/*
 * Usage of one request, counted while the response streams: status from the first
 * line, bytes both ways, tokens from "input_tokens"/"output_tokens" (Anthropic),
 * "prompt_tokens"/"completion_tokens" (OpenAI and the like), "promptTokenCount"/
 * "candidatesTokenCount" (Google), the last value seen of each.
 */
struct inj_usage {
	int status;
	unsigned long long req_bytes, resp_bytes;
	long long in_tokens, out_tokens; /* -1: not reported */
	char tail[64]; /* the end of the previous chunk: a field split across reads */
	size_t tail_len;
	char line[32];
	size_t line_len;
};
void inj_usage_init(struct inj_usage *u);
void inj_usage_feed(struct inj_usage *u, const char *p, size_t n);

/* ---- the upstream: tls.c ---- */

struct inj_tls; /* an SSL_CTX trusting the system's CAs or the handed-over PEM */
int inj_tls_new(const char *ca_pem, size_t ca_len, struct inj_tls **ret, char *err, size_t errlen);
void inj_tls_free(struct inj_tls *t);
struct inj_conn;
/*
 * TCP to host:port (timeout_ms for connect and handshake), TLS with the certificate chain
 * verified and the host name checked. 0 or -1 with a message for the owner's log.
 */
int inj_conn_open(struct inj_tls *t, const char *host, unsigned port, int timeout_ms,
	struct inj_conn **ret, char *err, size_t errlen);
int inj_conn_write(struct inj_conn *c, const void *p, size_t n);
/* Bytes read, 0 at the end, -1 on error. */
ssize_t inj_conn_read(struct inj_conn *c, void *p, size_t n);
/* Why the connection's last write failed (for the owner's log; never holds data). */
const char *inj_conn_error(const struct inj_conn *c);
/* 1 when a kept connection may take a request: nothing unread, no close from the peer. */
int inj_conn_reusable(struct inj_conn *c);
void inj_conn_close(struct inj_conn *c);
/* Closed without a TLS close_notify (never blocks on a peer that stopped reading). */
void inj_conn_drop(struct inj_conn *c);

/* ---- one route's worker: serve.c ---- */

#define INJ_ROUTE_CONNS 32 /* agent connections one route serves at once */
#define INJ_POOL_MAX 8 /* idle upstream connections kept per route */
#define INJ_DRAIN_MAX_S 900 /* an old worker (a push replaced its key) ends by then */

struct inj_timeouts {
	int head_ms; /* a whole request head, from its first byte (or the connection's start) */
	int idle_ms; /* a kept-alive connection waiting for its next request */
	int body_ms; /* the longest pause in the agent's request body */
	int upstream_ms; /* connect + handshake, and the longest pause in the upstream's answer */
	int pool_idle_ms; /* an upstream connection unused longer is closed */
};
/* 30 s, 60 s, 30 s, 300 s, 20 s. */
extern const struct inj_timeouts inj_timeouts_default;

struct inj_worker;
/*
 * The worker of route r (its key is copied into locked memory), trusting ca_pem (NULL:
 * the system's CAs), reporting one usage line per request on report_fd (non-blocking:
 * a line that does not fit is dropped, never waited for). 0 or -1 with a message.
 */
int inj_worker_new(const struct inj_route *r, const char *ca_pem, size_t ca_len, int report_fd,
	const struct inj_timeouts *to, struct inj_worker **ret, char *err, size_t errlen);
void inj_worker_free(struct inj_worker *w);
/*
 * Serves the agent's connection fd (closed at the end) request after request: the head
 * read whole (bounded, timed) and rewritten, the body framed exactly, the answer streamed
 * back masked. Returns when the agent closes, a deadline passes, the framing leaves no
 * other choice, or the worker drains. Blocking; one thread per connection.
 */
void inj_serve_conn(struct inj_worker *w, int fd);
/*
 * The worker's own loop (a process): connections arrive as descriptors on sock (from the
 * injector's first process); each gets a thread, beyond INJ_ROUTE_CONNS a 503. When sock
 * closes, it drains: no new connection, every connection ends after its current answer,
 * and it returns once the last one has. 0, or -1.
 */
int inj_worker_run(struct inj_worker *w, int sock);

/* ---- what a compromised injector can still do: confine.c ---- */

/*
 * A seccomp filter for the calling process and its threads (and children): no execve, no
 * bind or listen, sockets of the families TLS, DNS and sock_diag need alone, no ptrace,
 * namespaces, mounts, keyrings, BPF, io_uring, modules; worker: no fork either (threads
 * only). 0, or -1 with a message.
 */
int inj_confine(int worker, char *err, size_t errlen);

/* ---- the route ports' listeners, held by ocsb-agentd: listen.c ---- */

/* A listening socket on 127.0.0.1:port (CLOEXEC, non-blocking), or -1 with errno. */
int inj_listen(unsigned port);
/* head with the n descriptors fds attached (SCM_RIGHTS), in one message. */
int inj_send_fds(int sock, const char *head, const int *fds, size_t n);
/*
 * One message of up to n bytes into p, with up to max descriptors (SCM_RIGHTS, CLOEXEC;
 * more are closed, and all are when the kernel truncated them) into fds, *ret_nfd of
 * them: recvmsg's result (0 at the end, -1 with errno).
 */
ssize_t inj_recv_fds(int sock, void *p, size_t n, int *fds, size_t max, size_t *ret_nfd);
/* lfd[i] (listener of INJ_PORT_BASE + i, -1 none) over sock, before the first hand-over. */
int inj_send_listeners(int sock, const int lfd[INJ_MAX_ROUTES]);
/* The injector's side: ret_lfd[i] as sent (CLOEXEC), -1 for none; -1 on anything else. */
int inj_recv_listeners(int sock, int ret_lfd[INJ_MAX_ROUTES]);

/* ---- the process: daemon.c ---- */

/*
 * The usage line agentd gets for one request (written in conf.c beside inj_usage_add,
 * which reads it; sent by daemon.c and serve.c); snprintf's result. A status of
 * INJ_REFUSED: answered by the injector itself (a refused request or connection).
 */
#define INJ_REFUSED (-1)
int inj_usage_line(const char *route, time_t when, const struct inj_usage *u, char *out, size_t n);
/*
 * Serves until SIGTERM or until ctl (the socket to ocsb-agentd) closes, on the listeners
 * agentd sent first on ctl (inj_recv_listeners); it binds none itself.
 */
int inj_daemon(int ctl);

/*
 * Usage per route and day, summed by ocsb-agentd into INJ_USAGE_REL under varlib (the
 * owner's, 0400, in root's directory: the routes' names are the owner's business alone)
 * and read by `ocsb usage`. One line per route and day:
 * ROUTE DAY REQUESTS REQ-BYTES RESP-BYTES IN-TOKENS OUT-TOKENS 2XX 3XX 4XX 5XX FAILED
 * REFUSED (tab-separated; FAILED: no HTTP answer from the upstream; REFUSED: answered by
 * the injector itself, never sent upstream, and not among REQUESTS; files written before
 * REFUSED was counted have 12 fields).
 */
#define INJ_USAGE_REL "ocsb/inject/usage"
#define INJ_USAGE_MAX_ROWS 512
struct inj_usage_row {
	char route[65], day[11];
	unsigned long long n, req, resp, in, out, st[5]; /* st: 2xx 3xx 4xx 5xx failed */
	unsigned long long refused;
};
/* Adds one usage line (daemon.c's, without "usage\t") to rows: 0, or -1 if malformed. */
int inj_usage_add(struct inj_usage_row *rows, size_t *n, size_t max, const char *line);
int inj_usage_render(const struct inj_usage_row *rows, size_t n, struct buf *out);
/* Parses a usage file: the rows (at most max), -1 on a malformed line. */
int inj_usage_parse(const char *text, struct inj_usage_row *rows, size_t *n, size_t max);

/*
 * git over HTTPS through route r listening on port: the insteadOf pair that sends
 * "https://host[:uport]PREFIX/..." to the route, "url.<base>.insteadOf" = url. Both end
 * in '/', so a longer path segment never matches. 0, or -1 when they do not fit.
 */
int inj_git_insteadof(const struct inj_route *r, unsigned port, char *ret_base, size_t nb,
	char *ret_url, size_t nu);

/* ---- the built-in providers: routes.c ---- */

struct inj_provider {
	const char *name; /* "anthropic" */
	const char *base; /* "https://api.anthropic.com/v1" */
	const char *header; /* "x-api-key: {}" */
};
const struct inj_provider *inj_provider_find(const char *name);
const struct inj_provider *inj_providers(size_t *ret_n);
/*
 * A route's upstream from a base URL ("https://host[:port][/prefix]") and a header
 * line ("Name: template with {}"): 0 or -1 with a message.
 */
int inj_route_from(struct inj_route *r, const char *base, const char *header, char *err,
	size_t errlen);

/*
 * A route as `ocsb secrets set --inject` stores it: a provider name, or "BASE HEADER"
 * (base URL, one space, header line). 0 or -1 with a message.
 */
int inj_route_spec(struct inj_route *r, const char *spec, char *err, size_t errlen);

/* ---- redaction of the key in relayed answers: redact.c ---- */

/*
 * The upstream sees the real key; an upstream that echoes the request (a debug endpoint, an
 * error quoting a header) would hand it to the agent. Every form the key may take in an
 * answer (redact.c: raw, percent-encoded, JSON-escaped, base64 and base64url inside a longer
 * text) is replaced by as many '*' in what is relayed, in time linear in the answer. A key
 * that holds '*' could re-form around the stars: keys are tokens and hold none.
 */
#define INJ_REDACT_MAXPAT 16
#define INJ_REDACT_MIN 8 /* shorter patterns are not looked for (they would mangle answers) */
struct inj_redact_ac; /* the automaton over the forms (redact.c) */
struct inj_redact_run; /* masked bytes not yet released (redact.c) */
/* Where one scan stands; positions count bytes from the start of what it scanned. */
struct inj_redact_scan {
	uint32_t state; /* the automaton's */
	unsigned long long pos; /* bytes scanned */
	unsigned long long done; /* bytes released */
	struct inj_redact_run *q; /* owned: a ring of qcap, qlen from qhead */
	size_t qcap, qhead, qlen;
};
struct inj_redact {
	char *pat[INJ_REDACT_MAXPAT]; /* owned: the forms of the key looked for */
	size_t plen[INJ_REDACT_MAXPAT];
	size_t npat;
	char *hold; /* borrowed (into hbuf): bytes held back, a suffix that may start a pattern */
	size_t nhold;
	unsigned long long hits; /* patterns replaced so far */
	/* redact.c's own: all sized once by inj_redact_init, never grown */
	char *hbuf; /* owned: room for hold, wiped on free */
	size_t hcap;
	struct inj_redact_ac *ac; /* owned: wiped on free */
	struct inj_redact_scan s, sa; /* the stream's (feed, flush); inj_redact_all's */
};
/*
 * The forms of key (klen bytes): 0, or -1 (no memory). A key shorter than INJ_REDACT_MIN
 * leaves npat 0 (nothing redacted).
 */
int inj_redact_init(struct inj_redact *r, const char *key, size_t klen);
/* Wipes and frees; a zeroed or freed struct is fine. */
void inj_redact_free(struct inj_redact *r);
/*
 * in -> out (appended): every occurrence of a form replaced by as many '*' bytes (lengths
 * kept, so Content-Length and chunk sizes stay right); a suffix that could be the start of a
 * form is held back for the next call. 0 or -1 (no memory: the bytes not yet released are
 * dropped, never sent unmasked; the answer is cut short). hits counts the positions where a
 * form ends (a form ending where another ends counts once).
 */
int inj_redact_feed(struct inj_redact *r, const char *in, size_t n, struct buf *out);
/*
 * The held-back bytes (not a whole form) -> out, as they are (but for the tail of a form
 * already found, which stays masked). For the end of the answer: the stream starts afresh
 * after it. 0 or -1.
 */
int inj_redact_flush(struct inj_redact *r, struct buf *out);
/* A whole buffer in place (a response head): how many forms were replaced. Holds nothing back. */
size_t inj_redact_all(struct inj_redact *r, char *p, size_t n);

#endif
