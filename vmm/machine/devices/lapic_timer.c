/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC timer (lapic_timer.h): one-shot, periodic and
 * TSC-deadline, at GUEST_APIC_TIMER_HZ (1 ns per count at divide 1). It
 * knows its registers, its count and its ticks; the clock, the host timer
 * and the vCPU are its owner's, reached through t->ops.
 */
#include <string.h>

#include <sysidle/guest_abi.h>

#include "machine/devices/lapic_timer.h"

#define TIMER_MIN_PERIOD_NS 50000ull /* periodic mode never faster */

static uint64_t timer_now(const struct lapic_timer *t)
{
	return t->ops->now();
}

static uint32_t timer_divide(const struct lapic_timer *t)
{
	uint32_t d = (t->dcr & 3) | ((t->dcr & 8) >> 1);

	return d == 7 ? 1 : 2u << d; /* 0b111: divide by 1 */
}

static uint32_t timer_mode(const struct lapic_timer *t)
{
	return t->lvtt & APIC_LVT_TIMER_MODE;
}

static bool timer_masked(const struct lapic_timer *t)
{
	return t->lvtt & APIC_LVT_MASKED;
}

/* The host timer at @deadline_ns (0 stands for "at once"). */
static void timer_arm(struct lapic_timer *t, uint64_t deadline_ns)
{
	t->deadline_ns = deadline_ns ? deadline_ns : 1;
	t->ops->arm(t, t->deadline_ns, false);
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
static void timer_detect_tick(struct lapic_timer *t, uint64_t deadline_ns)
{
	uint64_t prev = t->rearm_last_ns, iv = t->rearm_interval_ns, d, tol, r;
	bool fired = t->rearm_fired;

	t->rearm_last_ns = deadline_ns;
	t->rearm_fired = false;
	if (!deadline_ns || !prev || deadline_ns <= prev || !fired) {
		t->rearm_interval_ns = t->tick_ns = 0;
		t->rearm_streak = 0;
		return;
	}
	d = deadline_ns - prev;
	tol = iv / 1000 + 1000;
	r = iv ? d % iv : 0;
	if (iv && d + tol >= iv && (r <= tol || iv - r <= tol)) {
		if (++t->rearm_streak >= LAPIC_TICK_REARMS)
			t->tick_ns = iv;
	} else {
		t->rearm_interval_ns = d;
		t->rearm_streak = 0;
		t->tick_ns = 0;
	}
}

uint64_t lapic_timer_tick_period(const struct lapic_timer *t)
{
	return t->period_ns ? t->period_ns : t->tick_ns;
}

uint64_t lapic_timer_tick_phase(const struct lapic_timer *t)
{
	return t->period_ns ? t->next_ns : t->rearm_last_ns;
}

bool lapic_timer_periodic(const struct lapic_timer *t)
{
	return t->period_ns;
}

/* The count stops: no deadline, no hold, no late tick owed; an expiry
 * already pending stays, as the IRR bit it stands for would. */
static void timer_stop(struct lapic_timer *t)
{
	t->deadline_ns = 0;
	t->period_ns = 0;
	t->held = false;
	t->tsc_deadline = 0;
	if (t->pending > 1)
		t->pending = 1;
	t->ops->cancel(t, false);
}

/* Periodic mode at @now: the ticks that fell due from next_ns on become
 * pending (none while the LVT is masked: a masked tick is dropped). */
static void timer_periodic_account(struct lapic_timer *t, uint64_t now)
{
	uint64_t p = t->period_ns, due;

	if (now >= t->next_ns) {
		due = (now - t->next_ns) / p + 1;
		t->next_ns += due * p;
		t->pending += due;
	}
	t->start_ns = t->next_ns - p;
	if (timer_masked(t))
		t->pending = 0;
}

/*
 * Periodic mode: the host timer for the next tick. While a CATCHUP owes
 * late ticks, each one is taken as the one before leaves the IRR and the
 * host timer is only a fallback, LAPIC_CATCHUP_FACTOR periods on, moved
 * quietly as the grid moves: a burst of late ticks costs no host timer
 * wake-up. The take that pays the last one re-arms it for the next tick.
 */
static void timer_periodic_rearm(struct lapic_timer *t)
{
	uint64_t fallback;

	if (t->held) {
		t->deadline_ns = t->next_ns;
		return;
	}
	if (t->policy != LAPIC_TICK_CATCHUP || t->pending <= 1) {
		if (t->deadline_ns != t->next_ns)
			timer_arm(t, t->next_ns);
		return;
	}
	fallback = t->next_ns + (LAPIC_CATCHUP_FACTOR - 1) * t->period_ns;
	if (fallback != t->deadline_ns) {
		t->deadline_ns = fallback;
		t->ops->arm(t, fallback, true);
	}
}

/* A one-shot or TSC-deadline timer expired: its interrupt is pending
 * (unless masked), the count is at 0. */
static void timer_oneshot_expire(struct lapic_timer *t)
{
	if (!timer_masked(t))
		t->pending = 1;
	t->deadline_ns = 0;
	t->tsc_deadline = 0;
	t->rearm_fired = true;
}

uint64_t lapic_timer_deadline(const struct lapic_timer *t)
{
	return t->held ? 0 : t->deadline_ns;
}

void lapic_timer_expired(struct lapic_timer *t, uint64_t deadline_ns)
{
	if (!deadline_ns || t->deadline_ns != deadline_ns || t->held)
		return; /* stale: moved, stopped or held since it was armed */
	if (t->period_ns) {
		timer_periodic_account(t, timer_now(t));
		timer_periodic_rearm(t);
	} else {
		timer_oneshot_expire(t);
	}
	if (t->pending)
		t->ops->kick(t);
}

int lapic_timer_pending_vector(const struct lapic_timer *t)
{
	return t->pending && !timer_masked(t) ?
	       (int)(t->lvtt & APIC_VECTOR_MASK) : -1;
}

uint64_t lapic_timer_owed(const struct lapic_timer *t)
{
	return t->pending;
}

bool lapic_timer_take(struct lapic_timer *t, bool requested)
{
	bool catchup = t->policy == LAPIC_TICK_CATCHUP;

	if (t->period_ns && catchup && !t->held)
		/* late ticks fell due while the host timer was a fallback */
		timer_periodic_account(t, timer_now(t));
	if (!t->pending || timer_masked(t)) {
		t->pending = 0;
		return false;
	}
	if (!catchup) {
		/* one in the IRR for all of them, as on hardware */
		t->ticks_coalesced += t->pending - !requested;
		t->pending = 0;
	} else if (!requested) {
		/* late: more were due behind it */
		t->ticks_caught_up += t->pending > 1;
		t->pending--;
	}
	if (t->period_ns)
		timer_periodic_rearm(t);
	return !requested;
}

/*
 * The vCPU not running or its own thread (nothing writes the registers
 * meanwhile): turn the tick's host timer off (periodic, or a one-shot
 * seen re-armed as a tick). Nothing is delivered until
 * lapic_timer_release(); a write that reprograms the timer ends the hold.
 */
bool lapic_timer_hold(struct lapic_timer *t)
{
	bool tick = t->period_ns || (t->tick_ns && t->deadline_ns);

	if (!tick || timer_masked(t) || t->held || t->pending > 1)
		return false;
	t->held = true;
	t->ops->cancel(t, true); /* off for long: no wake-up for it */
	return true;
}

/* The ticks due since the hold, by the policy. */
void lapic_timer_release(struct lapic_timer *t)
{
	uint64_t now = timer_now(t);

	if (!t->held)
		return;
	t->held = false;
	if (!t->period_ns) {
		/* a re-armed tick: its one deadline, if it passed; what the
		 * periods that passed become is the guest's own code's say */
		if (now < t->deadline_ns) {
			timer_arm(t, t->deadline_ns);
			return;
		}
		t->ticks_held += (now - t->deadline_ns) / t->tick_ns + 1;
		timer_oneshot_expire(t);
	} else {
		if (now >= t->next_ns)
			t->ticks_held += (now - t->next_ns) / t->period_ns + 1;
		t->deadline_ns = 0; /* re-armed below, whatever it was */
		timer_periodic_account(t, now);
		timer_periodic_rearm(t);
	}
	if (t->pending)
		t->ops->kick(t);
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

void lapic_timer_init(struct lapic_timer *t, const struct lapic_timer_ops *ops,
		      enum lapic_tick_policy policy, bool has_tsc_deadline)
{
	memset(t, 0, sizeof(*t));
	t->ops = ops;
	t->policy = policy;
	t->has_tsc_deadline = has_tsc_deadline;
	t->lvtt = APIC_LVT_MASKED;
}

void lapic_timer_set_tsc(struct lapic_timer *t, uint64_t tsc0,
			 uint64_t tsc0_ns, uint32_t khz)
{
	t->tsc0 = tsc0;
	t->tsc0_ns = tsc0_ns;
	t->tsc_khz = khz;
}

void lapic_timer_reset(struct lapic_timer *t)
{
	timer_stop(t);
	t->pending = 0;
	t->lvtt = APIC_LVT_MASKED;
	t->icr = t->dcr = 0;
	t->rearm_last_ns = t->rearm_interval_ns = t->tick_ns = 0;
	t->rearm_streak = 0;
	t->rearm_fired = false;
}

static uint64_t timer_icr_period(const struct lapic_timer *t)
{
	return (uint64_t)t->icr * timer_divide(t) *
	       (1000000000ull / GUEST_APIC_TIMER_HZ);
}

/* When a running one-shot or periodic count next reaches 0, else 0. */
static uint64_t timer_next_expiry(const struct lapic_timer *t, uint64_t now)
{
	uint64_t p = t->period_ns;

	if (!t->deadline_ns)
		return 0;
	if (!p)
		return t->deadline_ns > now ? t->deadline_ns : 0;
	if (now < t->next_ns)
		return t->next_ns;
	return now + p - (now - t->next_ns) % p;
}

/*
 * One-shot <-> periodic: the count goes on from where it is; a periodic
 * timer becomes one that stops at 0, a running one-shot one that reloads
 * at 0; an expired one-shot stays at 0. The mode already changed in lvtt.
 */
static void timer_switch_count_mode(struct lapic_timer *t, uint64_t now)
{
	uint64_t next = timer_next_expiry(t, now), period;

	timer_stop(t);
	timer_detect_tick(t, 0);
	if (!next)
		return;
	if (timer_mode(t) == APIC_LVT_TIMER_PERIODIC) {
		period = timer_icr_period(t);
		t->period_ns = period < TIMER_MIN_PERIOD_NS ?
			       TIMER_MIN_PERIOD_NS : period;
		t->next_ns = next;
		t->start_ns = next - t->period_ns;
	}
	timer_arm(t, next);
}

/*
 * Between one-shot and periodic the count runs on (timer_switch_count_mode);
 * into or out of TSC-deadline mode the timer stops, the initial count and
 * the deadline are cleared. Without the TSC-deadline feature bit 18 is
 * reserved (reads 0).
 */
void lapic_timer_write_lvt(struct lapic_timer *t, uint32_t val)
{
	uint32_t old_mode = timer_mode(t), modes = APIC_LVT_TIMER_MODE;

	if (!t->has_tsc_deadline)
		modes = APIC_LVT_TIMER_PERIODIC;
	t->lvtt = val & (APIC_VECTOR_MASK | APIC_LVT_MASKED | modes);
	if (timer_mode(t) == old_mode)
		return;
	if (old_mode == APIC_LVT_TIMER_TSCDEADLINE ||
	    timer_mode(t) == APIC_LVT_TIMER_TSCDEADLINE) {
		timer_stop(t);
		timer_detect_tick(t, 0);
		t->icr = 0;
		return;
	}
	timer_switch_count_mode(t, timer_now(t));
}

void lapic_timer_write_icr(struct lapic_timer *t, uint32_t count)
{
	uint64_t period;

	if (timer_mode(t) == APIC_LVT_TIMER_TSCDEADLINE)
		return;
	timer_stop(t);
	t->icr = count;
	if (!count) {
		timer_detect_tick(t, 0);
		return;
	}
	period = timer_icr_period(t);
	if (timer_mode(t) == APIC_LVT_TIMER_PERIODIC)
		t->period_ns = period < TIMER_MIN_PERIOD_NS ?
			       TIMER_MIN_PERIOD_NS : period;
	t->start_ns = timer_now(t);
	t->next_ns = t->start_ns + period;
	timer_detect_tick(t, t->period_ns ? 0 : t->next_ns);
	timer_arm(t, t->next_ns);
}

void lapic_timer_write_dcr(struct lapic_timer *t, uint32_t val)
{
	t->dcr = val & APIC_TDCR_MASK;
}

uint32_t lapic_timer_read_lvt(const struct lapic_timer *t)
{
	return t->lvtt;
}

uint32_t lapic_timer_read_icr(const struct lapic_timer *t)
{
	return t->icr;
}

uint32_t lapic_timer_read_dcr(const struct lapic_timer *t)
{
	return t->dcr;
}

uint32_t lapic_timer_read_ccr(const struct lapic_timer *t)
{
	uint64_t now = timer_now(t), left, period;

	if (timer_mode(t) == APIC_LVT_TIMER_TSCDEADLINE || !t->deadline_ns)
		return 0;
	if (t->period_ns) { /* counts on through held and late ticks */
		period = t->period_ns;
		left = now < t->next_ns ? t->next_ns - now :
		       period - (now - t->next_ns) % period;
	} else if (now < t->deadline_ns) {
		left = t->deadline_ns - now;
	} else {
		return 0;
	}
	left /= timer_divide(t) * (1000000000ull / GUEST_APIC_TIMER_HZ);
	return left > t->icr ? t->icr : (uint32_t)left;
}

/* Guest TSC @tsc to host CLOCK_MONOTONIC ns; the past maps to "now". */
static uint64_t tsc_to_ns(const struct lapic_timer *t, uint64_t tsc)
{
	unsigned __int128 ns;

	if (tsc <= t->tsc0 || !t->tsc_khz)
		return t->tsc0_ns;
	ns = (unsigned __int128)(tsc - t->tsc0) * 1000000u / t->tsc_khz;
	if (ns > UINT64_MAX / 2)
		return UINT64_MAX / 2;
	return t->tsc0_ns + (uint64_t)ns;
}

/* The armed deadline, 0 outside TSC-deadline mode (and once it fired). */
uint64_t lapic_timer_read_tsc_deadline(const struct lapic_timer *t)
{
	if (timer_mode(t) != APIC_LVT_TIMER_TSCDEADLINE)
		return 0;
	return t->tsc_deadline;
}

/* Writes are ignored outside TSC-deadline mode; 0 disarms. */
void lapic_timer_write_tsc_deadline(struct lapic_timer *t, uint64_t tsc)
{
	if (timer_mode(t) != APIC_LVT_TIMER_TSCDEADLINE)
		return;
	timer_stop(t);
	t->tsc_deadline = tsc;
	timer_detect_tick(t, tsc ? tsc_to_ns(t, tsc) : 0);
	if (tsc)
		timer_arm(t, tsc_to_ns(t, tsc));
}
