/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * MSR exits. KVM hands us the MSRs it cannot handle (INVAL, UNKNOWN: the
 * x2APIC range among them, since there is no in-kernel APIC) and those the
 * filter denies (FILTER: APIC_BASE, TSC_DEADLINE and KVM's PV EOI, which
 * KVM would otherwise swallow). The APIC ones go to the lapic, ranges registered by
 * higher layers (the paravirtual tick's MSR_SYSIDLE_PVTICK_*, unknown to
 * KVM) to their handlers; the rest raise #GP.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "machine/kvm_sys.h"
#include "machine/msr.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define MSR_LOGGED_MAX VMM_WARN_BURST
#define MSR_MAX_RANGES 8

struct msr_range {
	uint32_t first, last;
	msr_read_fn rd;
	msr_write_fn wr;
};

/* Filled at setup time, before any vCPU runs; then read without a lock. */
static struct msr_range ranges[MSR_MAX_RANGES];
static unsigned int nranges;

static atomic_uint logged[MSR_LOGGED_MAX];
static atomic_uint nlogged;
static struct vmm_warn_limit msr_warn = VMM_WARN_LIMIT("unknown MSRs");

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
			/* KVM keeps it for its own LAPIC, which there is not */
			{ .flags = KVM_MSR_FILTER_READ | KVM_MSR_FILTER_WRITE,
			  .nmsrs = 1, .base = MSR_KVM_PV_EOI,
			  .bitmap = &deny },
		},
	};

	if (kvm_sys_ioctl(vm->vm_fd, KVM_ENABLE_CAP, &cap) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_CAP_X86_USER_SPACE_MSR: %s",
				strerror(errno));
	if (kvm_sys_ioctl(vm->vm_fd, KVM_X86_SET_MSR_FILTER, &filter) < 0)
		return vmm_fail(VMM_EXIT_KVM, "KVM_X86_SET_MSR_FILTER: %s",
				strerror(errno));
	return 0;
}

int msr_register(uint32_t first, uint32_t last, msr_read_fn rd,
		 msr_write_fn wr)
{
	if (nranges == MSR_MAX_RANGES)
		return vmm_fail(VMM_EXIT_INTERNAL, "MSR table full");
	ranges[nranges++] = (struct msr_range){ first, last, rd, wr };
	return 0;
}

static const struct msr_range *msr_find(uint32_t index)
{
	for (unsigned int i = 0; i < nranges; i++)
		if (index >= ranges[i].first && index <= ranges[i].last)
			return &ranges[i];
	return NULL;
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
	vmm_warn_limited(&msr_warn, "guest %s unknown MSR %#" PRIx32 ": #GP "
			 "injected", is_write ? "wrote" : "read", index);
}

static bool msr_is_lapic(uint32_t index)
{
	return index == MSR_IA32_APIC_BASE || index == MSR_IA32_TSC_DEADLINE ||
	       index == MSR_KVM_PV_EOI ||
	       (index >= MSR_X2APIC_BASE && index <= MSR_X2APIC_LAST);
}

/* Caller: @v's thread, exit reason X86_RDMSR or X86_WRMSR. */
void msr_exit(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	bool is_write = r->exit_reason == KVM_EXIT_X86_WRMSR;
	const struct msr_range *range = msr_find(r->msr.index);
	uint64_t val = 0;
	int err;

	if (range) {
		if (is_write) {
			err = range->wr(v, r->msr.index, r->msr.data);
		} else {
			err = range->rd(v, r->msr.index, &val);
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
