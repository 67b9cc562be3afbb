/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <libssh/libssh.h>

#include "unit.h"

/* The Makefile adds only -Icommon: the provision header by its path. */
#include "../../provision/provision.h"

/* A fresh ed25519 public key in base64, made once for the whole binary. */
static char key_b64[256];

static int make_key(void **state)
{
	ssh_key key = NULL;
	char *b64 = NULL;

	if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key) != SSH_OK ||
		ssh_pki_export_pubkey_base64(key, &b64) != SSH_OK) {
		ssh_key_free(key);
		return -1;
	}
	snprintf(key_b64, sizeof(key_b64), "%s", b64);
	ssh_string_free_char(b64);
	ssh_key_free(key);
	return 0;
}

/* keys_parse_pubkey on "prefix KEY suffix"; the normalized line in out. */
static int parse_key(
	const char *prefix, const char *suffix, struct buf *out, char *err, size_t errlen)
{
	char line[1024];

	snprintf(line, sizeof(line), "%s%s%s", prefix, key_b64, suffix);
	err[0] = '\0';
	return keys_parse_pubkey(line, out, err, errlen);
}

static void pubkey_accepted(void **state)
{
	struct buf out = {0};
	char err[256], want[512];

	assert_int_equal(parse_key("ssh-ed25519 ", " alice@laptop\n", &out, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "ssh-ed25519 %s alice@laptop", key_b64);
	assert_string_equal(out.data, want);
	buf_free(&out);

	assert_int_equal(parse_key("  ssh-ed25519\t", "", &out, err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "ssh-ed25519 %s", key_b64);
	assert_string_equal(out.data, want);
	buf_free(&out);
}

static void pubkey_comment_cleaned(void **state)
{
	struct buf out = {0};
	char err[256];
	const char *comment;

	assert_int_equal(parse_key("ssh-ed25519 ", " bob\" ,command=\"sh -c 'id'\" $(x) `y` \\ ;\r",
				 &out, err, sizeof(err)),
		0);
	/* type, key, comment: exactly two spaces, and the key intact. */
	comment = strchr(strchr(out.data, ' ') + 1, ' ');
	assert_non_null(comment);
	assert_null(strchr(comment + 1, ' '));
	assert_null(strpbrk(comment + 1, "\"'`$,;\\\r\n\t()="));
	assert_string_equal(comment + 1, "bobcommandsh-cidxy");
	assert_int_equal(strncmp(out.data + strlen("ssh-ed25519 "), key_b64, strlen(key_b64)), 0);
	buf_free(&out);

	/* Only a newline ends the comment; what follows is not taken. */
	assert_int_equal(parse_key("ssh-ed25519 ", " a\nrestrict evil", &out, err, sizeof(err)), 0);
	assert_null(strstr(out.data, "evil"));
	buf_free(&out);
}

static void pubkey_options_refused(void **state)
{
	static const char *const prefixes[] = {"restrict,pty ssh-ed25519 ",
		"command=\"/bin/sh\" ssh-ed25519 ", "no-pty ssh-ed25519 ",
		"from=\"*\" ssh-ed25519 "};
	struct buf out = {0};
	char err[256];

	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++) {
		if (parse_key(prefixes[i], " c", &out, err, sizeof(err)) != -1)
			fail_msg("accepted a key with options: %s", prefixes[i]);
		assert_true(err[0] != '\0');
		assert_true(out.len == 0);
	}
	buf_free(&out);
}

static void pubkey_unknown_type(void **state)
{
	struct buf out = {0};
	char err[256];

	assert_int_equal(parse_key("ssh-foo ", "", &out, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unknown key type 'ssh-foo'"));
	assert_int_equal(parse_key("", "", &out, err, sizeof(err)), -1);
	assert_int_equal(keys_parse_pubkey("", &out, err, sizeof(err)), -1);
	assert_int_equal(keys_parse_pubkey("ssh-ed25519", &out, err, sizeof(err)), -1);
	assert_true(out.len == 0);
	buf_free(&out);
}

static void pubkey_corrupt(void **state)
{
	char line[512], err[256], cut[256];
	struct buf out = {0};

	/* Truncated: the blob ends inside the key. */
	snprintf(cut, sizeof(cut), "%.*s", (int)strlen(key_b64) - 12, key_b64);
	snprintf(line, sizeof(line), "ssh-ed25519 %s c", cut);
	assert_int_equal(keys_parse_pubkey(line, &out, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "does not decode"));
	assert_int_equal(
		keys_parse_pubkey("ssh-ed25519 !!!!notbase64 c", &out, err, sizeof(err)), -1);
	/* Only the type string inside ("ssh-ed25519"), no key. */
	assert_int_equal(
		keys_parse_pubkey("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", &out, err, sizeof(err)), -1);
	assert_true(out.len == 0);
	buf_free(&out);
}

static void pubkey_type_mismatch(void **state)
{
	struct buf out = {0};
	char err[256];

	/* An ed25519 blob announced as another type. */
	assert_int_equal(parse_key("ssh-rsa ", "", &out, err, sizeof(err)), -1);
	assert_int_equal(parse_key("ecdsa-sha2-nistp256 ", "", &out, err, sizeof(err)), -1);
	assert_true(out.len == 0);
	buf_free(&out);
}

/* ---- authorized_keys and known_hosts ---- */

/* Non-comment lines of text. */
static size_t count_entries(const char *text)
{
	size_t n = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (*l != '#' && *l != '\n')
			n++;
	return n;
}

static void authorized_keys(void **state)
{
	struct strv owner = {0};
	struct buf out = {0};

	assert_int_equal(strv_push(&owner, "ssh-ed25519 AAAAone alice@a"), 0);
	assert_int_equal(strv_push(&owner, "ssh-ed25519 AAAAtwo alice@b"), 0);
	assert_int_equal(
		keys_render_authorized(&owner, "ssh-ed25519 AAAAsync sync", NULL, &out), 0);
	assert_has_line(out.data, "restrict,pty ssh-ed25519 AAAAone alice@a");
	assert_has_line(out.data, "restrict,pty ssh-ed25519 AAAAtwo alice@b");
	assert_has_line(out.data,
		"restrict,command=\"/usr/bin/git-shell -c "
		"\\\"$SSH_ORIGINAL_COMMAND\\\"\" ssh-ed25519 AAAAsync sync");
	assert_int_equal(count_entries(out.data), 3);
	buf_free(&out);

	/* Sync keys of remote owners: git-only lines, never a shell (no pty, forced command). */
	{
		struct strv extra = {0};

		assert_int_equal(strv_push(&extra, "ssh-ed25519 AAAAremote bob@laptop"), 0);
		assert_int_equal(keys_render_authorized(&owner, NULL, &extra, &out), 0);
		assert_has_line(out.data,
			"restrict,command=\"/usr/bin/git-shell -c "
			"\\\"$SSH_ORIGINAL_COMMAND\\\"\" ssh-ed25519 AAAAremote bob@laptop");
		assert_null(strstr(out.data, "restrict,pty ssh-ed25519 AAAAremote"));
		assert_int_equal(count_entries(out.data), 3);
		buf_free(&out);
		strv_free(&extra);
	}

	/* No sync key yet: no git-shell line. */
	assert_int_equal(keys_render_authorized(&owner, NULL, NULL, &out), 0);
	assert_null(strstr(out.data, "git-shell"));
	assert_int_equal(count_entries(out.data), 2);
	buf_free(&out);
	strv_free(&owner);

	assert_int_equal(keys_render_authorized(&owner, NULL, NULL, &out), 0);
	assert_int_equal(count_entries(out.data), 0);
	buf_free(&out);
}

static void known_hosts(void **state)
{
	static const char *const names[] = {"localhost", "127.0.0.1", "::1"};
	struct strv hk = {0};
	struct buf out = {0};
	char want[128];

	assert_int_equal(strv_push(&hk, "ssh-ed25519 AAAAhost root@machine"), 0);
	assert_int_equal(strv_push(&hk, "ecdsa-sha2-nistp256 AAAAecdsa"), 0);
	assert_int_equal(keys_render_known_hosts(&hk, 22, &out), 0);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(want, sizeof(want), "%s ssh-ed25519 AAAAhost", names[i]);
		assert_has_line(out.data, want);
		snprintf(want, sizeof(want), "%s ecdsa-sha2-nistp256 AAAAecdsa", names[i]);
		assert_has_line(out.data, want);
	}
	assert_int_equal(count_entries(out.data), 6);
	assert_null(strchr(out.data, '['));
	assert_null(strstr(out.data, "root@machine"));
	buf_free(&out);

	assert_int_equal(keys_render_known_hosts(&hk, 2222, &out), 0);
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(want, sizeof(want), "[%s]:2222 ssh-ed25519 AAAAhost", names[i]);
		assert_has_line(out.data, want);
		snprintf(want, sizeof(want), "[%s]:2222 ecdsa-sha2-nistp256 AAAAecdsa", names[i]);
		assert_has_line(out.data, want);
	}
	assert_int_equal(count_entries(out.data), 6);
	buf_free(&out);
	strv_free(&hk);
}

/* ---- sshd drop-in ---- */

static void config_for(struct ocsb_config *c, unsigned proxy_port)
{
	config_defaults(c);
	c->proxy_port = proxy_port;
}

static void dropin_content(void **state)
{
	static const char *const lines[] = {"Match User ai-dev", "DisableForwarding yes",
		"PermitTunnel no", "PermitUserRC no", "AuthorizedKeysFile /etc/ocsb/keys/%u",
		"AllowTcpForwarding no", "AllowAgentForwarding no", "AllowStreamLocalForwarding no",
		"X11Forwarding no", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
		"PermitListen none", "PermitOpen none", "AuthorizedKeysCommand none"};
	struct ocsb_config c;
	struct buf out = {0};
	const char *setenv_line;
	long env, match, pue;

	config_for(&c, 8123);
	assert_int_equal(sshd_render_dropin(&c, "/etc/ocsb/keys", &out), 0);
	for (size_t i = 0; i < ARRAY_SIZE(lines); i++)
		if (unit_line_at(out.data, lines[i]) < 0)
			fail_msg("no line '%s' in:\n%s", lines[i], out.data);

	/* Not allowed inside Match: it must come before it, at the start of a line. */
	pue = unit_line_at(out.data, "PermitUserEnvironment no");
	match = unit_line_at(out.data, "Match User ai-dev");
	assert_true(pue >= 0);
	assert_true(pue < match);
	assert_int_equal(out.data[pue], 'P');
	/* One Match block, the last thing in the file. */
	assert_null(strstr(out.data + match + 1, "Match"));

	setenv_line = strstr(out.data, "\tSetEnv ");
	assert_non_null(setenv_line);
	env = setenv_line - out.data;
	assert_true(env > match);
	assert_non_null(strstr(setenv_line, " http_proxy=http://127.0.0.1:8123 "));
	assert_non_null(strstr(setenv_line, " HTTP_PROXY=http://127.0.0.1:8123 "));
	assert_non_null(strstr(setenv_line, " https_proxy=http://127.0.0.1:8123 "));
	assert_null(strstr(out.data, "3128"));
	buf_free(&out);
	config_free(&c);
}

static void dropin_other_agent(void **state)
{
	struct ocsb_config c;
	struct buf out = {0};

	config_for(&c, 3128);
	snprintf(c.agent, sizeof(c.agent), "bot-2");
	assert_int_equal(sshd_render_dropin(&c, "/srv/k", &out), 0);
	assert_has_line(out.data, "Match User bot-2");
	assert_has_line(out.data, "AuthorizedKeysFile /srv/k/%u");
	assert_null(strstr(out.data, "ai-dev"));
	buf_free(&out);
	config_free(&c);
}

/* ---- sshd_has_include ---- */

static const char debian_sshd_config[] =
	"Include /etc/ssh/sshd_config.d/*.conf\n"
	"\n"
	"# This is the sshd server system-wide configuration file.  See\n"
	"# sshd_config(5) for more information.\n"
	"\n"
	"#Port 22\n"
	"#PermitRootLogin prohibit-password\n"
	"KbdInteractiveAuthentication no\n"
	"UsePAM yes\n"
	"X11Forwarding yes\n"
	"PrintMotd no\n"
	"AcceptEnv LANG LC_*\n"
	"Subsystem\tsftp\t/usr/lib/openssh/sftp-server\n";

static void include_detection(void **state)
{
	const char *dir = "/etc/ssh/sshd_config.d";

	assert_int_equal(sshd_has_include(debian_sshd_config, dir), 1);
	/* Debian's main config with the Include line deleted. */
	assert_int_equal(sshd_has_include(strchr(debian_sshd_config, '\n') + 1, dir), 0);
	assert_int_equal(sshd_has_include("#Include /etc/ssh/sshd_config.d/*.conf\n", dir), 0);
	assert_int_equal(sshd_has_include("# Include /etc/ssh/sshd_config.d/*.conf\n", dir), 0);
	assert_int_equal(sshd_has_include("include /etc/ssh/sshd_config.d/*.conf\n", dir), 1);
	assert_int_equal(
		sshd_has_include("Port 22\n  INCLUDE\t/etc/ssh/sshd_config.d/*.conf", dir), 1);
	assert_int_equal(sshd_has_include("Include sshd_config.d/*.conf\n", dir), 1);
	assert_int_equal(sshd_has_include("Include /etc/ssh/other.d/*.conf\n", dir), 0);
	assert_int_equal(sshd_has_include("Include /etc/ssh/sshd_config.d/ocsb.conf\n", dir), 0);
	assert_int_equal(sshd_has_include("", dir), 0);
	/* The drop-in directory of a test tree. */
	assert_int_equal(sshd_has_include("Include /tmp/t/etc/ssh/sshd_config.d/*.conf\n",
				 "/tmp/t/etc/ssh/sshd_config.d"),
		1);
}

/* ---- sshd_check_effective ---- */

/* Trimmed `sshd -T -C user=ai-dev,...` output of OpenSSH 9.2 with the drop-in applied. */
static const char sshd_T[] =
	"port 22\n"
	"addressfamily any\n"
	"listenaddress [::]:22\n"
	"listenaddress 0.0.0.0:22\n"
	"usepam yes\n"
	"logingracetime 120\n"
	"x11displayoffset 10\n"
	"maxauthtries 6\n"
	"permitrootlogin without-password\n"
	"pubkeyauthentication yes\n"
	"passwordauthentication no\n"
	"kbdinteractiveauthentication no\n"
	"hostbasedauthentication no\n"
	"x11uselocalhost yes\n"
	"x11forwarding no\n"
	"permituserenvironment no\n"
	"permituserrc no\n"
	"allowtcpforwarding no\n"
	"allowagentforwarding no\n"
	"disableforwarding yes\n"
	"allowstreamlocalforwarding no\n"
	"permittunnel no\n"
	"authorizedkeyscommand none\n"
	"authorizedprincipalsfile none\n"
	"authorizedkeysfile /etc/ocsb/keys/%u\n"
	"subsystem sftp /usr/lib/openssh/sftp-server\n"
	"acceptenv LANG\n"
	"acceptenv LC_*\n"
	"setenv http_proxy=http://127.0.0.1:3128 https_proxy=http://127.0.0.1:3128 "
	"HTTP_PROXY=http://127.0.0.1:3128 HTTPS_PROXY=http://127.0.0.1:3128 "
	"no_proxy=localhost,127.0.0.1,::1 NO_PROXY=localhost,127.0.0.1,::1\n"
	"permitopen none\n"
	"permitlisten none\n";

/* sshd_T with the line starting "kw " replaced by `repl` (NULL: removed). */
static char *replace_line(const char *kw, const char *repl)
{
	struct buf b = {0};
	size_t kl = strlen(kw);
	int found = 0;

	for (const char *l = sshd_T; *l;) {
		const char *e = strchr(l, '\n');
		size_t len = (size_t)(e - l) + 1;

		if (strncmp(l, kw, kl) == 0 && l[kl] == ' ') {
			found = 1;
			if (repl) {
				assert_int_equal(buf_puts(&b, repl), 0);
				assert_int_equal(buf_puts(&b, "\n"), 0);
			}
		} else {
			assert_int_equal(buf_append(&b, l, len), 0);
		}
		l += len;
	}
	if (!found)
		fail_msg("'%s' is not in the sample", kw);
	return b.data;
}

static int check(const char *text, char *err, size_t errlen)
{
	struct ocsb_config c;
	int r;

	config_defaults(&c);
	err[0] = '\0';
	r = sshd_check_effective(text, &c, "/etc/ocsb/keys", err, errlen);
	config_free(&c);
	return r;
}

static void effective_ok(void **state)
{
	char err[1024];

	assert_int_equal(check(sshd_T, err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

static void effective_flipped(void **state)
{
	static const struct {
		const char *kw, *bad;
	} flips[] = {
		{"authorizedkeysfile",
			"authorizedkeysfile .ssh/authorized_keys .ssh/authorized_keys2"},
		{"authorizedkeysfile", "authorizedkeysfile /etc/ocsb/keys/%u .ssh/authorized_keys"},
		{"passwordauthentication", "passwordauthentication yes"},
		{"kbdinteractiveauthentication", "kbdinteractiveauthentication yes"},
		{"disableforwarding", "disableforwarding no"},
		{"allowtcpforwarding", "allowtcpforwarding yes"},
		{"allowtcpforwarding", "allowtcpforwarding local"},
		{"allowagentforwarding", "allowagentforwarding yes"},
		{"allowstreamlocalforwarding", "allowstreamlocalforwarding all"},
		{"x11forwarding", "x11forwarding yes"},
		{"permittunnel", "permittunnel yes"},
		{"permittunnel", "permittunnel point-to-point"},
		{"permituserrc", "permituserrc yes"},
		{"permituserenvironment", "permituserenvironment yes"},
		{"permituserenvironment", "permituserenvironment LD_PRELOAD"},
	};
	char err[1024];

	for (size_t i = 0; i < ARRAY_SIZE(flips); i++) {
		char *text = replace_line(flips[i].kw, flips[i].bad);
		int r = check(text, err, sizeof(err));

		free(text);
		if (r != -1)
			fail_msg("accepted: %s", flips[i].bad);
		if (!strstr(err, flips[i].kw))
			fail_msg("'%s' not named in: %s", flips[i].kw, err);
		/* Missing altogether is refused too. */
		text = replace_line(flips[i].kw, NULL);
		r = check(text, err, sizeof(err));
		free(text);
		if (r != -1 || !strstr(err, flips[i].kw))
			fail_msg("accepted without '%s' (%s)", flips[i].kw, err);
	}
}

static void effective_setenv(void **state)
{
	char err[1024], *text;

	text = replace_line("setenv", NULL);
	assert_int_equal(check(text, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "proxy"));
	free(text);
	text = replace_line("setenv", "setenv LANG=C");
	assert_int_equal(check(text, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "proxy"));
	free(text);
}

/* Another file's SetEnv pointing at a different proxy port must not pass. */
static void effective_setenv_port(void **state)
{
	struct ocsb_config c;
	char err[1024];

	config_defaults(&c);
	c.proxy_port = 8123; /* sshd_T has 3128 */
	err[0] = '\0';
	if (sshd_check_effective(sshd_T, &c, "/etc/ocsb/keys", err, sizeof(err)) == 0)
		fail_msg("proxy-port 8123 but sshd sets http_proxy=...:3128: accepted");
	assert_non_null(strstr(err, "proxy"));
	config_free(&c);
}

static void effective_keys_dir(void **state)
{
	struct ocsb_config c;
	char err[1024];

	config_defaults(&c);
	assert_int_equal(sshd_check_effective(sshd_T, &c, "/srv/other/keys", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "authorizedkeysfile"));
	config_free(&c);
}

/* The marked block in /etc/ssh/ssh_known_hosts: added once, replaced, removed; the rest kept. */
static void global_known_hosts_block(void **state)
{
	const char *mine = "localhost ssh-ed25519 AAAA1\n";
	struct buf a = {0}, b = {0}, c = {0}, d = {0};

	(void)state;
	assert_int_equal(keys_global_known_hosts_edit("other.org ssh-rsa X\n", mine, &a), 1);
	assert_non_null(strstr(a.data, "other.org ssh-rsa X\n# >>> ocsb-provision"));
	assert_non_null(strstr(a.data, mine));
	/* Same again: no change, same text. */
	assert_int_equal(keys_global_known_hosts_edit(a.data, mine, &b), 0);
	assert_string_equal(a.data, b.data);
	/* A new key replaces the block; the owner's line stays once. */
	assert_int_equal(
		keys_global_known_hosts_edit(b.data, "localhost ssh-ed25519 BBBB\n", &c), 1);
	assert_null(strstr(c.data, "AAAA1"));
	assert_non_null(strstr(c.data, "BBBB"));
	assert_ptr_equal(strstr(c.data, "other.org"), c.data);
	/* Removed: only the machine's own line is left. */
	assert_int_equal(keys_global_known_hosts_edit(c.data, NULL, &d), 1);
	assert_string_equal(d.data, "other.org ssh-rsa X\n");
	buf_free(&a);
	buf_free(&b);
	buf_free(&c);
	buf_free(&d);
	/* Nothing of ours in the file: removal changes nothing. */
	assert_int_equal(keys_global_known_hosts_edit("x y z\n", NULL, &a), 0);
	buf_free(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pubkey_accepted),
		cmocka_unit_test(pubkey_comment_cleaned),
		cmocka_unit_test(pubkey_options_refused),
		cmocka_unit_test(pubkey_unknown_type),
		cmocka_unit_test(pubkey_corrupt),
		cmocka_unit_test(pubkey_type_mismatch),
		cmocka_unit_test(authorized_keys),
		cmocka_unit_test(known_hosts),
		cmocka_unit_test(dropin_content),
		cmocka_unit_test(dropin_other_agent),
		cmocka_unit_test(include_detection),
		cmocka_unit_test(effective_ok),
		cmocka_unit_test(effective_flipped),
		cmocka_unit_test(effective_setenv),
		cmocka_unit_test(effective_setenv_port),
		cmocka_unit_test(effective_keys_dir),
		cmocka_unit_test(global_known_hosts_block),
	};

	return cmocka_run_group_tests(tests, make_key, NULL);
}
