# ocsb-inject: the key's redaction in what it relays back to the agent.
FUZZ_TARGETS += redact
FUZZ_SRC_redact := inject/redact.c common/util.c
