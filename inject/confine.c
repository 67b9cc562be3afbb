/* SPDX-License-Identifier: MIT */
/*
 * What a compromised injector could still do, taken away after start-up (issue 25). The
 * netlock holds its account to TCP on the routes' upstream ports and DNS, nothing local;
 * this seccomp filter holds the process itself: no program run (no execve), no new socket
 * but the ones TLS, DNS and sock_diag need, no listening, no ptrace or reading another
 * process's memory, no namespaces, mounts, keyrings, BPF, io_uring or modules. A worker
 * (the process that parses what the agent sends) also cannot fork: threads only.
 *
 * A deny list, not an allow list: OpenSSL, glibc's resolver and NSS modules make system
 * calls that differ between Debian releases, and a call missing from an allow list would
 * take every route down with it. What is denied answers EPERM (the code paths that never
 * make these calls are unaffected) rather than killing, so a denied call in a library is
 * an error in the log, not a silent death.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/netlink.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <seccomp.h>

#include "inject.h"

static const int denied[] = {
	SCMP_SYS(execve),
	SCMP_SYS(execveat),
	SCMP_SYS(ptrace),
	SCMP_SYS(process_vm_readv),
	SCMP_SYS(process_vm_writev),
	SCMP_SYS(pidfd_getfd),
	SCMP_SYS(bind),
	SCMP_SYS(listen),
	SCMP_SYS(mount),
	SCMP_SYS(umount2),
	SCMP_SYS(pivot_root),
	SCMP_SYS(chroot),
	SCMP_SYS(unshare),
	SCMP_SYS(setns),
	SCMP_SYS(keyctl),
	SCMP_SYS(add_key),
	SCMP_SYS(request_key),
	SCMP_SYS(bpf),
	SCMP_SYS(perf_event_open),
	SCMP_SYS(userfaultfd),
	SCMP_SYS(io_uring_setup),
	SCMP_SYS(init_module),
	SCMP_SYS(finit_module),
	SCMP_SYS(delete_module),
	SCMP_SYS(kexec_load),
	SCMP_SYS(personality),
	SCMP_SYS(acct),
	SCMP_SYS(swapon),
	SCMP_SYS(swapoff),
	SCMP_SYS(reboot),
	SCMP_SYS(open_by_handle_at),
	SCMP_SYS(name_to_handle_at),
	SCMP_SYS(fsopen),
	SCMP_SYS(fsmount),
	SCMP_SYS(move_mount),
	SCMP_SYS(open_tree),
};

/* A worker's extra: no process of its own making (threads are clone with CLONE_THREAD). */
static const int denied_worker[] = {
	SCMP_SYS(fork),
	SCMP_SYS(vfork),
};

int inj_confine(int worker, char *err, size_t errlen)
{
	scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
	int r = 0;

	if (!f)
		return seterr(err, errlen, "seccomp_init failed");
	for (size_t i = 0; i < ARRAY_SIZE(denied) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), denied[i], 0);
	/*
	 * Sockets: IPv4 and IPv6 (the upstream, DNS), Unix (nscd, the hand-over) and
	 * netlink's route and sock_diag protocols (getaddrinfo's address check, who
	 * connected). Every other family, and raw and packet sockets, are refused.
	 */
	/*
	 * The arguments are ints: compared on their low 32 bits alone (a mask), as the
	 * kernel reads them, so AF_VSOCK | 1 << 32 is AF_VSOCK here too.
	 */
	for (int fam = 0; fam < 46 && r == 0; fam++)
		if (fam != AF_UNIX && fam != AF_INET && fam != AF_INET6 && fam != AF_NETLINK)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
				SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)fam));
	for (int proto = 1; proto <= 4 && r == 0; proto++)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, AF_NETLINK),
			proto == 4 ? SCMP_A2_32(SCMP_CMP_GT, NETLINK_SOCK_DIAG)
				   : SCMP_A2_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)proto));
	/* No raw IP (glibc's own route-netlink socket is SOCK_RAW: netlink keeps it). */
	for (int fam = AF_INET; fam <= AF_INET6 && r == 0; fam += AF_INET6 - AF_INET) {
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)fam),
			SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW));
		if (r == 0)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
				SCMP_A0_64(SCMP_CMP_MASKED_EQ, 0xffffffffULL, (scmp_datum_t)fam),
				SCMP_A1_64(SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET));
	}
	/*
	 * No namespace by clone either (unshare is denied above); clone3's flags are out of
	 * reach, so it answers ENOSYS and glibc falls back to clone, where they are checked.
	 */
	static const unsigned long newns[] = {CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID,
		CLONE_NEWNET, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWCGROUP};
	for (size_t i = 0; i < ARRAY_SIZE(newns) && r == 0; i++)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
			SCMP_A0_64(SCMP_CMP_MASKED_EQ, newns[i], newns[i]));
	if (r == 0)
		r = seccomp_rule_add(f, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r == 0 && worker) {
		for (size_t i = 0; i < ARRAY_SIZE(denied_worker) && r == 0; i++)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), denied_worker[i], 0);
		/* clone without CLONE_THREAD is a fork. */
		if (r == 0)
			r = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				SCMP_A0_64(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0));
	}
	if (r == 0)
		r = seccomp_load(f);
	seccomp_release(f);
	if (r < 0)
		return seterr(err, errlen, "seccomp filter not loaded: %s", strerror(-r));
	return 0;
}
