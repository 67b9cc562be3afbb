/* SPDX-License-Identifier: MIT */
/*
 * Internals of `ocsb doctor` (doctor*.c): the list of results and the checks that fill it.
 */
#ifndef OCSB_DOCTOR_INT_H
#define OCSB_DOCTOR_INT_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <git2.h>
#include <grp.h>
#include <libssh/libssh.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli.h"
#include "ctl.h"
#include "fileops.h"
#include "json.h"
#include "landlock.h"
#include "log.h"
#include "loginshell.h"
#include "netlock.h"
#include "procs.h"
#include "proxy.h"
#include "spawn.h"

#define SCAN_MAX_FILES 20000 /* a bound on the home scan, not a promise of completeness */

enum dr_status { DR_OK, DR_WARN, DR_FAIL };

struct dr_check {
	char name[48];
	enum dr_status st;
	int machine; /* a machine-wide setting, not ocsb's: shown and counted apart */
	char detail[768];
	char fix[768];
};

struct doctor {
	struct cli *c;
	int fix, json, root;
	int usepam; /* from sshd -T as root: 1, 0, or -1 unknown */
	struct dr_check *v; /* owned */
	size_t n, cap;
};

/* Shared by the files of the module; nothing outside it uses these. */
void doctor_add(struct doctor *dr, enum dr_status st, const char *name, const char *fix,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* The same for a machine-wide setting that is not ocsb's own (the kernel's). */
void doctor_add_machine(struct doctor *dr, enum dr_status st, const char *name, const char *fix,
	const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void doctor_check_deps(struct doctor *dr);
void doctor_check_syscalls(struct doctor *dr);
void doctor_check_session_live(struct doctor *dr);
void doctor_check_owner_home(struct doctor *dr);
void doctor_check_sshd(struct doctor *dr);
void doctor_check_agentd(struct doctor *dr);
void doctor_check_proxy(struct doctor *dr);
void doctor_check_features(struct doctor *dr);
/* cli/secrets.c: WARN for an LLM key in the owner's keyring that is exported, not injected. */
void secrets_doctor_llm(struct doctor *dr);
void doctor_check_sysctls(struct doctor *dr);
void doctor_check_groups(struct doctor *dr);
void doctor_check_persistence(struct doctor *dr);
void doctor_check_agent_home(struct doctor *dr);
void doctor_check_mirror_links(struct doctor *dr);
void doctor_check_sessions(struct doctor *dr);
void doctor_check_probes(struct doctor *dr);

#endif
