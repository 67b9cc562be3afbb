/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the pull's handover (sync/handover.c): the input is the stream a
 * turned confined child could send, fed line by line to the parent's parser until it
 * refuses one. What the parent then acts on must hold, else abort():
 *   - every branch name is one sync_ref_name_ok accepts under refs/heads/ (the parent
 *     writes refs/remotes/NS/NAME), at most once;
 *   - a branch's state agrees with its ids (new without an old id, up to date when equal);
 *   - what reaches the terminal (diffstat lines, flag paths, skipped names and reasons,
 *     remote text) has no control byte but the diffstat's newlines;
 *   - at most SYNC_STAT_FILES + 1 diffstat lines per branch;
 *   - at most SYNC_WHO_MAX who records per branch, their identities without a control
 *     byte, and the summary's who lines too.
 * Build and run: `make fuzz FUZZ_ONLY=sync_handover` (tests/fuzz/README.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync.h"
#include "fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	git_libgit2_init();
	fuzz_quiet(argc, argv);
	return 0;
}

static void check_text(const char *s, int newlines)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		CHECK((*p >= 0x20 && *p != 0x7f) || (newlines && *p == '\n'));
}

static void check_ho(const struct sync_ho *h)
{
	for (size_t i = 0; i < h->nb; i++) {
		const struct sync_branch *b = &h->br[i];
		char full[SYNC_REF_MAX + 32], why[128];
		size_t lines = 0;

		snprintf(full, sizeof(full), "refs/heads/%s", b->name);
		CHECK(sync_ref_name_ok(full, why, sizeof(why)));
		for (size_t k = 0; k < i; k++)
			CHECK(strcmp(h->br[k].name, b->name) != 0);
		CHECK(!strcmp(b->state, "new") == !b->have_old);
		if (b->have_old)
			CHECK(!strcmp(b->state, "up to date") == !!git_oid_equal(&b->old, &b->tip));
		if (h->stat[i].data) {
			check_text(h->stat[i].data, 1);
			for (size_t k = 0; k < h->stat[i].len; k++)
				lines += h->stat[i].data[k] == '\n';
		}
		CHECK(lines <= SYNC_STAT_FILES + 1);
		CHECK(b->who_n <= SYNC_WHO_MAX && b->who_first + b->who_n <= h->nwho);
		{
			struct buf who = {0};

			CHECK(sync_ho_who_text(h, i, &who) == 0);
			if (who.data)
				check_text(who.data, 1);
			buf_free(&who);
		}
	}
	for (size_t i = 0; i < h->nwho; i++) {
		check_text(h->who[i].committer, 0);
		if (h->who[i].author)
			check_text(h->who[i].author, 0);
	}
	for (size_t i = 0; i < h->nfl; i++) {
		check_text(h->fl[i].path, 0);
		CHECK(h->fl[i].flag && !(h->fl[i].flag & (h->fl[i].flag - 1)));
	}
	for (size_t i = 0; i < h->skipped.n; i++)
		for (const unsigned char *p = (const unsigned char *)h->skipped.v[i]; *p; p++)
			CHECK((*p >= 0x20 && *p != 0x7f) || *p == '\t');
	check_text(h->remote, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sync_ho h = {0};
	const char *s = (const char *)data, *end = s + size;
	char err[256];

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);

		if (sync_ho_feed(&h, s, len, err, sizeof(err)) < 0) {
			CHECK(err[0] != '\0');
			break;
		}
		s += len + (nl != NULL);
	}
	check_ho(&h);
	(void)sync_ho_finish(&h, err, sizeof(err));
	sync_ho_free(&h);
	return 0;
}
