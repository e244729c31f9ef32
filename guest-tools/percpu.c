// SPDX-License-Identifier: GPL-2.0-only
/* Per-CPU data, reached through %gs:0 (GS base = &percpus[index]). */
#include "rt.h"

struct percpu percpus[MAX_CPUS];
u32 nr_cpus = 1;
volatile u32 cpus_online;

void percpu_setup(u32 index)
{
	struct percpu *p = &percpus[index];

	p->self = p;
	p->index = index;
	wrmsr(0xc0000101, (u64)(uintptr_t)p); /* IA32_GS_BASE */
}
