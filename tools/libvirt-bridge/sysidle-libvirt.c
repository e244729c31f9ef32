/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sysidle-libvirt: the full-idle state machine for the QEMU/KVM domains of
 * a libvirt host, from KVM's per-vCPU statistics. Each scan (every
 * --interval) reads every active domain's vcpu.N.halt_exits.sum,
 * vcpu.N.blocking.cur and vcpu.N.halt_wait_ns.sum, feeds one machine per
 * domain (domain_idle.c) and
 * publishes each change: one line on stdout, the domain's live metadata
 * (publish.c) and the hooks (hook_queue.c, on common's hook runner). Here:
 * the main loop, the connection; options.c: the options; domains.c: the
 * domains coming and going.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "bridge.h"
#include "events.h"
#include "hook_queue.h"
#include "host_wakes_bridge.h"
#include "lease.h"
#include "metrics.h"
#include "monotonic.h"
#include "publish.h"
#include "stats_source.h"
#include "stop.h"

/* Is @f's descriptor the systemd journal's stream (JOURNAL_STREAM is
 * "DEV:INO" of it)? */
static bool is_journal(FILE *f)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	return js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	       fstat(fileno(f), &st) == 0 && st.st_dev == dev &&
	       st.st_ino == ino;
}

/* Whether stdout and stderr are the journal: set once by main() before
 * any other thread starts, read only after. */
static bool journal_out, journal_err;

/* One log line into @buf (cut to @size, newline kept): "TIME LEVEL
 * message", or "<PRIO>message" for the journal (which stamps it itself).
 * Returns its length. */
static size_t log_format(char *buf, size_t size, bool journal, int prio,
			 const char *level, const char *fmt, va_list ap)
{
	struct timespec ts;
	struct tm tm;
	char when[32];
	int n;

	if (journal) {
		n = snprintf(buf, size, "<%d>", prio);
	} else {
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		n = snprintf(buf, size, "%s.%03ldZ %s ", when,
			     ts.tv_nsec / 1000000, level);
	}
	if (n >= 0 && (size_t)n < size)
		n += vsnprintf(buf + n, size - (size_t)n, fmt, ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > size - 2)
		n = (int)size - 2;
	buf[n++] = '\n';
	buf[n] = '\0';
	return (size_t)n;
}

/* One log line on @f. Any thread. */
static void log_line(FILE *f, int prio, const char *level, const char *fmt,
		     va_list ap)
{
	char line[8192];

	log_format(line, sizeof(line), f == stderr ? journal_err : journal_out,
		   prio, level, fmt, ap);
	fputs(line, f);
	fflush(f);
}

void warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(stderr, 4, "WARNING", fmt, ap);
	va_end(ap);
}

/* A warning that never blocks: one write(2) to stderr, without stdio's
 * lock, and only when stderr takes it now (else it is lost). */
void warn_nowait(const char *fmt, ...)
{
	struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };
	char line[1024];
	size_t n;
	va_list ap;

	va_start(ap, fmt);
	n = log_format(line, sizeof(line), journal_err, 4, "WARNING", fmt, ap);
	va_end(ap);
	if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) &&
	    write(STDERR_FILENO, line, n) < 0)
		return; /* nothing more to do about it */
}

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_line(stdout, 6, "INFO", fmt, ap);
	va_end(ap);
}

uint64_t unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

const char *lv_error(void)
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

/* ---- the main loop ---- */

/* A stop signal came (said once, by this thread). */
static bool stopping(void)
{
	static bool said;
	int sig = stop_requested();

	if (sig && !said) {
		say("%s: signal %d: stopping", PROG, sig);
		said = true;
	}
	return sig != 0;
}

/* Wait until @deadline_ns (monotonic) or a stop signal; false: stop. */
static bool wait_until(uint64_t deadline_ns)
{
	stop_phase("the wait for the next scan");
	for (;;) {
		struct pollfd p = { .fd = stop_fd(), .events = POLLIN };
		uint64_t now = monotonic_ns();

		if (stopping())
			return false;
		if (now >= deadline_ns)
			return true;
		poll(&p, 1, (int)((deadline_ns - now + 999999) / 1000000));
	}
}

/* Drop the connection and every domain reference from it. */
static void disconnect(struct bridge *b, virConnectPtr *conn)
{
	for (size_t i = 0; i < b->ndoms; i++) {
		if (b->doms[i]->dom)
			virDomainFree(b->doms[i]->dom);
		b->doms[i]->dom = NULL;
	}
	stats_source_list_drop();
	stop_phase("closing the connection to libvirt");
	if (*conn) {
		events_unwatch(*conn);
		virConnectClose(*conn);
	}
	*conn = NULL;
}

/* Connect, retrying with back-off (1 s, doubling, at most 60 s) until it
 * works or a stop signal comes. */
static virConnectPtr connect_retry(const struct bridge *b)
{
	uint64_t backoff = BACKOFF_MIN_MS;
	virConnectPtr conn;

	while (!stopping()) {
		stop_phase("connecting to libvirt");
		conn = virConnectOpen(b->opt.uri);
		if (conn) {
			if (!b->opt.once && !b->opt.stats_file)
				events_watch(conn);
			return conn;
		}
		if (b->opt.once)
			return NULL;
		warn("cannot connect to libvirt '%s': %s; retrying in %" PRIu64
		     " s", b->opt.uri, lv_error(), backoff / 1000);
		wait_until(monotonic_ns() + backoff * 1000000u);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS :
			  backoff * 2;
	}
	return NULL;
}

/* One scan from the source; false when it failed (warned). */
static bool get_scan(struct bridge *b, virConnectPtr conn,
		     struct stats_file *sf,
		     struct stats_scan *scan)
{
	int rc;

	stop_phase("a scan (libvirt's domain list or statistics)");
	if (sf)
		rc = stats_file_next(sf, conn, scan);
	else if (b->opt.source == STATS_LIBVIRT || b->opt.remote)
		rc = stats_source_libvirt(conn, true, scan);
	else /* kvm, proc: libvirt only for the list, when it changed */
		rc = stats_source_list(conn, events_relist_due(monotonic_ns()),
				       scan);
	const char *u;

	if (rc < 0)
		return false;
	for (size_t i = 0; sf && (u = stats_file_unmatched(sf, i)); i++)
		warn_unknown(b, u);
	return true;
}

/* The interval after a scan: doubled, up to --idle-interval, while every
 * watched domain is fully idle; --interval as soon as one is not. */
static uint64_t next_interval(const struct bridge *b, uint64_t cur_ns)
{
	uint64_t max = b->opt.idle_interval_ms * 1000000u;
	size_t watched = 0;

	for (size_t i = 0; i < b->ndoms; i++) {
		if (!b->doms[i]->watched)
			continue;
		if (b->doms[i]->published != SYSIDLE_FULL_NOTED)
			return b->opt.interval_ms * 1000000u;
		watched++;
	}
	if (!watched || b->opt.once)
		return b->opt.interval_ms * 1000000u;
	return cur_ns * 2 > max ? max : cur_ns * 2;
}

static int run(struct bridge *b, struct stats_file *sf)
{
	virConnectPtr conn = NULL;
	uint64_t interval_ns = b->opt.interval_ms * 1000000u, deadline, t0;
	unsigned int scans = 0;
	bool failing = false;
	int status = 0;

	conn = connect_retry(b);
	if (!conn) {
		if (b->opt.once && !stopping()) {
			fprintf(stderr, PROG ": cannot connect to libvirt '%s': "
				"%s\n", b->opt.uri, lv_error());
			return 1;
		}
		return 0;
	}
	deadline = monotonic_ns();
	while (!stopping()) {
		struct stats_scan scan;

		if (!conn) {
			conn = connect_retry(b);
			if (!conn)
				break;
			say("%s: connected to libvirt '%s' again", PROG,
			    b->opt.uri);
			deadline = monotonic_ns();
		}
		t0 = monotonic_ns();
		if (get_scan(b, conn, sf, &scan)) {
			failing = false;
			stop_phase("publishing a scan (metadata, hooks)");
			process_scan(b, &scan);
			stats_scan_free(&scan);
			scans++;
			interval_ns = next_interval(b, interval_ns);
			metrics_scan(monotonic_ns() - t0,
				     interval_ns / 1000000u);
			host_wakes_scan(b, monotonic_ns());
			metrics_write(b, false);
			host_wakes_write(b, false);
		} else {
			char why[512];

			/* before virConnectIsAlive resets it */
			snprintf(why, sizeof(why), "%s", lv_error());
			if (virConnectIsAlive(conn) != 1) {
				warn("lost the connection to libvirt '%s': %s; "
				     "reconnecting", b->opt.uri, why);
				disconnect(b, &conn);
				continue;
			}
			if (!failing)
				warn("scan failed: %s (until a scan works "
				     "again, not repeated)", why);
			failing = true;
			metrics_error();
			interval_ns = b->opt.interval_ms * 1000000u;
		}
		if (b->opt.once && scans >= 2)
			break;
		if (sf && stats_file_done(sf)) {
			say("%s: end of the --stats-file replay", PROG);
			break;
		}
		deadline += interval_ns;
		if (deadline < monotonic_ns())
			/* overran: no burst */
			deadline = monotonic_ns() + interval_ns;
		wait_until(deadline);
	}
	if (b->opt.once) {
		if (scans)
			print_once(b);
		else
			status = 1;
	}
	stop_phase("removing the domains' metadata");
	for (size_t i = 0; i < b->ndoms; i++) {
		struct tracked *t = b->doms[i];
		bool watched = t->watched;

		unwatch(b, t, PROG " stopping", false);
		if (watched && !b->opt.once && t->dom) {
			if (publish_remove(t->dom) < 0)
				warn("%s: cannot remove its metadata: %s",
				     t->name, lv_error());
			else
				say("%s: metadata removed (%s stopping)",
				    t->name, PROG);
		}
		tracked_free(t);
	}
	b->ndoms = 0;
	metrics_write(b, true);
	host_wakes_write(b, true);
	if (conn)
		events_unwatch(conn);
	events_stop();
	disconnect(b, &conn);
	return status;
}

int main(int argc, char **argv)
{
	static struct bridge bridge; /* its domains outlive nothing but main */
	struct bridge *b = &bridge;
	struct stats_file *sf = NULL;
	char err[256];
	int status;

	journal_out = is_journal(stdout);
	journal_err = is_journal(stderr);
	if (parse_options(argc, argv, &b->opt) < 0)
		return EXIT_USAGE;
	lease_init(&b->opt);
	/* Stop signals: read by a thread of their own (stop.c), blocked in
	 * this thread and every thread started after (the hooks worker: its
	 * hooks get a clean mask). */
	signal(SIGPIPE, SIG_IGN);
	if (stop_start(b->opt.stop_timeout_ns, b->opt.metrics_file,
		       b->opt.wakes_file) < 0) {
		fprintf(stderr, PROG ": cannot start the stop thread: %s\n",
			strerror(errno));
		return 1;
	}
	if (b->opt.stats_file) {
		bool stopped;

		stop_phase("reading --stats-file");
		sf = stats_file_open(b->opt.stats_file, stop_fd(), &stopped, err,
				     sizeof(err));
		if (!sf && stopped) {
			say("%s: signal %d: stopping (--stats-file '%s': %s)",
			    PROG, stop_requested(), b->opt.stats_file, err);
			stop_finish();
			return 0;
		}
		if (!sf) {
			fprintf(stderr, PROG ": --stats-file '%s': %s\n",
				b->opt.stats_file, err);
			return 1;
		}
	}
	if (virInitialize() < 0) {
		fprintf(stderr, PROG ": cannot initialise libvirt\n");
		return 1;
	}
	virSetErrorFunc(NULL, quiet_libvirt);
	/* Before the first connection: its lifecycle events then tell when
	 * the domain list changed (the kvm and proc sources' scans ask
	 * libvirt nothing otherwise). */
	if (!b->opt.once && !b->opt.stats_file &&
	    b->opt.source != STATS_LIBVIRT &&
	    !b->opt.remote)
		events_start();
	if (!b->opt.once &&
	    hook_queue_start(&(struct hook_queue_config){ .dir = b->opt.hooks_dir,
			.timeout_ns = b->opt.hook_timeout_ns,
			.thread_name = "sysidle-hooks", .warn = warn }) < 0) {
		fprintf(stderr, PROG ": cannot start the hooks thread: %s\n",
			strerror(errno));
		return 1;
	}
	status = run(b, sf);
	stop_phase("the last hooks");
	hook_queue_stop();
	stop_finish();
	report_dropped_hooks();
	stats_file_close(sf);
	domains_free(b);
	return status;
}
