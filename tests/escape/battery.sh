#!/bin/bash
# SPDX-License-Identifier: MIT
#
# battery.sh: the escape battery's runner (probes in probes.sh beside it).
#
#   battery.sh list               id, category, expected verdict, description (tab-separated)
#   battery.sh run PLACE          every probe as the calling user (the agent); one line each:
#                                 "V<TAB>id<TAB>open|blocked|skip|judge<TAB>detail"
#   battery.sh judge PLACE ID...  root, after the run: "V<TAB>id<TAB>open|blocked<TAB>judged"
#   battery.sh control            root: every positive control, "C<TAB>id<TAB>ok|fail"
#
# ESC_DIR (default: this script's directory) holds probes.sh and canaries.env. Every probe
# runs under `timeout`, in its own subshell, so a hanging or crashing probe is a verdict
# ("blocked" with its exit status as detail), never a stuck battery.

set -u
export LC_ALL=C
ESC_DIR=${ESC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
export ESC_DIR
PROBE_TIMEOUT=${PROBE_TIMEOUT:-20}
. "$ESC_DIR/probes.sh"

mode=${1:-}
case $mode in
list)
	for p in "${PROBES[@]}"; do
		IFS='|' read -r id cat exp desc <<<"$p"
		printf '%s\t%s\t%s\t%s\n' "$id" "$cat" "$exp" "$desc"
	done
	;;
run)
	C_PLACE=${2:?usage: battery.sh run PLACE}
	export C_PLACE
	echo "# escape battery at $C_PLACE: uid $(id -u) ($(id -un)), pid $$"
	for p in "${PROBES[@]}"; do
		IFS='|' read -r id _ _ _ <<<"$p"
		out=$(timeout -k 2 "$PROBE_TIMEOUT" bash -c \
			". \"\$ESC_DIR/probes.sh\"; p_$id" 2>/dev/null </dev/null)
		rc=$?
		detail=$(printf '%s' "$out" | tail -n 1 | tr '\t' ' ' | cut -c1-200)
		case $rc in
		0) v=open ;;
		77) v=skip ;;
		78) v=judge ;;
		*) v=blocked detail="exit $rc" ;;
		esac
		printf 'V\t%s\t%s\t%s\n' "$id" "$v" "$detail"
	done
	echo "# escape battery at $C_PLACE: done"
	;;
judge)
	place=${2:?usage: battery.sh judge PLACE ID...}
	shift 2
	for id in "$@"; do
		if timeout -k 2 "$PROBE_TIMEOUT" bash -c ". \"\$ESC_DIR/probes.sh\"; j_$id \"\$0\"" \
			"$place" </dev/null >/dev/null 2>&1; then
			printf 'V\t%s\topen\tjudged\n' "$id"
		else
			printf 'V\t%s\tblocked\tjudged\n' "$id"
		fi
	done
	;;
control)
	for p in "${PROBES[@]}"; do
		IFS='|' read -r id _ _ _ <<<"$p"
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
