# SPDX-License-Identifier: MIT
# Programs ocsb-provision runs as someone else (git as the agent) are not in the session of
# the terminal that ran it (issue 14, the CVE-2017-5226 class): a session of their own, no
# controlling terminal, no terminal among their descriptors, so nothing they run can push
# input into root's terminal (TIOCSTI: the unit tests test_spawn/test_priv try it). And a
# drop that does not hold (capabilities kept across setresuid) stops them before exec.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

make_project
check_output "fresh provisioning applies changes" '^ocsb-provision: [1-9][0-9]* changes$' provision

# in_pty OUT PIDFILE cmd...: run cmd in a new session whose controlling terminal (and
# stdin, stdout, stderr) is a fresh pty, as in a terminal window; its pid in PIDFILE,
# everything it shows in OUT, its exit status as ours.
in_pty() {
	python3 - "$@" <<'PY'
import os, pty, sys
out, pidfile, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
with open(pidfile, "w") as f:
    f.write("%d\n" % pid)
with open(out, "wb") as o:
    while True:
        try:
            b = os.read(fd, 4096)
        except OSError:
            break
        if not b:
            break
        o.write(b)
        o.flush()
st = os.waitpid(pid, 0)[1]
sys.exit(os.waitstatus_to_exitcode(st))
PY
}

# stat_field PID N: field N of /proc/PID/stat (3 = state, 6 = session, 7 = tty_nr).
stat_field() { sed 's/^.*) //' "/proc/$1/stat" | cut -d' ' -f$(($2 - 2)); }

# The agent makes the next provisioning's git (run as the agent in its clone) wait: the
# clone's config includes a FIFO of the agent's, and git blocks opening it.
HOLD=/home/$AGENT/hold.fifo
check "the agent plants a FIFO its git waits on" as_user "$AGENT" sh -c \
	"mkfifo '$HOLD' && git -C '/home/$AGENT/shop' config include.path '$HOLD'"

in_pty "$E2E_SCRATCH/prov-pty.out" "$E2E_SCRATCH/prov.pid" "$OCSB_BUILD/ocsb-provision" \
	--owner "$OWNER" --project "$PROJECT" &
PTY_JOB=$!
git_pid=
for _ in $(seq 100); do
	prov_pid=$(cat "$E2E_SCRATCH/prov.pid" 2>/dev/null)
	if [ -n "$prov_pid" ]; then
		git_pid=$(pgrep -u "$AGENT" -P "$prov_pid" -x git | head -n1)
		[ -n "$git_pid" ] && [ "$(stat_field "$git_pid" 3)" = S ] && break
	fi
	sleep 0.1
done
if [ -z "$git_pid" ]; then
	fail "provisioning ran git as the agent (waiting on the FIFO)" \
		"$(cat "$E2E_SCRATCH/prov-pty.out" 2>/dev/null)" "$(ps -ef)"
else
	pass "provisioning ran git as the agent (pid $git_pid, waiting on the FIFO)"
	prov_sid=$(stat_field "$prov_pid" 6)
	git_sid=$(stat_field "$git_pid" 6)
	check_output "positive control: ocsb-provision's controlling terminal is the pty" \
		'^/dev/pts/[0-9]+ [1-9][0-9]*$' \
		sh -c "echo \$(readlink /proc/$prov_pid/fd/0) $(stat_field "$prov_pid" 7)"
	check "the agent's git is not in provisioning's session ($git_sid vs $prov_sid)" \
		test "$git_sid" != "$prov_sid"
	check "it leads a session of its own" test "$git_sid" = "$git_pid"
	check_output "it has no controlling terminal (tty_nr 0)" '^0$' stat_field "$git_pid" 7
	check_fails "none of its stdin, stdout, stderr is a terminal" \
		sh -c "readlink /proc/$git_pid/fd/0 /proc/$git_pid/fd/1 /proc/$git_pid/fd/2 | grep -E '^/dev/(pts/|tty)'"
	check "positive control: the same readlink sees provisioning's terminal" \
		sh -c "readlink /proc/$prov_pid/fd/0 /proc/$prov_pid/fd/1 /proc/$prov_pid/fd/2 | grep -E '^/dev/pts/'"
	check_output "its uid and gids are the agent's alone" \
		"^Uid:\s+($(id -u "$AGENT")\s+){3}$(id -u "$AGENT") Gid:\s+($(id -g "$AGENT")\s+){3}$(id -g "$AGENT") Groups:\s*$(id -g "$AGENT")\s*$" \
		sh -c "grep -E '^(Uid|Gid|Groups):' /proc/$git_pid/status | paste -sd' '"
	check_output "no_new_privs is set" '^NoNewPrivs:\s+1$' grep NoNewPrivs "/proc/$git_pid/status"
fi
# The include goes (--file: the FIFO is not read), the waiting git gets an empty one and
# goes on, and provisioning ends as usual.
as_user "$AGENT" git config --file "/home/$AGENT/shop/.git/config" --unset include.path
timeout 5 sh -c "echo >'$HOLD'"
check "provisioning in the terminal finishes, exit 0" wait "$PTY_JOB"
check_output "and reports its changes" 'ocsb-provision: [0-9]+ changes' cat "$E2E_SCRATCH/prov-pty.out"
rm -f "$HOLD"

# Fault injection: with SECBIT_NO_SETUID_FIXUP capabilities survive setresuid, so the
# dropped child could take uid/gid 0 back. The check after the drop must refuse to run.
check_fails_output "a drop that does not hold is refused before git runs" \
	'dropped to uid [0-9]+ gid [0-9]+, but setgid\(0\) still works: the drop is not permanent' \
	setpriv --securebits +no_setuid_fixup "$OCSB_BUILD/ocsb-provision" --owner "$OWNER" \
	--project "$PROJECT"
check_output "positive control: the same run without the fault succeeds" \
	'^ocsb-provision: 0 changes$' provision
