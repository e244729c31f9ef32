/* SPDX-License-Identifier: GPL-2.0-only */
/* Time: the monotonic clock every layer uses, and its wall-clock twin. */
#ifndef VMM_BASE_TIME_H
#define VMM_BASE_TIME_H

#include <stdint.h>

uint64_t now_ns(void); /* CLOCK_MONOTONIC */
/* The main thread, before any other thread starts: note the offset between
 * the two clocks, and the VM's start (time_start_ns). */
void time_init(void);
uint64_t time_start_ns(void);
/* A CLOCK_MONOTONIC instant as Unix time in ms (the offset at time_init). */
uint64_t mono_to_unix_ms(uint64_t mono_ns);

#endif
