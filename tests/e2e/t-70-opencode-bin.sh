# SPDX-License-Identifier: MIT
# opencode-bin: ocsb-provision accepts only a binary that root alone can replace, says why
# and how to fix it otherwise, and --check reports it as drift once OpenCode is part of the
# setup. The namespace has no network, so --install-opencode of the real release is only
# checked in its --check and --dry-run forms here (its --check compares the installed tree
# with the pinned manifest); t-71 installs through a loopback registry.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

HDR=$(dirname "$0")/../../common/opencode.h
hdr() { sed -n "s/^#define $1 \"\\(.*\\)\"\$/\\1/p" "$HDR"; }
OC_VERSION=$(hdr OCSB_OPENCODE_VERSION)
OC_PREFIX=$(hdr OCSB_OPENCODE_PREFIX)
OC_BIN=$OC_PREFIX/$(hdr OCSB_OPENCODE_BIN_REL)
CONF=/etc/ocsb/ocsb.conf
MARKER=/var/lib/ocsb/opencode-install

if [ ! -x "$OC_BIN" ]; then
	skip "opencode-bin checks" "OpenCode not installed at $OC_BIN (sudo make deps installs it)"
	exit 0
fi

# set_bin PATH: opencode-bin PATH in the config (none with an empty PATH).
set_bin() {
	sed -i '/^opencode-bin /d' "$CONF"
	[ -n "$1" ] && printf 'opencode-bin "%s"\n' "$1" >>"$CONF"
	return 0
}

make_project
check_output "provisioned without opencode-bin" '^ocsb-provision: [1-9][0-9]* changes$' provision
check_output "the config documents opencode-bin" "^#opencode-bin $OC_BIN$" cat "$CONF"
check_output "the config documents opencode-port" '^#opencode-port 4096$' cat "$CONF"

# --- the installed binary (positive control for everything below)
set_bin "$OC_BIN"
check_output "opencode-bin = the installed binary: accepted" '^ocsb-provision: 0 changes$' provision
check_output "--check: no drift with the installed binary" '^ocsb-provision: 0 differences' prov --check

# --- a copy in a directory the owner controls
as_owner mkdir -p "$OWNER_HOME/bin"
cp "$OC_BIN" "$OWNER_HOME/bin/opencode"
# A HOME of its own: even --version creates ~/.config/opencode, which the mirror would pick up.
as_owner mkdir -p "$OWNER_HOME/.cache/t70-home"
check "positive control: the copy runs" as_owner env HOME="$OWNER_HOME/.cache/t70-home" "$OWNER_HOME/bin/opencode" --version
set_bin "$OWNER_HOME/bin/opencode"
snapshot_state copy
check_fails_output "a copy in the owner's home is refused, naming the directory" \
	"^ocsb-provision: error: opencode-bin: $OWNER_HOME: directory not owned by root \(uid [0-9]+\): its owner could replace what runs; use a root-owned location \(sudo ocsb-provision --install-opencode installs OpenCode in $OC_PREFIX\)$" \
	provision
state_unchanged "refused without changing anything" copy
check_output "the refusal is bad input: exit 2" '^2$' bash -c "'$OCSB_BUILD/ocsb-provision' --owner $OWNER --project $PROJECT >/dev/null 2>&1; echo \$?"
check_fails_output "--check reports it as drift" \
	"^drift: OpenCode binary unusable: $OWNER_HOME: directory not owned by root" prov --check
check_fails_output "--check counts it" '^ocsb-provision: 1 difference from the configuration' prov --check

# --- root's copy, but in a directory others may write to
mkdir -p /etc/ocsb/bin
cp "$OC_BIN" /etc/ocsb/bin/opencode
set_bin /etc/ocsb/bin/opencode
check_output "positive control: a root-owned copy in a root-owned directory is accepted" \
	'^ocsb-provision: 0 changes$' provision
chmod 0775 /etc/ocsb/bin
check_fails_output "a group-writable directory is refused with the chmod to run" \
	'opencode-bin: /etc/ocsb/bin: directory writable by group or others \(mode 0775\).*fix: sudo chmod go-w /etc/ocsb/bin$' provision
chmod 0755 /etc/ocsb/bin
chmod 0775 /etc/ocsb/bin/opencode
check_fails_output "a group-writable binary is refused" \
	'opencode-bin: /etc/ocsb/bin/opencode: writable by group or others \(mode 0775\); fix: sudo chmod go-w /etc/ocsb/bin/opencode$' provision
chmod 0755 /etc/ocsb/bin/opencode
chown "$OWNER" /etc/ocsb/bin/opencode
check_fails_output "a binary owned by the owner is refused" \
	"opencode-bin: /etc/ocsb/bin/opencode: not owned by root \(uid [0-9]+\)" provision
chown root /etc/ocsb/bin/opencode

# --- links: each one must be root's, wherever it points
ln -s "$OC_BIN" /etc/ocsb/bin/oc-link
set_bin /etc/ocsb/bin/oc-link
check_output "positive control: a root-owned link to the installed binary is accepted" \
	'^ocsb-provision: 0 changes$' provision
chown -h "$OWNER" /etc/ocsb/bin/oc-link
check_fails_output "the same link owned by the owner is refused" \
	'opencode-bin: /etc/ocsb/bin/oc-link: symbolic link not owned by root' provision
rm -f /etc/ocsb/bin/oc-link

# --- missing
set_bin /opt/ocsb/nosuch/opencode
check_fails_output "a missing binary: the install hint" \
	'^drift: OpenCode binary unusable: /opt/ocsb/nosuch/opencode: not found \(/opt/ocsb/nosuch is missing\); run: sudo ocsb-provision --install-opencode$' \
	prov --check
check_fails_output "a missing binary is refused when applying" \
	'opencode-bin: /opt/ocsb/nosuch/opencode: not found.*run: sudo ocsb-provision --install-opencode' provision

# --- not set, and the default binary missing (a new machine; apt purge removed /opt/ocsb):
# provisioning installs the pinned release (issue 28, item 3), whether or not
# --install-opencode ran here before. t-71 installs it through a loopback registry.
set_bin ""
rm -rf /etc/ocsb/bin
mount -t tmpfs -o mode=0755 e2e-no-opencode "$(dirname "$OC_PREFIX")"
check "positive control: the default binary is now missing" test ! -e "$OC_BIN"
check_fails_output "not set, never installed here: --check reports OpenCode missing" \
	"^drift: install OpenCode $OC_VERSION into $OC_PREFIX with npm \(not installed\)$" \
	prov --check
check_output "  ... and --dry-run plans its install" \
	"^would: install OpenCode $OC_VERSION into $OC_PREFIX with npm \(not installed\)$" \
	prov --dry-run
mkdir -p /var/lib/ocsb
printf 'version %s\nprefix %s\n' "$OC_VERSION" "$OC_PREFIX" >"$MARKER"
check_fails_output "installed here once (marker): --check reports the missing default the same way" \
	"^drift: install OpenCode $OC_VERSION into $OC_PREFIX with npm \(not installed\)$" \
	prov --check
check_fails_output "  ... counted once" '^ocsb-provision: 1 difference from the configuration' \
	prov --check
check_output "--install-opencode --dry-run plans the install" \
	"^would: install OpenCode $OC_VERSION into $OC_PREFIX with npm \(not installed\)$" \
	prov --install-opencode --dry-run
check_fails_output "--install-opencode --check reports it" \
	"^drift: install OpenCode $OC_VERSION into $OC_PREFIX with npm \(not installed\)$" \
	prov --install-opencode --check
umount "$(dirname "$OC_PREFIX")"
check_output "back with the installed binary: no drift" '^ocsb-provision: 0 differences' prov --check

# --- --install-opencode's own check of an installed tree (runs it as nobody)
v=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$OC_PREFIX/node_modules/opencode-ai/package.json" | head -n 1)
if [ "$v" = "$OC_VERSION" ]; then
	check_output "--install-opencode --check: the installed $OC_VERSION is in place" \
		"^OpenCode $OC_VERSION: $OC_BIN$" prov --install-opencode --check
	check_output "--install-opencode --check: no difference" '^ocsb-provision: 0 differences' \
		prov --install-opencode --check
else
	skip "--install-opencode --check of the installed tree" "installed $v, pinned $OC_VERSION"
fi
check_fails_output "--install-opencode=latest is refused" 'give an exact release such as' \
	prov --install-opencode=latest
