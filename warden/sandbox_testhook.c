/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's test hook, apart from sandbox.c: compiled empty in a release build
 * (make without TEST_HOOKS=1), and then never taken from the archive either, since
 * only test builds call it (children.c): the warden's release binary holds none of it.
 */
#include <stdio.h>
#include <sys/stat.h>

#include "testhook.h"
#include "warden.h"
#include "log.h"

#ifdef OCSB_TEST_BUILD
/*
 * Test hook (test builds, and OCSB_TEST_HOOKS=1): a root-owned, not group/world-writable
 * executable at <run>/ocsb/test-wrap-opencode is exec'd in OpenCode's place with OpenCode's
 * argv after it, in exactly OpenCode's conditions. The escape battery runs there, then
 * execs OpenCode.
 */
void priv_sandbox_test_wrap(struct warden *w)
{
	char path[4096];
	struct stat st;

	w->sb.test_wrap[0] = '\0';
	if (!w->test_hooks ||
		path_join(path, sizeof(path), w->paths.run, "ocsb/test-wrap-opencode") < 0 ||
		lstat(path, &st) < 0)
		return;
	if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		log_warn("%s: ignored (not a root-owned, unshared regular file)", path);
		return;
	}
	snprintf(w->sb.test_wrap, sizeof(w->sb.test_wrap), "%s", path);
}
#endif
