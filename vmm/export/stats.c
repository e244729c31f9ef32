/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --stats-json: per-vCPU exit counts by reason, HLT exits, interrupts
 * injected, time halted, the housekeeping thread's host wake-ups, the idle
 * layer's figures and the pause counters, written once at exit (json-c).
 *
 * The path is checked at start (stats_check) so that a typo shows before
 * hours of running. At exit it is opened without blocking: a FIFO with no
 * reader is an error at once, and a reader gets STATS_WRITE_NS to take the
 * whole document; either way the exit status is VMM_EXIT_STATS.
 */
#include <errno.h>
#include <limits.h>
#include <linux/kvm.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include <sysidle/sysidle.h>

#include "base/error.h"
#include "base/file.h"
#include "base/housekeeping.h"
#include "base/sched.h"
#include "base/time.h"
#include "export/export.h"
#include "idle/idle.h"
#include "machine/devices/devices.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define STATS_WRITE_NS 1000000000ull /* a reader's time to take it all */

static const char *const exit_names[VCPU_EXIT_REASONS] = {
	[KVM_EXIT_UNKNOWN] = "unknown", [KVM_EXIT_EXCEPTION] = "exception",
	[KVM_EXIT_IO] = "io", [KVM_EXIT_HYPERCALL] = "hypercall",
	[KVM_EXIT_DEBUG] = "debug", [KVM_EXIT_HLT] = "hlt",
	[KVM_EXIT_MMIO] = "mmio", [KVM_EXIT_IRQ_WINDOW_OPEN] = "irq_window_open",
	[KVM_EXIT_SHUTDOWN] = "shutdown", [KVM_EXIT_FAIL_ENTRY] = "fail_entry",
	[KVM_EXIT_INTR] = "intr", [KVM_EXIT_INTERNAL_ERROR] = "internal_error",
	[KVM_EXIT_X86_RDMSR] = "rdmsr", [KVM_EXIT_X86_WRMSR] = "wrmsr",
};

static void add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

static struct json_object *stats_vcpu(struct vcpu *v)
{
	struct json_object *o = json_object_new_object();
	struct json_object *exits = json_object_new_object(), *adv, *wakes;
	struct pvtick_status pv;
	char name[32];
	uint64_t total = 0;

	add_u64(o, "id", v->id);
	for (unsigned int r = 0; r < VCPU_EXIT_REASONS; r++) {
		if (!v->stats.exits[r])
			continue;
		if (exit_names[r])
			snprintf(name, sizeof(name), "%s", exit_names[r]);
		else
			snprintf(name, sizeof(name), "reason_%u", r);
		add_u64(exits, name, v->stats.exits[r]);
		total += v->stats.exits[r];
	}
	json_object_object_add(o, "exits", exits);
	add_u64(o, "exits_total", total);
	add_u64(o, "hlt_exits", atomic_load_explicit(&v->stats.hlt_exits,
						    memory_order_relaxed));
	add_u64(o, "interrupts_injected", v->stats.irqs_injected);
	add_u64(o, "nmis_injected", v->stats.nmis_injected);
	add_u64(o, "halted_ns", atomic_load_explicit(&v->stats.halted_ns,
						     memory_order_relaxed));
	add_u64(o, "wakeups", v->stats.wakeups);
	add_u64(o, "wake_latency_ns_total", v->stats.wake_latency_ns);
	add_u64(o, "wake_latency_ns_max", v->stats.wake_latency_max_ns);
	add_u64(o, "halt_polls", v->stats.halt_polls);
	add_u64(o, "halt_poll_hits", v->stats.halt_poll_hits);
	add_u64(o, "halt_poll_ns", v->stats.halt_poll_ns);
	add_u64(o, "halt_poll_preempted", v->stats.halt_poll_preempted);
	add_u64(o, "timer_self_fired", v->stats.timer_self_fired);
	add_u64(o, "timer_spin_ns", v->stats.timer_spin_ns);
	add_u64(o, "pv_eois", v->stats.pv_eois);
	adv = json_object_new_array();
	wakes = json_object_new_array();
	for (unsigned int c = 0; c < TIMER_ADVANCE_CLASSES; c++) {
		json_object_array_add(adv, json_object_new_uint64(
			v->advance_ns[c]));
		json_object_array_add(wakes, json_object_new_uint64(
			v->stats.timer_advance_wakes[c]));
	}
	json_object_object_add(o, "timer_advance_ns", adv);
	json_object_object_add(o, "timer_advance_wakes", wakes);
	idle_vcpu_pvtick(v, &pv);
	add_u64(o, "pvtick_hz", pv.hz);
	add_u64(o, "pvtick_delivered", pv.delivered);
	add_u64(o, "pvtick_suppressed", pv.suppressed);
	add_u64(o, "lapic_ticks_held", v->lapic.timer.ticks_held);
	add_u64(o, "lapic_ticks_caught_up", v->lapic.timer.ticks_caught_up);
	add_u64(o, "lapic_ticks_coalesced", v->lapic.timer.ticks_coalesced);
	return o;
}

/* NULL without --sysidle. */
static struct json_object *stats_sysidle(struct vm *vm)
{
	struct json_object *o, *states, *lat, *ticks;
	struct pvtick_status pv;
	struct idle_stats st;
	uint64_t total = 0;

	idle_get_stats(&st);
	if (!st.enabled)
		return NULL;
	o = json_object_new_object();
	add_u64(o, "timekeeper", (uint64_t)st.timekeeper);
	add_u64(o, "delay_ns", st.delay_ns);
	add_u64(o, "tick_period_ns", st.tick_period_ns);
	json_object_object_add(o, "lapic_tick_policy", json_object_new_string(
		lapic_tick_policy_name(vm->cfg->lapic_tick_policy)));
	states = json_object_new_object();
	for (int i = 0; i < SYSIDLE_NR_STATES; i++)
		add_u64(states, sysidle_state_name((enum sysidle_state)i),
			st.state_ns[i]);
	json_object_object_add(o, "state_ns", states);
	add_u64(o, "full_idle_periods", st.full_idle_periods);
	add_u64(o, "tick_restarts", st.tick_restarts);
	add_u64(o, "lapic_tick_hold_releases", st.hold_releases);
	lat = json_object_new_object();
	add_u64(lat, "count", st.lat_count);
	add_u64(lat, "min", st.lat_min);
	add_u64(lat, "median", st.lat_median);
	add_u64(lat, "p99", st.lat_p99);
	add_u64(lat, "mean", st.lat_count ? st.lat_sum / st.lat_count : 0);
	add_u64(lat, "max", st.lat_max);
	json_object_object_add(o, "detection_latency_ns", lat);
	ticks = json_object_new_array();
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		idle_vcpu_pvtick(&vm->vcpus[i], &pv);
		json_object_array_add(ticks, json_object_new_uint64(pv.suppressed));
		total += pv.suppressed;
	}
	json_object_object_add(o, "ticks_suppressed", ticks);
	add_u64(o, "ticks_suppressed_total", total);
	add_u64(o, "housekeeping_timer_wakeups", housekeeping_timer_wakeups());
	add_u64(o, "housekeeping_kicks", housekeeping_kicks());
	add_u64(o, "scans", st.scans);
	add_u64(o, "force_exits", st.force_exits);
	add_u64(o, "violations", st.violations);
	add_u64(o, "log_lines_dropped", st.log_lines_dropped);
	add_u64(o, "log_write_failures", st.log_write_failures);
	return o;
}

/* The control socket's pause / resume counters (the same as status). */
static struct json_object *stats_pause(void)
{
	struct json_object *o = json_object_new_object();
	struct pause_status st;

	pause_read_status(&st);
	add_u64(o, "pauses", st.pauses);
	add_u64(o, "resumes_requested", st.resumes_requested);
	add_u64(o, "resumes_self", st.resumes_self);
	return o;
}

/* Main thread, at start: whether --stats-json @path can be written at
 * exit; the error (VMM_EXIT_STATS) when it cannot. Opens nothing. */
int stats_check(const char *path)
{
	char why[PATH_MAX + 64];

	if (output_check(path, why, sizeof(why)))
		return vmm_fail(VMM_EXIT_STATS, "cannot write --stats-json "
				"'%s': %s", path, why);
	return 0;
}

/* stats_put(), after a failed write of @path (@regular: a regular file):
 * the part written is removed, so that no cut document is left for a whole
 * one; returns what the message adds. */
static const char *stats_remove_partial(bool regular, const char *path)
{
	if (!regular)
		return "";
	return unlink(path) == 0 ? " (the partial file is removed)" :
	       " (the partial file could not be removed)";
}

/* stats_write(): @text and a newline to @path, bounded; 0 or -1 after a
 * message on stderr (the VM has stopped: vmm_fail() would say nothing,
 * vmm_error() does). A regular file not written whole (ENOSPC, EIO) is
 * removed. */
static int stats_put(const char *path, const char *text)
{
	uint64_t deadline = now_ns() + STATS_WRITE_NS;
	size_t len = strlen(text), n;
	const char *removed;
	struct stat sb;
	bool regular;
	char why[160];
	int fd, err;

	fd = output_open(path, NULL, why, sizeof(why));
	if (fd < 0) {
		vmm_error("cannot write --stats-json '%s': %s",
			  path, why);
		return -1;
	}
	regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
	n = output_write(fd, text, len, deadline);
	err = errno;
	if (n == len && close(fd) == 0)
		return 0;
	if (n == len)
		err = errno;
	else
		close(fd);
	removed = stats_remove_partial(regular, path);
	if (err == ETIMEDOUT)
		vmm_error("cannot write --stats-json '%s': its "
			  "reader took %zu of %zu bytes in %llu ms, the rest "
			  "is abandoned", path, n, len,
			  STATS_WRITE_NS / 1000000);
	else
		vmm_error("cannot write --stats-json '%s': %s%s",
			  path, strerror(err), removed);
	return -1;
}

/* How the vCPUs wait and are woken (the latency options in effect). */
static struct json_object *stats_wake_path(const struct vm *vm)
{
	struct json_object *o = json_object_new_object();
	const struct machine_config *c = vm->cfg;

	json_object_object_add(o, "interrupt_injection", json_object_new_string(
		vm->sync_events ? "kvm-run" : "ioctl"));
	json_object_object_add(o, "vcpu_timers", json_object_new_string(
		c && c->timers_on_housekeeping ? "housekeeping" : "self"));
	add_u64(o, "halt_poll_max_ns", c ? c->halt_poll_max_ns : 0);
	add_u64(o, "timer_advance_max_ns", c ? c->timer_advance_max_ns : 0);
	add_u64(o, "timer_advance_class0_ns", TIMER_ADVANCE_CLASS0_NS);
	add_u64(o, "sched_slice_ns", sched_slice_configured());
	return o;
}

/* Caller: every vCPU and the housekeeping thread have been joined. */
int stats_write(struct vm *vm, const char *path, int status)
{
	struct json_object *root = json_object_new_object();
	struct json_object *hk = json_object_new_object();
	struct json_object *vcpus = json_object_new_array();
	struct json_object *idle = stats_sysidle(vm);
	const char *text;
	char *line;
	int r;

	json_object_object_add(root, "vmm", json_object_new_string("sysidle-vmm"));
	add_u64(root, "exit_status", (uint64_t)status);
	add_u64(root, "cpus", vm->ncpus);
	add_u64(root, "mem_bytes", vm->ram_size);
	add_u64(hk, "host_wakeups", housekeeping_wakeups());
	add_u64(hk, "timer_wakeups", housekeeping_timer_wakeups());
	add_u64(hk, "kicks", housekeeping_kicks());
	add_u64(hk, "timers_fired", housekeeping_timers_fired());
	json_object_object_add(root, "housekeeping", hk);
	json_object_object_add(root, "wake_path", stats_wake_path(vm));
	if (idle)
		json_object_object_add(root, "sysidle", idle);
	json_object_object_add(root, "pause", stats_pause());
	add_u64(root, "serial_output_dropped", serial_output_dropped());
	add_u64(root, "metrics_write_failures", export_metrics_write_failures());
	for (unsigned int i = 0; i < vm->ncpus; i++)
		json_object_array_add(vcpus, stats_vcpu(&vm->vcpus[i]));
	json_object_object_add(root, "vcpus", vcpus);
	text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN |
					      JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!text || asprintf(&line, "%s\n", text) < 0) {
		vmm_error("cannot write --stats-json '%s': out of "
			  "memory", path);
		json_object_put(root);
		return -1;
	}
	json_object_put(root);
	r = stats_put(path, line);
	free(line);
	return r;
}
