# SPDX-License-Identifier: MIT
# lib-inject.sh: fake LLM providers for the injector (t-86, tests/bench/inject), sourced
# after lib.sh and lib-net.sh, once the fake internet is up.
#
#   198.18.1.20  api.anthropic.com  TLS :443, certificate of the test CA DIR/ca.pem
#   198.18.1.21  badca.test         TLS :443, certificate of another CA (DIR/otherca.pem)
# Requests are recorded in DIR/api.rec and DIR/bad.rec, one line per TLS connection in
# DIR/api.rec.conns and DIR/bad.rec.conns (inject-provider.py: its endpoints). DIR is made
# root-only: the records hold the injected keys.

INJECT_PROVIDER_PY=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/inject-provider.py

_inj_ca() { # NAME: NAME.pem/NAME.key, a CA
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
		-out "$1.pem" -days 2 -subj "/CN=ocsb e2e $1" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
}
_inj_cert() { # NAME CA HOST: NAME.pem/NAME.key signed by CA.pem for HOST
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$1.key" \
		-out "$1.csr" -subj "/CN=$3" 2>/dev/null &&
		openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
			-out "$1.pem" -days 2 \
			-extfile <(printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth\n' "$3") 2>/dev/null
}

inject_providers_up() { # DIR
	local d=$1 h
	mkdir -m 0700 -p "$d" || return 1
	(cd "$d" && _inj_ca ca && _inj_ca otherca && _inj_cert api ca api.anthropic.com &&
		_inj_cert bad otherca badca.test) || return 1
	# The test CA is read by the supervisor (the account ocsb-agentd, OCSB_TEST_INJECT_CA),
	# which opens each directory of its path (fo_read): a copy in DIR-ca, readable. DIR stays
	# root's alone: the providers' records in it hold the real keys.
	mkdir -m 0755 -p "$d-ca" && install -m 0644 "$d/ca.pem" "$d-ca/ca.pem" || return 1
	for h in api.anthropic.com:198.18.1.20 badca.test:198.18.1.21; do
		ip netns exec "$INET_NS" ip addr add "${h#*:}/32" dev lo
		printf '%s\t%s\n' "${h#*:}" "${h%%:*}" >>/etc/hosts
	done
	ip netns exec "$INET_NS" python3 "$INJECT_PROVIDER_PY" 198.18.1.20 443 "$d/api.pem" "$d/api.key" "$d/api.rec" >/dev/null 2>&1 &
	ip netns exec "$INET_NS" python3 "$INJECT_PROVIDER_PY" 198.18.1.21 443 "$d/bad.pem" "$d/bad.key" "$d/bad.rec" >/dev/null 2>&1 &
	wait_port 198.18.1.20 443 5 && wait_port 198.18.1.21 443 5
}

# inject_git_up DIR WANT-FILE: a git server for https://git.example (198.18.1.22, TLS from the
# test CA DIR/ca.pem, after inject_providers_up) serving DIR/git/repo.git, one commit with
# README "INJECTED-GIT-REPO"; it answers only requests whose Authorization is the file's line and
# records each request in DIR/git.rec (inject-git.py).
inject_git_up() { # DIR WANT-FILE
	local d=$1 w
	(cd "$d" && _inj_cert git ca git.example) || return 1
	w=$d/git/work
	mkdir -p "$w" && git -C "$w" init -q -b main && echo INJECTED-GIT-REPO >"$w/README" &&
		git -C "$w" add README &&
		git -C "$w" -c user.name=e2e -c user.email=e2e@example.test commit -qm init &&
		git clone -q --bare "$w" "$d/git/repo.git" || return 1
	ip netns exec "$INET_NS" ip addr add 198.18.1.22/32 dev lo
	printf '198.18.1.22\tgit.example\n' >>/etc/hosts
	ip netns exec "$INET_NS" python3 "$(dirname "$INJECT_PROVIDER_PY")/inject-git.py" 198.18.1.22 443 \
		"$d/git.pem" "$d/git.key" "$d/git.rec" "$d/git" "$2" >/dev/null 2>"$d/git.err" &
	wait_port 198.18.1.22 443 5
}
