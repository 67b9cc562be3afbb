/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SYNC_H
#define OCSB_SYNC_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <git2.h>
#include <git2/sys/transport.h>

/*
 * ocsb sync: git exchange between the owner's repository and the agent's clone,
 * libgit2 over an SSH subtransport written on libssh (transport.c). The owner's
 * repository only ever receives objects and refs/remotes/<agent>/... (invariant 5).
 */

/* `ocsb sync ...`: argv[0] is "sync". Exit status 0 ok, 1 failure, 2 usage. */
int cmd_sync(int argc, char **argv);

/*
 * Seeding from ocsb-provision: push every local branch of project_path to the
 * agent's clone, run by a child that already is the owner. 0 or -1 (logged).
 */
int sync_push_as_current_user(const char *project_path, const char *agent, unsigned ssh_port);

/* --- transport.c: one SSH connection per git operation */
struct sync_conn {
	/* borrowed configuration */
	const char *host; /* "localhost" */
	unsigned port;
	const char *user; /* the agent */
	const char *key_path; /* private key; unused with agent_auth */
	const char *known_hosts; /* the pin file, the only one consulted */
	const char *pin_fix; /* what to run to (re)write the pin; NULL: ocsb-provision */
	const char *key_fix; /* what to run when the key is missing or refused; NULL: same */
	const char *remote_path; /* repository path on the agent side */
	int agent_auth;
	int connect_timeout_s;
	int io_timeout_s; /* inactivity */
	/* bounds on what the agent may send (fetch) */
	uint64_t max_bytes;
	uint64_t max_objects;
	time_t deadline; /* 0 = none */
	int progress; /* print progress on stderr */
	/* state */
	uint64_t bytes_read;
	char err[1024]; /* first transport-level error, one line */
	git_smart_subtransport_definition def;
};

void sync_conn_init(struct sync_conn *c);
/* git_remote_callbacks.transport; payload must be the struct sync_conn. */
int sync_transport_cb(git_transport **out, git_remote *owner, void *payload);
/* Quote s for a POSIX shell: 'a'\''b'. -1 if it does not fit. */
int sync_shell_quote(const char *s, char *out, size_t n);

/* --- remote.c: agents on other machines (--host) */
/* 1 if h is a host name or address literal ocsb passes to libssh and the pin file. */
int sync_host_name_ok(const char *h);
/* 1 if the fingerprint the owner typed ("SHA256:..." or the base64 alone) is fp. */
int sync_fp_equal(const char *given, const char *fp);
/*
 * The owner's key dir/name (+ .pub), created (ed25519, 0600) if missing; *ret_pub gets
 * the public line (caller frees). 0 or a negative errno.
 */
int sync_keygen(const char *dir, const char *name, const char *comment, char **ret_pub);
/*
 * Pin c->host:c->port in c->known_hosts when its host key's SHA-256 fingerprint is
 * `accept`. 0 pinned now, 1 already pinned (same key), 2 not pinned and accept is NULL
 * (ret_fp/ret_type say what the host showed), -1 refused or failed (c->err).
 */
int sync_host_pin(struct sync_conn *c, const char *accept, char *ret_fp, size_t fplen,
	char *ret_type, size_t typelen);

/* --- tmp.c: one pull at a time per repository, stale temporary packs removed */
/* Take <gitdir>/ocsb-sync.lock (flock); *ret_fd holds it. 0, -EBUSY, or negative errno. */
int sync_repo_lock(const char *gitdir, int *ret_fd);
/*
 * Remove pack_git2_* temporary files (libgit2's interrupted downloads) from
 * <objects>/pack: regular files only, modified before `before`, and open in no process
 * we can see. *ret_removed counts them. 0 or a negative errno.
 */
int sync_clean_tmp_packs(
	const char *objects_dir, const struct timespec *before, unsigned *ret_removed);

/* --- check.c: pure functions on what the agent sends */
#define SYNC_REF_MAX 255
/* 1 if name is a ref ocsb accepts from the agent (refs/heads/..., sane); else 0 + why. */
int sync_ref_name_ok(const char *name, char *why, size_t whylen);
/* Copy s for display: control, bidi and invalid UTF-8 bytes become \xNN. */
void sync_escape(const char *s, size_t len, char *out, size_t n);

enum sync_flag {
	SYNC_FLAG_ATTR_DRIVER = 1 << 0, /* .gitattributes filter=/diff=/merge= */
	SYNC_FLAG_GITMODULES = 1 << 1, /* .gitmodules or a submodule entry */
	SYNC_FLAG_HOOK = 1 << 2, /* .githooks/, .husky/, pre-commit configs */
	SYNC_FLAG_DOTGIT = 1 << 3, /* a path component named .git */
	SYNC_FLAG_CI = 1 << 4, /* CI definitions */
	SYNC_FLAG_ENVRC = 1 << 5, /* direnv */
	SYNC_FLAG_EDITOR = 1 << 6, /* editor task/settings files */
	SYNC_FLAG_SYMLINK_OUT = 1 << 7, /* symlink leaving the tree */
	SYNC_FLAG_NEW_EXEC = 1 << 8, /* newly executable file */
};
#define SYNC_FLAG_COUNT 9

/* One changed path between the review base and the fetched tip; modes 0 = absent. */
struct sync_entry {
	const char *path; /* borrowed */
	unsigned old_mode, new_mode;
	const char *old_data; /* borrowed; .gitattributes content or link target, else NULL */
	size_t old_len;
	const char *new_data; /* borrowed */
	size_t new_len;
};

/* Which SYNC_FLAG_* bits a change raises. */
unsigned sync_review_classify(const struct sync_entry *e);
/* Whether classification needs the blob contents of this path/mode. */
int sync_review_wants_data(const char *path, unsigned mode);
/* Short name ("attr-driver") and a sentence for a single flag bit. */
const char *sync_flag_name(unsigned flag);
const char *sync_flag_text(unsigned flag);

#endif
