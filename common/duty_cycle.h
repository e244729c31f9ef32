/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A VM's duty cycle: how much of the last minute, hour and day it spent
 * fully idle (FULL_NOTED), its longest busy stretch and when it last left
 * full idle. Fed only at its changes (into and out of full idle) by whoever
 * already sees them (the VMM's export and hooks threads, the libvirt
 * bridge's scan); no timer, no clock of its own: every figure is computed
 * when it is read, the interval since the last change included.
 *
 * Bounded memory, whatever the rate of changes: rings of the fully-idle
 * time per bucket, 61 buckets of a second and 1441 of a minute, counted
 * from the start of the tracking. A window of W is the W before the
 * current bucket plus what has elapsed of it: its span is at least W and
 * under W plus one bucket (1 s for the minute, 1 min for the hour and the
 * day), reported with the ratio, and the ratio is exact over that span.
 * Younger than W, the window is the whole time tracked (span below W).
 *
 * A busy stretch runs from the start (or a leave of full idle) to the next
 * entry into full idle; only completed ones count as longest. The day's
 * longest is the longest of those ending within the 24 h window.
 *
 * One struct per VM, used by one thread at a time (the caller's lock, if
 * any).
 */
#ifndef SYSIDLE_COMMON_DUTY_CYCLE_H
#define SYSIDLE_COMMON_DUTY_CYCLE_H

#include <stdbool.h>
#include <stdint.h>

#define DUTY_SEC_NS 1000000000ull
#define DUTY_MIN_NS (60ull * DUTY_SEC_NS)
#define DUTY_SEC_BUCKETS 61   /* 1 min + the current second */
#define DUTY_MIN_BUCKETS 1441 /* 24 h + the current minute */

enum duty_window { DUTY_1M, DUTY_1H, DUTY_24H, DUTY_WINDOWS };

struct duty_cycle {
	uint64_t start_ns;        /* the tracking began (monotonic) */
	uint64_t last_ns;         /* the latest time fed */
	bool idle;                /* fully idle since @stretch_ns */
	uint64_t stretch_ns;      /* the current stretch (idle or busy) began */
	uint64_t idle_done_ns;    /* fully idle in the periods ended */
	uint64_t longest_busy_ns; /* the longest completed busy stretch */
	uint64_t left_unix_ms;    /* the last leave of full idle (0: none) */
	uint64_t periods;         /* entries into full idle */
	uint64_t sec_cur, min_cur; /* the buckets holding @last_ns */
	uint64_t sec_idle[DUTY_SEC_BUCKETS]; /* fully idle ns per second */
	uint64_t min_idle[DUTY_MIN_BUCKETS]; /* ... per minute */
	uint64_t min_busy[DUTY_MIN_BUCKETS]; /* longest busy stretch ended
					       * in the minute */
};

/* One window as of a reading. */
struct duty_figure {
	uint64_t span_ns;  /* what the window covers (see above) */
	uint64_t idle_ns;  /* fully idle within it */
	unsigned int permille; /* idle / span, rounded, 0..1000 (0: span 0) */
};

struct duty_report {
	struct duty_figure w[DUTY_WINDOWS]; /* 1 min, 1 h, 24 h */
	uint64_t tracked_ns;       /* since the tracking began */
	bool idle;                 /* fully idle now */
	uint64_t stretch_ns;       /* how long the current stretch has lasted */
	uint64_t idle_total_ns;    /* fully idle since the start, now included */
	uint64_t idle_done_ns;     /* ... in the periods ended only */
	uint64_t longest_busy_ns;  /* completed stretches, since the start */
	uint64_t longest_busy_24h_ns; /* completed, ended within w[DUTY_24H] */
	uint64_t left_unix_ms;     /* the last leave of full idle, 0: none */
	uint64_t periods;          /* entries into full idle */
};

/* @d: any memory (it is overwritten). The tracking begins at @start_ns,
 * busy. */
void duty_cycle_init(struct duty_cycle *d, uint64_t start_ns);

/* @d initialised. At @t_ns (monotonic; earlier than the last time fed is
 * taken as that time) the VM is fully idle (@idle) or not; @unix_ms is the
 * same instant on the wall clock (kept as the leave time). The same value
 * as before only moves the time on: the caller may pass every state change
 * of its machine. Bounded time whatever the gap since the last call. */
void duty_cycle_set(struct duty_cycle *d, uint64_t t_ns, uint64_t unix_ms,
		    bool idle);

/* @d initialised, not changed meanwhile. The figures at @now_ns (earlier
 * than the last time fed is taken as that time), into @r. */
void duty_cycle_read(const struct duty_cycle *d, uint64_t now_ns,
		     struct duty_report *r);

/* One minute bucket as of a reading: where it began (monotonic, the
 * tracking's minutes), how much of it has elapsed, of which fully idle. */
struct duty_minute {
	uint64_t start_ns, span_ns, idle_ns;
};

/* @d initialised, not changed meanwhile; @out holds @n entries. The last
 * @n minute buckets at @now_ns (at most DUTY_MIN_BUCKETS; none before the
 * tracking began), oldest first, the current one (partly elapsed, the
 * open period in) last, into @out. Returns how many. */
unsigned int duty_cycle_minutes(const struct duty_cycle *d, uint64_t now_ns,
				struct duty_minute *out, unsigned int n);

/* The window's name: "1m", "1h", "24h" (NULL: not a window). */
const char *duty_window_name(int w);

#endif
