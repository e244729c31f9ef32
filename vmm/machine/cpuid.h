/* SPDX-License-Identifier: GPL-2.0-only */
/* The guest's CPUID and --cpu (cpuid.c); the features --cpu can take away
 * are enum cpu_feature (vm.h). */
#ifndef VMM_MACHINE_CPUID_H
#define VMM_MACHINE_CPUID_H

#include <stddef.h>

struct vcpu;

/* vCPU creation: @v's fd exists and v->lapic.tsc_khz is known. */
int cpuid_setup(struct vcpu *v);
/* --cpu FLAGS: comma-separated +feature / -feature (x2apic, tsc-deadline,
 * pv-eoi) into @off (the enum cpu_feature bits turned off); -1: @bad names
 * the flag that is not one. */
int cpu_features_parse(const char *flags, unsigned int *off, char *bad,
		       size_t bad_len);

#endif
