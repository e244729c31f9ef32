/* SPDX-License-Identifier: GPL-2.0-only */
/* sysidle-libvirt's options: one table (bridge_options[]) from which
 * common's options library parses the configuration file and the command
 * line and writes --help and the errors; see bridge.h. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "options_table.h"

static const char usage_head[] =
"Usage: " PROG " [OPTION]...\n"
"Run the full-system-idle state machine for each running QEMU/KVM domain\n"
"of a libvirt host. A vCPU that did not run since the previous scan and\n"
"was halted at both scans was idle for the whole interval; each state\n"
"change is logged, set as the domain's live metadata (namespace\n"
"urn:sysidle:1, one <state/> element with a lease: who wrote it, and\n"
"until when it holds) and passed to the hooks.\n"
"\n";

static const char usage_tail[] =
"\n"
"Log lines: 'TIME LEVEL message' (or '<N>message' when stdout or stderr is\n"
"the systemd journal).\n"
"SIGTERM or SIGINT (or the end of --stats-file): finish the scan, run the\n"
"hooks (idle end for a domain fully idle, then unwatched end), remove the\n"
"metadata, exit 0. A second SIGTERM or SIGINT, or --stop-timeout passing\n"
"first, ends it at once, saying what it was doing (exit 3).\n"
"Exit status: 0 done, 1 cannot start (libvirt with --once, the stats\n"
"file), 2 bad options, 3 stopped before the clean stop ended.\n";

/* --hook-timeout SECONDS. */
static int parse_hook_timeout(void *opts, const char *arg, char *bad,
			      size_t badlen)
{
	struct options *o = opts;

	(void)bad, (void)badlen;
	return hooks_parse_timeout(arg, &o->hook_timeout_ns);
}

#define AT(f) OPT_FIELD(struct options, f)

/* The values of --source, by enum stats_kind (stats_kind_name). */
static const char *const sources[] = { "auto", "kvm", "proc", "libvirt",
				       NULL };

/* The bridge's options, in --help's order. */
static const struct opt_entry bridge_options[] = {
	{ .name = "libvirt", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(uri), .def_str = DEFAULT_URI, .metavar = "URI",
	  .expect = ": expected a URI",
	  .help = "the libvirt connection (default {default})" },
	{ .name = "source", .type = OPT_ENUM, AT(source), .names = sources,
	  .metavar = "S", .expect = "expected auto, kvm, proc or libvirt",
	  .help = "where the vCPUs' state comes from (default {default}):\n"
		  "kvm: KVM's statistics in debugfs (" STATS_KVM_DEBUGFS "/\n"
		  "PID-FD: blocking, vcpuN/pid) and each vCPU thread's\n"
		  "scheduler counts (/proc/PID/task/TID/schedstat,\n"
		  "stat); proc: the vCPU threads (named 'CPU N/KVM')\n"
		  "alone; libvirt: libvirt's vCPU statistics, which\n"
		  "make QEMU wake every vCPU at every scan; auto: kvm,\n"
		  "else proc, else libvirt, per domain, said once each.\n"
		  "A remote --libvirt URI: libvirt only" },
	{ .name = "interval", .type = OPT_UINT, AT(interval_ms), .min = 1,
	  .max = INTERVAL_MAX_MS, .def = 100, .metavar = "MS",
	  .expect = "expected milliseconds, {min} to {max}",
	  .help = "scan every MS milliseconds, {min} to {max} (default {default})" },
	{ .name = "idle-interval", .type = OPT_UINT, AT(idle_interval_ms),
	  .min = 1, .max = INTERVAL_MAX_MS, .def = 1000, .metavar = "MS",
	  .expect = "expected milliseconds, {min} to {max}",
	  .help = "while every watched domain is fully idle, let the\n"
		  "interval double at each scan up to MS (default {default};\n"
		  "at least --interval): a domain leaving full idle is\n"
		  "then seen at most MS late. Back to --interval at the\n"
		  "first scan where any domain is not fully idle\n"
		  "(with --stats-file: the default is --interval)" },
	{ .name = "lease", .type = OPT_UINT, AT(lease_s), .min = 3,
	  .max = 86400, .def = 30, .metavar = "SECONDS",
	  .expect = "expected seconds, {min} to {max}",
	  .help = "the metadata's lease, {min} to {max} (default {default}): it\n"
		  "is renewed when a third of it is left; readers\n"
		  "(sysidle-consolidate, the sample hook) ignore a state\n"
		  "whose lease ran out or whose writer is gone" },
	{ .name = "metrics-file", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(metrics_file), .metavar = "FILE", .expect = ": expected a file",
	  .help = "write the bridge's metrics (Prometheus text\n"
		  "format) to FILE: at each state change and at most\n"
		  "every 10 s otherwise" },
	{ .name = "wakes-file", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(wakes_file), .metavar = "FILE", .expect = ": expected a file",
	  .help = "write what wakes each domain as the host sees it\n"
		  "(KVM's counters, the QEMU threads' wake-ups, rates\n"
		  "per second over the last minute) to FILE as JSON,\n"
		  "at most every second; removed at exit" },
	{ .name = "hooks", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(hooks_dir), .def_str = DEFAULT_HOOKS_DIR, .metavar = "DIR",
	  .expect = ": expected a directory",
	  .help = "run DIR/vm, then DIR/vm.d/*, as libvirt runs its\n"
		  "qemu hooks, with the domain's XML from libvirt on\n"
		  "stdin: NAME started begin - (a domain started while\n"
		  "watched), NAME watched begin - (a running domain is\n"
		  "first watched), NAME idle begin - / NAME idle end MS\n"
		  "(FULL_NOTED reached / left after MS ms), NAME stopped\n"
		  "end - (the domain stopped), NAME unwatched end - (it\n"
		  "runs on, no longer watched: " PROG " stops)\n"
		  "(default {default}; absent: no hooks)" },
	{ .name = "hook-timeout", .type = OPT_CUSTOM,
	  .parse = parse_hook_timeout, .def_str = "10", .metavar = "SECONDS",
	  .expect = HOOKS_TIMEOUT_USAGE,
	  .help = "kill a hook still running after SECONDS\n"
		  "(default {default})" },
	{ .name = "stop-timeout", .type = OPT_UINT, AT(stop_timeout_ns),
	  .min = 1, .max = STOP_TIMEOUT_MAX_S, .scale = 1000000000,
	  .def = 30, .metavar = "SECONDS",
	  .expect = "expected seconds, {min} to {max}",
	  .help = "after SIGTERM or SIGINT, exit at once (status\n"
		  "3) when the clean stop has not ended within SECONDS,\n"
		  "{min} to {max} (default {default}): a libvirt call that does\n"
		  "not return, hooks that take long" },
	{ .name = "once", .type = OPT_FLAG, AT(once),
	  .help = "scan twice, one interval apart, set each domain's\n"
		  "metadata (left in place until its lease ends), print\n"
		  "each domain's state and exit; runs no hooks" },
	{ .name = "stats-file", .type = OPT_STRING, .flags = OPT_NONEMPTY,
	  AT(stats_file), .metavar = "FILE", .expect = ": expected a file",
	  .help = "replay recorded statistics from FILE instead of\n"
		  "reading them (for tests and offline replay): lines\n"
		  "'T_MS DOMAIN KEY=VALUE...', one scan per T_MS, one\n"
		  "scan per interval; the domains, the metadata and the\n"
		  "hooks still go through --libvirt. Stops at the end.\n"
		  "At most 65536 bytes a line, 1000000 lines; read\n"
		  "whole at start (a FIFO: until its writer closes)" },
	{ .name = "verbose", .short_name = 'v', .type = OPT_FLAG, AT(verbose),
	  .help = "also log what libvirt holds after each metadata\n"
		  "change, and the replay's unknown domains" },
	{ .name = "config", .type = OPT_CONFIG, .flags = OPT_CLI_ONLY,
	  .metavar = "FILE",
	  .help = "read options from FILE first (default\n"
		  SYSIDLE_CONFDIR "/sysidle-libvirt.conf when it\n"
		  "exists): one \"key = value\" per line, a long option's\n"
		  "name as the key, a flag as the bare key or\n"
		  "\"key = true|false\" (sysidle.conf(5)); the command\n"
		  "line wins; a bad key or value: FILE:LINE, exit 2" },
	{ .name = "version", .type = OPT_VERSION, .flags = OPT_CLI_ONLY,
	  .help = "print the version and exit" },
	{ .name = "help", .short_name = 'h', .type = OPT_HELP,
	  .flags = OPT_CLI_ONLY, .help = "show this help and exit" },
	{ .name = "list-options", .type = OPT_LIST_OPTIONS,
	  .flags = OPT_CLI_ONLY | OPT_HIDDEN },
};

/* The options being parsed: the configuration file's, then the command
 * line's; the parsed strings point into it for the process's life. */
static struct opt_parser parser;

/* The checks across options, after the table's parse; -1 after the
 * message. */
static int check_options(struct options *o)
{
	bool idle_given = opt_given(&parser, "idle-interval");
	const char *p;

	/* A replay keeps its pace unless told otherwise. */
	if (o->stats_file && !idle_given)
		o->idle_interval_ms = o->interval_ms;
	if (o->idle_interval_ms < o->interval_ms) {
		if (idle_given)
			return opt_error(&parser, NULL, "--idle-interval %" PRIu64
					 " is shorter than --interval %" PRIu64,
					 o->idle_interval_ms, o->interval_ms);
		o->idle_interval_ms = o->interval_ms;
	}
	if (o->stats_file && o->source != STATS_AUTO)
		return opt_error(&parser, NULL, "--stats-file and --source: the "
				 "replay is the source");
	if (o->stats_file)
		o->source = STATS_FILE;
	/* scheme://host/...: another host's domains, no /proc of theirs. */
	p = strstr(o->uri, "://");
	o->remote = p && p[3] && p[3] != '/';
	return 0;
}

int parse_options(int argc, char **argv, struct options *o)
{
	static struct opt_program prog = {
		.name = PROG,
		.version_name = PROG,
		.usage_head = usage_head,
		.usage_tail = usage_tail,
		.hint = "\nTry '%s --help'.\n",
		.missing = "%s: expected a value",
		.unknown = "unknown option '%s'",
		.entries = bridge_options,
		.nentries = sizeof(bridge_options) / sizeof(bridge_options[0]),
	};
	/* SYSIDLE_LIBVIRT_CONFIG: another default file ("" none), for tests */
	const char *conf_env = getenv("SYSIDLE_LIBVIRT_CONFIG");
	int r;

	prog.default_config = conf_env ? (*conf_env ? conf_env : NULL) :
			      SYSIDLE_CONFDIR "/sysidle-libvirt.conf";
	*o = (struct options){ 0 };
	r = opt_parse(&parser, &prog, argc, argv, o);
	if (r > 0) /* --help, --version */
		exit(0);
	return r < 0 ? -1 : check_options(o);
}
