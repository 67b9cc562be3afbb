/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TESTHOOK_H
#define OCSB_TESTHOOK_H

/*
 * Test hooks: code that lets a test bend a rule of the sandbox (trust a test CA instead of
 * the system's, run a wrapper in OpenCode's place, fail a restore or a keyring call, kill
 * ocsb-provision mid-run). Compiled only into a test build (make TEST_HOOKS=1, as the test targets
 * build: $(BUILDDIR)/gen/buildflags.h then defines OCSB_TEST_BUILD), and on there only when
 * OCSB_TEST_HOOKS=1 is in the program's environment too. A release build (make, make
 * install, the Debian package) holds neither the code nor the variable's name: whoever
 * sets the environment of a root program cannot switch on what is not there.
 */
#include "buildflags.h"

#ifdef OCSB_TEST_BUILD
#include <stdlib.h>
#include <string.h>

/* 1 when OCSB_TEST_HOOKS=1 is in the environment. */
static inline int testhook_on(void)
{
	const char *on = getenv("OCSB_TEST_HOOKS");

	return on && strcmp(on, "1") == 0;
}

/* The value of the hook's variable `name` when OCSB_TEST_HOOKS=1 too, else NULL. */
static inline const char *testhook_env(const char *name)
{
	return testhook_on() ? getenv(name) : NULL;
}
#define TESTHOOK_ON() testhook_on()
#define TESTHOOK_ENV(name) testhook_env(name)
#else
/*
 * A release build: no hook, and its variable's name is not compiled in. Code a hook needs
 * beyond reading its variable (a struct field, a file's name, a message) goes inside
 * #ifdef OCSB_TEST_BUILD, so that no optimization level decides what is left of it.
 */
#define TESTHOOK_ON() 0
#define TESTHOOK_ENV(name) ((const char *)NULL)
#endif

#endif
