/* SPDX-License-Identifier: GPL-2.0-only */
/* MSR exits and the table of MSRs handled in userspace (msr.c). */
#ifndef VMM_MACHINE_MSR_H
#define VMM_MACHINE_MSR_H

#include <stdint.h>

struct vcpu;
struct vm;

/* MSRs handled in userspace, by range; filled before any vCPU runs. A
 * handler returns 0, or -1 for #GP; it is called without @v's lock.
 * Unregistered MSRs raise #GP. */
typedef int (*msr_read_fn)(struct vcpu *v, uint32_t index, uint64_t *val);
typedef int (*msr_write_fn)(struct vcpu *v, uint32_t index, uint64_t val);
int msr_register(uint32_t first, uint32_t last, msr_read_fn rd,
		 msr_write_fn wr);
/* Setup time, before the vCPUs are created: KVM exits to userspace for
 * the MSRs handled here. */
int msr_vm_setup(struct vm *vm);
/* @v's thread, exit reason X86_RDMSR or X86_WRMSR. */
void msr_exit(struct vcpu *v);

#endif
