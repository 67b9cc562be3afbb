#!/bin/sh
# SPDX-License-Identifier: MIT
# embed.sh NAME FILE: print a C header holding FILE as the string constant NAME.
# Used for files ocsb-provision installs on first run (the shipped egress defaults).
set -eu
name=$1 file=$2
printf '/* Generated from %s by tools/embed.sh; do not edit. */\n' "$file"
printf 'static const char %s[] =\n' "$name"
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/\t"/' -e 's/$/\\n"/' "$file"
printf '\t"";\n'
