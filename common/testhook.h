/* SPDX-License-Identifier: MIT */
#ifndef OCSB_TESTHOOK_H
#define OCSB_TESTHOOK_H

/*
 * Test hooks: code that lets a test bend a rule of the sandbox (trust a test CA instead of
 * the system's). Compiled only into a test build (make TEST_HOOKS=1, as the test targets
 * build: $(BUILDDIR)/gen/buildflags.h then defines OCSB_TEST_BUILD), and on there only when
 * OCSB_TEST_HOOKS=1 is in the program's environment too. A release build (make, make
 * install, the Debian package) holds neither the code nor the variable's name: whoever
 * sets the environment of a root program cannot switch on what is not there.
 */
#include "buildflags.h"

#ifdef OCSB_TEST_BUILD
#include <stdlib.h>
#include <string.h>

/* The value of the hook's variable `name` when OCSB_TEST_HOOKS=1 too, else NULL. */
static inline const char *testhook_env(const char *name)
{
	const char *on = getenv("OCSB_TEST_HOOKS");

	return on && strcmp(on, "1") == 0 ? getenv(name) : NULL;
}
#define TESTHOOK_ENV(name) testhook_env(name)
#else
/* A release build: no hook, and its variable's name is not compiled in. */
#define TESTHOOK_ENV(name) ((const char *)NULL)
#endif

#endif
