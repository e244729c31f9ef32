/* SPDX-License-Identifier: GPL-2.0-only */
/* Sample statistics for the workloads: heapsort (O(n log n): guest code is
 * slow on some hosts), then min / median / max. */
#ifndef GUEST_STATS_H
#define GUEST_STATS_H

#include "rt.h"

void stats_sort(u64 *a, u32 n);
/* Prints "<label>: rounds=N min=.. median=.. max=.. ns" from TSC deltas. */
void stats_print(const char *label, u64 *tsc_deltas, u32 n);

#endif
