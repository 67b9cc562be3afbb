/* SPDX-License-Identifier: MIT */
#ifndef OCSB_LOGINSHELL_H
#define OCSB_LOGINSHELL_H

#include <stddef.h>

#define OCSB_SHELL_NAME "ocsb-shell"

/*
 * ocsb-shell's argv for the real shell, rewritten in place: argv[0] becomes "-" +
 * basename(real) when ours starts with '-' (sshd's mark of a login shell, which bash reads),
 * basename(real) otherwise (what sshd would have passed); every other argument (-c COMMAND
 * for `ssh host cmd`, scp, sftp and forced commands) is kept. arg0 (n bytes) holds the new
 * argv[0]. -EINVAL: real is not an absolute path; -ELOOP: real is ocsb-shell itself;
 * -ENAMETOOLONG: arg0 too small. argv is unchanged on error.
 */
int loginshell_argv(const char *real, char **argv, char *arg0, size_t n);

#endif
