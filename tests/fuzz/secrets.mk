# Secrets: the set, the sealed push, agentd's record, the passphrase box, the env file.
FUZZ_TARGETS += secrets
FUZZ_SRC_secrets := secrets/format.c secrets/crypto.c common/sysblock.c common/fileops.c common/log.c \
	common/util.c common/seterr.c
FUZZ_LIBS_secrets := -lsodium
