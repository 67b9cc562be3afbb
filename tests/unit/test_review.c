/* SPDX-License-Identifier: MIT */
/*
 * The pull's review carried from one pull to the next (sync/review.c) against the same
 * review computed from scratch, on random histories: agent commits, force-pushes, owner
 * commits, merges of either side into the other, fast-forwards, resets, new roots. After
 * every simulated pull the two must agree on everything the owner sees: base, counts,
 * every changed path with its modes, line counts and gate flags, and what is new since
 * the last pull. The memo goes through its file between pulls.
 *
 * Fixed seeds always; OCSB_REVIEW_SEED=N adds seed N (and OCSB_REVIEW_RUNS=K runs from it).
 * Commit dates increase with every commit made, as in life: libgit2's ahead/behind count
 * (the from-scratch side) orders its walk by date.
 */
#define _GNU_SOURCE
#include "sync_unit.h"

#include "../../sync/sync.h"

static unsigned long long rstate;
static unsigned rn(unsigned n)
{
	rstate = rstate * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)((rstate >> 33) % n);
}

/* The paths a random tree may hold: plain files, gate-relevant ones, one of each kind. */
static const char *const paths[] = {"a.txt", "d/b.txt", "d/e/c.txt", "run.sh", ".gitattributes",
	".github/workflows/ci.yml", "link", "x", ".envrc", ".husky/pre-commit", "bin.dat",
	"z/deep/f.txt"};
#define NP (sizeof(paths) / sizeof(paths[0]))

struct tstate {
	unsigned mode[NP]; /* 0 absent */
	git_oid id[NP];
};

static git_repository *repo;
static long long rtime = 1700000000;

static void blob_of(const char *text, git_oid *out)
{
	assert_int_equal(git_blob_create_from_buffer(out, repo, text, strlen(text)), 0);
}

/* A new random value for slot i. */
static void mutate_slot(struct tstate *s, size_t i)
{
	char buf[256];
	unsigned v = rn(5);

	if (rn(6) == 0) {
		s->mode[i] = 0;
		return;
	}
	if (!strcmp(paths[i], ".gitattributes")) {
		snprintf(buf, sizeof(buf), "*.txt text\n%s", v < 2 ? "*.c filter=evil\n" : "");
		blob_of(buf, &s->id[i]);
		s->mode[i] = 0100644;
	} else if (!strcmp(paths[i], "link")) {
		blob_of(v < 2 ? "../../etc/passwd" : "a.txt", &s->id[i]);
		s->mode[i] = 0120000;
	} else if (!strcmp(paths[i], "x")) {
		/* a blob, a link, a submodule, by turns: type changes */
		unsigned k = rn(3);

		blob_of(k == 2 ? "gitlink" : "x target", &s->id[i]);
		s->mode[i] = k == 0 ? 0100644 : k == 1 ? 0120000 : 0160000;
	} else if (!strcmp(paths[i], "bin.dat")) {
		char bin[8] = {'b', 0, (char)v, 1, 2, 3, 0, 9};

		assert_int_equal(git_blob_create_from_buffer(&s->id[i], repo, bin, sizeof(bin)), 0);
		s->mode[i] = 0100644;
	} else {
		/* a few lines, some shared between versions, so line counts vary */
		int n = 0;

		for (unsigned l = 0; l < 1 + rn(6); l++)
			n += snprintf(buf + n, sizeof(buf) - (size_t)n, "line %u\n", rn(8));
		blob_of(buf, &s->id[i]);
		s->mode[i] = rn(4) == 0 ? 0100755 : 0100644;
	}
}

static void tree_of(const struct tstate *s, git_oid *out)
{
	git_index *ix;

	assert_int_equal(git_index_new(&ix), 0);
	for (size_t i = 0; i < NP; i++) {
		git_index_entry e;

		if (!s->mode[i])
			continue;
		memset(&e, 0, sizeof(e));
		e.path = paths[i];
		e.mode = s->mode[i];
		git_oid_cpy(&e.id, &s->id[i]);
		assert_int_equal(git_index_add(ix, &e), 0);
	}
	assert_int_equal(git_index_write_tree_to(out, ix, repo), 0);
	git_index_free(ix);
}

static void state_of(const git_oid *commit, struct tstate *s)
{
	git_commit *c;
	git_tree *t;

	memset(s, 0, sizeof(*s));
	assert_int_equal(git_commit_lookup(&c, repo, commit), 0);
	assert_int_equal(git_commit_tree(&t, c), 0);
	for (size_t i = 0; i < NP; i++) {
		git_tree_entry *e;

		if (git_tree_entry_bypath(&e, t, paths[i]) == 0) {
			s->mode[i] = git_tree_entry_filemode_raw(e);
			git_oid_cpy(&s->id[i], git_tree_entry_id(e));
			git_tree_entry_free(e);
		}
	}
	git_error_clear();
	git_tree_free(t);
	git_commit_free(c);
}

/* A commit of state s on parents p[0..n). */
static void commit_state(const struct tstate *s, const git_oid *p, size_t n, git_oid *out)
{
	git_signature *sig;
	git_oid tid;
	git_tree *t;
	git_commit *pc[2] = {NULL, NULL};

	tree_of(s, &tid);
	assert_int_equal(git_tree_lookup(&t, repo, &tid), 0);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(git_commit_lookup(&pc[i], repo, &p[i]), 0);
	assert_int_equal(git_signature_new(&sig, "R", "r@example.com", rtime++, 0), 0);
	assert_int_equal(git_commit_create(out, repo, NULL, sig, sig, NULL, "c", t, n,
				 (const git_commit **)pc),
		0);
	git_signature_free(sig);
	for (size_t i = 0; i < n; i++)
		git_commit_free(pc[i]);
	git_tree_free(t);
}

/* k commits, each changing one to three paths, on top of *tip. */
static void commits_on(git_oid *tip, unsigned k)
{
	struct tstate s;

	state_of(tip, &s);
	for (unsigned c = 0; c < k; c++) {
		git_oid n;

		for (unsigned m = 0; m < 1 + rn(3); m++)
			mutate_slot(&s, rn(NP));
		commit_state(&s, tip, 1, &n);
		*tip = n;
	}
}

/* Merge `other` into *tip: each path from either side, then maybe one change. */
static void merge_into(git_oid *tip, const git_oid *other)
{
	struct tstate a, b;
	git_oid p[2], n;

	state_of(tip, &a);
	state_of(other, &b);
	for (size_t i = 0; i < NP; i++)
		if (rn(2)) {
			a.mode[i] = b.mode[i];
			git_oid_cpy(&a.id[i], &b.id[i]);
		}
	if (rn(2))
		mutate_slot(&a, rn(NP));
	git_oid_cpy(&p[0], tip);
	git_oid_cpy(&p[1], other);
	commit_state(&a, p, 2, &n);
	*tip = n;
}

/* Every commit made so far, for force-pushes and resets onto any of them. */
static git_oid made[4096];
static size_t nmade;
static void remember(const git_oid *id)
{
	if (nmade < sizeof(made) / sizeof(made[0]))
		git_oid_cpy(&made[nmade++], id);
}

static void same_part(const struct sync_rpart *x, const struct sync_rpart *y)
{
	assert_int_equal(x->n, y->n);
	assert_int_equal(x->ins, y->ins);
	assert_int_equal(x->del, y->del);
	for (size_t i = 0; i < x->n; i++) {
		assert_string_equal(x->v[i].path, y->v[i].path);
		assert_int_equal(x->v[i].old_mode, y->v[i].old_mode);
		assert_int_equal(x->v[i].new_mode, y->v[i].new_mode);
		assert_int_equal(x->v[i].add, y->v[i].add);
		assert_int_equal(x->v[i].del, y->v[i].del);
		assert_int_equal(x->v[i].binary, y->v[i].binary);
		assert_int_equal(x->v[i].unreadable, y->v[i].unreadable);
		assert_int_equal(x->v[i].flags, y->v[i].flags);
	}
}

struct tally {
	unsigned pulls, from_memo, filtered, flagged, several, again, composed, ops[11];
};

static void one_run(unsigned long long seed, unsigned steps, struct tally *t)
{
	char gitdir[PATH_MAX + 64];
	git_oid L, T, old = {{0}};
	int have_old = 0, have_local;
	struct sync_rmemos ms = {0};
	struct tstate s;
	char ref[] = "refs/remotes/ai-dev/work";

	rstate = seed;
	snprintf(gitdir, sizeof(gitdir), "%s/r%llu.git", unit_dir, seed);
	assert_int_equal(git_repository_init(&repo, gitdir, 1), 0);
	nmade = 0;
	memset(&s, 0, sizeof(s));
	mutate_slot(&s, 0);
	commit_state(&s, NULL, 0, &L);
	remember(&L);
	commits_on(&L, 1 + rn(3));
	remember(&L);
	T = L;
	commits_on(&T, 1 + rn(4));
	remember(&T);
	have_local = (int)rn(2);
	for (unsigned step = 0; step < steps; step++) {
		struct sync_review full, inc;
		struct sync_review_in in = {.tip = &T,
			.against = &L,
			.have_local = have_local,
			.old = have_old ? &old : NULL,
			.walk_limit = SYNC_HISTORY_WALK};
		unsigned op = rn(100);
		const struct sync_rmemo *m;

		/* --- what happens between two pulls */
		if (op < 30) {
			commits_on(&T, 1 + rn(3)), t->ops[0]++;
		} else if (op < 42) {
			commits_on(&L, 1 + rn(2)), t->ops[1]++;
		} else if (op < 50) {
			/* force-push: a rewrite onto any commit seen so far */
			T = made[rn((unsigned)nmade)];
			commits_on(&T, 1 + rn(3));
			t->ops[2]++;
		} else if (op < 60) {
			merge_into(&T, rn(4) ? &L : &made[rn((unsigned)nmade)]), t->ops[3]++;
		} else if (op < 67) {
			merge_into(&L, rn(4) ? &T : &made[rn((unsigned)nmade)]), t->ops[4]++;
		} else if (op < 70) {
			L = T, t->ops[5]++; /* the owner fast-forwards to the agent's branch */
		} else if (op < 73) {
			L = made[rn((unsigned)nmade)], t->ops[6]++; /* the owner resets main */
		} else if (op < 75) {
			memset(&s, 0, sizeof(s)); /* a new root on the agent's side */
			mutate_slot(&s, rn(NP));
			commit_state(&s, NULL, 0, &T);
			t->ops[7]++;
		} else if (op < 81) {
			commits_on(&T, 1), commits_on(&L, 1), t->ops[8]++;
		} else if (op < 85) {
			/* between two pulls the agent commits and the owner takes that commit */
			commits_on(&T, 1 + rn(2));
			if (rn(2))
				merge_into(&L, &T);
			else
				L = T;
			if (rn(2))
				commits_on(&T, 1);
			t->ops[10]++;
		} else {
			t->ops[9]++; /* nothing: a no-change pull */
		}
		remember(&T);
		remember(&L);

		/* --- the pull: from scratch, and from the memo the last pull left */
		in.memo = NULL;
		assert_int_equal(sync_review_run(repo, &in, &full), 0);
		in.memo = m = sync_rmemo_find(&ms, ref);
		assert_int_equal(sync_review_run(repo, &in, &inc), 0);
		t->pulls++;
		t->from_memo += inc.history_from_memo != 0;
		t->filtered += inc.history_from_memo == 2;
		t->again += inc.diff_from_memo == 1;
		t->composed += inc.diff_from_memo == 2;
		assert_int_equal(full.diff_from_memo, 0);
		/* The reference itself, against libgit2's plain answers. */
		if (full.have_base) {
			size_t ahead, behind;

			assert_int_equal(
				git_graph_ahead_behind(&ahead, &behind, repo, &T, &full.base), 0);
			assert_int_equal(full.commits, ahead);
		}
		if (have_local) {
			size_t ahead, behind;

			assert_int_equal(git_graph_ahead_behind(&ahead, &behind, repo, &T, &L), 0);
			assert_int_equal(full.ahead, ahead);
			assert_int_equal(full.behind, behind);
		}
		if (full.have_base && !full.base_is_old) {
			git_oid mb;
			git_oidarray all = {0};

			assert_int_equal(git_merge_base(&mb, repo, &T, &L), 0);
			assert_true(git_oid_equal(&mb, &full.base));
			/* The base from one ahead/behind walk is the only one only when it is. */
			assert_int_equal(git_merge_bases(&all, repo, &T, &L), 0);
			assert_int_equal(full.unique, all.count == 1);
			t->several += all.count > 1;
			git_oidarray_dispose(&all);
		}
		/*
		 * Line counts as libgit2's own diff counts them, submodules aside (libgit2 may
		 * count their "Subproject commit" line or not, depending on what it finds of
		 * the submodule; the review counts none).
		 */
		{
			git_commit *tc, *bc = NULL;
			git_tree *tt, *bt = NULL;
			git_diff *d;
			size_t ins = 0, del = 0;

			assert_int_equal(git_commit_lookup(&tc, repo, &T), 0);
			assert_int_equal(git_commit_tree(&tt, tc), 0);
			if (full.have_base) {
				assert_int_equal(git_commit_lookup(&bc, repo, &full.base), 0);
				assert_int_equal(git_commit_tree(&bt, bc), 0);
			}
			assert_int_equal(git_diff_tree_to_tree(&d, repo, bt, tt, NULL), 0);
			for (size_t q = 0; q < git_diff_num_deltas(d); q++) {
				const git_diff_delta *dd = git_diff_get_delta(d, q);
				git_patch *pp;
				size_t a1 = 0, d1 = 0;

				if (dd->old_file.mode == GIT_FILEMODE_COMMIT ||
					dd->new_file.mode == GIT_FILEMODE_COMMIT)
					continue;
				assert_int_equal(git_patch_from_diff(&pp, d, q), 0);
				if (pp)
					git_patch_line_stats(NULL, &a1, &d1, pp);
				git_patch_free(pp);
				ins += a1;
				del += d1;
			}
			assert_int_equal(ins, full.whole.ins);
			assert_int_equal(del, full.whole.del);
			git_diff_free(d);
			git_tree_free(tt);
			git_tree_free(bt);
			git_commit_free(tc);
			git_commit_free(bc);
		}
		assert_int_equal(full.have_base, inc.have_base);
		if (full.have_base)
			assert_true(git_oid_equal(&full.base, &inc.base));
		assert_int_equal(full.commits, inc.commits);
		assert_int_equal(full.ahead, inc.ahead);
		assert_int_equal(full.behind, inc.behind);
		same_part(&full.whole, &inc.whole);
		assert_int_equal(full.have_since, inc.have_since);
		assert_int_equal(full.since_commits, inc.since_commits);
		same_part(&full.since, &inc.since);
		for (size_t i = 0; i < inc.whole.n; i++)
			t->flagged += inc.whole.v[i].flags != 0;

		/* --- the memo goes through its file, as between two runs of ocsb */
		sync_rmemos_free(&ms);
		if (inc.have_memo) {
			snprintf(inc.memo.ref, sizeof(inc.memo.ref), "%s", ref);
			assert_int_equal(sync_rmemo_push(&ms, &inc.memo), 0);
		}
		assert_int_equal(sync_rmemo_save(gitdir, &ms), 0);
		sync_rmemos_free(&ms);
		assert_int_equal(sync_rmemo_load(gitdir, &ms), 0);
		assert_int_equal(ms.n, inc.have_memo ? 1 : 0);
		sync_review_free(&full);
		sync_review_free(&inc);
		old = T;
		have_old = 1;
	}
	sync_rmemos_free(&ms);
	git_repository_free(repo);
	repo = NULL;
}

static void review_differential(void **state)
{
	struct tally t = {0};
	const char *env = getenv("OCSB_REVIEW_SEED"), *runs = getenv("OCSB_REVIEW_RUNS");
	unsigned long long seed = 20261201;
	unsigned nruns = 25;

	(void)state;
	for (unsigned r = 0; r < nruns; r++)
		one_run(seed + r, 40, &t);
	print_message("# review differential: seeds %llu..%llu, %u pulls (%u with the history from "
		      "the memo, %u of them through the filter; the diff: %u the memo's, %u "
		      "composed), %u flagged "
		      "paths, %u with several merge bases; ops: %u agent, "
		      "%u owner, %u force, %u agent merges, %u owner merges, %u ff, %u resets, "
		      "%u roots, %u both, %u none, %u owner takes new agent commits\n",
		seed, seed + nruns - 1, t.pulls, t.from_memo, t.filtered, t.again, t.composed,
		t.flagged, t.several, t.ops[0], t.ops[1], t.ops[2], t.ops[3], t.ops[4], t.ops[5],
		t.ops[6], t.ops[7], t.ops[8], t.ops[9], t.ops[10]);
	/* The memo path and the gate were exercised, not only the fallbacks. */
	assert_true(t.from_memo > t.pulls / 4);
	assert_true(t.filtered > 10);
	assert_true(t.flagged > 100);
	assert_true(t.several > 0);
	assert_true(t.again > 50);
	assert_true(t.composed > 50);
	for (unsigned i = 0; i < 11; i++)
		assert_true(t.ops[i] > 0);
	if (env && *env) {
		struct tally u = {0};
		unsigned long long s = strtoull(env, NULL, 10);
		unsigned k = runs && *runs ? (unsigned)strtoul(runs, NULL, 10) : 1;

		for (unsigned r = 0; r < k; r++)
			one_run(s + r, 40, &u);
		print_message("# review differential: OCSB_REVIEW_SEED %llu, %u runs, %u pulls (%u "
			      "from the memo), all equal\n",
			s, k, u.pulls, u.from_memo);
	}
}

#define OIDS "1111111111111111111111111111111111111111 2222222222222222222222222222222222222222"
#define HDR(b) "branch refs/remotes/ai-dev/" b " " OIDS

/* The memo file: damaged blocks end it, a link is not followed, nothing hostile is kept. */
static void review_memo_file(void **state)
{
	struct sync_rmemos ms = {0};
	struct sync_rmemo m = {0};
	struct sync_linestat st[2];
	char path[PATH_MAX + 64];
	FILE *f;

	(void)state;
	memset(st, 0, sizeof(st));
	snprintf(m.ref, sizeof(m.ref), "refs/remotes/ai-dev/a");
	git_oid_fromstr(&m.tip, "1111111111111111111111111111111111111111");
	git_oid_fromstr(&m.against, "2222222222222222222222222222222222222222");
	git_oid_fromstr(&m.base, "3333333333333333333333333333333333333333");
	m.have_base = m.unique = 1;
	m.commits = 20000;
	git_oid_fromstr(&st[0].new_id, "4444444444444444444444444444444444444444");
	st[0].add = 7;
	st[0].new_mode = 0100755;
	st[0].path = (char *)"a dir/new\nline \xe2\x80\xae";
	git_oid_fromstr(&st[1].old_id, "5555555555555555555555555555555555555555");
	st[1].del = 3;
	st[1].binary = 1;
	st[1].old_mode = 0120000;
	st[1].unreadable = 1;
	st[1].path = (char *)"gone";
	m.stats = st;
	m.nstats = 2;
	ms.v = &m;
	ms.n = 1;
	assert_int_equal(sync_rmemo_save(unit_dir, &ms), 0);
	memset(&ms, 0, sizeof(ms));
	assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 1);
	assert_string_equal(ms.v[0].ref, "refs/remotes/ai-dev/a");
	assert_int_equal(ms.v[0].commits, 20000);
	assert_int_equal(ms.v[0].nstats, 2);
	assert_true(git_oid_is_zero(&ms.v[0].stats[0].old_id));
	assert_int_equal(ms.v[0].stats[0].add, 7);
	assert_int_equal(ms.v[0].stats[1].binary, 1);
	/* the diff itself: paths (any byte but NUL), modes, unreadable */
	assert_string_equal(ms.v[0].stats[0].path, "a dir/new\nline \xe2\x80\xae");
	assert_int_equal(ms.v[0].stats[0].new_mode, 0100755);
	assert_int_equal(ms.v[0].stats[0].old_mode, 0);
	assert_string_equal(ms.v[0].stats[1].path, "gone");
	assert_int_equal(ms.v[0].stats[1].old_mode, 0120000);
	assert_int_equal(ms.v[0].stats[1].unreadable, 1);
	assert_non_null(sync_rmemo_find(&ms, "refs/remotes/ai-dev/a"));
	assert_null(sync_rmemo_find(&ms, "refs/remotes/ai-dev/b"));
	sync_rmemos_free(&ms);

	/* a second block cut short, then garbage: the first block only */
	snprintf(path, sizeof(path), "%s/ocsb-sync.review", unit_dir);
	f = fopen(path, "a");
	assert_non_null(f);
	fprintf(f, "%s - 0 1 0 0 5 0 0 end\n- - 1 1 0\n", HDR("b"));
	fprintf(f, "branch refs/heads/x " OIDS " - 0 1 0 0 0 0 0 end\n");
	fclose(f);
	assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 1);
	sync_rmemos_free(&ms);
	/* each header alone: a good one with a filter (control), then ones that lie */
	{
		static const char *const bad[] = {
			"- 1 1 0 0 0 0 0 end\n", /* base flag without a base */
			"- 0 1 0 0 0 128 1 end\nabcd\n", /* a filter line too short */
			"- 0 1 0 0 0 100 1 end\n", /* a filter size not a power of two */
			"- 0 1 0 0 0 128 65 end\n", /* overfull */
			"- 0 1 0 0 0 0 0\n", /* no end */
			"- 0 1 0 0 1 0 0 end\n- - 1 1 0\n", /* a diff line without a path */
			"- 0 1 0 0 1 0 0 end\n- - 1 1 0 0 100644 0 610062\n", /* a NUL in it */
			"- 0 1 0 0 1 0 0 end\n- - 1 1 0 0 0 0 61\n", /* on neither side */
			"- 0 1 0 0 1 0 0 end\n- - 1 1 0 0 100644 0 6\n", /* odd hex */
			"- 0 1 0 0 1 0 0 end\n- - 1 1 0 0 200000 0 61\n", /* not a mode */
		};
		char hex[257];

		for (int k = 0; k < 256; k++)
			hex[k] = "0123456789abcdef"[k % 16];
		hex[256] = '\0';
		f = fopen(path, "w");
		fprintf(f, "%s - 0 1 0 0 0 128 64 end\n%s\n", HDR("c"), hex);
		fclose(f);
		assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
		assert_int_equal(ms.n, 1);
		assert_int_equal(ms.v[0].bloom_bytes, 128);
		assert_int_equal(ms.v[0].bloom[1], 0x23);
		sync_rmemos_free(&ms);
		/* a good diff line (control for the bad ones below) */
		f = fopen(path, "w");
		fprintf(f, "%s - 0 1 0 0 1 0 0 end\n- - 1 1 0 0 100644 0 61\n", HDR("c"));
		fclose(f);
		assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
		assert_int_equal(ms.n, 1);
		assert_string_equal(ms.v[0].stats[0].path, "a");
		sync_rmemos_free(&ms);
		for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
			f = fopen(path, "w");
			fprintf(f, "%s %s", HDR("d"), bad[k]);
			fclose(f);
			assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
			assert_int_equal(ms.n, 0);
		}
		/* more ids than bits, by a count that overflows when multiplied */
		f = fopen(path, "w");
		fprintf(f, "%s - 0 1 0 0 0 128 2305843009213693952 end\n%s\n", HDR("e"), hex);
		fclose(f);
		assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
		assert_int_equal(ms.n, 0);
	}
	/* a link in its place is not followed */
	unlink(path);
	assert_int_equal(symlink("/etc/hostname", path), 0);
	assert_int_equal(sync_rmemo_load(unit_dir, &ms), 0);
	assert_int_equal(ms.n, 0);
	/* saving an empty memo removes the file */
	unlink(path);
	f = fopen(path, "w");
	fclose(f);
	assert_int_equal(sync_rmemo_save(unit_dir, &ms), 0);
	assert_int_equal(access(path, F_OK), -1);
}

/* The walk that carries the history forward: only paths that all end at the old tip. */
static void review_walk_onto(void **state)
{
	char gitdir[PATH_MAX + 64];
	struct tstate s;
	git_oid root, a, b, m, other;
	size_t n = 99;

	(void)state;
	snprintf(gitdir, sizeof(gitdir), "%s/w.git", unit_dir);
	assert_int_equal(git_repository_init(&repo, gitdir, 1), 0);
	rstate = 7;
	memset(&s, 0, sizeof(s));
	mutate_slot(&s, 0);
	commit_state(&s, NULL, 0, &root);
	a = root;
	commits_on(&a, 3);
	b = a;
	commits_on(&b, 5);
	assert_int_equal(sync_walk_onto(repo, &b, &a, 100, &n), 1);
	assert_int_equal(n, 5);
	assert_int_equal(sync_walk_onto(repo, &a, &a, 100, &n), 1);
	assert_int_equal(n, 0);
	/* the limit is a limit */
	assert_int_equal(sync_walk_onto(repo, &b, &a, 4, &n), 0);
	/* a rewrite: the path ends at the root, not at the old tip */
	other = root;
	commits_on(&other, 2);
	assert_int_equal(sync_walk_onto(repo, &other, &a, 100, &n), 0);
	/* a merge of something older: one path misses the stop */
	m = b;
	merge_into(&m, &other);
	assert_int_equal(sync_walk_onto(repo, &m, &b, 100, &n), 0);
	/* a merge whose both sides end at the stop counts each new commit once */
	other = b;
	commits_on(&other, 2);
	m = b;
	commits_on(&m, 1);
	merge_into(&m, &other);
	assert_int_equal(sync_walk_onto(repo, &m, &b, 100, &n), 1);
	assert_int_equal(n, 4);
	git_repository_free(repo);
	repo = NULL;
}

/* One commit on *tip (the tree of a.txt = text) by committer c, author a. */
static void commit_by(git_oid *tip, const char *cn, const char *ce, const char *an, const char *ae,
	const char *text)
{
	git_signature *c, *a;
	git_oid tid;
	git_tree *t;
	git_commit *p;
	struct tstate s;

	state_of(tip, &s);
	blob_of(text, &s.id[0]);
	s.mode[0] = 0100644;
	tree_of(&s, &tid);
	assert_int_equal(git_tree_lookup(&t, repo, &tid), 0);
	assert_int_equal(git_commit_lookup(&p, repo, tip), 0);
	assert_int_equal(git_signature_new(&c, cn, ce, rtime++, 0), 0);
	assert_int_equal(git_signature_new(&a, an, ae, rtime++, 0), 0);
	assert_int_equal(
		git_commit_create(tip, repo, NULL, a, c, NULL, "c", t, 1, (const git_commit **)&p),
		0);
	git_signature_free(c);
	git_signature_free(a);
	git_commit_free(p);
	git_tree_free(t);
}

/*
 * Who committed (who.c) through the handover to the summary's lines: the agent as
 * committer with the owner as author is said as both, the same person once, the
 * agent's control bytes and bidi marks escaped, pairs past SYNC_WHO_MAX counted.
 */
static void review_who(void **state)
{
	char gitdir[PATH_MAX + 64], err[256];
	struct sync_whos w;
	struct sync_branch b = {0};
	struct sync_ho h = {0};
	struct buf out = {0}, text = {0};
	struct tstate s;
	git_oid root, tip;

	(void)state;
	snprintf(gitdir, sizeof(gitdir), "%s/who.git", unit_dir);
	assert_int_equal(git_repository_init(&repo, gitdir, 1), 0);
	rstate = 11;
	memset(&s, 0, sizeof(s));
	mutate_slot(&s, 0);
	commit_state(&s, NULL, 0, &root);
	tip = root;
	commit_by(
		&tip, "ai-dev (ocsb agent)", "ai-dev@box.ocsb", "Alice", "alice@example.org", "1");
	commit_by(
		&tip, "ai-dev (ocsb agent)", "ai-dev@box.ocsb", "Alice", "alice@example.org", "2");
	commit_by(&tip, "Alice", "alice@example.org", "Alice", "alice@example.org", "3");
	commit_by(&tip, "Eve\x1b[2J\xe2\x80\xae", "e\tve@x", "Eve", "eve@x", "4");
	assert_int_equal(sync_who_collect(repo, &tip, &root, &w), 0);
	assert_int_equal(w.n, 3);
	assert_int_equal(w.other, 0);
	assert_false(w.cut);
	/* From the tip: the hostile one first, the agent's two last. */
	assert_string_equal(w.v[2].committer, "ai-dev (ocsb agent) <ai-dev@box.ocsb>");
	assert_string_equal(w.v[2].author, "Alice <alice@example.org>");
	assert_int_equal(w.v[2].commits, 2);

	snprintf(b.name, sizeof(b.name), "feature");
	git_oid_cpy(&b.tip, &tip);
	b.state = "new";
	assert_int_equal(sync_ho_put_branch(&out, &b), 0);
	assert_int_equal(sync_ho_put_who(&out, &w), 0);
	assert_int_equal(buf_puts(&out, "end\n"), 0);
	for (char *p = out.data, *nl; (nl = strchr(p, '\n')); p = nl + 1)
		assert_true(sync_ho_feed(&h, p, (size_t)(nl - p), err, sizeof(err)) >= 0);
	assert_int_equal(sync_ho_finish(&h, err, sizeof(err)), 0);
	assert_int_equal(sync_ho_who_text(&h, 0, &text), 0);
	assert_string_equal(text.data,
		"  1 commit committed by Eve\\x1b[2J\\xe2\\x80\\xae <e\\x09ve@x>, authored by "
		"Eve <eve@x>\n"
		"  1 commit committed and authored by Alice <alice@example.org>\n"
		"  2 commits committed by ai-dev (ocsb agent) <ai-dev@box.ocsb>, authored by "
		"Alice <alice@example.org>\n");
	sync_ho_free(&h);
	buf_free(&text);
	buf_free(&out);

	/* Past SYNC_WHO_MAX pairs (B, A, Eve, Alice from the tip): the agent's two counted. */
	commit_by(&tip, "A", "a@x", "A", "a@x", "5");
	commit_by(&tip, "B", "b@x", "B", "b@x", "6");
	commit_by(&tip, "B", "b@x", "B", "b@x", "7");
	assert_int_equal(sync_who_collect(repo, &tip, &root, &w), 0);
	assert_int_equal(w.n, SYNC_WHO_MAX);
	assert_int_equal(w.other, 2);
	assert_int_equal(sync_who_collect(repo, &tip, &tip, &w), 0);
	assert_int_equal(w.n + w.other, 0);
	assert_int_equal(sync_ho_put_who(&out, &w), 0);
	assert_null(out.data);
	git_repository_free(repo);
	repo = NULL;
}

/* A turned child's who records: misplaced, too many, unescaped, or without an identity. */
static void review_who_hostile(void **state)
{
	static const char *const bad[] = {
		"who\t1\tA <a@x>\t-", /* before any branch */
		"B\twho\t0\tA <a@x>\t-", /* zero commits */
		"B\twho\t1\tA \x1b <a@x>\t-", /* a control byte */
		"B\twho\t1\tnobody\t-", /* no identity */
		"B\twho\t1\tA <a@x>\t-\nwho\t1\tB <b@x>\t-\nwho\t1\tC <c@x>\t-\nwho\t1\tD "
		"<d@x>\t-\nwho\t1\tE <e@x>\t-", /* a fifth pair */
		"B\twhomore\t1\t0\nwho\t1\tA <a@x>\t-", /* after its whomore */
		"B\twhomore\t0\t0", /* saying nothing */
		"B\twhomore\t1\t0\nwhomore\t1\t0", /* twice */
	};
	const char *branch =
		"branch\tmain\t0123456789abcdef0123456789abcdef01234567\t-\tnew\t0\t0\t0\t1"
		"\t-\t0\t0\t0\t0\t0\t0\t0\t0";

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct sync_ho h = {0};
		char err[256], lines[1024];
		int failed = 0;

		snprintf(lines, sizeof(lines), "%s%s\n", bad[i][0] == 'B' ? branch : "",
			bad[i] + (bad[i][0] == 'B' ? 1 : 0));
		for (char *p = lines, *nl; !failed && (nl = strchr(p, '\n')); p = nl + 1)
			failed = sync_ho_feed(&h, p, (size_t)(nl - p), err, sizeof(err)) < 0;
		assert_true(failed);
		sync_ho_free(&h);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			review_memo_file, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			review_walk_onto, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(
			review_differential, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test_setup_teardown(review_who, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(review_who_hostile),
	};

	return sync_unit_run(tests, sizeof(tests) / sizeof(tests[0]));
}
