/* SPDX-License-Identifier: MIT */
/*
 * The netlock's behaviour tests (real packets of a switched uid against the table, in a
 * private network namespace) need root: tests/run-unit.sh runs test_priv* binaries as root
 * and every other one as nobody. Same source, the other half of its tests.
 */
#define NETLOCK_ROOT_ONLY 1
#include "test_netlock.c"
