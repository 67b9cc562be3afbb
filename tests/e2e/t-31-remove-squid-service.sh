# SPDX-License-Identifier: MIT
# Debian's squid.service holds ocsb's default proxy port: provisioning stops and disables
# it, and the removal of the last agent puts it back as ocsb found it (issue 28, item 8:
# it was left disabled). There is no systemd in the namespace: a stand-in systemctl (bound
# over /usr/bin/systemctl, with /run/systemd/system made) answers for squid.service from a
# state file, records every call, and says inactive or succeeds for everything else.
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"

T=/run/t31
mkdir -p $T
cat >$T/systemctl <<EOF2
#!/bin/sh
echo "\$*" >>$T/calls
case "\$*" in
"is-enabled --quiet squid.service") grep -qx enabled $T/enabled ;;
"is-active --quiet squid.service") grep -qx active $T/active ;;
"disable --now squid.service") echo disabled >$T/enabled; echo inactive >$T/active ;;
"enable squid.service") echo enabled >$T/enabled ;;
"start squid.service") echo active >$T/active ;;
is-active* | is-enabled*) exit 3 ;;
esac
EOF2
chmod 0755 $T/systemctl
mount --bind $T/systemctl /usr/bin/systemctl
mkdir -p /run/systemd/system
echo enabled >$T/enabled
echo active >$T/active
FOUND=/var/lib/ocsb/squid.service.found

make_project
check_output "provisioning stops and disables squid.service" \
	"^\+ stop and disable squid.service \(Debian's own squid, on 127.0.0.1:3128" provision
check_output "  ... through systemctl" '^disable --now squid.service$' cat $T/calls
check_output "  ... and records what it found" '^enabled active$' cat $FOUND
check_output "  ... root's" '^644 root$' stat -c '%a %U' $FOUND
provision >$T/second 2>&1
check_output "a second run succeeds" '^ocsb-provision: [0-9]+ changes?$' cat $T/second
check_fails "  ... and finds squid.service off: nothing to do with it" grep -q squid.service $T/second
: >$T/calls
check_output "--remove of the last agent puts it back" \
	'^- put squid.service back as ocsb found it \(enabled active\)$' prov --remove
check_output "  ... enabled and started again" '^enable squid.service start squid.service $' \
	bash -c "grep -x -e 'enable squid.service' -e 'start squid.service' $T/calls | tr '\n' ' '"
check_output "  ... its state: enabled, active" '^enabled active$' bash -c "echo \$(cat $T/enabled $T/active)"
check_fails "  ... and the record is gone" test -e $FOUND
: >$T/calls
check_output "--remove --purge: nothing more to put back" '^ocsb-provision: [1-9]' prov --remove --purge
check_fails "  ... no systemctl call for squid.service" grep -q squid.service $T/calls

# Found disabled and inactive (the owner had turned it off): provisioning leaves it alone,
# and the removal does not turn it on.
echo disabled >$T/enabled
echo inactive >$T/active
: >$T/calls
check_output "found off: provisioning leaves squid.service alone" '^ocsb-provision: [1-9]' provision
check_fails "  ... no stop and disable" grep -x 'disable --now squid.service' $T/calls
check_fails "  ... no record" test -e $FOUND
check_output "  ... and --remove --purge starts nothing" '^ocsb-provision: [1-9]' prov --remove --purge
check_fails "  ... still off" grep -x -e 'enable squid.service' -e 'start squid.service' $T/calls
umount /usr/bin/systemctl
