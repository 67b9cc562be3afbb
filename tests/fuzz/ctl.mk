# The control protocol (common/ctl.c): the owner's and root's socket, and the framing.
FUZZ_TARGETS += ctl
FUZZ_SRC_ctl := common/ctl.c common/ctl_connect.c common/util.c common/seterr.c
