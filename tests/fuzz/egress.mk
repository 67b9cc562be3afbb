# Egress rules: the rule files, the squid configuration and decisions built from them, and
# the proxy's log lines read back with them (egress_log_line, egress/egress_log.c).
FUZZ_TARGETS += egress
FUZZ_SRC_egress := egress/egress.c egress/egress_load.c egress/egress_decide.c \
	egress/egress_squid.c egress/egress_log.c \
	common/conf.c common/portrange.c common/conf_bool.c common/fileops.c common/util.c \
	common/log.c common/paths.c common/args.c
