# SPDX-License-Identifier: MIT
# Learn mode, proposals and denials (issue 29, items 2-4), under the supervisor's squid in
# the fake internet. The allowlist of a first provisioning refuses an unknown host without
# asking DNS while the provider and the detected registry pass; a learn run in which the
# agent reaches two hosts gives a proposal of exactly those two, not in force until
# applied; applied, they pass and a third is still refused; `egress denied` lists the third
# with the line that would allow it, and `egress allow` adds it. Fail closed: a proposal
# with a setting or a bad line is refused whole; learn mode survives a restart of the
# supervisor only within its time and ends by itself; RELOAD is root's.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
INET_DNS_LOG=$E2E_SCRATCH/dns.log
. "$(dirname "$0")/lib-net.sh"

OCSB=$OCSB_BUILD/ocsb
D=/etc/ocsb/egress.d
AG=(as_user "$AGENT")
PX=(-x http://127.0.0.1:3128)
code() { "${AG[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${PX[@]}" "http://$1/"; true; }
status() { "$OCSB" status 2>&1; }
supervisor() { pgrep -u ocsb-agentd -x ocsb-agentd | head -n 1; }
proxy_up() { status | grep -Eq '^ +state +running' && [ "$(code registry.npmjs.org)" = 200 ]; }
ctl_raw() { # USER PAYLOAD: one request on the control socket as USER, the answer's first line
	as_user "$1" python3 -c 'import socket, struct, sys
s = socket.socket(socket.AF_UNIX); s.connect("/run/ocsb/agentd.sock")
p = sys.argv[1].encode() + b"\n"
try: s.sendall(struct.pack(">I", len(p)) + p)
except OSError: pass
n = struct.unpack(">I", s.recv(4))[0]; print(s.recv(n).decode().splitlines()[0])' "$2"
}

make_project
as_owner touch "$PROJECT/package-lock.json"
fake_internet_up && pass "fake internet up" || fail "fake internet up"
# The registry and the provider, two hosts to learn, a third that stays out.
printf '%s\n' '198.18.1.10	registry.npmjs.org' '198.18.1.12	api.anthropic.com' \
	'198.18.1.11	one.example.com' '198.18.1.13	two.example.org' \
	'198.18.1.11	third.example.net' '198.18.1.12	later.example.net' >>/etc/hosts
check_output "provisioned: a first run writes the allowlist" '^ocsb-provision: [1-9]' provision
fake_opencode
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
WARDEN=$!
wait_for 60 proxy_up && pass "the supervisor's squid serves the agent" ||
	fail "the supervisor's squid serves the agent" "$(status)" "$(tail -n 20 "$E2E_SCRATCH/agentd.log")"

# --- the default
check_output "status: policy allowlist, no learn mode" '^ +egress-policy +allowlist$' status
no_line() { ! grep -Eq -- "^ +$1 " <<<"$(status)"; } # KEY: status has no such line
check "status: no learn line" no_line egress-learn
check_output "agent: the detected registry passes" '^200$' code registry.npmjs.org
check_output "agent: the provider passes" '^200$' code api.anthropic.com
check_output "agent: an unknown host is refused" '^403$' code "unknown-$$.example.net"
check_fails "and the resolver was not asked for it" inet_dns_asked "unknown-$$.example.net"
check_output "agent: one.example.com is refused before learning" '^403$' code one.example.com

# --- who may start it
check_fails_output "the owner cannot start learn mode (root's)" "sudo ocsb egress learn start" \
	as_owner "$OCSB" egress learn start
check_output "the owner's RELOAD on the control socket is refused" "^OCSB/1 ERR RELOAD is root.s" \
	ctl_raw "$OWNER" "OCSB/1 RELOAD"
check_output "the agent is not served at all" "^OCSB/1 ERR not allowed" ctl_raw "$AGENT" "OCSB/1 RELOAD"
check_output "root's PING is served (control)" "^OCSB/1 OK" ctl_raw root "OCSB/1 PING"

# --- a learn run
check_output "learn start: on, and in force" '^in force: ' "$OCSB" egress learn start --minutes 30
check_output "the learn line is in egress.d" '^learn [0-9T:Z-]+ [0-9T:Z-]+$' cat "$D/ocsb-learn.conf"
check_output "status: learning, with the time left" '^ +egress-learn +on until .*min left' status
check_fails_output "a second start is refused while on" "learn mode is on until" \
	"$OCSB" egress learn start
check_output "learning: the agent reaches one.example.com" '^200$' code one.example.com
check_output "learning: and two.example.org" '^200$' code two.example.org
check_output "learning: the registry as before (already allowed)" '^200$' code registry.npmjs.org
check_output "learning: the metadata service stays refused" '^403$' code 169.254.169.254
check_output "learning: localhost stays refused" '^403$' code localhost
code "resolved-$$.example.net" >/dev/null
check "learning resolves names: the resolver's log sees one (the control of 'not asked' above)" \
	inet_dns_asked "resolved-$$.example.net"
check_output "the log names the step" 'ALLOW .*one\.example\.com:80 .*\[learn\]' "$OCSB" egress logs

# The supervisor killed: its successor reads the learn line and is still within the time.
old=$(supervisor)
kill -KILL "$old"
new_one() { s=$(supervisor) && [ -n "$s" ] && [ "$s" != "$old" ] && proxy_up; }
wait_for 30 new_one && pass "a new supervisor after SIGKILL" || fail "a new supervisor after SIGKILL" "$(status)"
check_output "after the restart, still learning (within its time)" '^ +egress-learn +on until' status
check_output "and two.example.org still passes" '^200$' code two.example.org

out=$("$OCSB" egress learn stop 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
[ $rc -eq 0 ] && pass "learn stop" || fail "learn stop" "$out"
PROP=$(ls "$D"/learned-*.conf 2>/dev/null | head -n 1)
check "a proposal in egress.d" test -n "$PROP"
check_output "it says proposal" '^proposal$' cat "$PROP"
check_output "exactly two allow lines" '^2$' grep -c '^allow ' "$PROP"
check_output "one.example.com, with its count and first use" \
	'^allow one\.example\.com  # [0-9]+ requests? \(GET port 80\), first 20[0-9-]+T' cat "$PROP"
check_output "two.example.org" '^allow two\.example\.org ' cat "$PROP"
check_output "grouped by registrable domain" '^# example\.org: 1 host, ' cat "$PROP"
check_fails "not the registry (already allowed)" grep -q 'registry' "$PROP"
check_fails "not the metadata service (refused)" grep -q '169\.254' "$PROP"
check "the learn line is gone" test ! -e "$D/ocsb-learn.conf"
check_output "status lists the proposal, not in force" "^ +egress-proposal +$PROP \(not in force" status
check_output "stopped: one.example.com is refused (a proposal is not in force)" '^403$' code one.example.com

# --- apply
bad=$E2E_SCRATCH/bad.conf
printf 'proposal\nallow ok.example.com\npolicy blocklist\n' >"$bad"
check_fails_output "a proposal with a setting is refused whole" 'bad\.conf:3: .*a proposal holds' \
	"$OCSB" egress apply "$bad" --yes
printf 'allow fine.example.com\nallow bad..name\n' >"$E2E_SCRATCH/bad2.conf"
check_fails_output "a bad line refuses the file" 'bad2\.conf:2: ' "$OCSB" egress apply "$E2E_SCRATCH/bad2.conf" --yes
check "neither was copied" test ! -e "$D/bad.conf" -a ! -e "$D/bad2.conf"
printf 'policy blocklist\n' >"$E2E_SCRATCH/open.conf"
check_fails_output "apply names a change of policy, and without a terminal or --yes applies nothing" \
	'! policy blocklist \(now allowlist\)' bash -c "'$OCSB' egress apply '$E2E_SCRATCH/open.conf' </dev/null"
check "so open.conf was not copied" test ! -e "$D/open.conf"
check_output "apply shows the difference" '^  \+ allow one\.example\.com +refused now \(policy-allowlist\)' \
	"$OCSB" egress apply "$PROP" --yes
check_output "and the proposal is in force, its proposal line a comment" '^# applied by ' cat "$PROP"
check_output "applied: one.example.com passes" '^200$' code one.example.com
check_output "applied: two.example.org passes" '^200$' code two.example.org
check_output "applied: third.example.net is still refused" '^403$' code third.example.net
check "status: no proposal waits" no_line egress-proposal

# --- denials
"$OCSB" egress denied 2>&1 | sed 's/^/# /'
check_output "denied lists the third with the line that allows it" \
	'^ +[1-9][0-9]* +20[0-9: -]+ +third\.example\.net:80 +policy-allowlist +allow third\.example\.net$' \
	"$OCSB" egress denied
check_output "and the metadata service with why no rule can" \
	'169\.254\.169\.254:80 +loopback-link-local +none: no rule lifts' "$OCSB" egress denied --since 1h
check_fails_output "the owner is sent to sudo for the log" 'permission denied: run .sudo ocsb egress denied' \
	as_owner "$OCSB" egress denied
check_fails_output "--since takes a duration or a date" "give 30m, 2h, 7d" "$OCSB" egress denied --since soon
check_fails_output "allow: loopback is never allowed" 'never allowed' "$OCSB" egress allow 127.0.0.1
check_output "allow third.example.net" '^in force: ' "$OCSB" egress allow third.example.net
check_output "it is in 50-allowed.conf with its date" '^allow third\.example\.net  # sudo ocsb egress allow, 20' \
	cat "$D/50-allowed.conf"
check_output "third.example.net passes" '^200$' code third.example.net
check_output "denied says it is allowed now" 'third\.example\.net:80 .*\[allowed now: allow ' "$OCSB" egress denied
check_output "a second allow changes nothing" '^third\.example\.net: already allowed' "$OCSB" egress allow third.example.net

# --- learn mode ends by itself, and a restart past its time does not bring it back
printf 'learn %s %s\n' "$(date -u +%FT%TZ)" "$(date -u -d '+4 sec' +%FT%TZ)" >"$D/ocsb-learn.conf"
check_fails_output "egress reload is root's" "sudo ocsb egress reload" as_owner "$OCSB" egress reload
check_output "sudo ocsb egress reload: in force" '^in force: ' "$OCSB" egress reload
learning_in_force() { # the status says learning and squid has those rules
	local s
	s=$(status)
	grep -Eq '^ +egress-learn +on until' <<<"$s" &&
		[ "$(awk '/egress-generation/ {print $2}' <<<"$s")" = "$(awk '/proxy-generation/ {print $2}' <<<"$s")" ] &&
		[ "$(code registry.npmjs.org)" = 200 ]
}
wait_for 10 learning_in_force &&
	pass "a short learn window is on after a reload" || fail "a short learn window is on after a reload" "$(status)"
check_output "within it, later.example.net passes" '^200$' code later.example.net
ended() { # status says ended, squid has the rules and answers
	local s
	s=$(status)
	grep -Eq '^ +egress-learn +ended' <<<"$s" &&
		[ "$(awk '/egress-generation/ {print $2}' <<<"$s")" = "$(awk '/proxy-generation/ {print $2}' <<<"$s")" ] &&
		[ "$(code registry.npmjs.org)" = 200 ]
}
wait_for 15 ended && pass "it ends by itself" || fail "it ends by itself" "$(status)"
check_output "after its end, later.example.net is refused again without any command" '^403$' code later.example.net
old=$(supervisor)
kill -KILL "$old"
wait_for 30 new_one && pass "a new supervisor" || fail "a new supervisor" "$(status)"
check_output "past its time, the restart leaves learn mode off" '^ +egress-learn +ended' status
check_output "and later.example.net is refused" '^403$' code later.example.net
check_output "learn stop writes what the short run learned" '^allow later\.example\.net ' "$OCSB" egress learn stop
check_fails_output "stop again: not on" 'learn mode is not on' "$OCSB" egress learn stop

kill -TERM "$WARDEN"
wait_for 15 bash -c "! kill -0 $WARDEN 2>/dev/null"
