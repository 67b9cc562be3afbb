# SPDX-License-Identifier: MIT
# tests/escape/run-here.sh, the escape battery for a real provisioned machine (a Debian guest
# with systemd), run here with a stand-in for systemctl that starts and stops ocsb-agentd by
# hand and honours the runtime drop-in's Environment= lines. A subset of the probes (one or
# more of each kind, every judged one) keeps it short: what is tested is run-here.sh's own
# sequence (world up, egress rules, the agentd hook and drop-in, the ssh place, evidence,
# controls, judges, report) and that it leaves the machine as it found it.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-cg.sh"

SRC=$(cd "$(dirname "$0")/../escape" && pwd)
OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
if [ ! -x "$OC_BIN" ]; then
	skip "run-here.sh" "OpenCode not installed at $OC_BIN (sudo make deps)"
	exit 0
fi

make_project
mkdir -p /etc/ocsb
printf 'allow example.test\n' >/etc/ocsb/egress.conf
check_output "provisioned" '^ocsb-provision: [1-9]' provision || exit 1
# Limits as a machine has them by default (the harness runs without): e-cgroup judges them.
set_limits 2G 4096 100
sum_before=$(sha256sum </etc/ocsb/egress.conf)
resolv_before=$(cat /etc/resolv.conf)

# The stand-in: start, stop, restart ocsb-agentd with the drop-ins' Environment= lines, and
# the program their last ExecStart= names (logged).
FAKE_SYSTEMCTL=$E2E_SCRATCH/systemctl
cat >"$FAKE_SYSTEMCTL" <<FAKE
#!/bin/bash
PIDF=$E2E_SCRATCH/agentd.pid
start() {
	local envs=() f l bin=$OCSB_BUILD/ocsb-warden
	for f in $E2E_SCRATCH/dropin/*.conf; do
		[ -f "\$f" ] || continue
		while IFS= read -r l; do
			case \$l in
			Environment=*) envs+=("\${l#Environment=}") ;;
			ExecStart=?*) bin=\${l#ExecStart=} bin=\${bin%% *}; echo "exec \$bin (drop-in)" >>"$E2E_SCRATCH/systemctl.log" ;;
			esac
		done <"\$f"
	done
	env "\${envs[@]}" setsid "\$bin" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
	echo \$! >"\$PIDF"
	echo "start \${envs[*]}" >>"$E2E_SCRATCH/systemctl.log"
}
stop() {
	local pid
	pid=\$(cat "\$PIDF" 2>/dev/null) || return 0
	kill -TERM "\$pid" 2>/dev/null
	for _ in \$(seq 100); do kill -0 "\$pid" 2>/dev/null || break; sleep 0.1; done
	rm -f "\$PIDF"
	echo stop >>"$E2E_SCRATCH/systemctl.log"
}
case \$1 in
cat | daemon-reload | status) echo "\$*" >>"$E2E_SCRATCH/systemctl.log" ;;
start) start ;;
stop) stop ;;
restart) stop; start ;;
*) exit 1 ;;
esac
FAKE
chmod 0755 "$FAKE_SYSTEMCTL"
"$FAKE_SYSTEMCTL" start

ONLY=f-secret-0600,p-cmdline,id-machine-id,t-tmp,i-abstract,i-agentd-ctl,n-lan,n-v6-local,n-udp,x-lan,x-loopback
ONLY=$ONLY,x-dns-exfil,s-rc,s-environment,s-authkeys,s-agent-fwd,g-hostile,g-refname,m-symlink,k-secrets-home
ONLY=$ONLY,r-linger,e-cgroup
N=$(tr ',' '\n' <<<"$ONLY" | wc -l)
_capture env ESC_SYSTEMCTL="$FAKE_SYSTEMCTL" ESC_DROPIN_DIR="$E2E_SCRATCH/dropin" OCSB="$OCSB_BUILD/ocsb" OCSB_PROVISION="$OCSB_BUILD/ocsb-provision" \
	ESC_WARDEN="$OCSB_BUILD/ocsb-warden" \
	ESC_ONLY="$ONLY" ESC_AGENTD_WAIT=300 bash "$SRC/run-here.sh"
printf '%s\n' "$_out" | grep -E '^(ok|not ok) - escape |^# escape battery'
if [ "$_rc" -eq 0 ] && grep -q "^# escape battery: $N probes x 2 places: [0-9]* passed, 0 failed" <<<"$_out"; then
	pass "run-here.sh: exit 0, $N probes x 2 places, none failed"
else
	fail "run-here.sh: exit 0, $N probes x 2 places, none failed" "exit $_rc" "$(grep -v '^ok - escape' <<<"$_out" | tail -n 40)"
fi
check_output "run-here.sh: the agentd place ran with OCSB_TEST_HOOKS=1 from the drop-in" '^start OCSB_TEST_HOOKS=1$' cat "$E2E_SCRATCH/systemctl.log"
check_output "run-here.sh: the drop-in runs ESC_WARDEN, a test build's ocsb-warden (ExecStart=)" \
	"^exec $OCSB_BUILD/ocsb-warden \\(drop-in\\)\$" cat "$E2E_SCRATCH/systemctl.log"
check_output "run-here.sh: agentd restarted without it at the end" '^start $' bash -c "tail -n 1 '$E2E_SCRATCH/systemctl.log'"
check "run-here.sh: agentd runs at the end" bash -c "kill -0 \$(cat '$E2E_SCRATCH/agentd.pid')"
check_fails "run-here.sh: drop-in removed" test -e "$E2E_SCRATCH/dropin/ocsb-escape.conf"
check_fails "run-here.sh: none of its steps not ok (provisioning runs, cleanup)" grep -q '^not ok' <<<"$_out"
check_fails "run-here.sh: hook removed" test -e /run/ocsb/test-wrap-opencode
check_fails "run-here.sh: its directory removed" test -e /run/ocsb-escape
check_output "run-here.sh: egress.conf put back" "^$sum_before\$" bash -c 'sha256sum </etc/ocsb/egress.conf'
check_output "run-here.sh: resolv.conf put back" "^$resolv_before\$" cat /etc/resolv.conf
check_fails "run-here.sh: no namespace ocsb-esc left" bash -c 'ip netns list | grep -qw ocsb-esc'
check_fails "run-here.sh: no process of the owner left" pgrep -u "$OWNER"
check_output "world.sh down again: nothing left to undo" '^world.sh: no world' \
	bash "$SRC/world.sh" down /run/ocsb-escape
_capture env -u ESC_SYSTEMCTL bash "$SRC/run-here.sh"
if [ "$_rc" -eq 2 ] && grep -q 'systemd is not PID 1' <<<"$_out"; then
	pass "run-here.sh: without systemd it refuses (exit 2)"
else
	fail "run-here.sh: without systemd it refuses (exit 2)" "exit $_rc" "$_out"
fi
"$FAKE_SYSTEMCTL" stop
exit 0
