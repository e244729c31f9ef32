/* SPDX-License-Identifier: GPL-2.0-only */
/* Now on CLOCK_MONOTONIC: see monotonic.h. */
#include <time.h>

#include "monotonic.h"

/* Any thread: the clock, read once for each of the units below. */
static struct timespec monotonic_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts;
}

uint64_t monotonic_ns(void)
{
	struct timespec ts = monotonic_now();

	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int64_t monotonic_ms(void)
{
	struct timespec ts = monotonic_now();

	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double monotonic_s(void)
{
	struct timespec ts = monotonic_now();

	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
