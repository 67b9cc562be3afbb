# ocsb.conf: the keyword-file parser, its keywords and the file ocsb-provision writes.
FUZZ_TARGETS += config
FUZZ_SRC_config := common/config.c common/config_full.c common/conf.c common/config_render.c common/config_mirror.c \
	common/paths.c common/util.c common/log.c common/fileops.c \
	common/portrange.c common/wconf.c
