#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# secrets-push.py MODE NAME=VALUE...: a SECRET-PUT built independently of ocsb (Python +
# libsodium through ctypes), for t-85-secrets.sh. MODE "good" sends the sealed set as is,
# "tamper" flips one bit of the sealed box first. Prints agentd's answer (or the error).
import base64
import ctypes
import socket
import struct
import sys

sodium = ctypes.CDLL("libsodium.so.23")
assert sodium.sodium_init() >= 0

mode = sys.argv[1]
entries = sorted(a.split("=", 1) for a in sys.argv[2:])
plain = b"OCSBSET1" + struct.pack(">H", len(entries))
for name, value in entries:
    n, v = name.encode(), value.encode()
    plain += b"\x00" + bytes([len(n)]) + n + struct.pack(">H", len(v)) + v

line = open("/etc/ocsb/agentd-secrets.pub").read().split()
pk = base64.b64decode(line[1])
sealed = ctypes.create_string_buffer(len(plain) + 48)
assert sodium.crypto_box_seal(sealed, plain, ctypes.c_ulonglong(len(plain)), pk) == 0
box = bytearray(sealed.raw)
if mode == "tamper":
    box[len(box) // 2] ^= 0x01
payload = b"OCSB/1 SECRET-PUT\nsealed " + base64.b64encode(bytes(box)) + b"\n"

s = socket.socket(socket.AF_UNIX)
s.settimeout(20)
try:
    s.connect("/run/ocsb/agentd.sock")
    try:
        s.sendall(struct.pack(">I", len(payload)) + payload)
    except OSError:
        pass  # a refused peer gets its answer and the door before we finish
    hdr = s.recv(4)
    n = struct.unpack(">I", hdr)[0]
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    print(data.decode(errors="replace"), end="")
    sys.exit(0 if data.startswith(b"OCSB/1 OK") else 1)
except Exception as e:
    print("error:", e)
    sys.exit(1)
