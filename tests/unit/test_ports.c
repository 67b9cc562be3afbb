/* SPDX-License-Identifier: MIT */
/*
 * The agents' loopback ports against each other (provision/ports.c, issue 25): one agent's
 * agent-ports range over another's, or over another's OpenCode ports, is refused with both
 * agents, both ranges and the keyword's line named; the harmless overlaps are not.
 */
#define _GNU_SOURCE
#include "unit.h"

#include "../../netlock/netlock_int.h"
#include "../../provision/provision.h"

#define ENTRY "/var/lib/ocsb/agents/ai-two"

/* `text` as the configuration of agent ai-dev in two.conf, validated. */
static void conf(struct ocsb_config *c, const char *text)
{
	char err[512];

	config_defaults(c);
	snprintf(c->agent, sizeof(c->agent), "ai-dev");
	if (config_parse_buf(c, text, strlen(text), "two.conf", err, sizeof(err)) < 0 ||
		config_validate(c, err, sizeof(err)) < 0)
		fail_msg("%s", err);
}

/* ports_conflict of text against an entry holding `entry`: 1 with err, or 0. */
static int conflict(const char *text, const char *entry, char *err, size_t n)
{
	struct ocsb_config c;
	struct ports_entry e;
	int r;

	conf(&c, text);
	ports_entry_parse(entry, &e);
	err[0] = '\0';
	r = ports_conflict(&c, "two.conf", "ai-two", ENTRY, &e, err, n);
	config_free(&c);
	return r;
}

static void entry_lines_parsed(void **state)
{
	struct ports_entry e;

	(void)state;
	ports_entry_parse("# written by ocsb-provision; do not edit\nagent ai-two\norigin "
			  "created\nuid 1001\nports 9100-9109\nopencode-ports 4096-4097\n",
		&e);
	assert_int_equal(e.lo, 9100);
	assert_int_equal(e.hi, 9109);
	assert_int_equal(e.oc_lo, 4096);
	assert_int_equal(e.oc_hi, 4097);
	/* Written before the OpenCode ports were recorded: unknown, still readable. */
	ports_entry_parse("agent ai-two\norigin created\nuid 1001\nports 9100-9109", &e);
	assert_int_equal(e.lo, 9100);
	assert_int_equal(e.hi, 9109);
	assert_int_equal(e.oc_lo, 0);
	assert_int_equal(e.oc_hi, 0);
	/* No range at all; a prefix of a keyword is not the keyword. */
	ports_entry_parse("agent ai-two\nxports 9000-9009\nopencode-portsx 1-2\n", &e);
	assert_int_equal(e.lo, 0);
	assert_int_equal(e.oc_lo, 0);
	/* As the netlock reads it: a range over the route ports, or a second line, is none. */
	ports_entry_parse("ports 18000-18999\n", &e);
	assert_int_equal(e.lo, 0);
	ports_entry_parse("ports 9000-9009\nports 9100-9109\n", &e);
	assert_int_equal(e.lo, 0);
	assert_int_equal(e.hi, 0);
	ports_entry_parse("opencode-ports 4096\nopencode-ports 9-8\n", &e);
	assert_int_equal(e.oc_lo, 0);
	ports_entry_parse("", &e);
	assert_int_equal(e.lo, 0);
	assert_int_equal(e.oc_lo, 0);
}

/*
 * A value longer than 63 bytes was cut before it was read: "1024-" and 58 zeros then
 * "10004" read as "1024-0" (no range) while the netlock opened 1024-10004, and another
 * agent's run checked its range against none (found by tests/fuzz/fuzz_registry.c,
 * regress-ports-value-cut). Both readers read the whole line now.
 */
static void entry_long_value_read_whole(void **state)
{
	struct ports_entry e;
	struct netlock_entry ne;
	struct buf text = {0};
	char err[2048];
	struct ocsb_config c;

	(void)state;
	assert_int_equal(buf_puts(&text, "ports 1024-"), 0);
	for (int i = 0; i < 58; i++)
		assert_int_equal(buf_puts(&text, "0"), 0);
	assert_int_equal(buf_puts(&text, "10004\nopencode-ports 5000-"), 0);
	for (int i = 0; i < 70; i++)
		assert_int_equal(buf_puts(&text, "0"), 0);
	assert_int_equal(buf_puts(&text, "5001\n"), 0);
	ports_entry_parse(text.data, &e);
	assert_int_equal(e.lo, 1024);
	assert_int_equal(e.hi, 10004);
	assert_int_equal(e.oc_lo, 5000);
	assert_int_equal(e.oc_hi, 5001);
	netlock_entry_parse(text.data, &ne);
	assert_int_equal(ne.ports.lo, 1024);
	assert_int_equal(ne.ports.hi, 10004);
	/* So an agent-ports range inside it is refused. */
	conf(&c, "agent-ports 8000-8099\n");
	assert_int_equal(ports_conflict(&c, "two.conf", "ai-two", ENTRY, &e, err, sizeof(err)), 1);
	config_free(&c);
	buf_free(&text);
}

/* Two agents' ranges sharing a port: each reaches the other's servers there. */
static void ranges_overlapping_refused(void **state)
{
	char err[1024];

	(void)state;
	assert_int_equal(conflict("project /p/shop\nagent-ports 9005-9104\n",
				 "ports 9000-9009\nopencode-ports 4096-4096\n", err, sizeof(err)),
		1);
	assert_string_equal(err,
		"two.conf:2: agent-ports 9005-9104 of ai-dev overlaps agent-ports 9000-9009 of "
		"ai-two (" ENTRY "): each agent could reach the servers the other runs on ports "
		"9005-9009; give ai-dev a range outside 9000-9009");
	/* One shared port at either end is enough; a range inside the other's too. */
	assert_int_equal(
		conflict("agent-ports 9009-9020\n", "ports 9000-9009\n", err, sizeof(err)), 1);
	assert_err_prefix(err,
		"two.conf:1: agent-ports 9009-9020 of ai-dev overlaps agent-ports "
		"9000-9009 of ai-two");
	assert_int_equal(
		conflict("agent-ports 8000-9000\n", "ports 9000-9009\n", err, sizeof(err)), 1);
	assert_int_equal(
		conflict("agent-ports 9003-9004\n", "ports 9000-9009\n", err, sizeof(err)), 1);
	assert_int_equal(
		conflict("agent-ports 8000-9999\n", "ports 9000-9009\n", err, sizeof(err)), 1);
	/* Controls: adjacent ranges share nothing. */
	assert_int_equal(
		conflict("agent-ports 9010-9099\n", "ports 9000-9009\n", err, sizeof(err)), 0);
	assert_int_equal(
		conflict("agent-ports 8000-8999\n", "ports 9000-9009\n", err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

/* A range over another agent's OpenCode servers: it reaches a server running as that agent. */
static void range_over_other_opencode_refused(void **state)
{
	char err[1024];

	(void)state;
	assert_int_equal(conflict("opencode-port 5000\nagent-ports 4090-4099\n",
				 "opencode-ports 4096-4097\n", err, sizeof(err)),
		1);
	assert_string_equal(err,
		"two.conf:2: agent-ports 4090-4099 of ai-dev overlaps the OpenCode ports "
		"4096-4097 of ai-two (" ENTRY "): ai-dev could reach ai-two's OpenCode servers, "
		"which run commands as ai-two; give ai-dev a range outside 4096-4097");
	assert_int_equal(conflict("opencode-port 5000\nagent-ports 4097-4200\n",
				 "opencode-ports 4096-4097\n", err, sizeof(err)),
		1);
	/* Controls: beside them; and an entry without the line (older) is not known. */
	assert_int_equal(conflict("opencode-port 5000\nagent-ports 4098-4200\n",
				 "opencode-ports 4096-4097\n", err, sizeof(err)),
		0);
	assert_int_equal(conflict("opencode-port 5000\nagent-ports 4090-4099\n",
				 "ports 9000-9009\n", err, sizeof(err)),
		0);
}

/* This agent's OpenCode ports in another's range: refused from this side too. */
static void own_opencode_in_other_range_refused(void **state)
{
	char err[1024];

	(void)state;
	/* Three projects: 5000-5002; the last is in the other's range. */
	assert_int_equal(conflict("project /p/a\nproject /p/b\nproject /p/c\nopencode-port 5000\n",
				 "ports 5002-5100\n", err, sizeof(err)),
		1);
	assert_string_equal(err,
		"two.conf:4: the OpenCode ports 5000-5002 of ai-dev (opencode-port 5000, one per "
		"project) overlap agent-ports 5002-5100 of ai-two (" ENTRY "): ai-two could "
		"reach ai-dev's OpenCode servers, which run commands as ai-dev; set opencode-port "
		"so that they lie outside 5002-5100");
	/* Not in the file: the default is named, with the fix. */
	assert_int_equal(conflict("project /p/a\n", "ports 4000-4199\n", err, sizeof(err)), 1);
	assert_string_equal(err,
		"two.conf: the OpenCode ports 4096-4096 of ai-dev (opencode-port's default 4096, "
		"one per project) overlap agent-ports 4000-4199 of ai-two (" ENTRY "): ai-two "
		"could reach ai-dev's OpenCode servers, which run commands as ai-dev; add an "
		"opencode-port line so that they lie outside 4000-4199");
	/* Control: two projects, 5000-5001, below the range. */
	assert_int_equal(conflict("project /p/a\nproject /p/b\nopencode-port 5000\n",
				 "ports 5002-5100\n", err, sizeof(err)),
		0);
}

/* OpenCode ports over OpenCode ports: no range holds them, neither agent reaches them. */
static void harmless_overlaps_accepted(void **state)
{
	char err[1024];

	(void)state;
	assert_int_equal(
		conflict("project /p/a\n", "opencode-ports 4096-4096\n", err, sizeof(err)), 0);
	assert_int_equal(conflict("project /p/a\nagent-ports 9000-9009\n",
				 "ports 9100-9109\nopencode-ports 4096-4096\n", err, sizeof(err)),
		0);
	/* Neither side with a range. */
	assert_int_equal(conflict("", "uid 1001\n", err, sizeof(err)), 0);
	assert_string_equal(err, "");
}

/* The whole registry: its own entry skipped, every other one checked, older ones named. */
static void preflight_reads_the_registry(void **state)
{
	struct prov *p = calloc(1, sizeof(*p));
	static const char two[] = "agent ai-two\nports 9100-9109\nopencode-ports 4096-4096\n";
	static const char old[] = "agent ai-old\nports 9200-9209\n";

	(void)state;
	assert_non_null(p);
	assert_int_equal(paths_under(&p->paths, unit_dir), 0);
	snprintf(p->config_path, sizeof(p->config_path), "two.conf");
	conf(&p->cfg, "agent-ports 9000-9009\n");
	/* No registry yet: nothing to check. */
	assert_int_equal(ports_preflight(p), 0);
	assert_int_equal(mkdir(unit_path("var"), 0755), 0);
	assert_int_equal(mkdir(unit_path("var/lib"), 0755), 0);
	assert_int_equal(mkdir(unit_path("var/lib/ocsb"), 0755), 0);
	assert_int_equal(mkdir(unit_path("var/lib/ocsb/agents"), 0700), 0);
	/* Its own entry, with another range (the run changes it), does not count. */
	unit_write(unit_path("var/lib/ocsb/agents/ai-dev"), "ports 9000-9100\n", 16, 0600);
	unit_write(unit_path("var/lib/ocsb/agents/ai-two"), two, strlen(two), 0600);
	unit_write(unit_path("var/lib/ocsb/agents/ai-old"), old, strlen(old), 0600);
	assert_int_equal(ports_preflight(p), 0);
	config_free(&p->cfg);
	conf(&p->cfg, "agent-ports 9105-9105\n");
	assert_int_equal(ports_preflight(p), -1);
	config_free(&p->cfg);
	conf(&p->cfg, "agent-ports 9209-9300\n");
	assert_int_equal(ports_preflight(p), -1);
	config_free(&p->cfg);
	conf(&p->cfg, "agent-ports 4096-4096\nopencode-port 5000\n");
	assert_int_equal(ports_preflight(p), -1);
	config_free(&p->cfg);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(entry_lines_parsed),
		cmocka_unit_test(entry_long_value_read_whole),
		cmocka_unit_test(ranges_overlapping_refused),
		cmocka_unit_test(range_over_other_opencode_refused),
		cmocka_unit_test(own_opencode_in_other_range_refused),
		cmocka_unit_test(harmless_overlaps_accepted),
		cmocka_unit_test_setup_teardown(
			preflight_reads_the_registry, unit_setup_dir, unit_teardown_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
