# SPDX-License-Identifier: MIT
# A fake LLM provider for the injector's tests (t-86, tests/bench/inject): TLS with the
# given certificate, records each request (CRLF as LF) in REC, answers /v1/messages with an
# Anthropic-style event stream (/v1/messages/slow pauses 1.5 s mid-stream), /v1/redirect
# with a 302, anything else 404. Usage: inject-provider.py ADDR PORT CERT KEY REC
import socket, ssl, sys, threading, time
addr, port, cert, key, rec = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
lock = threading.Lock()
def record(b):
    with lock, open(rec, "ab") as f:
        f.write(b + b"\n=====\n")
EVENTS = [
    ("message_start", '{"type":"message_start","message":{"id":"msg_e2e","type":"message","role":"assistant","model":"claude-3-5-haiku-20241022","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}'),
    ("content_block_start", '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}'),
    ("content_block_delta", '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"INJECTED-ANSWER"}}'),
    ("content_block_stop", '{"type":"content_block_stop","index":0}'),
    ("message_delta", '{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}'),
    ("message_stop", '{"type":"message_stop"}'),
]
def serve(raw):
    try:
        raw.settimeout(20)
        try:
            c = ctx.wrap_socket(raw, server_side=True)
        except Exception as e:
            record(b"handshake failed")
            return
        data = b""
        while b"\r\n\r\n" not in data:
            d = c.recv(65536)
            if not d:
                break
            data += d
        head, _, body = data.partition(b"\r\n\r\n")
        n = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                n = int(line.split(b":")[1])
        while len(body) < n:
            d = c.recv(65536)
            if not d:
                break
            body += d
        record((head + b"\r\n\r\n" + body).replace(b"\r\n", b"\n"))
        path = head.split(b" ")[1]
        if path.startswith(b"/v1/redirect"):
            c.sendall(b"HTTP/1.1 302 Found\r\nLocation: https://evil.test/steal\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        elif path.startswith(b"/v1/messages"):
            slow = b"slow" in path
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n")
            for i, (ev, js) in enumerate(EVENTS):
                c.sendall(("event: %s\ndata: %s\n\n" % (ev, js)).encode())
                time.sleep(1.5 if slow and i == 2 else 0.02)
        else:
            c.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        c.close()
    except Exception:
        pass
    finally:
        raw.close()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((addr, port))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
