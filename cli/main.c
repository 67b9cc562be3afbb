/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "args.h"
#include "log.h"
#include "dirs.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: ocsb COMMAND [ARGS]\n"
		"Work with the AI agent's sandbox account set up by ocsb-provision(8).\n"
		"\n"
		"  status               what ocsb-agentd runs: netlock, proxy, each OpenCode\n"
		"                       instance with its URL and password\n"
		"  web                  the URL and credentials of each OpenCode instance\n"
		"  restart [PROJECT]    restart OpenCode (all instances, or one)\n"
		"  logs [-n N]          the last N lines (default 50) of each OpenCode log\n"
		"  egress render        print the squid configuration built from the egress rules\n"
		"  egress verify        run every expect-pass / expect-block rule as the agent\n"
		"                       and print a pass/fail table (root: sudo ocsb egress "
		"verify)\n"
		"  egress logs [-f]     the proxy's requests and denials, with the deciding rule\n"
		"                       (root); -f follows new lines\n"
		"  egress denied [--since WHEN]\n"
		"                       refused hosts with counts and the line that would allow\n"
		"                       each (root; WHEN 30m, 2h, 7d, 2026-12-06; default 24h)\n"
		"  egress allow HOST[:PORT]...\n"
		"                       add allow (or connect) lines to egress.d/50-allowed.conf\n"
		"                       and reload (root)\n"
		"  egress learn start [--minutes N] | stop\n"
		"                       learn mode (root): for N minutes (60) the agent reaches\n"
		"                       what the blocklist would allow; stop writes a proposal,\n"
		"                       egress.d/learned-DATE.conf, not in force\n"
		"  egress apply FILE [--yes]\n"
		"                       show what FILE changes, then put it in force (root)\n"
		"  egress reload        have ocsb-agentd re-read the rules, wait until squid has\n"
		"                       them (root; allow, learn and apply do it themselves)\n"
		"  sync push [BRANCH]   hand your current branch (or BRANCH) to the agent's clone\n"
		"  sync pull            fetch the agent's branches into refs/remotes/AGENT/* and\n"
		"                       print a review of risky changes (--json)\n"
		"  sync status          your branches against the agent's, without fetching\n"
		"  sync init --host HOST [--accept-host-key SHA256:FP]\n"
		"                       prepare an agent on another machine: check and pin its\n"
		"                       host key, make the key it authorises; then sync push,\n"
		"                       pull and status take --host HOST\n"
		"  secrets set NAME     store an API key in your keyring (value from a no-echo\n"
		"                       prompt or stdin); also list, rm NAME, push (to the\n"
		"                       agent); --global, --project NAME, --file; --inject\n"
		"                       keeps a key out of the sandbox (ocsb-inject adds it)\n"
		"  usage [--json]       requests, bytes, statuses, tokens per injected route/day\n"
		"  mirror status [--json]\n"
		"                       your configs the agent reads: mirrored, skipped,\n"
		"                       withheld (credentials) and why\n"
		"  doctor [--fix] [--json]  is the sandbox intact: one line per check, OK / WARN "
		"/\n"
		"                       FAIL with its fix; exit 1 on FAIL (more checks as root)\n"
		"  --help               this text\n"
		"  --version            the version\n"
		"\n"
		"Rules: /etc/ocsb/egress.conf, /etc/ocsb/egress.d/*.conf, "
		"~/.config/ocsb/egress.conf.\n"
		"See ocsb(1).\n");
}

/*
 * Each command's messages start "ocsb COMMAND: " ("ocsb sync: error: ..."), whatever part
 * of the program prints them; the program's own, "ocsb: ".
 */
static const char *const commands[] = {"status", "web", "restart", "logs", "egress", "sync",
	"secrets", "usage", "mirror", "doctor", "help", NULL};
static const char *const progs[] = {"ocsb status", "ocsb web", "ocsb restart", "ocsb logs",
	"ocsb egress", "ocsb sync", "ocsb secrets", "ocsb usage", "ocsb mirror", "ocsb doctor",
	"ocsb", NULL};
static const char *const options[] = {"--help", "--version", NULL};

int main(int argc, char **argv)
{
	struct cli c;
	char err[1024];
	size_t k;
	int r;

	log_init("ocsb", LOG_TARGET_STDERR, 0);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
		!strcmp(argv[1], "help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("ocsb %s\n", OCSB_VERSION);
		return 0;
	}
	for (k = 0; commands[k] && strcmp(argv[1], commands[k]); k++)
		;
	if (!commands[k])
		return args_unknown(argv[1][0] == '-' ? "option" : "command", argv[1],
			argv[1][0] == '-' ? options : commands, "ocsb --help");
	log_init(progs[k], LOG_TARGET_STDERR, 0);
	if (!strcmp(argv[1], "status") || !strcmp(argv[1], "web") || !strcmp(argv[1], "restart") ||
		!strcmp(argv[1], "logs"))
		return cmd_agentd(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sync"))
		return cmd_sync(argc - 1, argv + 1);
	if (!strcmp(argv[1], "secrets"))
		return cmd_secrets(argc - 1, argv + 1);
	if (!strcmp(argv[1], "usage"))
		return cmd_usage(argc - 1, argv + 1);
	if (!strcmp(argv[1], "mirror"))
		return cmd_mirror(argc - 1, argv + 1);
	/* Their arguments are checked before the configuration is read: a typo is named first. */
	r = strcmp(argv[1], "doctor") ? egress_args(argc - 2, argv + 2)
				      : doctor_args(argc - 1, argv + 1, NULL, NULL);
	if (r)
		return r;
	if (cli_load(&c, err, sizeof(err)) < 0) {
		log_err("%s", err);
		cli_free(&c);
		return 2;
	}
	r = strcmp(argv[1], "doctor") ? cmd_egress(&c, argc - 2, argv + 2)
				      : cmd_doctor(&c, argc - 1, argv + 1);
	cli_free(&c);
	return r;
}
