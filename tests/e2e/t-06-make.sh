#!/bin/bash
# SPDX-License-Identifier: MIT
#
# t-06-make.sh: the Makefile as a newcomer meets it (issue 28). make run as root (sudo make
# deb-install, sudo make install, sudo make test-all) in a clone the owner owns leaves
# nothing there that is not the owner's: what root's make wrote is handed back (the
# Makefile's first lines, tools/handback.sh), when a goal fails too. Cheap goals only:
# build/gen/buildflags.h is a file make writes without compiling anything; the real
# targets were run by hand (docs/install.md). `make help` lists every target one types.
# `make deps` installs no test tooling; `make test-deps` adds it (issue 28 item 7).
# shellcheck disable=SC2016 # the bash -c snippets expand their variables themselves

# shellcheck source=lib.sh
. "$E2E_LIB"

REPO=$(cd "$(dirname "$E2E_LIB")/../.." && pwd)
# The suite itself may run under make (make test-all exports MAKELEVEL and MAKEFLAGS to
# everything below it): the make a person types at a prompt has neither.
unset MAKELEVEL MAKEFLAGS MFLAGS
export TREE=$OWNER_HOME/ocsb
mkdir "$TREE"
tar -C "$REPO" --exclude=./.git --exclude='./build*' --exclude='./ocsb_*.deb' -cf - . |
	tar -C "$TREE" -xf -
chown -R "$OWNER:$(id -gn "$OWNER")" "$TREE"
# "PATH OWNER" for every entry of the clone that is not the owner's.
not_owners='find "$TREE" ! -user "$OWNER" -printf "%P %u\n"'

check_output "the clone is the owner's before (control)" '^0$' bash -c "$not_owners | wc -l"

# Positive control: with the hand-back off (a sub-make's level), root's make leaves a
# root-owned file behind: the check below can see one.
check_output "root's make without the hand-back leaves build/gen/buildflags.h root's (control)" \
	'^build/gen/buildflags.h root$' \
	bash -c 'MAKELEVEL=1 make -s -C "$TREE" build/gen/buildflags.h >/dev/null && '"$not_owners"' | grep buildflags'
rm -rf "$TREE/build"

check_output "root's make in the owner's clone says what it handed back" 'handed back to uid' \
	make -C "$TREE" build/gen/buildflags.h
check_output "nothing in the clone is left that is not the owner's" '^0$' bash -c "$not_owners | wc -l"
check_output "the file root's make wrote is there, the owner's" "^$OWNER\$" \
	stat -c %U "$TREE/build/gen/buildflags.h"

rm -f "$TREE/build/gen/buildflags.h"
check_fails_output "a goal that fails still fails (make's exit status kept)" 'no-such-goal' \
	make -C "$TREE" build/gen/buildflags.h no-such-goal
check_output "what the failed run wrote is handed back too" '^0$' bash -c "$not_owners | wc -l"
check "the owner can remove what root's make wrote (make clean)" as_owner make -s -C "$TREE" clean
check_fails "build/ is gone" test -e "$TREE/build"

# --- make help: one line for each target a person types
phony=$(as_owner make -s -C "$TREE" -pRrq : 2>/dev/null | sed -n 's/^\.PHONY: //p' | tr ' ' '\n' |
	grep -vxE 'FORCE|need-.*|fuzz-build|handback' | sort)
help=$(as_owner make -s -C "$TREE" help 2>&1)
missing=$(for t in $phony; do grep -qE "^  $t +[^ ]" <<<"$help" || echo "$t"; done)
check_output "the Makefile declares its targets (control)" '^test-all$' echo "$phony"
check_output "make help lists every one of them, each with its line" '^none$' \
	echo "${missing:-none}"

# --- make deps is building and running; make test-deps adds the tests' tooling (issue 28
# item 7: make deps had installed QEMU, mmdebstrap, lintian, clang-format for every user).
# tools/install-deps.sh --list prints what each target installs; nothing is installed here.
TOOLING='libcmocka-dev|clang|clang-format|lintian|mmdebstrap|qemu-system-x86|qemu-utils|gnome-keyring|python3|dbus-x11|libclang-rt-.*|ansible-core|ansible-lint'
deps=$("$TREE/tools/install-deps.sh" --list)
test_deps=$("$TREE/tools/install-deps.sh" --list --test)
check_output "make deps installs no test tooling" '^none$' \
	bash -c 'o=$(grep -xE "$1" <<<"$2" | tr "\n" " "); echo "${o:-none}"' _ "$TOOLING" "$deps"
check_output "  ... and what running ocsb needs (control: squid, nftables, openssh-server)" '^3$' \
	bash -c 'grep -cxE "squid|nftables|openssh-server" <<<"$1"' _ "$deps"
check_output "make test-deps adds the tooling (control: QEMU, mmdebstrap, cmocka, clang)" '^4$' \
	bash -c 'grep -cxE "qemu-system-x86|mmdebstrap|libcmocka-dev|clang" <<<"$1"' _ "$test_deps"
check_output "  ... ansible-core, for the Ansible role's test (t-35)" '^ansible-core$' \
	bash -c 'grep -x ansible-core <<<"$1"' _ "$test_deps"
check_output "  ... on top of everything make deps installs" '^none$' \
	bash -c 'o=$(comm -23 <(sort <<<"$1") <(sort <<<"$2") | tr "\n" " "); echo "${o:-none}"' _ "$deps" "$test_deps"
