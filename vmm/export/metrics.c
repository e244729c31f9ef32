/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --metrics-file: the VM's idle state in the Prometheus text exposition
 * format (version 0.0.4, as node-exporter's textfile collector reads it).
 *
 * The whole file is formatted in memory, written to a temporary file in the
 * same directory (".NAME.XXXXXX": a dot file, which the collector skips)
 * and renamed over the target, so a reader sees the old file or the new
 * one, never a part of either. No sample carries a timestamp (the textfile
 * collector refuses them). The export thread does not wake up periodically
 * while the VM is fully idle, so nothing in the file may go stale then:
 * the current full-idle period is not in the seconds counter, and
 * sysidle_vm_full_idle_since_timestamp_seconds says when it began, so a
 * reader adds time() - that. Every per-VM and per-vCPU sample carries the
 * labels vm and uuid (the uuid stable for a name across runs).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sysidle/sysidle.h>

#include "base/file.h"
#include "base/time.h"
#include "export/export.h"
#include "machine/wake_source.h"
#include "promtext.h"

/* The start of a sample line: NAME{vm="...",uuid="..." (the caller closes
 * the set). @st: a snapshot with its name and uuid set. */
static void put_sample(FILE *f, const char *name, const struct vm_status *st)
{
	fprintf(f, "%s{vm=\"", name);
	prom_label(f, st->name);
	fputs("\",uuid=\"", f);
	prom_label(f, st->uuid);
	fputc('"', f);
}

/* One per-VM sample of @ms milliseconds, as seconds with 3 decimals. */
static void put_vm_ms(FILE *f, const char *name, const char *help,
		      const struct vm_status *st, uint64_t ms)
{
	prom_family(f, name, "gauge", help);
	put_sample(f, name, st);
	fprintf(f, "} %" PRIu64 ".%03" PRIu64 "\n", ms / 1000, ms % 1000);
}

/* One per-VM sample of @ns nanoseconds, as seconds with 9 decimals. */
static void put_vm_ns(FILE *f, const char *name, const char *help,
		      const struct vm_status *st, uint64_t ns)
{
	prom_family(f, name, "gauge", help);
	put_sample(f, name, st);
	fprintf(f, "} %" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u,
		ns % 1000000000u);
}

/* One per-VM sample with an integer value. */
static void put_vm_u64(FILE *f, const char *name, const char *type,
		       const char *help, const struct vm_status *st,
		       uint64_t v)
{
	prom_family(f, name, type, help);
	put_sample(f, name, st);
	fprintf(f, "} %" PRIu64 "\n", v);
}

/* One per-vCPU family: @field picks the value. */
static void put_vcpus(FILE *f, const char *name, const char *type,
		      const char *help, const struct vm_status *st,
		      uint64_t (*field)(const struct vcpu_status *))
{
	prom_family(f, name, type, help);
	for (unsigned int i = 0; i < st->ncpus; i++) {
		put_sample(f, name, st);
		fprintf(f, ",vcpu=\"%u\"} %" PRIu64 "\n", st->vcpus[i].id,
			field(&st->vcpus[i]));
	}
}

static uint64_t vcpu_halted(const struct vcpu_status *v)
{
	return v->halted;
}

static uint64_t vcpu_halt_exits(const struct vcpu_status *v)
{
	return v->halt_exits;
}

/* The wake-up counters by source (the machine's enum wake_source): of
 * each vCPU from HLT, and of the ends of full idle. */
static void put_wake_sources(FILE *f, const struct vm_status *st)
{
	prom_family(f, "sysidle_vcpu_wakeups_total", "counter",
		    "Wake-ups of the vCPU from HLT by what woke it (source: "
		    "lapic-timer, pv-tick, ipi, device, serial-input, kick, "
		    "signal, other), as of the last write of this file; "
		    "sources that never woke it are left out.");
	for (unsigned int i = 0; i < st->ncpus; i++)
		for (int w = 0; w < WAKE_SOURCES; w++) {
			if (!st->vcpus[i].wakeups[w])
				continue;
			put_sample(f, "sysidle_vcpu_wakeups_total", st);
			fprintf(f, ",vcpu=\"%u\",source=\"%s\"} %" PRIu64 "\n",
				st->vcpus[i].id, wake_source_name(w),
				st->vcpus[i].wakeups[w]);
		}
	prom_family(f, "sysidle_vm_full_idle_exits_total", "counter",
		    "Ends of full idle (changes from FULL_NOTED to NOT) by "
		    "what ended them (source, as sysidle_vcpu_wakeups_total; "
		    "signal: SIGUSR2, kick: the control socket's kick).");
	for (int w = 0; w < WAKE_SOURCES; w++) {
		put_sample(f, "sysidle_vm_full_idle_exits_total", st);
		fprintf(f, ",source=\"%s\"} %" PRIu64 "\n", wake_source_name(w),
			st->full_exits_by[w]);
	}
	prom_family(f, "sysidle_housekeeping_wakeups_total", "counter",
		    "Wake-ups of the VMM's housekeeping thread by what woke it "
		    "(reason: kick, or the timer due: lapic-timer, pv-tick, "
		    "housekeeping-tick, kick-backstop, hold-backstop, rtc, "
		    "idle-memory, other), as of the last write of this file.");
	for (unsigned int i = 0; i < st->n_hk_by; i++) {
		put_sample(f, "sysidle_housekeeping_wakeups_total", st);
		fprintf(f, ",reason=\"");
		prom_label(f, st->hk_by[i].name);
		fprintf(f, "\"} %" PRIu64 "\n", st->hk_by[i].total);
	}
}

/* --idle-memory's families (none without it): its passes, the bytes they
 * advised, whether the host can take any of it. */
static void put_idle_memory(FILE *f, const struct vm_status *st)
{
	const struct idle_memory_status *m = &st->idle_memory;

	if (m->mode == IDLE_MEMORY_OFF)
		return;
	prom_family(f, "sysidle_vm_idle_memory_advice_total", "counter",
		    "Passes of --idle-memory over the guest RAM (one per "
		    "full-idle period longer than --idle-memory-delay), by "
		    "outcome: done, cancelled (the VM woke during it), failed.");
	put_sample(f, "sysidle_vm_idle_memory_advice_total", st);
	fprintf(f, ",mode=\"%s\",outcome=\"done\"} %" PRIu64 "\n",
		idle_memory_mode_name(m->mode), m->advised);
	put_sample(f, "sysidle_vm_idle_memory_advice_total", st);
	fprintf(f, ",mode=\"%s\",outcome=\"cancelled\"} %" PRIu64 "\n",
		idle_memory_mode_name(m->mode), m->cancelled);
	put_sample(f, "sysidle_vm_idle_memory_advice_total", st);
	fprintf(f, ",mode=\"%s\",outcome=\"failed\"} %" PRIu64 "\n",
		idle_memory_mode_name(m->mode), m->failed);
	put_vm_u64(f, "sysidle_vm_idle_memory_advised_bytes_total", "counter",
		   "Resident guest RAM advised to the host kernel "
		   "(MADV_COLD or MADV_PAGEOUT) by --idle-memory, all passes.",
		   st, m->advised_bytes_total);
	put_vm_u64(f, "sysidle_vm_idle_memory_last_resident_after_bytes",
		   "gauge", "Guest RAM resident after the last pass done "
		   "(mincore: pages written to swap and still cached count), "
		   "as of that pass.", st, m->last_resident_after_bytes);
	put_vm_u64(f, "sysidle_vm_idle_memory_swap_available", "gauge",
		   "1 when the host had a swap area at the last look (start, "
		   "then each pass), else 0: without one, anonymous guest RAM "
		   "cannot be given back.", st, m->swap_available);
}

/* The file's text, into @f. @st: a whole snapshot (vm_status_read);
 * @up: false for the file left at exit. */
static void metrics_format(FILE *f, const struct vm_status *st, bool up)
{
	bool full_idle = up && st->state == SYSIDLE_FULL_NOTED;
	uint64_t idle_ns = up ? st->full_idle_done_ns : st->full_idle_ns;

	put_vm_u64(f, "sysidle_vm_up", "gauge",
		   "1 while the VMM runs; 0 in the file it leaves at exit "
		   "(every gauge below then says what was last true, but "
		   "sysidle_vm_full_idle and sysidle_vm_paused are 0: a VM "
		   "that is gone is neither).", st, up);

	prom_family(f, "sysidle_vm_info", "gauge",
		   "The VM: its name, its uuid (--uuid, or the version-5 uuid "
		   "of the name: the same name keeps it across runs; on every "
		   "sample too) and whether --sysidle is on. Always 1.");
	put_sample(f, "sysidle_vm_info", st);
	fprintf(f, ",sysidle=\"%s\"} 1\n", st->sysidle ? "true" : "false");

	put_vm_u64(f, "sysidle_vm_state", "gauge",
		   "Idle state: 0 NOT, 1 SHORT, 2 LONG, 3 FULL, 4 FULL_NOTED "
		   "(fully idle, tick stopped). Always 0 without --sysidle.",
		   st, (uint64_t)st->state);

	put_vm_ms(f, "sysidle_vm_state_since_timestamp_seconds",
		  "Unix time of the last change of sysidle_vm_state (of the "
		  "VM's start when it never changed).", st, st->since_unix_ms);

	put_vm_u64(f, "sysidle_vm_full_idle", "gauge",
		   "1 while the VM is fully idle (state FULL_NOTED: no vCPU "
		   "runs, the tick is stopped), else 0.", st, full_idle);

	put_vm_ms(f, "sysidle_vm_full_idle_since_timestamp_seconds",
		  "Unix time at which the current full-idle period began (the "
		  "change to FULL_NOTED); 0 while sysidle_vm_full_idle is 0. "
		  "The time fully idle so far: time() - this.",
		  st, full_idle ? st->since_unix_ms : 0);

	prom_family(f, "sysidle_vm_full_idle_seconds_total", "counter",
		   "Seconds the VM has been fully idle in the full-idle periods "
		   "ended by the last write of this file (at each state change; "
		   "the last one at exit ends the current period too). The "
		   "current period is not in it, as the file is not rewritten "
		   "periodically while the VM stays fully idle. Live value: "
		   "this + "
		   "sysidle_vm_full_idle * (time() - "
		   "sysidle_vm_full_idle_since_timestamp_seconds).");
	put_sample(f, "sysidle_vm_full_idle_seconds_total", st);
	fprintf(f, "} %" PRIu64 ".%09" PRIu64 "\n",
		idle_ns / 1000000000u, idle_ns % 1000000000u);

	put_vm_u64(f, "sysidle_vm_full_idle_periods_total", "counter",
		   "Full-idle periods begun (changes to FULL_NOTED).",
		   st, st->full_idle_periods);

	put_vm_ms(f, "sysidle_vm_start_timestamp_seconds",
		  "Unix time the VM was created: what the duty cycle's "
		  "windows (tools/prometheus/sysidle.rules.yml) start from.",
		  st, mono_to_unix_ms(time_start_ns()));
	put_vm_ms(f, "sysidle_vm_left_full_idle_timestamp_seconds",
		  "Unix time the VM last left full idle (FULL_NOTED); 0 when "
		  "it never did. Changes only at a state change, when this "
		  "file is rewritten.", st, st->duty.left_unix_ms);
	put_vm_ns(f, "sysidle_vm_longest_busy_seconds",
		  "The longest completed busy stretch since the VM started: "
		  "from its start or a leave of full idle to the next entry "
		  "into it. The current stretch is not in it (it only changes "
		  "at an entry into full idle, when this file is rewritten).",
		  st, st->duty.longest_busy_ns);
	put_vm_ms(f, "sysidle_vm_metrics_written_timestamp_seconds",
		  "Unix time this file was written: at least once a second "
		  "while sysidle_vm_full_idle is 0, only at an event while it "
		  "is 1. Older than a few seconds with sysidle_vm_up 1 and "
		  "sysidle_vm_full_idle 0: the VMM stopped writing it.",
		  st, mono_to_unix_ms(now_ns()));

	put_vcpus(f, "sysidle_vcpu_halted", "gauge",
		  "1 while the vCPU is halted (blocked on HLT, waiting for "
		  "its start-up IPI, or paused), else 0.", st, vcpu_halted);
	put_vcpus(f, "sysidle_vcpu_halt_exits_total", "counter",
		  "HLT exits of the vCPU (KVM_EXIT_HLT).", st, vcpu_halt_exits);
	put_wake_sources(f, st);

	put_vm_u64(f, "sysidle_ticks_suppressed_total", "counter",
		   "Paravirtual ticks not delivered to halted vCPUs (counted "
		   "as missed instead), all vCPUs.", st, st->ticks_suppressed);
	put_vm_u64(f, "sysidle_host_timer_wakeups_total", "counter",
		   "Expiries of the VMM's housekeeping timer (host timer "
		   "wake-ups on the guest's behalf).", st,
		   st->host_timer_wakeups);

	put_vm_u64(f, "sysidle_vm_paused", "gauge",
		   "1 while the VM is paused (every vCPU parked by the control "
		   "socket's pause), else 0.", st, up && st->paused);
	put_vm_u64(f, "sysidle_vm_pauses_total", "counter",
		   "Pauses completed (every vCPU parked).", st, st->pauses);
	put_vm_u64(f, "sysidle_vm_resumes_requested_total", "counter",
		   "Resumes asked for by the control socket's resume.", st,
		   st->resumes_requested);
	put_vm_u64(f, "sysidle_vm_resumes_self_total", "counter",
		   "Resumes by a wake source of the guest (a timer, serial "
		   "input, a kick, an IPI).", st, st->resumes_self);

	put_idle_memory(f, st);

	put_vm_u64(f, "sysidle_hooks_run_total", "counter",
		   "Hooks (--hooks) that ended, failed or not.", st,
		   st->hooks_run);
	put_vm_u64(f, "sysidle_hooks_failed_total", "counter",
		   "Hooks that exited non-zero, were killed (--hook-timeout, "
		   "the stop), could not be started or were not run at the "
		   "stop.", st, st->hooks_failed);
	put_vm_u64(f, "sysidle_hooks_dropped_total", "counter",
		   "Full-idle changes whose hook was not run: coalesced with "
		   "a later one, or lost by a hooks thread too far behind.",
		   st, st->hooks_dropped);
}

/* The families of the file's own writes (after metrics_format's). @files:
 * the failures so far. */
static void metrics_format_files(FILE *f, const struct vm_status *st,
				 const struct metrics_files *files)
{
	prom_family(f, "sysidle_vm_file_write_failures_total", "counter",
		   "Writes of the VMM's files that failed (a full disk, an I/O "
		   "error, a read-only file system), by file: metrics this "
		   "file (while they fail, the file on disk is older than the "
		   "truth: see sysidle_vm_metrics_written_timestamp_seconds), "
		   "sysidle_log the --sysidle-log (its lines are dropped).");
	put_sample(f, "sysidle_vm_file_write_failures_total", st);
	fprintf(f, ",file=\"metrics\"} %" PRIu64 "\n",
		files->metrics_failures);
	put_sample(f, "sysidle_vm_file_write_failures_total", st);
	fprintf(f, ",file=\"sysidle_log\"} %" PRIu64 "\n",
		files->log_failures);
}

/*
 * Main thread, at start: whether @path can be (re)written as metrics_write
 * does it: not a directory, in a directory this process may create files
 * in. Nothing here opens @path (the temporary file is created O_EXCL and
 * renamed over it), so a FIFO at @path blocks nothing and is replaced.
 * Returns 0, or -1 with @why.
 */
int metrics_check(const char *path, char *why, size_t n)
{
	struct stat sb;

	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		snprintf(why, n, "is a directory");
		return -1;
	}
	return output_dir_check(path, why, n);
}

/* write() all of @len bytes of @buf to @fd. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The export thread (and the main thread once it has stopped): one caller
 * at a time, @st a snapshot nobody changes meanwhile, @files not NULL.
 * Never leaves the temporary file behind, whatever fails (ENOSPC, EIO,
 * EROFS, EDQUOT: the file at @path is then the one before).
 */
int metrics_write(const char *path, const struct vm_status *st, bool up,
		  const struct metrics_files *files)
{
	const char *slash = strrchr(path, '/');
	char *text = NULL, *tmp = NULL;
	size_t len = 0;
	int fd, err;
	FILE *f;

	f = open_memstream(&text, &len);
	if (!f)
		return -1;
	metrics_format(f, st, up);
	metrics_format_files(f, st, files);
	errno = 0;
	if (fclose(f) || !text) {
		err = errno ? errno : ENOMEM;
		goto fail;
	}
	/* DIR/.BASE.XXXXXX, or .BASE.XXXXXX for a path with no '/' */
	if (asprintf(&tmp, "%.*s.%s.XXXXXX",
		     slash ? (int)(slash - path + 1) : 0, path,
		     slash ? slash + 1 : path) < 0) {
		tmp = NULL;
		err = ENOMEM;
		goto fail;
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		goto fail;
	}
	if (fchmod(fd, 0644) || write_all(fd, text, len)) {
		err = errno;
		close(fd);
		goto fail_unlink;
	}
	if (close(fd)) {
		err = errno;
		goto fail_unlink;
	}
	if (rename(tmp, path)) {
		err = errno;
		goto fail_unlink;
	}
	free(tmp);
	free(text);
	return 0;

fail_unlink:
	unlink(tmp);
fail:
	free(tmp);
	free(text);
	errno = err;
	return -1;
}
