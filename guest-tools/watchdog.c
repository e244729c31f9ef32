// SPDX-License-Identifier: GPL-2.0-only
/*
 * The watchdog: every wait in the runtime polls it, so an image that has
 * not finished within the deadline (timeout= seconds of TSC time) exits
 * with EXIT_WATCHDOG instead of hanging.
 */
#include "rt.h"

static u64 deadline;
static u64 watchdog_s;

void watchdog_start(u64 seconds)
{
	watchdog_s = seconds;
	deadline = seconds ? rdtsc() + seconds * tsc_khz * 1000u : 0;
}

void watchdog_check(void)
{
	if (deadline && rdtsc() > deadline) {
		printf("FAIL - watchdog: not finished within %llu s\n",
		       (unsigned long long)watchdog_s);
		guest_exit(EXIT_WATCHDOG);
	}
}

bool wait_u32(volatile u32 *p, u32 v, u64 ns)
{
	u64 end = rdtsc() + ns_to_tsc(ns);

	while (*p < v) {
		if (rdtsc() > end)
			return false;
		watchdog_check();
		cpu_relax();
	}
	return true;
}
