/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC timer: one-shot, periodic and TSC-deadline, at
 * GUEST_APIC_TIMER_HZ (1 ns per count at divide 1). A deadline goes to the
 * housekeeping thread, whose fire callback raises the LVT vector and kicks
 * the vCPU; or, while the vCPU waits in HLT, it is the timeout of that
 * wait and the vCPU's own thread raises it (timer_self: no hop through
 * another thread on the wake path).
 */
#include <pthread.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/time.h"
#include "machine/pause.h"
#include "base/housekeeping.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

#define TIMER_MIN_PERIOD_NS 50000ull /* periodic mode never faster */

static uint32_t timer_divide(const struct lapic *l)
{
	uint32_t d = (l->timer_dcr & 3) | ((l->timer_dcr & 8) >> 1);

	return d == 7 ? 1 : 2u << d; /* 0b111: divide by 1 */
}

static uint32_t timer_mode(const struct lapic *l)
{
	return l->lvt[LAPIC_LVT_TIMER] & APIC_LVT_TIMER_MODE;
}

/* The deadline of a timer this vCPU's thread serves: another thread that
 * moved it wakes the wait, which reads it again. */
static void timer_self_moved(struct vcpu *v)
{
	if (vcpu_current() == v)
		return;
	/* release: pairs with the acquire loads of a polling HLT
	 * (vcpu_halt.c spin_until), after the deadline was written */
	atomic_fetch_add_explicit(&v->wake_seq, 1, memory_order_release);
	pthread_cond_signal(&v->wake);
}

/* Armed by the vCPU's own thread (an exit it handles) due within its
 * keep window: served by that thread before its next KVM_RUN. */
static void timer_arm(struct vcpu *v, uint64_t deadline_ns)
{
	struct lapic *l = &v->lapic;
	uint64_t keep;

	l->timer_deadline_ns = deadline_ns ? deadline_ns : 1;
	if (!l->timer_self && vcpu_current() == v &&
	    (keep = vcpu_timer_keep_ns(v)) &&
	    l->timer_deadline_ns <= now_ns() + keep)
		l->timer_self = true;
	if (l->timer_self)
		timer_self_moved(v);
	else
		hk_timer_arm(&l->timer, l->timer_deadline_ns);
}

/* hk_timer_arm_quiet / _cancel_quiet, unless this vCPU's thread serves
 * the timer. */
static void timer_arm_quiet(struct vcpu *v, uint64_t deadline_ns)
{
	if (v->lapic.timer_self)
		timer_self_moved(v);
	else
		hk_timer_arm_quiet(&v->lapic.timer, deadline_ns);
}

static void timer_cancel(struct vcpu *v, bool quiet)
{
	if (v->lapic.timer_self)
		return; /* a wait that finds no deadline any more waits on */
	if (quiet)
		hk_timer_cancel_quiet(&v->lapic.timer);
	else
		hk_timer_cancel(&v->lapic.timer);
}

/*
 * A one-shot or TSC-deadline deadline the guest just armed: a tick when it
 * is re-armed only after the last one fired, LAPIC_TICK_REARMS times in a
 * row, each a whole number of one constant interval after the last
 * (within 0.1% + 1 us: TSC to ns rounding; a late handler that skips
 * periods, as Linux's does, re-arms a multiple). Anything else, or
 * @deadline_ns 0 (disarm), and it is not.
 */
#define LAPIC_TICK_REARMS 3
static void timer_detect_tick(struct lapic *l, uint64_t deadline_ns)
{
	uint64_t prev = l->rearm_last_ns, iv = l->rearm_interval_ns, d, tol, r;
	bool fired = l->rearm_fired;

	l->rearm_last_ns = deadline_ns;
	l->rearm_fired = false;
	if (!deadline_ns || !prev || deadline_ns <= prev || !fired) {
		l->rearm_interval_ns = l->timer_tick_ns = 0;
		l->rearm_streak = 0;
		return;
	}
	d = deadline_ns - prev;
	tol = iv / 1000 + 1000;
	r = iv ? d % iv : 0;
	if (iv && d + tol >= iv && (r <= tol || iv - r <= tol)) {
		if (++l->rearm_streak >= LAPIC_TICK_REARMS)
			l->timer_tick_ns = iv;
	} else {
		l->rearm_interval_ns = d;
		l->rearm_streak = 0;
		l->timer_tick_ns = 0;
	}
}

uint64_t lapic_timer_tick_period(const struct lapic *l)
{
	return l->timer_period_ns ? l->timer_period_ns : l->timer_tick_ns;
}

uint64_t lapic_timer_tick_phase(const struct lapic *l)
{
	return l->timer_period_ns ? l->timer_next_ns : l->rearm_last_ns;
}

void lapic_timer_stop(struct vcpu *v)
{
	v->lapic.timer_deadline_ns = 0;
	v->lapic.timer_period_ns = 0;
	v->lapic.timer_owed = 0;
	v->lapic.timer_held = false;
	v->lapic.tsc_deadline = 0;
	timer_cancel(v, false);
}

static enum lapic_tick_policy tick_policy(const struct vcpu *v)
{
	return v->vm->cfg ? v->vm->cfg->lapic_tick_policy : LAPIC_TICK_HONOUR;
}

/*
 * @v's lock held, periodic mode, at @now: account the ticks due (from
 * timer_next_ns on), deliver one if any is owed, and arm the host timer
 * for the next tick. While CATCHUP owes ticks, the guest's EOIs deliver
 * them (lapic_timer_eoi) and the host timer is only a fallback, moved on
 * to LAPIC_CATCHUP_FACTOR periods after the next tick as the grid moves,
 * so a burst of late ticks costs no host timer wake-up; the EOI that pays
 * the last one re-arms it for the next tick. A tick whose vector is still
 * pending in the IRR coalesces with it (HONOUR, DISCARD: as on hardware)
 * or stays owed (CATCHUP); a masked LVT drops it.
 */
static void timer_periodic_run(struct vcpu *v, uint64_t now)
{
	struct lapic *l = &v->lapic;
	uint64_t p = l->timer_period_ns, due = 0, fallback;
	uint8_t vec = (uint8_t)l->lvt[LAPIC_LVT_TIMER];
	bool catchup = tick_policy(v) == LAPIC_TICK_CATCHUP, pending;

	if (now >= l->timer_next_ns) {
		due = (now - l->timer_next_ns) / p + 1;
		l->timer_next_ns += due * p;
	}
	l->timer_start_ns = l->timer_next_ns - p;
	l->timer_owed += due;
	if (l->lvt[LAPIC_LVT_TIMER] & APIC_LVT_MASKED) {
		l->timer_owed = 0;
	} else if (l->timer_owed) {
		pending = l->irr[vec / 32] & (1u << (vec % 32));
		if (!pending) {
			lapic_set_irr(l, vec, false);
			vcpu_kick_for(v, PAUSE_REASON_TIMER);
		}
		if (!catchup) {
			l->ticks_coalesced += l->timer_owed - !pending;
			l->timer_owed = 0;
		} else if (!pending) {
			/* late: not the tick that fell due just now */
			l->ticks_caught_up += l->timer_owed > 1 || !due;
			l->timer_owed--;
		}
	}
	fallback = l->timer_next_ns + (LAPIC_CATCHUP_FACTOR - 1) * p;
	if (l->timer_held) {
		l->timer_deadline_ns = l->timer_next_ns;
	} else if (!l->timer_owed) {
		timer_arm(v, l->timer_next_ns);
	} else if (fallback != l->timer_deadline_ns) {
		/* later than before (the grid moved on): moved quietly */
		l->timer_deadline_ns = fallback;
		timer_arm_quiet(v, fallback);
	}
}

/* @v's lock held: a one-shot or TSC-deadline timer expired. */
static void timer_oneshot_fire(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	if (!(l->lvt[LAPIC_LVT_TIMER] & APIC_LVT_MASKED)) {
		lapic_set_irr(l, (uint8_t)l->lvt[LAPIC_LVT_TIMER], false);
		vcpu_kick_for(v, PAUSE_REASON_TIMER);
	}
	l->timer_deadline_ns = 0;
	l->tsc_deadline = 0;
	l->rearm_fired = true;
}

/* Lock held, the deadline passed and not held: what it brings. */
static void timer_expired(struct vcpu *v)
{
	if (v->lapic.timer_period_ns)
		timer_periodic_run(v, now_ns());
	else
		timer_oneshot_fire(v);
}

/* Housekeeping thread: @deadline_ns passed; stale unless it is still ours
 * (and not taken over by the vCPU's own thread meanwhile). */
static void lapic_timer_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	struct lapic *l = container_of(t, struct lapic, timer);
	struct vcpu *v = container_of(l, struct vcpu, lapic);

	pthread_mutex_lock(&v->lock);
	if (l->timer_deadline_ns == deadline_ns && !l->timer_held &&
	    !l->timer_self)
		timer_expired(v);
	pthread_mutex_unlock(&v->lock);
}

void lapic_timer_wait_begin(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	if (l->timer_self)
		return;
	l->timer_self = true;
	/* quiet: the host timer moves off it, no wake-up for nothing (its
	 * queue position is the housekeeping lock's: not looked at here) */
	hk_timer_cancel_quiet(&l->timer);
}

uint64_t lapic_timer_wait_deadline(const struct vcpu *v)
{
	const struct lapic *l = &v->lapic;

	return l->timer_self && !l->timer_held ? l->timer_deadline_ns : 0;
}

void lapic_timer_expire(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	if (!l->timer_deadline_ns || l->timer_held)
		return;
	v->stats.timer_self_fired++;
	timer_expired(v); /* timer_self still set: a re-arm stays here */
}

void lapic_timer_wait_end(struct vcpu *v, uint64_t now, uint64_t keep_ns)
{
	struct lapic *l = &v->lapic;

	if (!l->timer_self)
		return;
	if (l->timer_deadline_ns && !l->timer_held &&
	    l->timer_deadline_ns <= now + keep_ns)
		return; /* served before the next KVM_RUN */
	l->timer_self = false;
	if (l->timer_deadline_ns && !l->timer_held)
		hk_timer_arm(&l->timer, l->timer_deadline_ns);
}

uint64_t lapic_timer_entry_due(struct vcpu *v, uint64_t now,
			       uint64_t keep_ns)
{
	struct lapic *l = &v->lapic;

	if (!l->timer_self)
		return 0;
	lapic_timer_wait_end(v, now, keep_ns);
	return l->timer_self ? l->timer_deadline_ns : 0;
}

/*
 * @v's lock held, @v not running or its own thread (nothing writes its
 * LAPIC meanwhile): turn the tick's host timer off (periodic, or a
 * one-shot seen re-armed as a tick). Nothing is delivered until
 * lapic_timer_release(); a write that reprograms the timer ends the hold.
 * Returns whether there was an unmasked tick to hold; ticks still owed
 * (CATCHUP) are never held back.
 */
bool lapic_timer_hold(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	bool tick = l->timer_period_ns ||
		    (l->timer_tick_ns && l->timer_deadline_ns);

	if (!tick || (l->lvt[LAPIC_LVT_TIMER] & APIC_LVT_MASKED) ||
	    l->timer_held || l->timer_owed)
		return false;
	l->timer_held = true;
	timer_cancel(v, true); /* off for long: no wake-up for it */
	return true;
}

/* @v's thread, lock held: the guest ended a timer interrupt; the next
 * tick a CATCHUP owes goes in at once (one in service at a time). */
void lapic_timer_eoi(struct vcpu *v)
{
	struct lapic *l = &v->lapic;

	if (l->timer_period_ns && l->timer_owed && !l->timer_held)
		timer_periodic_run(v, now_ns());
}

/* @v's lock held: the ticks due since the hold, by the VM's policy. */
void lapic_timer_release(struct vcpu *v)
{
	struct lapic *l = &v->lapic;
	uint64_t now = now_ns();

	if (!l->timer_held)
		return;
	l->timer_held = false;
	if (!l->timer_period_ns) {
		/* a re-armed tick: its one deadline, if it passed; what the
		 * periods that passed become is the guest's own code's say */
		if (now < l->timer_deadline_ns) {
			timer_arm(v, l->timer_deadline_ns);
			return;
		}
		l->ticks_held += (now - l->timer_deadline_ns) /
				 l->timer_tick_ns + 1;
		timer_oneshot_fire(v);
		return;
	}
	if (now >= l->timer_next_ns)
		l->ticks_held += (now - l->timer_next_ns) /
				 l->timer_period_ns + 1;
	timer_periodic_run(v, now);
}

const char *lapic_tick_policy_name(enum lapic_tick_policy p)
{
	static const char *const names[] = { "honour", "catchup", "discard" };

	return names[p];
}

int lapic_tick_policy_parse(const char *s, enum lapic_tick_policy *p)
{
	for (int i = LAPIC_TICK_HONOUR; i <= LAPIC_TICK_DISCARD; i++)
		if (!strcmp(s, lapic_tick_policy_name(i))) {
			*p = i;
			return 0;
		}
	return -1;
}

void lapic_timer_init(struct vcpu *v)
{
	hk_timer_init(&v->lapic.timer, lapic_timer_fire);
}

static uint64_t timer_icr_period(const struct lapic *l)
{
	return (uint64_t)l->timer_icr * timer_divide(l) *
	       (1000000000ull / GUEST_APIC_TIMER_HZ);
}

/* When a running one-shot or periodic count next reaches 0, else 0. */
static uint64_t timer_next_expiry(const struct lapic *l, uint64_t now)
{
	uint64_t p = l->timer_period_ns;

	if (!l->timer_deadline_ns)
		return 0;
	if (!p)
		return l->timer_deadline_ns > now ? l->timer_deadline_ns : 0;
	if (now < l->timer_next_ns)
		return l->timer_next_ns;
	return now + p - (now - l->timer_next_ns) % p;
}

/*
 * One-shot <-> periodic: the count goes on from where it is; a periodic
 * timer becomes one that stops at 0, a running one-shot one that reloads
 * at 0; an expired one-shot stays at 0. Caller holds the lock, the mode
 * already changed in the timer's LVT entry.
 */
static void timer_switch_count_mode(struct vcpu *v, uint64_t now)
{
	struct lapic *l = &v->lapic;
	uint64_t next = timer_next_expiry(l, now), period;

	lapic_timer_stop(v);
	timer_detect_tick(l, 0);
	if (!next)
		return;
	if (timer_mode(l) == APIC_LVT_TIMER_PERIODIC) {
		period = timer_icr_period(l);
		l->timer_period_ns = period < TIMER_MIN_PERIOD_NS ?
				     TIMER_MIN_PERIOD_NS : period;
		l->timer_next_ns = next;
		l->timer_start_ns = next - l->timer_period_ns;
	}
	timer_arm(v, next);
}

/*
 * Caller holds the vCPU lock. Between one-shot and periodic the count runs
 * on (timer_switch_count_mode); into or out of TSC-deadline mode the timer
 * stops, the initial count and the deadline are cleared. Without the
 * TSC-deadline feature bit 18 is reserved (reads 0).
 */
void lapic_timer_write_lvt(struct vcpu *v, uint32_t val)
{
	struct lapic *l = &v->lapic;
	uint32_t old_mode = timer_mode(l), modes = APIC_LVT_TIMER_MODE;

	if (!vm_cpu_has(v->vm, CPU_F_TSC_DEADLINE))
		modes = APIC_LVT_TIMER_PERIODIC;
	l->lvt[LAPIC_LVT_TIMER] =
		val & (APIC_VECTOR_MASK | APIC_LVT_MASKED | modes);
	if (timer_mode(l) == old_mode)
		return;
	if (old_mode == APIC_LVT_TIMER_TSCDEADLINE ||
	    timer_mode(l) == APIC_LVT_TIMER_TSCDEADLINE) {
		lapic_timer_stop(v);
		timer_detect_tick(l, 0);
		l->timer_icr = 0;
		return;
	}
	timer_switch_count_mode(v, now_ns());
}

void lapic_timer_write_icr(struct vcpu *v, uint32_t count)
{
	struct lapic *l = &v->lapic;
	uint64_t period;

	if (timer_mode(l) == APIC_LVT_TIMER_TSCDEADLINE)
		return;
	lapic_timer_stop(v);
	l->timer_icr = count;
	if (!count) {
		timer_detect_tick(l, 0);
		return;
	}
	period = timer_icr_period(l);
	if (timer_mode(l) == APIC_LVT_TIMER_PERIODIC)
		l->timer_period_ns = period < TIMER_MIN_PERIOD_NS ?
				     TIMER_MIN_PERIOD_NS : period;
	l->timer_start_ns = now_ns();
	l->timer_next_ns = l->timer_start_ns + period;
	timer_detect_tick(l, l->timer_period_ns ? 0 : l->timer_next_ns);
	timer_arm(v, l->timer_next_ns);
}

void lapic_timer_write_dcr(struct vcpu *v, uint32_t val)
{
	v->lapic.timer_dcr = val & APIC_TDCR_MASK;
}

uint32_t lapic_timer_read_ccr(struct vcpu *v)
{
	struct lapic *l = &v->lapic;
	uint64_t now = now_ns(), left, period;

	if (timer_mode(l) == APIC_LVT_TIMER_TSCDEADLINE || !l->timer_deadline_ns)
		return 0;
	if (l->timer_period_ns) { /* counts on through held and late ticks */
		period = l->timer_period_ns;
		left = now < l->timer_next_ns ? l->timer_next_ns - now :
		       period - (now - l->timer_next_ns) % period;
	} else if (now < l->timer_deadline_ns) {
		left = l->timer_deadline_ns - now;
	} else {
		return 0;
	}
	left /= timer_divide(l) * (1000000000ull / GUEST_APIC_TIMER_HZ);
	return left > l->timer_icr ? l->timer_icr : (uint32_t)left;
}

/* Guest TSC @tsc to host CLOCK_MONOTONIC ns; the past maps to "now". */
static uint64_t tsc_to_ns(const struct lapic *l, uint64_t tsc)
{
	unsigned __int128 ns;

	if (tsc <= l->tsc0)
		return l->tsc0_ns;
	ns = (unsigned __int128)(tsc - l->tsc0) * 1000000u / l->tsc_khz;
	if (ns > UINT64_MAX / 2)
		return UINT64_MAX / 2;
	return l->tsc0_ns + (uint64_t)ns;
}

/* Caller holds the lock: the armed deadline, 0 outside TSC-deadline
 * mode (and once it fired). */
uint64_t lapic_timer_read_tsc_deadline(const struct vcpu *v)
{
	if (timer_mode(&v->lapic) != APIC_LVT_TIMER_TSCDEADLINE)
		return 0;
	return v->lapic.tsc_deadline;
}

/* Writes are ignored outside TSC-deadline mode; 0 disarms. */
void lapic_timer_write_tsc_deadline(struct vcpu *v, uint64_t tsc)
{
	struct lapic *l = &v->lapic;

	if (timer_mode(l) != APIC_LVT_TIMER_TSCDEADLINE)
		return;
	lapic_timer_stop(v);
	l->tsc_deadline = tsc;
	timer_detect_tick(l, tsc ? tsc_to_ns(l, tsc) : 0);
	if (tsc)
		timer_arm(v, tsc_to_ns(l, tsc));
}
