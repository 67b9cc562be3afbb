#!/bin/bash
# SPDX-License-Identifier: MIT
#
# battery.sh: the escape battery's runner (probes in probes.sh beside it).
#
#   battery.sh list               id, category, expected verdict, reasons that count as
#                                 blocked (comma-separated), description (tab-separated)
#   battery.sh run PLACE          every probe as the calling user (the agent); one line each:
#                                 "V<TAB>id<TAB>open|blocked|error|skip|judge<TAB>detail"
#   battery.sh judge PLACE ID...  root, after the run: "V<TAB>id<TAB>open|blocked|error<TAB>detail"
#   battery.sh control            root: every positive control, "C<TAB>id<TAB>ok|fail"
#
# The protocol (probes.sh): a probe exits 0 when the attempt worked (open), 10 after a line
# "BLOCKED <reason> [detail]" when it was refused, 77 to skip, 78 to be judged later. The
# verdict "blocked" needs both the status 10 and a reason the probe's PROBES line declares.
# Everything else is "error", a failure with the cause as detail: a signal (a crash), a
# time-out (124/137), a missing tool (127), any other status, status 10 without a BLOCKED
# line, or a reason nobody declared (a probe that broke cannot pass for a protection).
#
# ESC_DIR (default: this script's directory) holds probes.sh and canaries.env. Every probe
# runs under `timeout` (PROBE_TIMEOUT, default 20 s), in its own subshell, so a hanging or
# crashing probe is a verdict, never a stuck battery.
#
# ESC_ONLY=ID[,ID...] keeps only those probes (every mode, list included).
#
# Fault injection, to test the runner itself: ESC_BREAK=ID[:MODE] makes probe ID (in run
# mode) break instead of running: MODE signal (default: it kills itself with SIGSEGV),
# missing (a command that does not exist: 127), hang (sleeps past the time-out), reason (a
# BLOCKED line with an undeclared reason), silent (status 10 without a BLOCKED line), fail
# (exit 1). Each must come out as "error".

set -u
export LC_ALL=C
ESC_DIR=${ESC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
export ESC_DIR
PROBE_TIMEOUT=${PROBE_TIMEOUT:-20}
ESC_BLOCKED=10
. "$ESC_DIR/probes.sh"

if [ -n "${ESC_ONLY:-}" ]; then
	kept=()
	for p in "${PROBES[@]}"; do
		case ,$ESC_ONLY, in *",${p%%|*},"*) kept+=("$p") ;; esac
	done
	PROBES=("${kept[@]}")
fi
declare -A REASONS
for p in "${PROBES[@]}"; do
	IFS='|' read -r id _ _ reasons _ <<<"$p"
	REASONS[$id]=$reasons
done

# verdict ID RC OUTPUT: prints "VERDICT<TAB>detail" for a probe or judge that exited RC.
verdict() {
	local id=$1 rc=$2 out=$3 last reason detail sig
	last=$(printf '%s' "$out" | grep -v '^[[:space:]]*$' | tail -n 1 | tr '\t' ' ' | cut -c1-200)
	case $rc in
	0) printf 'open\t%s\n' "$last"; return ;;
	77) printf 'skip\t%s\n' "$last"; return ;;
	78) printf 'judge\t%s\n' "$last"; return ;;
	124 | 137) printf 'error\ttimed out after %s s (exit %s)%s\n' "$PROBE_TIMEOUT" "$rc" "${last:+: $last}"; return ;;
	127) printf 'error\ta command was not found (exit 127)%s\n' "${last:+: $last}"; return ;;
	"$ESC_BLOCKED") ;;
	*)
		if [ "$rc" -gt 128 ]; then
			sig=$(kill -l $((rc - 128)) 2>/dev/null)
			printf 'error\tkilled by SIG%s (exit %s)%s\n' "${sig:-?}" "$rc" "${last:+: $last}"
		else
			printf 'error\texit %s without a verdict%s\n' "$rc" "${last:+: $last}"
		fi
		return
		;;
	esac
	last=$(printf '%s' "$out" | grep '^BLOCKED [^ ]' | tail -n 1 | tr '\t' ' ' | cut -c1-200)
	[ -n "$last" ] || { printf 'error\texit %s without a BLOCKED line\n' "$rc"; return; }
	detail=${last#BLOCKED }
	reason=${detail%% *}
	case ",${REASONS[$id]:-}," in
	*",$reason,"*) printf 'blocked\t%s\n' "$detail" ;;
	*) printf 'error\tblocked for an undeclared reason: %s (declared: %s)\n' "$detail" "${REASONS[$id]:-none}" ;;
	esac
}

# The subshell's code for one probe: ESC_BREAK's fault instead of the probe when it names it.
probe_code() {
	local id=$1 mode
	case ${ESC_BREAK:-} in
	"$id" | "$id":*)
		mode=${ESC_BREAK#"$id"}
		mode=${mode#:}
		case ${mode:-signal} in
		signal) echo 'kill -SEGV $BASHPID' ;;
		missing) echo 'ocsb-escape-no-such-tool' ;;
		hang) echo 'sleep 3600' ;;
		reason) echo 'echo "BLOCKED EBOGUS injected by ESC_BREAK"; exit 10' ;;
		silent) echo 'exit 10' ;;
		*) echo 'exit 1' ;;
		esac
		return
		;;
	esac
	echo ". \"\$ESC_DIR/probes.sh\"; p_$id"
}

mode=${1:-}
case $mode in
list)
	for p in "${PROBES[@]}"; do
		IFS='|' read -r id cat exp reasons desc <<<"$p"
		printf '%s\t%s\t%s\t%s\t%s\n' "$id" "$cat" "$exp" "$reasons" "$desc"
	done
	;;
run)
	C_PLACE=${2:?usage: battery.sh run PLACE}
	export C_PLACE
	echo "# escape battery at $C_PLACE: uid $(id -u) ($(id -un)), pid $$${ESC_RUN:+, run $ESC_RUN}"
	for p in "${PROBES[@]}"; do
		IFS='|' read -r id _ _ _ _ <<<"$p"
		out=$(timeout -k 2 "$PROBE_TIMEOUT" bash -c "$(probe_code "$id")" 2>&1 </dev/null)
		rc=$?
		printf 'V\t%s\t%s\n' "$id" "$(verdict "$id" "$rc" "$out")"
	done
	echo "# escape battery at $C_PLACE: done${ESC_RUN:+, run $ESC_RUN}"
	;;
judge)
	place=${2:?usage: battery.sh judge PLACE ID...}
	shift 2
	for id in "$@"; do
		out=$(timeout -k 2 "$PROBE_TIMEOUT" bash -c ". \"\$ESC_DIR/probes.sh\"; j_$id \"\$0\"" \
			"$place" 2>&1 </dev/null)
		rc=$?
		case $rc in 77 | 78) rc=1 ;; esac	# a judge has no skip or later
		printf 'V\t%s\t%s\n' "$id" "$(verdict "$id" "$rc" "$out")"
	done
	;;
control)
	for p in "${PROBES[@]}"; do
		IFS='|' read -r id _ _ _ _ <<<"$p"
		if timeout -k 2 "$PROBE_TIMEOUT" bash -c ". \"\$ESC_DIR/probes.sh\"; c_$id" \
			</dev/null >/dev/null 2>&1; then
			printf 'C\t%s\tok\n' "$id"
		else
			printf 'C\t%s\tfail\n' "$id"
		fi
	done
	;;
*)
	echo "usage: battery.sh list | run PLACE | judge PLACE ID... | control" >&2
	exit 2
	;;
esac
