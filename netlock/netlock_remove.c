/* SPDX-License-Identifier: MIT */
/*
 * The netlock's table removed (ocsb-provision --remove, the benchmark): one batch that
 * deletes it. Apart from netlock_batch.c, which the warden links, since the warden never
 * removes the table: at its stop the plain table stays. Here too the one-shot apply on a
 * socket of its own (netlock_apply), which only ocsb-provision uses: the warden applies
 * on its kept socket and records (netlock_snap.c).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <linux/netfilter/nf_tables.h>
#include <libmnl/libmnl.h>
#include <libnftnl/batch.h>
#include "netlock.h"
#include "netlock_int.h"

int netlock_apply(const struct netlock_spec *s, char *err, size_t errlen)
{
	return netlock_apply_sock(s, NULL, err, errlen); /* a socket of its own */
}

int netlock_remove(char *err, size_t errlen)
{
	struct netlock_batch nb = {0};
	struct mnl_socket *nl = NULL;
	size_t bad = 0;
	int rc, e = 0;

	rc = netlock_batch_init(&nb);
	if (rc == 0)
		rc = netlock_batch_table(&nb, NFT_MSG_DELTABLE, 0);
	if (rc < 0) {
		netlock_seterr(err, errlen, "building the batch: %s", strerror(-rc));
		goto out;
	}
	nl = netlock_socket(&e);
	if (!nl) {
		rc = -e;
		netlock_seterr(err, errlen, "netfilter netlink socket: %s", strerror(e));
		goto out;
	}
	rc = netlock_batch_send(nl, &nb, &bad);
	/* Already gone is what the caller wants. */
	if (rc == -ENOENT && bad < nb.n)
		rc = 0;
	if (rc < 0)
		netlock_batch_err(&nb, rc, bad, err, errlen);
out:
	if (nl)
		mnl_socket_close(nl);
	if (nb.b)
		nftnl_batch_free(nb.b);
	return rc < 0 ? -1 : 0;
}
