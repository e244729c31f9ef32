/* SPDX-License-Identifier: GPL-2.0-only */
/* The bridge's --metrics-file: see metrics.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"
#include "hook_queue.h"
#include "host_wakes_bridge.h"
#include "metrics.h"
#include "promtext.h"

_Static_assert(METRICS_PERIOD_MS == 10000, "the help below says 10 seconds");

#define UP_HELP "1 while the bridge runs; 0 in the file it leaves at exit."

static struct {
	bool dirty;
	uint64_t failing;        /* failed writes since the last that worked */
	uint64_t write_failures; /* all failed writes of the file */
	uint64_t scans, scan_ns, last_scan_ns, interval_ms, errors;
	uint64_t written_ms;
} m = { .dirty = true };

void metrics_changed(void)
{
	m.dirty = true;
}

void metrics_error(void)
{
	m.errors++;
}

void metrics_scan(uint64_t ns, uint64_t interval_ms)
{
	m.scans++;
	m.scan_ns += ns;
	m.last_scan_ns = ns;
	if (interval_ms != m.interval_ms)
		m.dirty = true;
	m.interval_ms = interval_ms;
}

/* NAME{vm="..",uuid=".."} (the value is the caller's). */
static void dom_sample(FILE *f, const char *name, const struct tracked *t)
{
	fprintf(f, "%s{vm=\"", name);
	prom_label(f, t->name);
	fprintf(f, "\",uuid=\"%s\"} ", t->uuid);
}

static void put_ms(FILE *f, uint64_t ms)
{
	fprintf(f, "%" PRIu64 ".%03" PRIu64 "\n", ms / 1000, ms % 1000);
}

/* Each watched domain's samples of one family; @what picks the value. */
enum dom_value { V_STATE, V_SINCE, V_FULL, V_FULL_SINCE, V_PERIODS,
		 V_IDLE_DONE, V_LEFT, V_LONGEST_BUSY, V_START };

/* @ns nanoseconds as seconds with 9 decimals and a newline, into @f. */
static void put_ns(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u,
		ns % 1000000000u);
}

static void dom_family(const struct bridge *b, FILE *f, const char *name,
		       const char *type,
		       const char *help, enum dom_value what)
{
	prom_family(f, name, type, help);
	for (size_t i = 0; i < b->ndoms; i++) {
		const struct tracked *t = b->doms[i];
		bool full = t->published == SYSIDLE_FULL_NOTED;

		if (!t->watched)
			continue;
		dom_sample(f, name, t);
		switch (what) {
		case V_STATE: fprintf(f, "%d\n", (int)t->published); break;
		case V_SINCE: put_ms(f, t->since_unix_ms); break;
		case V_FULL: fprintf(f, "%d\n", full); break;
		case V_FULL_SINCE: put_ms(f, full ? t->noted_unix_ms : 0); break;
		case V_PERIODS:
			fprintf(f, "%" PRIu64 "\n",
				domain_idle_full_periods(t->di));
			break;
		case V_IDLE_DONE: put_ns(f, t->duty->idle_done_ns); break;
		case V_LEFT: put_ms(f, t->duty->left_unix_ms); break;
		case V_LONGEST_BUSY: put_ns(f, t->duty->longest_busy_ns); break;
		case V_START: put_ms(f, t->duty_unix_ms); break;
		}
	}
}

static void format(const struct bridge *b, FILE *f, bool up)
{
	uint64_t run, failed, dropped;
	size_t watched = 0;

	for (size_t i = 0; i < b->ndoms; i++)
		watched += b->doms[i]->watched;
	hook_queue_counts(&run, &failed, &dropped);
	prom_family(f, "sysidle_libvirt_up", "gauge", UP_HELP);
	fprintf(f, "sysidle_libvirt_up %d\n", up);
	prom_family(f, "sysidle_libvirt_domains_watched", "gauge",
	       "Domains whose idle state the bridge publishes.");
	fprintf(f, "sysidle_libvirt_domains_watched %zu\n", up ? watched : 0);
	prom_family(f, "sysidle_libvirt_scans_total", "counter", "Scans done.");
	fprintf(f, "sysidle_libvirt_scans_total %" PRIu64 "\n", m.scans);
	prom_family(f, "sysidle_libvirt_scan_seconds_total", "counter",
	       "Time spent in scans (reading and processing).");
	fprintf(f, "sysidle_libvirt_scan_seconds_total %" PRIu64 ".%09" PRIu64
		"\n", m.scan_ns / 1000000000u, m.scan_ns % 1000000000u);
	prom_family(f, "sysidle_libvirt_last_scan_seconds", "gauge",
	       "How long the last scan took.");
	fprintf(f, "sysidle_libvirt_last_scan_seconds %" PRIu64 ".%09" PRIu64
		"\n", m.last_scan_ns / 1000000000u,
		m.last_scan_ns % 1000000000u);
	prom_family(f, "sysidle_libvirt_interval_seconds", "gauge",
	       "The scan interval now (--interval, or longer up to "
	       "--idle-interval while every domain is fully idle).");
	fputs("sysidle_libvirt_interval_seconds ", f);
	put_ms(f, m.interval_ms);
	prom_family(f, "sysidle_libvirt_errors_total", "counter",
	       "Failed scans, metadata changes and statistics reads.");
	fprintf(f, "sysidle_libvirt_errors_total %" PRIu64 "\n", m.errors);
	prom_family(f, "sysidle_libvirt_hooks_run_total", "counter", "Hooks run.");
	fprintf(f, "sysidle_libvirt_hooks_run_total %" PRIu64 "\n", run);
	prom_family(f, "sysidle_libvirt_hooks_failed_total", "counter",
	       "Hooks that failed (exit status not 0, killed, not started).");
	fprintf(f, "sysidle_libvirt_hooks_failed_total %" PRIu64 "\n", failed);
	prom_family(f, "sysidle_libvirt_hooks_dropped_total", "counter",
	       "Hook events never run (coalesced, or the queue was full).");
	fprintf(f, "sysidle_libvirt_hooks_dropped_total %" PRIu64 "\n",
		dropped);
	prom_family(f, "sysidle_libvirt_domain_source", "gauge",
	       "Where a watched domain's vCPU state comes from (source: "
	       "kvm, proc, libvirt, file). Always 1.");
	for (size_t i = 0; up && i < b->ndoms; i++) {
		const struct tracked *t = b->doms[i];

		if (!t->watched)
			continue;
		fprintf(f, "sysidle_libvirt_domain_source{vm=\"");
		prom_label(f, t->name);
		fprintf(f, "\",uuid=\"%s\",source=\"%s\"} 1\n", t->uuid,
			stats_kind_name(t->host ? host_vm_kind(t->host) :
					b->opt.source == STATS_FILE ? STATS_FILE :
					STATS_LIBVIRT));
	}
	if (!up)
		return;
	dom_family(b, f, "sysidle_vm_state", "gauge", "Idle state: 0 NOT, 1 "
		   "SHORT, 2 LONG, 3 FULL, 4 FULL_NOTED.", V_STATE);
	dom_family(b, f, "sysidle_vm_state_since_timestamp_seconds", "gauge",
		   "Unix time of the last change of sysidle_vm_state.",
		   V_SINCE);
	dom_family(b, f, "sysidle_vm_full_idle", "gauge",
		   "1 while the domain is fully idle (FULL_NOTED), else 0.",
		   V_FULL);
	dom_family(b, f, "sysidle_vm_full_idle_since_timestamp_seconds", "gauge",
		   "Unix time the current full-idle period began; 0 while "
		   "not fully idle. Idle for: time() - this.", V_FULL_SINCE);
	dom_family(b, f, "sysidle_vm_full_idle_periods_total", "counter",
		   "Full-idle periods begun since the bridge began watching "
		   "the domain.", V_PERIODS);
	dom_family(b, f, "sysidle_vm_full_idle_seconds_total", "counter",
		   "Seconds the domain has been fully idle in the full-idle "
		   "periods ended since the bridge began watching it; the "
		   "current period is not in it. Live value: this + "
		   "sysidle_vm_full_idle * (time() - "
		   "sysidle_vm_full_idle_since_timestamp_seconds).",
		   V_IDLE_DONE);
	dom_family(b, f, "sysidle_vm_start_timestamp_seconds", "gauge",
		   "Unix time the bridge began watching the domain: what its "
		   "full-idle seconds and duty cycle count from.", V_START);
	dom_family(b, f, "sysidle_vm_left_full_idle_timestamp_seconds", "gauge",
		   "Unix time the domain last left full idle; 0 when it never "
		   "did while watched.", V_LEFT);
	dom_family(b, f, "sysidle_vm_longest_busy_seconds", "gauge",
		   "The longest completed busy stretch while watched (from the "
		   "start of the watch or a leave of full idle to the next "
		   "entry into it); the current stretch is not in it.",
		   V_LONGEST_BUSY);
	host_wakes_metrics(b, f);
}

/* The families of the file's own writes, after format()'s; @now: this
 * write's Unix time in ms. */
static void format_files(FILE *f, uint64_t now)
{
	prom_family(f, "sysidle_libvirt_file_write_failures_total", "counter",
	       "Writes of the bridge's files that failed (a full disk, an I/O "
	       "error, a read-only file system), by file: metrics this file "
	       "(while they fail, the file on disk is older than the truth).");
	fprintf(f, "sysidle_libvirt_file_write_failures_total{file=\"metrics\"}"
		" %" PRIu64 "\n", m.write_failures);
	prom_family(f, "sysidle_libvirt_metrics_written_timestamp_seconds",
	       "gauge", "Unix time this version of the file was written (it is "
	       "rewritten at least every 10 seconds while the bridge runs: "
	       "an older one is not current).");
	fputs("sysidle_libvirt_metrics_written_timestamp_seconds ", f);
	put_ms(f, now);
}

/* metrics_write(): the file's text into a new temporary file beside
 * @path, renamed over it. Returns 0, or the failure's errno; no temporary
 * file is left either way. */
static int write_file(const struct bridge *b, const char *path, bool final,
		      uint64_t now)
{
	const char *slash = strrchr(path, '/');
	char *tmp = NULL;
	int fd, err = 0;
	FILE *f;

	if (asprintf(&tmp, "%.*s.%s.XXXXXX",
		     slash ? (int)(slash - path + 1) : 0, path,
		     slash ? slash + 1 : path) < 0)
		return ENOMEM;
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = errno;
		free(tmp);
		return err;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = errno;
		close(fd);
	} else {
		format(b, f, !final);
		format_files(f, now);
		if (fflush(f) != 0 || fsync(fd) != 0 || ferror(f))
			err = errno ? errno : EIO;
		if (fclose(f) != 0 && !err)
			err = errno;
	}
	if (!err && rename(tmp, path) != 0)
		err = errno;
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

/* metrics_write(), when the final version (sysidle_libvirt_up 0, no domain)
 * could not be written: the file there, an older version claiming the
 * domains' states, is removed (unlink needs no room) if it is a regular
 * file. @err: why the write failed. */
static void remove_stale(const char *path, int err)
{
	struct stat sb;

	if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
		return;
	if (unlink(path) == 0)
		warn("--metrics-file '%s': removed: its final version cannot "
		     "be written (%s), and the one there claimed the domains' "
		     "states", path, strerror(err));
	else
		warn("--metrics-file '%s': its final version cannot be written "
		     "(%s), nor the file removed (%s): it still claims the "
		     "domains' states", path, strerror(err), strerror(errno));
}

void metrics_write(const struct bridge *b, bool final)
{
	const char *path = b->opt.metrics_file;
	uint64_t now = unix_ms();
	int err;

	/* While failing the file is dirty: tried again after each scan. */
	if (!path ||
	    (!final && !m.dirty && now < m.written_ms + METRICS_PERIOD_MS))
		return;
	err = write_file(b, path, final, now);
	if (!err) {
		if (m.failing)
			say("--metrics-file '%s': written again after %" PRIu64
			    " failed attempts", path, m.failing);
		m.dirty = false;
		m.failing = 0;
		m.written_ms = now;
		return;
	}
	if (!m.failing)
		warn("--metrics-file '%s': cannot write: %s (the file is not "
		     "current until a write works again; tried again after "
		     "each scan, not repeated)", path, strerror(err));
	m.failing++;
	m.write_failures++;
	m.errors++;
	if (final)
		remove_stale(path, err);
}

void metrics_write_down(const char *metrics_file)
{
	static const char text[] = "# HELP sysidle_libvirt_up " UP_HELP "\n"
				   "# TYPE sysidle_libvirt_up gauge\n"
				   "sysidle_libvirt_up 0\n";
	char tmp[PATH_MAX];
	int fd, n;

	if (!metrics_file)
		return;
	n = snprintf(tmp, sizeof(tmp), "%s.down.%d", metrics_file,
		     (int)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		unlink(metrics_file); /* as below: nothing left claiming */
		return;
	}
	n = (int)write(fd, text, sizeof(text) - 1);
	if (close(fd) != 0 || n != (int)sizeof(text) - 1 ||
	    rename(tmp, metrics_file) != 0) {
		/* not written (a full disk): the file there claims the
		 * domains' states, and goes (unlink needs no room) */
		unlink(tmp);
		unlink(metrics_file);
	}
}
