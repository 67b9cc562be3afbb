# SPDX-License-Identifier: MIT
# Injected secrets (issue 17): the key stays with ocsb-inject, the agent reaches the API
# through a loopback route and finds the key nowhere. A fake provider in the fake internet
# serves TLS with a certificate from a test CA that only the injector trusts (handed over
# by agentd's test hook), streams an Anthropic-style answer and records what it received;
# a git server there (same CA) serves a repository to requests with the right credential.
# Two projects: the second overrides the global Anthropic key with its own. The key
# searches run from an ssh session and, through agentd's test hook, in OpenCode's place.
# Every "not found" has a control: the same search finds an exported secret.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"
. "$(dirname "$0")/lib-inject.sh"

OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
for tool in dbus-run-session gnome-keyring-daemon python3 openssl curl; do
	if ! command -v "$tool" >/dev/null; then
		skip "ocsb secrets --inject" "$tool missing (sudo make test-deps installs it)"
		exit 0
	fi
done
if [ ! -x "$OC_BIN" ]; then
	skip "ocsb secrets --inject" "OpenCode not installed at $OC_BIN (sudo make deps)"
	exit 0
fi
OCSB=$OCSB_BUILD/ocsb
VI="sk-ant-inj-$RANDOM$RANDOM-real"
VI2="sk-ant-inj-$RANDOM$RANDOM-second"
VE="exp-$RANDOM$RANDOM-exported"
VB="bad-$RANDOM$RANDOM-badca"
VC="sk-ant-inj-$RANDOM$RANDOM-cart" # the second project's own key
VG=$(printf 'agent:gt-%s-git' "$RANDOM$RANDOM" | base64) # git's Basic credentials
R=http://127.0.0.1:18400 # ANTHROPIC_API_KEY, the first route (names sort)
RB=http://127.0.0.1:18401 # BADCA_KEY
RG=http://127.0.0.1:18402 # GIT_TOKEN (EXPORTED_KEY is not routed)
RC=http://127.0.0.1:18403 # ANTHROPIC_API_KEY of the project cart: after the first project's
PROJECT2=$OWNER_HOME/code/cart

make_project
as_owner mkdir -p "$PROJECT2" && as_owner git -C "$PROJECT2" init -q
fake_internet_up >/dev/null 2>&1 || fail "fake internet up"
check_output "provisioned (two projects)" '^ocsb-provision: [1-9]' provision --project "$PROJECT2"
check_output "the injector's system account exists" '^ocsb credential injector$' \
	bash -c 'getent passwd ocsb-inject | cut -d: -f5'
check_output "positive control: a second run is clean (the account is ours)" '^ocsb-provision: 0 changes' provision --project "$PROJECT2"

# --- the fake providers: root-only files (the key lands in their records)
P=$E2E_SCRATCH/prov
inject_providers_up "$P" || fail "fake providers up"
check_output "positive control: the provider's TLS verifies with the test CA" 'INJECTED-ANSWER' \
	curl -sS -m 10 --cacert "$P/ca.pem" -d '{}' https://api.anthropic.com/v1/messages
: >"$P/api.rec"
printf 'Basic %s\n' "$VG" >"$P/git.want"
inject_git_up "$P" "$P/git.want" || fail "fake git server up"
# git_root ARGS: root's git with the test CA (and the credential when GIT_AUTH=1), given in
# git's environment, not on a command line the agent could read in /proc
git_root() {
	if [ "${GIT_AUTH:-0}" = 1 ]; then
		GIT_SSL_CAINFO="$P/ca.pem" GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraHeader \
			GIT_CONFIG_VALUE_0="Authorization: Basic $VG" git "$@"
	else
		GIT_SSL_CAINFO="$P/ca.pem" git "$@"
	fi
}
check_output "positive control: the git server serves the repository with the credential" 'INJECTED-GIT-REPO' \
	bash -c "$(declare -f git_root); P=$P; VG=\$(sed 's/^Basic //' $P/git.want); GIT_AUTH=1 git_root clone -q https://git.example/repo.git $P/ctl-clone && cat $P/ctl-clone/README"
check_fails_output "... and refuses it without (401: git asks for a user)" '401|could not read Username' \
	bash -c "$(declare -f git_root); P=$P; git_root clone -q https://git.example/repo.git $P/ctl-clone2 2>&1"
: >"$P/git.rec"

# --- the owner's keyring and the secrets (as in t-85)
start_keyring
sec() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }

check_output "set --inject anthropic" '^stored ANTHROPIC_API_KEY \(global, injected via anthropic\)' \
	sec --global set ANTHROPIC_API_KEY --inject anthropic <<<"$VI"
check_output "set --inject URL --header" '^stored BADCA_KEY \(global, injected via https://badca.test Authorization: Bearer \{\}\)' \
	sec --global set BADCA_KEY --inject https://badca.test --header 'Authorization: Bearer {}' <<<"$VB"
check_output "an exported secret beside them" '^stored EXPORTED_KEY \(global, exported\)' \
	sec --global set EXPORTED_KEY <<<"$VE"
check_output "a generic route for git over HTTPS" '^stored GIT_TOKEN \(global, injected via https://git.example Authorization: Basic \{\}\)' \
	sec --global set GIT_TOKEN --inject https://git.example --header 'Authorization: Basic {}' <<<"$VG"
check_output "the second project's own key for the same provider" '^stored ANTHROPIC_API_KEY \(cart, injected via anthropic\)' \
	sec --project cart set ANTHROPIC_API_KEY --inject anthropic <<<"$VC"
# A store the keyring refuses (test hook: a collection that does not exist) keeps the old
# item: the exported value is still listed, and pushed below (the ssh session's control).
check_fails_output "a failed keyring store is an error" 'keyring: storing' \
	as_owner env OCSB_TEST_HOOKS=1 OCSB_TEST_KEYRING_STORE_FAIL=1 DBUS_SESSION_BUS_ADDRESS="$BUS" \
	XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets --global set EXPORTED_KEY --inject anthropic <<<"other"
check_fails_output "--inject of an unknown provider is refused" 'not a provider' \
	sec --global set OTHER_KEY --inject nosuch <<<x
check_fails_output "--inject over plain http is refused" 'TLS only' \
	sec --global set OTHER_KEY --inject http://badca.test --header 'A: {}' <<<x
check_output "list: injected (route)" '^ANTHROPIC_API_KEY +global +injected \(anthropic\) +never$' sec list
check_output "list: a generic route shows its base URL" '^BADCA_KEY +global +injected \(https://badca.test\)' sec list
check_output "list: exported (kept by the failed store)" '^EXPORTED_KEY +global +exported +never$' sec list
check_output "list: the project's override" '^ANTHROPIC_API_KEY +cart +injected \(anthropic\)' sec list

# --- ocsb doctor: an LLM key that is exported is a WARN, an injected one is not
doc() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" doctor 2>&1; true; }
check_output "doctor: the injected LLM key is fine" '^OK +secrets-exported +no LLM key' doc
printf 'x' | sec --global set OPENAI_API_KEY >/dev/null 2>&1
check_output "doctor: an exported LLM key is a WARN naming it" '^WARN +secrets-exported +LLM key exported .*: OPENAI_API_KEY$' doc
check_output "(removed again)" '^removed OPENAI_API_KEY' sec --global rm OPENAI_API_KEY

# --- agentd, with the test CA handed to the injector
start_agentd() {
	OCSB_TEST_HOOKS=1 OCSB_TEST_INJECT_CA="$P-ca/ca.pem" setsid "$OCSB_BUILD/ocsb-warden" --foreground -v \
		>>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
	AGENTD=$!
}
field() { as_owner "$OCSB" status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" '$1 == k { if (++i == n) { $1 = ""; sub(/^ +/, ""); print; exit } }'; }
oc_pid() { field pid 2; }
running() { [ "$(field state 2)" = running ]; }
env_of() { tr '\0' '\n' <"/proc/$1/environ"; }
inj_pid() { pgrep -u ocsb-inject -x ocsb-inject | head -1; }
start_agentd
wait_for 60 running || fail "OpenCode answers" "$(tail -20 "$E2E_SCRATCH/agentd.log")"
# squat SECONDS: bind (SO_REUSEADDR and SO_REUSEPORT, then listen) every route port
# 127.0.0.1:18400..18415 every 20 ms for SECONDS, as the calling account; then the
# control: the same account binds 127.0.0.1:18416, beside the routes.
SQUAT='import errno, socket, sys, time
end, tries, got, other = time.time() + float(sys.argv[1]), 0, set(), set()
while True:
    for p in range(18400, 18416):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            s.bind(("127.0.0.1", p)); s.listen(1); got.add(p)
        except OSError as e:
            if e.errno != errno.EADDRINUSE: other.add(p)
        s.close(); tries += 1
    if time.time() >= end: break
    time.sleep(0.02)
c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.bind(("127.0.0.1", 18416)); c.listen(1); c.close()
print("squatted %s, other errors %s" % (sorted(got), sorted(other)) if got or other else
      "EADDRINUSE every time (%d tries); control: 18416 bound" % tries)'
check_output "another account cannot bind a route port (before the first push)" \
	'^EADDRINUSE every time \([0-9]+ tries\); control: 18416 bound$' as_owner python3 -c "$SQUAT" 0
check_output "nor the agent" '^EADDRINUSE every time \([0-9]+ tries\); control: 18416 bound$' \
	as_user "$AGENT" python3 -c "$SQUAT" 0
# --- OpenCode's place: agentd's test hook runs inject-probe.sh where OpenCode starts after
# the push (its uid, environment, sandbox, netlock); the values reach it through a FIFO.
T=$E2E_SCRATCH/t86oc
mkdir -m 0755 -p "$T/w" && chown "$AGENT:" "$T/w" && install -m 0755 "$(dirname "$0")/inject-probe.sh" "$T/probe.sh"
mkfifo -m 0600 "$T/w/needles" && chown "$AGENT:" "$T/w/needles"
printf '#!/bin/bash\nbash %s/probe.sh %s/w\nexec "$@"\n' "$T" "$T" >/run/ocsb/test-wrap-opencode
chmod 0755 /run/ocsb/test-wrap-opencode
(printf 'VI=%s\nVB=%s\nVG=%s\nVC=%s\nVE=%s\n' "$VI" "$VB" "$VG" "$VC" "$VE" >"$T/w/needles") &
NEEDLES=$!
check_output "push" '^pushed 5 secrets to ocsb-agentd$' sec push
oc_lines() { grep -h $'^T86\t' /var/log/ocsb/*.log 2>/dev/null; }
check "the searches ran in OpenCode's place" wait_for 180 bash -c "grep -hq \$'^T86\tdone' /var/log/ocsb/*.log"
rm -f /run/ocsb/test-wrap-opencode "$T/w/needles"
kill "$NEEDLES" 2>/dev/null
for where in env files proc; do
	check_output "OpenCode's place, $where: positive control: the exported secret is found" $'^T86\t'"$where"$'\tVE\tfound$' oc_lines
	for k in VI VB VG VC; do
		check_output "OpenCode's place, $where: the injected $k is not" $'^T86\t'"$where"$'\t'"$k"$'\tnone$' oc_lines
	done
done
check_output "OpenCode's place: the injector refused the requests sent elsewhere" $'^T86\tanswers-refused\t-\t[6-9]$' oc_lines
for k in VI VB VG VC; do
	check_output "OpenCode's place: no $k in the injector's answers" $'^T86\tanswers\t'"$k"$'\tnone$' oc_lines
done
check_output "OpenCode's place: git sends git.example to the route" $'^T86\tgit-url\t-\t'"$RG"'/repo.git$' oc_lines
check_output "OpenCode's place: git clone over HTTPS through the route" $'^T86\tgit-clone\t-\tINJECTED-GIT-REPO$' oc_lines
wait_for 15 inj_pid
wait_for 30 running
check_output "the injector runs as ocsb-inject" '^ocsb-inject$' ps -o user= -p "$(inj_pid)"
check_output "the injector's environment is empty" '^0$' bash -c "wc -c </proc/$(inj_pid)/environ"
check_output "the injector has no core file" '^Max core file size +0 +0 ' grep '^Max core' "/proc/$(inj_pid)/limits"
check_output "the injector has no capability" '^CapEff:\s+0+$' grep '^CapEff' "/proc/$(inj_pid)/status"
check_fails "the agent cannot read the injector's environment" as_user "$AGENT" cat "/proc/$(inj_pid)/environ"
check_fails "the agent cannot read the injector's memory" as_user "$AGENT" head -c1 "/proc/$(inj_pid)/mem"
check_output "positive control: the agent reads its own OpenCode's environment" '^EXPORTED_KEY=' \
	as_user "$AGENT" bash -c "tr '\\0' '\\n' </proc/$(oc_pid)/environ"

# --- through the route, as the agent (its uid and netlock) and from its ssh session
MSG='{"model":"claude-3-5-haiku-20241022","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
probe() { as_user "$AGENT" curl -sS -i -m 15 "$@" 2>&1; }
check_output "the agent's request through the route streams the answer" 'INJECTED-ANSWER' \
	probe -H 'x-api-key: agent-placeholder' -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
check_output "the provider got the owner's real key" "^x-api-key: $VI\$" cat "$P/api.rec"
check_fails "the provider never got the agent's placeholder" grep -q agent-placeholder "$P/api.rec"
check_output "the provider got its own Host" '^Host: api.anthropic.com$' cat "$P/api.rec"
check_output "from an ssh session too" 'INJECTED-ANSWER' \
	owner_ssh "$AGENT" "curl -sS -m 15 -H 'content-type: application/json' -d '$MSG' $R/v1/messages"
# Only the agent reaches a route: another account (the owner here) is reset by the table,
# so no local user spends the owner's key. Control: the agent's request above went through.
check_fails_output "another account cannot use the route (reset by the table)" 'Connection reset|Recv failure|Failed to connect' \
	as_owner curl -sS -m 10 -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
check_fails_output "nor root" 'Connection reset|Recv failure|Failed to connect' \
	curl -sS -m 10 -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
check_output "positive control: the agent still gets through" 'INJECTED-ANSWER' \
	probe -H 'content-type: application/json' -d "$MSG" "$R/v1/messages"
# The provider settings travel in OpenCode's environment (OPENCODE_CONFIG_CONTENT): the
# supervisor, not root, builds them, and no file of them exists for anyone to swap.
check_output "OpenCode is started with its provider base URL: the route" \
	'^OPENCODE_CONFIG_CONTENT=.*"anthropic":\{"options":\{"baseURL":"http://127.0.0.1:18400/v1"\}\}' env_of "$(oc_pid)"
check_output "the second project's OpenCode: its own route" \
	'^OPENCODE_CONFIG_CONTENT=.*"anthropic":\{"options":\{"baseURL":"http://127.0.0.1:18403/v1"\}\}' env_of "$(field pid 3)"
# Generic routes in name order: BADCA_KEY (0), GIT_TOKEN (1).
check_output "OpenCode's git sends git.example to its route" "^GIT_CONFIG_KEY_1=url.$RG/.insteadOf\$" env_of "$(oc_pid)"
check_output "... from https://git.example/" '^GIT_CONFIG_VALUE_1=https://git.example/$' env_of "$(oc_pid)"
check_output "... two of them" '^GIT_CONFIG_COUNT=2$' env_of "$(oc_pid)"

# --- git over HTTPS through the route, from an ssh session: clone and push
check_output "the ssh session's git sends git.example to the route" "^$RG/repo.git\$" \
	owner_ssh "$AGENT" 'git ls-remote --get-url https://git.example/repo.git'
check_output "git clone https://git.example/repo.git from an ssh session" 'INJECTED-GIT-REPO' \
	owner_ssh "$AGENT" 'rm -rf ~/t86-clone && git clone -q https://git.example/repo.git ~/t86-clone && cat ~/t86-clone/README'
check_output "... the server saw the real credential on the refs request" "^GET /repo.git/info/refs\?service=git-upload-pack chunked=0 auth=Basic $VG\$" cat "$P/git.rec"
check_output "... and on the pack request" "^POST /repo.git/git-upload-pack chunked=[01] auth=Basic $VG\$" cat "$P/git.rec"
check_fails "... and never anything else" grep -qv "auth=Basic $VG\$" "$P/git.rec"
# A pack over git's post buffer (64 KiB at least) goes chunked: the injector re-frames it.
check_output "git push through the route (a chunked request body)" 'PUSHED' \
	owner_ssh "$AGENT" 'cd ~/t86-clone && head -c 300000 /dev/urandom >big.bin && git add big.bin &&
		git -c user.name=agent -c user.email=agent@example.test commit -qm agent-push &&
		git -c http.postBuffer=65536 push -q origin HEAD:refs/heads/from-agent 2>&1 && echo PUSHED'
# What the injector said of the git route (nothing when all went well), for the record.
grep -h 'route GIT_TOKEN' /var/log/ocsb/inject.log 2>/dev/null | tail -n 5 | sed 's/^/  # inject.log: /'
check_output "... the server has the agent's commit" '^agent-push$' git -C "$P/git/repo.git" log -1 --format=%s from-agent
check_output "... received chunked, with the real credential" "^POST /repo.git/git-receive-pack chunked=1 auth=Basic $VG\$" cat "$P/git.rec"

# --- a real OpenCode prompt through its HTTP API: the provider's answer streams back
pw=$(field password)
ocapi() { as_owner curl -sS -m 90 -u "opencode:$pw" -H 'content-type: application/json' "$@" 2>&1; }
sid=$(ocapi -X POST -d '{}' http://127.0.0.1:4096/session | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
: >"$P/api.rec"
out=$(ocapi -d '{"model":{"providerID":"anthropic","modelID":"claude-haiku-4-5"},"parts":[{"type":"text","text":"say hi"}]}' \
	"http://127.0.0.1:4096/session/$sid/message")
if grep -q 'INJECTED-ANSWER' <<<"$out"; then
	pass "OpenCode's prompt got the provider's streamed answer"
else
	fail "OpenCode's prompt got the provider's streamed answer" "session '$sid'" "$out" "$(cat /home/$AGENT/.local/share/opencode/log/*.log 2>/dev/null | grep -iE 'error|fail|exception' | tail -30)"
fi
check_output "... OpenCode's request reached the provider with the real key" "^x-api-key: $VI\$" cat "$P/api.rec"
check_output "... and asked for a stream" '"stream": ?true' cat "$P/api.rec"
check_fails "... and not with the placeholder" grep -q 'x-api-key: ocsb-injected' "$P/api.rec"
check_fails "OpenCode's answer holds no key" grep -qF "$VI" <<<"$out"

# --- the second project's OpenCode reaches the provider with its own key
pw2=$(field password 2)
url2=$(field url 2)
ocapi2() { as_owner curl -sS -m 90 -u "opencode:$pw2" -H 'content-type: application/json' "$@" 2>&1; }
sid2=$(ocapi2 -X POST -d '{}' "$url2/session" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])' 2>/dev/null)
: >"$P/api.rec"
out=$(ocapi2 -d '{"model":{"providerID":"anthropic","modelID":"claude-haiku-4-5"},"parts":[{"type":"text","text":"say hi"}]}' \
	"$url2/session/$sid2/message")
check_output "the second project's prompt got the streamed answer" 'INJECTED-ANSWER' echo "$out"
check_output "... its request reached the provider with its own key" "^x-api-key: $VC\$" cat "$P/api.rec"
check_fails "... not the first project's" grep -qF "$VI" "$P/api.rec"
check_output "the second project's route, as the agent: its own key" 'INJECTED-ANSWER' \
	probe -H 'content-type: application/json' -d "$MSG" "$RC/v1/messages"
check_output "... the upstream got it" "^x-api-key: $VC\$" tail -n 20 "$P/api.rec"

# --- the key is nowhere the agent looks; the same search finds the exported secret
# agent_finds VALUE: 0 when a file the agent can read or a /proc file it can see holds it.
# The value comes on stdin and is matched from a pipe (-f): never on a command line.
agent_finds() {
	printf '%s\n' "$1" | as_user "$AGENT" bash -c 'read -r v
		grep -rlsF -f <(printf "%s\n" "$v") /home /run /tmp /var /etc /dev/shm /opt 2>/dev/null | grep -q . && exit 0
		for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/task/*/environ; do cat "$f" 2>/dev/null; echo; done |
			grep -qF -f <(printf "%s\n" "$v")'
}
check "positive control: the agent finds the exported secret" agent_finds "$VE"
check_fails "the agent finds the injected key in no file nor /proc" agent_finds "$VI"
check_fails "nor the generic route's key" agent_finds "$VB"
check_fails "nor git's credential" agent_finds "$VG"
check_fails "nor the second project's key" agent_finds "$VC"
check_output "OpenCode holds a placeholder" '^ANTHROPIC_API_KEY=ocsb-injected$' env_of "$(oc_pid)"
check_output "positive control: OpenCode holds the exported value" "^EXPORTED_KEY=$VE\$" env_of "$(oc_pid)"
check_output "the ssh session holds a placeholder" '^ocsb-injected$' owner_ssh "$AGENT" 'echo "$ANTHROPIC_API_KEY"'
check_output "positive control: the ssh session holds the exported value" "^$VE\$" owner_ssh "$AGENT" 'echo "$EXPORTED_KEY"'

# --- requests that try to send the injector elsewhere: each refused or pinned, no key back
inj_probe() { # NAME EXPECT CURL-ARGS...
	local name=$1 want=$2 out
	shift 2
	out=$(probe "$@")
	if grep -qE -- "$want" <<<"$out" && ! grep -qF -e "$VI" -e "$VB" <<<"$out"; then
		pass "$name"
	else
		fail "$name" "want /$want/ and no key" "$out"
	fi
}
: >"$P/api.rec"
inj_probe "Host header: pinned to the upstream (answered, no key)" 'INJECTED-ANSWER' \
	-H 'Host: badca.test' -d "$MSG" "$R/v1/messages"
check_fails "... the upstream saw no other Host" grep -q 'badca' "$P/api.rec"
inj_probe "absolute URI: refused" '^HTTP/1.1 400 .*|only origin-form' --request-target 'https://badca.test/v1/messages' "$R/v1/messages"
inj_probe "CONNECT: refused" '405|CONNECT' -p -x "$R" https://badca.test/
inj_probe "../ path: refused" '^HTTP/1.1 400' --path-as-is "$R/v1/../admin"
inj_probe "encoded ../ path: refused" '^HTTP/1.1 400' --path-as-is "$R/v1/%2e%2e/admin"
inj_probe "a path outside the route's prefix: refused" '^HTTP/1.1 403' "$R/v2/models"
inj_probe "TRACE (would echo the key): refused" '^HTTP/1.1 405' -X TRACE "$R/v1/messages"
inj_probe "a redirect is passed back, not followed" '^HTTP/1.1 302' "$R/v1/redirect"
check_fails "... the injector never went to the redirect's host" grep -q 'evil' "$P/api.rec" "$P/bad.rec"

# --- an upstream whose certificate does not verify never gets the key
: >"$P/bad.rec"
inj_probe "untrusted CA: a clear error for the agent" '^HTTP/1.1 502 .*|certificate was refused' "$RB/anything"
# The provider records the failed handshake after the injector has answered: waited for.
check "... the upstream only saw a failed handshake" wait_for 10 grep -qx 'handshake failed' "$P/bad.rec"
check_fails "... and never the key" grep -qF "$VB" "$P/bad.rec"
check_output "... the owner's log says why" 'certificate' cat /var/log/ocsb/inject.log
check_fails "the injector's log holds no key" grep -qF -e "$VI" -e "$VB" /var/log/ocsb/inject.log "$E2E_SCRATCH/agentd.log"
check_fails "the agent cannot read the injector's log" as_user "$AGENT" cat /var/log/ocsb/inject.log

# --- the netlock opens exactly the route ports
python3 -m http.server 18416 --bind 127.0.0.1 >/dev/null 2>&1 &
SRV=$!
wait_port 127.0.0.1 18416 5
check "positive control: root reaches a loopback port beside the routes" curl -sS -m 5 -o /dev/null http://127.0.0.1:18416/
check_fails "the agent does not" as_user "$AGENT" curl -sS -m 5 -o /dev/null http://127.0.0.1:18416/
# A route slot without a route (18410): agentd holds it, the table still resets the agent.
check_fails_output "nor a route port without a route" 'Connection reset|Recv failure|Failed to connect' \
	as_user "$AGENT" curl -sS -m 5 -o /dev/null http://127.0.0.1:18410/
kill "$SRV"

# rec_block PATH: the last request the provider recorded for exactly PATH
rec_block() {
	awk -v p="$1" 'BEGIN { RS = "=====\n" } $2 == p { last = $0 } END { printf "%s", last }' "$P/api.rec"
}

# --- a new key in place: a request in flight finishes with the old one
: >"$P/api.rec"
(probe -d "$MSG" "$R/v1/messages/slow" >"$E2E_SCRATCH/slow.out") &
SLOW=$!
sleep 0.5
check_output "set a new key" 'stored ANTHROPIC_API_KEY' sec --global set ANTHROPIC_API_KEY --inject anthropic <<<"$VI2"
check_output "push" '^pushed 5 secrets' sec push
wait "$SLOW"
check_output "the request in flight finished" 'message_stop' cat "$E2E_SCRATCH/slow.out"
check_output "... with the key it started with" "^x-api-key: $VI\$" rec_block /v1/messages/slow
check_output "the next request carries the new key" 'INJECTED-ANSWER' probe -d "$MSG" "$R/v1/messages"
check_output "... the new key" "^x-api-key: $VI2\$" rec_block /v1/messages
check_output "the injector was not restarted for it" "^$(inj_pid)\$" inj_pid

# --- usage per route and day, counted by agentd from the injector's reports
day=$(date -u +%F)
# 2xx answers, the 302 passed back, and the injector's own refusals counted apart
check_output "ocsb usage: the route's requests, tokens and statuses; refusals apart" \
	"^ANTHROPIC_API_KEY +$day +[1-9][0-9]* +[0-9]+ +[1-9][0-9]* +[1-9][0-9]* +[1-9][0-9]* +[1-9][0-9]*/[1-9][0-9]*/[0-9]+/[0-9]+/0 +[1-9][0-9]*\$" as_owner "$OCSB" usage
check_output "ocsb usage: the second project's key apart" "^ANTHROPIC_API_KEY@cart +$day +[1-9]" as_owner "$OCSB" usage
check_output "ocsb usage: the failed TLS route counted as failed" "^BADCA_KEY +$day +[1-9][0-9]* .*/[1-9][0-9]* +[0-9]+\$" as_owner "$OCSB" usage
check_output "ocsb usage --json" '"route":"ANTHROPIC_API_KEY","day":"[0-9-]+","requests":[1-9]' as_owner "$OCSB" usage --json
check_output "the usage file is the owner's alone (the routes' names) and holds no key" "^400 $OWNER\$" stat -c '%a %U' /var/lib/ocsb/inject/usage
check_fails "the agent cannot read it" as_user "$AGENT" cat /var/lib/ocsb/inject/usage
check_fails "... no key" grep -qF -e "$VI" -e "$VB" /var/lib/ocsb/inject/usage

# --- the injector is supervised; its route ports stay agentd's while it is gone
old=$(inj_pid)
as_owner python3 -c "$SQUAT" 4 >"$E2E_SCRATCH/squat.out" 2>&1 &
SQ=$!
sleep 0.3
kill -KILL "$old"
new_inj() { local p; p=$(inj_pid); [ -n "$p" ] && [ "$p" != "$old" ]; }
check "killed, it is started again" wait_for 15 new_inj
wait "$SQ"
check_output "no other account bound a route port during its restart (1 s backoff)" \
	'^EADDRINUSE every time \([0-9]+ tries\); control: 18416 bound$' cat "$E2E_SCRATCH/squat.out"
wait_for 10 bash -c "as_user $AGENT curl -sS -m 5 -d '{}' $R/v1/messages | grep -q INJECTED"
check_output "... and serves the current key" 'INJECTED-ANSWER' probe -d "$MSG" "$R/v1/messages"
check_output "... the current key" "^x-api-key: $VI2\$" rec_block /v1/messages

# --- a push that only moves the second project's route restarts its OpenCode: a new
# override of the first project's comes before it in the list (cart's own set is unchanged)
cart_pid=$(field pid 3)
check_output "a new override in the first project" '^stored ZZZ_TOKEN' \
	sec --project shop set ZZZ_TOKEN --inject https://badca.test --header 'X-Token: {}' <<<"zzz-$RANDOM"
check_output "push: the second project's OpenCode restarts (its route moved)" 'restarted.*cart' sec push
new_cart() { local p; p=$(field pid 3); [ -n "$p" ] && [ "$p" != "$cart_pid" ]; }
check "... a new OpenCode process" wait_for 30 new_cart
check_output "... its provider settings name the moved route" '"baseURL":"http://127.0.0.1:18404/v1"' \
	env_of "$(field pid 3)"
check_output "... the moved route carries its own key" 'INJECTED-ANSWER' probe -d "$MSG" "http://127.0.0.1:18404/v1/messages"
check_output "... the upstream got it" "^x-api-key: $VC\$" rec_block /v1/messages

kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"
check "agentd's stop ends the injector" wait_for 10 bash -c '! pgrep -u ocsb-inject' 
kill_tree "$KR_PID"
cd / || true
