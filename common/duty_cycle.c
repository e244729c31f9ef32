/* SPDX-License-Identifier: GPL-2.0-only */
/* A VM's duty cycle from its full-idle changes: see duty_cycle.h. */
#include <string.h>

#include "duty_cycle.h"

/* One ring of buckets: @n buckets of @width ns, @cur the index (counted
 * from the start) of the one holding the last time fed. */
struct ring {
	uint64_t *idle;
	uint64_t *busy; /* NULL: the seconds' ring keeps no busy stretches */
	unsigned int n;
	uint64_t width;
	uint64_t *cur;
};

/* The rings of @d (initialised): views on its arrays, valid while it is. */
static struct ring sec_ring(struct duty_cycle *d)
{
	return (struct ring){ d->sec_idle, NULL, DUTY_SEC_BUCKETS, DUTY_SEC_NS,
			      &d->sec_cur };
}

static struct ring min_ring(struct duty_cycle *d)
{
	return (struct ring){ d->min_idle, d->min_busy, DUTY_MIN_BUCKETS,
			      DUTY_MIN_NS, &d->min_cur };
}

/* Any values. */
static uint64_t max64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/* Any values. */
static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* @r of a struct duty_cycle, @from <= @to (ns since the start, @from in
 * bucket *r->cur or later): the buckets up to @to's made current (those
 * passed over cleared), and [@from, @to) added to them when @idle. At
 * most r->n buckets are touched, whatever the gap. */
static void ring_advance(const struct ring *r, uint64_t from, uint64_t to,
			 bool idle)
{
	uint64_t k_to = to / r->width, k;
	uint64_t first_kept = k_to + 1 >= r->n ? k_to + 1 - r->n : 0;

	for (k = max64(*r->cur + 1, first_kept); k <= k_to; k++) {
		r->idle[k % r->n] = 0;
		if (r->busy)
			r->busy[k % r->n] = 0;
	}
	if (k_to > *r->cur)
		*r->cur = k_to;
	if (!idle || to <= from)
		return;
	from = max64(from, first_kept * r->width);
	for (k = from / r->width; k <= k_to && from < to; k++) {
		uint64_t end = min64(to, (k + 1) * r->width);

		r->idle[k % r->n] += end - from;
		from = end;
	}
}

void duty_cycle_init(struct duty_cycle *d, uint64_t start_ns)
{
	memset(d, 0, sizeof(*d));
	d->start_ns = start_ns;
	d->last_ns = start_ns;
	d->stretch_ns = start_ns;
}

void duty_cycle_set(struct duty_cycle *d, uint64_t t_ns, uint64_t unix_ms,
		    bool idle)
{
	struct ring sr = sec_ring(d), mr = min_ring(d);
	uint64_t from, to;

	t_ns = max64(t_ns, d->last_ns);
	from = d->last_ns - d->start_ns;
	to = t_ns - d->start_ns;
	ring_advance(&sr, from, to, d->idle);
	ring_advance(&mr, from, to, d->idle);
	d->last_ns = t_ns;
	if (idle == d->idle)
		return;
	if (idle) { /* a busy stretch completed */
		uint64_t len = t_ns - d->stretch_ns;
		uint64_t *b = &d->min_busy[d->min_cur % DUTY_MIN_BUCKETS];

		d->longest_busy_ns = max64(d->longest_busy_ns, len);
		*b = max64(*b, len);
		d->periods++;
	} else {
		d->idle_done_ns += t_ns - d->stretch_ns;
		d->left_unix_ms = unix_ms;
	}
	d->idle = idle;
	d->stretch_ns = t_ns;
}

/* @d at @now (ns since the start, not before d->last_ns): the window of
 * @nb full buckets of ring @r (plus the current one), into @f; the longest
 * busy stretch ended within it into @busy when the ring keeps them. */
static void ring_read(const struct duty_cycle *d, const struct ring *r,
		      unsigned int nb, uint64_t now, struct duty_figure *f,
		      uint64_t *busy)
{
	uint64_t cur = now / r->width, first = cur >= nb ? cur - nb : 0;
	uint64_t ws = first * r->width, last = d->last_ns - d->start_ns;

	f->span_ns = now - ws;
	f->idle_ns = 0;
	for (uint64_t k = first; k <= cur && k <= *r->cur; k++) {
		f->idle_ns += r->idle[k % r->n];
		if (busy && r->busy)
			*busy = max64(*busy, r->busy[k % r->n]);
	}
	if (d->idle) /* the open period: [last, now) */
		f->idle_ns += now - max64(last, ws);
	f->permille = f->span_ns ? (unsigned int)((f->idle_ns * 1000 +
				    f->span_ns / 2) / f->span_ns) : 0;
}

void duty_cycle_read(const struct duty_cycle *d, uint64_t now_ns,
		     struct duty_report *r)
{
	/* the rings are only read: their pointers are not const for
	 * ring_advance's sake */
	struct ring sr = sec_ring((struct duty_cycle *)d);
	struct ring mr = min_ring((struct duty_cycle *)d);
	uint64_t now = max64(now_ns, d->last_ns) - d->start_ns;

	memset(r, 0, sizeof(*r));
	ring_read(d, &sr, DUTY_SEC_BUCKETS - 1, now, &r->w[DUTY_1M], NULL);
	ring_read(d, &mr, 60, now, &r->w[DUTY_1H], NULL);
	ring_read(d, &mr, DUTY_MIN_BUCKETS - 1, now, &r->w[DUTY_24H],
		  &r->longest_busy_24h_ns);
	r->tracked_ns = now;
	r->idle = d->idle;
	r->stretch_ns = now - (d->stretch_ns - d->start_ns);
	r->idle_done_ns = d->idle_done_ns;
	r->idle_total_ns = d->idle_done_ns + (d->idle ? r->stretch_ns : 0);
	r->longest_busy_ns = d->longest_busy_ns;
	r->left_unix_ms = d->left_unix_ms;
	r->periods = d->periods;
}

unsigned int duty_cycle_minutes(const struct duty_cycle *d, uint64_t now_ns,
				struct duty_minute *out, unsigned int n)
{
	uint64_t now = max64(now_ns, d->last_ns) - d->start_ns;
	uint64_t last = d->last_ns - d->start_ns, cur = now / DUTY_MIN_NS;
	uint64_t first;
	unsigned int m = 0;

	if (n > DUTY_MIN_BUCKETS)
		n = DUTY_MIN_BUCKETS;
	first = cur + 1 >= n ? cur + 1 - n : 0;
	for (uint64_t k = first; k <= cur; k++, m++) {
		uint64_t a = k * DUTY_MIN_NS, b = min64(now, a + DUTY_MIN_NS);

		out[m].start_ns = d->start_ns + a;
		out[m].span_ns = b - a;
		out[m].idle_ns = k <= d->min_cur ?
				 d->min_idle[k % DUTY_MIN_BUCKETS] : 0;
		if (d->idle && b > max64(a, last)) /* the open period */
			out[m].idle_ns += b - max64(a, last);
	}
	return m;
}

/* Any @w: NULL outside the windows. */
const char *duty_window_name(int w)
{
	static const char *const names[DUTY_WINDOWS] = { "1m", "1h", "24h" };

	return w >= 0 && w < DUTY_WINDOWS ? names[w] : NULL;
}
