/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Now on CLOCK_MONOTONIC, for deadlines, timeouts and rates: the tools' and
 * common/'s one reading of it (the VMM's own is vmm/base/time.h's now_ns,
 * below common/ in the layering; the sysidle library's is its default
 * clock). Any thread.
 */
#ifndef SYSIDLE_COMMON_MONOTONIC_H
#define SYSIDLE_COMMON_MONOTONIC_H

#include <stdint.h>

uint64_t monotonic_ns(void); /* nanoseconds */
int64_t monotonic_ms(void);  /* whole milliseconds */
double monotonic_s(void);    /* seconds, with the nanoseconds as fraction */

#endif
