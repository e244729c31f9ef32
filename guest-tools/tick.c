// SPDX-License-Identifier: GPL-2.0-only
/*
 * The periodic tick on the calling CPU (CPU 0): a LAPIC periodic timer at hz,
 * counting jiffies. All tick code lives here, so that a paravirtual tick can
 * replace it in one place.
 */
#include "rt.h"

volatile u64 jiffies;

static void tick_handler(struct irq_frame *f)
{
	(void)f;
	jiffies++;
}

void tick_start(u32 hz)
{
	if (!hz)
		return; /* no tick at all */
	irq_set_handler(VEC_TICK, tick_handler);
	timer_periodic(VEC_TICK, (u32)(GUEST_APIC_TIMER_HZ / hz));
}
