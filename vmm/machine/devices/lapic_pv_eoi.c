/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * KVM's paravirtual EOI for the userspace local APIC (the ABI: guest_abi.h,
 * MSR_KVM_PV_EOI). An EOI write is an exit to this VMM; with the flag the
 * guest ends its interrupt in service by clearing a bit in its own memory,
 * and the EOI is done here at its next exit, as KVM does for its in-kernel
 * APIC (arch/x86/kvm/lapic.c, apic_sync_pv_eoi_to_guest / _from_guest):
 *  - entering (lapic_pv_eoi_enter): the flag is set when the highest
 *    vector in service is the only thing the EOI concerns: nothing
 *    requested (an EOI would let a vector in; it must exit so that vector
 *    is injected), nothing else to do at its EOI (level-triggered: the
 *    IOAPIC's EOI; the LAPIC timer's with ticks owed: the next one), and
 *    the idle layer wants no exit (a woken vCPU's first exit);
 *  - leaving (lapic_pv_eoi_exit), before the exit is handled: the flag
 *    still set is taken back (the guest did not end it; its EOI will be a
 *    write), cleared by the guest it is the EOI, done now.
 * The flag is written only here, by the vCPU's own thread, while its vCPU
 * is out of guest mode (KVM_RUN not running); the guest clears it with one
 * instruction on the vCPU itself. Nobody else writes it: no atomics.
 */
#include <pthread.h>

#include <sysidle/guest_abi.h>

#include "machine/vcpu.h"
#include "machine/vm.h"

void lapic_pv_eoi_reset(struct lapic *l)
{
	l->pv_eoi_msr = 0;
	l->pv_eoi_flag = NULL;
	l->pv_eoi_set = false;
}

int lapic_pv_eoi_msr_read(struct vcpu *v, uint64_t *val)
{
	if (!vm_cpu_has(v->vm, CPU_F_PV_EOI))
		return -1;
	*val = v->lapic.pv_eoi_msr;
	return 0;
}

/* Enabled: a 4-byte aligned guest physical address in RAM, else #GP (as
 * KVM); the exit that wrote it has taken the flag back already. */
int lapic_pv_eoi_msr_write(struct vcpu *v, uint64_t val)
{
	uint64_t gpa = val & ~(uint64_t)KVM_PV_EOI_ENABLE;
	volatile uint8_t *flag = NULL;

	if (!vm_cpu_has(v->vm, CPU_F_PV_EOI) || (gpa & 3))
		return -1;
	if (val & KVM_PV_EOI_ENABLE) {
		flag = guest_ptr(v->vm, gpa, 1);
		if (!flag)
			return -1;
	}
	pthread_mutex_lock(&v->lock);
	v->lapic.pv_eoi_msr = val;
	v->lapic.pv_eoi_flag = flag;
	pthread_mutex_unlock(&v->lock);
	return 0;
}

void lapic_pv_eoi_enter(struct vcpu *v, bool exit_wanted)
{
	struct lapic *l = &v->lapic;
	int vec;

	if (!l->pv_eoi_flag || exit_wanted || !lapic_irr_empty(l))
		return;
	vec = lapic_isr_highest(l);
	if (vec < 0 || lapic_eoi_has_work(l, vec))
		return;
	*l->pv_eoi_flag |= KVM_PV_EOI_PENDING;
	l->pv_eoi_set = true;
}

void lapic_pv_eoi_exit(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	if (!l->pv_eoi_set)
		return;
	l->pv_eoi_set = false;
	if (*l->pv_eoi_flag & KVM_PV_EOI_PENDING) {
		*l->pv_eoi_flag &= (uint8_t)~KVM_PV_EOI_PENDING;
		return;
	}
	v->stats.pv_eois++;
	lapic_eoi_write(v);
}
