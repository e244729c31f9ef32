/* SPDX-License-Identifier: GPL-2.0-only */
/* Time (time.h). */
#include <time.h>

#include "base/time.h"

static uint64_t t0_ns;
static int64_t unix_minus_mono_ns; /* wall clock - monotonic, at start */

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void time_init(void)
{
	struct timespec rt;
	uint64_t mono = now_ns();

	clock_gettime(CLOCK_REALTIME, &rt);
	t0_ns = mono;
	unix_minus_mono_ns = (int64_t)rt.tv_sec * 1000000000ll + rt.tv_nsec -
			     (int64_t)mono;
}

uint64_t time_start_ns(void)
{
	return t0_ns;
}

uint64_t mono_to_unix_ms(uint64_t mono_ns)
{
	return (uint64_t)((int64_t)mono_ns + unix_minus_mono_ns) / 1000000u;
}
