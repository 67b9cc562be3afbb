# SPDX-License-Identifier: MIT
# Runs inside the e2e namespace (see tests/bench/sync). Prints "# ..." figure lines:
# the median of RUNS (3) interleaved runs of each case, and every run.
. "$E2E_LIB"
. "$(dirname "$0")/../e2e/common-prov.sh"

OCSB=$OCSB_BUILD/ocsb
AREPO=/home/$AGENT/shop
URL=ssh://$AGENT@localhost$AREPO
GSSH="ssh -i $SYNC_KEY -o IdentitiesOnly=yes -o BatchMode=yes -o UserKnownHostsFile=$PIN -o StrictHostKeyChecking=yes"
ocsb_owner() { as_owner env -C "$PROJECT" "$OCSB" "$@"; }
git_owner() { as_owner env -C "$PROJECT" GIT_SSH_COMMAND="$GSSH" git "$@"; }
ms() { # ms CMD...: wall time of one run in milliseconds; the command must succeed
	local t0 t1
	t0=$(date +%s%N)
	"$@" >/dev/null 2>"$E2E_SCRATCH/ms.err" || { echo "FAILED"; _detail "$*: $(tail -3 "$E2E_SCRATCH/ms.err")" >&2; return; }
	t1=$(date +%s%N)
	echo $(((t1 - t0) / 1000000))
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2fx", a / b; else print "n/a" }'; }

# gen TAG REF: fast-import COMMITS commits on REF; FILES files in 50 directories, each
# commit after the first changes two files.
gen() {
	python3 - "$1" "$2" "$COMMITS" "$FILES" <<'PY'
import sys
tag, ref, n, nf = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
w = sys.stdout.buffer.write
def data(b):
    w(b"data %d\n" % len(b) + b + b"\n")
t = 1700000000
for c in range(n):
    w(b"commit %s\nmark :%d\ncommitter Gen <gen@example.com> %d +0000\n" % (ref.encode(), c + 1, t + c))
    data(b"%s commit %d" % (tag.encode(), c))
    if c:
        w(b"from :%d\n" % c)
    files = range(nf) if c == 0 else ((c * 7) % nf, (c * 13 + 1) % nf)
    for f in files:
        w(b"M 100644 inline d%02d/f%05d.txt\n" % (f % 50, f))
        data(b"%s file %d version %d\n" % (tag.encode(), f, c) * 4)
PY
}

make_project
as_owner git config --global user.name Owner
as_owner git config --global user.email owner@example.com
as_owner sh -c "cd '$PROJECT' && echo one > a.txt && git add a.txt && git commit -qm one"
provision >/dev/null 2>&1 || { fail "provisioning"; exit 1; }
ocsb_owner sync push >/dev/null 2>&1
as_user "$AGENT" git config --global user.name Agent
as_user "$AGENT" git config --global user.email agent@example.com
t0=$(date +%s%N)
gen agent refs/heads/big | as_user "$AGENT" git -C "$AREPO" fast-import --quiet
gen ownA refs/heads/ownA | as_owner git -C "$PROJECT" fast-import --quiet
gen ownB refs/heads/ownB | as_owner git -C "$PROJECT" fast-import --quiet
t1=$(date +%s%N)
echo "# generated 3 histories of $COMMITS commits, $FILES files in $(((t1 - t0) / 1000000)) ms"
as_owner cp -a "$PROJECT/.git" "$E2E_SCRATCH/owner.git" 2>/dev/null ||
	{ cp -a "$PROJECT/.git" "$E2E_SCRATCH/owner.git"; }
restore() { rm -rf "$PROJECT/.git" && cp -a "$E2E_SCRATCH/owner.git" "$PROJECT/.git"; }
aone() { # one commit on big adding a file, without touching the agent's checkout
	as_user "$AGENT" sh -c "cd '$AREPO' && b=\$(echo inc $1 | git hash-object -w --stdin) &&
		nt=\$( (git ls-tree big | grep -v '	inc.txt\$'; printf '100644 blob %s\tinc.txt\n' \$b) | git mktree) &&
		c=\$(git commit-tree \$nt -p big -m inc$1) && git update-ref refs/heads/big \$c"
}

RUNS=${RUNS:-3}
median() { # median of the arguments; FAILED if any run failed
	case " $* " in *FAILED*) echo FAILED; return ;; esac
	printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}
acopy() { cp -a "$AREPO/.git" "$E2E_SCRATCH/agent.git"; }
arestore() { rm -rf "$AREPO/.git" && cp -a "$E2E_SCRATCH/agent.git" "$AREPO/.git"; }
acopy
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
po=() pg=() pio=() pig=() so=() sg=() sio=() sig=()
# Runs interleave ocsb and git so that a load change hits both alike.
for i in $(seq "$RUNS"); do
	# --- pull: initial fetch of the whole agent history, from the same starting point
	restore
	po+=("$(ms ocsb_owner sync pull)")
	restore
	pg+=("$(ms git_owner fetch -q "$URL" "+refs/heads/*:refs/remotes/$AGENT/*")")
done
# --- pull: one-commit increment (a new agent commit before each run)
for i in $(seq "$RUNS"); do
	aone "o$i"
	pio+=("$(ms ocsb_owner sync pull)")
	aone "g$i"
	pig+=("$(ms git_owner fetch -q "$URL" "+refs/heads/*:refs/remotes/$AGENT/*")")
done
# --- push: initial (two histories of the same shape into the agent's saved state)
for i in $(seq "$RUNS"); do
	arestore
	so+=("$(ms ocsb_owner sync push ownA)")
	sg+=("$(ms git_owner push -q "$URL" refs/heads/ownB:refs/heads/ownB)")
done
# --- push: one commit each on top of what the agent has
for i in $(seq "$RUNS"); do
	as_owner sh -c "cd '$PROJECT' && git checkout -q ownA && echo $i > x.txt && git add x.txt && git commit -qm incA$i &&
		git checkout -q ownB && echo $i > x.txt && git add x.txt && git commit -qm incB$i && git checkout -q main"
	sio+=("$(ms ocsb_owner sync push ownA)")
	sig+=("$(ms git_owner push -q "$URL" refs/heads/ownB:refs/heads/ownB)")
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

row() { # row LABEL "ocsb runs" "git runs"
	local mo mg
	# shellcheck disable=SC2086
	mo=$(median $2)
	# shellcheck disable=SC2086
	mg=$(median $3)
	printf '#   %-28s ocsb %8s   git %8s   ocsb/git %-6s (runs: ocsb %s; git %s)\n' \
		"$1" "$mo" "$mg" "$(ratio "$mo" "$mg")" "$2" "$3"
}
echo "# ocsb sync benchmark: $COMMITS commits, $FILES files, median of $RUNS interleaved runs (ms)"
row "pull, initial:" "${po[*]}" "${pg[*]}"
row "pull, one-commit increment:" "${pio[*]}" "${pig[*]}"
row "push, initial:" "${so[*]}" "${sg[*]}"
row "push, one-commit increment:" "${sio[*]}" "${sig[*]}"
pass "sync benchmark ran"
