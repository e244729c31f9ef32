/* SPDX-License-Identifier: GPL-2.0-only */
/* Events by kind over the last minute (rate_window.h). */
#include "base/rate_window.h"

void rate_window_add(_Atomic uint32_t *epoch, _Atomic uint32_t *count,
		     unsigned int n, unsigned int k, uint64_t now)
{
	uint32_t e = (uint32_t)(now >> RATE_SHIFT) + 1; /* 0: never used */
	unsigned int b = e % RATE_BUCKETS;
	_Atomic uint32_t *c = count + (size_t)b * n;

	/* relaxed: one writer; readers take a snapshot */
	if (atomic_load_explicit(&epoch[b], memory_order_relaxed) != e) {
		for (unsigned int i = 0; i < n; i++)
			atomic_store_explicit(&c[i], 0, memory_order_relaxed);
		atomic_store_explicit(&epoch[b], e, memory_order_relaxed);
	}
	atomic_store_explicit(&c[k], atomic_load_explicit(
		&c[k], memory_order_relaxed) + 1, memory_order_relaxed);
}

uint64_t rate_window_recent(const _Atomic uint32_t *epoch,
			    const _Atomic uint32_t *count, unsigned int n,
			    unsigned int k, uint64_t now, uint64_t *span_ns)
{
	uint32_t e = (uint32_t)(now >> RATE_SHIFT) + 1;
	uint64_t sum = 0, oldest;

	for (uint32_t i = 0; i < RATE_WINDOW && i < e; i++) {
		unsigned int b = (e - i) % RATE_BUCKETS;

		/* relaxed: a snapshot of another thread's counters */
		if (atomic_load_explicit(&epoch[b], memory_order_relaxed) ==
		    e - i)
			sum += atomic_load_explicit(&count[(size_t)b * n + k],
						    memory_order_relaxed);
	}
	oldest = (uint64_t)(e > RATE_WINDOW ? e - RATE_WINDOW : 0) << RATE_SHIFT;
	*span_ns = now > oldest ? now - oldest : 0;
	return sum;
}
