/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The "wake_sources" member of the status object (control.h): what ended
 * full idle, and what wakes each vCPU from HLT, busiest first. Export
 * thread.
 */
#include <stdio.h>
#include <stdlib.h>

#include "export/control.h"
#include "machine/wake_source.h"

/* One vCPU's wake-ups from one source, for the sort. */
struct wake_row {
	unsigned int vcpu;
	int src;
	uint32_t detail;
	uint64_t total, recent;
};

/* Busiest in the last minute first, then by count, then by vCPU. */
static int row_cmp(const void *a, const void *b)
{
	const struct wake_row *x = a, *y = b;

	if (x->recent != y->recent)
		return x->recent < y->recent ? 1 : -1;
	if (x->total != y->total)
		return x->total < y->total ? 1 : -1;
	if (x->vcpu != y->vcpu)
		return x->vcpu < y->vcpu ? -1 : 1;
	return x->src - y->src;
}

/* A rate with 3 decimals: @n events over @span_ns. */
static struct json_object *per_second(uint64_t n, uint64_t span_ns)
{
	char rate[32];
	double r = span_ns ? (double)n * 1e9 / (double)span_ns : 0;

	snprintf(rate, sizeof(rate), "%.3f", r);
	return json_object_new_double_s(r, rate);
}

static struct json_object *row_json(const struct wake_row *r,
				    uint64_t span_ns)
{
	struct json_object *o = json_object_new_object();
	char what[48];

	wake_source_describe(r->src, r->detail, what, sizeof(what));
	json_object_object_add(o, "vcpu", json_object_new_int64(r->vcpu));
	json_object_object_add(o, "source", json_object_new_string(
				       wake_source_name(r->src)));
	json_object_object_add(o, "last", json_object_new_string(what));
	json_object_object_add(o, "total", json_object_new_uint64(r->total));
	json_object_object_add(o, "last_minute",
			       json_object_new_uint64(r->recent));
	json_object_object_add(o, "per_second", per_second(r->recent, span_ns));
	return o;
}

/* [{"reason":NAME,"total":N,"last_minute":n,"per_second":x},...]: the
 * housekeeping thread's wake-ups by what woke it. */
static struct json_object *housekeeping_json(const struct vm_status *st)
{
	struct json_object *a = json_object_new_array();

	for (unsigned int i = 0; a && i < st->n_hk_by; i++) {
		const struct hk_wake_count *c = &st->hk_by[i];
		struct json_object *o = json_object_new_object();

		json_object_object_add(o, "reason",
				       json_object_new_string(c->name));
		json_object_object_add(o, "total",
				       json_object_new_uint64(c->total));
		json_object_object_add(o, "last_minute",
				       json_object_new_uint64(c->recent));
		json_object_object_add(o, "per_second",
				       per_second(c->recent, c->span_ns));
		json_object_array_add(a, o);
	}
	return a;
}

/* {"full_idle_exits":{SOURCE:N,...},"window_s":S,"vcpus":[ROW,...],
 * "housekeeping":[...]}: every vCPU and source that woke it at least
 * once, and what woke the housekeeping thread. NULL when out of memory. */
struct json_object *control_wake_json(const struct vm_status *st)
{
	struct json_object *w = json_object_new_object();
	struct json_object *exits = json_object_new_object();
	struct json_object *rows = json_object_new_array();
	struct wake_row *r = calloc((size_t)st->ncpus * WAKE_SOURCES + 1,
				    sizeof(*r));
	uint64_t span = st->ncpus ? st->vcpus[0].recent_span_ns : 0;
	size_t n = 0;

	if (!w || !exits || !rows || !r) {
		free(r);
		json_object_put(w);
		json_object_put(exits);
		json_object_put(rows);
		return NULL;
	}
	for (int s = 0; s < WAKE_SOURCES; s++)
		json_object_object_add(exits, wake_source_name(s),
				       json_object_new_uint64(
					       st->full_exits_by[s]));
	for (unsigned int i = 0; i < st->ncpus; i++)
		for (int s = 0; s < WAKE_SOURCES; s++)
			if (st->vcpus[i].wakeups[s])
				r[n++] = (struct wake_row){
					.vcpu = st->vcpus[i].id, .src = s,
					.detail = st->vcpus[i].detail[s],
					.total = st->vcpus[i].wakeups[s],
					.recent = st->vcpus[i].recent[s],
				};
	qsort(r, n, sizeof(*r), row_cmp);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(rows, row_json(&r[i], span));
	free(r);
	json_object_object_add(w, "full_idle_exits", exits);
	json_object_object_add(w, "window_s", json_object_new_double(
				       (double)span / 1e9));
	json_object_object_add(w, "vcpus", rows);
	json_object_object_add(w, "housekeeping", housekeeping_json(st));
	return w;
}
