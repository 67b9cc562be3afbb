# ocsb-inject: the key's redaction in what it relays back to the agent.
FUZZ_TARGETS += redact
FUZZ_SRC_redact := inject/redact.c common/util.c
# ocsb-inject: the agent's request head and the upstream's answer head (inject/head.c).
FUZZ_TARGETS += head
FUZZ_SRC_head := inject/head.c common/util.c
# ocsb-inject: chunked bodies, the agent's re-encoded and the upstream's decoded (inject/head.c).
FUZZ_TARGETS += chunked
FUZZ_SRC_chunked := inject/head.c common/util.c
# ocsb-inject: usage read from the upstream's answers, and the usage file (inject/conf.c).
FUZZ_TARGETS += usage
FUZZ_SRC_usage := inject/conf.c inject/head.c common/util.c
FUZZ_LIBS_usage := -lsodium
