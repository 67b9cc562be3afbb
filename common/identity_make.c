/* SPDX-License-Identifier: MIT */
/*
 * The agent's fake identity files written (identity.h): by ocsb-provision on each run
 * that finds them incomplete, never by the long-running warden, which only bind-mounts
 * what it finds (identity.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileops.h"
#include "identity.h"

static const char *const dmi_fields[] = {"product_uuid", "product_serial", "board_serial",
	"chassis_serial", "product_name", "sys_vendor", "board_vendor", "board_name", "bios_vendor",
	"bios_version", "product_version", "chassis_vendor"};

/* 0, or -EIO when the kernel has no randomness to give (getrandom blocks until it has). */
static int hex_id(char *out, size_t n, int dashes)
{
	unsigned char raw[16];
	char hex[33];

	/* getrandom(2), not libsodium: 16 bytes need no crypto library. */
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -EIO;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	if (dashes)
		snprintf(out, n, "%.8s-%.4s-4%.3s-a%.3s-%.12s\n", hex, hex + 8, hex + 13, hex + 17,
			hex + 20);
	else
		snprintf(out, n, "%s\n", hex);
	return 0;
}

/* dfd/name holds a value already (kept: stable across restarts), or gets `value`. */
static int keep_or_write(int dfd, const char *name, const char *value)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
		st.st_uid == 0 && st.st_size > 0)
		return 0;
	return fo_write_at(dfd, name, value, strlen(value), 0444, 0, 0);
}

int identity_ensure(const char *varlib, const char *agent, char *ret_dir, size_t n)
{
	char v[64];
	int dfd, ddfd = -1, r;

	if (identity_dir(varlib, agent, ret_dir, n) < 0)
		return -ENAMETOOLONG;
	/* Root-owned, 0755: the bind mounts are read by the agent, never written. */
	dfd = fo_mkdir_p(AT_FDCWD, ret_dir, 0755, 0, 0);
	if (dfd < 0)
		return dfd;
	if ((r = hex_id(v, sizeof(v), 0)) < 0 || (r = keep_or_write(dfd, "machine-id", v)) < 0)
		goto out;
	if ((r = hex_id(v, sizeof(v), 1)) < 0 || (r = keep_or_write(dfd, "boot_id", v)) < 0)
		goto out;
	/* A neutral command line: the real one names disks, UUIDs and hypervisor details. */
	r = keep_or_write(dfd, "cmdline", "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet\n");
	if (r < 0)
		goto out;
	ddfd = fo_mkdir_p(dfd, "dmi", 0755, 0, 0);
	if (ddfd < 0) {
		r = ddfd;
		goto out;
	}
	for (size_t i = 0; i < sizeof(dmi_fields) / sizeof(dmi_fields[0]); i++) {
		if (!strcmp(dmi_fields[i], "product_uuid")) {
			if ((r = hex_id(v, sizeof(v), 1)) < 0)
				goto out;
		} else if (strstr(dmi_fields[i], "serial"))
			snprintf(v, sizeof(v), "0\n");
		else
			snprintf(v, sizeof(v), "ocsb\n");
		if ((r = keep_or_write(ddfd, dmi_fields[i], v)) < 0)
			goto out;
	}
	r = 0;
out:
	if (ddfd >= 0)
		close(ddfd);
	close(dfd);
	return r;
}
