# The mirror (mirror/): what its processes of different users hand each other.

# The status file: the manifest the writer leaves, read back by the owner's reader and by
# `ocsb mirror status` (text and JSON).
FUZZ_TARGETS += mirror_status
FUZZ_SRC_mirror_status := mirror/mirror.c mirror/mirror_scan.c common/fileops.c common/log.c \
	common/fileops_tree.c common/paths.c common/util.c common/json.c
$(BUILDDIR)/fuzz/fuzz_mirror_status: tests/fuzz/fuzz_util.h
