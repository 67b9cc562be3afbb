/* SPDX-License-Identifier: MIT */
/*
 * For fuzz_egress, which links cli/egress.c for its log lines: the subcommands of learn mode
 * (cli/egress_learn.c: denied, allow, learn, apply) read the proxy's log as root, run a
 * child and talk to the control socket. The target never calls them: stubs, that abort.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int egress_learn_args(int argc, char **argv)
{
	(void)argc, (void)argv;
	fprintf(stderr, "egress_learn_args is not for a fuzz target\n");
	abort();
}

int egress_learn_cmd(struct cli *c, int argc, char **argv)
{
	(void)c, (void)argc, (void)argv;
	fprintf(stderr, "egress_learn_cmd is not for a fuzz target\n");
	abort();
}
