# SPDX-License-Identifier: MIT
# The agent's cgroup as ocsb-agentd makes it (cgroup v1 here: one per controller).

# agent_cgroups AGENTD_PID: the agent's cgroup directories, one a line.
agent_cgroups() {
	awk -F: -v a="$AGENT" '{
		n = split($2, c, ",")
		for (i = 1; i <= n; i++)
			if (c[i] ~ /^(memory|pids|cpu|freezer)$/) print "/sys/fs/cgroup/" c[i] $3 "/ocsb-" a
	}' "/proc/$1/cgroup" | sed 's#//*#/#g'
}

# in_agent_cgroup AGENTD_PID CMD...: CMD as the agent inside its cgroup, entered as root
# first and then dropped, the way ocsb-agentd starts OpenCode.
in_agent_cgroup() {
	local dirs
	dirs=$(agent_cgroups "$1" | tr '\n' ' ')
	shift
	bash -c 'for d in '"$dirs"'; do echo $$ >"$d/cgroup.procs" || exit 1; done
		exec setpriv --reuid="$0" --regid="$0" --init-groups --reset-env env -C /tmp "$@"' \
		"$AGENT" "$@"
}

# in_cgroup_of PID DIR: 0 when process PID is in cgroup directory DIR.
in_cgroup() { grep -qx "$1" "$2/cgroup.procs"; }

# set_limits MEMORY TASKS CPU: the limit-* lines of ocsb.conf, replacing the ones there.
set_limits() {
	sed -i -E '/^[[:space:]]*limit-(memory|tasks|cpu)[[:space:]]/d' /etc/ocsb/ocsb.conf
	printf 'limit-memory %s\nlimit-tasks %s\nlimit-cpu %s\n' "$1" "$2" "$3" >>/etc/ocsb/ocsb.conf
}
