/* SPDX-License-Identifier: MIT */
#ifndef OCSB_SOCKDIAG_INT_H
#define OCSB_SOCKDIAG_INT_H

/* sockdiag.c's internals, shared with sockdiag_peer.c. */

#include <linux/inet_diag.h>
#include <linux/netlink.h>

/* One request on nl, each answer handed to fn (sockdiag.c says how it ends). */
int sockdiag_ask(int nl, const struct inet_diag_req_v2 *req, int dump,
	int (*fn)(const struct nlmsghdr *h, void *ctx), void *ctx);
/* body on nl, or on a socket of this call's own when nl < 0. */
int sockdiag_with(int nl, int (*body)(int nl, void *ctx), void *ctx);

#endif
