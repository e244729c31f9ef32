/* SPDX-License-Identifier: GPL-2.0-only */
/* The bridge's --metrics-file: see metrics.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge.h"
#include "hook_queue.h"
#include "host_wakes_bridge.h"
#include "metrics.h"
#include "promtext.h"

#define UP_HELP "1 while the bridge runs; 0 in the file it leaves at exit."

static struct {
	bool dirty, failing;
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
enum dom_value { V_STATE, V_SINCE, V_FULL, V_FULL_SINCE, V_PERIODS };

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
	host_wakes_metrics(b, f);
}

void metrics_write(const struct bridge *b, bool final)
{
	uint64_t now = unix_ms();
	char *tmp = NULL;
	const char *slash;
	FILE *f;
	int fd;

	if (!b->opt.metrics_file ||
	    (!final && !m.dirty && now < m.written_ms + METRICS_PERIOD_MS))
		return;
	slash = strrchr(b->opt.metrics_file, '/');
	if (asprintf(&tmp, "%.*s.%s.XXXXXX",
		     slash ? (int)(slash - b->opt.metrics_file + 1) : 0,
		     b->opt.metrics_file,
		     slash ? slash + 1 : b->opt.metrics_file) < 0)
		return;
	fd = mkstemp(tmp);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (f) {
		bool ok;

		format(b, f, !final);
		ok = fflush(f) == 0 && fsync(fd) == 0 && !ferror(f);
		ok = fclose(f) == 0 && ok;
		if (ok && rename(tmp, b->opt.metrics_file) == 0) {
			m.dirty = false;
			m.failing = false;
			m.written_ms = now;
			free(tmp);
			return;
		}
	} else if (fd >= 0) {
		close(fd);
	}
	if (!m.failing)
		warn("--metrics-file '%s': %s (until it works again, not "
		     "repeated)", b->opt.metrics_file, strerror(errno));
	m.failing = true;
	m.errors++;
	unlink(tmp);
	free(tmp);
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
	if (fd < 0)
		return;
	n = (int)write(fd, text, sizeof(text) - 1);
	if (close(fd) != 0 || n != (int)sizeof(text) - 1 ||
	    rename(tmp, metrics_file) != 0)
		unlink(tmp);
}
