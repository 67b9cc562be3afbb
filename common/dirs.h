/* SPDX-License-Identifier: MIT */
#ifndef OCSB_DIRS_H
#define OCSB_DIRS_H

/*
 * Set by the Makefile, never here: the version from debian/changelog (its one home) and
 * the install directories from PREFIX. A package built with PREFIX=/usr must look for
 * nothing under /usr/local, so PATHs and search lists are built from these.
 *   OCSB_PREFIX_PATH_BIN / _SBIN  "" when PREFIX is /usr, else "<PREFIX>/bin:" / "/sbin:"
 */
#if !defined(OCSB_VERSION) || !defined(OCSB_PREFIX) || !defined(OCSB_SBINDIR) || \
	!defined(OCSB_PREFIX_PATH_BIN) || !defined(OCSB_PREFIX_PATH_SBIN)
#error "build with the Makefile: it defines OCSB_VERSION and the install directories"
#endif

/* What root's helpers and tools run with: the install prefix first, then the system. */
#define OCSB_ROOT_PATH OCSB_PREFIX_PATH_SBIN OCSB_PREFIX_PATH_BIN "/usr/sbin:/usr/bin:/sbin:/bin"
/* OpenCode's and npm's: no sbin. */
#define OCSB_USER_PATH OCSB_PREFIX_PATH_BIN "/usr/bin:/bin"

#endif
