#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# seccomp-run.py ERRNO CALL[,CALL...] -- COMMAND...: runs COMMAND under a seccomp filter
# that answers ERRNO (EPERM, ENOSYS) to each CALL, as a container's does (systemd-nspawn's
# refuses keyctl, mlock and Landlock with EPERM; LXC's deny list answers ENOSYS). The
# filter stays for COMMAND and everything it starts. libseccomp through ctypes: no build.
import ctypes
import ctypes.util
import errno
import os
import sys

if len(sys.argv) < 5 or sys.argv[3] != "--":
    sys.exit("usage: seccomp-run.py ERRNO CALL[,CALL...] -- COMMAND...")
err = getattr(errno, sys.argv[1])
lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2", use_errno=True)
lib.seccomp_init.restype = ctypes.c_void_p
lib.seccomp_init.argtypes = [ctypes.c_uint32]
lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
lib.seccomp_load.argtypes = [ctypes.c_void_p]
SCMP_ACT_ALLOW = 0x7FFF0000
ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
if not ctx:
    sys.exit("seccomp_init failed")
for name in sys.argv[2].split(","):
    nr = lib.seccomp_syscall_resolve_name(name.encode())
    if nr < 0:
        sys.exit("unknown system call: " + name)
    if lib.seccomp_rule_add(ctx, 0x00050000 | err, nr, 0) != 0:
        sys.exit("seccomp_rule_add " + name + " failed")
# libseccomp sets no_new_privs itself (SCMP_FLTATR_CTL_NNP defaults on). SECCOMP_RUN_NNP=0
# (root only) leaves it off, as a container runtime does: sudo and other set-uid programs
# still work under the filter (the walk-through's isolated part).
if os.environ.get("SECCOMP_RUN_NNP") == "0":
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    if lib.seccomp_attr_set(ctx, 3, 0) != 0:  # SCMP_FLTATR_CTL_NNP
        sys.exit("seccomp_attr_set NNP failed")
if lib.seccomp_load(ctx) != 0:
    sys.exit("seccomp_load failed")
os.execvp(sys.argv[4], sys.argv[4:])
