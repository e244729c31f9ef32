/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Events counted by kind over the last minute (rate_window.c), for rates:
 * buckets of 2^RATE_SHIFT ns (4.3 s), the RATE_WINDOW newest summed, the
 * current one included. One thread counts (no lock, no RMW: relaxed
 * stores); any thread reads a snapshot, which may mix the values just
 * before and just after an event. The caller owns the arrays:
 *   _Atomic uint32_t epoch[RATE_BUCKETS];
 *   _Atomic uint32_t count[RATE_BUCKETS][n];
 */
#ifndef VMM_BASE_RATE_WINDOW_H
#define VMM_BASE_RATE_WINDOW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define RATE_SHIFT 32
#define RATE_BUCKETS 16
#define RATE_WINDOW 14

/* The counting thread: one event of kind @k (< @n) at @now. */
void rate_window_add(_Atomic uint32_t *epoch, _Atomic uint32_t *count,
		     unsigned int n, unsigned int k, uint64_t now);
/* Any thread: events of kind @k in the last minute at @now, and the span
 * they were counted over (*@span_ns). */
uint64_t rate_window_recent(const _Atomic uint32_t *epoch,
			    const _Atomic uint32_t *count, unsigned int n,
			    unsigned int k, uint64_t now, uint64_t *span_ns);
/* One relaxed increment by the counter's only writer. */
static inline void relaxed_inc64(_Atomic uint64_t *p)
{
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed)
			      + 1, memory_order_relaxed);
}

#endif
