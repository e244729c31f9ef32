/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The scheduler slice of the VMM's latency-critical threads (the vCPUs and
 * the housekeeping thread): EEVDF takes sched_attr.sched_runtime of a
 * SCHED_OTHER thread as its slice (Linux >= 6.12, clamped there to
 * 0.1..100 ms), so a woken thread preempts a CPU hog sooner. Older kernels
 * ignore it; a refusal is not an error (the thread keeps its slice).
 */
#ifndef VMM_BASE_SCHED_H
#define VMM_BASE_SCHED_H

#include <stdint.h>

#define SCHED_SLICE_DEFAULT_NS 100000ull  /* --sched-slice-us default */
#define SCHED_SLICE_MIN_NS 100000ull      /* the kernel's clamp */
#define SCHED_SLICE_MAX_NS 100000000ull

/* --sched-slice-us US|off: US from 100 to 100000 as @ns, off as 0;
 * 0, or -1 for anything else. */
int sched_slice_parse(const char *arg, uint64_t *ns);
/* The main thread, before any of those threads starts: the slice they ask
 * for (0: none, they keep the kernel's). */
void sched_slice_configure(uint64_t ns);
uint64_t sched_slice_configured(void);
/* The calling thread asks for the configured slice; returns the slice the
 * kernel reports afterwards (0: not supported or not asked). */
uint64_t sched_slice_apply(void);
/* The slice the kernel reports for thread @tid (0: none or unknown). */
uint64_t sched_slice_of(int tid);

#endif
