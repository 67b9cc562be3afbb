# SPDX-License-Identifier: MIT
# --install-opencode end to end, with the real npm: `npm ci` runs as the ocsb-npm account
# (never root) against a lockfile, and root takes over only a staged tree that is exactly
# the pinned manifest. The namespace has no network, so the registry is a loopback HTTP
# server holding two small packages made here, and the pins are a test's own
# (OCSB_OPENCODE_PINS, a test hook: in a test build, with OCSB_TEST_HOOKS=1, and honoured
# only with OCSB_OPENCODE_PREFIX); the manifest is made by
# tools/opencode-lock.sh --manifest from a reference `npm ci`, as a maintainer makes it.
# A stand-in npm (first in ocsb-provision's fixed PATH) runs the real one, then records
# its ids and, on request, tampers with its own output: what a compromised npm could do.
. "$E2E_LIB"

HERE=$(cd "$(dirname "$0")" && pwd)
HDR=$HERE/../../common/opencode.h
LOCKSH=$HERE/../../tools/opencode-lock.sh
V=$(sed -n 's/^#define OCSB_OPENCODE_VERSION "\(.*\)"$/\1/p' "$HDR")
BIN_REL=$(sed -n 's/^#define OCSB_OPENCODE_BIN_REL "\(.*\)"$/\1/p' "$HDR")
NPM=$(command -v npm)
PORT=7071
T=/run/t71
case $BIN_REL in node_modules/opencode-linux-x64/*) ;; *)
	skip "--install-opencode end to end" "binary path $BIN_REL is not linux-x64's"
	exit 0 ;;
esac
if [ -z "$NPM" ] || ! command -v node >/dev/null; then
	skip "--install-opencode end to end" "npm or node not installed (sudo make deps)"
	exit 0
fi

mkdir -p -m 0755 $T $T/pkg/ai $T/pkg/x64/bin $T/www $T/pins $T/ref $T/opt
mkdir -p -m 1777 $T/report

# --- two packages shaped like opencode-ai and its linux x64 binary package
printf '{"name":"opencode-ai","version":"%s","dependencies":{"opencode-linux-x64":"%s"}}\n' \
	"$V" "$V" >$T/pkg/ai/package.json
printf '{"name":"opencode-linux-x64","version":"%s"}\n' "$V" >$T/pkg/x64/package.json
printf '#!/bin/sh\necho %s\n' "$V" >$T/pkg/x64/bin/opencode
chmod 0755 $T/pkg/x64/bin/opencode
export npm_config_cache=$T/cache npm_config_update_notifier=false
integrity() { # integrity DIR: pack DIR into $T/www, print its sha512 integrity
	(cd "$1" && npm pack --silent --pack-destination $T/www >/dev/null) &&
		(cd $T/www && ls -t | head -n 1 | xargs cat) | openssl dgst -sha512 -binary | base64 -w0
}
I_AI=$(integrity $T/pkg/ai) I_X64=$(integrity $T/pkg/x64)
check "packed the two packages" test -s "$T/www/opencode-ai-$V.tgz" -a -s "$T/www/opencode-linux-x64-$V.tgz"
printf '{\n  "name": "ocsb-opencode",\n  "private": true,\n  "dependencies": {\n    "opencode-ai": "%s"\n  }\n}\n' \
	"$V" >$T/pins/package.json
cat >$T/pins/package-lock.json <<EOF
{
  "name": "ocsb-opencode",
  "lockfileVersion": 3,
  "requires": true,
  "packages": {
    "": { "name": "ocsb-opencode", "dependencies": { "opencode-ai": "$V" } },
    "node_modules/opencode-ai": {
      "version": "$V",
      "resolved": "http://127.0.0.1:$PORT/opencode-ai-$V.tgz",
      "integrity": "sha512-$I_AI",
      "dependencies": { "opencode-linux-x64": "$V" }
    },
    "node_modules/opencode-linux-x64": {
      "version": "$V",
      "resolved": "http://127.0.0.1:$PORT/opencode-linux-x64-$V.tgz",
      "integrity": "sha512-$I_X64"
    }
  }
}
EOF
(cd $T/www && exec python3 -m http.server $PORT --bind 127.0.0.1 >/dev/null 2>&1) &
WWW=$!
trap 'kill_tree $WWW' EXIT
check "the loopback registry answers" wait_port 127.0.0.1 $PORT 5

# --- the pinned manifest, as the maintainer's script makes it
cp $T/pins/package.json $T/pins/package-lock.json $T/ref/
check "reference npm ci of the lockfile" \
	env -C $T/ref npm ci --ignore-scripts --no-audit --no-fund
"$LOCKSH" --manifest $T/ref >$T/pins/manifest-linux-x64.txt
check_output "the manifest pins the binary" "^f 0755 [0-9a-f]{64} $BIN_REL\$" cat $T/pins/manifest-linux-x64.txt

# --- the stand-in npm: /usr/local/bin comes first in ocsb-provision's PATH
mount -t tmpfs -o mode=0755 t71-bin /usr/local/bin
cat >/usr/local/bin/npm <<EOF
#!/bin/sh
echo "uid \$(id -u) gid \$(id -g) groups \$(id -G)" >$T/report/ids
# Something npm leaves running: root must stop it before it takes the tree over.
setsid sleep 600 </dev/null >/dev/null 2>&1 &
echo \$! >$T/report/bg
if [ "\$(cat $T/tamper 2>/dev/null)" = tls ]; then
	# npm behind a TLS-inspecting proxy whose CA it does not have: its words and its log.
	log=\$npm_config_cache/_logs/2026-12-06T11_00_00_000Z-debug-0.log
	mkdir -p "\${log%/*}"
	echo "verbose stack Error: self-signed certificate in certificate chain" >"\$log"
	echo "npm ERR! code SELF_SIGNED_CERT_IN_CHAIN" >&2
	echo "npm ERR! request to https://registry.npmjs.org/opencode-ai failed, reason: self-signed certificate in certificate chain" >&2
	echo "npm ERR! A complete log of this run can be found in: \$log" >&2
	exit 1
fi
$NPM "\$@" || exit
bin=$BIN_REL
case \$(cat $T/tamper 2>/dev/null) in
append) printf x >>"\$bin" ;;
extra) echo evil >node_modules/opencode-ai/evil ;;
link) rm "\$bin" && ln -s ../package.json "\$bin" ;;
esac
EOF
chmod 0755 /usr/local/bin/npm

install_to() { # install_to DIR [ARGS]: --install-opencode into DIR/opencode with the test pins
	local dir=$1
	shift
	env OCSB_TEST_HOOKS=1 OCSB_OPENCODE_PINS=$T/pins OCSB_OPENCODE_PREFIX="$dir/opencode" \
		"$OCSB_BUILD/ocsb-provision" --install-opencode "$@"
}
gone() { # the process npm left is no more (a zombie waits for PID 1 to reap it)
	local st
	st=$(awk '{ print $3 }' "/proc/$(cat $T/report/bg)/stat" 2>/dev/null)
	[ -z "$st" ] || [ "$st" = Z ]
}

# --- positive control: the untouched tree installs
mkdir -m 0755 $T/opt/a
check_output "--install-opencode installs the pinned tree" \
	"^OpenCode $V: $T/opt/a/opencode/$BIN_REL\$" install_to $T/opt/a
NPM_UID=$(id -u ocsb-npm 2>/dev/null)
check "the account ocsb-npm exists and is not root" test -n "$NPM_UID" -a "$NPM_UID" != 0
check_output "npm ran as ocsb-npm, not root, with no other group" \
	"^uid $NPM_UID gid $(id -g ocsb-npm) groups $(id -g ocsb-npm)\$" cat $T/report/ids
check "positive control: npm's stand-in left a process running" test -s $T/report/bg
check "what npm left running was stopped" gone
check "the installed binary runs" "$T/opt/a/opencode/$BIN_REL"
check_output "every installed entry is root's" '^$' find $T/opt/a/opencode ! -user root
check_output "npm's own record is not taken over" '^absent$' \
	sh -c "test -e $T/opt/a/opencode/node_modules/.package-lock.json || echo absent"
check_output "--check: the installed tree is the pinned one" '^ocsb-provision: 0 differences' \
	install_to $T/opt/a --check
check_output "no staging directory left" '^$' find $T/opt/a -mindepth 1 -maxdepth 1 -name '.opencode.install.*'

# --- a staged tree changed between npm and root's takeover is refused
refused() { # refused KIND REGEX DESC
	rm -rf $T/opt/b
	mkdir -m 0755 $T/opt/b
	echo "$1" >$T/tamper
	check_fails_output "$3" "refusing what npm installed in .*: $2\. Nothing was installed" \
		install_to $T/opt/b
	# The refusal ends the install (its line and the summary): no later step looks at the tree.
	install_to $T/opt/b >$T/out 2>&1
	check_output "  ... and is the last word ($1)" \
		'^2 error, then: ocsb-provision: error: stopped after 1 change' \
		sh -c "echo \$(grep -c 'error: ' $T/out) error, then: \$(tail -n 1 $T/out)"
	check "  ... and nothing was installed ($1)" test ! -e $T/opt/b/opencode
	check_output "  ... nor left staged ($1)" '^$' find $T/opt/b -mindepth 1
}
refused append "$BIN_REL: content differs \(sha256 [0-9a-f]{16}\.\.\., pinned [0-9a-f]{16}\.\.\.\)" \
	"a byte appended to the binary is refused"
refused extra "node_modules/opencode-ai/evil: not in the pinned tree \(an extra file\)" \
	"an extra file is refused"
refused link "$BIN_REL: a symbolic link where the pinned tree has a file" \
	"a link where the binary should be is refused"
rm -f $T/tamper
rm -rf $T/opt/b && mkdir -m 0755 $T/opt/b
check_output "positive control: the same install without tampering succeeds" \
	"^OpenCode $V: $T/opt/b/opencode/$BIN_REL\$" install_to $T/opt/b

# --- an installed tree that differs from the pin is reinstalled, not trusted
printf x >>$T/opt/a/opencode/node_modules/opencode-ai/package.json
check_fails_output "--check: a changed installed tree is drift" \
	"^drift: install OpenCode $V into $T/opt/a/opencode with npm \(not the pinned tree: node_modules/opencode-ai/package.json: content differs" \
	install_to $T/opt/a --check
check_output "--install-opencode reinstalls it" "^OpenCode $V: $T/opt/a/opencode/$BIN_REL\$" \
	install_to $T/opt/a
check_output "  ... and then it is the pinned tree" '^ocsb-provision: 0 differences' \
	install_to $T/opt/a --check

# --- npm fails behind a TLS-inspecting proxy: the cause, the file to change, its log kept
echo tls >$T/tamper
mkdir -m 0755 $T/opt/t
check_fails_output "untrusted certificate: the cause and npm's machine-wide config named" \
	"npm does not trust the certificate the registry answered with .* cafile=/path/to/ca.pem in npm's machine-wide config \(.npm config get globalconfig. names it" \
	install_to $T/opt/t
check_fails_output "  ... npm's output shown line by line, not with \\n" '^ +npm ERR! code SELF_SIGNED_CERT_IN_CHAIN$' \
	install_to $T/opt/t
check_fails_output "  ... where npm's log is kept" "npm's log of this run is kept in $T/opt/t/opencode-npm.log" \
	install_to $T/opt/t
check_output "  ... and it is npm's log" 'self-signed certificate in certificate chain' cat $T/opt/t/opencode-npm.log
check_output "  ... root's alone" '^600 root$' stat -c '%a %U' $T/opt/t/opencode-npm.log
check "  ... nothing was installed" test ! -e $T/opt/t/opencode
rm -f $T/tamper
check_output "positive control: without the proxy it installs" "^OpenCode $V: $T/opt/t/opencode/$BIN_REL\$" \
	install_to $T/opt/t
check "  ... and the failed run's log is gone" test ! -e $T/opt/t/opencode-npm.log

# --- only the version the pins name
check_fails_output "another version than the pinned one is refused" \
	"opencode-ai 0\.0\.1 is not the version this build pins" \
	env OCSB_TEST_HOOKS=1 OCSB_OPENCODE_PINS=$T/pins OCSB_OPENCODE_PREFIX=$T/opt/a/opencode \
	"$OCSB_BUILD/ocsb-provision" --install-opencode=0.0.1
check_fails_output "the pins hook alone (the real prefix) is refused" \
	"OCSB_OPENCODE_PINS is a test hook: set OCSB_OPENCODE_PREFIX too" \
	env OCSB_TEST_HOOKS=1 OCSB_OPENCODE_PINS=$T/pins "$OCSB_BUILD/ocsb-provision" --install-opencode --check

# --- a full provisioning run with the default binary missing (a reinstall after apt purge
# removed /opt/ocsb, issue 28 item 3): --check reports it, the run installs the pinned
# release itself (here with the test's pins, into the real prefix on a tmpfs).
OC_PREFIX=$(sed -n 's/^#define OCSB_OPENCODE_PREFIX "\(.*\)"$/\1/p' "$HDR")
if [ ! -d "$(dirname "$OC_PREFIX")" ]; then
	skip "provisioning installs a missing OpenCode" "no $(dirname "$OC_PREFIX") to hide here"
else
	. "$HERE/common-prov.sh"
	make_project
	mount -t tmpfs -o mode=0755 t71-opt "$(dirname "$OC_PREFIX")"
	pinned() { env OCSB_TEST_HOOKS=1 OCSB_OPENCODE_PINS=$T/pins OCSB_OPENCODE_PREFIX="$OC_PREFIX" "$@"; }
	check "positive control: the default binary is missing" test ! -e "$OC_PREFIX/$BIN_REL"
	check_fails_output "--check reports OpenCode missing" \
		"^drift: install OpenCode $V into $OC_PREFIX with npm \(not installed\)$" \
		pinned "$OCSB_BUILD/ocsb-provision" --owner "$OWNER" --project "$PROJECT" --check
	check_output "provisioning installs it" "^\+ install OpenCode $V into $OC_PREFIX with npm \(not installed\)$" \
		pinned "$OCSB_BUILD/ocsb-provision" --owner "$OWNER" --project "$PROJECT"
	check "  ... the installed binary runs" "$OC_PREFIX/$BIN_REL"
	check_output "  ... then --check finds no difference" '^ocsb-provision: 0 differences' \
		pinned "$OCSB_BUILD/ocsb-provision" --check
	umount "$(dirname "$OC_PREFIX")"
fi
umount /usr/local/bin
