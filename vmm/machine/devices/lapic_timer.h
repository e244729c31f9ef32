/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC timer of one vCPU, an object of its own (lapic_timer.c):
 * one-shot, periodic and TSC-deadline, at GUEST_APIC_TIMER_HZ.
 *
 * What reaches it: its registers' writes and reads (LVTT, TMICT, TMCCT,
 * TDCR, IA32_TSC_DEADLINE) from lapic.c; its host timer's expiry
 * (lapic_timer_expired) from whichever backend serves its deadline; the
 * idle layer's hold and release of a tick. What it reaches: only the
 * lapic_timer_ops its owner gave it at init: the clock, a host-timer
 * backend to arm and cancel, and a kick. An expiry never touches the
 * LAPIC: it marks itself pending and kicks; the LAPIC takes the pending
 * expiries into its IRR on the vCPU's entry path (lapic_timer_take), as
 * Linux's apic_timer_expired and kvm_inject_apic_timer_irqs do.
 *
 * No lock of its own: its owner's (the vCPU's lock) is held around every
 * call, and around the ops' calls it makes.
 */
#ifndef VMM_MACHINE_LAPIC_TIMER_H
#define VMM_MACHINE_LAPIC_TIMER_H

#include <stdbool.h>
#include <stdint.h>

/*
 * What the guest gets for periodic LAPIC timer ticks it did not take when
 * due (the host was late, or --sysidle held the timekeeper's tick back in
 * full idle): QEMU's lost_tick_policy, Xen's HVM timer_mode.
 *  - HONOUR: as on hardware, late ticks coalesce into one interrupt; the
 *    tick is never held back;
 *  - CATCHUP: every tick due is delivered; a late one as soon as the
 *    guest ends the one before (one requested at a time, as KVM's PIT
 *    re-injects), until the count is exact;
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

struct lapic_timer;

/* Everything the timer reaches outside itself; called with the owner's
 * lock held. */
struct lapic_timer_ops {
	/* The clock: CLOCK_MONOTONIC ns. */
	uint64_t (*now)(void);
	/* The host timer: lapic_timer_expired(@t, @deadline_ns) once
	 * @deadline_ns (> 0) passed, in place of any deadline armed before;
	 * cancel: none any more. @quiet: the deadline only moved later (or
	 * went away for long), so no thread need wake up for the change. */
	void (*arm)(struct lapic_timer *t, uint64_t deadline_ns, bool quiet);
	void (*cancel)(struct lapic_timer *t, bool quiet);
	/* An expiry was marked pending: the vCPU is to look at its LAPIC
	 * (wake from HLT, or leave KVM_RUN) and take it. */
	void (*kick)(struct lapic_timer *t);
};

struct lapic_timer {
	const struct lapic_timer_ops *ops;
	enum lapic_tick_policy policy;
	bool has_tsc_deadline; /* the guest CPU has TSC-deadline mode */

	/* the registers */
	uint32_t lvtt;   /* vector, mask and mode bits only */
	uint32_t icr, dcr;
	uint64_t tsc_deadline; /* IA32_TSC_DEADLINE, 0: not armed */

	/* the count */
	uint64_t start_ns;
	uint64_t deadline_ns; /* the host timer's, 0: not armed */
	uint64_t period_ns;   /* periodic mode, else 0 */
	uint64_t next_ns;     /* periodic: the next tick due */
	/* Expiries marked pending, not yet taken into the IRR; a CATCHUP's
	 * late ticks wait here until each one before was taken. */
	uint64_t pending;
	bool held; /* the host timer is off (lapic_timer_hold) */

	/* One-shot and TSC-deadline: re-armed after each expiry at a constant
	 * period, it is a tick (tick_ns: that period, 0: not a tick). */
	uint64_t rearm_last_ns, rearm_interval_ns, tick_ns;
	unsigned int rearm_streak;
	bool rearm_fired;

	/* periodic ticks, since the VM started: held back, then delivered
	 * late (one by one: CATCHUP) or coalesced into one (the others
	 * dropped) */
	uint64_t ticks_held, ticks_caught_up, ticks_coalesced;

	/* the guest TSC read tsc0 at host time tsc0_ns, at tsc_khz */
	uint64_t tsc0, tsc0_ns;
	uint32_t tsc_khz;
};

/* Before anything else, once; then lapic_timer_reset. */
void lapic_timer_init(struct lapic_timer *t, const struct lapic_timer_ops *ops,
		      enum lapic_tick_policy policy, bool has_tsc_deadline);
/* The guest TSC's @tsc0 at host time @tsc0_ns, @khz: TSC-deadline's base. */
void lapic_timer_set_tsc(struct lapic_timer *t, uint64_t tsc0,
			 uint64_t tsc0_ns, uint32_t khz);
/* Power-on, INIT, the APIC disabled: LVTT masked, the count and anything
 * pending gone, the host timer cancelled. */
void lapic_timer_reset(struct lapic_timer *t);

/* The registers (lapic.c, the vCPU's thread). A write that reprograms the
 * count stops what ran, ends a hold and drops the late ticks owed; an
 * expiry already pending stays (on hardware it is in the IRR). */
void lapic_timer_write_lvt(struct lapic_timer *t, uint32_t val);
void lapic_timer_write_icr(struct lapic_timer *t, uint32_t count);
void lapic_timer_write_dcr(struct lapic_timer *t, uint32_t val);
void lapic_timer_write_tsc_deadline(struct lapic_timer *t, uint64_t tsc);
uint32_t lapic_timer_read_lvt(const struct lapic_timer *t);
uint32_t lapic_timer_read_icr(const struct lapic_timer *t);
uint32_t lapic_timer_read_dcr(const struct lapic_timer *t);
uint32_t lapic_timer_read_ccr(const struct lapic_timer *t);
uint64_t lapic_timer_read_tsc_deadline(const struct lapic_timer *t);

/* The backend: the deadline it must serve (0: none, or held), and its
 * expiry; an expiry of a deadline that is no longer the timer's is
 * stale and does nothing. */
uint64_t lapic_timer_deadline(const struct lapic_timer *t);
void lapic_timer_expired(struct lapic_timer *t, uint64_t deadline_ns);

/* The LAPIC, on the vCPU's entry path: the vector a pending expiry
 * raises (-1: none pending); take it, @requested: that vector is in the
 * IRR already. Returns true when the LAPIC is to set it in the IRR; the
 * rest coalesce (HONOUR, DISCARD) or stay owed (CATCHUP). */
int lapic_timer_pending_vector(const struct lapic_timer *t);
bool lapic_timer_take(struct lapic_timer *t, bool requested);
/* Expiries still to be taken (a CATCHUP's late ticks among them). */
uint64_t lapic_timer_owed(const struct lapic_timer *t);

/* The idle layer (--sysidle), the vCPU not running or its own thread:
 * the tick's host timer off while the guest does not need it, and on
 * again with the ticks due then given by the policy. hold: true when
 * there was an unmasked tick to hold; late ticks owed are never held. */
bool lapic_timer_hold(struct lapic_timer *t);
void lapic_timer_release(struct lapic_timer *t);
/* The timer's period when it is a tick (periodic mode, or a one-shot /
 * TSC-deadline timer re-armed at a constant period), else 0; a tick's
 * time; whether it is in periodic mode (running). */
uint64_t lapic_timer_tick_period(const struct lapic_timer *t);
uint64_t lapic_timer_tick_phase(const struct lapic_timer *t);
bool lapic_timer_periodic(const struct lapic_timer *t);

const char *lapic_tick_policy_name(enum lapic_tick_policy p);
int lapic_tick_policy_parse(const char *s, enum lapic_tick_policy *p);

#endif
