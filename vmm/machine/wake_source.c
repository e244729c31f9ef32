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

void wake_tally_add(struct wake_tally *t, int s, uint32_t detail,
		    uint64_t now)
{
	if (s < 0 || s >= WAKE_SOURCES)
		s = WAKE_SRC_OTHER;
	relaxed_inc64(&t->total[s]);
	/* relaxed: one writer; readers take a snapshot (wake_tally_recent) */
	atomic_store_explicit(&t->detail[s], detail, memory_order_relaxed);
	rate_window_add(t->epoch, &t->count[0][0], WAKE_SOURCES,
			(unsigned int)s, now);
}

uint64_t wake_tally_recent(const struct wake_tally *t, int s, uint64_t now,
			   uint64_t *span_ns)
{
	return rate_window_recent(t->epoch, &t->count[0][0], WAKE_SOURCES,
				  (unsigned int)s, now, span_ns);
}
