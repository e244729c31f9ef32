/* SPDX-License-Identifier: GPL-2.0-only */
/* What wakes a vCPU from HLT, counted (wake_source.h). */
#include <stddef.h>
#include <stdio.h>

#include "machine/wake_source.h"

const char *wake_source_name(int s)
{
	static const char *const names[WAKE_SOURCES] = {
		[WAKE_SRC_LAPIC_TIMER] = "lapic-timer",
		[WAKE_SRC_PVTICK] = "pv-tick",
		[WAKE_SRC_IPI] = "ipi",
		[WAKE_SRC_DEVICE] = "device",
		[WAKE_SRC_SERIAL] = "serial-input",
		[WAKE_SRC_KICK] = "kick",
		[WAKE_SRC_SIGNAL] = "signal",
		[WAKE_SRC_OTHER] = "other",
	};

	return s >= 0 && s < WAKE_SOURCES ? names[s] : NULL;
}

const char *wake_timer_mode_name(uint32_t mode)
{
	static const char *const names[] = { "one-shot", "periodic",
					     "tsc-deadline" };

	return mode < 3 ? names[mode] : "unknown";
}

void wake_source_describe(int s, uint32_t detail, char *buf, size_t n)
{
	const char *name = wake_source_name(s);

	if (!name)
		name = "other";
	if (s == WAKE_SRC_LAPIC_TIMER)
		snprintf(buf, n, "%s %s", name, wake_timer_mode_name(detail));
	else if (s == WAKE_SRC_IPI)
		snprintf(buf, n, "%s from vcpu %u", name, detail);
	else if (s == WAKE_SRC_DEVICE && detail == WAKE_DETAIL_EXTINT)
		snprintf(buf, n, "%s extint", name);
	else if (s == WAKE_SRC_DEVICE)
		snprintf(buf, n, "%s vector 0x%02x", name, detail);
	else
		snprintf(buf, n, "%s", name);
}

/* The thread's own counters: relaxed loads and stores, no RMW (one
 * writer). */
static void relaxed_inc32(_Atomic uint32_t *p)
{
	atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed)
			      + 1, memory_order_relaxed);
}

void wake_tally_add(struct wake_tally *t, int s, uint32_t detail,
		    uint64_t now)
{
	uint32_t epoch = (uint32_t)(now >> WAKE_RATE_SHIFT) + 1;
	unsigned int b = epoch % WAKE_RATE_BUCKETS;

	if (s < 0 || s >= WAKE_SOURCES)
		s = WAKE_SRC_OTHER;
	/* relaxed: one writer; readers take a snapshot (wake_tally_recent) */
	atomic_store_explicit(&t->total[s],
		atomic_load_explicit(&t->total[s], memory_order_relaxed) + 1,
		memory_order_relaxed);
	atomic_store_explicit(&t->detail[s], detail, memory_order_relaxed);
	if (atomic_load_explicit(&t->bucket[b].epoch,
				 memory_order_relaxed) != epoch) {
		for (int i = 0; i < WAKE_SOURCES; i++)
			atomic_store_explicit(&t->bucket[b].count[i], 0,
					      memory_order_relaxed);
		atomic_store_explicit(&t->bucket[b].epoch, epoch,
				      memory_order_relaxed);
	}
	relaxed_inc32(&t->bucket[b].count[s]);
}

uint64_t wake_tally_recent(const struct wake_tally *t, int s, uint64_t now,
			   uint64_t *span_ns)
{
	uint32_t epoch = (uint32_t)(now >> WAKE_RATE_SHIFT) + 1;
	uint64_t sum = 0, oldest;

	for (unsigned int k = 0; k < WAKE_RATE_WINDOW && k < epoch; k++) {
		uint32_t e = epoch - k;
		unsigned int b = e % WAKE_RATE_BUCKETS;

		/* relaxed: a snapshot of another thread's counters */
		if (atomic_load_explicit(&t->bucket[b].epoch,
					 memory_order_relaxed) == e)
			sum += atomic_load_explicit(&t->bucket[b].count[s],
						    memory_order_relaxed);
	}
	oldest = (uint64_t)(epoch > WAKE_RATE_WINDOW ?
			    epoch - WAKE_RATE_WINDOW : 0) << WAKE_RATE_SHIFT;
	*span_ns = now > oldest ? now - oldest : 0;
	return sum;
}
