# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/mirror). Prints "# ..." figure lines.
. "$E2E_LIB"

BIN=$OCSB_BUILD/bench_mirror_refresh
if [ ! -x "$BIN" ]; then
	fail "bench_mirror_refresh built" "run: make $OCSB_BUILD/bench_mirror_refresh"
	exit 0
fi
useradd -m -s /bin/bash benchagent
# 10,000 files in 100 folders, 200..1200 bytes each, the shape of a large config tree.
as_owner python3 -c '
import os, random
random.seed(7)
base = os.path.expanduser("~/.config/opencode")
for d in range(100):
    p = os.path.join(base, "skills", "s%03d" % d)
    os.makedirs(p, exist_ok=True)
    for f in range(100):
        with open(os.path.join(p, "f%03d.md" % f), "w") as fh:
            fh.write("---\ndescription: skill %d/%d\n---\n" % (d, f) + "x" * random.randint(200, 1200) + "\n")
'
n=$(find "$OWNER_HOME/.config/opencode" -type f | wc -l)
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
ms() { # ms CMD...: wall time in milliseconds
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>&1
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
out=$("$BIN" "$OWNER" benchagent "$ROUNDS" 2>&1) || { fail "bench_mirror_refresh ran" "$out"; exit 0; }
full=$(awk '$1 == "full" {print $2}' <<<"$out" | median)
again=$(awk '$1 == "nochange" {print $2}' <<<"$out" | median)
writes=$(awk '$1 == "nochange" {s += $3} END {print s + 0}' <<<"$out")
fullcpu=$(awk '$1 == "full" {print $5}' <<<"$out" | median)
againcpu=$(awk '$1 == "nochange" {print $5}' <<<"$out" | median)
dst=$E2E_SCRATCH/ref
cpa=() rs1=() rs2=()
for ((i = 0; i < ROUNDS; i++)); do
	rm -rf "$dst"
	cpa+=("$(ms cp -a "$OWNER_HOME/.config/opencode" "$dst")")
	if command -v rsync >/dev/null; then
		rm -rf "$dst"
		rs1+=("$(ms rsync -a "$OWNER_HOME/.config/opencode/" "$dst/")")
		rs2+=("$(ms rsync -a "$OWNER_HOME/.config/opencode/" "$dst/")")
	fi
done
c=$(printf '%s\n' "${cpa[@]}" | median)
echo "# mirror benchmark: $n files, median of $ROUNDS rounds"
echo "#   full build:          $full ms   (target < 1000 ms)   all: $(awk '$1 == "full" {printf "%s ", $2}' <<<"$out")"
echo "#   no-change refresh:   $again ms   (target < 50 ms)     all: $(awk '$1 == "nochange" {printf "%s ", $2}' <<<"$out")"
echo "#   CPU time (user+sys, reader child included): full $fullcpu ms, no-change $againcpu ms"
echo "#   load average during the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "#   writes in no-change refreshes: $writes"
echo "#   cp -a (root, no owner drop, no scan):  $c ms"
awk -v f="$full" -v r="$c" 'BEGIN { if (r > 0) printf "#   full / cp -a:        %.2fx\n", f / r }'
if [ "${#rs1[@]}" -gt 0 ]; then
	r1=$(printf '%s\n' "${rs1[@]}" | median)
	r2=$(printf '%s\n' "${rs2[@]}" | median)
	echo "#   rsync -a full:       $r1 ms;  rsync -a no change: $r2 ms"
	awk -v f="$again" -v r="$r2" 'BEGIN { if (r > 0) printf "#   no-change / rsync:   %.2fx\n", f / r }'
else
	echo "#   rsync not installed: no rsync reference"
fi
pass "mirror benchmark ran ($ROUNDS rounds)"
