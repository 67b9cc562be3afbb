/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "unit.h"

#include <sys/socket.h>
#include <sys/un.h>

#include "sdnotify.h"

/* A datagram socket bound where $NOTIFY_SOCKET will say (path or "@abstract"). */
static int listener(const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
				 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
					     (name[0] == '/'))),
		0);
	return fd;
}

static void expect_datagram(int fd, const char *want)
{
	char got[256];
	ssize_t n = recv(fd, got, sizeof(got) - 1, MSG_DONTWAIT);

	assert_true(n > 0);
	got[n] = '\0';
	assert_string_equal(got, want);
}

/* The unit's Type=notify: READY=1 reaches the socket, and no child inherits its name. */
static void ready_to_a_path(void **state)
{
	char path[PATH_MAX], name[108];
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "%s", unit_path("notify"));
	fd = listener(path);
	setenv("NOTIFY_SOCKET", path, 1);
	assert_int_equal(sd_notify_take(name, sizeof(name)), 0);
	assert_string_equal(name, path);
	assert_null(getenv("NOTIFY_SOCKET"));
	assert_int_equal(sd_notify_send(name, "READY=1\nSTATUS=netlock verified"), 1);
	expect_datagram(fd, "READY=1\nSTATUS=netlock verified");
	close(fd);
}

static void ready_to_an_abstract_name(void **state)
{
	char want[64], name[108];
	int fd;

	(void)state;
	snprintf(want, sizeof(want), "@ocsb-unit-notify-%d", (int)getpid());
	fd = listener(want);
	setenv("NOTIFY_SOCKET", want, 1);
	assert_int_equal(sd_notify_take(name, sizeof(name)), 0);
	assert_int_equal(sd_notify_send(name, "READY=1"), 1);
	expect_datagram(fd, "READY=1");
	close(fd);
}

/* Started by hand: nothing to tell, nothing fails. A bad name or no listener: an error. */
static void without_systemd_and_bad_names(void **state)
{
	char name[108];

	(void)state;
	unsetenv("NOTIFY_SOCKET");
	assert_int_equal(sd_notify_take(name, sizeof(name)), 0);
	assert_string_equal(name, "");
	assert_int_equal(sd_notify_send(name, "READY=1"), 0);
	setenv("NOTIFY_SOCKET", "relative/name", 1);
	assert_int_equal(sd_notify_take(name, sizeof(name)), -EINVAL);
	assert_string_equal(name, "");
	assert_null(getenv("NOTIFY_SOCKET"));
	assert_int_equal(sd_notify_send(unit_path("nobody-listens"), "READY=1"), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ready_to_a_path, unit_setup_dir, unit_teardown_dir),
		cmocka_unit_test(ready_to_an_abstract_name),
		cmocka_unit_test_setup_teardown(
			without_systemd_and_bad_names, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
