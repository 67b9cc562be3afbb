#!/bin/bash
# SPDX-License-Identifier: MIT
#
# run-here.sh: the escape battery on this machine, outside the e2e harness: a real machine
# or a Debian guest where ocsb is installed and provisioned, systemd runs ocsb-agentd.service,
# and nothing else is expected (a guest whose only network device is lo is fine: the fake
# internet is made here, on veth in a network namespace).
#
#   sudo tests/escape/run-here.sh [--owner NAME] [--project PATH] [--agent NAME] [--dir DIR] [--keep]
#
# Defaults: owner, project (the first) and agent from /etc/ocsb/ocsb.conf (agent ai-dev when
# the file names none); DIR /run/ocsb-escape (not /tmp: the agent's /tmp is private); --keep
# leaves DIR (verdicts, controls, logs) in place, else it is removed at the end.
# Environment: ESC_AGENTD_WAIT (seconds to wait for the battery under agentd, default 900),
# ESC_SSH_TIMEOUT (the ssh place, default 600), PROBE_TIMEOUT (per probe, default 20),
# ESC_ONLY (a comma-separated subset of probe ids), OCSB and OCSB_PROVISION (the programs,
# default: found in PATH), ESC_WARDEN (see below); ESC_SYSTEMCTL and ESC_DROPIN_DIR are test
# seams only (see below).
# The agentd place needs the warden's test hook, which only a test build has (make
# TEST_HOOKS=1, common/testhook.h): the package's ocsb-warden, a release build, has none.
# Then ESC_WARDEN names a test build's ocsb-warden (absolute, its ocsb-agentd and
# ocsb-inject beside it, as in build/), which the unit runs instead while the drop-in is
# there (ExecStart=); without it, the ocsb-warden found in PATH must be a test build.
#
# Needs: root; systemd as PID 1 with ocsb-agentd.service; the provisioned agent; bash,
# coreutils, iproute2, nftables (the netlock under test), openssh (client and sshd),
# python3, curl, util-linux (setpriv, unshare, setsid), procps, dbus-daemon, git.
#
# What it does, in order: world.sh up (canaries, the owner's processes, the fake internet,
# /etc/resolv.conf and /etc/hosts pointed at it); /etc/ocsb/egress.conf replaced by the
# battery's rules (allow allowed.test, block blocked.test) and ocsb-provision re-run (it
# also authorizes an owner key the world had to make); place "agentd": a runtime drop-in
# /run/systemd/system/ocsb-agentd.service.d/ocsb-escape.conf (Environment=OCSB_TEST_HOOKS=1,
# and ExecStart=ESC_WARDEN when given) and the hook /run/ocsb/test-wrap-opencode, `systemctl daemon-reload && systemctl restart
# ocsb-agentd`, the battery's lines read from /var/log/ocsb/*.log, then hook and drop-in
# removed; ocsb-provision again (puts back what m-symlink swapped); place "ssh": the owner's
# `ssh -A ai-dev@localhost`; the judges' evidence (the agent's next login, the owner's `ocsb
# sync pull`); the positive controls; `systemctl stop ocsb-agentd` (every process of the
# agent must die: r-linger), the judges; then, whatever happened before: egress.conf put
# back, ocsb-provision, world.sh down, `systemctl daemon-reload`, `systemctl start
# ocsb-agentd`.
#
# Output (stdout): "# run-here: ..." progress lines; TAP lines "ok - ..." / "not ok - ..."
# (detail lines "  # ...") for the steps and one per probe and place (report.sh); then
#   # escape battery: N probes x P places: P passed, F failed, S skipped (T s)
# Exit status: 0 when nothing is "not ok", 1 when something is, 2 when it cannot run here
# (not root, no systemd, not provisioned, a tool missing, bad arguments).
# Duration: about 2.5 min on a 2-core host (each place ~1 min); several times that under
# software emulation.
# Things it cannot do in a guest are skipped with the reason (k-secrets-home: no test
# secret is pushed, the owner's store is left alone; IPv6 probes when IPv6 is off).

set -u
export LC_ALL=C
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
UNIT=ocsb-agentd.service
DROPIN_DIR=${ESC_DROPIN_DIR:-/run/systemd/system/ocsb-agentd.service.d}
DROPIN=$DROPIN_DIR/ocsb-escape.conf
HOOK=/run/ocsb/test-wrap-opencode
T0=$SECONDS
FAILED=0

say() { echo "# run-here: $*"; }
. "$HERE/tap.sh"
cannot() { echo "run-here.sh: $*" >&2; exit 2; }
# conf_value KEYWORD: its first value in /etc/ocsb/ocsb.conf, quotes taken off.
conf_value() { awk -v k="$1" '$1 == k { v = $2; if (v ~ /^".*"$/) v = substr(v, 2, length(v) - 2); print v; exit }' /etc/ocsb/ocsb.conf 2>/dev/null; }

OWNER='' PROJECT='' AGENT='' DIR=/run/ocsb-escape KEEP=''
while [ $# -gt 0 ]; do
	case $1 in
	--owner) OWNER=${2:?}; shift 2 ;;
	--project) PROJECT=${2:?}; shift 2 ;;
	--agent) AGENT=${2:?}; shift 2 ;;
	--dir) DIR=${2:?}; shift 2 ;;
	--keep) KEEP=1; shift ;;
	-h | --help) sed -n '3,50p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) cannot "unknown argument $1 (see --help)" ;;
	esac
done
[ "$(id -u)" -eq 0 ] || cannot "run me as root"
# Test seam (tests/e2e/t-98-escape-here.sh): ESC_SYSTEMCTL names a stand-in for systemctl
# on a machine without systemd, ESC_DROPIN_DIR where it reads the drop-in (a directory
# /run/systemd/system would make ocsb-provision believe systemd runs). Never set them on a
# real machine.
SYSTEMCTL=${ESC_SYSTEMCTL:-systemctl}
[ -n "${ESC_SYSTEMCTL:-}" ] || [ -d /run/systemd/system ] || cannot "systemd is not PID 1 here (the e2e suite runs the battery without it: t-95)"
"$SYSTEMCTL" cat "$UNIT" >/dev/null 2>&1 || cannot "no $UNIT"
[ -r /etc/ocsb/ocsb.conf ] || cannot "no /etc/ocsb/ocsb.conf: provision first (ocsb-provision --owner ... --project ...)"
OWNER=${OWNER:-$(conf_value owner)}
PROJECT=${PROJECT:-$(conf_value project)}
AGENT=${AGENT:-$(conf_value agent)}
AGENT=${AGENT:-ai-dev}
[ -n "$OWNER" ] && [ -n "$PROJECT" ] || cannot "owner or project unknown (--owner, --project)"
getent passwd "$AGENT" >/dev/null || cannot "no agent account $AGENT: provision first"
OCSB=${OCSB:-$(command -v ocsb)}
OCSB_PROVISION=${OCSB_PROVISION:-$(command -v ocsb-provision)}
[ -x "$OCSB" ] && [ -x "$OCSB_PROVISION" ] || cannot "ocsb or ocsb-provision not found (set OCSB, OCSB_PROVISION)"
AGENTD=${ESC_WARDEN:-$(command -v ocsb-warden)}
case $AGENTD in /*) ;; *) cannot "ocsb-warden not found (ESC_WARDEN: an absolute path)" ;; esac
grep -aq test-wrap-opencode "$AGENTD" 2>/dev/null ||
	cannot "$AGENTD is a release build, without the test hook the agentd place needs: build a test build (make TEST_HOOKS=1) and set ESC_WARDEN=\$PWD/build/ocsb-warden (it runs the ocsb-agentd beside it)"
for tool in ip nft python3 ssh ssh-keygen ssh-agent ssh-add curl setpriv unshare setsid pgrep git dbus-daemon timeout ipcrm; do
	command -v "$tool" >/dev/null || cannot "missing tool: $tool"
done
[ -e "$DIR/saved/state" ] && cannot "$DIR: a world is up already (tests/escape/world.sh down $DIR)"

provision() { "$OCSB_PROVISION" --owner "$OWNER" --project "$PROJECT"; }
EGRESS_SAVED=
CLEANED=
cleanup() {
	[ -n "$CLEANED" ] && return
	CLEANED=1
	say "cleaning up"
	if declare -F unhook >/dev/null; then unhook; else rm -f "$HOOK" "$DROPIN"; fi
	rmdir "$DROPIN_DIR" 2>/dev/null
	if [ -n "$EGRESS_SAVED" ]; then
		if [ "$EGRESS_SAVED" = absent ]; then rm -f /etc/ocsb/egress.conf; else cp -a "$EGRESS_SAVED" /etc/ocsb/egress.conf; fi
	fi
	bash "$HERE/world.sh" down "$DIR" | sed 's/^/# /'
	if [ -n "$EGRESS_SAVED" ] && ! out=$(provision 2>&1); then
		notok "ocsb-provision after the run (egress rules put back)" "$out"
	fi
	"$SYSTEMCTL" daemon-reload
	"$SYSTEMCTL" restart "$UNIT" || echo "# run-here: systemctl restart $UNIT failed"
	[ -n "$KEEP" ] || rm -rf --one-file-system "$DIR"
	[ "$FAILED" -eq 0 ] || exit 1	# a failed cleanup fails the run
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# ---- the world and the battery's egress rules
say "owner $OWNER, project $PROJECT, agent $AGENT, directory $DIR"
if out=$(bash "$HERE/world.sh" up "$DIR" "$OWNER" "$PROJECT" "$AGENT" 2>&1); then
	ok "world up ($DIR)"
else
	notok "world up ($DIR)" "$out"
	exit 1
fi
mkdir -m 0700 "$DIR/run-here"
if [ -e /etc/ocsb/egress.conf ]; then
	cp -a /etc/ocsb/egress.conf "$DIR/run-here/egress.conf" && EGRESS_SAVED=$DIR/run-here/egress.conf
else
	EGRESS_SAVED=absent
fi
printf '# escape battery (tests/escape/run-here.sh): put back when it ends\nallow allowed.test\nblock blocked.test\n' >/etc/ocsb/egress.conf
if out=$(provision 2>&1); then ok "ocsb-provision with the battery's egress rules"; else notok "ocsb-provision with the battery's egress rules" "$out"; exit 1; fi

# ---- place "agentd": OpenCode's exact conditions, through agentd's test hook
RUN=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
mkdir -p /run/ocsb "$DROPIN_DIR"
cat >"$HOOK" <<EOF
#!/bin/bash
ESC_RUN=$RUN ESC_DIR=$DIR ${ESC_ONLY:+ESC_ONLY=$ESC_ONLY} ${PROBE_TIMEOUT:+PROBE_TIMEOUT=$PROBE_TIMEOUT} bash $DIR/battery.sh run agentd
exec "\$@"
EOF
chmod 0755 "$HOOK"
# systemd mounts /run noexec: then the hook's path gets a bind mount of a copy on a file
# system that may run programs (agentd checks and execs the path).
HOOK_COPY=
if findmnt -no OPTIONS --target "$(dirname "$HOOK")" 2>/dev/null | tr ',' '\n' | grep -qx noexec; then
	HOOK_COPY=$(mktemp /var/tmp/ocsb-escape-hook.XXXXXX)
	install -m 0755 "$HOOK" "$HOOK_COPY" && mount --bind "$HOOK_COPY" "$HOOK" ||
		notok "bind the hook over $(dirname "$HOOK")'s noexec" "$(findmnt --target "$HOOK" 2>&1)"
fi
unhook() {
	if [ -n "${HOOK_COPY:-}" ]; then
		umount "$HOOK" 2>/dev/null
		rm -f "$HOOK_COPY"
		HOOK_COPY=
	fi
	rm -f "$HOOK" "$DROPIN"
}
{
	printf '# tests/escape/run-here.sh, removed when it ends\n[Service]\nEnvironment=OCSB_TEST_HOOKS=1\n'
	[ -z "${ESC_WARDEN:-}" ] || printf 'ExecStart=\nExecStart=%s --foreground\n' "$ESC_WARDEN"
} >"$DROPIN"
say "restarting $UNIT with OCSB_TEST_HOOKS=1${ESC_WARDEN:+ and $ESC_WARDEN} (run $RUN)"
"$SYSTEMCTL" daemon-reload && "$SYSTEMCTL" restart "$UNIT" || notok "systemctl restart $UNIT with the hook" "$("$SYSTEMCTL" status "$UNIT" 2>&1 | tail -n 10)"
battery_lines() { # the agentd run's lines, from its first line to its "done"
	awk -v run=", run $RUN" '
		index($0, "# escape battery at agentd: ") == 1 && index($0, run) { on = 1 }
		on { print }
		on && index($0, "# escape battery at agentd: done" run) == 1 { exit }
	' /var/log/ocsb/*.log 2>/dev/null
}
end=$((SECONDS + ${ESC_AGENTD_WAIT:-900}))
until battery_lines | grep -q '^# escape battery at agentd: done' || [ $SECONDS -ge $end ]; do sleep 2; done
unhook
rmdir "$DROPIN_DIR" 2>/dev/null
"$SYSTEMCTL" daemon-reload
if battery_lines | grep -q '^# escape battery at agentd: done'; then
	ok "battery ran as a child of ocsb-agentd"
	battery_lines | grep $'^V\t' >"$DIR/agentd.out"
else
	notok "battery ran as a child of ocsb-agentd (waited ${ESC_AGENTD_WAIT:-900} s)" \
		"$(tail -n 20 /var/log/ocsb/*.log 2>/dev/null)" "$(journalctl -u "$UNIT" -n 20 --no-pager 2>/dev/null)"
fi

# The agentd place's m-symlink swapped one of the agent's links into the mirror: a
# provisioning run puts it back (and must copy nothing through the swapped one).
out=$(provision 2>&1) || notok "ocsb-provision between the places" "$out"

# ---- place "ssh", the judges' evidence, the controls
say "the ssh place"
if ESC_ONLY=${ESC_ONLY:-} bash "$HERE/world.sh" place-ssh "$DIR"; then
	ok "battery ran in an ssh session of $AGENT"
else
	notok "battery ran in an ssh session of $AGENT" "$(tail -n 20 "$DIR/ssh.raw")"
fi
bash "$HERE/world.sh" evidence "$DIR" "$OCSB"
if [ "$(cat "$DIR/pull.rc")" = 0 ]; then ok "the owner's ocsb sync pull"; else notok "the owner's ocsb sync pull" "$(tail -n 10 "$DIR/pull.out")"; fi
say "positive controls"
ESC_DIR=$DIR bash "$DIR/battery.sh" control >"$DIR/control.out"

# ---- the agent stopped (agentd kills every process of the agent), then the judges
say "stopping $UNIT for the judges"
"$SYSTEMCTL" stop "$UNIT"
for place in agentd ssh; do
	[ -f "$DIR/$place.out" ] || continue
	ids=$(awk -F'\t' '$3 == "judge" { print $2 }' "$DIR/$place.out")
	# shellcheck disable=SC2086
	ESC_DIR=$DIR bash "$DIR/battery.sh" judge "$place" $ids >"$DIR/$place.judged"
done
pkill -KILL -u "$AGENT" -f 'escape-linger-' 2>/dev/null

# ---- the report (then the cleanup: egress rules back, provisioning, world down, agentd)
ESC_SECONDS=$((SECONDS - T0)) bash "$HERE/report.sh" "$DIR" agentd ssh || FAILED=1
exit $FAILED
