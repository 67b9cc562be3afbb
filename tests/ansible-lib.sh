# SPDX-License-Identifier: MIT
# Sourced by tests/e2e/t-35-ansible.sh and tests/vm/run.sh: running the Ansible role the
# same way in the harness (-c local) and into a VM guest (over ssh).

# ansible_env DIR ROLES_PATH: what ansible-playbook writes stays under DIR (not root's
# ~/.ansible), no colours, no retry files, pipelining (one ssh round trip a task). ansible-core
# refuses a locale that is not UTF-8 (the harnesses run with LC_ALL=C).
ansible_env() {
	mkdir -p "$1/tmp" "$1/home" "$1/cp" || return 1
	export LC_ALL=C.UTF-8 ANSIBLE_NOCOLOR=1 ANSIBLE_RETRY_FILES_ENABLED=0 ANSIBLE_PIPELINING=1 \
		ANSIBLE_LOCAL_TEMP=$1/tmp ANSIBLE_HOME=$1/home ANSIBLE_SSH_CONTROL_PATH_DIR=$1/cp \
		ANSIBLE_ROLES_PATH=$2 ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3 \
		ANSIBLE_DEPRECATION_WARNINGS=0
}

# ansible_play DIR NAME HOST ARGS...: one `ansible-playbook ARGS...` (at most 600 s: a hung
# play is a failure, not a run that never ends), its output in DIR/NAME.out, its wall time
# in DIR/NAME.time and PLAY_TIME, HOST's recap counts in RECAP_CHANGED and RECAP_FAILED.
# Returns the play's exit status.
ansible_play() {
	local dir=$1 name=$2 host=$3 t0 rc
	shift 3
	t0=$(date +%s.%N)
	timeout -k 10 600 ansible-playbook "$@" </dev/null >"$dir/$name.out" 2>&1
	rc=$?
	PLAY_TIME=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	echo "$PLAY_TIME" >"$dir/$name.time"
	RECAP_CHANGED=$(sed -n "s/^$host *: .*changed=\([0-9]*\).*/\1/p" "$dir/$name.out")
	RECAP_FAILED=$(sed -n "s/^$host *: .*failed=\([0-9]*\).*/\1/p" "$dir/$name.out")
	return $rc
}

# ansible_prov_says DIR NAME: the summary lines ocsb-provision printed in that play (-v
# shows them), counted.
ansible_prov_says() {
	grep -o 'ocsb-provision: [0-9]* [a-z]*' "$1/$2.out" | sort | uniq -c | sed 's/^ *//' | paste -sd ';'
}
