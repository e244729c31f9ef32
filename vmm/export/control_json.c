/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The control socket's JSON objects: the status object and the watch
 * events (protocol in vmm/export/README.md). Built with json-c; export thread.
 */
#include <stdio.h>

#include <sysidle/sysidle.h>

#include "export/control.h"
#include "machine/pause.h"
#include "machine/wake_source.h"

/* Seconds, as a JSON number with microsecond resolution. */
static struct json_object *json_seconds(uint64_t ns)
{
	char buf[32];

	snprintf(buf, sizeof(buf), "%llu.%06llu",
		 (unsigned long long)(ns / 1000000000ull),
		 (unsigned long long)(ns % 1000000000ull / 1000u));
	return json_object_new_double_s((double)ns / 1e9, buf);
}

static void add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

static void add_int(struct json_object *o, const char *key, int64_t v)
{
	json_object_object_add(o, key, json_object_new_int64(v));
}

/* Export thread: the "counters" member of the status object. */
static struct json_object *status_counters(const struct vm_status *st)
{
	struct json_object *c = json_object_new_object();
	struct json_object *ss = json_object_new_object();

	add_u64(c, "full_idle_periods", st->full_idle_periods);
	json_object_object_add(c, "full_idle_seconds",
			       json_seconds(st->full_idle_ns));
	add_u64(c, "ticks_suppressed", st->ticks_suppressed);
	add_u64(c, "host_timer_wakeups", st->host_timer_wakeups);
	add_u64(c, "housekeeping_wakeups", st->hk_wakeups);
	add_u64(c, "halt_exits", st->halt_exits);
	add_u64(c, "force_exits", st->force_exits);
	add_u64(c, "violations", st->violations);
	add_u64(c, "scans", st->scans);
	add_u64(c, "tick_restarts", st->tick_restarts);
	add_u64(c, "events_dropped", st->events_dropped);
	add_u64(c, "watch_dropped", st->watch_dropped);
	add_u64(c, "hooks_run", st->hooks_run);
	add_u64(c, "hooks_failed", st->hooks_failed);
	add_u64(c, "hooks_dropped", st->hooks_dropped);
	add_u64(c, "pauses", st->pauses);
	add_u64(c, "resumes_requested", st->resumes_requested);
	add_u64(c, "resumes_self", st->resumes_self);
	for (int s = 0; s < SYSIDLE_NR_STATES; s++)
		json_object_object_add(ss, sysidle_state_name(s),
				       json_seconds(st->state_ns[s]));
	json_object_object_add(c, "state_seconds", ss);
	return c;
}

/* A ratio @part / @whole as a JSON number with 6 decimals (0: @whole 0). */
static struct json_object *json_ratio(uint64_t part, uint64_t whole)
{
	double r = whole ? (double)part / (double)whole : 0;
	char buf[32];

	snprintf(buf, sizeof(buf), "%.6f", r);
	return json_object_new_double_s(r, buf);
}

/* Export thread: the "duty" member of the status object, from @d
 * (export_duty_read). */
static struct json_object *status_duty(const struct duty_report *d)
{
	struct json_object *o = json_object_new_object();
	struct json_object *ratio = json_object_new_object();
	struct json_object *span = json_object_new_object();
	struct json_object *idle = json_object_new_object();

	for (int w = 0; w < DUTY_WINDOWS; w++) {
		const char *k = duty_window_name(w);

		json_object_object_add(ratio, k, json_ratio(d->w[w].idle_ns,
							   d->w[w].span_ns));
		json_object_object_add(span, k, json_seconds(d->w[w].span_ns));
		json_object_object_add(idle, k, json_seconds(d->w[w].idle_ns));
	}
	json_object_object_add(o, "full_idle_ratio", ratio);
	json_object_object_add(o, "span_s", span);
	json_object_object_add(o, "full_idle_s", idle);
	json_object_object_add(o, "tracked_s", json_seconds(d->tracked_ns));
	json_object_object_add(o, "longest_busy_s",
			       json_seconds(d->longest_busy_ns));
	json_object_object_add(o, "longest_busy_24h_s",
			       json_seconds(d->longest_busy_24h_ns));
	add_u64(o, "left_full_idle_unix_ms", d->left_unix_ms);
	return o;
}

/* Export thread: the "idle_memory" member of the status object
 * (--idle-memory; mode "off" without it). */
static struct json_object *status_idle_memory(const struct idle_memory_status *m)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "mode", json_object_new_string(
				       idle_memory_mode_name(m->mode)));
	json_object_object_add(o, "delay_s", json_seconds(m->delay_ns));
	json_object_object_add(o, "swap_available",
			       json_object_new_boolean(m->swap_available));
	json_object_object_add(o, "zswap_enabled",
			       json_object_new_boolean(m->zswap_enabled));
	add_u64(o, "ram_bytes", m->ram_bytes);
	add_u64(o, "advised", m->advised);
	add_u64(o, "cancelled", m->cancelled);
	add_u64(o, "failed", m->failed);
	add_u64(o, "advised_bytes_total", m->advised_bytes_total);
	add_u64(o, "last_advised_bytes", m->last_advised_bytes);
	add_u64(o, "last_resident_before_bytes", m->last_resident_before_bytes);
	add_u64(o, "last_resident_after_bytes", m->last_resident_after_bytes);
	add_u64(o, "last_rss_anon_before_bytes", m->last_rss_anon_before_bytes);
	add_u64(o, "last_rss_anon_after_bytes", m->last_rss_anon_after_bytes);
	add_u64(o, "last_advised_unix_ms", m->last_unix_ms);
	json_object_object_add(o, "last_duration_s",
			       json_seconds(m->last_duration_ns));
	return o;
}

struct json_object *control_status_json(const struct vm_status *st,
					uint64_t now)
{
	struct json_object *vm = json_object_new_object();
	struct json_object *vcpus = json_object_new_array();

	json_object_object_add(vm, "name", json_object_new_string(st->name));
	json_object_object_add(vm, "uuid", json_object_new_string(st->uuid));
	add_int(vm, "pid", st->pid);
	json_object_object_add(vm, "sysidle",
			       json_object_new_boolean(st->sysidle));
	json_object_object_add(vm, "state", json_object_new_string(
				       sysidle_state_name(st->state)));
	add_int(vm, "state_num", st->state);
	json_object_object_add(vm, "paused",
			       json_object_new_boolean(st->paused));
	add_u64(vm, "since_unix_ms", st->since_unix_ms);
	json_object_object_add(vm, "in_state_s", json_seconds(
			now > st->since_ns ? now - st->since_ns : 0));
	json_object_object_add(vm, "uptime_s", json_seconds(st->uptime_ns));
	add_int(vm, "timekeeper", st->timekeeper);
	add_int(vm, "housekeeping_tid", st->hk_tid);
	for (unsigned int i = 0; i < st->ncpus; i++) {
		const struct vcpu_status *v = &st->vcpus[i];
		struct json_object *o = json_object_new_object();

		add_int(o, "id", v->id);
		add_int(o, "tid", v->tid);
		json_object_object_add(o, "idle",
				       json_object_new_boolean(v->halted));
		add_u64(o, "halt_exits", v->halt_exits);
		add_u64(o, "ticks_suppressed", v->ticks_suppressed);
		json_object_object_add(o, "halted_s",
				       json_seconds(v->halted_ns));
		json_object_array_add(vcpus, o);
	}
	json_object_object_add(vm, "vcpus", vcpus);
	json_object_object_add(vm, "counters", status_counters(st));
	json_object_object_add(vm, "wake_sources", control_wake_json(st));
	json_object_object_add(vm, "duty", status_duty(&st->duty));
	json_object_object_add(vm, "idle_memory",
			       status_idle_memory(&st->idle_memory));
	return vm;
}

/* {"event":"paused",...} / {"event":"resumed",...} */
static struct json_object *pause_event_json(const struct vm_event *ev)
{
	struct json_object *o = json_object_new_object();
	bool resumed = ev->kind == VM_EV_RESUMED;

	if (!o)
		return NULL;
	json_object_object_add(o, "event", json_object_new_string(
				       resumed ? "resumed" : "paused"));
	if (resumed)
		json_object_object_add(o, "reason", json_object_new_string(
					       pause_reason_name(ev->reason)));
	add_u64(o, "unix_ms", ev->unix_ms);
	if (resumed)
		add_u64(o, "paused_ms", ev->paused_ns / 1000000u);
	return o;
}

struct json_object *control_event_json(const struct vm_event *ev)
{
	struct json_object *o;

	if (ev->kind != VM_EV_STATE)
		return pause_event_json(ev);
	o = json_object_new_object();
	if (!o)
		return NULL;
	json_object_object_add(o, "event", json_object_new_string("state"));
	json_object_object_add(o, "from", json_object_new_string(
				       sysidle_state_name(ev->from)));
	json_object_object_add(o, "to", json_object_new_string(
				       sysidle_state_name(ev->to)));
	add_int(o, "vcpu", ev->cpu);
	add_u64(o, "unix_ms", ev->unix_ms);
	if (ev->from == SYSIDLE_FULL_NOTED)
		add_u64(o, "full_idle_ms", ev->full_idle_ns / 1000000u);
	if (ev->src >= 0 && wake_source_name(ev->src)) {
		char what[48];

		wake_source_describe(ev->src, ev->detail, what, sizeof(what));
		json_object_object_add(o, "by", json_object_new_string(
					       wake_source_name(ev->src)));
		json_object_object_add(o, "by_detail",
				       json_object_new_string(what));
	}
	return o;
}

struct json_object *control_dropped_json(uint64_t count)
{
	struct json_object *d = json_object_new_object();

	if (!d)
		return NULL;
	json_object_object_add(d, "event", json_object_new_string("dropped"));
	add_u64(d, "count", count);
	return d;
}
