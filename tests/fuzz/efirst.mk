# The egress rules of a first provisioning: git remote URLs cut to host names, reasons made
# into comments, the file they make parsed back (provision/efirst.c).
FUZZ_TARGETS += efirst
FUZZ_SRC_efirst := provision/efirst.c egress/egress.c egress/egress_load.c \
	egress/egress_decide.c common/conf.c common/portrange.c common/conf_bool.c common/fileops.c common/util.c \
	common/log.c common/paths.c
