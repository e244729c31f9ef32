/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The VM's recent idle state changes, for the control socket's "history"
 * request (vmm/export/README.md): a ring of the last HISTORY_MAX changes,
 * fed by the export thread from the events it reads anyway (export_drain),
 * so it costs no timer, no wake-up and nothing on a vCPU's wake path. Only
 * the last HISTORY_SPAN_S seconds are ever answered; a ring that overwrote
 * a change within the span asked says from when it is whole
 * ("truncated_before_unix_ms"). Export thread only.
 */
#include <stdio.h>
#include <string.h>

#include <sysidle/sysidle.h>

#include "export/history.h"
#include "machine/wake_source.h"

struct history_entry {
	uint64_t mono_ns, unix_ms;
	int8_t from, to;
	int16_t cpu;      /* -1: none */
	int16_t src;      /* enum wake_source, -1: not known */
	uint32_t detail;
};

static struct {
	struct history_entry e[HISTORY_MAX];
	uint64_t added;            /* entries ever added */
	uint64_t lost_mono_ns;     /* the newest entry overwritten */
	bool lost;
} hist;

/* Export thread: the ring empty, as at the VM's start. */
void history_reset(void)
{
	memset(&hist, 0, sizeof(hist));
}

/* Export thread, @ev an event read from the queue: a state change is
 * kept, anything else ignored. */
void history_add(const struct vm_event *ev)
{
	struct history_entry *e;

	if (ev->kind != VM_EV_STATE)
		return;
	e = &hist.e[hist.added % HISTORY_MAX];
	if (hist.added >= HISTORY_MAX) {
		hist.lost = true;
		hist.lost_mono_ns = e->mono_ns;
	}
	*e = (struct history_entry){
		.mono_ns = ev->mono_ns, .unix_ms = ev->unix_ms,
		.from = (int8_t)ev->from, .to = (int8_t)ev->to,
		.cpu = (int16_t)(ev->cpu < 0 ? -1 : ev->cpu),
		.src = (int16_t)(ev->src >= 0 && ev->src < WAKE_SOURCES ?
				 ev->src : -1),
		.detail = ev->detail,
	};
	hist.added++;
}

/* A state's name, "?" for a value out of range (never from the queue). */
static const char *state_name(int s)
{
	return s >= SYSIDLE_NOT && s <= SYSIDLE_FULL_NOTED ?
		sysidle_state_name(s) : "?";
}

/* One kept change as the reply's object; NULL when out of memory (the
 * array then skips it). */
static struct json_object *entry_json(const struct history_entry *e)
{
	struct json_object *o = json_object_new_object();
	char what[48];

	if (!o)
		return NULL;
	json_object_object_add(o, "unix_ms", json_object_new_uint64(e->unix_ms));
	json_object_object_add(o, "from", json_object_new_string(
				       state_name(e->from)));
	json_object_object_add(o, "to", json_object_new_string(
				       state_name(e->to)));
	json_object_object_add(o, "vcpu", json_object_new_int(e->cpu));
	if (e->from == SYSIDLE_FULL_NOTED && e->to != SYSIDLE_FULL_NOTED &&
	    e->src >= 0) {
		wake_source_describe(e->src, e->detail, what, sizeof(what));
		json_object_object_add(o, "by", json_object_new_string(
					       wake_source_name(e->src)));
		json_object_object_add(o, "by_detail",
				       json_object_new_string(what));
	}
	return o;
}

/* Export thread: [{"start_unix_ms":T,"span_s":S,"full_idle_ratio":R},...]
 * for the minutes of the last @since_s seconds (whole minutes of the VM's
 * life, the current one partly elapsed): the duty cycle's, complete
 * whatever the ring above lost. NULL: out of memory. */
static struct json_object *minutes_json(unsigned int since_s, uint64_t now)
{
	struct duty_minute m[HISTORY_SPAN_S / 60 + 2];
	unsigned int n = export_duty_minutes(now, m, since_s / 60 + 2);
	struct json_object *a = json_object_new_array();
	uint64_t span = (uint64_t)since_s * 1000000000ull;
	uint64_t from = now > span ? now - span : 0;
	char ratio[16];

	for (unsigned int i = 0; a && i < n; i++) {
		struct json_object *o = json_object_new_object();
		double r = m[i].span_ns ? (double)m[i].idle_ns /
					  (double)m[i].span_ns : 0;

		if (!o)
			break;
		if (m[i].start_ns + m[i].span_ns <= from) {
			json_object_put(o);
			continue; /* ended before the span */
		}
		snprintf(ratio, sizeof(ratio), "%.3f", r);
		json_object_object_add(o, "start_unix_ms", json_object_new_uint64(
					       mono_to_unix_ms(m[i].start_ns)));
		json_object_object_add(o, "span_s", json_object_new_double(
					       (double)m[i].span_ns / 1e9));
		json_object_object_add(o, "full_idle_ratio",
				       json_object_new_double_s(r, ratio));
		json_object_array_add(a, o);
	}
	return a;
}

/* Export thread; @st a fresh snapshot, @since_s at most HISTORY_SPAN_S,
 * @now CLOCK_MONOTONIC not before any change added. */
struct json_object *history_json(const struct vm_status *st,
				 unsigned int since_s, uint64_t now)
{
	struct json_object *r = json_object_new_object();
	struct json_object *a = json_object_new_array();
	uint64_t span = (uint64_t)since_s * 1000000000ull;
	uint64_t from = now > span ? now - span : 0;
	uint64_t start = now > st->uptime_ns ? now - st->uptime_ns : 0;
	uint64_t n = hist.added < HISTORY_MAX ? hist.added : HISTORY_MAX;
	uint64_t first = hist.added - n;

	if (!r || !a) {
		json_object_put(r);
		json_object_put(a);
		return NULL;
	}
	if (from < start)
		from = start;
	for (uint64_t i = first; i < hist.added; i++) {
		const struct history_entry *e = &hist.e[i % HISTORY_MAX];

		if (e->mono_ns >= from)
			json_object_array_add(a, entry_json(e));
	}
	json_object_object_add(r, "since_s", json_object_new_int(since_s));
	json_object_object_add(r, "from_unix_ms", json_object_new_uint64(
				       mono_to_unix_ms(from)));
	json_object_object_add(r, "now_unix_ms", json_object_new_uint64(
				       mono_to_unix_ms(now)));
	json_object_object_add(r, "start_unix_ms", json_object_new_uint64(
				       mono_to_unix_ms(start)));
	json_object_object_add(r, "sysidle",
			       json_object_new_boolean(st->sysidle));
	json_object_object_add(r, "state", json_object_new_string(
				       state_name(st->state)));
	json_object_object_add(r, "capacity", json_object_new_int(HISTORY_MAX));
	if (hist.lost && hist.lost_mono_ns >= from && n)
		json_object_object_add(r, "truncated_before_unix_ms",
			json_object_new_uint64(hist.e[first % HISTORY_MAX].unix_ms));
	json_object_object_add(r, "changes", a);
	json_object_object_add(r, "minutes", minutes_json(since_s, now));
	return r;
}
