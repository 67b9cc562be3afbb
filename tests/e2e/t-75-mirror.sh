# SPDX-License-Identifier: MIT
# The read-only mirror of the owner's tool configs (docs/mirror.md): built by
# ocsb-provision with the owner's rights into a tree of the account ocsb-agentd (issue 26:
# written by that account, never by root), linked into the agent's home, refreshed by
# ocsb-agentd, read by the real OpenCode.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

OC_BIN=/opt/ocsb/opencode/node_modules/opencode-linux-x64/bin/opencode
OCSB=$OCSB_BUILD/ocsb
MIR=/var/lib/ocsb/mirror/$AGENT
TREE=$MIR/tree
SRC=$OWNER_HOME/.config/opencode
AHOME=/home/$AGENT
ANT_KEY=sk-ant-api03-E2Ee2eE2Ee2eE2Ee2eE2Ee2eE2Ee2eE2Ee2e

# ms_until MAXMS cmd...: print the milliseconds until cmd succeeds (polling every 20 ms); 1 if never
ms_until() {
	local max=$1 t0 now
	shift
	t0=$(date +%s%N)
	while :; do
		"$@" >/dev/null 2>&1 && { echo $((($(date +%s%N) - t0) / 1000000)); return 0; }
		now=$(date +%s%N)
		[ $(((now - t0) / 1000000)) -gt "$max" ] && return 1
		sleep 0.02
	done
}
gone() { [ ! -e "$1" ] && [ ! -L "$1" ]; }
agent() { as_user "$AGENT" "$@"; }

# ---- the owner's configs, with every kind of trap in them
make_project
chmod 0700 "$OWNER_HOME"
as_owner mkdir -p "$SRC/agent" "$SRC/command" "$OWNER_HOME/.agents/skills/demo"
# 0700, as Debian 12 makes a home and many tools ~/.config: the supervisor (its own
# account) cannot watch in them; the watcher it asks the warden for runs as the owner.
as_owner chmod 0700 "$OWNER_HOME/.config"
check_output "the owner's home is 0700" '^700$' stat -c %a "$OWNER_HOME"
check_output "the owner's ~/.config is 0700" '^700$' stat -c %a "$OWNER_HOME/.config"
as_owner tee "$SRC/opencode.json" >/dev/null <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  // the owner's own key: must not reach the agent
  "provider": {"anthropic": {"options": {"apiKey": "$ANT_KEY"}}},
  "agent": {"mirroragent": {"description": "defined in the owner's opencode.json", "mode": "primary"}}
}
EOF
as_owner sh -c "printf -- '---\ndescription: a command of the owner\n---\nSay MIRRORCMD-BODY\n' >'$SRC/command/mirrorcmd.md'"
as_owner sh -c "printf -- '---\ndescription: reviews\nmode: subagent\n---\nYou review.\n' >'$SRC/agent/mirrored-reviewer.md'"
as_owner sh -c "printf 'skill body\n' >'$OWNER_HOME/.agents/skills/demo/SKILL.md'"
as_owner ln -s command/mirrorcmd.md "$SRC/inside-link"
as_owner ln -s "$OWNER_KEY" "$SRC/ssh-key-link"
as_owner ln -s /etc/shadow "$SRC/shadow-link"
as_owner ln -s ../../.ssh/id_ed25519 "$SRC/relative-escape"
as_owner mkfifo "$SRC/a-fifo"
as_owner truncate -s 20G "$SRC/huge-sparse.bin"
as_owner sh -c "printf 'odd\n' >'$SRC/name
with-newline.md'"
# A file the owner cannot read but root can: proves the reader has the owner's rights.
printf 'ROOT-ONLY\n' >"$SRC/root-only.md" && chmod 0600 "$SRC/root-only.md"
as_owner tee "$OWNER_HOME/.gitconfig" >/dev/null <<'EOF'
[user]
	name = Alice Owner
	email = alice@example.test
[credential]
	helper = store
[include]
	path = ~/.gitconfig.private
[url "git@private.example.test:"]
	insteadOf = https://private.example.test/
[core]
	editor = vi
	hooksPath = /home/alice/hooks
[alias]
	co = checkout
EOF

# ---- build
check_output "provisioning builds the mirror without hanging on the FIFO or the 20 GB file" \
	'^\+ mirror .* written' timeout 60 "$OCSB_BUILD/ocsb-provision" --owner "$OWNER" --project "$PROJECT"
check_output "the agent's ~/.config/opencode is a link to the tree" "^$TREE/.config/opencode\$" readlink "$AHOME/.config/opencode"
check_output "the mirror directory is ocsb-agentd's, readable by the agent's group only" "^750 ocsb-agentd $AGENT\$" stat -c '%a %U %G' "$MIR"
check_output "mirrored files are 0444 ocsb-agentd" '^444 ocsb-agentd$' stat -c '%a %U' "$TREE/.config/opencode/command/mirrorcmd.md"
check_output "mirrored directories are 0555 ocsb-agentd" '^555 ocsb-agentd$' stat -c '%a %U' "$TREE/.config/opencode/command"
check_output "no file or directory of the tree has another mode or owner (none is root's)" '^0$' \
	sh -c "find '$TREE' \( -type f ! -perm 444 \) -o \( -type d ! -perm 555 \) -o ! -user ocsb-agentd | wc -l"
check_output "the status file is ocsb-agentd's, readable by the owner's group" "^640 ocsb-agentd $(id -gn "$OWNER")\$" \
	stat -c '%a %U %G' "/var/lib/ocsb/mirror/$AGENT.status"
check_output "the links file (the link maker's problems, for the owner's doctor) likewise, and empty" \
	"^640 ocsb-agentd $(id -gn "$OWNER") 0\$" stat -c '%a %U %G %s' "/var/lib/ocsb/mirror/$AGENT.links"
check_output "positive control: the tree holds the owner's files" '^([5-9]|[1-9][0-9]+)$' sh -c "find '$TREE' -type f | wc -l"

# ---- the agent reads, and cannot change anything
check_output "the agent reads the mirrored command" 'MIRRORCMD-BODY' agent cat "$AHOME/.config/opencode/command/mirrorcmd.md"
check_output "the agent reads the shared skills" 'skill body' agent cat "$AHOME/.agents/skills/demo/SKILL.md"
check "positive control: the agent writes in its own home" agent sh -c "echo x >'$AHOME/own-file'"
check_fails "the agent cannot write a mirrored file" agent sh -c "echo x >>'$AHOME/.config/opencode/command/mirrorcmd.md'"
check_fails "the agent cannot create a file in the mirror" agent touch "$AHOME/.config/opencode/command/new.md"
check_fails "the agent cannot chmod a mirrored file" agent chmod 666 "$AHOME/.config/opencode/command/mirrorcmd.md"
check_fails "the agent cannot chmod a mirrored directory" agent chmod 777 "$AHOME/.config/opencode/command"
check_fails "the agent cannot rename a mirrored file" agent mv "$AHOME/.config/opencode/command/mirrorcmd.md" "$AHOME/.config/opencode/command/x.md"
check_fails "the agent cannot delete a mirrored file" agent rm -f "$AHOME/.config/opencode/command/mirrorcmd.md"
check_fails "the agent cannot replace a mirrored file" agent sh -c "echo x >'$AHOME/y' && mv -f '$AHOME/y' '$AHOME/.config/opencode/opencode.json'"
check_output "the mirrored file is intact after all that" 'MIRRORCMD-BODY' cat "$TREE/.config/opencode/command/mirrorcmd.md"

# ---- links, special files, size, names, rights
check "a link staying inside the tree is mirrored as a link" test -L "$TREE/.config/opencode/inside-link"
check "a link to ~/.ssh/id_ed25519 is not mirrored" gone "$TREE/.config/opencode/ssh-key-link"
check "a link to /etc/shadow is not mirrored" gone "$TREE/.config/opencode/shadow-link"
check "a relative link climbing out is not mirrored" gone "$TREE/.config/opencode/relative-escape"
check "the FIFO is not mirrored" gone "$TREE/.config/opencode/a-fifo"
check "the huge sparse file is not mirrored" gone "$TREE/.config/opencode/huge-sparse.bin"
check "a name with a newline is mirrored" test -f "$TREE/.config/opencode/name
with-newline.md"
check "positive control: root can read root-only.md in the source" grep -q ROOT-ONLY "$SRC/root-only.md"
check "a file the owner cannot read is not mirrored (read with the owner's rights)" gone "$TREE/.config/opencode/root-only.md"

# ---- secrets
check "positive control: the key is in the owner's opencode.json" grep -q "$ANT_KEY" "$SRC/opencode.json"
check_fails "the key is nowhere in the mirror" grep -rq "$ANT_KEY" "$MIR"
check_output "the mirrored opencode.json reads the key from the environment" '"apiKey": "\{env:ANTHROPIC_API_KEY\}"' cat "$TREE/.config/opencode/opencode.json"
check_fails "the key is nowhere in the status file" grep -q "$ANT_KEY" /var/lib/ocsb/mirror/$AGENT.status

# ---- .gitconfig subset
# (git config without --global: --global alone does not follow includes)
check_output "the agent's git identity comes from the owner's" '^Alice Owner$' agent git config user.name
check_output "aliases and the editor are kept" '^checkout$' agent git config alias.co
check_fails "no credential helper" agent git config credential.helper
check_fails "no include of the owner's" agent sh -c 'git config --get-all include.path | grep -q private'
check_fails "the generated file includes nothing" grep -qi include "$TREE/.gitconfig"
check_fails "no url.insteadOf" agent git config --get-regexp '^url\.'
check_fails "no hooksPath" agent git config core.hooksPath
check_output "positive control: the owner still has all of it" '^store$' as_owner git config --global credential.helper
check_output "~/.gitconfig is the agent's own file, including the subset" "^600 $AGENT\$" stat -c '%a %U' "$AHOME/.gitconfig"
check "the agent can still set its own git settings" agent git config --global user.name "Agent Self"
check_output "and they win over the owner's" '^Agent Self$' agent git config user.name
check_output "the owner's email still comes through the include" '^alice@example.test$' agent git config user.email

# ---- ocsb mirror status
check_output "status: the FIFO and why" 'a FIFO: not mirrored' as_owner "$OCSB" mirror status
check_output "status: the huge file and why" 'larger than 1024 KiB' as_owner "$OCSB" mirror status
check_output "status: the link to the key and why" "link to $OWNER_KEY leaves the mirrored tree" as_owner "$OCSB" mirror status
check_output "status: the link to /etc/shadow" 'link to /etc/shadow leaves' as_owner "$OCSB" mirror status
check_output "status: the unreadable file and why" "cannot be read by $OWNER: Permission denied" as_owner "$OCSB" mirror status
check_output "status: the withheld key names file and key, and the fix" 'provider\.anthropic\.options\.apiKey .*ocsb secrets set ANTHROPIC_API_KEY' as_owner "$OCSB" mirror status
check_output "status: the newline in a name is escaped" 'name\\nwith-newline\.md' as_owner "$OCSB" mirror status
check_output "status --json parses" '^ok [1-9]' as_owner sh -c "'$OCSB' mirror status --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(\"ok\", d[\"skipped\"])'"
check_fails_output "the agent cannot read the status" 'only root and the owner' agent "$OCSB" mirror status

# ---- idempotence, drift, dry run
check_output "a second run changes nothing" '^ocsb-provision: 0 changes' provision
check_output "--check: no drift" '^ocsb-provision: 0 differences' provision --check
as_owner sh -c "printf 'v2\n' >'$SRC/command/drift.md'"
check_fails_output "--check reports a changed source" 'drift: mirror: update \.config/opencode/command/drift\.md' provision --check
check_output "--dry-run names it" 'would: mirror: update \.config/opencode/command/drift\.md' provision --dry-run
check "--dry-run wrote nothing" gone "$TREE/.config/opencode/command/drift.md"
check_output "the next run mirrors it" '1 written' provision

# ---- writable mode
printf 'mirror .config/opencode .agents .gitconfig\nmirror-writable .agents\n' >>/etc/ocsb/ocsb.conf
check_output "mirror-writable: provisioning copies .agents" 'copy .*\.agents' provision
check_output "the copy is the agent's own directory" "^700 $AGENT\$" stat -c '%a %U' "$AHOME/.agents"
check_output "the copy is marked" 'writable copy' cat "$AHOME/.agents/.ocsb-writable-copy"
check "the agent can change its copy" agent sh -c "echo mine >>'$AHOME/.agents/skills/demo/SKILL.md'"
check_output "the owner's file is untouched" '^skill body$' cat "$OWNER_HOME/.agents/skills/demo/SKILL.md"
check_output "a later run keeps the agent's changes" '^ocsb-provision: 0 changes' provision
check_output "the agent's change is still there" 'mine' cat "$AHOME/.agents/skills/demo/SKILL.md"

# ---- ocsb-agentd: OpenCode reads the mirror; refresh within a second
if [ ! -x "$OC_BIN" ]; then
	skip "OpenCode reads the mirrored config" "OpenCode not installed at $OC_BIN"
	exit 0
fi
touch "$E2E_SCRATCH/links-marker"
setsid "$OCSB_BUILD/ocsb-warden" --foreground -v >>"$E2E_SCRATCH/agentd.log" 2>&1 </dev/null &
AGENTD=$!
field() { as_owner "$OCSB" status 2>/dev/null | awk -v k="$1" -v n="${2:-1}" '$1 == k { if (++i == n) { $1 = ""; sub(/^ +/, ""); print; exit } }'; }
running() { [ "$(field state 2)" = running ]; }
if wait_for 90 running; then
	pass "OpenCode runs"
else
	fail "OpenCode runs" "$(tail -20 "$E2E_SCRATCH/agentd.log")"
fi
pw=$(field password)
api() { as_owner curl -s --max-time 10 -u "opencode:$pw" "http://127.0.0.1:4096$1"; }
names() { api "$1" | python3 -c 'import json,sys; print("\n".join(x["name"] for x in json.load(sys.stdin)))'; }
check_output "OpenCode (as the agent) lists the command of the owner's config" '^mirrorcmd$' names /command
check_output "OpenCode lists the agent defined in the owner's opencode.json" '^mirroragent$' names /agent
check_output "OpenCode lists the agent defined in the owner's agent/ folder" '^mirrored-reviewer$' names /agent
check_output "positive control: built-in agents are listed too" '^build$' names /agent

check_output "ocsb-agentd's link maker recorded its run in the links file (in place: still its, empty)" \
	"^640 ocsb-agentd $(id -gn "$OWNER") 0\$" \
	find "/var/lib/ocsb/mirror/$AGENT.links" -newer "$E2E_SCRATCH/links-marker" -printf '%m %u %g %s\n'
check "the mirror's watcher runs as the owner" pgrep -u "$OWNER" -f -- '--mirror-watch'
check "positive control: the warden started it (its log is read here)" grep -q 'mirror-watch 0: pid' "$E2E_SCRATCH/agentd.log"
check_fails "the supervisor did not fall back to the periodic refresh" grep -q 'cannot be watched\|the watcher (as' "$E2E_SCRATCH/agentd.log"
as_owner sh -c "printf 'late\n' >'$SRC/command/late.md'"
if ms=$(ms_until 1000 test -f "$TREE/.config/opencode/command/late.md"); then
	pass "a new source file is in the mirror within a second ($ms ms)"
else
	fail "a new source file is in the mirror within a second" "$(tail -5 "$E2E_SCRATCH/agentd.log")"
fi
as_owner sh -c "printf 'changed\n' >'$SRC/command/late.md'"
if ms=$(ms_until 1000 grep -q changed "$TREE/.config/opencode/command/late.md"); then
	pass "a change is in the mirror within a second ($ms ms)"
else
	fail "a change is in the mirror within a second"
fi
as_owner rm "$SRC/command/late.md"
if ms=$(ms_until 1000 gone "$TREE/.config/opencode/command/late.md"); then
	pass "a deletion is in the mirror within a second ($ms ms)"
else
	fail "a deletion is in the mirror within a second"
fi
as_owner mkdir "$SRC/newdir"
as_owner sh -c "printf 'deep\n' >'$SRC/newdir/deep.md'"
check "a new directory is mirrored" wait_for 2 test -f "$TREE/.config/opencode/newdir/deep.md"
as_owner sh -c "printf 'deeper\n' >'$SRC/newdir/second.md'"
check "a file in the new directory is mirrored (the new directory is watched)" wait_for 2 test -f "$TREE/.config/opencode/newdir/second.md"
as_owner mkdir "$SRC/newdir/sub"
check "a directory in the new directory is mirrored" wait_for 2 test -d "$TREE/.config/opencode/newdir/sub"
as_owner sh -c "printf 'sub\n' >'$SRC/newdir/sub/third.md'"
if ms=$(ms_until 1000 test -f "$TREE/.config/opencode/newdir/sub/third.md"); then
	pass "a new file two new directories down, in ~/.config (0700), is mirrored within a second ($ms ms)"
else
	fail "a new file two new directories down, in ~/.config (0700), is mirrored within a second" "$(tail -5 "$E2E_SCRATCH/agentd.log")"
fi
# The watcher gone (the owner may end it: it is the owner's process): started again.
wpid=$(pgrep -u "$OWNER" -f -- '--mirror-watch')
check "the owner can end the watcher" as_owner kill -KILL "$wpid"
check "the watcher is started again" wait_for 5 bash -c "p=\$(pgrep -u $OWNER -f -- --mirror-watch) && [ \"\$p\" != '$wpid' ]"
sleep 0.3
as_owner sh -c "printf 'again\n' >'$SRC/command/again.md'"
if ms=$(ms_until 1000 test -f "$TREE/.config/opencode/command/again.md"); then
	pass "after its restart a new file is in the mirror within a second ($ms ms)"
else
	fail "after its restart a new file is in the mirror within a second" "$(tail -5 "$E2E_SCRATCH/agentd.log")"
fi
# A reload (SIGHUP) stops the watcher and starts a new one.
wpid=$(pgrep -u "$OWNER" -f -- '--mirror-watch')
kill -HUP "$AGENTD"
check "after a reload a new watcher runs" wait_for 5 bash -c "p=\$(pgrep -u $OWNER -f -- --mirror-watch) && [ \"\$p\" != '$wpid' ]"
sleep 0.3
as_owner sh -c "printf 'reload\n' >'$SRC/command/reload.md'"
if ms=$(ms_until 1000 test -f "$TREE/.config/opencode/command/reload.md"); then
	pass "after the reload a new file is in the mirror within a second ($ms ms)"
else
	fail "after the reload a new file is in the mirror within a second" "$(tail -5 "$E2E_SCRATCH/agentd.log")"
fi

# ---- the agent redirects its link to /etc before a refresh
touch "$E2E_SCRATCH/marker"
sleep 0.05
check "the agent may delete its link" agent rm "$AHOME/.config/opencode"
check "and put a link to /etc in its place" agent ln -s /etc "$AHOME/.config/opencode"
as_owner sh -c "printf 'after swap\n' >'$SRC/command/swap.md'"
check "positive control: the refresh happened (into the tree)" wait_for 2 test -f "$TREE/.config/opencode/command/swap.md"
check_output "root wrote nothing under /etc" '^$' find /etc -newer "$E2E_SCRATCH/marker"
check "no mirrored name appeared in /etc" gone /etc/command
check_output "a provisioning run puts the agent's link back" "link ~/.config/opencode -> $TREE/.config/opencode" provision
check_output "root wrote nothing under /etc during it either" '^$' find /etc -newer "$E2E_SCRATCH/marker"
check_output "the link points at the tree again" "^$TREE/.config/opencode\$" readlink "$AHOME/.config/opencode"

kill -TERM "$AGENTD"
wait_for 10 bash -c "! kill -0 $AGENTD 2>/dev/null"

# ---- remove
check_output "--remove removes the mirror" 'remove the mirror' provision --remove
check "the tree is gone" gone "$MIR"
check "the status file is gone" gone "/var/lib/ocsb/mirror/$AGENT.status"
check "the agent's link is gone" gone "$AHOME/.config/opencode"
check "the agent's writable copy stays (its own data)" test -f "$AHOME/.agents/.ocsb-writable-copy"
