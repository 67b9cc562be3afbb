# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/sync). For each repository shape, three
# pull cases (initial, one-commit, no-change), ocsb sync pull and git fetch over the same
# sshd, key and pin, runs interleaved; prints "# ..." lines: the median of RUNS runs, the
# ratio ocsb/git, every run, and the peak RSS (largest process) of each tool.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
AREPO=/home/$AGENT/shop
URL=ssh://$AGENT@localhost$AREPO
GSSH="ssh -i $SYNC_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=$PIN -o StrictHostKeyChecking=yes"
RUNS=${RUNS:-3}
COMMITS=${COMMITS:-20000}
FILES=${FILES:-5000}
BRANCHES=${BRANCHES:-500}
TAGS=${TAGS:-3000}
BIG_MB=${BIG_MB:-200}
SHAPES=${SHAPES:-shared long unrelated merges manyrefs bigfile}
PUSH=${PUSH:-1}

ocsb_pull() { as_owner env -C "$PROJECT" "$OCSB" sync pull; }
git_fetch() {
	as_owner env -C "$PROJECT" GIT_SSH_COMMAND="$GSSH" git fetch -q "$URL" \
		"+refs/heads/*:refs/remotes/$AGENT/*"
}
git_owner() { as_owner env -C "$PROJECT" GIT_SSH_COMMAND="$GSSH" git "$@"; }
# run CMD...: "MS RSS_KIB" of one run (wall time; the peak RSS of the largest process of
# the command's tree, RUSAGE_CHILDREN), or FAILED. CMD may be a function of this script.
run() {
	python3 - "$@" 2>"$E2E_SCRATCH/run.err" <<'PY' || { echo FAILED; _detail "$*: $(tail -3 "$E2E_SCRATCH/run.err")" >&2; }
import resource, subprocess, sys, time
t0 = time.monotonic()
r = subprocess.run(["bash", "-c", '"$@"', "run"] + sys.argv[1:], stdout=subprocess.DEVNULL)
t1 = time.monotonic()
if r.returncode != 0:
    sys.exit(1)
print(int((t1 - t0) * 1000), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "n/a" }'; }
median() { # median of the arguments; FAILED if any run failed
	case " $* " in *FAILED*) echo FAILED; return ;; esac
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
maxof() { printf '%s\n' "$@" | sort -n | tail -1; }

# gen TAG REF N NF [FROM] [MODE]: fast-import N commits on REF (after commit FROM if
# given): NF files in 50 directories in the first, each later commit changes two. Commit
# ids depend on the arguments only, so two repositories importing the same get the same.
gen() {
	python3 - "$@" <<'PY'
import sys
tag, ref, n, nf = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
frm = sys.argv[5] if len(sys.argv) > 5 else ""
w = sys.stdout.buffer.write
def data(b):
    w(b"data %d\n" % len(b) + b + b"\n")
t = 1700000000
for c in range(n):
    w(b"commit %s\nmark :%d\ncommitter Gen <gen@example.com> %d +0000\n" % (ref.encode(), c + 1, t + c))
    data(b"%s commit %d" % (tag.encode(), c))
    if c:
        w(b"from :%d\n" % c)
    elif frm:
        w(b"from %s\n" % frm.encode())
    files = range(nf) if (c == 0 and not frm) else ((c * 7) % nf, (c * 13 + 1) % nf)
    for f in files:
        w(b"M 100644 inline d%02d/f%05d.txt\n" % (f % 50, f))
        data(b"%s file %d version %d\n" % (tag.encode(), f, c) * 4)
PY
}

# gen_merges N NF: refs/heads/main with N/10 commits, refs/heads/work with N commits on
# main's first that merges main's next commit every 10 commits.
gen_merges() {
	python3 - "$1" "$2" <<'PY'
import sys
n, nf = int(sys.argv[1]), int(sys.argv[2])
m = max(2, n // 10)
w = sys.stdout.buffer.write
def data(b):
    w(b"data %d\n" % len(b) + b + b"\n")
t = 1700000000
def commit(ref, mark, msg, parents, files, tag):
    global t
    t += 1
    w(b"commit %s\nmark :%d\ncommitter Gen <gen@example.com> %d +0000\n" % (ref, mark, t))
    data(msg)
    for i, p in enumerate(parents):
        w(b"%s :%d\n" % (b"from" if i == 0 else b"merge", p))
    for f in files:
        w(b"M 100644 inline d%02d/f%05d.txt\n" % (f % 50, f))
        data(b"%s file %d version %d\n" % (tag, f, mark) * 4)
# main: marks 1..m
for j in range(m):
    commit(b"refs/heads/main", j + 1, b"main %d" % j, [j] if j else [],
           range(nf) if j == 0 else ((j * 7) % nf,), b"main")
# work: marks m+1..m+n, on main's first commit, merging main's j-th commit now and then
prev, nextmain = 1, 2
for i in range(n):
    mark = m + 1 + i
    parents = [prev]
    if i % 10 == 9 and nextmain <= m:
        parents.append(nextmain)
        nextmain += 1
    commit(b"refs/heads/work", mark, b"work %d" % i, parents, ((i * 13 + 1) % nf, (i * 17 + 3) % nf), b"work")
    prev = mark
PY
}

# gen_refs NF BRANCHES TAGS: main (one commit, NF files), BRANCHES branches of one commit
# on it, TAGS lightweight tags over them, a note on every branch's commit.
gen_refs() {
	python3 - "$@" <<'PY'
import sys
nf, nb, nt = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
w = sys.stdout.buffer.write
def data(b):
    w(b"data %d\n" % len(b) + b + b"\n")
w(b"commit refs/heads/main\nmark :1\ncommitter Gen <gen@example.com> 1700000000 +0000\n")
data(b"main")
for f in range(nf):
    w(b"M 100644 inline d%02d/f%05d.txt\n" % (f % 50, f))
    data(b"file %d\n" % f * 4)
for b in range(nb):
    w(b"commit refs/heads/b%04d\nmark :%d\ncommitter Gen <gen@example.com> %d +0000\n" % (b, b + 2, 1700000001 + b))
    data(b"branch %d" % b)
    w(b"from :1\n")
    w(b"M 100644 inline b/%04d.txt\n" % b)
    data(b"branch %d\n" % b)
for k in range(nt):
    w(b"reset refs/tags/t%05d\nfrom :%d\n\n" % (k, 2 + k % nb))
w(b"commit refs/notes/commits\ncommitter Gen <gen@example.com> 1700100000 +0000\n")
data(b"notes")
for b in range(nb):
    w(b"N inline :%d\n" % (b + 2))
    data(b"note %d\n" % b)
PY
}

# aone BRANCH TAG: one commit on the agent's BRANCH adding a file, without its checkout
aone() {
	as_user "$AGENT" sh -c "cd '$AREPO' && b=\$(echo inc $2 | git hash-object -w --stdin) &&
		nt=\$( (git ls-tree $1 | grep -v '	inc.txt\$'; printf '100644 blob %s\tinc.txt\n' \$b) | git mktree) &&
		c=\$(git commit-tree \$nt -p $1 -m inc$2) && git update-ref refs/heads/$1 \$c"
}
# big_commit BRANCH MIB: one commit on BRANCH adding MIB MiB of random bytes
big_commit() {
	as_user "$AGENT" sh -c "cd '$AREPO' && b=\$(head -c $(($2 * 1048576)) /dev/urandom | git hash-object -w --stdin) &&
		nt=\$( (git ls-tree $1; printf '100644 blob %s\tbig.bin\n' \$b) | git mktree) &&
		c=\$(git commit-tree \$nt -p $1 -m big) && git update-ref refs/heads/$1 \$c"
}

# fresh: an empty agent clone and the owner's project at its one first commit
fresh() {
	rm -rf "$AREPO/.git" && as_user "$AGENT" git init -q "$AREPO"
	rm -rf "$PROJECT/.git" && cp -a "$E2E_SCRATCH/owner0.git" "$PROJECT/.git"
}
both() { # both CMD...: the same fast-import stream into the owner's and the agent's repositories
	"$@" >"$E2E_SCRATCH/stream"
	as_owner git -C "$PROJECT" fast-import --quiet --force <"$E2E_SCRATCH/stream" &&
		as_user "$AGENT" git -C "$AREPO" fast-import --quiet --force <"$E2E_SCRATCH/stream"
}
agent_import() { "$@" | as_user "$AGENT" git -C "$AREPO" fast-import --quiet --force; }
owner_main() { as_owner git -C "$PROJECT" rev-parse main; }

# setup_SHAPE: the agent's clone and the owner's repository before the first pull; sets
# BR, the agent branch the one-commit case adds to.
setup_shared() { # the owner's main is big; the agent adds a short branch on it
	both gen main refs/heads/main "$COMMITS" "$FILES" || return 1
	as_user "$AGENT" git -C "$AREPO" branch -q work main
	for i in 1 2 3; do aone work "s$i"; done
	BR=work
}
setup_long() { # the agent's branch: COMMITS commits on top of the owner's main
	both gen main refs/heads/main 1 "$FILES" || return 1
	agent_import gen work refs/heads/work "$COMMITS" "$FILES" "$(owner_main)"
	BR=work
}
setup_unrelated() { # the agent's branch shares no commit with the owner's
	both gen main refs/heads/main 1 "$FILES" || return 1
	agent_import gen agent refs/heads/big "$COMMITS" "$FILES"
	BR=big
}
setup_merges() { # the agent's branch merges the owner's main again and again
	both gen_merges "$COMMITS" "$FILES" || return 1
	as_owner git -C "$PROJECT" update-ref -d refs/heads/work
	BR=work
}
setup_manyrefs() { # BRANCHES branches, TAGS tags and notes on the agent's side
	gen_refs "$FILES" 0 0 | as_owner git -C "$PROJECT" fast-import --quiet --force || return 1
	agent_import gen_refs "$FILES" "$BRANCHES" "$TAGS"
	BR=b0000
}
setup_bigfile() { # one commit adding a BIG_MB MiB file
	both gen main refs/heads/main 1 "$FILES" || return 1
	as_user "$AGENT" git -C "$AREPO" branch -q big main
	big_commit big "$BIG_MB"
	BR=big
}

# traced CASE: one ocsb sync pull with OCSB_SYNC_TRACE=1 (its phases); with PERF=1 also
# under perf record, and the top of its profile (symbols, self time).
traced() {
	local pre=()
	[ "${PERF:-}" = 1 ] && pre=(perf record -q -g -o "$E2E_SCRATCH/perf.data" --)
	echo "# trace $SHAPE $1:"
	"${pre[@]}" setpriv --reuid="$OWNER" --regid="$OWNER" --init-groups --reset-env \
		env -C "$PROJECT" OCSB_SYNC_TRACE=1 \
		"$OCSB" sync pull 2>&1 >/dev/null | sed 's/^/#     /'
	[ "${PERF:-}" = 1 ] && perf report -i "$E2E_SCRATCH/perf.data" --stdio --no-children \
		--sort dso,sym -g none 2>/dev/null | grep -v '^#' | grep . | head -"${PERF_LINES:-40}" | sed 's/^/#     /'
}
# traced_git CASE: the same for git fetch: its child processes (index-pack, rev-list) and
# their times, from GIT_TRACE2_EVENT.
traced_git() {
	local ev=$E2E_SCRATCH/trace2.json
	rm -f "$ev" && touch "$ev" && chmod 0666 "$ev"
	echo "# trace git fetch $SHAPE $1:"
	as_owner env -C "$PROJECT" GIT_TRACE2_EVENT="$ev" GIT_SSH_COMMAND="$GSSH" git fetch -q "$URL" \
		"+refs/heads/*:refs/remotes/$AGENT/*"
	python3 - "$ev" <<'PY' | sed 's/^/#     /'
import json, sys
start = {}
t0 = None
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("event") == "version" and t0 is None:
        t0 = e.get("t_abs", 0)
    if e.get("event") == "child_start":
        start[(e["sid"], e["child_id"])] = (e.get("t_abs", 0), " ".join(e.get("argv", []))[:70])
    if e.get("event") == "child_exit" and (e["sid"], e["child_id"]) in start:
        ts, argv = start[(e["sid"], e["child_id"])]
        print("git child %8.1f ms +%7.1f ms: %s" % ((ts - (t0 or ts)) * 1e3, e.get("t_rel", 0) * 1e3, argv))
    if e.get("event") == "exit" and e.get("sid", "").count("/") == 0:
        print("git exit  %8.1f ms" % ((e.get("t_abs", 0) - (t0 or 0)) * 1e3))
PY
}
row() { # row LABEL "ocsb runs" "git runs"
	local mo mg
	# shellcheck disable=SC2086
	mo=$(median $2)
	# shellcheck disable=SC2086
	mg=$(median $3)
	printf '#   %-22s ocsb %7s ms  git %7s ms  ocsb/git %-6s (runs: ocsb %s; git %s)\n' \
		"$1" "$mo" "$mg" "$(ratio "$mo" "$mg")" "$2" "$3"
	SUMMARY+=("$(printf '%-10s %-11s %7s' "$SHAPE" "${1%:}" "$(ratio "$mo" "$mg")")")
}
ms_of() { local s="" x; for x in "$@"; do s+="${x%% *} "; done; echo "$s"; }
rss_of() { local s="" x; for x in "$@"; do [ "$x" = FAILED ] || s+="${x##* } "; done; echo "$s"; }

make_project
# The owner works on main (HEAD): agent branches without a same-name branch of the owner's
# are reviewed against it. (Left on git's default, HEAD would be an unrelated one-commit
# master and every shape would be reviewed as an unrelated history.)
as_owner git -C "$PROJECT" symbolic-ref HEAD refs/heads/main
as_owner git config --global user.name Owner
as_owner git config --global user.email owner@example.com
as_owner sh -c "cd '$PROJECT' && echo one > a.txt && git add a.txt && git commit -qm one"
provision >/dev/null 2>&1 || { fail "provisioning"; exit 1; }
ocsb_owner() { as_owner env -C "$PROJECT" "$OCSB" "$@"; }
export -f as_user as_owner ocsb_pull git_fetch git_owner ocsb_owner
export OWNER PROJECT OCSB GSSH URL AGENT
ocsb_owner sync push >/dev/null 2>&1
as_user "$AGENT" git config --global user.name Agent
as_user "$AGENT" git config --global user.email agent@example.com
cp -a "$PROJECT/.git" "$E2E_SCRATCH/owner0.git"
echo "# sizes: COMMITS=$COMMITS FILES=$FILES BRANCHES=$BRANCHES TAGS=$TAGS BIG_MB=$BIG_MB RUNS=$RUNS"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
SUMMARY=()
RSS=()
for SHAPE in $SHAPES; do
	t0=$(date +%s%N)
	fresh
	if ! "setup_$SHAPE" >/dev/null 2>"$E2E_SCRATCH/setup.err"; then
		fail "bench shape $SHAPE: setup" "$(tail -5 "$E2E_SCRATCH/setup.err")"
		continue
	fi
	rm -rf "$E2E_SCRATCH/owner.git" && cp -a "$PROJECT/.git" "$E2E_SCRATCH/owner.git"
	# The set-up's writes go to disk now, not during the first timed runs of either tool.
	sync
	t1=$(date +%s%N)
	echo "# shape $SHAPE: set up in $(((t1 - t0) / 1000000)) ms"
	restore() { rm -rf "$PROJECT/.git" && cp -a "$E2E_SCRATCH/owner.git" "$PROJECT/.git"; }
	io=() ig=() oo=() og=() no=() ng=()
	# Runs interleave ocsb and git, so that a change of load hits both alike.
	for i in $(seq "$RUNS"); do
		restore
		io+=("$(run ocsb_pull)")
		restore
		ig+=("$(run git_fetch)")
	done
	if [ -n "${TRACE:-}" ]; then # the initial pull traced, in the state the runs had
		restore
		traced initial
		restore
		traced_git initial
		restore
	fi
	# one-commit: a pull after an earlier pull of the same branch (ocsb's own memo exists)
	run ocsb_pull >/dev/null
	for i in $(seq "$RUNS"); do
		aone "$BR" "o$i"
		oo+=("$(run ocsb_pull)")
		aone "$BR" "g$i"
		og+=("$(run git_fetch)")
	done
	# no-change: each tool right after its own pull of the same state
	run ocsb_pull >/dev/null
	for i in $(seq "$RUNS"); do
		no+=("$(run ocsb_pull)")
		ng+=("$(run git_fetch)")
	done
	if [ -n "${TRACE:-}" ]; then # one traced pull of each kind (OCSB_SYNC_TRACE)
		aone "$BR" t1
		traced one-commit
		traced no-change
	fi
	echo "# shape $SHAPE (median of $RUNS interleaved runs)"
	row "initial:" "$(ms_of "${io[@]}")" "$(ms_of "${ig[@]}")"
	row "one-commit:" "$(ms_of "${oo[@]}")" "$(ms_of "${og[@]}")"
	row "no-change:" "$(ms_of "${no[@]}")" "$(ms_of "${ng[@]}")"
	# shellcheck disable=SC2046
	ro=$(maxof $(rss_of "${io[@]}" "${oo[@]}" "${no[@]}"))
	# shellcheck disable=SC2046
	rg=$(maxof $(rss_of "${ig[@]}" "${og[@]}" "${ng[@]}"))
	echo "#   peak RSS (largest process, KiB): ocsb $ro, git fetch $rg"
	RSS+=("$(printf '%-10s ocsb %8s KiB  git fetch %8s KiB' "$SHAPE" "$ro" "$rg")")
done

if [ "$PUSH" = 1 ]; then
	# push: an owner history of COMMITS commits into the agent's clone, then one commit
	fresh
	gen ownA refs/heads/ownA "$COMMITS" "$FILES" | as_owner git -C "$PROJECT" fast-import --quiet
	gen ownB refs/heads/ownB "$COMMITS" "$FILES" | as_owner git -C "$PROJECT" fast-import --quiet
	cp -a "$AREPO/.git" "$E2E_SCRATCH/agent.git"
	arestore() { rm -rf "$AREPO/.git" && cp -a "$E2E_SCRATCH/agent.git" "$AREPO/.git"; }
	so=() sg=() sio=() sig=()
	for i in $(seq "$RUNS"); do
		arestore
		so+=("$(run ocsb_owner sync push ownA)")
		sg+=("$(run git_owner push -q "$URL" refs/heads/ownB:refs/heads/ownB)")
	done
	for i in $(seq "$RUNS"); do
		as_owner sh -c "cd '$PROJECT' && git checkout -q ownA && echo $i > x.txt && git add x.txt && git commit -qm incA$i &&
			git checkout -q ownB && echo $i > x.txt && git add x.txt && git commit -qm incB$i && git checkout -q main"
		sio+=("$(run ocsb_owner sync push ownA)")
		sig+=("$(run git_owner push -q "$URL" refs/heads/ownB:refs/heads/ownB)")
	done
	SHAPE=push
	echo "# push ($COMMITS commits, median of $RUNS interleaved runs)"
	row "initial:" "$(ms_of "${so[@]}")" "$(ms_of "${sg[@]}")"
	row "one-commit:" "$(ms_of "${sio[@]}")" "$(ms_of "${sig[@]}")"
fi
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# summary: ocsb sync pull / git fetch, median of $RUNS (COMMITS=$COMMITS FILES=$FILES BRANCHES=$BRANCHES TAGS=$TAGS BIG_MB=$BIG_MB)"
for l in "${SUMMARY[@]}"; do echo "#   $l"; done
echo "# peak RSS"
for l in "${RSS[@]}"; do echo "#   $l"; done
pass "sync benchmark ran"
