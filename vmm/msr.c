/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * MSR exits. KVM hands us the MSRs it cannot handle (INVAL, UNKNOWN: the
 * x2APIC range among them, since there is no in-kernel APIC) and those the
 * filter denies (FILTER: APIC_BASE and TSC_DEADLINE, which KVM would
 * otherwise swallow). The APIC ones go to the lapic, the paravirtual tick's
 * (MSR_SYSIDLE_PVTICK_*, unknown to KVM) to pvtick.c; the rest raise #GP.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm.h"

#define MSR_LOGGED_MAX 32

static atomic_uint logged[MSR_LOGGED_MAX];
static atomic_uint nlogged;

int msr_vm_setup(struct vm *vm)
{
	static uint8_t deny; /* one bit, clear: denied */
	struct kvm_enable_cap cap = {
		.cap = KVM_CAP_X86_USER_SPACE_MSR,
		.args[0] = KVM_MSR_EXIT_REASON_INVAL |
			   KVM_MSR_EXIT_REASON_UNKNOWN |
			   KVM_MSR_EXIT_REASON_FILTER,
	};
	struct kvm_msr_filter filter = {
		.flags = KVM_MSR_FILTER_DEFAULT_ALLOW,
		.ranges = {
			{ .flags = KVM_MSR_FILTER_READ | KVM_MSR_FILTER_WRITE,
			  .nmsrs = 1, .base = MSR_IA32_APIC_BASE,
			  .bitmap = &deny },
			{ .flags = KVM_MSR_FILTER_READ | KVM_MSR_FILTER_WRITE,
			  .nmsrs = 1, .base = MSR_IA32_TSC_DEADLINE,
			  .bitmap = &deny },
		},
	};

	if (ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_CAP_X86_USER_SPACE_MSR: %s",
				strerror(errno));
	if (ioctl(vm->vm_fd, KVM_X86_SET_MSR_FILTER, &filter) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_X86_SET_MSR_FILTER: %s",
				strerror(errno));
	return 0;
}

static void msr_log_unknown(uint32_t index, bool is_write)
{
	unsigned int n = atomic_load(&nlogged);

	for (unsigned int i = 0; i < n && i < MSR_LOGGED_MAX; i++)
		if (atomic_load(&logged[i]) == index)
			return;
	n = atomic_fetch_add(&nlogged, 1);
	if (n < MSR_LOGGED_MAX)
		atomic_store(&logged[n], index);
	if (n < MSR_LOGGED_MAX)
		vmm_warn("guest %s unknown MSR %#" PRIx32 ": #GP injected",
			 is_write ? "wrote" : "read", index);
}

static bool msr_is_lapic(uint32_t index)
{
	return index == MSR_IA32_APIC_BASE || index == MSR_IA32_TSC_DEADLINE ||
	       (index >= MSR_X2APIC_BASE && index <= MSR_X2APIC_LAST);
}

/* Caller: @v's thread, exit reason X86_RDMSR or X86_WRMSR. */
void msr_exit(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	bool is_write = r->exit_reason == KVM_EXIT_X86_WRMSR;
	uint64_t val = 0;
	int err;

	if (pvtick_msr(r->msr.index)) {
		if (is_write) {
			err = pvtick_msr_write(v, r->msr.index, r->msr.data);
		} else {
			err = pvtick_msr_read(v, r->msr.index, &val);
			r->msr.data = val;
		}
		r->msr.error = err ? 1 : 0;
		return;
	}
	if (!msr_is_lapic(r->msr.index)) {
		msr_log_unknown(r->msr.index, is_write);
		r->msr.error = 1;
		return;
	}
	if (is_write) {
		err = lapic_msr_write(v, r->msr.index, r->msr.data);
	} else {
		err = lapic_msr_read(v, r->msr.index, &val);
		r->msr.data = val;
	}
	r->msr.error = err ? 1 : 0;
}
