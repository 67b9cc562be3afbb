/* SPDX-License-Identifier: MIT */
/*
 * ocsb-inject's seccomp filter (inject/confine.c), applied in a child: what a compromised
 * injector tries is refused, and each refusal has its control, the call the injector
 * needs, made under the same filter and allowed.
 */
#define _GNU_SOURCE
#include "unit.h"

#include <linux/netlink.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/vm_sockets.h>

#include "../../inject/inject.h"

static void *nothing(void *p)
{
	return p;
}

/* Exit codes: 0 all as expected, else the number of the check that was not. */
static int confined(int worker)
{
	char err[256];
	char *const argv[] = {"/bin/true", NULL};
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	pthread_t t;
	int fd;
	pid_t pid;

	if (inj_confine(worker, err, sizeof(err)) < 0)
		return 1;
	/* Controls: the sockets TLS, DNS and sock_diag need, and a thread. */
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return 2;
	close(fd);
	if ((fd = socket(AF_INET6, SOCK_DGRAM, 0)) < 0 && errno != EAFNOSUPPORT)
		return 3;
	if (fd >= 0)
		close(fd);
	if ((fd = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
		return 4;
	close(fd);
	if ((fd = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG)) < 0)
		return 5;
	close(fd);
	if ((fd = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE)) < 0)
		return 6;
	close(fd);
	/* glibc's getaddrinfo (AI_ADDRCONFIG) opens this one. */
	if ((fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) < 0)
		return 8;
	close(fd);
	if (pthread_create(&t, NULL, nothing, NULL) != 0 || pthread_join(t, NULL) != 0)
		return 7;
	/* Refused: running a program, other socket kinds, listening. */
	execve(argv[0], argv, NULL);
	if (errno != EPERM)
		return 10;
	if (socket(AF_PACKET, SOCK_DGRAM, 0) >= 0 || errno != EAFNOSUPPORT)
		return 11;
	if (socket(AF_INET, SOCK_RAW, IPPROTO_ICMP) >= 0)
		return 19;
	/* The kernel reads an int: bits above 32 change nothing. */
	if (syscall(SYS_socket, (long)AF_VSOCK | (1L << 32), SOCK_STREAM, 0) >= 0)
		return 20;
	if (syscall(SYS_socket, (long)AF_PACKET | (1L << 32), SOCK_DGRAM, 0) >= 0)
		return 21;
	/* No namespace by clone either. */
	if (syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0) >= 0 || errno != EPERM)
		return 22;
	if (syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0) >= 0 || errno != EPERM)
		return 23;
	if (socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER) >= 0)
		return 12;
	if (socket(AF_NETLINK, SOCK_DGRAM, NETLINK_AUDIT) >= 0)
		return 13;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 || errno != EPERM)
		return 14;
	if (listen(fd, 1) == 0 || errno != EPERM)
		return 15;
	close(fd);
	if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM)
		return 16;
	/* A worker makes no process; the first process starts the workers. */
	pid = fork();
	if (pid == 0)
		_exit(0);
	if (worker && (pid >= 0 || errno != EPERM))
		return 17;
	if (!worker && (pid < 0 || waitpid(pid, NULL, 0) != pid))
		return 18;
	return 0;
}

static void filter(int worker)
{
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(confined(worker));
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st))
		fail_msg("check %d did not hold (worker %d)", WEXITSTATUS(st), worker);
}

static void first_process(void **state)
{
	(void)state;
	filter(0);
}

static void worker(void **state)
{
	(void)state;
	filter(1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(first_process),
		cmocka_unit_test(worker),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
