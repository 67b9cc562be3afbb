#!/bin/bash
# SPDX-License-Identifier: MIT
# inject-probe.sh DIR: t-86's searches for the injected keys in OpenCode's conditions,
# run by agentd's test hook (<run>/ocsb/test-wrap-opencode) in OpenCode's place: its uid,
# environment, sandbox, cgroup and netlock. The first instance to claim DIR/claim runs it.
# The values come once through the FIFO DIR/needles ("NAME=VALUE" lines, written by root):
# never on a command line nor in a file. Output (the instance's log), names only:
#   T86<TAB>PLACE<TAB>NAME<TAB>found|none    PLACE: env, files, proc, answers
#   T86<TAB>answers-refused<TAB>-<TAB>N      refusals among the injector's answers
#   T86<TAB>git-url<TAB>-<TAB>URL            where git sends https://git.example/repo.git
#   T86<TAB>git-clone<TAB>-<TAB>TEXT         the cloned README, or "failed"
#   T86<TAB>done
d=$1
mkdir "$d/claim" 2>/dev/null || exit 0
out() { printf 'T86\t%s\t%s\t%s\n' "$1" "$2" "$3"; }
declare -A V
while IFS='=' read -r k v; do
	[ -n "$k" ] && V[$k]=$v
done < <(timeout 30 cat "$d/needles")
# has NAME: the value of NAME is in stdin (matched from a pipe, never an argument)
has() { grep -qF -f <(printf '%s\n' "${V[$1]}"); }
files_have() {
	grep -rlsF -f <(printf '%s\n' "${V[$1]}") /home /run /tmp /var /etc /dev/shm /opt 2>/dev/null | grep -q .
}
proc_all() {
	for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline /proc/[0-9]*/task/*/environ; do
		cat "$f" 2>/dev/null
		echo
	done
}
# Requests that try to send the injector elsewhere, and a route whose upstream fails TLS,
# once the injector answers (a push starts it as it restarts OpenCode).
R=http://127.0.0.1:18400
for _ in $(seq 40); do
	curl -s -m 2 -o /dev/null "$R/v2/ready" && break
	sleep 0.5
done
answers=$({
	curl -sS -i -m 10 --request-target https://badca.test/v1/messages "$R/v1/messages"
	curl -sS -i -m 10 -p -x "$R" https://badca.test/
	curl -sS -i -m 10 --path-as-is "$R/v1/../admin"
	curl -sS -i -m 10 --path-as-is "$R/v1/%2e%2e/admin"
	curl -sS -i -m 10 "$R/v2/models"
	curl -sS -i -m 10 -X TRACE "$R/v1/messages"
	curl -sS -i -m 10 http://127.0.0.1:18401/anything
	curl -sS -i -m 10 -H 'Host: badca.test' -d '{}' "$R/v1/messages"
} 2>&1)
for name in "${!V[@]}"; do
	env | has "$name" && out env "$name" found || out env "$name" none
	files_have "$name" && out files "$name" found || out files "$name" none
	proc_all | has "$name" && out proc "$name" found || out proc "$name" none
	has "$name" <<<"$answers" && out answers "$name" found || out answers "$name" none
done
out answers-refused - "$(grep -cE '^HTTP/1.1 (4|5)[0-9][0-9] ' <<<"$answers")"
out git-url - "$(git ls-remote --get-url https://git.example/repo.git 2>&1)"
t=$(mktemp -d)
if git clone -q https://git.example/repo.git "$t/c" >/dev/null 2>&1; then
	out git-clone - "$(cat "$t/c/README")"
else
	out git-clone - failed
fi
rm -rf "$t"
printf 'T86\tdone\n'
