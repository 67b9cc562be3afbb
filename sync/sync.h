/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SYNC_H
#define OCSB_SYNC_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <sys/types.h>

#include <git2.h>
#include <git2/sys/transport.h>
/*
 * git_error_set_str, git_error_set_oom and git_error_clear: declared by <git2/errors.h> up to
 * libgit2 1.7 (Debian 12 has 1.5), by <git2/sys/errors.h> from 1.8 on (Debian 13 has 1.9).
 * The functions are the same in both; only the header moved.
 */
#if defined(__has_include)
#if __has_include(<git2/sys/errors.h>)
#include <git2/sys/errors.h>
#endif
#endif

#include "buildflags.h"
#include "config.h"
#include "util.h"

/*
 * ocsb sync: git exchange between the owner's repository and the agent's clone,
 * libgit2 over an SSH subtransport written on libssh (transport.c). The owner's
 * repository only ever receives objects and refs/remotes/<agent>/... (invariant 5).
 */

/* What `ocsb sync` was asked to do (cli/sync.c parses the command line into it). */
struct sync_opts {
	int agent_auth, json, force, all, strict;
	const char *to;
	const char *host, *agent, *accept_fp; /* --host, --agent, --accept-host-key */
	unsigned port;
	uint64_t max_bytes, max_objects;
	int timeout_s, connect_timeout_s, io_timeout_s;
	struct strv branches;
};

/* `sync pull --strict`: the pull went through and the review gate flagged something. */
#define SYNC_EXIT_FLAGGED 3

/* The bounds and timeouts when no option says otherwise. */
void sync_opts_defaults(struct sync_opts *o);
/*
 * Run `sub` (push, pull, status or init) with options already checked, as the owner:
 * the exit status, 0 done, 1 failed (logged), SYNC_EXIT_FLAGGED (pull --strict).
 */
int sync_run(const char *sub, struct sync_opts *o);

#define SYNC_REF_MAX 255
#define SYNC_REF_MAX_BUF (SYNC_REF_MAX + 1)
#define SYNC_MAX_ADVERTISED 10000

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
	/*
	 * The pull's confined child: its channel is relay_fd (a socket pair the parent relays
	 * the SSH channel over), why the parent ended it arrives on relay_ctl. -1: none.
	 */
	int relay_fd, relay_ctl;
};

void sync_conn_init(struct sync_conn *c);
/* git_remote_callbacks.transport; payload must be the struct sync_conn. */
int sync_transport_cb(git_transport **out, git_remote *owner, void *payload);
/* Quote s for a POSIX shell: 'a'\''b'. -1 if it does not fit. */
int sync_shell_quote(const char *s, char *out, size_t n);

/*
 * One SSH session running `service '<remote_path>'` (git-upload-pack or git-receive-pack)
 * on c: the pinned host key, the key or ssh-agent, c's timeouts and byte bound. Errors
 * go to c->err (one line) and libgit2's error.
 */
struct sync_link;
struct sync_link *sync_link_new(struct sync_conn *c);
void sync_link_free(struct sync_link *l);
int sync_link_open(struct sync_link *l, const char *service);
void sync_link_close(struct sync_link *l);
/* Some bytes (at most n) into buf; 0 or -1. End of stream is an error. */
int sync_link_read(struct sync_link *l, char *buf, size_t n, size_t *ret_len);
int sync_link_write(struct sync_link *l, const char *buf, size_t len);
/* What the remote wrote to stderr so far, one line, escaped. */
void sync_link_stderr(struct sync_link *l, char *out, size_t n);
/*
 * The pull's parent: relay the open link's channel to the confined child over data (its
 * socket pair) until the child closes it, keeping the deadline, the inactivity timeout and
 * the byte bound; extra[] (the child's pipes, -1: none) are served meanwhile by on_extra
 * (0 more to come, 1 at their end, -1 the child broke the protocol). 0 when the child
 * closed the channel (or died), -1 when the relay ended it: why says why, and was written
 * on ctl (then closed) for the child to report.
 */
struct sync_relay {
	int data, ctl;
	int extra[2];
	int (*on_extra)(void *arg, int fd);
	/* Each chunk the remote sent, as it is relayed (may be NULL). */
	void (*on_remote)(void *arg, const char *p, size_t n);
	void *arg;
	char why[1024];
};
int sync_link_relay(struct sync_link *l, struct sync_relay *rl);

/* --- pkt.c: git's pkt-line framing and receive-pack replies (pure, unit-tested) */
#define SYNC_PKT_MAX 65520 /* whole packet, 4 length digits included */
enum sync_pkt_type { SYNC_PKT_DATA, SYNC_PKT_FLUSH };
/*
 * Parse one pkt-line at buf (avail bytes). Returns the bytes it takes, 0 when more input
 * is needed, -1 when malformed (bad hex, a length of 1-3, 0001-0003, over SYNC_PKT_MAX).
 * *ret_data points into buf.
 */
long sync_pkt_parse(const char *buf, size_t avail, enum sync_pkt_type *ret_type,
	const char **ret_data, size_t *ret_len);
/*
 * The pack in upload-pack's answer (side-band-64k): fed the bytes as they come, calls
 * emit with band 1's payloads, the band byte dropped; the rest is skipped. Zero it to
 * start; bad set (for good) on a malformed length.
 */
struct sync_band {
	char hdr[4];
	size_t hlen, left;
	int band, bad;
};
void sync_band_feed(struct sync_band *d, const char *p, size_t n,
	void (*emit)(void *arg, const char *p, size_t n), void *arg);
/* Frame len bytes as one pkt-line into out; the packet's length, or -1 if it cannot. */
long sync_pkt_format(char *out, size_t n, const char *data, size_t len);
/*
 * One line of a receive-pack advertisement ("<hex oid> <name>[\0<caps>]\n"). 0 with the
 * fields set (*ret_caps NULL when absent), -1 when malformed or the name is longer than
 * namelen - 1.
 */
int sync_adv_parse(const char *data, size_t len, git_oid *ret_oid, char *ret_name, size_t namelen,
	const char **ret_caps, size_t *ret_capslen);
/* 1 if the capability list (space-separated, "name" or "name=value") has name. */
int sync_caps_has(const char *caps, size_t len, const char *name);

/* report-status of git-receive-pack, for the refs this push asked to update. */
struct sync_report {
	const char *const *refs; /* borrowed: the commands' ref names */
	size_t n;
	int *state; /* owned by the caller, n entries: 0 no answer, 1 ok, 2 refused */
	char (*why)[256]; /* owned by the caller, n entries: the refusal, escaped */
	int unpack; /* 0 not seen, 1 ok, 2 failed */
	char unpack_why[256];
	int flushed;
	char err[256]; /* protocol error */
};
/* Feed one packet. 0, or -1 on a protocol violation (r->err). */
int sync_report_feed(struct sync_report *r, enum sync_pkt_type type, const char *data, size_t len);
/* After the last packet: 0 every ref ok, 1 some refused or unpack failed, -1 protocol error. */
int sync_report_finish(struct sync_report *r);

/* --- push.c: git-receive-pack spoken directly, the pack built by git pack-objects */
struct sync_push_cmd {
	char dst[SYNC_REF_MAX_BUF]; /* remote ref, refs/heads/... */
	git_oid new_id; /* the local branch's tip */
	git_oid old_id; /* set by sync_push: what the remote had, zero when absent */
	int state; /* set by sync_push: 0 sent and accepted, 1 up to date, 2 refused */
	char why[256]; /* refusal, escaped */
};
#define SYNC_PUSH_NONFF (-2)
/* What receive-pack's advertisement says (pkt.c): the agent's capabilities and ref tips. */
#define SYNC_PUSH_MAX_ADVERTISED 10000
struct sync_adv {
	char caps[4096]; /* the first line's capabilities (cut to fit) */
	size_t capslen;
	git_oid *haves; /* owned: advertised ids, what the agent has (the pack may leave out) */
	size_t nhaves, cap;
	size_t count; /* lines fed */
};
/*
 * One data packet of the advertisement: a ref named like a command's dst sets its old_id,
 * every id but the zero one goes to the haves (a name too long to hold is no ref we push
 * to: only its id counts). 0, -EPROTO when malformed, -E2BIG past SYNC_PUSH_MAX_ADVERTISED
 * lines, -ENOMEM.
 */
int sync_adv_feed(
	struct sync_adv *adv, const char *data, size_t len, struct sync_push_cmd *cmds, size_t n);
void sync_adv_free(struct sync_adv *adv);
struct sync_push_opts {
	const char *gitdir; /* borrowed: git_repository_path() */
	const char *home; /* borrowed: HOME for git (the owner's) */
	int force, progress;
};
/*
 * Update the remote refs cmds[].dst to cmds[].new_id. 0 when the exchange completed
 * (look at each cmd's state), SYNC_PUSH_NONFF when a ref is not a fast-forward (nothing
 * was sent), -1 on failure (logged).
 */
int sync_push(struct sync_conn *c, git_repository *repo, struct sync_push_cmd *cmds, size_t n,
	const struct sync_push_opts *o);

/* --- git.c: /usr/bin/git run by the owner on the owner's repository */
#define SYNC_GIT_STDIN 1u /* a pipe to git's stdin in g->in, else /dev/null */
#define SYNC_GIT_STDOUT 2u /* git's stdout in g->out, else /dev/null */
#define SYNC_GIT_STDERR 4u /* git's stderr in g->err, else ours */
struct sync_git {
	pid_t pid;
	int in, out, err; /* owned, -1 when not piped */
};
/* 0 if /usr/bin/git can be run, else -1 (logged): checked before connecting. */
int sync_git_check(void);
/*
 * `git --git-dir=GITDIR ARGS...` (args NULL-terminated, at most 16), env: variables added
 * to the built environment (NULL: none). 0 or -1 (logged).
 */
int sync_git_start(struct sync_git *g, const char *gitdir, const char *home,
	const char *const *args, const char *const *env, unsigned flags);
/* Close the pipes, SIGKILL first if kill_it, reap: git's exit status (128+sig), -1. */
int sync_git_finish(struct sync_git *g, int kill_it);
/* g->err until EOF, its first n - 1 bytes into out. 0, -ETIMEDOUT past deadline, -errno. */
int sync_git_read_err(struct sync_git *g, char *out, size_t n, time_t deadline);

/* --- confine.c: the pull's child, confined before it reads what the agent sent */
struct sync_confine_in {
	const char *const *read; /* the git directories and alternates: read only */
	size_t nread;
	const char *incoming; /* the quarantine's pack directory: the only one written */
	int no_fork; /* threads only: no process of its own outlives it (the pack's verifier) */
};
struct sync_confined {
	long abi; /* Landlock ABI applied, 0: none */
	int net, scoped, seccomp, nnp;
};
/*
 * Confine the calling process (the pull's child, before it reads a byte from the agent):
 * a new session, no_new_privs, Landlock as in's paths say (when the kernel has it), the
 * seccomp allow list. 0, or -1 with err set (the child must then not go on).
 */
int sync_confine(
	const struct sync_confine_in *in, struct sync_confined *out, char *err, size_t errlen);
/* One line: "landlock ABI 7 (files, tcp, scopes), seccomp, no_new_privs". */
void sync_confined_describe(const struct sync_confined *c, char *out, size_t n);
#ifdef OCSB_TEST_BUILD
void sync_confine_probe(const char *phase);
#else
#define sync_confine_probe(phase) ((void)0)
#endif

/*
 * --- handover.c: what the confined child tells the parent, one record per line (fields
 * separated by tabs; texts are sync_escape's output): progress and remote text while it
 * downloads, then skip, branch (each followed by its stat, more and flag records), deleted,
 * memo, and end. The parent checks every field before it uses one: names are valid
 * branch names, ids 40 hex digits, numbers decimal, texts escaped, states consistent.
 */
struct sync_rfile;
#define SYNC_HO_LINE_MAX 8192
#define SYNC_HO_MAX_FLAGS 2000000
#define SYNC_STAT_FILES 20 /* files listed per branch in the diffstat */

/* One fetched branch, as the child found it and the parent prints it. */
struct sync_branch {
	char name[SYNC_REF_MAX + 1]; /* after refs/heads/, validated */
	git_oid tip, old;
	int have_old;
	const char *state; /* new, updated, forced, up to date (static strings) */
	size_t ahead, behind; /* against the owner's branch of the same name */
	int have_local;
	size_t commits; /* since the review base */
	int have_base;
	git_oid base;
	size_t files, ins, del;
	int have_since; /* since the last pull: old -> tip */
	size_t since_commits, since_files, since_ins, since_del;
	/* The parent's: its who records, h->who[who_first .. + who_n), and its whomore. */
	size_t who_first, who_n, who_other;
	int who_cut;
};

struct sync_flagrec {
	char branch[SYNC_REF_MAX + 1];
	char path[1024]; /* escaped */
	unsigned flag;
	int is_new; /* also raised by what is new since the last pull */
};

/*
 * Who committed a branch's commits (who.c, issue 28): the commits new since the last
 * pull, or on a first pull the commits to review (base -> tip), grouped by committer and
 * author ("name <email>", each part cut to SYNC_WHO_NAME / SYNC_WHO_EMAIL bytes). The
 * first SYNC_WHO_MAX pairs met from the tip are listed, the rest counted; at most
 * SYNC_WHO_WALK commits are read.
 */
#define SYNC_WHO_MAX 4
#define SYNC_WHO_WALK 1000
#define SYNC_WHO_NAME 64
#define SYNC_WHO_EMAIL 96
#define SYNC_WHO_TEXT (SYNC_WHO_NAME + SYNC_WHO_EMAIL + 4) /* "name <email>" */
#define SYNC_WHO_ESC (4 * SYNC_WHO_TEXT) /* the same escaped (sync_escape) */
struct sync_who {
	char committer[SYNC_WHO_TEXT], author[SYNC_WHO_TEXT]; /* raw bytes */
	size_t commits;
};
struct sync_whos {
	struct sync_who v[SYNC_WHO_MAX];
	size_t n;
	size_t other; /* commits of pairs not listed */
	int cut; /* more commits than SYNC_WHO_WALK: the rest not read */
};
/*
 * The commits reachable from tip and not from hide (NULL: none hidden), grouped. 0, or -1
 * with libgit2's error set (out then holds what was read before).
 */
int sync_who_collect(
	git_repository *repo, const git_oid *tip, const git_oid *hide, struct sync_whos *out);

/* The parent's copy of a who record: texts escaped, checked. */
struct sync_whorec {
	size_t commits;
	char *committer; /* owned */
	char *author; /* owned; NULL: the committer is the author */
};

enum sync_ho_memo { SYNC_HO_MEMO_NONE, SYNC_HO_MEMO_WRITE, SYNC_HO_MEMO_KEEP, SYNC_HO_MEMO_REMOVE };

/* The parent's view of the handover so far. */
struct sync_ho {
	struct sync_branch *br; /* owned */
	struct buf *stat; /* owned, one per branch: its diffstat lines, formatted */
	unsigned *nstat; /* owned: stat records per branch (a "more" counts as one) */
	size_t nb, cap;
	struct sync_flagrec *fl; /* owned */
	size_t nfl, flcap;
	struct sync_whorec *who; /* owned, in branch order (sync_branch.who_first) */
	size_t nwho, whocap;
	struct strv skipped; /* "escaped name\treason" */
	struct strv deleted; /* "name\thex id" */
	enum sync_ho_memo memo_review, memo_unrelated;
	int ended;
	/* the last progress or remote record */
	unsigned long long prog_objects, prog_total, prog_bytes;
	char remote[SYNC_HO_LINE_MAX];
};
enum sync_ho_kind { SYNC_HO_RESULT, SYNC_HO_PROGRESS, SYNC_HO_REMOTE };
/*
 * Check and take one record (len bytes, no newline). Its kind (h->prog_* or h->remote then
 * hold a progress or remote record), or -1 with err set: the child broke the format.
 */
int sync_ho_feed(struct sync_ho *h, const char *line, size_t len, char *err, size_t errlen);
/* After the last record: 0 when it ended properly and every deleted name is no branch. */
int sync_ho_finish(struct sync_ho *h, char *err, size_t errlen);
void sync_ho_free(struct sync_ho *h);
/* The child's side: the records into b. 0 or -1 (no memory). */
int sync_ho_put_branch(struct buf *b, const struct sync_branch *br);
int sync_ho_put_stat(struct buf *b, const struct sync_rfile *d);
int sync_ho_put_flag(struct buf *b, const char *path, unsigned flag, int is_new);
/* The who and whomore records of one branch (after its other records). */
int sync_ho_put_who(struct buf *b, const struct sync_whos *w);
/*
 * Branch i's who lines as the summary prints them ("  N commits committed by X, authored
 * by Y" when they differ), into out. 0 or -1 (no memory).
 */
int sync_ho_who_text(const struct sync_ho *h, size_t i, struct buf *out);
/* A text field: t escaped (sync_escape), and tabs are control bytes: escaped too. */
int sync_ho_put_text(struct buf *b, const char *t);
/* 1 if flag name is one of the gate's; *ret_flag its bit. */
int sync_flag_by_name(const char *name, unsigned *ret_flag);

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
/*
 * The pull's quarantine: <objects_dir>/ocsb-incoming (its path in ret_path) with pack/,
 * made 0700 where missing, never through a link, emptied of what an interrupted pull left
 * (*ret_removed). *ret_packfd holds pack/. 0 or a negative errno.
 */
#define SYNC_INCOMING "ocsb-incoming"
int sync_incoming_prepare(
	const char *objects_dir, char *ret_path, size_t n, int *ret_packfd, unsigned *ret_removed);
/*
 * Move the quarantine's packs (pack-<id>.pack with its .idx, regular files) into
 * <objects_dir>/pack, never over an existing name, then empty it. *ret_moved counts the
 * packs. 0 or a negative errno.
 */
int sync_incoming_commit(int packfd, const char *objects_dir, unsigned *ret_moved);
/* Empty the quarantine (a pull that failed keeps nothing the agent sent). */
void sync_incoming_clear(int packfd);
/*
 * The verified packs' directory, <objects_dir>/ocsb-verified/pack (its path in ret_path),
 * made like the quarantine and emptied; only the pack's verifier writes there, never the
 * confined child. *ret_fd holds it. 0 or a negative errno.
 */
#define SYNC_VERIFIED "ocsb-verified"
int sync_verified_prepare(const char *objects_dir, char *ret_path, size_t n, int *ret_fd);

/* --- verify.c: the parent's check of the pack the confined child kept */
struct sync_verify_in {
	const char *gitdir; /* the repository (its config is read) */
	const char *objects; /* its object store: alternate of the verifier's */
	const char *home;
	int inpackfd; /* the quarantine's pack directory (read) */
	const char *outdir; /* <objects>/ocsb-verified: GIT_OBJECT_DIRECTORY */
	const struct sync_confine_in *confine; /* its incoming: <outdir>/pack */
	time_t deadline;
};
/*
 * Each pack-<id>.pack of the quarantine fed, as bytes, to `git index-pack --stdin` in a
 * process confined like the child (writes only outdir/pack, threads but no fork), which
 * writes its own pack and index there: the ids the owner's store will trust are git's,
 * computed from the contents, and an id the store has already must have the same content
 * (git's collision check). The quarantine's indexes are never used. *ret_n counts the
 * packs. 0, or -1 after one line that says why.
 */
int sync_pack_verify(const struct sync_verify_in *in, unsigned *ret_n);
/*
 * The same check on a stream (the pull feeds it the pack as upload-pack sends it, while
 * the child downloads): start it, feed it, then finish, which ends its input and says
 * the name of the pack it wrote (ret_id, 40 hex). -1 with why set; kill ends it early.
 */
struct sync_verifier {
	pid_t pid;
	int in, out, err; /* owned */
	size_t fed;
};
int sync_verify_start(
	struct sync_verifier *v, const struct sync_verify_in *in, char *why, size_t whylen);
void sync_verify_feed(struct sync_verifier *v, const char *p, size_t n);
int sync_verify_finish(struct sync_verifier *v, time_t deadline, char *ret_id, size_t idlen,
	char *why, size_t whylen);
void sync_verify_kill(struct sync_verifier *v);

/* --- check.c: pure functions on what the agent sends */
/* 1 if name is a ref ocsb accepts from the agent (refs/heads/..., sane); else 0 + why. */
int sync_ref_name_ok(const char *name, char *why, size_t whylen);
/* Copy s for display: control, bidi and invalid UTF-8 bytes become \xNN. */
void sync_escape(const char *s, size_t len, char *out, size_t n);
/*
 * The reverse, for a log line: log_* escapes every line itself (common/log.c), and text
 * escaped twice would read "\\\\x1b". Stops at an escaped NUL. Returns out.
 */
const char *sync_unescape(const char *s, char *out, size_t n);

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
	SYNC_FLAG_LFSCONFIG = 1 << 9, /* .lfsconfig */
};
#define SYNC_FLAG_COUNT 10

/* One changed path between the review base and the fetched tip; modes 0 = absent. */
struct sync_entry {
	const char *path; /* borrowed */
	unsigned old_mode, new_mode;
	const char *old_data; /* borrowed; .gitattributes content or link target, else NULL */
	size_t old_len;
	const char *new_data; /* borrowed */
	size_t new_len;
	int new_cut; /* new_data is only the blob's first new_len bytes: the rest may say anything */
};

/*
 * The gate's flags, one per line ("  name  what it means"): the one list that --help, the
 * man page and docs/sync.md show (t-90-sync compares them).
 */
void sync_flags_print(FILE *f);
/* Which SYNC_FLAG_* bits a change raises. */
unsigned sync_review_classify(const struct sync_entry *e);
/* Whether classification needs the blob contents of this path/mode. */
int sync_review_wants_data(const char *path, unsigned mode);
/* Short name ("attr-driver") and a sentence for a single flag bit. */
const char *sync_flag_name(unsigned flag);
const char *sync_flag_text(unsigned flag);

/* --- diff.c: a set of object ids (open addressing, grows; the zero id is never kept) */
struct sync_oidset {
	git_oid *v;
	size_t n, cap;
};
/* 1 added, 0 already there, -1 out of memory. */
int sync_oidset_add(struct sync_oidset *s, const git_oid *id);
int sync_oidset_has(const struct sync_oidset *s, const git_oid *id);
void sync_oidset_free(struct sync_oidset *s);

/* --- related.c: "these histories share no commit", carried from one pull to the next */
/*
 * 1 if t2 and h2 provably share no commit, given that t and h share none: neither
 * t2 ^t nor h2 ^h contains a root commit. 0 when that cannot be shown within limit
 * commits per side (or in a shallow repository, or on any error).
 */
#define SYNC_MEMO_WALK 2000 /* commits looked at per side before the full merge base */
int sync_still_unrelated(git_repository *repo, const git_oid *t, const git_oid *t2,
	const git_oid *h, const git_oid *h2, size_t limit);
struct sync_memo {
	char ref[SYNC_REF_MAX_BUF + 64]; /* refs/remotes/<ns>/<branch> */
	git_oid tip, against; /* two commits that share no ancestor */
};
struct sync_memos {
	struct sync_memo *v;
	size_t n;
};
/*
 * <gitdir>/ocsb-sync.unrelated into ms: missing, a link, too big or damaged lines give
 * fewer entries, never an error. 0 or -ENOMEM.
 */
int sync_memo_load(const char *gitdir, struct sync_memos *ms);
/* The same from the file's text (NUL-terminated, cut in place). 0 or -ENOMEM. */
int sync_memo_parse(char *buf, struct sync_memos *ms);
/* The file's text for ms (sync_memo_save writes it whole). */
void sync_memo_write(FILE *f, const struct sync_memos *ms);
const struct sync_memo *sync_memo_find(const struct sync_memos *ms, const char *ref);
int sync_memo_add(
	struct sync_memos *ms, const char *ref, const git_oid *tip, const git_oid *against);
/* Replace the file with ms (removed when empty), atomically. 0 or a negative errno. */
int sync_memo_save(const char *gitdir, const struct sync_memos *ms);
/* The file's content into f (the pull's child writes it to a file the parent made). */
void sync_memo_write(FILE *f, const struct sync_memos *ms);
/*
 * A memo file written whole or not at all: sync_memo_begin fills path and tmp (n bytes
 * each: gitdir/name and its ".tmp") and opens tmp (0600, O_EXCL, not through a link);
 * NULL with *err = 0 when empty (path is then removed) or a negative errno.
 * sync_memo_commit flushes, closes and renames it over path (0 or -errno; tmp removed on
 * failure).
 */
FILE *sync_memo_begin(
	const char *gitdir, const char *name, int empty, char *path, char *tmp, size_t n, int *err);
/* out = gitdir "/" name suffix; -ENAMETOOLONG when it does not fit. */
int sync_gitdir_path(const char *gitdir, const char *name, const char *suffix, char *out, size_t n);
int sync_memo_commit(FILE *f, const char *tmp, const char *path);
/* Same entries in the same order (a pull that learnt nothing leaves the file alone). */
int sync_memos_equal(const struct sync_memos *a, const struct sync_memos *b);
void sync_memos_free(struct sync_memos *ms);

/* --- diff.c: what changed between two trees, opening only the subtrees that differ */
struct sync_delta {
	char *path; /* owned, full path in the tree */
	unsigned old_mode, new_mode; /* 0 = absent on that side */
	git_oid old_id, new_id;
};
struct sync_deltas {
	struct sync_delta *v;
	size_t n, cap;
	int odd; /* a tree it opened is not in git's strict order: a name twice, or unsorted */
};
/*
 * The changes from a to b (either may be NULL: empty), as git_diff_tree_to_tree with
 * default options reports them: git's path order, a type change as a deletion then an
 * addition, no renames; but with the modes git gives entries (a raw 120755 is a link,
 * as git checks it out, not a file as libgit2 says). At most max paths. 0, or a negative libgit2 error code with its error set
 * (GIT_ENOTFOUND: a changed subtree is missing); out is then empty.
 */
#define SYNC_DIFF_TOO_BIG (-100) /* more than max paths, or nested too deep */
int sync_tree_diff(git_repository *repo, const git_tree *a, const git_tree *b, size_t max,
	struct sync_deltas *out);
void sync_deltas_free(struct sync_deltas *d);

/*
 * Whether everything the fetched tips reach is in the store, the owner's refs trusted
 * complete, for a small fetch: 1 yes, -1 no (why says what is missing), 0 not decided
 * here (a root commit, over 256 commits or 20,000 changed paths, an error): ask git.
 */
int sync_fast_connected(
	git_repository *repo, const git_oid *tips, size_t ntips, char *why, size_t n);
/* The same with the trusted commits given (sync_trusted_add over every ref), not read. */
int sync_fast_connected_known(git_repository *repo, const git_oid *tips, size_t ntips,
	const struct sync_oidset *trusted, char *why, size_t n);
/* Add what ref makes trusted (a branch's, tag's or remote-tracking ref's target): 0, -1. */
int sync_trusted_add(struct sync_oidset *known, git_reference *ref);

/* --- review.c: the review of one fetched branch, carried from one pull to the next */
#define SYNC_REVIEW_MAX_PATHS 500000 /* changed paths a review lists before giving up */
#define SYNC_HISTORY_WALK 20000 /* new commits per side looked at before a full review */

/*
 * One changed path of the last whole-branch diff: its modes and blob pair (zero id: absent
 * on that side) and its line counts (none for a submodule or an unreadable entry).
 */
struct sync_linestat {
	char *path; /* owned */
	unsigned old_mode, new_mode;
	git_oid old_id, new_id;
	size_t add, del;
	int binary, unreadable;
};
#define SYNC_BLOOM_BITS_PER 16 /* ~0.2% false positives when full */
#define SYNC_BLOOM_MAX_BYTES (16u << 20)
/* What a pull remembers of one branch's review (<gitdir>/ocsb-sync.review, rmemo.c). */
struct sync_rmemo {
	char ref[SYNC_REF_MAX + 160]; /* refs/remotes/<ns>/<branch> */
	git_oid tip, against, base; /* against: the owner's branch or HEAD */
	int have_base, unique, have_local;
	size_t commits, ahead, behind;
	struct sync_linestat *stats; /* owned: the whole-branch diff base -> tip, in order */
	size_t nstats;
	unsigned char
		*bloom; /* owned, NULL: none; tip ^base as a Bloom filter when base = against */
	size_t bloom_bytes, bloom_n; /* a power of two; ids added */
};
struct sync_rmemos {
	struct sync_rmemo *v;
	size_t n;
};
/* Missing, a link, too big or damaged: fewer entries, never an error. 0 or -ENOMEM. */
int sync_rmemo_load(const char *gitdir, struct sync_rmemos *ms);
/*
 * The same from the file's len bytes in buf (buf[len] == '\0'; lines are cut in place):
 * a damaged block ends it, what came before counts. 0, or -ENOMEM with ms empty.
 */
int sync_rmemo_parse(char *buf, size_t len, struct sync_rmemos *ms);
/* The file's text for ms (sync_rmemo_save writes it whole). */
void sync_rmemo_write(FILE *f, const struct sync_rmemos *ms);
const struct sync_rmemo *sync_rmemo_find(const struct sync_rmemos *ms, const char *ref);
/* By ref, for sync_rmemo_bsearch (500 branches: 125,000 strcmp of a linear find saved). */
void sync_rmemos_sort(struct sync_rmemos *ms);
const struct sync_rmemo *sync_rmemo_bsearch(const struct sync_rmemos *ms, const char *ref);
/*
 * The indices of ms's entries in ref order (malloc'd, NULL: no memory); then whether ref
 * is among those n entries (n: ms->n when the order was made; entries appended to ms
 * later keep the indices valid and are not searched).
 */
size_t *sync_rmemos_order(const struct sync_rmemos *ms);
int sync_rmemos_has(const struct sync_rmemos *ms, const size_t *ord, size_t n, const char *ref);
/* Move *m (its stats) to the end of ms. 0 or -ENOMEM (m untouched). */
int sync_rmemo_push(struct sync_rmemos *ms, struct sync_rmemo *m);
/* Replace the file with ms (removed when empty), atomically. 0 or a negative errno. */
int sync_rmemo_save(const char *gitdir, const struct sync_rmemos *ms);
void sync_rmemo_write(FILE *f, const struct sync_rmemos *ms);
void sync_rmemo_free(struct sync_rmemo *m);
void sync_linestats_free(struct sync_linestat *v, size_t n);
void sync_rmemos_free(struct sync_rmemos *ms);

/*
 * 1 if every path from `from` ends at `stop` (no root commit on the way) within limit
 * commits; *ret_count is then the number of commits reachable from `from` and not from
 * `stop`. 0 when that cannot be shown (or in a shallow repository, or on an error).
 */
int sync_walk_onto(git_repository *repo, const git_oid *from, const git_oid *stop, size_t limit,
	size_t *ret_count);
/* The same walk; the commits it met in *set (the caller frees it, whatever the answer). */
int sync_walk_onto_set(git_repository *repo, const git_oid *from, const git_oid *stop, size_t limit,
	struct sync_oidset *set);
struct sync_history {
	int have_base, unique;
	git_oid base;
	size_t commits, ahead, behind, new_commits;
	unsigned char *bloom; /* owned: the memo's filter for the next pull, NULL: none */
	size_t bloom_bytes, bloom_n;
	int filtered; /* the owner moved under a branch built on his tip: the filter said so */
};
/*
 * The base and counts for tip/against carried from memo m: 1, or 0 (compute them). The
 * caller frees out->bloom.
 */
int sync_history_step(git_repository *repo, const struct sync_rmemo *m, const git_oid *tip,
	const git_oid *against, int have_local, size_t limit, struct sync_history *out);

/* One changed path of a review. */
struct sync_rfile {
	char *path; /* owned */
	unsigned old_mode, new_mode;
	size_t add, del;
	int binary, unreadable;
	unsigned flags; /* SYNC_FLAG_* */
};
struct sync_rpart {
	struct sync_rfile *v; /* owned, in git's path order */
	size_t n, ins, del;
};
struct sync_review_in {
	const git_oid *tip;
	const git_oid *against; /* the owner's branch of that name, else HEAD; NULL: none */
	int have_local; /* against is the owner's branch of that name */
	const git_oid *old; /* the remote-tracking ref before this pull; NULL: new */
	int unrelated_hint; /* tip and against provably share no commit (related.c) */
	const struct sync_rmemo *memo; /* borrowed, the last pull's; NULL: from scratch */
	size_t walk_limit;
};
struct sync_review {
	int have_base, unique, base_is_old, unrelated;
	int history_from_memo; /* 0 computed, 1 carried, 2 carried through the filter */
	int diff_from_memo; /* whole-branch diff: 1 the memo's (same tip, base), 2 composed */
	git_oid base;
	size_t commits, ahead, behind; /* ahead/behind: against the owner's branch */
	struct sync_rpart whole; /* base -> tip */
	int have_since;
	size_t since_commits;
	struct sync_rpart since; /* old -> tip */
	int have_memo;
	struct sync_rmemo memo; /* for the next pull; the caller names its ref */
};
/*
 * Review in->tip. 0, SYNC_DIFF_TOO_BIG (more than SYNC_REVIEW_MAX_PATHS paths), or -1
 * with libgit2's error set. rv is freed with sync_review_free either way.
 */
int sync_review_run(git_repository *repo, const struct sync_review_in *in, struct sync_review *rv);
void sync_rpart_free(struct sync_rpart *p);
void sync_review_free(struct sync_review *rv);

/* --- sync.c: one owner's session on one project (push and status there too) */
/* The transport payload must be the struct sync_conn: keep it first. */
struct sync_ctx {
	struct sync_conn conn;
	struct sync_opts *o; /* borrowed */
	struct ocsb_config cfg;
	struct user_info me, agent;
	git_repository *repo; /* owned */
	git_remote *remote; /* owned */
	const char *project; /* borrowed from cfg */
	char remote_path[PATH_MAX], key[PATH_MAX], pin[PATH_MAX], url[PATH_MAX + 128];
	char project_buf[PATH_MAX]; /* --host: the work tree */
	char ns[128]; /* refs/remotes/<ns>/: the agent, or AGENT@HOST */
	char pin_fix[600], key_fix[600];
	int tty;
	int progress_shown;
	int rec_fd; /* the pull's child: progress and remote text go to the parent; -1: none */
};
/* An object id's first 7 hex digits, in buf (8 bytes). */
const char *sync_short(const git_oid *id, char *buf);
/* One line for the failure of a git operation: the transport's root cause first. */
void sync_git_fail(struct sync_ctx *x, const char *what);
/* Our subtransport, the agent's sideband text escaped, the fetch bounds enforced. */
void sync_callbacks(struct sync_ctx *x, git_remote_callbacks *cb);

/* pull.c: `ocsb sync pull`. 0, 1 (--strict and something flagged), or -1 (logged). */
/*
 * The refs under one prefix, read with one iteration and sorted by name: 500 branches
 * looked up one by one cost a stat of packed-refs and an open per lookup, three lookups
 * per branch.
 */
struct sync_refent {
	char *name; /* after the prefix */
	git_oid id;
	int direct;
};

struct sync_reftab {
	struct sync_refent *v;
	size_t n;
};

/* Every ref with the object it resolves to: the download's haves (haves.c). */
struct sync_allrefs {
	char **names;
	git_oid *ids;
	size_t n, cap;
};
void sync_allrefs_free(struct sync_allrefs *a);
void sync_reftab_free(struct sync_reftab *t);
const struct sync_refent *sync_reftab_find(const struct sync_reftab *t, const char *name);
/*
 * One pass over every ref: the remote-tracking refs under PREFIX (ending in '/'), the
 * owner's branches, every ref's target (the download's haves), and in *known what the
 * history check trusts (*known_ok 0 when there were too many refs for it: the check is
 * then left to git). Read before the download: it writes objects only. 0, or -1 (said).
 */
int sync_refs_load(git_repository *repo, const char *prefix, struct sync_reftab *tracked,
	struct sync_reftab *locals, struct sync_allrefs *all, struct sync_oidset *known,
	int *known_ok);

int sync_do_pull(struct sync_ctx *x);

/* fetch.c: the pull's confined child. */
struct sync_fetch_io {
	int data, ctl; /* the relayed channel, and why the parent ended it */
	int rec, err; /* the handover's records, and stderr: both to the parent */
	int memo_review, memo_unrelated; /* files the parent made for the memos' new content */
	int lockfd; /* the pull's lock: held until the child has handed over */
	const char *incoming; /* the quarantine (an object directory with pack/) */
	const struct sync_confine_in *confine;
};
/* Confine, fetch, check, review, hand over, exit: never returns. */
__attribute__((noreturn)) void sync_fetch_child(
	struct sync_ctx *x, struct sync_fetch_io *io, pid_t parent);
/*
 * A second handle on repo's object database whose refs are the n given (names, targets)
 * held in memory, read-only (haves.c): libgit2's download negotiates with them instead of
 * reading every ref of the repository again. 0, or -1 (libgit2's error set).
 */
int sync_haves_repo(git_repository **out, git_repository *repo, const char *const *names,
	const git_oid *ids, size_t n);
void sync_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* In a forked child, before it is confined: the trace's /proc/self/statm is its own. Its fd, -1. */
int sync_trace_reopen(void);
/* remote.c: `ocsb sync init --host`. 0 or -1 (logged). */
int sync_do_init(struct sync_opts *o);

#endif
