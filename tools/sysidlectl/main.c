/* SPDX-License-Identifier: GPL-2.0-only */
/* sysidlectl: the options and the command line (see sysidlectl.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "sysidlectl.h"
#include "version.h"

static struct options opt = { .dir = DEFAULT_DIR, .timeout_ms = 5000 };

const struct options *options(void)
{
	return &opt;
}

static const char usage_text[] =
"Usage: sysidlectl [OPTION]... COMMAND [NAME]\n"
"Query and steer the running VMs of sysidle-vmm through their control\n"
"sockets.\n";

static const char help_text[] =
"\n"
"Commands:\n"
"  list           every VM with a socket in DIR, one line each: its name,\n"
"                 state, time in state, vCPUs halted/total, PID\n"
"  status NAME    the VM's state, its vCPUs and its counters\n"
"  watch [NAME]   one line per idle state change, until the VM stops;\n"
"                 no NAME: every VM of DIR, each line after its name,\n"
"                 VMs started later too, until SIGINT or SIGTERM\n"
"  kick NAME      end the VM's full idle (its tick restarts)\n"
"  pause NAME     park every vCPU of the VM (it resumes by itself when a\n"
"                 timer, serial input or a kick wakes one); returns once\n"
"                 every vCPU is parked\n"
"  resume NAME    let a paused VM run again\n"
"  why NAME       what has kept the VM out of full idle lately: its state\n"
"                 and for how long, the vCPUs running now, the sources\n"
"                 that woke its vCPUs in the last minute, busiest first,\n"
"                 each with its rate, what it means and what to do, the\n"
"                 ends of full idle by cause; exit 3 when the VM runs\n"
"                 without --sysidle (its wake-ups still shown). With\n"
"                 --wakes-file, NAME is a libvirt domain (its name or\n"
"                 uuid) and why says what the host sees of it: KVM's\n"
"                 counters and its QEMU threads' wake-ups\n"
"  report         every VM of DIR, and with --bridge-metrics the libvirt\n"
"                 domains of the bridge, with its share of time fully\n"
"                 idle and a recommendation, by these rules: fully idle\n"
"                 97 % or more of the last 24 h (of its life when\n"
"                 younger: WINDOW says) -> \"suspend or pack\"; else each\n"
"                 vCPU halted 80 % or more of a 1 s sample (report\n"
"                 takes 1 s) and half the last minute's wake-ups or\n"
"                 more from a periodic tick -> \"a tick policy\"; else\n"
"                 \"nothing\" (busy); \"unknown\" when the VMM reports no\n"
"                 duty cycle and no vCPU runs\n"
"  timeline NAME --svg FILE\n"
"                 draw the VM's idle state over the last hour into FILE\n"
"                 (SVG): a band per state, full idle shaded, each end of\n"
"                 full idle marked in the colour of its cause, a legend\n"
"                 and a wall-clock axis (local time)\n"
"  top            every VM of DIR in a table refreshed in place: state,\n"
"                 time in state, vCPUs halted, host thread wake-ups/s\n"
"                 (vCPU halt exits and housekeeping wake-ups), host CPU %,\n"
"                 PID, and what the consolidator holds (suspended: paused;\n"
"                 packed: its vCPU threads on fewer CPUs than the VMM);\n"
"                 q quits. Not on a terminal, or with --json: -n\n"
"                 snapshots (default 1), each one --interval after the\n"
"                 previous\n"
"\n"
"Options:\n"
"  --dir DIR          the sockets' directory (default " DEFAULT_DIR ")\n"
"  --json             JSON output: list: one object per VM per line;\n"
"                     status: the status object; watch: the socket's lines;\n"
"                     kick, pause, resume: the reply\n"
"  --timeout SECONDS  wait at most SECONDS for a reply (default 5; watch\n"
"                     waits for its events as long as the VM runs)\n"
"  --interval SECONDS top: refresh every SECONDS (default 1, 0.1..3600)\n"
"  --svg FILE         timeline: the SVG file to write\n"
"  --bridge-metrics FILE  report: the libvirt bridge's --metrics-file,\n"
"                     for its domains (their duty cycle is known only\n"
"                     for one fully idle all day)\n"
"  --wakes-file FILE  why, report: the libvirt bridge's --wakes-file\n"
"                     (report: its domains' duty cycles)\n"
"  -n N               top: stop after N refreshes (default: on a terminal\n"
"                     until q, else 1)\n"
"  --version          print the version and exit 0\n"
"  -h, --help         print this help and exit 0\n"
"\n"
"NAME is a VM's name (its socket DIR/NAME.sock, else the socket in DIR of\n"
"the VM that reports that name) or a socket path with a '/'.\n"
"\n"
"Exit status: 0 ok, 1 error from the VM or the connection (no such VM,\n"
"a missing --dir, permission denied, malformed reply, timeout, a file\n"
"that cannot be written or read), 2 bad usage, 3 why: the VM runs\n"
"without --sysidle, 130 (143) watch or top ended by SIGINT (SIGTERM).\n";

/* One "sysidlectl: ..." line on stderr. */
void errmsg(const char *fmt, ...)
{
	va_list ap;

	fputs("sysidlectl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A usage error: its line, the synopsis, exit status 2. */
static int usage_error(const char *fmt, const char *arg)
{
	fputs("sysidlectl: ", stderr);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

/* Flush stdout; an error (a closed pipe, a full disk) is reported. */
int flush_out(void)
{
	if (fflush(stdout) == 0)
		return EXIT_OK;
	errmsg("stdout: %s", strerror(errno));
	return EXIT_ERR;
}

/* Every command looks in DIR, but one given a socket path (@name with a
 * '/'): a DIR that is not there is an error. 0 or -1 (said). */
static int need_dir(const char *name)
{
	struct stat st;

	if (name && strchr(name, '/'))
		return 0;
	if (stat(opt.dir, &st))
		errmsg("--dir %s: %s", opt.dir, strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		errmsg("--dir %s: not a directory", opt.dir);
	else
		return 0;
	return -1;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "svg", required_argument, NULL, 's' },
		{ "bridge-metrics", required_argument, NULL, 'b' },
		{ "wakes-file", required_argument, NULL, 'w' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *svg = NULL, *bridge = NULL, *wakes = NULL;
	double interval = 1.0;
	long iterations = 0;
	const char *cmd;
	char *end;
	double sec;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "hn:", longopts, NULL)) != -1) {
		switch (c) {
		case 'i':
			errno = 0;
			interval = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(interval >= 0.1) ||
			    interval > 3600)
				return usage_error("--interval '%s': expected "
						   "seconds, 0.1 to 3600", optarg);
			break;
		case 'n':
			errno = 0;
			iterations = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || iterations < 1 ||
			    iterations > 1000000)
				return usage_error("-n '%s': expected a count, "
						   "1 to 1000000", optarg);
			break;
		case 's':
		case 'b':
		case 'w':
			if (!*optarg)
				return usage_error("%s: expected a file",
						   c == 's' ? "--svg" : c == 'b' ?
						   "--bridge-metrics" :
						   "--wakes-file");
			*(c == 's' ? &svg : c == 'b' ? &bridge : &wakes) =
				optarg;
			break;
		case 'V':
			sysidle_version_print(stdout, "sysidlectl");
			return flush_out();
		case 'd':
			if (!*optarg)
				return usage_error("%s--dir: expected a "
						   "directory", "");
			opt.dir = optarg;
			break;
		case 'j':
			opt.json = true;
			break;
		case 't':
			errno = 0;
			sec = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(sec > 0) ||
			    sec > 86400)
				return usage_error("--timeout '%s': expected "
						   "seconds, more than 0 and "
						   "at most 86400", optarg);
			opt.timeout_ms = (int64_t)(sec * 1000);
			if (opt.timeout_ms < 1)
				opt.timeout_ms = 1;
			break;
		case 'h':
			fputs(usage_text, stdout);
			fputs(help_text, stdout);
			return flush_out();
		default:
			if (optopt == 'd' || optopt == 't' || optopt == 'i' ||
			    optopt == 'n' || optopt == 's' || optopt == 'b' ||
			    optopt == 'w')
				return usage_error("option '%s' needs an "
						   "argument",
						   argv[optind - 1]);
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%sexpected a command", "");
	cmd = argv[optind++];
	if (!strcmp(cmd, "watch") && optind >= argc)
		return need_dir(NULL) ? EXIT_ERR : cmd_watch_all();
	if (!strcmp(cmd, "top")) {
		if (optind < argc)
			return usage_error("top: unexpected argument '%s'",
					   argv[optind]);
		return need_dir(NULL) ? EXIT_ERR :
			cmd_top(interval, iterations ? iterations :
				(isatty(STDOUT_FILENO) && !opt.json ? 0 : 1));
	}
	if (svg && strcmp(cmd, "timeline"))
		return usage_error("%s: --svg is for timeline", cmd);
	if (bridge && strcmp(cmd, "report"))
		return usage_error("%s: --bridge-metrics is for report", cmd);
	if (wakes && strcmp(cmd, "why") && strcmp(cmd, "report"))
		return usage_error("%s: --wakes-file is for why and report",
				   cmd);
	if (!strcmp(cmd, "report")) {
		if (optind < argc)
			return usage_error("report: unexpected argument '%s'",
					   argv[optind]);
		return need_dir(NULL) ? EXIT_ERR : cmd_report(bridge, wakes);
	}
	if (!strcmp(cmd, "list")) {
		if (optind < argc)
			return usage_error("list: unexpected argument '%s'",
					   argv[optind]);
		return need_dir(NULL) ? EXIT_ERR : cmd_list();
	}
	if (strcmp(cmd, "status") && strcmp(cmd, "watch") &&
	    strcmp(cmd, "kick") && strcmp(cmd, "pause") &&
	    strcmp(cmd, "resume") && strcmp(cmd, "why") &&
	    strcmp(cmd, "timeline"))
		return usage_error("unknown command '%s'", cmd);
	if (optind >= argc)
		return usage_error("%s: expected a VM name or socket path",
				   cmd);
	if (optind + 1 < argc)
		return usage_error("unexpected argument '%s'",
				   argv[optind + 1]);
	if (!*argv[optind])
		return usage_error("%s: empty VM name", cmd);
	if (!strcmp(cmd, "timeline") && !svg)
		return usage_error("%s: expected --svg FILE", cmd);
	if (wakes)
		return cmd_why_libvirt(argv[optind], wakes);
	if (need_dir(argv[optind]))
		return EXIT_ERR;
	if (!strcmp(cmd, "why"))
		return cmd_why(argv[optind]);
	if (!strcmp(cmd, "timeline"))
		return cmd_timeline(argv[optind], svg);
	if (!strcmp(cmd, "status"))
		return cmd_status(argv[optind]);
	if (!strcmp(cmd, "watch"))
		return cmd_watch(argv[optind]);
	return cmd_simple(argv[optind], cmd);
}
