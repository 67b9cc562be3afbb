# SPDX-License-Identifier: MIT
# ocsb secrets: the owner's keyring (a real gnome-keyring in dbus-run-session), the
# passphrase file store, the sealed push to ocsb-agentd, and delivery to the real OpenCode
# and to ssh sessions of the agent, with no copy in the clear anywhere else.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
. "$(dirname "$0")/lib-net.sh"

OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
for tool in dbus-run-session gnome-keyring-daemon secret-tool python3; do
	if ! command -v "$tool" >/dev/null; then
		skip "ocsb secrets" "$tool missing (sudo make test-deps installs it)"
		exit 0
	fi
done
if [ ! -x "$OC_BIN" ]; then
	skip "ocsb secrets with OpenCode" "OpenCode not installed at $OC_BIN (sudo make deps)"
	exit 0
fi
OCSB=$OCSB_BUILD/ocsb
PUSHPY=$(dirname "$0")/secrets-push.py
# Values that appear nowhere else: a grep finding one proves a leak.
V1="sk-ant-e2e-$RANDOM$RANDOM-one"
V2="sk-oai-e2e-$RANDOM$RANDOM-two"
VG="glob-$RANDOM$RANDOM-val"
VP="proj-$RANDOM$RANDOM-val"
VQ="it's \$(touch /tmp/pwned) \`x\`"
make_project
fake_internet_up >/dev/null 2>&1 || fail "fake internet up"
check_output "provisioned" '^ocsb-provision: [1-9]' provision
useradd -m -s /bin/bash bob

# --- provisioning: the key pair and the hook
KEY=/var/lib/ocsb/agentd/secrets.key
PUB=/etc/ocsb/agentd-secrets.pub
HOOK=/etc/profile.d/ocsb-$AGENT.sh
check_output "the sealing private key is the supervisor's alone" '^600 ocsb-agentd 32$' stat -c '%a %U %s' "$KEY"
check_output "the owner can read the public key" '^ocsb-secrets-pk-v1 ' as_owner cat "$PUB"
check_fails "the agent cannot read the private key" as_user "$AGENT" cat "$KEY"
check_output "positive control: root reads the private key" '^32$' stat -c %s "$KEY"
check_output "the profile hook is root-owned" '^644 root$' stat -c '%a %U' "$HOOK"
check_output "the agent's .bashrc sources it (for ssh commands)" "^\[ -r $HOOK \]" as_user "$AGENT" cat "/home/$AGENT/.bashrc"
check_output "provisioning is idempotent (0 changes)" '^ocsb-provision: 0 changes' provision

# --- the owner's keyring: a real gnome-keyring on a private session bus
start_keyring
# sec [DIR] ARGS: ocsb secrets as the owner with the keyring's bus, from DIR (default ~)
sec() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
sec_in() { local dir=$1; shift; as_owner env -C "$dir" DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
st() { as_owner env DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" secret-tool "$@"; }

check_output "set (global) from stdin" '^stored ANTHROPIC_API_KEY \(global, exported\) in the keyring' \
	sec --global set ANTHROPIC_API_KEY <<<"$V1"
check_output "the value is in the real keyring (secret-tool)" "^$V1\$" st lookup scope '*' name ANTHROPIC_API_KEY
check_output "set in the project directory takes the project scope" '^stored OPENAI_API_KEY \(shop, exported\)' \
	sec_in "$PROJECT" set OPENAI_API_KEY <<<"$V2"
printf '%s' "$VG" | sec --global set OVERRIDE_ME >/dev/null 2>&1
printf '%s' "$VP" | sec --project shop set OVERRIDE_ME >/dev/null 2>&1
printf '%s' "$VQ" | sec --global set QUOTED_KEY >/dev/null 2>&1
printf '%s' "tmp" | sec --global set TEMP_KEY >/dev/null 2>&1
check_output "list: names and scopes" '^OPENAI_API_KEY +shop +exported +never$' sec list
check_output "list: the global one" '^ANTHROPIC_API_KEY +global +exported +never$' sec list
sec list >"$E2E_SCRATCH/list" 2>&1
check_output "positive control: list printed the names" 'ANTHROPIC_API_KEY' cat "$E2E_SCRATCH/list"
check_fails "list never shows a value" grep -F -e "$V1" -e "$V2" "$E2E_SCRATCH/list"
check_output "rm" '^removed TEMP_KEY \(global\)' sec --global rm TEMP_KEY
sec list >"$E2E_SCRATCH/list" 2>&1
check_fails "rm: gone from list" grep TEMP_KEY "$E2E_SCRATCH/list"
check_fails_output "rm of a missing secret" 'no secret TEMP_KEY' sec --global rm TEMP_KEY
# set stores the new item, then removes the old one of that name. A removal that fails
# (test hook) leaves two items: set says so and exits non-zero, and reading the keyring
# refuses the pair (naming it and what to do) instead of merging it in listing order.
sec_hook() { as_owner env OCSB_TEST_HOOKS=1 OCSB_TEST_KEYRING_DROP_FAIL=1 DBUS_SESSION_BUS_ADDRESS="$BUS" XDG_RUNTIME_DIR="$KR/run" "$OCSB" secrets "$@"; }
dup_items() { st search --all scope '*' name DUP_KEY 2>&1 | grep -c '^attribute.name = DUP_KEY'; }
check_output "positive control: DUP_KEY stored, exported" '^stored DUP_KEY \(global, exported\)' sec --global set DUP_KEY <<<"dup-old"
check_fails_output "a failed removal of the old item is said, with what to do" \
	"stored DUP_KEY \(global\); the old item of DUP_KEY could not be removed: removal refused \(test hook\); run 'ocsb secrets --global rm DUP_KEY', then set it again" \
	sec_hook --global set DUP_KEY --inject anthropic <<<"dup-new"
check_output "positive control: both items are in the keyring" '^2$' dup_items
check_fails_output "list refuses the two items of DUP_KEY, with what to do" \
	"DUP_KEY \(global\) is stored twice in the keyring, with different routes .*run 'ocsb secrets --global rm DUP_KEY', then set it again" sec list
check_fails_output "push refuses them too (nothing merged is sent)" 'DUP_KEY \(global\) is stored twice' sec push
check_output "rm removes both" '^removed DUP_KEY \(global\)' sec --global rm DUP_KEY
check_output "control: list works again" '^ANTHROPIC_API_KEY +global +exported' sec list
sec --global set DUP_KEY <<<"dup-old" >/dev/null 2>&1
check_output "control: without the hook the new route replaces the old item" \
	'^stored DUP_KEY \(global, injected via anthropic\)' sec --global set DUP_KEY --inject anthropic <<<"dup-new"
check_output "control: one item left" '^1$' dup_items
check_output "control: listed once, injected" '^DUP_KEY +global +injected \(anthropic\)' sec list
check_output "rm DUP_KEY" '^removed DUP_KEY \(global\)' sec --global rm DUP_KEY
check_fails_output "a value on the command line is refused" 'never read from the command line' sec --global set SOME_KEY value
check_fails_output "a reserved name is refused" "'LD_PRELOAD' is reserved" sec --global set LD_PRELOAD <<<x
check_fails_output "a lower-case name is refused" 'invalid secret name' sec --global set api_key <<<x
check_fails_output "without a Secret Service: a clear message" 'no Secret Service keyring is available.*--file' \
	as_owner env DBUS_SESSION_BUS_ADDRESS="unix:path=$KR/nobus" "$OCSB" secrets list
check_fails_output "push without ocsb-agentd says so" 'cannot reach ocsb-agentd' sec push

# --- ocsb-agentd with OpenCode
start_agentd() {
	OCSB_TEST_HOOKS=1 setsid "$OCSB_BUILD/ocsb-warden" --foreground -v \
		>>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
	AGENTD=$!
}
field() { as_owner "$OCSB" status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" '$1 == k { if (++i == n) { $1 = ""; sub(/^ +/, ""); print; exit } }'; }
oc_pid() { field pid 2; }
running() { [ "$(field state 2)" = running ]; }
env_of() { tr '\0' '\n' <"/proc/$1/environ"; }
start_agentd
wait_for 60 running || fail "OpenCode answers" "$(as_owner "$OCSB" status 2>&1)" "$(tail -20 "$E2E_SCRATCH/agentd.log")"
pid0=$(oc_pid)
check_fails "before the push OpenCode has no secret" bash -c "tr '\\0' '\\n' </proc/$pid0/environ | grep -q ANTHROPIC_API_KEY"

check_output "push reports the restarted instance" '^restarted OpenCode instance shop$' sec push
check_output "push counted the secrets" '^pushed 5 secrets to ocsb-agentd$' sec push
new_pid() { local p; p=$(oc_pid); [ -n "$p" ] && [ "$p" != "$1" ]; }
wait_for 15 new_pid "$pid0" && wait_for 30 running
pid=$(oc_pid)
check_output "OpenCode was restarted by the push" '^[0-9]+$' bash -c "[ '$pid' != '$pid0' ] && echo $pid"
check_output "OpenCode runs as the agent uid" "^$AGENT$" ps -o user= -p "$pid"
check_output "the global secret is in OpenCode's environment" "^ANTHROPIC_API_KEY=$V1\$" env_of "$pid"
check_output "the project secret is in OpenCode's environment" "^OPENAI_API_KEY=$V2\$" env_of "$pid"
check_output "the project overrides the global secret" "^OVERRIDE_ME=$VP\$" env_of "$pid"
check_output "an unchanged push restarts nothing" '^no running OpenCode instance needed a restart$' sec push
check_output "... and OpenCode keeps its pid" "^$pid\$" oc_pid
check_output "list shows when it was pushed" '^ANTHROPIC_API_KEY +global +exported +[0-9]{4}-' sec list

# --- the ssh session of the agent
ENVF=/run/ocsb/$AGENT/env
check_output "the env file is the agent's, 0400" "^400 $AGENT\$" stat -c '%a %U' "$ENVF"
check_output "its directory is root's, not writable by the agent" '^755 root$' stat -c '%a %U' "/run/ocsb/$AGENT"
# sh (dash) as a login shell reads /etc/profile and ~/.profile but not ~/.bashrc: this one
# proves the root-owned profile.d hook; the next, the agent's .bashrc line.
check_output "ssh login shell (/etc/profile.d hook) has the secret" "^$V1\$" owner_ssh "$AGENT" "sh -lc 'echo \"\$ANTHROPIC_API_KEY\"'"
check_output "ssh command (BASH_ENV) has the secret" "^$V1\$" owner_ssh "$AGENT" 'echo "$ANTHROPIC_API_KEY"'
check_output "ssh: the project's value for the first project" "^$VP\$" owner_ssh "$AGENT" 'echo "$OVERRIDE_ME"'
check_output "ssh: quotes and \$(...) arrive verbatim" "^it's" owner_ssh "$AGENT" 'printf "%s\n" "$QUOTED_KEY"'
check_fails "ssh: nothing in the value was executed" test -e /tmp/pwned
check_output "the hook does nothing in the owner's login shell" '^owner:$' owner_ssh "$OWNER" "bash -lc 'echo \"owner:\$ANTHROPIC_API_KEY\"'"

# --- no copy in the clear elsewhere (each grep has a positive control that finds it)
check_output "positive control: grep finds the value in the env file" "$ENVF" grep -rlF -- "$V1" /run/ocsb
check_fails "no file under the agent's home holds a value" grep -rqF -e "$V1" -e "$V2" "/home/$AGENT"
check_fails "no file under /var/lib/ocsb holds a value in clear" grep -rqF -e "$V1" -e "$V2" -e "$VP" /var/lib/ocsb
check_output "positive control: the record exists" '^[1-9][0-9]*$' stat -c %s /var/lib/ocsb/agentd/secrets.rec
check_output "the record is the supervisor's alone" '^600 ocsb-agentd$' stat -c '%a %U' /var/lib/ocsb/agentd/secrets.rec
check_fails "no log line holds a value" grep -rqF -e "$V1" -e "$V2" "$E2E_SCRATCH/agentd.log" /var/log/ocsb
check_output "positive control: the log tells of the push" 'secrets: 5 secrets from uid' cat "$E2E_SCRATCH/agentd.log"
# The pattern comes from a file: on grep's own command line it would find itself.
argv_has() {
	printf '%s\n' "$1" >"$E2E_SCRATCH/argv-pattern"
	for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' <"$f" 2>/dev/null; echo; done |
		grep -qF -f "$E2E_SCRATCH/argv-pattern"
}
# "; :" keeps bash from exec'ing sleep in its place (which would drop the argument).
bash -c 'sleep 20; :' "$V1-argv" &
canary=$!
check "positive control: the argv scan sees a value on a command line" wait_for 5 argv_has "$V1-argv"
kill "$canary"
wait "$canary" 2>/dev/null
check_fails "no process has a value on its command line" argv_has "$V1"

# --- who may push, and what
check_output "positive control: the owner's independently sealed push is accepted" '^OCSB/1 OK' \
	as_owner python3 "$PUSHPY" good "ANTHROPIC_API_KEY=$V1" "OPENAI_API_KEY=$V2" "OVERRIDE_ME=$VG" "QUOTED_KEY=x"
check_output "... and applied (the ssh session sees it)" "^$VG\$" owner_ssh "$AGENT" 'echo "$OVERRIDE_ME"'
check_fails_output "the agent cannot push" 'not allowed: uid [0-9]+ is neither root nor the owner' \
	as_user "$AGENT" python3 "$PUSHPY" good "ANTHROPIC_API_KEY=agent-chosen"
check_fails_output "another user cannot push" 'not allowed' as_user bob python3 "$PUSHPY" good "ANTHROPIC_API_KEY=bob-chosen"
check_fails_output "a tampered sealed box is refused" 'ERR sealed secrets do not open' \
	as_owner python3 "$PUSHPY" tamper "ANTHROPIC_API_KEY=tampered"
check_output "nothing of the refused pushes was applied" "^$V1\$" owner_ssh "$AGENT" 'echo "$ANTHROPIC_API_KEY"'
check_output "the CLI push restores the keyring's set" '^pushed 5 secrets' sec push
wait_for 30 running

# --- the passphrase file store (opt-in; here without any keyring)
FS() { as_owner env DBUS_SESSION_BUS_ADDRESS="unix:path=$KR/nobus" "$OCSB" secrets "$@"; }
BOX=$OWNER_HOME/.config/ocsb/secrets.box
VF="file-$RANDOM$RANDOM-val"
check_output "file store: set" 'stored FILE_KEY \(global, exported\) in the passphrase file store' \
	FS --file --passphrase-fd 3 --global set FILE_KEY <<<"$VF" 3<<<'correct horse'
check_output "file store: the box is the owner's, 0600" "^600 $OWNER\$" stat -c '%a %U' "$BOX"
check_fails "file store: no value in clear in the box" grep -qF "$VF" "$BOX"
check_output "file store: list with the right passphrase (the box is used by itself)" '^FILE_KEY +global' \
	FS --passphrase-fd 3 list 3<<<'correct horse'
check_fails_output "file store: a wrong passphrase is one clear error" 'wrong passphrase' \
	FS --passphrase-fd 3 list 3<<<'wrong'
# The passphrase is checked before the value is read (issue 15: a wrong one threw a typed
# value away): the value's stdin never ends, a wrong passphrase still fails at once.
t0=$(date +%s)
out=$(FS --passphrase-fd 3 --global set OTHER_KEY 3<<<'wrong' < <(sleep 30) 2>&1)
rc=$? el=$(($(date +%s) - t0))
if [ $rc -ne 0 ] && [ $el -lt 20 ] && grep -q 'wrong passphrase' <<<"$out"; then
	pass "file store: set checks the passphrase before it reads the value (exit $rc, ${el} s)"
else
	fail "file store: set checks the passphrase before it reads the value" "exit $rc after ${el} s (30: waited for the value)" "$out"
fi
check_output "control: the right passphrase stores the value" 'stored OTHER_KEY' \
	FS --passphrase-fd 3 --global set OTHER_KEY <<<"other-val" 3<<<'correct horse'
check_output "file store: rm of the control" 'removed OTHER_KEY' FS --passphrase-fd 3 --global rm OTHER_KEY 3<<<'correct horse'
check_output "file store: push" 'pushed 1 secret to ocsb-agentd' FS --passphrase-fd 3 push 3<<<'correct horse'
wait_for 15 new_pid "$(oc_pid)"
wait_for 30 running
check_output "file store: its secret reaches OpenCode" "^FILE_KEY=$VF\$" env_of "$(oc_pid)"
check_fails "file store: the keyring's secrets are gone from OpenCode (the set is replaced)" bash -c "tr '\\0' '\\n' </proc/$(oc_pid)/environ | grep -q ANTHROPIC_API_KEY"
check_output "file store: rm" 'removed FILE_KEY' FS --passphrase-fd 3 --global rm FILE_KEY 3<<<'correct horse'

# --- the key's permissions are checked at start
kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"
chmod 0644 "$KEY"
: >"$E2E_SCRATCH/agentd2.log"
timeout 20 "$OCSB_BUILD/ocsb-warden" --foreground >"$E2E_SCRATCH/agentd2.log" 2>&1 </dev/null
check_output "agentd refuses to start with a readable private key" 'must be owned by root or ocsb-agentd with mode 0600' cat "$E2E_SCRATCH/agentd2.log"
chmod 0600 "$KEY"
start_agentd
check "positive control: with mode 0600 it starts (control socket answers)" wait_for 20 as_owner "$OCSB" status
kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"

# --- removal takes the hook and the secrets away
kill_tree "$KR_PID"
check_output "--remove" 'remove the profile hook' prov --remove
check_fails "the profile hook is gone" test -e "$HOOK"
check_fails "the stored secrets are gone" test -e /var/lib/ocsb/agentd/secrets.rec
check_fails "the agent's env file is gone" test -e "$ENVF"
