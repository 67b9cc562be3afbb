/* SPDX-License-Identifier: MIT */
/*
 * Pure checks on what the agent sends: ref names, display escaping, and the
 * review-gate classifier. No I/O, so every rule is unit-tested directly.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "sync.h"

int sync_ref_name_ok(const char *name, char *why, size_t whylen)
{
	const unsigned char *s = (const unsigned char *)name;
	size_t len = strlen(name);
	int valid = 0;

	if (len > SYNC_REF_MAX) {
		snprintf(why, whylen, "longer than %d bytes", SYNC_REF_MAX);
		return 0;
	}
	/* Only branches come back: tags, notes and odd namespaces are not exchanged. */
	if (strncmp(name, "refs/heads/", 11) != 0 || len == 11) {
		snprintf(why, whylen, "not a branch (refs/heads/...)");
		return 0;
	}
	for (size_t i = 0; i < len;) {
		unsigned cp;
		size_t l = log_utf8_decode(s + i, len - i, &cp);

		if (!l) {
			snprintf(why, whylen, "invalid UTF-8");
			return 0;
		}
		if (log_cp_unsafe(cp)) {
			snprintf(why, whylen, "control, bidi or invisible character U+%04X", cp);
			return 0;
		}
		i += l;
	}
	/* git refuses these itself, but the check must not depend on the peer's git. */
	if (strstr(name, "..") || strstr(name, "//") || strstr(name, "/.") || strstr(name, "@{") ||
		strpbrk(name, " ~^:?*[\\")) {
		snprintf(why, whylen, "characters git does not allow in ref names");
		return 0;
	}
	if (git_reference_name_is_valid(&valid, name) < 0 || !valid) {
		snprintf(why, whylen, "not a valid git ref name");
		return 0;
	}
	/* The remote-tracking ref is refs/remotes/<agent>/<rest>: HEAD there means something else. */
	if (!strcmp(name + 11, "HEAD")) {
		snprintf(why, whylen, "a branch named HEAD is ambiguous");
		return 0;
	}
	return 1;
}

void sync_escape(const char *str, size_t len, char *out, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t o = 0;

	if (!n)
		return;
	for (size_t i = 0; i < len;) {
		unsigned cp;
		size_t l = log_utf8_decode(s + i, len - i, &cp);
		int bad = !l || log_cp_unsafe(cp) || cp == '\\';
		size_t need = bad ? (l ? l : 1) * 4 : l;

		if (o + need + 1 > n)
			break;
		if (bad) {
			for (size_t k = 0; k < (l ? l : 1); k++)
				o += (size_t)snprintf(out + o, n - o, "\\x%02x", s[i + k]);
		} else {
			memcpy(out + o, s + i, l);
			o += l;
		}
		i += l ? l : 1;
	}
	out[o] = '\0';
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
		: c >= 'a' && c <= 'f' ? c - 'a' + 10
		: c >= 'A' && c <= 'F' ? c - 'A' + 10
				       : -1;
}

const char *sync_unescape(const char *s, char *out, size_t n)
{
	size_t o = 0;

	if (!n)
		return out;
	while (*s && o + 1 < n) {
		int hi, lo;

		if (s[0] == '\\' && s[1] == 'x' && (hi = hexval(s[2])) >= 0 &&
			(lo = hexval(s[3])) >= 0) {
			if (!hi && !lo)
				break;
			out[o++] = (char)(hi << 4 | lo);
			s += 4;
		} else {
			out[o++] = *s++;
		}
	}
	out[o] = '\0';
	return out;
}

/* --- review gate */

static const char *sync_basename(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* Does any '/'-separated component of path equal comp (ASCII case-insensitive)? */
static int sync_has_component(const char *path, const char *comp)
{
	size_t cl = strlen(comp);

	for (const char *p = path; p;) {
		const char *e = strchr(p, '/');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == cl && !strncasecmp(p, comp, cl))
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

/* Component match anywhere except the last one: path lies inside a directory named dir. */
static int sync_under_dir(const char *path, const char *dir)
{
	const char *b = sync_basename(path);
	size_t dl = strlen(dir);

	for (const char *p = path; p < b;) {
		const char *e = strchr(p, '/');
		if (!e)
			break;
		if ((size_t)(e - p) == dl && !strncasecmp(p, dir, dl))
			return 1;
		p = e + 1;
	}
	return 0;
}

static int sync_is_attributes(const char *path)
{
	return !strcasecmp(sync_basename(path), ".gitattributes");
}

int sync_review_wants_data(const char *path, unsigned mode)
{
	return mode == 0120000 || (sync_is_attributes(path) && (mode & 0170000) == 0100000);
}

static int sync_attr_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Names git defines itself that run nothing (binary: -diff -merge -text). */
static int sync_attr_name_inert(const char *n, size_t l)
{
	static const char *const inert[] = {"text", "eol", "crlf", "binary", "ident", "whitespace",
		"export-ignore", "export-subst", "delta", "encoding", "working-tree-encoding",
		"conflict-marker-size", "lockable"};

	if (l > 9 && !memcmp(n, "linguist-", 9))
		return 1;
	for (size_t k = 0; k < sizeof(inert) / sizeof(inert[0]); k++)
		if (strlen(inert[k]) == l && !memcmp(n, inert[k], l))
			return 1;
	return 0;
}

/*
 * What one line of .gitattributes may do to the drivers git runs (filter=x, diff=x,
 * merge=x). The first field is the pattern (quoted or not); every field after it is an
 * attribute, and git's blanks are space, tab and CR ("*.c\rfilter=x" sets it; so does
 * "\"*.c\"filter=x", right after the quote). A line that arrives is risky when it sets a
 * driver, or sets a name git does not define itself: a macro, defined in this file or
 * another one, may set a driver ("[attr]m filter=x", then "*.c m"). A line that goes is
 * risky when it unset or reset a driver or such a name: without it, a driver another line
 * sets is on again.
 */
static int sync_attr_line_risky(const char *l, size_t len, int going)
{
	const char *nul = memchr(l, '\0', len);
	size_t i = 0;
	int quoted = 0;

	/* git parses a line as a C string: nothing after a NUL in it counts, quotes included. */
	if (nul)
		len = (size_t)(nul - l);

	while (i < len && sync_attr_blank(l[i]))
		i++;
	if (i == len || l[i] == '#')
		return 0;
	/* A quoted pattern as git's unquote_c_style reads it; a bad one is a plain field. */
	if (l[i] == '"') {
		size_t q = i + 1;

		while (q < len && l[q] != '"') {
			if (l[q] != '\\') {
				q++;
			} else if (q + 1 < len && l[q + 1] && strchr("abfnrtv\\\"", l[q + 1])) {
				q += 2;
			} else if (q + 3 < len && l[q + 1] >= '0' && l[q + 1] <= '3' &&
				l[q + 2] >= '0' && l[q + 2] <= '7' && l[q + 3] >= '0' &&
				l[q + 3] <= '7') {
				q += 4;
			} else {
				break;
			}
		}
		if (q < len && l[q] == '"') {
			i = q + 1;
			quoted = 1;
		}
	}
	while (!quoted && i < len && !sync_attr_blank(l[i]))
		i++;
	while (i < len) {
		size_t s, nl, name;
		const char *t, *eq;
		int neg, driver;

		while (i < len && sync_attr_blank(l[i]))
			i++;
		for (s = i; i < len && !sync_attr_blank(l[i]); i++)
			;
		if (i == s)
			break;
		t = l + s;
		neg = t[0] == '-' || t[0] == '!';
		nl = i - s - (size_t)neg;
		t += neg;
		eq = memchr(t, '=', nl);
		name = eq ? (size_t)(eq - t) : nl;
		driver = (name == 6 && !memcmp(t, "filter", 6)) || (name == 4 && !memcmp(t, "diff", 4)) ||
			(name == 5 && !memcmp(t, "merge", 5));
		if (going ? neg && (driver || !sync_attr_name_inert(t, name))
			  : !neg && (driver ? eq != NULL : !sync_attr_name_inert(t, name)))
			return 1;
	}
	return 0;
}

static int sync_data_has_line(const char *data, size_t len, const char *line, size_t ll)
{
	for (size_t i = 0; data && i < len;) {
		const char *e = memchr(data + i, '\n', len - i);
		size_t l = e ? (size_t)(e - (data + i)) : len - i;

		if (l && data[i + l - 1] == '\r')
			l--;
		if (l == ll && !memcmp(data + i, line, ll))
			return 1;
		i += l + 1;
		if (e && data[i - 1] == '\r')
			i++;
	}
	return 0;
}

/* A risky line (sync_attr_line_risky) of `data` that `other` does not hold verbatim. */
static int sync_attr_risky_change(
	const char *data, size_t len, const char *other, size_t olen, int going)
{
	for (size_t i = 0; data && i < len;) {
		const char *nl = memchr(data + i, '\n', len - i);
		size_t l = nl ? (size_t)(nl - (data + i)) : len - i;
		size_t ll = l && data[i + l - 1] == '\r' ? l - 1 : l;

		if (sync_attr_line_risky(data + i, ll, going) &&
			!sync_data_has_line(other, olen, data + i, ll))
			return 1;
		i += l + 1;
	}
	return 0;
}

/*
 * The new .gitattributes against the old one: a risky line that arrives or goes. Only an
 * old regular file counts: git does not read a .gitattributes that is a link, and the
 * text of its target said nothing. Only the old file's text before its first NUL counts
 * too: git reads a .gitattributes from the index or a tree (as on checkout) up to its
 * first NUL, so a line after it set nothing, however often the owner's file holds it.
 * The new file is read whole: from the work tree git reads on past a NUL.
 */
static int sync_attr_new_driver(const struct sync_entry *e)
{
	const char *old = (e->old_mode & 0170000) == 0100000 ? e->old_data : NULL;
	const char *old_nul = old ? memchr(old, '\0', e->old_len) : NULL;
	size_t old_len = old_nul ? (size_t)(old_nul - old) : old ? e->old_len : 0;

	const char *new_nul = e->new_data ? memchr(e->new_data, '\0', e->new_len) : NULL;
	size_t new_len = new_nul ? (size_t)(new_nul - e->new_data) : e->new_len;

	/* A line that goes is gone unless git reads it in the new file from the index too. */
	return sync_attr_risky_change(e->new_data, e->new_len, old, old_len, 0) ||
		sync_attr_risky_change(old, old_len, e->new_data, new_len, 1);
}

/*
 * Can a link at `path` pointing at `target` resolve outside the tree's root? Read lexically,
 * but a ".." after a name climbs from wherever that name leads, and the name may be a link
 * of the tree: with "d" -> ".", "d/d/../.." is two levels above the root. Only ".." at the
 * start climbs known ground, the link's own directories (git checks out no file through a
 * link).
 */
static int sync_link_leaves(const char *path, const char *target, size_t tlen)
{
	long depth = 0;
	int named = 0;

	if (!tlen || target[0] == '/' || memchr(target, '\0', tlen))
		return 1;
	for (const char *p = path; (p = strchr(p, '/')); p++)
		depth++; /* directories above the link */
	for (size_t i = 0; i < tlen;) {
		const char *e = memchr(target + i, '/', tlen - i);
		size_t l = e ? (size_t)(e - (target + i)) : tlen - i;

		if (l == 2 && target[i] == '.' && target[i + 1] == '.') {
			if (named || --depth < 0)
				return 1;
		} else if (!(l == 0 || (l == 1 && target[i] == '.'))) {
			named = 1;
			depth++;
		}
		i += l + 1;
	}
	return 0;
}

unsigned sync_review_classify(const struct sync_entry *e)
{
	const char *p = e->path, *b = sync_basename(p);
	unsigned f = 0;

	/* A deletion adds nothing that runs; the flags are about what arrives. */
	if (!e->new_mode)
		return 0;
	/* What was not read cannot be vouched for: a cut .gitattributes or target is flagged. */
	if (sync_is_attributes(p) && (sync_attr_new_driver(e) ||
					     (e->new_cut && (e->new_mode & 0170000) == 0100000)))
		f |= SYNC_FLAG_ATTR_DRIVER;
	if (!strcasecmp(b, ".gitmodules") || (e->new_mode == 0160000 && e->old_mode != 0160000))
		f |= SYNC_FLAG_GITMODULES;
	if (sync_under_dir(p, ".githooks") || sync_under_dir(p, ".husky") ||
		!strcasecmp(b, ".pre-commit-config.yaml") ||
		!strcasecmp(b, ".pre-commit-hooks.yaml") || !strcasecmp(b, "lefthook.yml") ||
		!strcasecmp(b, ".lefthook.yml"))
		f |= SYNC_FLAG_HOOK;
	/* git itself refuses .git in trees; a file named so still deserves a look (git~1 on FAT). */
	if (sync_has_component(p, ".git") || sync_has_component(p, "git~1"))
		f |= SYNC_FLAG_DOTGIT;
	if (!strncmp(p, ".github/workflows/", 18) || !strncmp(p, ".github/actions/", 16) ||
		!strcmp(p, ".gitlab-ci.yml") || !strcmp(b, "Jenkinsfile") ||
		!strncmp(p, ".circleci/", 10) || !strcmp(p, ".travis.yml") ||
		!strcmp(p, "azure-pipelines.yml") || !strcmp(p, ".drone.yml") ||
		!strcmp(p, "bitbucket-pipelines.yml"))
		f |= SYNC_FLAG_CI;
	if (!strcmp(b, ".envrc"))
		f |= SYNC_FLAG_ENVRC;
	/* git-lfs reads it from the checkout: lfs.url and remote.*.lfsurl move the large files. */
	if (!strcmp(p, ".lfsconfig"))
		f |= SYNC_FLAG_LFSCONFIG;
	if (sync_under_dir(p, ".idea") ||
		(sync_under_dir(p, ".vscode") &&
			(!strcmp(b, "tasks.json") || !strcmp(b, "settings.json") ||
				!strcmp(b, "launch.json") || !strcmp(b, "extensions.json"))) ||
		!strcmp(b, ".exrc") || !strcmp(b, ".nvim.lua") || !strcmp(b, ".nvimrc") ||
		!strcmp(b, ".dir-locals.el"))
		f |= SYNC_FLAG_EDITOR;
	if (e->new_mode == 0120000 &&
		(e->new_cut || sync_link_leaves(p, e->new_data, e->new_data ? e->new_len : 0)))
		f |= SYNC_FLAG_SYMLINK_OUT;
	if (e->new_mode == 0100755 && e->old_mode != 0100755)
		f |= SYNC_FLAG_NEW_EXEC;
	return f;
}

static const struct {
	unsigned flag;
	const char *name;
	const char *text;
} sync_flags[] = {
	{SYNC_FLAG_ATTR_DRIVER, "attr-driver",
		".gitattributes names a filter/diff/merge driver, sets a macro that may, or drops a "
		"line that unset one (runs a program on checkout, diff or merge if configured)"},
	{SYNC_FLAG_GITMODULES, "submodule", "submodule definition (fetches other code)"},
	{SYNC_FLAG_HOOK, "hook", "git hook manager path (runs on commit/push once installed)"},
	{SYNC_FLAG_DOTGIT, "dotgit", "path component named .git"},
	{SYNC_FLAG_CI, "ci", "CI definition (runs with the CI's secrets)"},
	{SYNC_FLAG_ENVRC, "envrc", "direnv file (runs when you cd into the tree)"},
	{SYNC_FLAG_EDITOR, "editor", "editor task/settings file (may run commands on open)"},
	{SYNC_FLAG_SYMLINK_OUT, "symlink-out", "symbolic link leaving the tree"},
	{SYNC_FLAG_NEW_EXEC, "new-exec", "newly executable file"},
	{SYNC_FLAG_LFSCONFIG, "lfsconfig",
		".lfsconfig (git-lfs takes its server for this repository's large files from it)"},
};

void sync_flags_print(FILE *f)
{
	for (size_t i = 0; i < sizeof(sync_flags) / sizeof(sync_flags[0]); i++)
		fprintf(f, "  %-12s %s\n", sync_flags[i].name, sync_flags[i].text);
}

const char *sync_flag_name(unsigned flag)
{
	for (size_t i = 0; i < sizeof(sync_flags) / sizeof(sync_flags[0]); i++)
		if (sync_flags[i].flag == flag)
			return sync_flags[i].name;
	return "unknown";
}

const char *sync_flag_text(unsigned flag)
{
	for (size_t i = 0; i < sizeof(sync_flags) / sizeof(sync_flags[0]); i++)
		if (sync_flags[i].flag == flag)
			return sync_flags[i].text;
	return "unknown";
}
