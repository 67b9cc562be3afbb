/* SPDX-License-Identifier: MIT */
#ifndef OCSB_CTL_H
#define OCSB_CTL_H

#include <stddef.h>
#include <sys/types.h>

#include "util.h"

/*
 * The control protocol between the `ocsb` CLI and ocsb-agentd on its control socket
 * (struct paths' ctl_sock, PATHS_CTL_SOCK in paths.h).
 *
 * Frame: 4-byte big-endian length N (1..CTL_MAX_FRAME), then N bytes of payload. The
 * payload is printable ASCII (0x20-0x7e) and '\n' only, and ends with '\n'.
 *
 * Request:  "OCSB/1 VERB [ARG]\n" and, for SECRET-PUT only, "sealed BASE64\n": the whole
 *           secret set of the owner (names, scopes, values), sealed to agentd's key
 *           (secrets/secrets.h; names are validated inside, after opening), replacing the
 *           previous one at once.
 * Response: "OCSB/1 OK\n" or "OCSB/1 ERR message\n", then "key value\n" lines; keys
 *           ([a-z0-9._-]{1,64}) may repeat, values are printable ASCII and may be empty.
 *
 * Any peer may be hostile (the agent can connect and send anything): every parser here
 * validates every byte, allocates at most one frame per connection and never trusts a
 * length before checking it.
 */

#define CTL_MAX_FRAME 65536
#define CTL_VERSION 1
#define CTL_MAX_NAME 64 /* project names, response keys */
#define CTL_MAX_LOG_LINES 10000
#define CTL_MAX_SEALED 45056 /* base64 characters of a SECRET-PUT body (32 KiB sealed) */
#define CTL_MAX_ERROR 1024 /* an ERR message is cut to this many characters */

enum ctl_verb {
	CTL_STATUS = 1,
	CTL_RESTART,
	CTL_LOGS,
	CTL_WEB,
	CTL_PING,
	CTL_SECRET_PUT,
	CTL_RELOAD, /* root only: re-read ocsb.conf and the egress rules (as a SIGHUP does) */
};

struct ctl_request {
	enum ctl_verb verb;
	char arg[72]; /* RESTART: project or ""; else "" */
	unsigned count; /* LOGS: 1..CTL_MAX_LOG_LINES, 0 = not given */
	char *sealed; /* owned; SECRET-PUT only: the base64 text, validated, not decoded */
};

/* "STATUS", "SECRET-PUT", ... or NULL for a value outside the enum. */
const char *ctl_verb_name(enum ctl_verb verb);

/*
 * Parse one request payload (the frame without its header). 0 and *ret filled, or -1
 * with a one-line message in err that the server can send back as is ("unknown verb
 * 'FOO'", "unsupported protocol version 2"). ret is untouched on error.
 */
int ctl_parse_request(
	const char *payload, size_t len, struct ctl_request *ret, char *err, size_t errlen);
/* The payload for rq into out (overwritten); -EINVAL if rq would not parse, -ENOMEM. */
int ctl_format_request(const struct ctl_request *rq, struct buf *out);
void ctl_request_free(struct ctl_request *rq);

struct ctl_response {
	int ok;
	char *error; /* owned; the message when !ok, else NULL */
	struct strv keys, values; /* owned; parallel, in payload order */
};

/* Like ctl_parse_request, for a response; ret is untouched on error. */
int ctl_parse_response(
	const char *payload, size_t len, struct ctl_response *ret, char *err, size_t errlen);
/*
 * Building a response: ctl_response_ok/err start it, discarding anything already in out
 * (so a handler that fails half-way can turn its partial OK into an ERR); then one
 * ctl_response_add per line. Text is sanitized, never refused: '\n', '\r' and '\t' become
 * spaces, other bytes outside 0x20-0x7e become '?'. An empty ERR message becomes
 * "unspecified error"; longer than CTL_MAX_ERROR it is cut.
 * ctl_response_add: -EINVAL for a bad key or when out holds no response, -EMSGSIZE
 * (out unchanged) when the line would make the payload larger than CTL_MAX_FRAME.
 */
int ctl_response_ok(struct buf *out);
int ctl_response_err(struct buf *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ctl_response_add(struct buf *out, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The first value of key, or NULL. */
const char *ctl_response_get(const struct ctl_response *r, const char *key);
void ctl_response_free(struct ctl_response *r);

/*
 * Incremental frame reader for the daemon's non-blocking loop. Zero-initialize it, then
 * call ctl_reader_feed on each readiness event:
 *   1            a whole frame is in buf (have == need bytes, NUL-terminated);
 *   0            need more (EAGAIN);
 *   -EPROTO      the length is 0 or above CTL_MAX_FRAME (nothing was allocated);
 *   -ECONNRESET  end of file, before or in the middle of a frame;
 *   other -errno from recv/read.
 * It reads no byte past the end of the current frame, so a pipelined next frame stays in
 * the socket: with EPOLLET, call ctl_reader_reset and then feed again until it returns 0.
 * The fd may be blocking: sockets are read with MSG_DONTWAIT. It bounds memory (one frame),
 * not time: the caller needs a per-connection deadline against peers that trickle bytes.
 */
struct ctl_reader {
	unsigned char hdr[4];
	size_t hdr_have;
	char *buf; /* owned */
	size_t need, have;
};

int ctl_reader_feed(struct ctl_reader *r, int fd);
/* Back to the initial state, freeing the frame: after consuming one, or when done. */
void ctl_reader_reset(struct ctl_reader *r);

/*
 * Its counterpart for the answer: the loop never waits for a peer to read. Zero-initialize,
 * queue one frame with ctl_writer_frame (0; -EMSGSIZE for a length of 0 or above
 * CTL_MAX_FRAME, -EBUSY when one is queued, -ENOMEM), then call ctl_writer_flush on each
 * writability event: 1 all sent, 0 the socket is full (wait for EPOLLOUT), -errno (-EPIPE
 * for a peer gone). Memory: one frame. The fd may be blocking (MSG_DONTWAIT).
 */
struct ctl_writer {
	char *buf; /* owned: header and payload */
	size_t len, off;
};

int ctl_writer_frame(struct ctl_writer *w, const void *payload, size_t len);
int ctl_writer_flush(struct ctl_writer *w, int fd);
void ctl_writer_reset(struct ctl_writer *w);

/*
 * Blocking helpers for clients, on sockets, each bounded by timeout_ms in total
 * (-ETIMEDOUT). SIGPIPE is never raised (MSG_NOSIGNAL).
 */
/* 0, -EMSGSIZE for len 0 or above CTL_MAX_FRAME, -EPIPE/-ECONNRESET, -ETIMEDOUT, -errno. */
int ctl_send_frame(int fd, const void *payload, size_t len, int timeout_ms);
/*
 * One frame: *ret (owned, NUL-terminated) and *ret_len, set only on success. -EPROTO for a
 * bad length, -ECONNRESET on end of file, -ETIMEDOUT, -errno.
 */
int ctl_recv_frame(int fd, char **ret, size_t *ret_len, int timeout_ms);
/* A connected SOCK_STREAM fd (CLOEXEC, non-blocking) or -errno (-ETIMEDOUT, -ENOENT, ...). */
int ctl_connect(const char *path, int timeout_ms);
/*
 * Connect, send rq, receive and parse the answer, all within timeout_ms. 0 when a
 * well-formed response arrived, OK or ERR alike (check ret->ok); otherwise -errno and a
 * one-line message for the user in err, e.g. "cannot reach ocsb-agentd at
 * /run/ocsb/agentd.sock: No such file or directory (is it running? sudo ocsb-warden
 * --foreground)".
 */
int ctl_call(const char *path, const struct ctl_request *rq, struct ctl_response *ret,
	int timeout_ms, char *err, size_t errlen);
/*
 * The credentials of the peer of a connected Unix socket (SO_PEERCRED: taken by the kernel
 * at connect time, not claimed by the peer). Any output pointer may be NULL. 0 or -errno.
 */
int ctl_peer(int fd, uid_t *uid, gid_t *gid, pid_t *pid);

#endif
