# ocsb-agentd (agentd/) and ocsb-provision: what they read from the agent's side.

# The link maker's output (`ocsb-agentd --mirror-link`, run as the agent), OpenCode's
# answer to the readiness probe, and log_vis, which escapes the agent's text for the log.
FUZZ_TARGETS += agentd_output
FUZZ_SRC_agentd_output := mirror/mirror_agent.c mirror/mirror.c mirror/mirror_scan.c \
	common/config_mirror.c common/opencode.c common/fileops.c common/fileops_tree.c \
	common/paths.c common/log.c common/util.c common/json.c tests/fuzz/stub_spawn.c
$(BUILDDIR)/fuzz/fuzz_agentd_output: tests/fuzz/fuzz_util.h
