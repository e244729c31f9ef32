/* SPDX-License-Identifier: GPL-2.0-only */
/* The local APIC of one vCPU, in userspace; guarded by its vCPU's lock. */
#ifndef VMM_MACHINE_LAPIC_H
#define VMM_MACHINE_LAPIC_H

#include <stdbool.h>
#include <stdint.h>

#include <sysidle/apic_regs.h>

#include "machine/devices/lapic_timer.h"

/* The LVT entries this APIC has (no CMCI), their slots in lapic.lvt[]:
 * LVT_TIMER..LVT_ERROR, one register apart. */
enum lapic_lvt {
	LAPIC_LVT_TIMER,
	LAPIC_LVT_THERMAL,
	LAPIC_LVT_PERF,
	LAPIC_LVT_LINT0,
	LAPIC_LVT_LINT1,
	LAPIC_LVT_ERROR,
	LAPIC_NR_LVT
};
#define LAPIC_LVT_OF_REG(reg) (((reg) - APIC_REG_LVT_TIMER) / APIC_REG_STRIDE)

struct vcpu;

struct lapic {
	uint32_t id;
	uint64_t base_msr;
	uint32_t tpr, svr, ldr, dfr, esr;
	uint32_t icr_low, icr_high;
	uint32_t lvt[LAPIC_NR_LVT];
	uint32_t irr[APIC_VECTOR_BANKS], isr[APIC_VECTOR_BANKS],
		 tmr[APIC_VECTOR_BANKS];

	/* LVTT, TMICT, TDCR and IA32_TSC_DEADLINE are the timer's: its
	 * slot in lvt[] is unused (lapic_timer_read_lvt). */
	struct lapic_timer timer;

	/* KVM's PV EOI (lapic_pv_eoi.c), this vCPU's thread only: the MSR,
	 * the flag's host address (NULL: off), the flag set at the last
	 * KVM_RUN */
	uint64_t pv_eoi_msr;
	volatile uint8_t *pv_eoi_flag;
	bool pv_eoi_set;
};

/* lapic.c: callers hold the vCPU's lock unless said otherwise. */
void lapic_reset(struct vcpu *v);
bool lapic_x2apic(const struct lapic *l);
int lapic_pending_vector(const struct lapic *l);
void lapic_accept(struct lapic *l, int vector);
void lapic_set_irr(struct lapic *l, uint8_t vector, bool level);
bool lapic_irr_only(const struct lapic *l, int vector); /* IRR == {vector} */
/* @l's vCPU thread, on its entry path and before it looks for a wake-up:
 * the timer's pending expiry goes into the IRR (lapic_timer_take). */
void lapic_take_timer(struct lapic *l);
bool lapic_match(const struct lapic *l, uint32_t dest, bool logical,
		 bool x2apic);
/* Any thread (a snapshot; @l's own thread alone changes it): @gpa is in
 * @l's xAPIC page (enabled, xAPIC mode, at its IA32_APIC_BASE). */
bool lapic_mmio_claims(const struct lapic *l, uint64_t gpa);
/* Without the lock held (they take it), on @v's thread: */
void lapic_mmio(struct vcpu *v, uint64_t off, uint8_t *data,
		unsigned int len, bool is_write, void *opaque);
int lapic_msr_read(struct vcpu *v, uint32_t msr, uint64_t *val);
int lapic_msr_write(struct vcpu *v, uint32_t msr, uint64_t val);
void lapic_eoi_write(struct vcpu *v); /* as the guest's EOI write */
/* Lock held: the highest vector in service (-1: none); whether its EOI
 * has work besides clearing it (level: the IOAPIC's EOI; the timer's with
 * expiries still to take); whether any vector is requested. */
int lapic_isr_highest(const struct lapic *l);
bool lapic_eoi_has_work(const struct lapic *l, int vector);
bool lapic_irr_empty(const struct lapic *l);

/* lapic_pv_eoi.c, @v's thread: the MSR (lock not held; -1: #GP), the
 * flag set before KVM_RUN (lock held, after the injection; not when
 * @exit_wanted) and taken back right after it (lock not held), and off
 * at INIT (lock held). */
int lapic_pv_eoi_msr_read(struct vcpu *v, uint64_t *val);
int lapic_pv_eoi_msr_write(struct vcpu *v, uint64_t val);
void lapic_pv_eoi_enter(struct vcpu *v, bool exit_wanted);
void lapic_pv_eoi_exit(struct vcpu *v);
void lapic_pv_eoi_reset(struct lapic *l);

#endif
