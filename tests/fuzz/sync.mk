# ocsb sync (sync/): what the agent's side sends or wrote, read by the owner's `ocsb sync`.
FUZZ_SYNC_LIBS := $(shell $(PKG_CONFIG) --libs libgit2 2>/dev/null)

# pkt-lines, the receive-pack advertisement and report-status, ref names, escaping.
FUZZ_TARGETS += sync_pkt
FUZZ_SRC_sync_pkt := sync/pkt.c sync/check.c common/log.c common/util.c
FUZZ_LIBS_sync_pkt = $(FUZZ_SYNC_LIBS)
$(BUILDDIR)/fuzz/fuzz_sync_pkt: tests/fuzz/fuzz_util.h

# The review gate's classifier: paths, modes, .gitattributes lines, link targets.
FUZZ_TARGETS += sync_gate
FUZZ_SRC_sync_gate := sync/check.c common/log.c
FUZZ_LIBS_sync_gate = $(FUZZ_SYNC_LIBS)
$(BUILDDIR)/fuzz/fuzz_sync_gate: tests/fuzz/fuzz_util.h

# The memo files a pull reads back: ocsb-sync.review and ocsb-sync.unrelated.
FUZZ_TARGETS += sync_memo
FUZZ_SRC_sync_memo := sync/rmemo.c sync/related.c sync/review.c sync/diff.c sync/check.c common/fileops.c \
	common/log.c common/util.c
FUZZ_LIBS_sync_memo = $(FUZZ_SYNC_LIBS)
$(BUILDDIR)/fuzz/fuzz_sync_memo: tests/fuzz/fuzz_util.h

# The review of what the agent committed: raw trees in an in-memory repository, the tree
# diff against libgit2's, the review from scratch against the gate, and from its memos.
FUZZ_TARGETS += sync_review
FUZZ_SRC_sync_review := sync/review.c sync/diff.c sync/check.c sync/rmemo.c sync/related.c common/fileops.c \
	common/log.c common/util.c
FUZZ_LIBS_sync_review = $(FUZZ_SYNC_LIBS)
$(BUILDDIR)/fuzz/fuzz_sync_review: tests/fuzz/fuzz_util.h

# The pull's handover (sync/handover.c): what ocsb sync pull's confined child tells the parent.
FUZZ_TARGETS += sync_handover
FUZZ_SRC_sync_handover := sync/handover.c sync/check.c common/log.c common/util.c
FUZZ_LIBS_sync_handover = $(FUZZ_SYNC_LIBS)
$(BUILDDIR)/fuzz/fuzz_sync_handover: tests/fuzz/fuzz_util.h
