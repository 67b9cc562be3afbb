#!/bin/bash
# SPDX-License-Identifier: MIT
#
# far.sh (root, from ocsb-vm-far.service at boot): what the VM tier's boot probes connect to.
# The guest has no network device: a veth pair into a namespace with a TCP listener on
# 10.99.0.2:8080 ("outside"), and a listener on 127.0.0.1:7070 (a local service, as the
# owner runs on loopback). Returns once both accept; the listeners live on in the unit.
set -eu
listen() { # listen ADDR PORT: accept and close, forever
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(LocalAddr => $ARGV[0], LocalPort => $ARGV[1],
			Listen => 128, ReuseAddr => 1) or die "listen $ARGV[0]:$ARGV[1]: $!\n";
		while (my $c = $s->accept) { close $c }' "$1" "$2"
}
ip netns add ocsb-far
ip link add ocsb-v0 type veth peer name ocsb-v1 netns ocsb-far
ip addr add 10.99.0.1/24 dev ocsb-v0
ip link set ocsb-v0 up
ip -n ocsb-far addr add 10.99.0.2/24 dev ocsb-v1
ip -n ocsb-far link set ocsb-v1 up
ip -n ocsb-far link set lo up
listen 127.0.0.1 7070 &
ip netns exec ocsb-far bash -c "$(declare -f listen); listen 10.99.0.2 8080" &
for _ in $(seq 100); do
	if timeout 1 bash -c 'exec 3<>/dev/tcp/10.99.0.2/8080' 2>/dev/null &&
		timeout 1 bash -c 'exec 3<>/dev/tcp/127.0.0.1/7070' 2>/dev/null; then
		exit 0
	fi
	sleep 0.1
done
echo "far.sh: the listeners did not come up" >&2
exit 1
