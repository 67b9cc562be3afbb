# SPDX-License-Identifier: MIT
# Runs ocsb-inject by hand, as its account, the way ocsb-agentd does (t-88): binds the route
# listeners 127.0.0.1:18400+i as root, hands them over (SCM_RIGHTS), then the routes, the
# agent's uid and the test CA on the hand-over socket (fd 4 in the injector). Prints the
# injector's lines on stdout ("ready\tN" first); with --no-read it stops reading them after
# "ready" (an ocsb-agentd that stopped reading); with --second, a second hand-over follows
# the first's "ready", each key's "sk-" made "sk-new-" (a push of new keys). Ends with the
# injector (SIGTERM kills both).
# Usage: inject-run.py BIN PEER-UID CA-FILE [--no-read] [--second] NAME:HOST:PREFIX:HEADER:TEMPLATE:KEY...
import os, pwd, signal, socket, sys

bin_, peer, ca = sys.argv[1], int(sys.argv[2]), sys.argv[3]
args = sys.argv[4:]
no_read = "--no-read" in args
second = "--second" in args
routes = [a.split(":", 5) for a in args if a not in ("--no-read", "--second")]
lfds = []
for i in range(len(routes)):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 18400 + i))
    s.listen(64)
    lfds.append(s)
mine, theirs = socket.socketpair()
pw = pwd.getpwnam("ocsb-inject")
pid = os.fork()
if pid == 0:
    os.dup2(theirs.fileno(), 4)
    os.setgroups([])
    os.setgid(pw.pw_gid)
    os.setuid(pw.pw_uid)
    os.execv(bin_, [bin_, "--fd", "4"])
theirs.close()
mask = (1 << len(routes)) - 1
socket.send_fds(mine, [b"ocsb-listen %04x\n" % mask], [s.fileno() for s in lfds])
def handover(new):
    text = b""
    for i, (name, host, prefix, hname, tmpl, key) in enumerate(routes):
        if new:
            key = key.replace("sk-", "sk-new-", 1)
        text += ("route\t%s\t%d\t%s\t443\t%s\t%s\t%s\t%s\n" % (name, 18400 + i, host, prefix, hname, tmpl, key)).encode()
    pem = open(ca, "rb").read()
    text += b"peer\t%d\nca\t%d\n" % (peer, len(pem)) + pem + b"end\n"
    mine.sendall(b"ocsb-inject %d\n" % len(text) + text)
handover(False)
signal.signal(signal.SIGTERM, lambda *a: (os.kill(pid, signal.SIGTERM), os._exit(0)))
f = mine.makefile("rb")
for line in f:
    sys.stdout.write(line.decode(errors="replace"))
    sys.stdout.flush()
    if no_read and line.startswith(b"ready"):
        break
    if second and line.startswith(b"ready"):
        second = False
        handover(True)
signal.pause() if no_read else os.waitpid(pid, 0)
