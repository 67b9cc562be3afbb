/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "log.h"
#include "opencode.h"
#include "provision.h"
#include "dirs.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb-provision [OPTIONS]\n"
		"Create or update the agent account, its sshd access and its repositories, as\n"
		"described by /etc/ocsb/ocsb.conf and the options. Idempotent: a second run\n"
		"changes nothing and says \"0 changes\". Must run as root.\n"
		"\n"
		"  --agent NAME      agent account (default ai-dev)\n"
		"  --owner USER      the developer (default: the user who ran sudo)\n"
		"  --project PATH    a git repository of the owner to give the agent an empty\n"
		"                    clone of; repeatable (replaces the file's list)\n"
		"  --key FILE        extra public key file allowed to log in; repeatable\n"
		"  --sync-key FILE   public key allowed to run git only (ocsb sync --host from\n"
		"                    another machine); repeatable\n"
		"  --config FILE     read FILE instead of /etc/ocsb/ocsb.conf\n"
		"  --adopt           take over an existing account not created by ocsb-provision\n"
		"  --install-opencode[=VERSION]\n"
		"                    install the pinned OpenCode (npm ci as ocsb-npm, checked\n"
		"                    by root) into a root-owned prefix (see below); alone it\n"
		"                    does only that\n"
		"  --dry-run         print what would change, change nothing\n"
		"  --check           report differences from the configuration; exit 1 if any\n"
		"  --remove          undo everything ocsb-provision set up (the account is kept)\n"
		"  --purge           with --remove: also delete the account, its home, every\n"
		"                    file it owns, its state in /var/lib/ocsb and the config\n"
		"                    file (with the last agent, all of ocsb's state);\n"
		"                    --remove and --purge only in full\n"
		"  --warden-config[=start]\n"
		"                    print the values ocsb-warden takes from the file, checked\n"
		"                    with what provisioning made for it (what ocsb-warden runs\n"
		"                    at its start and reload); =start also stops the proxy a\n"
		"                    provisioning run started\n"
		"  -v, --verbose     more detail\n"
		"  -h, --help        this text\n"
		"      --version     print the version\n"
		"\n"
		"On first run /etc/ocsb/ocsb.conf is written with the values in force; options\n"
		"override the file for one run without rewriting it.\n"
		"Exit status: 0 done (or no drift), 1 failed (or drift with --check),\n"
		"2 bad input (nothing was changed).\n"
		"See ocsb-provision(8).\n");
	fprintf(f, "\nOpenCode: version %s, installed in %s.\n", OCSB_OPENCODE_VERSION,
		OCSB_OPENCODE_PREFIX);
}

/*
 * getopt_long takes any unambiguous prefix ("--purg" for "--purge"). Options that delete
 * must be typed in full: a typo of something else must never select them. argv[optind - 1]
 * is the element getopt_long just consumed (they take no argument).
 */
static int exact_option(char **argv, const char *name)
{
	const char *given = argv[optind - 1];

	if (strncmp(given, "--", 2) == 0 && strcmp(given + 2, name) == 0)
		return 0;
	log_err("'%s': options that delete take their full name: type --%s", given, name);
	return -1;
}

static int push_abs(struct strv *s, const char *arg)
{
	char cwd[PATH_MAX], path[PATH_MAX * 2];
	size_t n;

	if (arg[0] == '/') {
		snprintf(path, sizeof(path), "%s", arg);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return -1;
		while (arg[0] == '.' && arg[1] == '/')
			arg += 2;
		/* Relative to the current directory; "/" plus "code" is "/code", not "//code". */
		snprintf(path, sizeof(path), "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, arg);
	}
	n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = '\0';
	return strv_push(s, path);
}

int main(int argc, char **argv)
{
	enum {
		OPT_AGENT = 256,
		OPT_OWNER,
		OPT_PROJECT,
		OPT_KEY,
		OPT_SYNC_KEY,
		OPT_CONFIG,
		OPT_ADOPT,
		OPT_DRY,
		OPT_CHECK,
		OPT_REMOVE,
		OPT_PURGE,
		OPT_INSTALL_OPENCODE,
		OPT_WARDEN_CONFIG,
		OPT_VERSION
	};
	static const struct option longopts[] = {
		{"agent", required_argument, NULL, OPT_AGENT},
		{"owner", required_argument, NULL, OPT_OWNER},
		{"project", required_argument, NULL, OPT_PROJECT},
		{"key", required_argument, NULL, OPT_KEY},
		{"sync-key", required_argument, NULL, OPT_SYNC_KEY},
		{"config", required_argument, NULL, OPT_CONFIG},
		{"adopt", no_argument, NULL, OPT_ADOPT},
		{"dry-run", no_argument, NULL, OPT_DRY},
		{"check", no_argument, NULL, OPT_CHECK},
		{"remove", no_argument, NULL, OPT_REMOVE},
		{"purge", no_argument, NULL, OPT_PURGE},
		{"install-opencode", optional_argument, NULL, OPT_INSTALL_OPENCODE},
		{"warden-config", optional_argument, NULL, OPT_WARDEN_CONFIG},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{NULL, 0, NULL, 0},
	};
	struct prov_opts o = {.mode = PROV_APPLY};
	int c, dry = 0, check = 0, remove = 0, wconf = 0, r;

	log_init("ocsb-provision", LOG_TARGET_STDERR, 0);
	opterr = 0; /* one line of ours for a bad option (args.h), not getopt's and the usage */
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_AGENT:
			o.agent = optarg;
			break;
		case OPT_OWNER:
			o.owner = optarg;
			break;
		case OPT_PROJECT:
			if (push_abs(&o.projects, optarg) < 0)
				fatal("--project %s: cannot make it absolute", optarg);
			break;
		case OPT_KEY:
			if (push_abs(&o.keys, optarg) < 0)
				fatal("--key %s: cannot make it absolute", optarg);
			break;
		case OPT_SYNC_KEY:
			if (push_abs(&o.sync_keys, optarg) < 0)
				fatal("--sync-key %s: cannot make it absolute", optarg);
			break;
		case OPT_CONFIG:
			o.config_path = optarg;
			break;
		case OPT_ADOPT:
			o.adopt = 1;
			break;
		case OPT_DRY:
			dry = 1;
			break;
		case OPT_CHECK:
			check = 1;
			break;
		case OPT_REMOVE:
			if (exact_option(argv, "remove") < 0)
				return 2;
			remove = 1;
			break;
		case OPT_PURGE:
			if (exact_option(argv, "purge") < 0)
				return 2;
			o.purge = 1;
			break;
		case OPT_INSTALL_OPENCODE:
			if (optarg && !opencode_version_ok(optarg)) {
				log_err("--install-opencode=%s: give an exact release such as %s",
					optarg, OCSB_OPENCODE_VERSION);
				return 2;
			}
			o.install_opencode = 1;
			o.opencode_version = optarg;
			break;
		case OPT_WARDEN_CONFIG:
			if (optarg && strcmp(optarg, "start") != 0) {
				log_err("--warden-config=%s: only =start is known", optarg);
				return 2;
			}
			wconf = optarg ? 2 : 1;
			break;
		case 'v':
			o.verbose++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("ocsb-provision %s\n", OCSB_VERSION);
			return 0;
		default:
			return args_getopt_error(c, argv, longopts, "ocsb-provision --help");
		}
	}
	if (optind < argc) {
		log_err("unexpected argument '%s' (options only); see ocsb-provision --help",
			argv[optind]);
		return 2;
	}
	if (wconf &&
		(dry + check + remove || o.install_opencode || o.adopt || o.agent || o.owner ||
			o.projects.n || o.keys.n || o.sync_keys.n)) {
		log_err("--warden-config takes --config alone");
		return 2;
	}
	if (wconf)
		return prov_warden_config(o.config_path, wconf == 2);
	if (dry + check + remove > 1) {
		log_err("--dry-run, --check and --remove cannot be combined");
		return 2;
	}
	if (o.install_opencode && remove) {
		log_err("--install-opencode and --remove cannot be combined");
		return 2;
	}
	if (o.purge && !remove) {
		log_err("--purge is only valid with --remove");
		return 2;
	}
	o.mode = remove ? PROV_REMOVE : check ? PROV_CHECK : dry ? PROV_DRY_RUN : PROV_APPLY;
	log_setlevel(o.verbose);
	r = prov_main(&o);
	strv_free(&o.projects);
	strv_free(&o.keys);
	strv_free(&o.sync_keys);
	return r;
}
