# The agents registry (<varlib>/ocsb/agents/NAME): the netlock's reader and provisioning's.
FUZZ_TARGETS += registry
FUZZ_SRC_registry := netlock/netlock_set.c netlock/netlock.c netlock/netlock_nl.c provision/ports.c common/config.c common/config_full.c common/conf.c common/portrange.c \
	common/config_mirror.c common/paths.c common/util.c common/log.c common/fileops.c
FUZZ_LIBS_registry := -lnftnl -lmnl
