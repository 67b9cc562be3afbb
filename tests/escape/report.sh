#!/bin/bash
# SPDX-License-Identifier: MIT
#
# report.sh DIR PLACE...: the escape battery's verdicts compared with the expected ones.
#
# Reads, in DIR (the battery's directory, as world.sh and the runs leave it):
#   battery.sh + probes.sh    the table (`battery.sh list`)
#   control.out               `battery.sh control` (C lines)
#   PLACE.out, PLACE.judged   `battery.sh run PLACE` and `battery.sh judge PLACE ...` (V lines;
#                             a judged verdict replaces the run's "judge")
# Prints one TAP line per probe and place, the control first ("ok - ...", "not ok - ..." with
# "  # " detail lines, "ok - ... # SKIP reason"), then
#   # escape battery places differ (...): ID(agentd=V,ssh=V) ...
#   # escape battery: N probes x P places: P passed, F failed, S skipped [(T s)]
# where P places counts the places whose PLACE.out exists (a place that did not run gives
# "# SKIP the battery did not run there" lines); T is ESC_SECONDS when set. Also writes
# DIR/table (id, place, verdict, expected). Exit 0 when nothing failed, 1 otherwise.
#
# A probe is ok when its control worked and its verdict is the expected one. "error" (a
# probe that crashed, timed out, lacked a tool or was refused for an undeclared reason) is
# never expected: always not ok, with the cause.

set -u
export LC_ALL=C
DIR=${1:?usage: report.sh DIR PLACE...}
shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BATTERY=$DIR/battery.sh
[ -f "$BATTERY" ] || BATTERY=$HERE/battery.sh

. "$HERE/tap.sh"

declare -A CONTROL EXPECT CAT DESC VERDICT DETAIL
LIST=$(ESC_DIR=$DIR bash "$BATTERY" list) || { notok "escape battery: cannot list the probes ($BATTERY)"; exit 1; }
while IFS=$'\t' read -r id cat exp _ desc; do
	CAT[$id]=$cat EXPECT[$id]=$exp DESC[$id]=$desc
done <<<"$LIST"
[ -f "$DIR/control.out" ] && while IFS=$'\t' read -r _ id v; do CONTROL[$id]=$v; done <"$DIR/control.out"
RAN=()
for place in "$@"; do
	[ -f "$DIR/$place.out" ] || continue
	RAN+=("$place")
	while IFS=$'\t' read -r _ id v d; do
		VERDICT[$place/$id]=$v DETAIL[$place/$id]=$d
	done < <(cat "$DIR/$place.out" "$DIR/$place.judged" 2>/dev/null | grep $'^V\t')
done
# What the running kernel cannot do (docs/escape.md, README's platform table): before 6.12,
# Landlock has no abstract-socket scope, so i-abstract is open there (ocsb doctor WARNs).
KERNEL_GAP=
kv=$(uname -r)
kmaj=${kv%%.*} kmin=${kv#*.} kmin=${kmin%%[!0-9]*}
if [ "${kmaj:-0}" -lt 6 ] || { [ "${kmaj:-0}" -eq 6 ] && [ "${kmin:-0}" -lt 12 ]; }; then
	KERNEL_GAP="i-abstract"
fi
expected() { # expected ID PLACE
	local e=${EXPECT[$1]} x
	case " $KERNEL_GAP " in *" $1 "*) echo open; return ;; esac
	case $e in *=*)
		for x in ${e//,/ }; do [ "${x%%=*}" = "$2" ] && { echo "${x#*=}"; return; }; done
		echo "?"; return ;;
	esac
	echo "$e"
}

P=0 F=0 S=0 N=0 DIFF=()
: >"$DIR/table"
while IFS=$'\t' read -r id _; do
	N=$((N + 1))
	name="escape [${CAT[$id]}] $id (${DESC[$id]})"
	got=()
	for place in "$@"; do
		v=${VERDICT[$place/$id]:-}
		if [ -z "$v" ]; then
			skip "$name @$place" "the battery did not run there"
			S=$((S + 1))
			continue
		fi
		got+=("$place=$v")
		want=$(expected "$id" "$place")
		d=${DETAIL[$place/$id]}
		if [ "$v" = skip ]; then
			skip "$name @$place" "$d"
			S=$((S + 1))
		elif [ "$v" = error ]; then
			notok "$name @$place: error (the probe broke: it proves nothing)" "$d"
			F=$((F + 1))
		elif [ "${CONTROL[$id]:-fail}" != ok ]; then
			notok "$name @$place: $v, but the positive control failed (a probe that cannot fail asserts nothing)" "$d"
			F=$((F + 1))
		elif [ "$v" = "$want" ]; then
			case " $KERNEL_GAP " in *" $id "*) d="kernel $kv: no Landlock abstract-socket scope before 6.12 (ocsb doctor WARNs)${d:+; $d}" ;; esac
			ok "$name @$place: $v${d:+ ($d)}"
			P=$((P + 1))
		else
			notok "$name @$place: $v, expected $want" "$d"
			F=$((F + 1))
		fi
		printf '%s\t%s\t%s\t%s\n' "$id" "$place" "$v" "$want" >>"$DIR/table"
	done
	if [ "${#got[@]}" -gt 1 ]; then
		vs=$(printf '%s\n' "${got[@]}" | sed 's/^[^=]*=//' | sort -u | wc -l)
		[ "$vs" -gt 1 ] && DIFF+=("$id($(IFS=,; echo "${got[*]}"))")
	fi
done <<<"$LIST"
echo "# escape battery places differ (each declared in probes.sh, see docs/escape.md): ${DIFF[*]:-none}"
echo "# escape battery: $N probes x ${#RAN[@]} places: $P passed, $F failed, $S skipped${ESC_SECONDS:+ ($ESC_SECONDS s)}"
[ "$F" -eq 0 ]
