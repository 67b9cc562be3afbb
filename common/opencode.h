/* SPDX-License-Identifier: MIT */
#ifndef OCSB_OPENCODE_H
#define OCSB_OPENCODE_H

#include <stddef.h>

/*
 * The OpenCode release ocsb installs and tests against. The only place the version is
 * written: tools/install-deps.sh reads it from this line. Facts about this release
 * (environment, probe endpoint, timings) are in docs/opencode.md.
 */
#define OCSB_OPENCODE_VERSION "1.18.33"

/* npm prefix of `ocsb-provision --install-opencode` and the binary inside it. */
#define OCSB_OPENCODE_PREFIX "/opt/ocsb/opencode"
#define OCSB_OPENCODE_BIN_REL "node_modules/opencode-linux-x64/bin/opencode"
#define OCSB_OPENCODE_BIN OCSB_OPENCODE_PREFIX "/" OCSB_OPENCODE_BIN_REL

#define OCSB_OPENCODE_INSTALL_HINT "run: sudo ocsb-provision --install-opencode"

/*
 * Root runs `path` (agentd, as the agent): only root may be able to change what it is.
 * Checks, resolving symbolic links one component at a time from /: every directory
 * is owned by root and not writable by group or others (unless sticky), every link is
 * owned by root, the file is a regular root-owned file, not writable by group or
 * others, not setuid/setgid, and executable by others (the agent). 0 when safe;
 * -ENOENT when something is missing (err then holds the install hint), -EPERM when
 * unsafe, -EINVAL for a relative path, other negative errno on lookup errors. err
 * names the offending path and what to do.
 */
int opencode_bin_check(const char *path, char *err, size_t errlen);

/* The same checks for any program root is about to run (npm, node). */
int opencode_path_check(const char *path, char *err, size_t errlen);
/* The same checks for a directory root installs programs into; 0 when safe. */
int opencode_dir_check(const char *path, char *err, size_t errlen);

/*
 * The readiness probe's verdict (agentd, GET OPENCODE_PROBE_PATH) on OpenCode's answer so
 * far: buf holds the len bytes read, NUL-terminated, in a buffer of cap. 0 more is needed,
 * 1 it serves (a 200 status line), -1 it does not.
 */
int opencode_probe_answer(const char *buf, size_t len, size_t cap);

#endif
