#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Keep-alive clients for tests/bench/inject (run inside the e2e namespace).
#
#   client URL [CAFILE [PROXY-HOST:PORT]]
#       One persistent HTTP/1.1 connection to URL (https:// verified with CAFILE, through
#       the proxy's CONNECT when given), TCP_NODELAY on its socket, opened again only when
#       the server closed it. Reads commands on stdin, answers one line each on stdout:
#         ping    GET /v1/ping (a small answer with Content-Length)
#         stream  POST /v1/messages (an event stream)
#       "ok TOTAL FIRST CONNECTS RETRIES": seconds for the whole request and to the first
#       "event:" line (ping: the whole request), and the connections opened so far;
#       "err CONNECTS TEXT" when the request failed twice.
#
#   drive --runs N --conns FILE --agent USER --ca CAFILE --route URL --direct URL [--proxy H:P]
#       Starts the clients (route and proxy as USER, direct as the caller), runs N pings and
#       N streams on each, interleaved, and prints "# ..." figures: p50/p99 of each, client
#       connections opened, upstream connections per 20 route requests (the provider's
#       FILE, one line per TLS connection, less the direct and proxy clients' own), and the
#       acceptance targets met or not. Exit 1 only when the clients do not work.
import argparse, http.client, os, socket, ssl, subprocess, sys, time

MSG = b'{"model":"claude-3-5-haiku-20241022","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
KEY = {"x-api-key": "ocsb-injected"}  # the route replaces it; the provider ignores it


class Counting:
    connects = 0

    def connect(self):
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Counting.connects += 1


class HTTP(Counting, http.client.HTTPConnection):
    pass


class HTTPS(Counting, http.client.HTTPSConnection):
    pass


def connection(url, ca, proxy):
    scheme, _, hostport = url.partition("://")
    host, _, port = hostport.rstrip("/").partition(":")
    if scheme == "http":
        return HTTP(host, int(port or 80), timeout=30)
    ctx = ssl.create_default_context(cafile=ca)
    if proxy:
        ph, _, pp = proxy.partition(":")
        c = HTTPS(ph, int(pp), timeout=30, context=ctx)
        c.set_tunnel(host, int(port or 443))
        return c
    return HTTPS(host, int(port or 443), timeout=30, context=ctx)


def once(c, what, t0):
    """Times from t0: a retry's time counts from the first attempt (the caller waited)."""
    if what == "ping":
        c.request("GET", "/v1/ping", headers=KEY)
        r = c.getresponse()
        body = r.read()
        t = time.perf_counter() - t0
        if r.status != 200 or b"pong" not in body:
            raise ValueError("ping: %d %r" % (r.status, body[:80]))
        return t, t
    c.request("POST", "/v1/messages", body=MSG,
              headers=dict(KEY, **{"content-type": "application/json", "anthropic-version": "2023-06-01"}))
    r = c.getresponse()
    first, last = None, b""
    while True:
        line = r.readline()
        if not line:
            break
        if first is None and line.startswith(b"event:"):
            first = time.perf_counter() - t0
        if line.strip():
            last = line
    r.read()
    t = time.perf_counter() - t0
    if r.status != 200 or first is None or b"message_stop" not in last:
        raise ValueError("stream: %d, first event %s, last line %r" % (r.status, first, last[:80]))
    return t, first


def client(argv):
    c = connection(argv[0], argv[1] if len(argv) > 1 else None, argv[2] if len(argv) > 2 else None)
    retries = 0
    for cmd in sys.stdin:
        cmd = cmd.strip()
        t0 = time.perf_counter()
        for attempt in (0, 1):
            try:
                total, first = once(c, cmd, t0)
                print("ok %.6f %.6f %d %d" % (total, first, Counting.connects, retries), flush=True)
                break
            except (http.client.HTTPException, OSError, ValueError) as e:
                # A kept-alive connection the server closed meanwhile: open another, once.
                c.close()
                if attempt:
                    print("err %d %s" % (Counting.connects, str(e).replace("\n", " ")), flush=True)
                else:
                    retries += 1


def pct(v, q):
    """The median for 0.5, else the value at rank int(n * q) (as the other benches)."""
    v = sorted(v)
    return v[(len(v) + 1) // 2 - 1] if q == 0.5 else v[max(int(len(v) * q), 1) - 1]


def lines(path):
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


def drive(argv):
    ap = argparse.ArgumentParser(prog="inject_keepalive.py drive")
    for a in ("--runs", "--conns", "--agent", "--ca", "--route", "--direct"):
        ap.add_argument(a, required=True)
    ap.add_argument("--proxy")
    o = ap.parse_args(argv)
    runs = int(o.runs)
    me = [sys.executable, os.path.abspath(__file__), "client"]
    agent = ["setpriv", "--reuid=" + o.agent, "--regid=" + o.agent, "--init-groups", "--reset-env"]
    cmds = {"route": agent + me + [o.route], "direct": me + [o.direct, o.ca]}
    if o.proxy:
        cmds["proxy"] = agent + me + [o.direct, o.ca, o.proxy]
    procs = {n: subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                 bufsize=1, cwd="/") for n, c in cmds.items()}
    last = {n: [0, 0] for n in cmds}  # connections opened, retries: as last reported

    def ask(name, what):
        p = procs[name]
        p.stdin.write(what + "\n")
        p.stdin.flush()
        f = p.stdout.readline().split(" ", 4)
        if f[0] == "ok":
            last[name] = [int(f[3]), int(f[4])]
            return float(f[1]), float(f[2])
        if f[0] == "err":
            last[name][0] = int(f[1])
        raise RuntimeError("%s %s: %s" % (name, what, " ".join(f).strip() or "the client died"))

    try:
        for _ in range(3):  # warm-up: connections opened, code paths run once
            for n in cmds:
                ask(n, "ping")
                ask(n, "stream")
    except RuntimeError as e:
        print("# warm-up failed: %s" % e)
        return 1
    start = {n: list(v) for n, v in last.items()}
    res = {(n, w): [] for n in cmds for w in ("ping", "stream")}
    errors = []
    blocks, route_reqs = [], 0
    mark_file, mark_other = lines(o.conns), sum(last[n][0] for n in cmds if n != "route")
    names = list(cmds)
    for i in range(runs):
        for what in ("ping", "stream"):
            for n in names if i % 2 == 0 else names[::-1]:
                try:
                    res[(n, what)].append(ask(n, what))
                except RuntimeError as e:
                    errors.append(str(e))
                if n == "route":
                    route_reqs += 1
                    if route_reqs % 20 == 0:
                        # Upstream connections of these 20: the provider's new lines less the
                        # ones the direct and proxy clients opened meanwhile.
                        f, other = lines(o.conns), sum(last[x][0] for x in cmds if x != "route")
                        blocks.append((f - mark_file) - (other - mark_other))
                        mark_file, mark_other = f, other
    for p in procs.values():
        p.stdin.close()
        p.wait()

    def ms(x):
        return "%.2f" % (x * 1000)

    def fig(n, what, col):
        v = [r[col] for r in res[(n, what)]]
        return "%s p50 %s ms, p99 %s ms" % (n, ms(pct(v, 0.5)), ms(pct(v, 0.99))) if v else n + " none"

    def p50(n, what, col):
        v = [r[col] for r in res[(n, what)]]
        return pct(v, 0.5) if v else float("nan")

    print("# %d pings and %d streams per path, interleaved (route and proxy as the agent, direct as root)" % (runs, runs))
    print("# ping (a small answer, Content-Length), whole request: " + "; ".join(fig(n, "ping", 0) for n in cmds))
    print("# stream, first event line: " + "; ".join(fig(n, "stream", 1) for n in cmds))
    print("# stream, whole (the provider paces 6 events 20 ms apart): " + "; ".join(fig(n, "stream", 0) for n in cmds))
    print("# client connections opened for %d requests: %s (keep-alive: 0 after the warm-up)" % (
        2 * runs, ", ".join("%s %d (retries %d)" % (n, last[n][0] - start[n][0], last[n][1] - start[n][1]) for n in cmds)))
    up = sum(blocks)
    per20 = up / len(blocks) if blocks else float("nan")
    print("# upstream TLS connections for %d route requests: %d (%.2f per 20; fewest %s, most %s in a block of 20)" % (
        20 * len(blocks), up, per20, min(blocks) if blocks else "-", max(blocks) if blocks else "-"))
    if errors:
        print("# %d failed requests, first: %s" % (len(errors), errors[0]))

    def target(text, value, goal, ok):
        print("# target: %s: %s (target %s): %s" % (text, value, goal, "met" if ok else "not met"))

    added = p50("route", "ping", 0) - p50("direct", "ping", 0)
    target("p50 added by the route (ping, route - direct)", "%+.2f ms" % (added * 1000), "<= 0.5 ms", added <= 0.0005)
    target("upstream connections per 20 route requests", "%.2f" % per20, "<= 1", per20 <= 1)
    first = p50("route", "stream", 1) - p50("direct", "stream", 1)
    target("first streamed event, p50 route - direct", "%+.2f ms" % (first * 1000), "<= +1 ms", first <= 0.001)
    if "proxy" in cmds:
        print("# (proxy path) ping p50 route - proxy: %+.2f ms; first event p50 route - proxy: %+.2f ms" % (
            (p50("route", "ping", 0) - p50("proxy", "ping", 0)) * 1000,
            (p50("route", "stream", 1) - p50("proxy", "stream", 1)) * 1000))
    return 1 if len(errors) > runs else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        client(sys.argv[2:])
    elif len(sys.argv) > 1 and sys.argv[1] == "drive":
        sys.exit(drive(sys.argv[2:]))
    else:
        sys.exit("usage: inject_keepalive.py client URL [CAFILE [PROXY]] | drive ...")
