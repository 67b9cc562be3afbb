/* SPDX-License-Identifier: MIT */
/*
 * The rules of the `mirror`, `mirror-writable` and `mirror-noscan` keywords (config.h): what
 * a path may be (the default paths are config.c's). Part of the configuration, so every
 * program that reads the whole of ocsb.conf has them without the mirror engine (mirror/).
 */
#include <stdio.h>
#include <string.h>

#include "config.h"

int mirror_path_under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(path, prefix, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * Never mirrored, whatever the configuration says: keys, credential stores and ocsb's own
 * sync key. The mirror is readable by the agent; these would hand it the owner's identity.
 */
static const char *const forbidden[] = {
	".ssh",
	".gnupg",
	".config/ocsb",
	".aws",
	".netrc",
	".git-credentials",
	".config/gh",
	".docker",
	".kube",
	".password-store",
	".local/share/keyrings",
	".config/git/credentials",
	".pki",
	".mozilla",
	".config/google-chrome",
	".config/chromium",
	".local/share/opencode", /* OpenCode's auth.json lives here */
	NULL,
};

int mirror_path_ok(const char *rel, char *err, size_t errlen)
{
	const char *p = rel;

	if (!*rel || rel[0] == '/') {
		snprintf(err, errlen, "'%.200s': give a path relative to the owner's home", rel);
		return -1;
	}
	if (strlen(rel) > 1000) {
		snprintf(err, errlen, "path too long");
		return -1;
	}
	for (const unsigned char *c = (const unsigned char *)rel; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '"' || *c == '\\') {
			snprintf(err, errlen,
				"'%.200s': control characters, quotes and backslashes are not "
				"supported",
				rel);
			return -1;
		}
	while (*p) {
		const char *e = strchr(p, '/');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && !strncmp(p, "..", 2))) {
			snprintf(err, errlen,
				"'%.200s': no empty, '.' or '..' components, no trailing '/'", rel);
			return -1;
		}
		p += len;
		if (*p == '/')
			p++;
		if (e && !*p) {
			snprintf(err, errlen, "'%.200s': no trailing '/'", rel);
			return -1;
		}
	}
	for (size_t i = 0; forbidden[i]; i++)
		if (mirror_path_under(rel, forbidden[i]) || mirror_path_under(forbidden[i], rel)) {
			snprintf(err, errlen,
				"'%.200s': %s holds keys or credentials and is never mirrored", rel,
				forbidden[i]);
			return -1;
		}
	return 0;
}
