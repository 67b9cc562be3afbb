# SPDX-License-Identifier: MIT
# ocsb build. GNU make + pkg-config; out-of-tree objects in $(BUILDDIR).

# Root in a tree a user owns (sudo make deb-install, sudo make install, sudo make test-all):
# the goals run in one sub-make, and then whatever in the tree is not the tree owner's
# (build/, the .deb, test output) is handed back to them, failed or not, so that their own
# make can rebuild and clean it. Root runs this user's Makefile anyway: chowning in their
# tree gives them nothing they did not have; tools/handback.sh follows no link.
ifeq ($(MAKELEVEL),0)
ifeq ($(shell id -u),0)
TREE_OWNER := $(shell stat -c %u:%g $(CURDIR))
endif
endif
ifneq ($(filter-out 0:%,$(TREE_OWNER)),)
.DEFAULT_GOAL := handback
.PHONY: handback $(MAKECMDGOALS)
handback:
	@rc=0; $(MAKE) --no-print-directory $(MAKECMDGOALS) || rc=$$?; \
	tools/handback.sh $(TREE_OWNER); exit $$rc
ifneq ($(MAKECMDGOALS),)
$(MAKECMDGOALS): handback
	@:
endif
else

PREFIX    ?= /usr/local
SBINDIR   ?= $(PREFIX)/sbin
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
DOCDIR    ?= $(PREFIX)/share/doc/ocsb
DESTDIR   ?=
BUILDDIR  ?= build
# The project's version is written once, in debian/changelog's first line.
VERSION   := $(shell sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' debian/changelog)

CC        ?= cc
PKG_CONFIG ?= pkg-config
PKGS      := libssh libgit2 libsodium libnftnl libmnl libsecret-1 openssl libseccomp

WARN      := -Wall -Wextra -Wformat=2 -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wimplicit-fallthrough -Wvla -Wno-unused-parameter
HARDEN    := -D_FORTIFY_SOURCE=3 -fstack-protector-strong -fstack-clash-protection -fPIE
CFLAGS    ?= -O2 -g
ifeq ($(WERROR),1)
WARN      += -Werror
endif
# Test hooks (common/testhook.h): code that lets a test bend a rule of the sandbox, such as
# a CA trusted instead of the system's. TEST_HOOKS=1 compiles it in (the test targets below
# set it; the hooks then still need OCSB_TEST_HOOKS=1 at run time); a release build
# (all, install, the package) holds none of it. The flag reaches the code through
# $(BUILDDIR)/gen/buildflags.h, rewritten only when its content changes, so switching it
# rebuilds the objects that include it (their -MMD dependencies) and nothing else.
TEST_HOOKS ?= 0
ifeq ($(SANITIZE),1)
CFLAGS    := -O1 -g -fno-omit-frame-pointer
HARDEN    := -fPIE
SANFLAGS  := -fsanitize=address,undefined -fno-sanitize-recover=undefined
endif

# Resolved lazily so `make deps` works before the -dev packages exist.
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)

# Where the installed programs live: the tools they run and the unit they name follow PREFIX,
# so a package built with PREFIX=/usr looks for nothing under /usr/local.
ifeq ($(PREFIX),/usr)
PREFIX_PATH_BIN  :=
PREFIX_PATH_SBIN :=
else
PREFIX_PATH_BIN  := $(PREFIX)/bin:
PREFIX_PATH_SBIN := $(PREFIX)/sbin:
endif
DIRDEFS     = -DOCSB_VERSION='"$(VERSION)"' -DOCSB_PREFIX='"$(PREFIX)"' \
              -DOCSB_SBINDIR='"$(SBINDIR)"' -DOCSB_PREFIX_PATH_BIN='"$(PREFIX_PATH_BIN)"' \
              -DOCSB_PREFIX_PATH_SBIN='"$(PREFIX_PATH_SBIN)"'
# CPPFLAGS/CFLAGS/LDFLAGS from the environment (dpkg-buildflags) come after ours: they add to
# the hardening flags above, they do not replace them.
ALL_CFLAGS  = -std=gnu11 $(WARN) $(HARDEN) $(SANFLAGS) $(CPPFLAGS) $(CFLAGS) $(DIRDEFS) \
              $(LIB_INCS) -I$(BUILDDIR)/gen $(PKG_CFLAGS) -MMD -MP
ALL_LDFLAGS = -pie -Wl,-z,relro,-z,now $(SANFLAGS) $(LDFLAGS)

# The libraries' folders: each header is found by its name alone (#include "netlock.h").
LIB_INCS      := -Icommon -Inetlock -Iegress -Imirror
COMMON_SRC    := $(wildcard common/*.c)
PROVISION_SRC := $(filter-out provision/main.c,$(wildcard provision/*.c))
COMMON_OBJ    := $(COMMON_SRC:%.c=$(BUILDDIR)/%.o)
PROVISION_OBJ := $(PROVISION_SRC:%.c=$(BUILDDIR)/%.o)
LIBOCSB       := $(BUILDDIR)/libocsb.a
LIBPROV       := $(BUILDDIR)/libprovision.a

# The netlock (libnftnl), the egress rules and squid's configuration, the mirror engine:
# each its own archive, linked by the programs that use it (docs/design.md, "Who runs what").
NETLOCK_SRC   := $(wildcard netlock/*.c)
NETLOCK_OBJ   := $(NETLOCK_SRC:%.c=$(BUILDDIR)/%.o)
LIBNETLOCK    := $(BUILDDIR)/libnetlock.a

EGRESS_SRC    := $(wildcard egress/*.c)
EGRESS_OBJ    := $(EGRESS_SRC:%.c=$(BUILDDIR)/%.o)
LIBEGRESS     := $(BUILDDIR)/libegress.a

MIRROR_SRC    := $(wildcard mirror/*.c)
MIRROR_OBJ    := $(MIRROR_SRC:%.c=$(BUILDDIR)/%.o)
LIBMIRROR     := $(BUILDDIR)/libmirror.a

SYNC_SRC      := $(wildcard sync/*.c)
SYNC_OBJ      := $(SYNC_SRC:%.c=$(BUILDDIR)/%.o)
LIBSYNC       := $(BUILDDIR)/libsync.a

SECRETS_SRC   := $(wildcard secrets/*.c)
SECRETS_OBJ   := $(SECRETS_SRC:%.c=$(BUILDDIR)/%.o)
LIBSECRETS    := $(BUILDDIR)/libsecrets.a

CLI_SRC       := $(filter-out cli/main.c,$(wildcard cli/*.c))
CLI_OBJ       := $(CLI_SRC:%.c=$(BUILDDIR)/%.o)
LIBCLI        := $(BUILDDIR)/libcli.a

AGENTD_SRC    := $(filter-out agentd/main.c,$(wildcard agentd/*.c))
AGENTD_OBJ    := $(AGENTD_SRC:%.c=$(BUILDDIR)/%.o)
LIBAGENTD     := $(BUILDDIR)/libagentd.a

WARDEN_SRC    := $(filter-out warden/main.c,$(wildcard warden/*.c))
WARDEN_OBJ    := $(WARDEN_SRC:%.c=$(BUILDDIR)/%.o)
LIBWARDEN     := $(BUILDDIR)/libwarden.a

INJECT_SRC    := $(filter-out inject/main.c,$(wildcard inject/*.c))
INJECT_OBJ    := $(INJECT_SRC:%.c=$(BUILDDIR)/%.o)
LIBINJECT     := $(BUILDDIR)/libinject.a

PROGRAMS      := $(BUILDDIR)/ocsb-provision $(BUILDDIR)/ocsb $(BUILDDIR)/ocsb-agentd \
                 $(BUILDDIR)/ocsb-shell $(BUILDDIR)/ocsb-inject $(BUILDDIR)/ocsb-warden
UNIT_SRC      := $(wildcard tests/unit/test_*.c)
UNIT_BIN      := $(UNIT_SRC:tests/unit/%.c=$(BUILDDIR)/tests/%)
MANPAGES      := $(wildcard man/*.[1-8])

.SECONDARY:
.PHONY: all clean install uninstall test test-unit test-e2e test-matrix test-all test-vm deps test-deps tcb \
	format format-check bench deb deb-install help need-cmocka need-fuzz-cc FORCE
all: $(PROGRAMS) $(UNIT_FILE) ## the programs in build/ (a release build; the default)

# The test targets build a test build (their prerequisites inherit the value). One make
# invocation builds each object once: do not mix them with `all` or `install` in one.
test test-unit test-e2e bench fuzz fuzz-build: TEST_HOOKS = 1

# The targets a person types, each with its line ("## " after the prerequisites).
help: ## this list
	@echo 'make [TARGET...] [VARIABLE=value...]; sudo for the ones marked root'
	@sed -n 's/^\([a-z][a-z0-9-]*\):[^#]*## \(.*\)/\1\t\2/p' $(firstword $(MAKEFILE_LIST)) | \
		awk -F '\t' '{ printf "  %-13s %s\n", $$1, $$2 }'
	@echo 'Variables: TEST_HOOKS=1 (a test build), SANITIZE=1 (ASan, UBSan), WERROR=1,'
	@echo '  BUILDDIR=build, PREFIX=/usr/local, DESTDIR=, MATRIX=, VM_RELEASES=, FUZZ_SECONDS=10.'
	@echo 'Run as root in your own clone, make hands back what it wrote there (docs/install.md).'

BUILDFLAGS := $(BUILDDIR)/gen/buildflags.h
$(BUILDFLAGS): FORCE
	@mkdir -p $(dir $@)
	@{ echo '/* Generated by make (TEST_HOOKS=$(TEST_HOOKS)): the build flags. */'; \
	  if [ '$(TEST_HOOKS)' = 1 ]; then echo '#define OCSB_TEST_BUILD 1'; fi; } >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv -f $@.tmp $@ && echo "buildflags.h: TEST_HOOKS=$(TEST_HOOKS)"; fi

# Order-only: every object finds the header on a first build; only those that include it
# (listed in their .d files) are rebuilt when it changes.
$(BUILDDIR)/%.o: %.c | $(BUILDFLAGS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# Each archive made anew: a source moved or removed leaves no stale member behind.
$(LIBOCSB): $(COMMON_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBNETLOCK): $(NETLOCK_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBEGRESS): $(EGRESS_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBMIRROR): $(MIRROR_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

# Files installed on first run, compiled in so the binary needs nothing else on disk.
$(BUILDDIR)/gen/egress_defaults.h: conf/egress.conf tools/embed.sh
	@mkdir -p $(dir $@)
	tools/embed.sh egress_defaults $< > $@
$(BUILDDIR)/provision/net.o $(BUILDDIR)/provision/egress_first.o $(BUILDDIR)/tests/unit/test_egress.o \
	$(BUILDDIR)/tests/unit/test_egress_squid.o $(BUILDDIR)/tests/unit/test_efirst.o: \
	$(BUILDDIR)/gen/egress_defaults.h
# The supervisor's systemd unit, one text: the package installs this file, and
# ocsb-provision carries it to write /etc/systemd/system/ocsb-agentd.service where no
# packaged copy exists (make install). It names the installed supervisor.
UNIT_FILE := $(BUILDDIR)/gen/ocsb-agentd.service
$(UNIT_FILE): conf/ocsb-agentd.service.in Makefile
	@mkdir -p $(dir $@)
	sed 's|@SBINDIR@|$(SBINDIR)|g' $< > $@.tmp && mv $@.tmp $@
$(BUILDDIR)/gen/unit_text.h: $(UNIT_FILE) tools/embed.sh
	tools/embed.sh unit_text $< > $@
$(BUILDDIR)/provision/systemd.o $(BUILDDIR)/tests/unit/test_systemd.o: $(BUILDDIR)/gen/unit_text.h

# The OpenCode tree --install-opencode installs, as tools/opencode-lock.sh pinned it.
OPENCODE_PINS := conf/opencode/package.json conf/opencode/package-lock.json \
                 conf/opencode/manifest-linux-x64.txt
$(BUILDDIR)/gen/opencode_pins.h: $(OPENCODE_PINS) tools/embed.sh
	@mkdir -p $(dir $@)
	{ tools/embed.sh oc_pin_package conf/opencode/package.json && \
	  tools/embed.sh oc_pin_lock conf/opencode/package-lock.json && \
	  tools/embed.sh oc_pin_manifest conf/opencode/manifest-linux-x64.txt; } > $@.tmp && mv $@.tmp $@
$(BUILDDIR)/provision/opencode.o $(BUILDDIR)/tests/unit/test_ocpin.o: $(BUILDDIR)/gen/opencode_pins.h

$(LIBPROV): $(PROVISION_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILDDIR)/ocsb-provision: $(BUILDDIR)/provision/main.o $(LIBPROV) $(LIBSECRETS) $(LIBMIRROR) $(LIBEGRESS) $(LIBNETLOCK) $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(LIBAGENTD): $(AGENTD_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILDDIR)/ocsb-agentd: $(BUILDDIR)/agentd/main.o $(LIBAGENTD) $(LIBSECRETS) $(LIBINJECT) $(LIBMIRROR) $(LIBEGRESS) $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(LIBWARDEN): $(WARDEN_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

# The root part (issue 26): the netlock (libnftnl, libmnl), cgroups, the children's drops and
# the common library; no egress rules, no mirror engine; no OpenSSL, libgit2, libssh,
# libsecret nor libsodium.
$(BUILDDIR)/ocsb-warden: $(BUILDDIR)/warden/main.o $(LIBWARDEN) $(LIBNETLOCK) $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs libnftnl libmnl 2>/dev/null)

$(LIBINJECT): $(INJECT_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

# The credential injector: libc, OpenSSL, libsodium (keys in locked memory), libseccomp, threads,
# libmnl (sock_diag's messages) and the common library (logging, buffers, sock_diag).
$(BUILDDIR)/ocsb-inject: $(BUILDDIR)/inject/main.o $(LIBINJECT) $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -pthread -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs openssl libsodium libseccomp libmnl 2>/dev/null)

# The agent's login shell: libc and the config parser only.
$(BUILDDIR)/ocsb-shell: $(BUILDDIR)/shell/main.o $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

$(LIBCLI): $(CLI_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBSYNC): $(SYNC_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(LIBSECRETS): $(SECRETS_OBJ)
	rm -f $@ && $(AR) rcs $@ $^

$(BUILDDIR)/ocsb: $(BUILDDIR)/cli/main.o $(LIBCLI) $(LIBSYNC) $(LIBSECRETS) $(LIBINJECT) $(LIBMIRROR) $(LIBEGRESS) $(LIBNETLOCK) $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

$(BUILDDIR)/tests/%: $(BUILDDIR)/tests/unit/%.o $(LIBAGENTD) $(LIBWARDEN) $(LIBCLI) $(LIBPROV) $(LIBSYNC) $(LIBSECRETS) $(LIBINJECT) $(LIBMIRROR) $(LIBEGRESS) $(LIBNETLOCK) $(LIBOCSB)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS) -lcmocka

# cmocka and clang serve only the tests (make test-deps): where one is missing, say so before
# the compiler fails on a missing header or command.
$(UNIT_SRC:%.c=$(BUILDDIR)/%.o): | need-cmocka
need-cmocka:
	@$(PKG_CONFIG) --exists cmocka 2>/dev/null || \
		{ echo "make: cmocka missing (libcmocka-dev), which the unit tests need: sudo make test-deps" >&2; exit 1; }
need-fuzz-cc:
	@command -v $(FUZZ_CC) >/dev/null || \
		{ echo "make: $(FUZZ_CC) missing, which builds the fuzz targets: sudo make test-deps" >&2; exit 1; }

# Unit tests run unprivileged: the runner drops to `nobody` when started as root.
test-unit: $(UNIT_BIN) ## unit tests (unprivileged; as root they run as nobody)
	@tests/run-unit.sh $(UNIT_BIN)

test-e2e: $(PROGRAMS) ## end-to-end tests in namespaces (root; changes nothing)
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/e2e/run.sh

# Build and unit tests in minimal Debian roots (mmdebstrap, cached under /var/tmp/ocsb-matrix),
# and the package when debian/ exists: `make test-matrix MATRIX="trixie"` for one release.
MATRIX ?=
test-matrix: ## build, unit tests and package in Debian 12 and 13 roots (root; MATRIX=trixie)
	@tests/matrix/run.sh $(MATRIX)

# The whole suite with one summary line (unit + end-to-end + build matrix).
test: $(PROGRAMS) $(UNIT_BIN) fuzz-build ## every tier: unit, fuzz, end to end, matrix, VMs (root)
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/run-all.sh $(UNIT_BIN)

# The VM tier (tests/vm/): Debian 12 and 13 guests under QEMU, systemd, cgroup v2, logind.
# Root; slow (software emulation); VM_RELEASES picks the releases (default both).
VM_RELEASES ?=
test-vm: ## Debian 12 and 13 guests under QEMU (root, slow; VM_RELEASES=bookworm)
	@tests/vm/run.sh $(VM_RELEASES)

# What a fresh machine and CI run: install what the build and the tests need, then everything.
test-all: test-deps ## test-deps, then test with WERROR=1: what CI runs (sudo make test-all)
	@$(MAKE) --no-print-directory WERROR=1 test

$(BUILDDIR)/bench_%: $(BUILDDIR)/tests/bench/%.o $(LIBMIRROR) $(LIBEGRESS) $(LIBNETLOCK) $(LIBOCSB)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The C compiled into each program, from its debug information's compile units (issue 26).
tcb: $(PROGRAMS) ## the lines of C compiled into each program
	@tools/tcb.sh $(PROGRAMS)

bench: $(PROGRAMS) $(BUILDDIR)/bench_netlock_apply $(BUILDDIR)/bench_mirror_refresh ## provisioning, netlock, agentd, sync, secrets, mirror, inject figures (root)
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/provision
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/netlock
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/agentd
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/sync
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/secrets
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/mirror
	@OCSB_BUILD=$(abspath $(BUILDDIR)) tests/bench/inject

# What building and running ocsb needs (and the pinned OpenCode); test-deps adds what the
# test tiers use (tools/install-deps.sh says which package serves what).
deps: ## install what building and running ocsb needs, and OpenCode (root)
	@tools/install-deps.sh
test-deps: ## deps and what the tests add (root)
	@tools/install-deps.sh --test

# The Debian package for the release this runs on: ocsb_<version>_<arch>.deb in the tree's
# root (apt install ./ocsb_*.deb). dpkg-buildpackage writes beside the source directory,
# so it builds a copy under $(BUILDDIR)/deb: the .buildinfo, .changes and build tree stay
# there and nothing lands in the parent directory. lintian, when present, must find no error.
DEB_ARCH   = $(shell dpkg --print-architecture)
DEB_FILE   = ocsb_$(VERSION)_$(DEB_ARCH).deb
DEB_DIR    = $(BUILDDIR)/deb
DEB_JOBS  ?= 2
deb: ## the Debian package: ocsb_<version>_<arch>.deb in the tree
	@command -v dpkg-buildpackage >/dev/null || { echo "deb: dpkg-buildpackage missing: sudo make deps" >&2; exit 1; }
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/ocsb-$(VERSION)
	tar -C . --exclude=./.git --exclude='./build*' --exclude='./$(BUILDDIR)' \
		--exclude='./ocsb_*.deb' -cf - . | tar -C $(DEB_DIR)/ocsb-$(VERSION) -xf -
	cd $(DEB_DIR)/ocsb-$(VERSION) && DEB_BUILD_OPTIONS="parallel=$(DEB_JOBS) $(DEB_BUILD_OPTIONS)" \
		dpkg-buildpackage -b --no-sign
	rm -rf $(DEB_DIR)/ocsb-$(VERSION)
	rm -f ocsb_*.deb
	cp $(DEB_DIR)/$(DEB_FILE) .
	@if command -v lintian >/dev/null; then lintian --fail-on error $(DEB_FILE); \
	else echo "deb: lintian not installed, not checked"; fi
	@echo "deb: $(DEB_FILE)"

# Build and install the package on this machine (root).
deb-install: deb ## deb, then apt-get install it (root)
	apt-get install -y ./$(DEB_FILE)

install: $(PROGRAMS) $(UNIT_FILE) ## install under PREFIX (/usr/local), DESTDIR honoured
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 $(BUILDDIR)/ocsb-provision $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(BUILDDIR)/ocsb $(DESTDIR)$(BINDIR)/
	install -m 0755 $(BUILDDIR)/ocsb-agentd $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(BUILDDIR)/ocsb-warden $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(BUILDDIR)/ocsb-shell $(DESTDIR)$(SBINDIR)/
	install -m 0755 $(BUILDDIR)/ocsb-inject $(DESTDIR)$(SBINDIR)/
	install -m 0644 man/ocsb-shell.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 man/ocsb-agentd.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 man/ocsb-warden.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 man/ocsb-inject.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 man/ocsb.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 man/ocsb-provision.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 README.md docs/*.md $(DESTDIR)$(DOCDIR)/

uninstall: ## remove what install put there
	rm -f $(DESTDIR)$(SBINDIR)/ocsb-provision $(DESTDIR)$(MANDIR)/man8/ocsb-provision.8
	rm -f $(DESTDIR)$(BINDIR)/ocsb $(DESTDIR)$(MANDIR)/man1/ocsb.1
	rm -f $(DESTDIR)$(SBINDIR)/ocsb-agentd $(DESTDIR)$(MANDIR)/man8/ocsb-agentd.8
	rm -f $(DESTDIR)$(SBINDIR)/ocsb-warden $(DESTDIR)$(MANDIR)/man8/ocsb-warden.8
	rm -f $(DESTDIR)$(SBINDIR)/ocsb-shell $(DESTDIR)$(MANDIR)/man8/ocsb-shell.8
	rm -f $(DESTDIR)$(SBINDIR)/ocsb-inject $(DESTDIR)$(MANDIR)/man8/ocsb-inject.8
	rm -rf $(DESTDIR)$(DOCDIR)

FORMAT_SRC = $(wildcard common/*.[ch] netlock/*.[ch] egress/*.[ch] mirror/*.[ch] inject/*.[ch] provision/*.[ch] agentd/*.[ch] warden/*.[ch] shell/*.[ch] cli/*.[ch] sync/*.[ch] secrets/*.[ch] tests/unit/*.[ch] tests/bench/*.c)
format: ## clang-format every source in place
	clang-format -i $(FORMAT_SRC)
format-check: ## check the sources against .clang-format
	@clang-format --dry-run --Werror $(FORMAT_SRC) && echo "format-check: $(words $(FORMAT_SRC)) files clean"

clean: ## remove build/
	rm -rf $(BUILDDIR)

-include $(shell find $(BUILDDIR) -name '*.d' 2>/dev/null)

# libFuzzer targets (tests/fuzz/README.md): every tests/fuzz/fuzz_NAME.c, built with clang
# (whatever $(CC) is) from the sources themselves, so that they carry the fuzzer's coverage
# instrumentation (the gcc-built archives have none). Each tests/fuzz/*.mk names its targets:
#   FUZZ_TARGETS += NAME
#   FUZZ_SRC_NAME := the project's sources the target links (besides fuzz_NAME.c)
#   FUZZ_LIBS_NAME := libraries (-lsodium ...), if any
# `make fuzz` builds them all and runs each for FUZZ_SECONDS (tests/fuzz/run.sh): seeds from
# tests/fuzz/corpus/NAME (read, never written), new inputs in $(BUILDDIR)/fuzz/corpus-NAME, a
# crash saved as $(BUILDDIR)/fuzz/NAME-crash-*. `make fuzz FUZZ_ONLY="ctl redact"` picks some.
FUZZ_CC       ?= clang
FUZZ_SECONDS  ?= 10
FUZZ_MAXLEN   ?= 16384
FUZZ_CFLAGS    = -std=gnu11 -g -O1 -fno-omit-frame-pointer $(WARN) $(LIB_INCS) -Iinject \
                 -Isync -Isecrets -Iagentd -Icli -I$(BUILDDIR)/gen \
                 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
FUZZ_TARGETS  :=
include $(sort $(wildcard tests/fuzz/*.mk))
FUZZ_ONLY     ?= $(FUZZ_TARGETS)
FUZZ_BIN      := $(FUZZ_ONLY:%=$(BUILDDIR)/fuzz/fuzz_%)
FUZZ_HDRS     := $(wildcard */*.h)

.SECONDEXPANSION:
$(BUILDDIR)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $$(FUZZ_SRC_$$*) $(FUZZ_HDRS) $(BUILDDIR)/gen/buildflags.h | need-fuzz-cc
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_SRC_$*) $(FUZZ_LIBS_$*)

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BIN)
fuzz: $(FUZZ_BIN) ## every libFuzzer target for FUZZ_SECONDS (10) each (FUZZ_ONLY="ctl")
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_MAXLEN=$(FUZZ_MAXLEN) \
		tests/fuzz/run.sh $(abspath $(BUILDDIR)) $(FUZZ_ONLY)

endif # the tree owner's make (above: root's, handed back)
