/* SPDX-License-Identifier: MIT */
/*
 * What a failed `npm ci` of --install-opencode leaves the user: npm's own log, kept before
 * the staging directory that holds it is removed, and the cause named when npm's output
 * shows a known one (a certificate it does not trust, a registry it cannot reach), with the
 * file to change: npm runs with none of the caller's environment or ~/.npmrc, so its
 * machine-wide config is the one place for a CA file or a proxy.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileops.h"
#include "log.h"
#include "provision.h"

#define NPM_LOG_MAX (8 << 20)

enum npm_cause npm_cause(const char *out)
{
	/* Node's names for a chain it cannot verify, and npm's words for them. */
	static const char *const tls[] = {"SELF_SIGNED_CERT_IN_CHAIN",
		"UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "UNABLE_TO_GET_ISSUER_CERT",
		"UNABLE_TO_VERIFY_LEAF_SIGNATURE", "DEPTH_ZERO_SELF_SIGNED_CERT", "CERT_UNTRUSTED",
		"self-signed certificate", "self signed certificate",
		"unable to get local issuer certificate"};
	static const char *const net[] = {"ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ETIMEDOUT",
		"ECONNRESET", "ENETUNREACH", "EHOSTUNREACH"};

	if (!out)
		return NPM_CAUSE_OTHER;
	for (size_t i = 0; i < sizeof(tls) / sizeof(tls[0]); i++)
		if (strstr(out, tls[i]))
			return NPM_CAUSE_TLS;
	for (size_t i = 0; i < sizeof(net) / sizeof(net[0]); i++)
		if (strstr(out, net[i]))
			return NPM_CAUSE_NET;
	return NPM_CAUSE_OTHER;
}

/* npm names its logs <ISO time>-debug-<n>.log: the greatest name is the newest. */
static int newest_log(DIR *d, char *name, size_t n)
{
	struct dirent *e;

	name[0] = '\0';
	while ((e = readdir(d)) != NULL) {
		size_t l = strlen(e->d_name);

		if (l > 4 && l < n && strcmp(e->d_name + l - 4, ".log") == 0 &&
			strcmp(e->d_name, name) > 0)
			snprintf(name, n, "%s", e->d_name);
	}
	return name[0] ? 0 : -ENOENT;
}

int npm_keep_log(const char *logs, const char *dest)
{
	char name[256], *data = NULL;
	size_t len = 0;
	DIR *d = opendir(logs);
	int r;

	if (!d)
		return -errno;
	/* npm's account wrote it: read without following a link, and only so much. */
	r = newest_log(d, name, sizeof(name));
	if (r == 0)
		r = fo_read_at(dirfd(d), name, NPM_LOG_MAX, &data, &len);
	closedir(d);
	if (r == 0)
		r = fo_write(dest, data, len, 0600, (uid_t)-1, (gid_t)-1); /* the caller's: root's */
	free(data);
	return r;
}

void npm_explain(const char *out, const char *logs, const char *keep)
{
	int r = npm_keep_log(logs, keep);

	if (r == 0)
		log_err("npm's log of this run is kept in %s (the path npm names is removed with "
			"the staging directory)",
			keep);
	else if (r != -ENOENT)
		log_warn("npm's log could not be kept in %s: %s", keep, strerror(-r));
	switch (npm_cause(out)) {
	case NPM_CAUSE_TLS:
		log_err("npm does not trust the certificate the registry answered with (a "
			"TLS-inspecting proxy, or a private registry?). Give npm that CA: a line "
			"cafile=/path/to/ca.pem in npm's machine-wide config (`npm config get "
			"globalconfig` names it: /usr/etc/npmrc with Debian's npm), then run "
			"ocsb-provision --install-opencode again. ocsb-provision's npm reads that "
			"file, not your ~/.npmrc nor your environment");
		break;
	case NPM_CAUSE_NET:
		log_err("npm could not reach the registry. Behind a proxy, set proxy= and "
			"https-proxy= in npm's machine-wide config (`npm config get globalconfig`: "
			"/usr/etc/npmrc with Debian's npm), then run ocsb-provision "
			"--install-opencode again; ocsb-provision's npm reads that file, not your "
			"~/.npmrc nor your environment");
		break;
	case NPM_CAUSE_OTHER:
		break;
	}
}
