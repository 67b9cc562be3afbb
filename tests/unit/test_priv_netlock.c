/* SPDX-License-Identifier: MIT */
/*
 * The netlock's behaviour tests (real packets of a switched uid against the table, in a
 * private network namespace) need root: tests/run-unit.sh runs test_priv* binaries as root
 * and every other one as nobody. The other layers are test_netlock.
 */
#define _GNU_SOURCE
#include "netlock_unit.h"

/* ---- behaviour (root): what the agent's sockets can reach ---- */

#define AGENT_UID 65534
#define OTHER_UID 65533
#define P_PROXY 3128
#define P_OTHER 9999
#define P_RANGE 8050
#define P_SERVER 7777

struct probe {
	const char *name;
	int family;
	const char *addr;
	unsigned port;
	int udp;
};

/* Outcome of a probe: 0 connected / sent, or the errno; and how long it took. */
struct probe_res {
	int err;
	double ms;
};

static const struct probe probes[] = {
	{"tcp 127.0.0.1 proxy", AF_INET, "127.0.0.1", P_PROXY, 0},
	{"tcp 127.0.0.1 other", AF_INET, "127.0.0.1", P_OTHER, 0},
	{"tcp ::1 other", AF_INET6, "::1", P_OTHER, 0},
	{"tcp ::1 proxy port", AF_INET6, "::1", P_PROXY, 0},
	{"tcp 127.0.0.1 range", AF_INET, "127.0.0.1", P_RANGE, 0},
	{"udp 127.0.0.1 53", AF_INET, "127.0.0.1", 53, 1},
	{"udp ::1 53", AF_INET6, "::1", 53, 1},
};
enum { PR_PROXY, PR_OTHER, PR_OTHER6, PR_PROXY6, PR_RANGE, PR_UDP, PR_UDP6, PR_N };

/* Through the default route on lo (only when `ip` could add it): not a local address. */
static const struct probe remote_probes[] = {
	{"tcp 198.18.0.1 80", AF_INET, "198.18.0.1", 80, 0},
	{"tcp 2001:db8::1 80", AF_INET6, "2001:db8::1", 80, 0},
	{"udp 198.18.0.1 53", AF_INET, "198.18.0.1", 53, 1},
	{"udp 198.18.0.1 54", AF_INET, "198.18.0.1", 54, 1},
};
enum { RP_TCP, RP_TCP6, RP_DNS, RP_UDP, RP_N };

static socklen_t make_addr(const struct probe *p, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (p->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)p->port);
		inet_pton(AF_INET, p->addr, &in->sin_addr);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons((uint16_t)p->port);
	inet_pton(AF_INET6, p->addr, &in6->sin6_addr);
	return sizeof(*in6);
}

/* Non-blocking connect (or one datagram), bounded by 2 s. */
static struct probe_res probe_run(const struct probe *p)
{
	struct sockaddr_storage ss;
	socklen_t len = make_addr(p, &ss);
	struct probe_res res = {0};
	double t = now_ms();
	int fd = socket(
		p->family, (p->udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0) {
		res.err = errno;
		return res;
	}
	if (p->udp) {
		if (sendto(fd, "q", 1, 0, (struct sockaddr *)&ss, len) < 0)
			res.err = errno;
	} else if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS) {
			res.err = errno;
		} else {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			socklen_t sl = sizeof(res.err);

			if (poll(&pf, 1, 2000) <= 0)
				res.err = ETIMEDOUT;
			else
				getsockopt(fd, SOL_SOCKET, SO_ERROR, &res.err, &sl);
		}
	}
	res.ms = now_ms() - t;
	close(fd);
	return res;
}

static int listen_on(int family, const char *addr, unsigned port, int udp)
{
	struct probe p = {"", family, addr, port, udp};
	struct sockaddr_storage ss;
	socklen_t len = make_addr(&p, &ss);
	int one = 1;
	int fd = socket(family, (udp ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || (!udp && listen(fd, 64) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Datagrams waiting on fd (drained), within ms. */
static int udp_received(int fd, int ms)
{
	struct pollfd pf = {.fd = fd, .events = POLLIN};
	char b[64];
	int n = 0;

	while (poll(&pf, 1, n ? 0 : ms) > 0 && recv(fd, b, sizeof(b), MSG_DONTWAIT) >= 0)
		n++;
	return n;
}

/*
 * Run the probes as uid in a forked child; results through a pipe. With
 * serve, the child first listens on 127.0.0.1:P_SERVER and afterwards answers
 * one connection with "hi": a server the agent runs, reached by root.
 */
static int probe_as(uid_t uid, const struct probe *p, size_t n, struct probe_res *res, int serve)
{
	int pfd[2], st;
	pid_t pid;
	ssize_t got;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		struct probe_res r[16];
		int lfd = -1;

		close(pfd[0]);
		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
			setresuid(uid, uid, uid) < 0)
			_exit(126);
		if (serve && (lfd = listen_on(AF_INET, "127.0.0.1", P_SERVER, 0)) < 0)
			_exit(125);
		for (size_t i = 0; i < n; i++)
			r[i] = probe_run(&p[i]);
		if (write(pfd[1], r, n * sizeof(r[0])) != (ssize_t)(n * sizeof(r[0])))
			_exit(124);
		close(pfd[1]);
		if (serve) {
			struct pollfd pf = {.fd = lfd, .events = POLLIN};
			int c;

			if (poll(&pf, 1, 5000) <= 0 || (c = accept(lfd, NULL, NULL)) < 0)
				_exit(123);
			if (write(c, "hi", 2) != 2)
				_exit(122);
			close(c);
		}
		_exit(0);
	}
	close(pfd[1]);
	got = read(pfd[0], res, n * sizeof(res[0]));
	close(pfd[0]);
	if (got != (ssize_t)(n * sizeof(res[0]))) {
		waitpid(pid, &st, 0);
		return -1;
	}
	return pid;
}

static int wait_child(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* As root, connect to the agent's server and read its answer: "hi" or why not. */
static const char *read_agent_server(char *buf, size_t n)
{
	struct probe p = {"", AF_INET, "127.0.0.1", P_SERVER, 0};
	struct sockaddr_storage ss;
	socklen_t len = make_addr(&p, &ss);
	struct pollfd pf;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t r;

	if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
		snprintf(buf, n, "connect: %s", strerror(errno));
		goto out;
	}
	pf = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&pf, 1, 2000) <= 0) {
		snprintf(buf, n, "no answer in 2 s");
		goto out;
	}
	r = read(fd, buf, n - 1);
	if (r < 0)
		snprintf(buf, n, "read: %s", strerror(errno));
	else
		buf[r] = '\0';
out:
	if (fd >= 0)
		close(fd);
	return buf;
}

#define P_FLOW 40000

/* As root: a UDP exchange 127.0.0.1:P_FLOW <-> the listener on :53, then close. 0 or -1. */
static int udp_flow_as_root(int lfd)
{
	struct probe p = {"", AF_INET, "127.0.0.1", 53, 1};
	struct sockaddr_storage dst, src;
	socklen_t len = make_addr(&p, &dst), sl = sizeof(src);
	struct pollfd pf = {.fd = lfd, .events = POLLIN};
	int fd = listen_on(AF_INET, "127.0.0.1", P_FLOW, 1), rc = -1;
	char b[8];

	if (fd < 0 || sendto(fd, "q", 1, 0, (struct sockaddr *)&dst, len) != 1)
		goto out;
	if (poll(&pf, 1, 1000) <= 0 ||
		recvfrom(lfd, b, sizeof(b), 0, (struct sockaddr *)&src, &sl) < 0)
		goto out;
	if (sendto(lfd, "a", 1, 0, (struct sockaddr *)&src, sl) != 1)
		goto out;
	pf = (struct pollfd){.fd = fd, .events = POLLIN};
	if (poll(&pf, 1, 1000) <= 0 || recv(fd, b, sizeof(b), 0) != 1)
		goto out;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	return rc;
}

/* As uid: one datagram from 127.0.0.1:P_FLOW to 127.0.0.1:53. 0 sent, the errno, or 200+. */
static int udp_reuse_flow_as(uid_t uid)
{
	struct probe p = {"", AF_INET, "127.0.0.1", 53, 1};
	struct sockaddr_storage dst;
	socklen_t len = make_addr(&p, &dst);
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd;

		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
			setresuid(uid, uid, uid) < 0)
			_exit(201);
		fd = listen_on(AF_INET, "127.0.0.1", P_FLOW, 1);
		if (fd < 0)
			_exit(202);
		_exit(sendto(fd, "x", 1, 0, (struct sockaddr *)&dst, len) == 1 ? 0 : errno);
	}
	return wait_child(pid);
}

static int lo_up(void)
{
	struct ifreq ifr = {0};
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	rc = ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	if (rc == 0)
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	return rc;
}

static int run_ip(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5,
	const char *a6)
{
	const char *argv[] = {IP, a1, a2, a3, a4, a5, a6, NULL};
	struct spawn_opts o = {.capture = 1, .timeout_ms = 10000};
	struct spawn_result r;

	if (spawn_run(argv, &o, &r) < 0)
		return -1;
	spawn_result_free(&r);
	return r.status;
}

#define FAST_MS 1000.0
#define REFUSED_FAST(res) ((res).err == ECONNREFUSED && (res).ms < FAST_MS)
#define UDP_REFUSED(res) ((res).err == EPERM || (res).err == ECONNREFUSED)

/* A network namespace of its own with lo up: 0, or SKIP said. */
static int enter_netns(int outfd)
{
	if (unshare(CLONE_NEWNET) < 0) {
		dprintf(outfd, "SKIP unshare(CLONE_NEWNET): %s\n", strerror(errno));
		return -1;
	}
	if (lo_up() != 0) {
		dprintf(outfd, "FAIL lo up: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

static int fn_behaviour(void *arg, int outfd)
{
	struct netlock_spec s = {
		.uid = AGENT_UID, .proxy_port = P_PROXY, .ports_lo = 8000, .ports_hi = 8100};
	struct probe_res a[PR_N], o[PR_N], root[PR_N], ra[RP_N], rr[RP_N];
	int udp4, udp6, remote, rc;
	char err[1024], buf[256];
	pid_t pid;

	(void)arg;
	if (enter_netns(outfd) != 0)
		return 2;
	/* Optional: a default route over lo makes 198.18.0.1 a non-local destination. */
	remote = access(IP, X_OK) == 0 &&
		run_ip("route", "add", "default", "dev", "lo", NULL) == 0 &&
		run_ip("-6", "route", "add", "default", "dev", "lo") == 0;
	if (!remote)
		dprintf(outfd, "# no default route over lo (" IP "): non-local probes left out\n");
	LCHECK(outfd,
		listen_on(AF_INET, "127.0.0.1", P_PROXY, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_OTHER, 0) >= 0 &&
			listen_on(AF_INET6, "::1", P_OTHER, 0) >= 0 &&
			listen_on(AF_INET6, "::1", P_PROXY, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_RANGE, 0) >= 0,
		"listen: %s", strerror(errno));
	udp4 = listen_on(AF_INET, "127.0.0.1", 53, 1);
	udp6 = listen_on(AF_INET6, "::1", 53, 1);
	LCHECK(outfd, udp4 >= 0 && udp6 >= 0, "udp 53: %s", strerror(errno));
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);

	pid = probe_as(AGENT_UID, probes, PR_N, a, 1);
	LCHECK(outfd, pid > 0, "agent probes");
	for (size_t i = 0; i < PR_N; i++)
		dprintf(outfd, "# agent %-22s %-14s %.1f ms\n", probes[i].name,
			a[i].err ? strerror(a[i].err) : "ok", a[i].ms);
	/* Positive controls first: the proxy and the configured range are reachable. */
	LCHECK(outfd, a[PR_PROXY].err == 0, "%s", strerror(a[PR_PROXY].err));
	LCHECK(outfd, a[PR_RANGE].err == 0, "%s", strerror(a[PR_RANGE].err));
	LCHECK(outfd, REFUSED_FAST(a[PR_OTHER]), "%s %.1f ms", strerror(a[PR_OTHER].err),
		a[PR_OTHER].ms);
	LCHECK(outfd, REFUSED_FAST(a[PR_OTHER6]), "%s %.1f ms", strerror(a[PR_OTHER6].err),
		a[PR_OTHER6].ms);
	LCHECK(outfd, REFUSED_FAST(a[PR_PROXY6]), "%s %.1f ms", strerror(a[PR_PROXY6].err),
		a[PR_PROXY6].ms);
	LCHECK(outfd, UDP_REFUSED(a[PR_UDP]), "%s", strerror(a[PR_UDP].err));
	LCHECK(outfd, UDP_REFUSED(a[PR_UDP6]), "%s", strerror(a[PR_UDP6].err));
	LCHECK(outfd, udp_received(udp4, 200) == 0 && udp_received(udp6, 200) == 0,
		"the agent's datagram to local port 53 arrived");

	/* A server of the agent answers root: ct state established,related. */
	LCHECK(outfd, strcmp(read_agent_server(buf, sizeof(buf)), "hi") == 0, "%s", buf);
	LCHECK(outfd, wait_child(pid) == 0, "agent child");

	/* Root and another uid are unaffected, and their datagrams arrive. */
	for (size_t i = 0; i < PR_N; i++)
		root[i] = probe_run(&probes[i]);
	pid = probe_as(OTHER_UID, probes, PR_N, o, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "uid %d probes", OTHER_UID);
	for (size_t i = 0; i < PR_N; i++) {
		LCHECK(outfd, root[i].err == 0, "root %s: %s", probes[i].name,
			strerror(root[i].err));
		LCHECK(outfd, o[i].err == 0, "uid %d %s: %s", OTHER_UID, probes[i].name,
			strerror(o[i].err));
	}
	LCHECK(outfd, udp_received(udp4, 1000) == 2 && udp_received(udp6, 1000) == 2,
		"root's and uid %d's datagrams", OTHER_UID);

	/*
	 * Conntrack outlives sockets: after root's UDP exchange from port P_FLOW to
	 * :53 the flow is "established" for a while. The agent binding the same port
	 * must not ride on it (ct state is accepted in the reply direction only).
	 */
	LCHECK(outfd, udp_flow_as_root(udp4) == 0, "root's udp exchange: %s", strerror(errno));
	rc = udp_reuse_flow_as(AGENT_UID);
	LCHECK(outfd, rc == EPERM || rc == ECONNREFUSED, "agent reusing root's flow: %d", rc);
	LCHECK(outfd, udp_received(udp4, 200) == 0, "the agent's datagram on root's flow arrived");
	if (!remote)
		return 0;

	/* Everything non-local: refused at once for the agent, DNS only when allowed. */
	pid = probe_as(AGENT_UID, remote_probes, RP_N, ra, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agent remote probes");
	for (size_t i = 0; i < RP_N; i++)
		dprintf(outfd, "# agent %-22s %-14s %.1f ms\n", remote_probes[i].name,
			ra[i].err ? strerror(ra[i].err) : "ok", ra[i].ms);
	LCHECK(outfd, REFUSED_FAST(ra[RP_TCP]), "%s", strerror(ra[RP_TCP].err));
	LCHECK(outfd, REFUSED_FAST(ra[RP_TCP6]), "%s", strerror(ra[RP_TCP6].err));
	LCHECK(outfd, UDP_REFUSED(ra[RP_DNS]), "%s", strerror(ra[RP_DNS].err));
	LCHECK(outfd, UDP_REFUSED(ra[RP_UDP]), "%s", strerror(ra[RP_UDP].err));
	/* Control: root's SYN goes out unanswered; the refusal above was the table's. */
	rr[RP_TCP] = probe_run(&remote_probes[RP_TCP]);
	rr[RP_DNS] = probe_run(&remote_probes[RP_DNS]);
	LCHECK(outfd, !REFUSED_FAST(rr[RP_TCP]), "root was refused too");
	LCHECK(outfd, rr[RP_DNS].err == 0, "root udp 53: %s", strerror(rr[RP_DNS].err));

	s.dns_allow = 1;
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	pid = probe_as(AGENT_UID, remote_probes, RP_N, ra, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agent remote probes (dns)");
	LCHECK(outfd, ra[RP_DNS].err == 0, "dns_allow: %s", strerror(ra[RP_DNS].err));
	LCHECK(outfd, UDP_REFUSED(ra[RP_UDP]), "%s", strerror(ra[RP_UDP].err));
	LCHECK(outfd, REFUSED_FAST(ra[RP_TCP]), "%s", strerror(ra[RP_TCP].err));
	return 0;
}

/*
 * Two agents in the set, one route of ocsb-inject: both agents are locked (the proxy is their
 * way, another local port is reset), the route is agentd's agent's alone, and a uid outside
 * the set (OTHER2_UID) reaches the other port but not the route.
 */
#define AGENT2_UID 65533
#define OTHER2_UID 65532
#define P_ROUTE 18400
#define P_ROUTE_FREE 18415 /* a route port without a route */
#define P_IN_RANGE 18500 /* in the covering range, not a route port */

static const struct probe route_probes[] = {
	{"tcp 127.0.0.1 proxy", AF_INET, "127.0.0.1", P_PROXY, 0},
	{"tcp 127.0.0.1 route", AF_INET, "127.0.0.1", P_ROUTE, 0},
	{"tcp 127.0.0.1 other", AF_INET, "127.0.0.1", P_OTHER, 0},
	{"tcp 127.0.0.1 route, free", AF_INET, "127.0.0.1", P_ROUTE_FREE, 0},
	{"tcp 127.0.0.1 in range", AF_INET, "127.0.0.1", P_IN_RANGE, 0},
};
enum { RT_PROXY, RT_ROUTE, RT_OTHER, RT_FREE, RT_RANGE, RT_N };

/*
 * Two agents in the set; arg non-NULL: both with agent-ports 18000-18999 over the route
 * ports in the spec (config.c and the registry refuse it; the table must hold anyway).
 */
static int fn_two_agents(void *arg, int outfd)
{
	int wide = arg != NULL;
	struct netlock_spec s = {.uid = AGENT_UID,
		.others = {AGENT2_UID},
		.others_ports = {{wide ? 18000 : 0, wide ? 18999 : 0}},
		.n_others = 1,
		.proxy_port = P_PROXY,
		.ports_lo = wide ? 18000 : 0,
		.ports_hi = wide ? 18999 : 0,
		.inject_ports = {P_ROUTE},
		.n_inject = 1};
	struct probe_res a[RT_N], b[RT_N], o[RT_N];
	char err[1024];
	pid_t pid;

	if (enter_netns(outfd) != 0)
		return 2;
	LCHECK(outfd,
		listen_on(AF_INET, "127.0.0.1", P_PROXY, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_ROUTE, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_OTHER, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_ROUTE_FREE, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_IN_RANGE, 0) >= 0,
		"listen: %s", strerror(errno));
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	pid = probe_as(AGENT_UID, route_probes, RT_N, a, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agentd's agent probes");
	pid = probe_as(AGENT2_UID, route_probes, RT_N, b, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "second agent probes");
	pid = probe_as(OTHER2_UID, route_probes, RT_N, o, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "uid %d probes", OTHER2_UID);
	for (size_t i = 0; i < RT_N; i++)
		dprintf(outfd, "# %-22s agentd's agent %-20s second agent %-20s uid %d %s\n",
			route_probes[i].name, a[i].err ? strerror(a[i].err) : "ok",
			b[i].err ? strerror(b[i].err) : "ok", OTHER2_UID,
			o[i].err ? strerror(o[i].err) : "ok");
	/* Both agents: the proxy (control), and nothing else local. */
	LCHECK(outfd, a[RT_PROXY].err == 0, "%s", strerror(a[RT_PROXY].err));
	LCHECK(outfd, b[RT_PROXY].err == 0, "%s", strerror(b[RT_PROXY].err));
	LCHECK(outfd, REFUSED_FAST(a[RT_OTHER]), "%s", strerror(a[RT_OTHER].err));
	LCHECK(outfd, REFUSED_FAST(b[RT_OTHER]), "second agent reached another local port: %s",
		strerror(b[RT_OTHER].err));
	/* The route: agentd's agent only. */
	LCHECK(outfd, a[RT_ROUTE].err == 0, "%s", strerror(a[RT_ROUTE].err));
	LCHECK(outfd, REFUSED_FAST(b[RT_ROUTE]), "second agent reached the route: %s",
		strerror(b[RT_ROUTE].err));
	/* A uid outside the set: unaffected (control), but the route is not its. */
	LCHECK(outfd, o[RT_OTHER].err == 0, "%s", strerror(o[RT_OTHER].err));
	LCHECK(outfd, REFUSED_FAST(o[RT_ROUTE]), "uid %d reached the route: %s", OTHER2_UID,
		strerror(o[RT_ROUTE].err));
	/* A route port without a route: neither agent, range or not, nor anyone else. */
	LCHECK(outfd, REFUSED_FAST(a[RT_FREE]), "%s", strerror(a[RT_FREE].err));
	LCHECK(outfd, REFUSED_FAST(b[RT_FREE]), "second agent reached a route port: %s",
		strerror(b[RT_FREE].err));
	LCHECK(outfd, REFUSED_FAST(o[RT_FREE]), "uid %d reached a route port without a route: %s",
		OTHER2_UID, strerror(o[RT_FREE].err));
	{
		struct probe_res rt = probe_run(&route_probes[RT_FREE]);

		LCHECK(outfd, REFUSED_FAST(rt), "root reached a route port without a route: %s",
			strerror(rt.err));
	}
	/* The range's other ports: both agents with it (control), neither without. */
	LCHECK(outfd, wide ? a[RT_RANGE].err == 0 : REFUSED_FAST(a[RT_RANGE]), "%s",
		strerror(a[RT_RANGE].err));
	LCHECK(outfd, wide ? b[RT_RANGE].err == 0 : REFUSED_FAST(b[RT_RANGE]), "%s",
		strerror(b[RT_RANGE].err));
	LCHECK(outfd, o[RT_RANGE].err == 0, "%s", strerror(o[RT_RANGE].err));
	return 0;
}

#define P_RANGE_A 9005 /* in agentd's agent's range 9000-9009 */
#define P_RANGE_B 9105 /* in the second agent's range 9100-9109 */

static const struct probe range_probes[] = {
	{"tcp 127.0.0.1 A's range", AF_INET, "127.0.0.1", P_RANGE_A, 0},
	{"tcp 127.0.0.1 B's range", AF_INET, "127.0.0.1", P_RANGE_B, 0},
};
enum { RR_A, RR_B, RR_N };

/*
 * Two agents with ranges of their own (the known issue "Several agents": one range, from
 * whichever configuration applied the table, was open to every agent in the set): each
 * reaches its own range and is reset on the other's; a uid outside the set reaches both.
 * arg non-NULL: the spec as a run for the second agent builds it while agentd serves the
 * first (its own range in ports_lo-hi, agentd's agent's from the registry; the guard's
 * routes then make agentd's agent s.uid) — the same table either way.
 */
static int fn_two_ranges(void *arg, int outfd)
{
	struct netlock_spec s = {.uid = AGENT_UID,
		.others = {AGENT2_UID},
		.others_ports = {{9100, 9109}},
		.n_others = 1,
		.proxy_port = P_PROXY,
		.ports_lo = 9000,
		.ports_hi = 9009};
	struct probe_res a[RR_N], b[RR_N], o[RR_N];
	char err[1024];
	pid_t pid;

	if (arg) {
		s = (struct netlock_spec){.uid = AGENT2_UID,
			.others = {AGENT_UID, AGENT2_UID},
			.others_ports = {{9000, 9009}, {9100, 9109}},
			.n_others = 2,
			.proxy_port = P_PROXY,
			.ports_lo = 9100,
			.ports_hi = 9109};
	}
	if (enter_netns(outfd) != 0)
		return 2;
	LCHECK(outfd,
		listen_on(AF_INET, "127.0.0.1", P_RANGE_A, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_RANGE_B, 0) >= 0,
		"listen: %s", strerror(errno));
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	pid = probe_as(AGENT_UID, range_probes, RR_N, a, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agent A probes");
	pid = probe_as(AGENT2_UID, range_probes, RR_N, b, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "agent B probes");
	pid = probe_as(OTHER2_UID, range_probes, RR_N, o, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "uid %d probes", OTHER2_UID);
	for (size_t i = 0; i < RR_N; i++)
		dprintf(outfd, "# %-22s agent A %-20s agent B %-20s uid %d %s\n",
			range_probes[i].name, a[i].err ? strerror(a[i].err) : "ok",
			b[i].err ? strerror(b[i].err) : "ok", OTHER2_UID,
			o[i].err ? strerror(o[i].err) : "ok");
	LCHECK(outfd, a[RR_A].err == 0, "A did not reach its own range: %s", strerror(a[RR_A].err));
	LCHECK(outfd, b[RR_B].err == 0, "B did not reach its own range: %s", strerror(b[RR_B].err));
	LCHECK(outfd, REFUSED_FAST(a[RR_B]), "A reached B's range: %s", strerror(a[RR_B].err));
	LCHECK(outfd, REFUSED_FAST(b[RR_A]), "B reached A's range: %s", strerror(b[RR_A].err));
	LCHECK(outfd, o[RR_A].err == 0 && o[RR_B].err == 0, "uid %d: %s, %s", OTHER2_UID,
		strerror(o[RR_A].err), strerror(o[RR_B].err));
	return 0;
}

/*
 * ocsb-inject's account (issue 25): its routes' upstream port and DNS on non-local
 * addresses, its nameserver's port 53 (a local one here, like systemd-resolved's), nothing
 * else local. A socket it accepts on a route listener root made is its own (accept gives
 * the new socket the accepting process's uid): its answers to the agent get out by their
 * direction from the route port, the same answers from another port do not.
 */
#define INJ_UID 65531
#define P_UP 443
#define P_PLAIN 9998 /* a listener of root's whose connections ocsb-inject accepts */

static const struct probe inj_probes[] = {
	{"tcp 127.0.0.1 other", AF_INET, "127.0.0.1", P_OTHER, 0},
	{"tcp 127.0.0.1 proxy", AF_INET, "127.0.0.1", P_PROXY, 0},
	{"tcp 127.0.0.1 route", AF_INET, "127.0.0.1", P_ROUTE, 0},
	{"udp 127.0.0.53 53 (ns)", AF_INET, "127.0.0.53", 53, 1},
	{"udp 127.0.0.1 53", AF_INET, "127.0.0.1", 53, 1},
	{"tcp 198.18.0.1 443", AF_INET, "198.18.0.1", P_UP, 0},
	{"tcp 198.18.0.1 80", AF_INET, "198.18.0.1", 80, 0},
	{"tcp 2001:db8::1 443", AF_INET6, "2001:db8::1", P_UP, 0},
	{"udp 198.18.0.1 53", AF_INET, "198.18.0.1", 53, 1},
	{"udp 198.18.0.1 54", AF_INET, "198.18.0.1", 54, 1},
};
enum {
	IP_OTHER,
	IP_PROXY,
	IP_ROUTE,
	IP_NS,
	IP_LOCAL53,
	IP_UP,
	IP_80,
	IP_UP6,
	IP_DNS,
	IP_UDP,
	IP_N
};

/* As uid: accept one connection on lfd (root's listener), answer "hi", close. The pid. */
static pid_t accept_once_as(uid_t uid, int lfd)
{
	pid_t pid = fork();

	if (pid == 0) {
		struct pollfd pf = {.fd = lfd, .events = POLLIN};
		int c;

		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
			setresuid(uid, uid, uid) < 0)
			_exit(126);
		if (poll(&pf, 1, 5000) <= 0 || (c = accept(lfd, NULL, NULL)) < 0)
			_exit(125);
		if (write(c, "hi", 2) != 2)
			_exit(124);
		close(c);
		_exit(0);
	}
	return pid;
}

/* As uid: connect to 127.0.0.1:port and read: "hi", or why not. */
static void read_as(uid_t uid, unsigned port, char *buf, size_t n)
{
	int pfd[2];
	pid_t pid;
	ssize_t got;

	snprintf(buf, n, "no child");
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		struct probe p = {"", AF_INET, "127.0.0.1", port, 0};
		struct sockaddr_storage ss;
		socklen_t len = make_addr(&p, &ss);
		struct pollfd pf;
		char b[64];
		ssize_t r;
		int fd;

		close(pfd[0]);
		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
			setresuid(uid, uid, uid) < 0)
			_exit(126);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0) {
			dprintf(pfd[1], "connect: %s", strerror(errno));
			_exit(0);
		}
		pf = (struct pollfd){.fd = fd, .events = POLLIN};
		if (poll(&pf, 1, 2000) <= 0) {
			dprintf(pfd[1], "no answer in 2 s");
			_exit(0);
		}
		r = read(fd, b, sizeof(b) - 1);
		if (r < 0)
			dprintf(pfd[1], "read: %s", strerror(errno));
		else
			dprintf(pfd[1], "%.*s", (int)r, b);
		_exit(0);
	}
	close(pfd[1]);
	got = pid > 0 ? read(pfd[0], buf, n - 1) : -1;
	buf[got > 0 ? (size_t)got : 0] = '\0';
	close(pfd[0]);
	if (pid > 0)
		wait_child(pid);
}

static int fn_inject(void *arg, int outfd)
{
	struct netlock_spec s = {.uid = AGENT_UID,
		.proxy_port = P_PROXY,
		.inject_ports = {P_ROUTE},
		.n_inject = 1,
		.inject_uid = INJ_UID,
		.inject_uports = {P_UP},
		.n_uports = 1,
		.ns = {{AF_INET, {127, 0, 0, 53}}},
		.n_ns = 1};
	struct probe_res in[IP_N], root[IP_N];
	int ns53, lo53, route, plain;
	char err[1024], buf[128];
	pid_t pid;

	(void)arg;
	if (enter_netns(outfd) != 0)
		return 2;
	if (access(IP, X_OK) != 0 || run_ip("route", "add", "default", "dev", "lo", NULL) != 0 ||
		run_ip("-6", "route", "add", "default", "dev", "lo") != 0) {
		dprintf(outfd, "SKIP no default route over lo (" IP ")\n");
		return 2;
	}
	route = listen_on(AF_INET, "127.0.0.1", P_ROUTE, 0);
	plain = listen_on(AF_INET, "127.0.0.1", P_PLAIN, 0);
	ns53 = listen_on(AF_INET, "127.0.0.53", 53, 1);
	lo53 = listen_on(AF_INET, "127.0.0.1", 53, 1);
	LCHECK(outfd,
		route >= 0 && plain >= 0 && ns53 >= 0 && lo53 >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_OTHER, 0) >= 0 &&
			listen_on(AF_INET, "127.0.0.1", P_PROXY, 0) >= 0,
		"listen: %s", strerror(errno));
	LCHECK(outfd, netlock_apply(&s, err, sizeof(err)) == 0, "%s", err);
	LCHECK(outfd, netlock_verify(&s, err, sizeof(err)) == 0, "%s", err);
	pid = probe_as(INJ_UID, inj_probes, IP_N, in, 0);
	LCHECK(outfd, pid > 0 && wait_child(pid) == 0, "ocsb-inject probes");
	for (size_t i = 0; i < IP_N; i++)
		root[i] = probe_run(&inj_probes[i]);
	for (size_t i = 0; i < IP_N; i++)
		dprintf(outfd, "# %-24s ocsb-inject %-26s root %s\n", inj_probes[i].name,
			in[i].err ? strerror(in[i].err) : "ok",
			root[i].err ? strerror(root[i].err) : "ok");
	/* Controls: root reaches the local services; its SYN to 198.18.0.1:80 goes out. */
	LCHECK(outfd, root[IP_OTHER].err == 0 && root[IP_NS].err == 0 && root[IP_LOCAL53].err == 0,
		"root: %s, %s, %s", strerror(root[IP_OTHER].err), strerror(root[IP_NS].err),
		strerror(root[IP_LOCAL53].err));
	LCHECK(outfd, !REFUSED_FAST(root[IP_80]), "root was refused 198.18.0.1:80");
	/* Its upstream port and DNS go out (the SYN unanswered here, not refused). */
	LCHECK(outfd, !REFUSED_FAST(in[IP_UP]), "its upstream port was refused: %s",
		strerror(in[IP_UP].err));
	LCHECK(outfd, !REFUSED_FAST(in[IP_UP6]), "its upstream port (IPv6) was refused: %s",
		strerror(in[IP_UP6].err));
	LCHECK(outfd, in[IP_DNS].err == 0, "dns: %s", strerror(in[IP_DNS].err));
	LCHECK(outfd, in[IP_NS].err == 0, "its nameserver 127.0.0.53: %s", strerror(in[IP_NS].err));
	LCHECK(outfd, udp_received(ns53, 1000) == 2, "the nameserver's datagrams (root's, its)");
	/* Nothing else. */
	LCHECK(outfd, REFUSED_FAST(in[IP_80]), "198.18.0.1:80: %s", strerror(in[IP_80].err));
	LCHECK(outfd, UDP_REFUSED(in[IP_UDP]), "udp 54: %s", strerror(in[IP_UDP].err));
	LCHECK(outfd, REFUSED_FAST(in[IP_OTHER]), "a local service: %s",
		strerror(in[IP_OTHER].err));
	LCHECK(outfd, REFUSED_FAST(in[IP_PROXY]), "the proxy: %s", strerror(in[IP_PROXY].err));
	LCHECK(outfd, REFUSED_FAST(in[IP_ROUTE]), "a route: %s", strerror(in[IP_ROUTE].err));
	LCHECK(outfd, UDP_REFUSED(in[IP_LOCAL53]), "127.0.0.1:53: %s",
		strerror(in[IP_LOCAL53].err));
	LCHECK(outfd, udp_received(lo53, 200) == 1, "only root's datagram reached 127.0.0.1:53");

	/* The agent's request on a route, accepted by ocsb-inject: answered. */
	pid = accept_once_as(INJ_UID, route);
	read_as(AGENT_UID, P_ROUTE, buf, sizeof(buf));
	LCHECK(outfd, wait_child(pid) == 0 && strcmp(buf, "hi") == 0,
		"the agent got no answer from the route: %s", buf);
	/* Control: the same answer from a port that is not a route's is stopped (root asks). */
	pid = accept_once_as(INJ_UID, plain);
	read_as(0, P_PLAIN, buf, sizeof(buf));
	wait_child(pid);
	LCHECK(outfd, strcmp(buf, "hi") != 0, "an answer of ocsb-inject's from port %d got out",
		P_PLAIN);
	dprintf(outfd, "# ocsb-inject answering root on %d: %s\n", P_PLAIN, buf);
	return 0;
}

/* fn in a child (it enters a network namespace of its own), as root. */
static void run_as_root(int (*fn)(void *, int), void *arg, const char *what)
{
	struct spawn_opts o = {.timeout_ms = 60000};
	struct spawn_result r;

	if (geteuid() != 0) {
		printf("# skip: %s needs root (run build/tests/test_priv_netlock as root)\n", what);
		skip();
	}
	assert_int_equal(spawn_fn(fn, arg, &o, &r), 0);
	child_report(&r, what);
	spawn_result_free(&r);
}

static void two_agents_as_root(void **state)
{
	run_as_root(fn_two_agents, NULL, "two agents");
}

/* agent-ports over the route ports in the spec: still agentd's agent's alone. */
static void two_agents_covering_range_as_root(void **state)
{
	static int wide = 1;

	run_as_root(fn_two_agents, &wide, "two agents, agent-ports over the routes");
}

static void two_ranges_as_root(void **state)
{
	run_as_root(fn_two_ranges, NULL, "two agents, a range each");
}

static void two_ranges_other_run_as_root(void **state)
{
	static int other = 1;

	run_as_root(fn_two_ranges, &other, "two agents, a range each, the other agent's run");
}

static void inject_as_root(void **state)
{
	run_as_root(fn_inject, NULL, "ocsb-inject's account");
}

static void behaviour_as_root(void **state)
{
	run_as_root(fn_behaviour, NULL, "behaviour");
}

int main(void)
{
	/* test_priv_netlock: the behaviour of the table needs root; run-unit.sh runs it so. */
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(behaviour_as_root),
		cmocka_unit_test(two_agents_as_root),
		cmocka_unit_test(two_agents_covering_range_as_root),
		cmocka_unit_test(two_ranges_as_root),
		cmocka_unit_test(two_ranges_other_run_as_root),
		cmocka_unit_test(inject_as_root),
	};

	if (geteuid() != 0) {
		printf("1..1\nok 1 - netlock behaviour # SKIP needs root (sudo make test-unit)\n");
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
