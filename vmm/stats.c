/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * --stats-json: per-vCPU exit counts by reason, HLT exits, interrupts
 * injected, time halted, and the housekeeping thread's host wake-ups.
 * A small JSON writer: objects, arrays, escaped strings, unsigned numbers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "export.h"
#include "housekeeping.h"
#include "vmm.h"

struct json {
	FILE *f;
	bool need_comma;
};

static const char *const exit_names[VCPU_EXIT_REASONS] = {
	[KVM_EXIT_UNKNOWN] = "unknown", [KVM_EXIT_EXCEPTION] = "exception",
	[KVM_EXIT_IO] = "io", [KVM_EXIT_HYPERCALL] = "hypercall",
	[KVM_EXIT_DEBUG] = "debug", [KVM_EXIT_HLT] = "hlt",
	[KVM_EXIT_MMIO] = "mmio", [KVM_EXIT_IRQ_WINDOW_OPEN] = "irq_window_open",
	[KVM_EXIT_SHUTDOWN] = "shutdown", [KVM_EXIT_FAIL_ENTRY] = "fail_entry",
	[KVM_EXIT_INTR] = "intr", [KVM_EXIT_INTERNAL_ERROR] = "internal_error",
	[KVM_EXIT_X86_RDMSR] = "rdmsr", [KVM_EXIT_X86_WRMSR] = "wrmsr",
};

static void json_string(struct json *j, const char *s)
{
	fputc('"', j->f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(j->f, "\\%c", c);
		else if (c < 0x20)
			fprintf(j->f, "\\u%04x", c);
		else
			fputc(c, j->f);
	}
	fputc('"', j->f);
}

static void json_sep(struct json *j)
{
	if (j->need_comma)
		fputc(',', j->f);
	j->need_comma = false;
}

static void json_key(struct json *j, const char *key)
{
	json_sep(j);
	json_string(j, key);
	fputc(':', j->f);
}

static void json_open(struct json *j, const char *key, char bracket)
{
	if (key)
		json_key(j, key);
	else
		json_sep(j);
	fputc(bracket, j->f);
}

static void json_close(struct json *j, char bracket)
{
	fputc(bracket, j->f);
	j->need_comma = true;
}

static void json_u64(struct json *j, const char *key, uint64_t v)
{
	json_key(j, key);
	fprintf(j->f, "%" PRIu64, v);
	j->need_comma = true;
}

static void json_str(struct json *j, const char *key, const char *v)
{
	json_key(j, key);
	json_string(j, v);
	j->need_comma = true;
}

static void stats_vcpu(struct json *j, const struct vcpu *v)
{
	char name[32];
	uint64_t total = 0;

	json_open(j, NULL, '{');
	json_u64(j, "id", v->id);
	json_open(j, "exits", '{');
	for (unsigned int r = 0; r < VCPU_EXIT_REASONS; r++) {
		if (!v->stats.exits[r])
			continue;
		if (exit_names[r])
			snprintf(name, sizeof(name), "%s", exit_names[r]);
		else
			snprintf(name, sizeof(name), "reason_%u", r);
		json_u64(j, name, v->stats.exits[r]);
		total += v->stats.exits[r];
	}
	json_close(j, '}');
	json_u64(j, "exits_total", total);
	json_u64(j, "hlt_exits", v->stats.hlt_exits);
	json_u64(j, "interrupts_injected", v->stats.irqs_injected);
	json_u64(j, "nmis_injected", v->stats.nmis_injected);
	json_u64(j, "halted_ns", v->stats.halted_ns);
	json_u64(j, "wakeups", v->stats.wakeups);
	json_u64(j, "wake_latency_ns_total", v->stats.wake_latency_ns);
	json_u64(j, "wake_latency_ns_max", v->stats.wake_latency_max_ns);
	json_u64(j, "pvtick_hz", v->pvt.hz);
	json_u64(j, "pvtick_delivered", v->pvt.delivered);
	json_u64(j, "pvtick_suppressed", v->pvt.nsuppressed);
	json_close(j, '}');
}

static void stats_sysidle(struct json *j, const struct vm *vm)
{
	static const char *const names[5] = {
		"NOT", "SHORT", "LONG", "FULL", "FULL_NOTED" };
	struct idle_stats st;
	uint64_t total = 0;

	idle_get_stats(&st);
	if (!st.enabled)
		return;
	json_open(j, "sysidle", '{');
	json_u64(j, "timekeeper", (uint64_t)st.timekeeper);
	json_u64(j, "delay_ns", st.delay_ns);
	json_u64(j, "tick_period_ns", st.tick_period_ns);
	json_open(j, "state_ns", '{');
	for (int i = 0; i < 5; i++)
		json_u64(j, names[i], st.state_ns[i]);
	json_close(j, '}');
	json_u64(j, "full_idle_periods", st.full_idle_periods);
	json_u64(j, "tick_restarts", st.tick_restarts);
	json_open(j, "detection_latency_ns", '{');
	json_u64(j, "count", st.lat_count);
	json_u64(j, "min", st.lat_min);
	json_u64(j, "median", st.lat_median);
	json_u64(j, "p99", st.lat_p99);
	json_u64(j, "mean", st.lat_count ? st.lat_sum / st.lat_count : 0);
	json_u64(j, "max", st.lat_max);
	json_close(j, '}');
	json_open(j, "ticks_suppressed", '[');
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		json_sep(j);
		fprintf(j->f, "%" PRIu64, vm->vcpus[i].pvt.nsuppressed);
		j->need_comma = true;
		total += vm->vcpus[i].pvt.nsuppressed;
	}
	json_close(j, ']');
	json_u64(j, "ticks_suppressed_total", total);
	json_u64(j, "housekeeping_timer_wakeups", housekeeping_timer_wakeups());
	json_u64(j, "housekeeping_kicks", housekeeping_kicks());
	json_u64(j, "scans", st.scans);
	json_u64(j, "force_exits", st.force_exits);
	json_u64(j, "violations", st.violations);
	json_close(j, '}');
}

/* The control socket's pause / resume counters (the same as status). */
static void stats_pause(struct json *j)
{
	struct vm_status st = { 0 };

	pause_read_status(&st);
	json_open(j, "pause", '{');
	json_u64(j, "pauses", st.pauses);
	json_u64(j, "resumes_requested", st.resumes_requested);
	json_u64(j, "resumes_self", st.resumes_self);
	json_close(j, '}');
}

/* Caller: every vCPU and the housekeeping thread have been joined. */
int stats_write(struct vm *vm, const char *path, int status)
{
	struct json j = { .f = fopen(path, "w") };

	if (!j.f) {
		fprintf(stderr, "vmm: cannot write --stats-json '%s': %s\n",
			path, strerror(errno));
		return -1;
	}
	json_open(&j, NULL, '{');
	json_str(&j, "vmm", "sysidle-vmm");
	json_u64(&j, "exit_status", (uint64_t)status);
	json_u64(&j, "cpus", vm->ncpus);
	json_u64(&j, "mem_bytes", vm->ram_size);
	json_open(&j, "housekeeping", '{');
	json_u64(&j, "host_wakeups", housekeeping_wakeups());
	json_u64(&j, "timer_wakeups", housekeeping_timer_wakeups());
	json_u64(&j, "kicks", housekeeping_kicks());
	json_u64(&j, "timers_fired", housekeeping_timers_fired());
	json_close(&j, '}');
	stats_sysidle(&j, vm);
	stats_pause(&j);
	json_open(&j, "vcpus", '[');
	for (unsigned int i = 0; i < vm->ncpus; i++)
		stats_vcpu(&j, &vm->vcpus[i]);
	json_close(&j, ']');
	json_close(&j, '}');
	fputc('\n', j.f);
	if (ferror(j.f) | fclose(j.f)) {
		fprintf(stderr, "vmm: cannot write --stats-json '%s'\n", path);
		return -1;
	}
	return 0;
}
