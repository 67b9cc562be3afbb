# SPDX-License-Identifier: MIT
# A git smart-HTTP server over TLS for the injector's tests (t-86): each request must carry
# Authorization equal to WANT (else 401), then `git http-backend` serves it (clone and
# push; REMOTE_USER set, so receive-pack is on). Every request is recorded in REC, one line:
#   METHOD PATH chunked=0|1 auth=HEADER
# Usage: inject-git.py ADDR PORT CERT KEY REC ROOT WANT-FILE (ROOT holds the bare
# repositories; WANT is read from a file, never on a command line others can read)
import ssl, subprocess, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
addr, port, cert, key, rec, root, want_file = sys.argv[1:8]
want = open(want_file).read().strip()
lock = threading.Lock()

class Git(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out, 1
                out += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0)), 0

    def serve(self):
        data, chunked = self.body()
        auth = self.headers.get("Authorization", "")
        with lock, open(rec, "a") as f:
            f.write("%s %s chunked=%d auth=%s\n" % (self.command, self.path, chunked, auth))
        self.close_connection = True
        if auth != want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        env = {"PATH": "/usr/bin:/bin", "HOME": root, "GIT_PROJECT_ROOT": root,
               "GIT_HTTP_EXPORT_ALL": "1", "GIT_CONFIG_NOSYSTEM": "1", "PATH_INFO": path,
               "QUERY_STRING": query, "REQUEST_METHOD": self.command, "REMOTE_USER": "agent",
               "REMOTE_ADDR": "198.18.0.1", "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(data))}
        if self.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
        if self.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=data, env=env,
                             capture_output=True).stdout
        sep = b"\r\n\r\n" if b"\r\n\r\n" in out else b"\n\n"
        head, _, payload = out.partition(sep)
        status, headers = 200, []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = serve

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = ThreadingHTTPServer((addr, int(port)), Git)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
