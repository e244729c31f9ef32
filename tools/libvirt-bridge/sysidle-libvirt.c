/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-libvirt: the full-idle state machine for the QEMU/KVM domains of
 * a libvirt host, from KVM's per-vCPU statistics. Each scan (every
 * --interval) reads every active domain's vcpu.N.halt_exits.sum,
 * vcpu.N.blocking.cur and vcpu.N.halt_wait_ns.sum, feeds one machine per
 * domain (domain_idle.c) and
 * publishes each change: one line on stdout, the domain's live metadata
 * (publish.c) and the hooks (the VMM's hooks.c). Options, main loop,
 * the domains coming and going, the connection.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "domain_idle.h"
#include "publish.h"
#include "stats_source.h"

#define PROG "sysidle-libvirt"
#define DEFAULT_URI "qemu:///system"
#define DEFAULT_HOOKS_DIR "/etc/sysidle/hooks"
#define INTERVAL_MAX_MS 3600000u
#define BACKOFF_MIN_MS 1000u
#define BACKOFF_MAX_MS 60000u
#define EXIT_USAGE 2

static const char usage_text[] =
"usage: " PROG " [OPTION]...\n"
"Run the full-system-idle state machine for each running QEMU/KVM domain\n"
"of a libvirt host, from KVM's per-vCPU statistics: a vCPU whose\n"
"halt-exit count (vcpu.N.halt_exits.sum) has not moved since the previous\n"
"scan, and that was halted throughout (vcpu.N.blocking.cur at both scans,\n"
"or vcpu.N.halt_wait_ns.sum grown by at least 90% of the time between\n"
"them), was idle for the whole interval. Each state change is logged on\n"
"stdout, set as the domain's live metadata (namespace urn:sysidle:1,\n"
"element <state name=.. num=.. since_unix_ms=.. full_idle_periods=..\n"
"vcpus=../>) and passed to the hooks. A domain without those statistics\n"
"gets one warning and is not watched.\n"
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
"  --verbose          also log what libvirt holds after each metadata\n"
"                     change, and the replay's unknown domains\n"
"  --help             show this help and exit\n"
"\n"
"SIGTERM or SIGINT (or the end of --stats-file): finish the scan, run the\n"
"stopped hooks (after 'idle end' for a domain fully idle), remove the\n"
"metadata, exit 0.\n"
"Exit status: 0 done, 1 cannot start (libvirt with --once, the stats\n"
"file), 2 bad options.\n";

struct options {
	const char *uri;
	uint64_t interval_ms;
	const char *hooks_dir;
	uint64_t hook_timeout_ns;
	bool once;
	const char *stats_file;
	bool verbose;
};

/* One libvirt domain the bridge has seen. */
struct tracked {
	char *name;
	char uuid[VIR_UUID_STRING_BUFLEN];
	virDomainPtr dom;        /* from the latest scan */
	struct domain_idle *di;
	bool seen;               /* in the current scan */
	bool watched;            /* has statistics: started hook, metadata */
	bool skipped;            /* no statistics in the latest scan */
	bool warned;             /* the no-statistics warning was given */
	bool meta_failed;        /* the last metadata change failed */
	enum sysidle_state published;
	uint64_t noted_unix_ms;  /* when FULL_NOTED was reached */
	unsigned int ncpus;
	char reason[160];        /* the latest scan's */
};

static struct options opt;
static struct tracked **doms;
static size_t ndoms;
static char **unknown;        /* replay records naming no domain (warned) */
static size_t nunknown;

static void warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs(PROG ": warning: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	fflush(stdout);
}

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

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static const char *lv_error(void)
{
	const char *m = virGetLastErrorMessage();

	return m ? m : "unknown libvirt error";
}

/* libvirt's errors are reported by us, with context, not on its own. */
static void quiet_libvirt(void *arg, virErrorPtr err)
{
	(void)arg;
	(void)err;
}

static int parse_options(int argc, char **argv)
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

/* ---- the domains ---- */

static struct hook_domain hook_dom(const struct tracked *t)
{
	return (struct hook_domain){ t->name, t->uuid, t->ncpus };
}

static struct tracked *tracked_get(const struct stats_domain *sd)
{
	struct tracked *t, **d;

	for (size_t i = 0; i < ndoms; i++)
		if (!strcmp(doms[i]->uuid, sd->uuid))
			return doms[i];
	d = realloc(doms, (ndoms + 1) * sizeof(*d));
	if (!d)
		return NULL;
	doms = d;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->di = domain_idle_new();
	t->name = strdup(sd->name);
	if (!t->di || !t->name) {
		domain_idle_free(t->di);
		free(t->name);
		free(t);
		return NULL;
	}
	memcpy(t->uuid, sd->uuid, sizeof(t->uuid));
	doms[ndoms++] = t;
	return t;
}

static void tracked_free(struct tracked *t)
{
	if (t->dom)
		virDomainFree(t->dom);
	domain_idle_free(t->di);
	free(t->name);
	free(t);
}

/* A state published: the log line, the metadata (and, --verbose, what
 * libvirt then holds). */
static void publish(struct tracked *t, enum sysidle_state st, const char *why)
{
	struct publish_state ps = {
		.state = st, .since_unix_ms = unix_ms(),
		.full_idle_periods = domain_idle_full_periods(t->di),
		.vcpus = t->ncpus,
	};
	char *back;

	t->published = st;
	if (st == SYSIDLE_FULL_NOTED)
		t->noted_unix_ms = ps.since_unix_ms;
	if (!opt.once) /* --once: print_once says it all at the end */
		say("%s: %s (%s)", t->name, sysidle_state_name(st), why);
	if (!t->dom)
		return;
	if (publish_metadata(t->dom, &ps) < 0) {
		if (!t->meta_failed)
			warn("%s: cannot set its metadata: %s (until it "
			     "works again, not repeated)", t->name, lv_error());
		t->meta_failed = true;
		return;
	}
	t->meta_failed = false;
	if (opt.verbose && !opt.once) {
		back = publish_read_back(t->dom);
		say("%s: metadata %s read back: %s", t->name, PUBLISH_NS,
		    back ? back : lv_error());
		free(back);
	}
}

/* @t is no longer watched (it went away, or the bridge stops): a fully
 * idle domain's idle period ends, then "stopped end". */
static void unwatch(struct tracked *t, const char *why)
{
	struct hook_domain hd = hook_dom(t);
	uint64_t now = unix_ms();

	if (!t->watched || opt.once)
		return;
	if (t->published == SYSIDLE_FULL_NOTED)
		publish_hooks_change(&hd, SYSIDLE_FULL_NOTED, SYSIDLE_NOT,
				     now - t->noted_unix_ms, now);
	hooks_post(&hd, "stopped", "end", NULL, SYSIDLE_NOT, now);
	say("%s: stopped (%s)", t->name, why);
	t->watched = false;
}

/* One scan's result for one domain. */
static void domain_scan(struct tracked *t, const struct stats_domain *sd,
			uint64_t t_ns)
{
	struct vcpu_sample *buf = calloc(sd->nvcpus + 1, sizeof(*buf));
	struct domain_idle_report r;
	struct domain_sample s;
	struct hook_domain hd;
	enum sysidle_state from = t->published;
	char why[200];
	int rc;

	if (!buf) {
		warn("%s: out of memory", t->name);
		return;
	}
	stats_domain_sample(sd, t_ns, buf, &s);
	rc = domain_idle_scan(t->di, &s, &r);
	free(buf);
	if (rc == DOMAIN_IDLE_ERROR) {
		warn("%s: %s", t->name, strerror(errno));
		return;
	}
	snprintf(t->reason, sizeof(t->reason), "%s", r.reason);
	t->skipped = rc == DOMAIN_IDLE_NO_STATS;
	if (t->skipped) {
		if (!t->warned)
			warn("%s: no vcpu.N.halt_exits.sum with "
			     "vcpu.N.blocking.cur or vcpu.N.halt_wait_ns.sum "
			     "statistics (libvirt or the kernel lacks KVM's "
			     "binary statistics): not watched, never reported "
			     "idle", t->name);
		t->warned = true;
		if (t->watched && t->published != SYSIDLE_NOT) {
			hd = hook_dom(t);
			publish_hooks_change(&hd, from, SYSIDLE_NOT,
					     r.full_idle_ms, unix_ms());
			publish(t, SYSIDLE_NOT, r.reason);
		}
		return;
	}
	t->ncpus = r.ncpus;
	hd = hook_dom(t);
	if (!t->watched) {
		t->watched = true;
		if (!opt.once)
			hooks_post(&hd, "started", "begin", NULL, SYSIDLE_NOT,
				   unix_ms());
		snprintf(why, sizeof(why), "watching %u vCPU%s; %s", r.ncpus,
			 r.ncpus == 1 ? "" : "s", r.reason);
		from = SYSIDLE_NOT;
	} else if (r.to != from || r.recreated) {
		snprintf(why, sizeof(why), "%s", r.reason);
	} else {
		return;
	}
	if (!opt.once)
		publish_hooks_change(&hd, from, r.to, r.full_idle_ms, unix_ms());
	publish(t, r.to, why);
}

/* After hooks_stop(): say how many hook events were never run, so whoever
 * finds fewer transitions in a hook's log than in the bridge's knows why. */
static void report_dropped_hooks(void)
{
	uint64_t run, failed, dropped;

	hooks_counts(&run, &failed, &dropped);
	if (dropped)
		warn("%" PRIu64 " hook event%s dropped: the hooks ran slower "
		     "than the events came, and a domain's pending idle "
		     "events were coalesced (%" PRIu64 " hooks run)",
		     dropped, dropped == 1 ? "" : "s", run);
}

/* A replay record naming no libvirt domain: one warning per name. */
static void warn_unknown(const char *name)
{
	char **u;

	for (size_t i = 0; i < nunknown; i++)
		if (!strcmp(unknown[i], name))
			return;
	u = realloc(unknown, (nunknown + 1) * sizeof(*u));
	if (!u || !(u[nunknown] = strdup(name))) {
		unknown = u ? u : unknown;
		return;
	}
	unknown = u;
	nunknown++;
	warn("--stats-file: no active libvirt domain '%s': its records are "
	     "ignored", name);
}

static void process_scan(struct stats_scan *scan)
{
	size_t i, j;

	for (i = 0; i < ndoms; i++)
		doms[i]->seen = false;
	for (i = 0; i < scan->n; i++) {
		struct stats_domain *sd = &scan->doms[i];
		struct tracked *t;

		if (!stats_state_active(sd->state))
			continue; /* shut off: gone, below */
		t = tracked_get(sd);
		if (!t) {
			warn("%s: out of memory", sd->name);
			continue;
		}
		t->seen = true;
		if (strcmp(t->name, sd->name)) {
			char *n = strdup(sd->name);

			if (n) {
				free(t->name);
				t->name = n;
			}
		}
		if (t->dom)
			virDomainFree(t->dom);
		t->dom = sd->dom; /* the scan's reference, now ours */
		sd->dom = NULL;
		domain_scan(t, sd, scan->t_ns);
	}
	for (i = j = 0; i < ndoms; i++) {
		if (doms[i]->seen) {
			doms[j++] = doms[i];
			continue;
		}
		unwatch(doms[i], "the domain is gone");
		tracked_free(doms[i]);
	}
	ndoms = j;
}

/* ---- the main loop ---- */

static int sigfd = -1;
static bool stopping;

/* Wait until @deadline_ns (monotonic) or a stop signal; false: stop. */
static bool wait_until(uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { .fd = sigfd, .events = POLLIN };
		uint64_t now = mono_ns();
		struct signalfd_siginfo si;

		if (stopping)
			return false;
		if (now >= deadline_ns)
			return true;
		if (poll(&p, 1, (int)((deadline_ns - now + 999999) / 1000000)) > 0 &&
		    read(sigfd, &si, sizeof(si)) == sizeof(si)) {
			say("%s: signal %u: stopping", PROG, si.ssi_signo);
			stopping = true;
		}
	}
}

/* Drop the connection and every domain reference from it. */
static void disconnect(virConnectPtr *conn)
{
	for (size_t i = 0; i < ndoms; i++) {
		if (doms[i]->dom)
			virDomainFree(doms[i]->dom);
		doms[i]->dom = NULL;
	}
	if (*conn)
		virConnectClose(*conn);
	*conn = NULL;
}

/* Connect, retrying with back-off (1 s, doubling, at most 60 s) until it
 * works or a stop signal comes. */
static virConnectPtr connect_retry(void)
{
	uint64_t backoff = BACKOFF_MIN_MS;
	virConnectPtr conn;

	while (!stopping) {
		conn = virConnectOpen(opt.uri);
		if (conn)
			return conn;
		if (opt.once)
			return NULL;
		warn("cannot connect to libvirt '%s': %s; retrying in %" PRIu64
		     " s", opt.uri, lv_error(), backoff / 1000);
		wait_until(mono_ns() + backoff * 1000000u);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
			  backoff * 2;
	}
	return NULL;
}

/* One scan from the source; false when it failed (warned). */
static bool get_scan(virConnectPtr conn, struct stats_file *sf,
		     struct stats_scan *scan)
{
	int rc = sf ? stats_file_next(sf, conn, scan) :
		 stats_source_libvirt(conn, scan);
	const char *u;

	if (rc < 0)
		return false;
	for (size_t i = 0; sf && (u = stats_file_unmatched(sf, i)); i++)
		warn_unknown(u);
	return true;
}

static void print_once(void)
{
	for (size_t i = 0; i < ndoms; i++) {
		struct tracked *t = doms[i];

		if (t->skipped)
			printf("%s: SKIPPED (%s)\n", t->name, t->reason);
		else
			printf("%s: %s (%s)\n", t->name,
			       sysidle_state_name(t->published), t->reason);
		if (opt.verbose && t->watched && t->dom) {
			char *back = publish_read_back(t->dom);

			printf("%s: metadata %s read back: %s\n", t->name,
			       PUBLISH_NS, back ? back : lv_error());
			free(back);
		}
	}
	if (!ndoms)
		printf("no active domains\n");
	fflush(stdout);
}

static int run(struct stats_file *sf)
{
	virConnectPtr conn = NULL;
	uint64_t interval_ns = opt.interval_ms * 1000000u, deadline;
	unsigned int scans = 0;
	bool failing = false;
	int status = 0;

	conn = connect_retry();
	if (!conn) {
		if (opt.once && !stopping) {
			fprintf(stderr, PROG ": cannot connect to libvirt '%s': "
				"%s\n", opt.uri, lv_error());
			return 1;
		}
		return 0;
	}
	deadline = mono_ns();
	while (!stopping) {
		struct stats_scan scan;

		if (!conn) {
			conn = connect_retry();
			if (!conn)
				break;
			say("%s: connected to libvirt '%s' again", PROG, opt.uri);
			deadline = mono_ns();
		}
		if (get_scan(conn, sf, &scan)) {
			failing = false;
			process_scan(&scan);
			stats_scan_free(&scan);
			scans++;
		} else {
			char why[512];

			/* before virConnectIsAlive resets it */
			snprintf(why, sizeof(why), "%s", lv_error());
			if (virConnectIsAlive(conn) != 1) {
				warn("lost the connection to libvirt '%s': %s; "
				     "reconnecting", opt.uri, why);
				disconnect(&conn);
				continue;
			}
			if (!failing)
				warn("scan failed: %s (until a scan works "
				     "again, not repeated)", why);
			failing = true;
		}
		if (opt.once && scans >= 2)
			break;
		if (sf && stats_file_done(sf)) {
			say("%s: end of the --stats-file replay", PROG);
			break;
		}
		deadline += interval_ns;
		if (deadline < mono_ns())
			deadline = mono_ns() + interval_ns; /* overran: no burst */
		wait_until(deadline);
	}
	if (opt.once) {
		if (scans)
			print_once();
		else
			status = 1;
	}
	for (size_t i = 0; i < ndoms; i++) {
		struct tracked *t = doms[i];
		bool watched = t->watched;

		unwatch(t, PROG " stopping");
		if (watched && !opt.once && t->dom) {
			if (publish_remove(t->dom) < 0)
				warn("%s: cannot remove its metadata: %s",
				     t->name, lv_error());
			else
				say("%s: metadata removed (%s stopping)",
				    t->name, PROG);
		}
		tracked_free(t);
	}
	ndoms = 0;
	if (conn)
		virConnectClose(conn);
	return status;
}

int main(int argc, char **argv)
{
	struct stats_file *sf = NULL;
	sigset_t set;
	char err[256];
	int status;

	if (parse_options(argc, argv) < 0)
		return EXIT_USAGE;
	/* Stop signals through a signalfd, for this thread and every thread
	 * started after (the hooks worker: its hooks get a clean mask). */
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	if (sigfd < 0) {
		fprintf(stderr, PROG ": signalfd: %s\n", strerror(errno));
		return 1;
	}
	if (opt.stats_file) {
		sf = stats_file_open(opt.stats_file, err, sizeof(err));
		if (!sf) {
			fprintf(stderr, PROG ": --stats-file '%s': %s\n",
				opt.stats_file, err);
			return 1;
		}
	}
	if (virInitialize() < 0) {
		fprintf(stderr, PROG ": cannot initialise libvirt\n");
		return 1;
	}
	virSetErrorFunc(NULL, quiet_libvirt);
	if (!opt.once &&
	    hooks_start(&(struct hooks_config){ .dir = opt.hooks_dir,
			.timeout_ns = opt.hook_timeout_ns,
			.thread_name = "sysidle-hooks", .warn = warn }) < 0) {
		fprintf(stderr, PROG ": cannot start the hooks thread: %s\n",
			strerror(errno));
		return 1;
	}
	status = run(sf);
	hooks_stop();
	report_dropped_hooks();
	stats_file_close(sf);
	for (size_t i = 0; i < nunknown; i++)
		free(unknown[i]);
	free(unknown);
	free(doms);
	close(sigfd);
	return status;
}
