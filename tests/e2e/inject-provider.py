# SPDX-License-Identifier: MIT
# A fake LLM provider for the injector's tests (t-86, tests/bench/inject): an HTTP/1.1 server
# over TLS with the given certificate. Usage: inject-provider.py ADDR PORT CERT KEY REC
#
# Connections persist (HTTP/1.1 keep-alive) until the client sends "Connection: close"
# (HTTP/1.0: unless it asks for keep-alive), closes, or stays idle for INJECT_PROVIDER_IDLE
# seconds (default 30); pipelined requests are served in order. Request bodies are read by
# Content-Length or chunked. Every answer is framed (Content-Length or chunked) except
# /v1/close's and /v1/truncated's; TCP_NODELAY is set on every accepted socket (without it
# Nagle and delayed ACKs add ~40 ms to a kept-alive request).
#
# Records: each request, head and body as received (CRLF as LF), then "=====", in REC;
# "handshake failed" there for a connection whose TLS handshake failed; one line per
# accepted TLS connection ("N PEER-ADDR:PORT") in REC.conns, so a test can count upstream
# connections per request.
#
# Endpoints (path without the query; the first two match as prefixes, as before):
#   /v1/messages...   200, an Anthropic-style event stream with usage tokens, chunked, one
#                     chunk per event written as it is produced, 20 ms apart
#                     (a path containing "slow", e.g. /v1/messages/slow: 1.5 s after the third)
#   /v1/redirect...   302 to https://evil.test/steal
#   /v1/ping          200, a small JSON body (the bench's fast answer)
#   /v1/echo          200, the whole request (head and body, as received) as the body
#   /v1/echo-chunked  the same, chunked in 3-byte chunks (a key is cut across chunks)
#   /v1/echo-b64      200, the base64 of the whole request as the body
#   /v1/echo-head     200, empty body; each received header line back as "X-Echo-NAME: VALUE"
#   /v1/close         200, a body delimited by the connection's end (no Content-Length, not
#                     chunked, "Connection: close"), then the connection is closed
#   /v1/truncated     200 announcing Content-Length: 100, 10 bytes sent, then closed
#   anything else     404
import base64, itertools, os, socket, ssl, sys, threading, time

addr, port, cert, key, rec = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
IDLE = float(os.environ.get("INJECT_PROVIDER_IDLE", "30"))
HEAD_MAX = 65536
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
lock = threading.Lock()
conn_seq = itertools.count(1)


def record(b):
    with lock, open(rec, "ab") as f:
        f.write(b + b"\n=====\n")


def record_conn(peer):
    with lock, open(rec + ".conns", "a") as f:
        f.write("%d %s:%d\n" % (next(conn_seq), peer[0], peer[1]))


EVENTS = [
    ("message_start", '{"type":"message_start","message":{"id":"msg_e2e","type":"message","role":"assistant","model":"claude-3-5-haiku-20241022","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}'),
    ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"INJECTED-ANSWER"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":0}'),
    ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}'),
    ("message_stop", '{"type":"message_stop"}'),
]
REASONS = {200: "OK", 302: "Found", 400: "Bad Request", 404: "Not Found",
           431: "Request Header Fields Too Large", 501: "Not Implemented"}


class Bad(Exception):
    """A request this server cannot read: answered with the status, then closed."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class Peer:
    """One accepted connection; the read buffer outlives a request (pipelining)."""

    def __init__(self, c):
        self.c, self.buf = c, b""

    def more(self):
        d = self.c.recv(65536)
        if not d:
            raise EOFError
        self.buf += d

    def take(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def line(self):
        while b"\r\n" not in self.buf:
            if len(self.buf) > HEAD_MAX:
                raise Bad(400)
            self.more()
        return self.take(self.buf.index(b"\r\n") + 2)

    def head(self):
        """The next request's head, CRLF CRLF included; None when the client closed, or
        stayed idle too long, between requests."""
        while True:
            while self.buf.startswith(b"\r\n"):  # RFC 9112 2.2: ignore CRLFs before a request
                self.buf = self.buf[2:]
            i = self.buf.find(b"\r\n\r\n")
            if i >= 0:
                return self.take(i + 4)
            if len(self.buf) > HEAD_MAX:
                raise Bad(431)
            try:
                self.more()
            except (EOFError, OSError):  # closed, reset or idle (a timeout is an OSError)
                if self.buf:
                    raise
                return None

    def send(self, b):
        self.c.sendall(b)


def parse_head(head):
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise Bad(400)
    headers = []
    for l in lines[1:]:
        name, sep, value = l.partition(b":")
        if not sep or not name or name != name.strip():
            raise Bad(400)
        headers.append((name, value.strip()))
    return parts[0], parts[1], parts[2], headers


def values(headers, name):
    return [v for n, v in headers if n.lower() == name]


def read_body(p, headers):
    """The body as received (chunk framing included)."""
    te = values(headers, b"transfer-encoding")
    cl = set(values(headers, b"content-length"))
    if te:
        if cl or te[-1].lower().split(b",")[-1].strip() != b"chunked":
            raise Bad(501 if not cl else 400)
        raw = b""
        while True:
            size_line = p.line()
            raw += size_line
            try:
                n = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise Bad(400)
            if n == 0:
                break
            data = p.take(n + 2)
            if not data.endswith(b"\r\n"):
                raise Bad(400)
            raw += data
        while True:  # trailers, up to the empty line
            t = p.line()
            raw += t
            if t == b"\r\n":
                return raw
    if not cl:
        return b""
    n = cl.pop()
    if cl or not n.isdigit():  # two different lengths, or not a number
        raise Bad(400)
    return p.take(int(n))


def chunk(b):
    return b"%x\r\n%s\r\n" % (len(b), b)


def fixed(p, status, body, close, head_only=False, ctype=b"application/json", extra=b""):
    p.send(b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%sContent-Length: %d\r\n%s\r\n%s" % (
        status, REASONS[status].encode(), ctype, extra, len(body),
        b"Connection: close\r\n" if close else b"", b"" if head_only else body))


def stream(p, slow, chunked, close):
    p.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n%s%s\r\n" % (
        b"Transfer-Encoding: chunked\r\n" if chunked else b"", b"Connection: close\r\n" if close else b""))
    for i, (ev, js) in enumerate(EVENTS):
        if i:
            time.sleep(1.5 if slow and i == 3 else 0.02)
        e = ("event: %s\ndata: %s\n\n" % (ev, js)).encode()
        p.send(chunk(e) if chunked else e)
    if chunked:
        p.send(b"0\r\n\r\n")


def answer(p, method, target, version, headers, raw):
    """Answers one request; returns True when the connection must end after it."""
    path = target.split(b"?")[0]
    conn = b",".join(values(headers, b"connection")).lower()
    keep = b"keep-alive" in conn if version == b"HTTP/1.0" else b"close" not in conn
    close = not keep
    head_only = method == b"HEAD"
    if path.startswith(b"/v1/redirect"):
        fixed(p, 302, b"", close, head_only, extra=b"Location: https://evil.test/steal\r\n")
    elif path.startswith(b"/v1/messages"):
        # An HTTP/1.0 client cannot read chunked: its stream ends with the connection.
        chunked = version != b"HTTP/1.0"
        stream(p, b"slow" in path, chunked, close or not chunked)
        return close or not chunked
    elif path == b"/v1/ping":
        fixed(p, 200, b'{"type":"pong"}', close, head_only)
    elif path == b"/v1/echo":
        fixed(p, 200, raw, close, head_only, b"application/octet-stream")
    elif path == b"/v1/echo-b64":
        fixed(p, 200, base64.b64encode(raw), close, head_only, b"text/plain")
    elif path == b"/v1/echo-head":
        extra = b"".join(b"X-Echo-%s: %s\r\n" % (n, v) for n, v in headers)
        fixed(p, 200, b"", close, head_only, b"text/plain", extra)
    elif path == b"/v1/echo-chunked":
        p.send(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
               b"Transfer-Encoding: chunked\r\n%s\r\n" % (b"Connection: close\r\n" if close else b""))
        if not head_only:
            for i in range(0, len(raw), 3):  # one write per chunk: cut across reads too
                p.send(chunk(raw[i:i + 3]))
            p.send(b"0\r\n\r\n")
    elif path == b"/v1/close":
        p.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n")
        if not head_only:
            p.send(b"CLOSE-DELIMITED-ANSWER\n")
            p.send(b"the end of the connection ends this body\n")
        return True
    elif path == b"/v1/truncated":
        p.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\nTRUNCATED\n")
        raise EOFError  # cut: no close_notify, no more bytes
    else:
        fixed(p, 404, b"{}", close, head_only)
    return close


def goodbye(c):
    """A clean TLS end (close_notify), not waiting long for the peer's."""
    try:
        c.settimeout(1)
        c.unwrap()
    except Exception:
        pass


def serve(raw, peer):
    c = raw  # the TLS socket once wrapped (wrapping detaches raw)
    try:
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.settimeout(20)
        try:
            c = ctx.wrap_socket(raw, server_side=True)
        except Exception:
            record(b"handshake failed")
            return
        record_conn(peer)
        c.settimeout(IDLE)
        p = Peer(c)
        while True:
            try:
                head = p.head()
                if head is None:
                    goodbye(c)
                    break
                method, target, version, headers = parse_head(head)
                if any(v.lower() == b"100-continue" for v in values(headers, b"expect")):
                    p.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                body = read_body(p, headers)
            except Bad as e:
                fixed(p, e.status, b"{}", True)
                goodbye(c)
                break
            raw_req = head + body
            record(raw_req.replace(b"\r\n", b"\n"))
            if answer(p, method, target, version, headers, raw_req):
                goodbye(c)
                break
    except Exception:
        pass
    finally:
        c.close()


s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(64)
while True:
    c, peer = s.accept()
    threading.Thread(target=serve, args=(c, peer), daemon=True).start()
