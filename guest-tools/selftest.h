/* SPDX-License-Identifier: GPL-2.0-only */
/* selftest.elf's pieces: the check reporter and the checks in other files. */
#ifndef GUEST_SELFTEST_H
#define GUEST_SELFTEST_H

#include "rt.h"

#define MS 1000000ull
#define SEC 1000000000ull

/* One line "ok - ..." or "FAIL - ...", counted; any CPU may call it. */
void check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* selftest_topology.c */
/* BSP, after cpus_enumerate(): the MADT against fw_cfg, every CPU taken. */
void check_cpu_census(void);
/* On CPU cpu itself: its x2APIC logical ID is the one its APIC ID gives. */
void check_ldr(u32 cpu);
/* BSP, CPUs 0..n-1 online: one logical (x2APIC cluster) IPI per cluster
 * reaches every member and no other CPU. */
void check_logical_ipis(u32 n);

#endif
