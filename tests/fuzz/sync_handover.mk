# The pull's handover (sync/handover.c): what ocsb sync pull's confined child tells the parent.
FUZZ_TARGETS += sync_handover
FUZZ_SRC_sync_handover := sync/handover.c sync/check.c common/log.c common/util.c
FUZZ_LIBS_sync_handover := -lgit2
