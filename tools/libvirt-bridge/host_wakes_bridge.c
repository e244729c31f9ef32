/* SPDX-License-Identifier: GPL-2.0-only */
/* The host's view of what wakes each domain, in the bridge: see
 * host_wakes_bridge.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bridge.h"
#include "host_wakes.h"
#include "host_wakes_bridge.h"
#include "metrics.h"
#include "monotonic.h"
#include "promtext.h"

#define VIEW "The host's view (KVM's debugfs counter, summed over the " \
	     "VM's vCPUs, since the VM began), not a guest-side attribution."

/* KVM's counters as metric families, in enum host_wakes_kvm's order. */
static const struct {
	const char *name, *help;
} kvm_families[HW_KVM_N] = {
	{ "sysidle_libvirt_kvm_halt_exits_total",
	  "The domain's vCPUs halting in KVM (halt_exits). " VIEW },
	{ "sysidle_libvirt_kvm_halt_wakeups_total",
	  "The domain's vCPUs woken from a halt (halt_wakeup). " VIEW },
	{ "sysidle_libvirt_kvm_halt_successful_polls_total",
	  "Halts ended while KVM polled, before the vCPU thread slept "
	  "(halt_successful_poll). " VIEW },
	{ "sysidle_libvirt_kvm_halt_attempted_polls_total",
	  "Halts KVM polled on (halt_attempted_poll). " VIEW },
	{ "sysidle_libvirt_kvm_irq_injections_total",
	  "Interrupts injected into the domain's vCPUs (irq_injections). "
	  VIEW },
	{ "sysidle_libvirt_kvm_irq_exits_total",
	  "Exits of the domain's vCPUs for a host interrupt (irq_exits). "
	  VIEW },
	{ "sysidle_libvirt_kvm_signal_exits_total",
	  "Returns of KVM_RUN to QEMU for a pending signal, a vCPU kicked "
	  "out by QEMU (signal_exits). " VIEW },
	{ "sysidle_libvirt_kvm_exits_total",
	  "Exits of the domain's vCPUs of any kind (exits). " VIEW },
};

static struct {
	bool fresh;              /* a change since the file was written */
	bool failing;
	size_t watched;          /* watched domains in the file */
} w = { .fresh = true };

/* See host_wakes_bridge.h for what the caller guarantees. */
void host_wakes_scan(struct bridge *b, uint64_t now_ns)
{
	size_t watched = 0;
	char why[200];

	if (!b->opt.metrics_file && !b->opt.wakes_file)
		return; /* nobody to tell: nothing read */
	for (size_t i = 0; i < b->ndoms; i++) {
		struct tracked *t = b->doms[i];
		int pid;

		if (!t->watched)
			continue;
		watched++;
		if (!t->wakes && !(t->wakes = host_wakes_new()))
			continue;
		if (b->opt.source == STATS_FILE || b->opt.remote) {
			w.fresh |= host_wakes_absent(t->wakes, b->opt.remote ?
				"libvirt on another host (--libvirt): its "
				"processes are not this host's" :
				"a replay (--stats-file): no process to read");
			continue;
		}
		if (!host_wakes_due(t->wakes, now_ns))
			continue;
		pid = t->host ? host_vm_pid(t->host) : host_wakes_pid(t->wakes);
		if (pid <= 0) {
			if (now_ns < t->wakes_retry_ns)
				continue;
			pid = host_find_pid("/proc", t->uuid);
			if (pid <= 0) {
				snprintf(why, sizeof(why), "no process with "
					 "'-uuid %s' on this host", t->uuid);
				w.fresh |= host_wakes_absent(t->wakes, why);
				t->wakes_retry_ns = now_ns +
					ATTACH_RETRY_MS * 1000000ull;
				continue;
			}
		}
		if (host_wakes_sample(t->wakes, pid, "/proc",
				      STATS_KVM_DEBUGFS, now_ns) < 0)
			t->wakes_retry_ns = 0; /* found again at once */
		w.fresh = true;
	}
	/* a domain came or went */
	w.fresh |= watched != w.watched;
	w.watched = watched;
}

/* NAME{vm="..",uuid=".." (the caller adds more labels or "} "). The
 * caller guarantees @f is open for writing and @t valid. */
static void labels(FILE *f, const char *name, const struct tracked *t)
{
	fprintf(f, "%s{vm=\"", name);
	prom_label(f, t->name);
	fprintf(f, "\",uuid=\"%s\"", t->uuid);
}

/* The domains with figures: is @t one? The caller guarantees @t is
 * valid. */
static bool has_figures(const struct tracked *t)
{
	return t->watched && t->wakes && host_wakes_pid(t->wakes) &&
	       !*host_wakes_why(t->wakes);
}

/* One family with a sample per domain and QEMU thread name: the name's
 * wake-ups since first read (@wakeups), else its threads now. The caller
 * guarantees @f is open. */
static void thread_family(const struct bridge *b, FILE *f, const char *name,
			  const char *type, const char *help, bool wakeups)
{
	prom_family(f, name, type, help);
	for (size_t i = 0; i < b->ndoms; i++) {
		const struct tracked *t = b->doms[i];

		for (unsigned int j = 0; has_figures(t) &&
		     j < host_wakes_nthreads(t->wakes); j++) {
			unsigned int n;
			uint64_t total;
			const char *thread = host_wakes_thread(t->wakes, j, &n,
							       &total);

			labels(f, name, t);
			fputs(",thread=\"", f);
			prom_label(f, thread);
			if (wakeups)
				fprintf(f, "\"} %" PRIu64 "\n", total);
			else
				fprintf(f, "\"} %u\n", n);
		}
	}
}

/* See host_wakes_bridge.h for what the caller guarantees. */
void host_wakes_metrics(const struct bridge *b, FILE *f)
{
	prom_family(f, "sysidle_libvirt_host_wakeups_available", "gauge",
		    "1 when the host's wake-up figures of the domain are "
		    "read (part: kvm, KVM's counters; threads, the QEMU "
		    "process's threads), 0 when not (a TCG domain has no "
		    "KVM counters; a remote host or a replay neither).");
	for (size_t i = 0; i < b->ndoms; i++) {
		const struct tracked *t = b->doms[i];
		uint64_t v;
		bool th;

		if (!t->watched)
			continue;
		th = has_figures(t);
		labels(f, "sysidle_libvirt_host_wakeups_available", t);
		fprintf(f, ",part=\"kvm\"} %d\n", th &&
			host_wakes_kvm_total(t->wakes, HW_KVM_EXITS, &v));
		labels(f, "sysidle_libvirt_host_wakeups_available", t);
		fprintf(f, ",part=\"threads\"} %d\n", th);
	}
	for (int k = 0; k < HW_KVM_N; k++) {
		prom_family(f, kvm_families[k].name, "counter",
			    kvm_families[k].help);
		for (size_t i = 0; i < b->ndoms; i++) {
			const struct tracked *t = b->doms[i];
			uint64_t v;

			if (!has_figures(t) || !host_wakes_kvm_total(t->wakes,
					(enum host_wakes_kvm)k, &v))
				continue;
			labels(f, kvm_families[k].name, t);
			fprintf(f, "} %" PRIu64 "\n", v);
		}
	}
	thread_family(b, f, "sysidle_libvirt_thread_wakeups_total", "counter",
		      "Wake-ups of the domain's QEMU threads by thread name "
		      "(their voluntary context switches, each a sleep they "
		      "woke from) since the bridge began reading them. The "
		      "host's view of which thread woke, not a guest-side "
		      "attribution.", true);
	thread_family(b, f, "sysidle_libvirt_threads", "gauge",
		      "The domain's QEMU threads of each name at the last "
		      "read.", false);
}

/* ,"duty":{...}: domain @t's duty cycle now (common/duty_cycle.h), the
 * share of each window it was fully idle, over the span given; nothing
 * before its first state. The caller guarantees @f is open. */
static void duty_json(FILE *f, const struct tracked *t)
{
	struct duty_report r;

	if (!t->duty || !t->duty->start_ns)
		return;
	duty_cycle_read(t->duty, monotonic_ns(), &r);
	fputs(",\"duty\":{", f);
	for (int w = 0; w < DUTY_WINDOWS; w++)
		fprintf(f, "%s\"full_idle_ratio_%s\":%.6f,\"span_%s_s\":%.3f",
			w ? "," : "", duty_window_name(w), r.w[w].span_ns ?
			(double)r.w[w].idle_ns / (double)r.w[w].span_ns : 0.0,
			duty_window_name(w), (double)r.w[w].span_ns / 1e9);
	fprintf(f, ",\"tracked_s\":%.3f}", (double)r.tracked_ns / 1e9);
}

/* The document: every watched domain's host_wakeups and duty cycle. The
 * caller guarantees @f is open for writing. */
static void format(const struct bridge *b, FILE *f)
{
	bool first = true;

	fprintf(f, "{\"version\":1,\"writer_pid\":%d,\"written_unix_ms\":%"
		PRIu64 ",\"period_ms\":%u,\"window_ms\":%u,\"domains\":[",
		(int)getpid(), unix_ms(), HOST_WAKES_PERIOD_MS,
		HOST_WAKES_WINDOW_MS);
	for (size_t i = 0; i < b->ndoms; i++) {
		const struct tracked *t = b->doms[i];

		if (!t->watched)
			continue;
		fputs(first ? "\n{\"vm\":" : ",\n{\"vm\":", f);
		host_wakes_json_string(f, t->name);
		fprintf(f, ",\"uuid\":\"%s\",\"host_wakeups\":", t->uuid);
		host_wakes_json(f, t->wakes);
		duty_json(f, t);
		fputc('}', f);
		first = false;
	}
	fputs("]}\n", f);
}

/* See host_wakes_bridge.h for what the caller guarantees. */
void host_wakes_write(const struct bridge *b, bool final)
{
	const char *file = b->opt.wakes_file, *slash;
	char *tmp = NULL;
	FILE *f;
	int fd;

	if (!file)
		return;
	if (final) {
		if (unlink(file) < 0 && errno != ENOENT)
			warn("--wakes-file '%s': cannot remove it: %s", file,
			     strerror(errno));
		return;
	}
	if (!w.fresh)
		return;
	slash = strrchr(file, '/');
	if (asprintf(&tmp, "%.*s.%s.XXXXXX",
		     slash ? (int)(slash - file + 1) : 0, file,
		     slash ? slash + 1 : file) < 0)
		return;
	fd = mkstemp(tmp);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (f) {
		bool ok;

		format(b, f);
		ok = fflush(f) == 0 && !ferror(f);
		ok = fclose(f) == 0 && ok;
		if (ok && rename(tmp, file) == 0) {
			if (w.failing)
				say("--wakes-file '%s': written again", file);
			w.fresh = w.failing = false;
			free(tmp);
			return;
		}
	} else if (fd >= 0) {
		close(fd);
	}
	if (!w.failing)
		warn("--wakes-file '%s': %s (until it works again, not "
		     "repeated)", file, strerror(errno));
	w.failing = true;
	metrics_error();
	unlink(tmp);
	free(tmp);
}
