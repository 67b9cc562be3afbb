# The mirror (mirror/): what its processes of different users hand each other.

# The status file: the manifest the writer leaves, read back by the owner's reader and by
# `ocsb mirror status` (text and JSON).
FUZZ_TARGETS += mirror_status
FUZZ_SRC_mirror_status := mirror/mirror.c mirror/mirror_scan.c common/fileops.c common/log.c \
	common/fileops_tree.c common/paths.c common/util.c common/json.c
$(BUILDDIR)/fuzz/fuzz_mirror_status: tests/fuzz/fuzz_util.h

# The reader's stream (the owner's side, possibly subverted) applied by the tree's account
# to a real tree in a temporary directory, twice (the second from the manifest it left).
FUZZ_TARGETS += mirror_stream
FUZZ_SRC_mirror_stream := mirror/mirror.c mirror/mirror_priv.c mirror/mirror_scan.c \
	common/config_mirror.c common/config.c common/conf.c common/portrange.c common/fileops.c \
	common/fileops_tree.c common/paths.c common/log.c common/util.c common/json.c \
	tests/fuzz/stub_spawn.c
$(BUILDDIR)/fuzz/fuzz_mirror_stream: tests/fuzz/fuzz_util.h
