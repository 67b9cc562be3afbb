# The proxy's access log read back (egress/egress_log.c): learn mode's proposal, parsed back
# as rules, and the table of refused destinations.
FUZZ_TARGETS += egress_log
FUZZ_SRC_egress_log := egress/egress_log.c egress/egress.c egress/egress_load.c \
	egress/egress_decide.c common/conf.c common/portrange.c common/conf_bool.c common/fileops.c \
	common/util.c common/log.c common/paths.c
