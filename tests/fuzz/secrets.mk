# Secrets: the set, the sealed push, agentd's record, the passphrase box, the env file.
FUZZ_TARGETS += secrets
FUZZ_SRC_secrets := secrets/format.c secrets/crypto.c common/util.c
FUZZ_LIBS_secrets := -lsodium
