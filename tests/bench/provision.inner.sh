# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/provision). Prints "# ..." figure lines.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"

make_project
ms() { # ms CMD...: wall time of one run in milliseconds
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

reference() { # the unavoidable system work of a fresh run, done by hand
	useradd --create-home --user-group --shell /bin/bash refuser &&
		usermod --password '*' refuser &&
		sshd -t && sshd -t && sshd -T -C user=refuser,host=localhost,addr=127.0.0.1 >/dev/null &&
		setpriv --reuid=refuser --regid=refuser --init-groups git init -q /home/refuser/shop
	userdel --remove refuser 2>/dev/null
}

fresh=() again=() ref=()
for ((i = 0; i < ROUNDS; i++)); do
	fresh+=("$(ms provision)")
	again+=("$(ms provision)")
	prov --remove --purge >/dev/null 2>&1
	ref+=("$(ms reference)")
done
f=$(printf '%s\n' "${fresh[@]}" | median)
a=$(printf '%s\n' "${again[@]}" | median)
r=$(printf '%s\n' "${ref[@]}" | median)
echo "# ocsb-provision benchmark, median of $ROUNDS rounds"
echo "#   fresh provisioning:        $f ms   (target < 1500 ms)   all: ${fresh[*]}"
echo "#   no-change re-run:          $a ms   (target < 300 ms)    all: ${again[*]}"
echo "#   reference (bare tools):    $r ms   (useradd, usermod, sshd -t x2, sshd -T, git init)"
awk -v f="$f" -v r="$r" 'BEGIN { if (r > 0) printf "#   fresh / reference:         %.2fx\n", f / r }'
pass "benchmark ran ($ROUNDS rounds)"
