/* SPDX-License-Identifier: GPL-2.0-only */
/* sysidle-libvirt's options and --help: see bridge.h. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "conffile.h"
#include "version.h"

struct options opt;

static const char usage_text[] =
"Usage: " PROG " [OPTION]...\n"
"Run the full-system-idle state machine for each running QEMU/KVM domain\n"
"of a libvirt host. A vCPU that did not run since the previous scan and\n"
"was halted at both scans was idle for the whole interval; each state\n"
"change is logged, set as the domain's live metadata (namespace\n"
"urn:sysidle:1, one <state/> element with a lease: who wrote it, and\n"
"until when it holds) and passed to the hooks.\n"
"\n"
"  --libvirt URI      the libvirt connection (default " DEFAULT_URI ")\n"
"  --source S         where the vCPUs' state comes from (default auto):\n"
"                     kvm: KVM's statistics in debugfs (" STATS_KVM_DEBUGFS
"/\n"
"                     PID-FD: blocking, vcpuN/pid) and each vCPU thread's\n"
"                     scheduler counts (/proc/PID/task/TID/schedstat,\n"
"                     stat); proc: the vCPU threads (named 'CPU N/KVM')\n"
"                     alone; libvirt: libvirt's vCPU statistics, which\n"
"                     make QEMU wake every vCPU at every scan; auto: kvm,\n"
"                     else proc, else libvirt, per domain, said once each.\n"
"                     A remote --libvirt URI: libvirt only\n"
"  --interval MS      scan every MS milliseconds, 1 to 3600000 (default 100)\n"
"  --idle-interval MS while every watched domain is fully idle, let the\n"
"                     interval double at each scan up to MS (default 1000;\n"
"                     at least --interval): a domain leaving full idle is\n"
"                     then seen at most MS late. Back to --interval at the\n"
"                     first scan where any domain is not fully idle\n"
"                     (with --stats-file: the default is --interval)\n"
"  --lease SECONDS    the metadata's lease, 3 to 86400 (default 30): it\n"
"                     is renewed when a third of it is left; readers\n"
"                     (sysidle-consolidate, the sample hook) ignore a state\n"
"                     whose lease ran out or whose writer is gone\n"
"  --metrics-file FILE  write the bridge's metrics (Prometheus text\n"
"                     format) to FILE: at each state change and at most\n"
"                     every 10 s otherwise\n"
"  --hooks DIR        run DIR/vm, then DIR/vm.d/*, as libvirt runs its\n"
"                     qemu hooks, with the domain's XML from libvirt on\n"
"                     stdin: NAME started begin - (a domain started while\n"
"                     watched), NAME watched begin - (a running domain is\n"
"                     first watched), NAME idle begin - / NAME idle end MS\n"
"                     (FULL_NOTED reached / left after MS ms), NAME stopped\n"
"                     end - (the domain stopped), NAME unwatched end - (it\n"
"                     runs on, no longer watched: " PROG " stops)\n"
"                     (default " DEFAULT_HOOKS_DIR "; absent: no hooks)\n"
"  --hook-timeout SECONDS  kill a hook still running after SECONDS\n"
"                     (default 10)\n"
"  --stop-timeout SECONDS  after SIGTERM or SIGINT, exit at once (status\n"
"                     3) when the clean stop has not ended within SECONDS,\n"
"                     1 to 3600 (default 30): a libvirt call that does\n"
"                     not return, hooks that take long\n"
"  --once             scan twice, one interval apart, set each domain's\n"
"                     metadata (left in place until its lease ends), print\n"
"                     each domain's state and exit; runs no hooks\n"
"  --stats-file FILE  replay recorded statistics from FILE instead of\n"
"                     reading them (for tests and offline replay): lines\n"
"                     'T_MS DOMAIN KEY=VALUE...', one scan per T_MS, one\n"
"                     scan per interval; the domains, the metadata and the\n"
"                     hooks still go through --libvirt. Stops at the end.\n"
"                     At most 65536 bytes a line, 1000000 lines; read\n"
"                     whole at start (a FIFO: until its writer closes)\n"
"  --verbose          also log what libvirt holds after each metadata\n"
"                     change, and the replay's unknown domains\n"
"  --config FILE      read options from FILE first (default\n"
"                     " SYSIDLE_CONFDIR "/sysidle-libvirt.conf when it\n"
"                     exists): one \"key = value\" per line, a long option's\n"
"                     name as the key, a flag as the bare key or\n"
"                     \"key = true|false\" (sysidle.conf(5)); the command\n"
"                     line wins; a bad key or value: FILE:LINE, exit 2\n"
"  --version          print the version and exit\n"
"  --help             show this help and exit\n"
"\n"
"Log lines: 'TIME LEVEL message' (or '<N>message' when stdout or stderr is\n"
"the systemd journal).\n"
"SIGTERM or SIGINT (or the end of --stats-file): finish the scan, run the\n"
"hooks (idle end for a domain fully idle, then unwatched end), remove the\n"
"metadata, exit 0. A second SIGTERM or SIGINT, or --stop-timeout passing\n"
"first, ends it at once, saying what it was doing (exit 3).\n"
"Exit status: 0 done, 1 cannot start (libvirt with --once, the stats\n"
"file), 2 bad options, 3 stopped before the clean stop ended.\n";

/* @text as an unsigned number of at most @max; false if it is not one. */
static bool parse_u64_max(const char *text, uint64_t max, uint64_t *v)
{
	unsigned long long x;
	char *end;

	errno = 0;
	x = strtoull(text, &end, 10);
	if (errno || *end || end == text || *text == '-' || x > max)
		return false;
	*v = x;
	return true;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The options: the configuration file's, then the command line's; and
 * the FILE:LINE of the one being parsed when it came from the file. */
static struct conf_args conf;
static const char *conf_at;

static int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
	if (conf_at)
		fprintf(stderr, "%s: ", conf_at);
	vfprintf(stderr, fmt, ap);
	fputs("\nTry '" PROG " --help'.\n", stderr);
	va_end(ap);
	return -1;
}

int parse_options(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "libvirt", required_argument, NULL, 'c' },
		{ "interval", required_argument, NULL, 'i' },
		{ "hooks", required_argument, NULL, 'H' },
		{ "hook-timeout", required_argument, NULL, 'O' },
		{ "stop-timeout", required_argument, NULL, 'T' },
		{ "once", no_argument, NULL, '1' },
		{ "stats-file", required_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "source", required_argument, NULL, 's' },
		{ "idle-interval", required_argument, NULL, 'I' },
		{ "lease", required_argument, NULL, 'L' },
		{ "metrics-file", required_argument, NULL, 'm' },
		{ "config", required_argument, NULL, 'g' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf_env = getenv("SYSIDLE_LIBVIRT_CONFIG");
	bool idle_given = false;
	uint64_t secs;
	int c, k;

	opt = (struct options){ .uri = DEFAULT_URI, .interval_ms = 100,
				.idle_interval_ms = 1000, .lease_s = 30,
				.hooks_dir = DEFAULT_HOOKS_DIR,
				.hook_timeout_ns = 10000000000ull,
				.stop_timeout_ns = 30000000000ull };
	/* SYSIDLE_LIBVIRT_CONFIG: another default file ("" none), for tests */
	if (conf_args_build(PROG, argc, argv,
			    conf_env ? (*conf_env ? conf_env : NULL) :
			    SYSIDLE_CONFDIR "/sysidle-libvirt.conf",
			    longopts, NULL, &conf))
		return -1;
	argc = conf.argc;
	argv = conf.argv;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		conf_at = conf_origin(&conf, optarg ? optarg : argv[optind - 1]);
		switch (c) {
		case 'g': /* read by conf_args_build */
			break;
		case 'V':
			sysidle_version_print(stdout, PROG);
			exit(0);
		case 'c':
			if (!*optarg)
				return usage_error("--libvirt: expected a URI");
			opt.uri = optarg;
			break;
		case 'i':
		case 'I':
			if (!parse_u64_max(optarg, INTERVAL_MAX_MS,
					   c == 'i' ? &opt.interval_ms :
					   &opt.idle_interval_ms) ||
			    !(c == 'i' ? opt.interval_ms : opt.idle_interval_ms))
				return usage_error("%s '%s': expected "
						   "milliseconds, 1 to %u",
						   c == 'i' ? "--interval" :
						   "--idle-interval", optarg,
						   INTERVAL_MAX_MS);
			idle_given |= c == 'I';
			break;
		case 'L':
			if (!parse_u64_max(optarg, 86400, &opt.lease_s) ||
			    opt.lease_s < 3)
				return usage_error("--lease '%s': expected "
						   "seconds, 3 to 86400", optarg);
			break;
		case 's':
			k = stats_kind_parse(optarg);
			if (k < 0)
				return usage_error("--source '%s': expected "
						   "auto, kvm, proc or libvirt",
						   optarg);
			opt.source = (enum stats_kind)k;
			break;
		case 'm':
			if (!*optarg)
				return usage_error("--metrics-file: expected a "
						   "file");
			opt.metrics_file = optarg;
			break;
		case 'H':
			if (!*optarg)
				return usage_error("--hooks: expected a directory");
			opt.hooks_dir = optarg;
			break;
		case 'O':
			if (hooks_parse_timeout(optarg, &opt.hook_timeout_ns))
				return usage_error("--hook-timeout '%s': "
						   HOOKS_TIMEOUT_USAGE, optarg);
			break;
		case 'T':
			if (!parse_u64_max(optarg, STOP_TIMEOUT_MAX_S, &secs) ||
			    !secs)
				return usage_error("--stop-timeout '%s': "
						   "expected seconds, 1 to %u",
						   optarg, STOP_TIMEOUT_MAX_S);
			opt.stop_timeout_ns = secs * 1000000000u;
			break;
		case '1':
			opt.once = true;
			break;
		case 'f':
			if (!*optarg)
				return usage_error("--stats-file: expected a file");
			opt.stats_file = optarg;
			break;
		case 'v':
			opt.verbose = true;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case ':':
			return usage_error("%s: expected a value", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	conf_at = NULL;
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	/* A replay keeps its pace unless told otherwise. */
	if (opt.stats_file && !idle_given)
		opt.idle_interval_ms = opt.interval_ms;
	if (opt.idle_interval_ms < opt.interval_ms) {
		if (idle_given)
			return usage_error("--idle-interval %" PRIu64 " is "
					   "shorter than --interval %" PRIu64,
					   opt.idle_interval_ms,
					   opt.interval_ms);
		opt.idle_interval_ms = opt.interval_ms;
	}
	if (opt.stats_file && opt.source != STATS_AUTO)
		return usage_error("--stats-file and --source: the replay is "
				   "the source");
	if (opt.stats_file)
		opt.source = STATS_FILE;
	/* scheme://host/...: another host's domains, no /proc of theirs. */
	{
		const char *p = strstr(opt.uri, "://");

		opt.remote = p && p[3] && p[3] != '/';
	}
	return 0;
}

