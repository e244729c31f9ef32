/* SPDX-License-Identifier: GPL-2.0-only */
/* The local APIC of one vCPU, in userspace; guarded by its vCPU's lock. */
#ifndef VMM_MACHINE_LAPIC_H
#define VMM_MACHINE_LAPIC_H

#include <stdbool.h>
#include <stdint.h>

#include <sysidle/apic_regs.h>

#include "base/housekeeping.h"

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

/*
 * What the guest gets for periodic LAPIC timer ticks it did not take when
 * due (the host was late, or --sysidle held the timekeeper's tick back in
 * full idle): QEMU's lost_tick_policy, Xen's HVM timer_mode.
 *  - HONOUR: as on hardware, late ticks coalesce into one interrupt; the
 *    tick is never held back;
 *  - CATCHUP: every tick due is delivered; a late one as soon as the
 *    guest ends the one before (at its EOI, as KVM's PIT re-injects: one
 *    in service at a time), until the count is exact;
 *  - DISCARD: late ticks coalesce into one, as HONOUR, and --sysidle may
 *    hold the tick back (one tick for the whole held time).
 */
enum lapic_tick_policy {
	LAPIC_TICK_HONOUR,
	LAPIC_TICK_CATCHUP,
	LAPIC_TICK_DISCARD,
};
/* A late tick the guest takes in at most 1/LAPIC_CATCHUP_FACTOR of a
 * period still counts as a tick only (the timekeeper rule); while late
 * ticks are owed the host timer is a fallback this many periods on. */
#define LAPIC_CATCHUP_FACTOR 8

struct lapic {
	uint32_t id;
	uint64_t base_msr;
	uint32_t tpr, svr, ldr, dfr, esr;
	uint32_t icr_low, icr_high;
	uint32_t lvt[LAPIC_NR_LVT];
	uint32_t irr[APIC_VECTOR_BANKS], isr[APIC_VECTOR_BANKS],
		 tmr[APIC_VECTOR_BANKS];

	/* timer (lapic_timer.c) */
	uint32_t timer_icr, timer_dcr;
	uint64_t timer_start_ns;
	uint64_t timer_deadline_ns; /* the host timer's, 0: not armed */
	uint64_t timer_period_ns;   /* periodic mode, else 0 */
	uint64_t timer_next_ns;     /* periodic: the next tick due */
	uint64_t timer_owed;        /* periodic, CATCHUP: ticks late, owed */
	bool timer_held;            /* the host timer is off (lapic_timer_hold) */
	/* The deadline is served by this vCPU's own thread, not queued on
	 * the housekeeping thread: while it waits in HLT (the timeout of its
	 * wait), or, armed by the thread itself within its advance window,
	 * right before its next KVM_RUN. Written by that thread only. */
	bool timer_self;
	/* One-shot and TSC-deadline: re-armed from the handler at a constant
	 * period, it is a tick (timer_tick_ns: that period, 0: not a tick).
	 * Written by this vCPU's thread, rearm_fired by the fire callback. */
	uint64_t rearm_last_ns, rearm_interval_ns, timer_tick_ns;
	unsigned int rearm_streak;
	bool rearm_fired;
	/* periodic ticks, since the VM started: held back, then delivered late (one
	 * by one: CATCHUP) or coalesced into one (the others dropped) */
	uint64_t ticks_held, ticks_caught_up, ticks_coalesced;
	uint64_t tsc_deadline;      /* MSR value, 0: not armed */
	uint64_t tsc0, tsc0_ns;     /* guest TSC tsc0 was read at tsc0_ns */
	uint32_t tsc_khz;
	struct hk_timer timer;

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
 * ticks owed); whether any vector is requested. */
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

/* lapic_timer.c: callers hold the vCPU's lock. */
void lapic_timer_init(struct vcpu *v);
void lapic_timer_write_lvt(struct vcpu *v, uint32_t val);
void lapic_timer_write_icr(struct vcpu *v, uint32_t count);
void lapic_timer_write_dcr(struct vcpu *v, uint32_t val);
uint32_t lapic_timer_read_ccr(struct vcpu *v);
void lapic_timer_write_tsc_deadline(struct vcpu *v, uint64_t tsc);
uint64_t lapic_timer_read_tsc_deadline(const struct vcpu *v);
void lapic_timer_stop(struct vcpu *v);
/* The periodic tick's host timer off while the guest does not need it
 * (--sysidle, full idle), and on again with the ticks due then given by
 * the VM's policy. hold: true when there was a periodic tick to hold. */
bool lapic_timer_hold(struct vcpu *v);
/* The timer's period when it is a tick (periodic mode, or a one-shot /
 * TSC-deadline timer re-armed at a constant period), else 0. */
uint64_t lapic_timer_tick_period(const struct lapic *l);
uint64_t lapic_timer_tick_phase(const struct lapic *l); /* a tick's time */
void lapic_timer_eoi(struct vcpu *v); /* the guest ended a timer interrupt */
void lapic_timer_release(struct vcpu *v);
/* The timer served by @v's own thread (timer_self), @v's thread only,
 * lock held: wait_begin as it blocks in HLT (the timer leaves the
 * housekeeping thread), wait_deadline when its wait must end for the timer
 * (0: none), expire at or after that deadline, wait_end as it leaves HLT
 * (the timer goes back, unless due within @keep_ns: then served before
 * the next KVM_RUN, by lapic_timer_entry_due / expire). */
void lapic_timer_wait_begin(struct vcpu *v);
uint64_t lapic_timer_wait_deadline(const struct vcpu *v);
void lapic_timer_expire(struct vcpu *v);
void lapic_timer_wait_end(struct vcpu *v, uint64_t now, uint64_t keep_ns);
/* Lock held, before KVM_RUN: the deadline this thread must serve before
 * entering (0: none; a further one went back to the housekeeping
 * thread). */
uint64_t lapic_timer_entry_due(struct vcpu *v, uint64_t now,
			       uint64_t keep_ns);
const char *lapic_tick_policy_name(enum lapic_tick_policy p);
int lapic_tick_policy_parse(const char *s, enum lapic_tick_policy *p);

#endif
