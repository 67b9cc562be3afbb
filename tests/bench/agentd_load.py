#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Load for tests/bench/agentd (run as root inside the e2e namespace):
#   load SOCK MIRDIR SECONDS   50 control clients (25 slow: a request byte by byte with
#                              20 ms pauses; 25 large: a 45 KB SECRET-PUT or LOGS 10000),
#                              and every file of MIRDIR rewritten every second (each
#                              mirror refresh reads and writes all of them again).
#   probe TRIALS               netlock restore latency (the probe runs SCHED_FIFO): from the kernel event that takes
#                              inet ocsb away (nft flush ruleset) to the commit that brings
#                              it back, as seen on an nftables event socket. Prints one
#                              figure (ms) per trial, "timeout" when none came within 10 s.
import os, selectors, socket, struct, subprocess, sys, time

def frame(payload):
    return struct.pack(">I", len(payload)) + payload

SLOW = frame(b"OCSB/1 STATUS\n")
PUT = frame(b"OCSB/1 SECRET-PUT\nsealed " + b"A" * 45000 + b"\n")
LOGS = frame(b"OCSB/1 LOGS 10000\n")

class Client:
    def __init__(self, i):
        self.i, self.sock, self.next = i, None, 0.0

def load(path, mirdir, seconds):
    sel = selectors.DefaultSelector()
    clients = [Client(i) for i in range(50)]
    files = [os.path.join(mirdir, f) for f in os.listdir(mirdir)]
    end = time.monotonic() + seconds
    next_touch = time.monotonic()
    gen = 0
    served = 0

    def start(c):
        c.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.sock.setblocking(False)
        try:
            c.sock.connect(path)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            c.sock.close(); c.sock = None; c.next = time.monotonic() + 0.1; return
        c.data = SLOW if c.i < 25 else (PUT if c.i % 2 else LOGS)
        c.sent = 0
        c.next = time.monotonic()
        sel.register(c.sock, selectors.EVENT_READ, c)

    def stop(c):
        sel.unregister(c.sock); c.sock.close(); c.sock = None; c.next = time.monotonic() + 0.02

    while time.monotonic() < end:
        now = time.monotonic()
        for c in clients:
            if c.sock is None and now >= c.next:
                start(c)
            elif c.sock is not None and c.sent < len(c.data) and now >= c.next:
                n = 1 if c.i < 25 else len(c.data) - c.sent
                try:
                    c.sent += c.sock.send(c.data[c.sent:c.sent + n])
                except BlockingIOError:
                    pass
                except OSError:
                    stop(c); continue
                if c.i < 25:
                    c.next = now + 0.02
        if now >= next_touch:
            gen += 1
            for f in files:
                with open(f, "w") as fh:
                    fh.write("bench file, generation %d\n" % gen)
            next_touch = time.monotonic() + 1
        for key, _ in sel.select(0.005):
            c = key.data
            try:
                got = c.sock.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                got = b""
            if not got:
                stop(c)
            else:
                served += 1
    print("# load: %d reads of replies" % served)

NFT = 10 << 8
NEWTABLE, DELTABLE, NEWGEN = 0, 2, 15

def events(nl, deadline):
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        nl.settimeout(left)
        try:
            data = nl.recv(1 << 20)
        except socket.timeout:
            return
        t = time.monotonic()
        off = 0
        while off + 16 <= len(data):
            ln, typ = struct.unpack_from("=IH", data, off)
            name = None
            a = off + 20
            while a + 4 <= off + ln:
                alen, atyp = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if atyp & 0x7fff == 1:
                    name = data[a + 4:a + alen].rstrip(b"\0")
                a += (alen + 3) & ~3
            yield t, typ - NFT if typ >> 8 == 10 else -1, name
            off += (ln + 3) & ~3

def probe(trials):
    # The probe's own wake-up must not count: it runs SCHED_FIFO (its `nft flush` child at
    # the normal priority), so it reads each event when the kernel sends it.
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(50))
    except (AttributeError, OSError) as e:
        print("# probe: cannot run SCHED_FIFO (%s): its own wake-up counts" % e, file=sys.stderr)
    nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 12)
    nl.bind((0, 0))
    nl.setsockopt(270, 1, 7)  # SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, NFNLGRP_NFTABLES
    nl.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    for _ in range(trials):
        nl.setblocking(False)
        try:
            while nl.recv(1 << 20):
                pass
        except OSError:
            pass
        nl.setblocking(True)
        p = subprocess.Popen(["nft", "flush", "ruleset"])
        gone = back = None
        for t, typ, name in events(nl, time.monotonic() + 10):
            if gone is None and typ == DELTABLE and name == b"ocsb":
                gone = t
            elif gone is not None and typ == NEWTABLE and name == b"ocsb":
                back = True
            elif back and typ == NEWGEN:
                back = t
                break
        p.wait()
        if gone is None or not isinstance(back, float):
            print("timeout", flush=True)
        else:
            print("%.3f" % ((back - gone) * 1000), flush=True)
        time.sleep(0.05)

if sys.argv[1] == "load":
    load(sys.argv[2], sys.argv[3], float(sys.argv[4]))
else:
    probe(int(sys.argv[2]))
