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

static struct json_object *row_json(const struct wake_row *r,
				    uint64_t span_ns)
{
	struct json_object *o = json_object_new_object();
	char what[48], rate[32];
	double per_s = span_ns ? (double)r->recent * 1e9 / (double)span_ns : 0;

	wake_source_describe(r->src, r->detail, what, sizeof(what));
	snprintf(rate, sizeof(rate), "%.3f", per_s);
	json_object_object_add(o, "vcpu", json_object_new_int64(r->vcpu));
	json_object_object_add(o, "source", json_object_new_string(
				       wake_source_name(r->src)));
	json_object_object_add(o, "last", json_object_new_string(what));
	json_object_object_add(o, "total", json_object_new_uint64(r->total));
	json_object_object_add(o, "last_minute",
			       json_object_new_uint64(r->recent));
	json_object_object_add(o, "per_second",
			       json_object_new_double_s(per_s, rate));
	return o;
}

/* {"full_idle_exits":{SOURCE:N,...},"window_s":S,"vcpus":[ROW,...]}:
 * every vCPU and source that woke it at least once. NULL when out of
 * memory. */
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
	return w;
}
