/* SPDX-License-Identifier: MIT */
/*
 * The mirror's writer run for ocsb-provision (root): the writer of mirror_priv.c in a child
 * running as the account (spawn_fn's drop), its answer read back, and the refresh and
 * reservation built on it. Apart from the writer itself, which the account runs.
 */
#define _GNU_SOURCE
#include "mirror_int.h"

struct wjob {
	struct mirror *m;
	const char *stream;
	size_t len;
	int64_t scan_ns;
	int reserve; /* mirror_reserve's part instead of mirror_apply's */
};

static int put_line(struct buf *b, char tag, const char *text)
{
	return buf_printf(b, "%c %s", tag, text) < 0 || buf_append(b, "", 1) < 0 ? -1 : 0;
}

/*
 * As the account (spawn_fn's drop): the same writer as the supervisor's. The answer:
 * NUL-terminated records "S written removed unchanged skipped withheld redacted entries",
 * "C change", "N notice" (root parses them; the manifest it reads back from the status file).
 */
static int writer_child(void *arg, int out)
{
	struct wjob *j = arg;
	struct mirror_stats st = {0};
	struct strv lines = {0};
	struct buf b = {0};
	char line[160];
	int r = 0;

	if (j->reserve) {
		if (mirror_reserve_here(j->m, 0, &lines) < 0)
			return 1;
		for (size_t i = 0; i < lines.n; i++)
			r |= put_line(&b, 'C', lines.v[i]);
		strv_free(&lines);
	} else {
		if (mirror_apply(j->m, j->stream, j->len, 0, j->scan_ns, &st) < 0)
			return 1;
		snprintf(line, sizeof(line), "%u %u %u %u %u %u %u", st.written, st.removed,
			st.unchanged, st.skipped, st.withheld, st.redacted, st.entries);
		r |= put_line(&b, 'S', line);
		for (size_t i = 0; i < j->m->changes.n; i++)
			r |= put_line(&b, 'C', j->m->changes.v[i]);
		for (size_t i = 0; i < j->m->notices.n; i++)
			r |= put_line(&b, 'N', j->m->notices.v[i]);
	}
	if (r)
		return 1;
	for (const char *p = b.data; p && p < b.data + b.len;) {
		ssize_t w = write(out, p, (size_t)(b.data + b.len - p));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 1;
		p += w;
	}
	buf_free(&b);
	return 0;
}

/* Root runs the writer as the account; 0 with the answer parsed, or -1 logged. */
static int write_as_account(struct wjob *j, struct mirror_stats *st, struct strv *changes)
{
	struct mirror *m = j->m;
	struct spawn_opts o = {.drop = 1,
		.uid = m->tree_uid,
		.gid = m->tree_gid,
		.user = m->tree_user,
		.timeout_ms = 120000,
		.max_output = 32u * 1024 * 1024};
	struct spawn_result res;
	char how[64];
	int r, have = j->reserve;

	if (!m->tree_user[0]) {
		log_err("mirror: no account to write %s as (mirror_set_account)", m->tree);
		return -1;
	}
	r = spawn_fn(writer_child, j, &o, &res);
	if (r < 0) {
		log_err("mirror: cannot start the writer as %s: %s", m->tree_user, strerror(-r));
		return -1;
	}
	if (res.status != 0 || res.timed_out) {
		log_err("mirror: the writer running as %s failed (%s)", m->tree_user,
			spawn_describe(&res, how, sizeof(how)));
		spawn_result_free(&res);
		return -1;
	}
	for (size_t off = 0; off < res.output_len;) {
		const char *rec = res.output + off;
		size_t n = strnlen(rec, res.output_len - off);

		if (off + n == res.output_len || n < 2)
			break;
		off += n + 1;
		if (rec[0] == 'S' && st)
			have = sscanf(rec + 2, "%u %u %u %u %u %u %u", &st->written, &st->removed,
				       &st->unchanged, &st->skipped, &st->withheld, &st->redacted,
				       &st->entries) == 7;
		else if (rec[0] == 'C')
			strv_push(changes, rec + 2);
		else if (rec[0] == 'N')
			strv_push(&m->notices, rec + 2);
	}
	spawn_result_free(&res);
	if (!have) {
		log_err("mirror: the writer running as %s gave no answer", m->tree_user);
		return -1;
	}
	return 0;
}

int mirror_refresh(struct mirror *m, int dry, struct mirror_stats *ret)
{
	struct spawn_opts o = {.drop = m->drop,
		.uid = m->owner_uid,
		.gid = m->owner_gid,
		.user = m->drop ? m->owner : NULL,
		.cwd = m->home,
		.timeout_ms = 60000,
		.max_output = MIRROR_MAX_TOTAL + 32u * 1024 * 1024};
	struct mirror_stats st = {0};
	struct spawn_result res;
	long t0 = mono_ms();
	int64_t scan_ns;
	char how[64];
	int r;

	strv_free(&m->changes);
	strv_free(&m->notices);
	/* Before the reader's first stat: every entry it checks is checked after this. */
	scan_ns = mirror_scan_start();
	r = spawn_fn(m->reader ? m->reader : owner_scan_child, m, &o, &res);
	if (r < 0) {
		log_err("mirror: cannot start the reader as %s: %s", m->owner, strerror(-r));
		return -1;
	}
	if (res.status != 0 || res.timed_out) {
		log_err("mirror: the reader running as %s failed (%s): nothing changed", m->owner,
			spawn_describe(&res, how, sizeof(how)));
		spawn_result_free(&res);
		return -1;
	}
	if (geteuid() == 0 && !dry) {
		struct wjob j = {.m = m, .stream = res.output, .len = res.output_len,
			.scan_ns = scan_ns};

		/* The account's tree, written by the account (invariant 7): root reads it back. */
		r = write_as_account(&j, &st, &m->changes);
		if (r == 0 && mirror_load(m) < 0)
			r = -1;
	} else {
		r = mirror_apply(m, res.output, res.output_len, dry, scan_ns, &st);
	}
	spawn_result_free(&res);
	st.ms = mono_ms() - t0;
	if (ret)
		*ret = st;
	return r < 0 ? -1 : 0;
}

int mirror_reserve(struct mirror *m, int dry, struct strv *changes)
{
	struct strv want = {0};
	struct wjob j = {.m = m, .reserve = 1};
	int r;

	if (dry || geteuid() != 0)
		return mirror_reserve_here(m, dry, changes);
	/* Root: nothing to make, no child. */
	r = mirror_reserve_here(m, 1, &want);
	if (r == 0 && want.n)
		r = write_as_account(&j, NULL, changes);
	strv_free(&want);
	return r;
}
