/* SPDX-License-Identifier: GPL-2.0-only */
/* sysidle-libvirt's options and --help: see bridge.h. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "bridge.h"

struct options opt;

static const char usage_text[] =
"usage: " PROG " [OPTION]...\n"
"Run the full-system-idle state machine for each running QEMU/KVM domain\n"
"of a libvirt host, from KVM's per-vCPU statistics: a vCPU whose\n"
"halt-exit count (vcpu.N.halt_exits.sum) has not moved since the previous\n"
"scan, and that was halted throughout (vcpu.N.blocking.cur at both scans,\n"
"or vcpu.N.halt_wait_ns.sum grown by at least 90% of the time between\n"
"them), was idle for the whole interval. Each state change is logged on\n"
"stdout, set as the domain's live metadata (namespace urn:sysidle:1,\n"
"element <state name=.. state=.. num=.. since=.. since_unix_ms=..\n"
"full_idle_periods=.. vcpus=../>) and passed to the hooks. A domain\n"
"without those statistics gets one warning and is not watched.\n"
"\n"
"  --libvirt URI      the libvirt connection (default " DEFAULT_URI ")\n"
"  --interval MS      scan every MS milliseconds, 1 to 3600000 (default 100)\n"
"  --hooks DIR        run DIR/vm, then DIR/vm.d/*, as the VMM does:\n"
"                     NAME started begin - (a domain is first watched),\n"
"                     NAME idle begin - / NAME idle end MS (FULL_NOTED\n"
"                     reached / left after MS ms), NAME stopped end - (the\n"
"                     domain went away, or " PROG " stops); the domain\n"
"                     XML on stdin (default " DEFAULT_HOOKS_DIR ";\n"
"                     absent: no hooks)\n"
"  --hook-timeout SECONDS  kill a hook still running after SECONDS\n"
"                     (default 10)\n"
"  --once             scan twice, one interval apart, set each domain's\n"
"                     metadata (left in place), print each domain's state\n"
"                     and exit; runs no hooks\n"
"  --stats-file FILE  replay recorded statistics from FILE instead of\n"
"                     asking libvirt (for tests and offline replay): lines\n"
"                     'T_MS DOMAIN KEY=VALUE...', one scan per T_MS, one\n"
"                     scan per interval; the domains, the metadata and the\n"
"                     hooks still go through --libvirt. Stops at the end.\n"
"                     At most 65536 bytes a line, 1000000 lines; read\n"
"                     whole at start (a FIFO: until its writer closes)\n"
"  --verbose          also log what libvirt holds after each metadata\n"
"                     change, and the replay's unknown domains\n"
"  --help             show this help and exit\n"
"\n"
"SIGTERM or SIGINT (or the end of --stats-file): finish the scan, run the\n"
"stopped hooks (after 'idle end' for a domain fully idle), remove the\n"
"metadata, exit 0.\n"
"Exit status: 0 done, 1 cannot start (libvirt with --once, the stats\n"
"file), 2 bad options.\n";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": ", stderr);
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
		{ "once", no_argument, NULL, '1' },
		{ "stats-file", required_argument, NULL, 'f' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	opt = (struct options){ .uri = DEFAULT_URI, .interval_ms = 100,
				.hooks_dir = DEFAULT_HOOKS_DIR,
				.hook_timeout_ns = 10000000000ull };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hv", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			if (!*optarg)
				return usage_error("--libvirt: expected a URI");
			opt.uri = optarg;
			break;
		case 'i': {
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || *end || end == optarg || *optarg == '-' ||
			    v < 1 || v > INTERVAL_MAX_MS)
				return usage_error("--interval '%s': expected "
						   "milliseconds, 1 to %u",
						   optarg, INTERVAL_MAX_MS);
			opt.interval_ms = v;
			break;
		}
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
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	return 0;
}

