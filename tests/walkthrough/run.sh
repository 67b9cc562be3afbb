#!/bin/bash
# SPDX-License-Identifier: MIT
# The README's quick start, followed as a new user would, in a fresh Debian root (issue 15's
# acceptance walk-through). Opt-in, root, not part of `make test`:
#
#   sudo [WALK_RELEASE=trixie] tests/walkthrough/run.sh [ROOT.tar]
#
# ROOT.tar: a fresh root (default: made now with `mmdebstrap --variant=apt
# --include=sudo,git,ca-certificates,passwd RELEASE`, kept in /var/tmp/ocsb-walk-root.tar
# for bookworm, /var/tmp/ocsb-walk-root-RELEASE.tar for another). WALK_RELEASE: the Debian
# release, bookworm (12, the default) or trixie (13). passwd: the machine's `useradd dev`
# (Debian 12's apt variant has it; Debian 13's does not, where an installed system does).
# The "machine": that root with a developer account `dev` (sudo without a password, so the
# steps run unattended), /etc/hosts, and Docker's policy-rc.d (a container: installing
# a package starts no service; there is no systemd). The developer's clone of ocsb is a
# `git archive` of HEAD committed into a new repository; ~/code/myproject holds one commit.
# Steps that download (apt, npm: `make deps`, `make deb-install`) run with the host's
# network; everything after them runs in a network namespace of its own (only its
# loopback), so nothing the walk-through loads (nftables) or starts (sshd, squid,
# ocsb-agentd) touches this machine's ruleset or ports. The transcript (each command, its
# output, its exit status and wall time) goes to stdout and to WORK/transcript.txt; the root
# is removed at the end unless WALK_KEEP=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root" >&2; exit 1; }

release=${WALK_RELEASE:-bookworm}
case $release in
bookworm) tar_in=${1:-/var/tmp/ocsb-walk-root.tar} ;;
[a-z]*) tar_in=${1:-/var/tmp/ocsb-walk-root-$release.tar} ;;
*) echo "run.sh: WALK_RELEASE '$release' is not a Debian release name" >&2; exit 2 ;;
esac
# WALK_REUSE=DIR: the kept work directory of an earlier run (WALK_KEEP=1), whose root has
# the downloads already: its clone is refreshed from HEAD (as `git pull` would) and only the
# isolated steps run, from `make deps deb-install` (which then downloads nothing) on.
if [ -n "${WALK_REUSE:-}" ]; then
	work=$WALK_REUSE root=$work/root transcript=$work/transcript-reuse.txt
	rm -rf "$root/home/dev/ocsb.new" && mkdir "$root/home/dev/ocsb.new"
	git -C "$src" archive HEAD | tar -C "$root/home/dev/ocsb.new" -xf -
	cp "$here/say.sh" "${WALK_STEPS_ISOLATED:-$here/steps-isolated.sh}" "$root/home/dev/"
	chroot "$root" chown -R dev:dev /home/dev
	chroot "$root" su - dev -c 'cd ~/ocsb && git rm -rq . && cp -a ../ocsb.new/. . &&
		rm -rf ../ocsb.new && git add -A && git commit -qm "pulled"' >/dev/null
	WALK_HOST_NETNS=$(readlink /proc/self/ns/net) LIBMOUNT_UTAB=$work/utab \
		unshare --mount --pid --fork --kill-child=SIGKILL --propagation private --net -- \
		"$here/in-ns.sh" "$root" isolated su - dev -c \
		"bash ~/say.sh ~/$(basename "${WALK_STEPS_ISOLATED:-$here/steps-isolated.sh}")" 2>&1 |
		tee "$transcript"
	exit 0
fi
if [ ! -f "$tar_in" ]; then
	if ! mmdebstrap --variant=apt --format=tar --include=sudo,git,ca-certificates,passwd \
		"$release" "$tar_in.part"; then
		rm -f "$tar_in.part"
		echo "run.sh: mmdebstrap failed" >&2
		exit 1
	fi
	mv "$tar_in.part" "$tar_in"
fi
work=$(mktemp -d /var/tmp/ocsb-walk.XXXXXX)
root=$work/root
transcript=$work/transcript.txt
cleanup() {
	[ "${WALK_KEEP:-0}" = 1 ] && { echo "# kept $work"; return; }
	awk -v w="$root" '$5 == w || index($5, w "/") == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount -l "$m"; done
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT
mkdir "$root"
tar -C "$root" -xf "$tar_in"

# ---- the machine, before the developer arrives ----
printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n::1\tlocalhost ip6-localhost ip6-loopback\n' "$(hostname)" >"$root/etc/hosts"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod 755 "$root/usr/sbin/policy-rc.d"
# This machine's own way out (a TLS-inspecting proxy's CA, npm's cafile) is the machine's,
# not the README's: the root gets the same, as it would on a machine behind that proxy.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
	cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
	chroot "$root" update-ca-certificates >/dev/null 2>&1
fi
[ -f /etc/npmrc ] && cp /etc/npmrc "$root/etc/npmrc"
chroot "$root" useradd -m -s /bin/bash -G sudo dev
echo 'dev ALL=(ALL) NOPASSWD: ALL' >"$root/etc/sudoers.d/dev" && chmod 440 "$root/etc/sudoers.d/dev"
mkdir -p "$root/home/dev/ocsb"
git -C "$src" archive HEAD | tar -C "$root/home/dev/ocsb" -xf -
cat >"$root/home/dev/setup.sh" <<'SETUP'
set -e
git config --global user.name "Dev Eloper"
git config --global user.email dev@example.invalid
git config --global init.defaultBranch main
cd ~/ocsb && git init -q && git add -A && git commit -qm "ocsb as cloned"
mkdir -p ~/code/myproject && cd ~/code/myproject && git init -q
echo "# myproject" >README.md && git add README.md && git commit -qm "first commit"
SETUP
chroot "$root" chown -R dev:dev /home/dev
chroot "$root" su - dev -c 'sh ~/setup.sh' || { echo "run.sh: developer setup failed" >&2; exit 1; }

# ---- the developer's steps ----
# WALK_STEPS_NET and WALK_STEPS_ISOLATED: files of shell commands run by `dev` in a login
# shell, one by one, each echoed with its output and exit status.
steps_net=${WALK_STEPS_NET:-$here/steps-net.sh}
steps_iso=${WALK_STEPS_ISOLATED:-$here/steps-isolated.sh}
cp "$here/say.sh" "$steps_net" "$root/home/dev/" && cp "$steps_iso" "$root/home/dev/"
chroot "$root" chown dev:dev /home/dev/say.sh "/home/dev/$(basename "$steps_net")" \
	"/home/dev/$(basename "$steps_iso")"
# WALK_ISOLATED_WRAP: a command line the isolated part runs under, e.g. a container's
# seccomp filter: "env SECCOMP_RUN_NNP=0 /path/to/tests/e2e/seccomp-run.py EPERM keyctl,mlock --".
in_root() { # net|isolated STEPS-FILE
	local net=() wrap=()
	[ "$1" = isolated ] && net=(--net) && read -ra wrap <<<"${WALK_ISOLATED_WRAP:-}"
	WALK_HOST_NETNS=$(readlink /proc/self/ns/net) LIBMOUNT_UTAB=$work/utab \
		"${wrap[@]}" unshare --mount --pid --fork --kill-child=SIGKILL --propagation private \
		"${net[@]}" -- "$here/in-ns.sh" "$root" "$1" \
		su - dev -c "bash ~/say.sh ~/$(basename "$2")"
}
echo "# walk-through in $root: $(sed -n 's/^PRETTY_NAME="\(.*\)"$/\1/p' "$root/etc/os-release")" |
	tee "$transcript"
t0=$SECONDS
in_root net "$steps_net" 2>&1 | tee -a "$transcript"
t1=$SECONDS
in_root isolated "$steps_iso" 2>&1 | tee -a "$transcript"
t2=$SECONDS
echo "# wall time: $((t1 - t0)) s with the network, $((t2 - t1)) s isolated, $((t2 - t0)) s in all" |
	tee -a "$transcript"
echo "# transcript: $transcript"
