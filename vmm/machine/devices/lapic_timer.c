/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The local APIC timer: one-shot, periodic and TSC-deadline, at
 * GUEST_APIC_TIMER_HZ (1 ns per count at divide 1). Deadlines go to the
 * housekeeping thread; its fire callback raises the LVT vector.
 */
#include "machine/pause.h"
#include "base/housekeeping.h"
#include "machine/vm.h"

#define LVT_TIMER_MODE (3u << 17)
#define TIMER_MIN_PERIOD_NS 50000ull /* periodic mode never faster */

static uint32_t timer_divide(const struct lapic *l)
{
	uint32_t d = (l->timer_dcr & 3) | ((l->timer_dcr & 8) >> 1);

	return d == 7 ? 1 : 2u << d;
}

static uint32_t timer_mode(const struct lapic *l)
{
	return l->lvt[0] & LVT_TIMER_MODE;
}

static void timer_arm(struct vcpu *v, uint64_t deadline_ns)
{
	v->lapic.timer_deadline_ns = deadline_ns ? deadline_ns : 1;
	hk_timer_arm(&v->lapic.timer, v->lapic.timer_deadline_ns);
}

void lapic_timer_stop(struct vcpu *v)
{
	v->lapic.timer_deadline_ns = 0;
	v->lapic.timer_period_ns = 0;
	v->lapic.tsc_deadline = 0;
	hk_timer_cancel(&v->lapic.timer);
}

/* Housekeeping thread: @deadline_ns passed; stale unless it is still ours. */
static void lapic_timer_fire(struct hk_timer *t, uint64_t deadline_ns)
{
	struct lapic *l = container_of(t, struct lapic, timer);
	struct vcpu *v = container_of(l, struct vcpu, lapic);
	uint64_t now, next;

	pthread_mutex_lock(&v->lock);
	if (l->timer_deadline_ns == deadline_ns) {
		if (!(l->lvt[0] & APIC_LVT_MASKED)) {
			lapic_set_irr(l, (uint8_t)l->lvt[0], false);
			vcpu_kick_for(v, PAUSE_REASON_TIMER);
		}
		if (l->timer_period_ns) {
			now = now_ns();
			next = deadline_ns + l->timer_period_ns;
			/* Late by whole periods: they coalesce in the IRR, as
			 * on hardware, but the phase is kept (no drift). */
			if (next <= now)
				next += ((now - next) / l->timer_period_ns + 1) *
					l->timer_period_ns;
			l->timer_start_ns = next - l->timer_period_ns;
			timer_arm(v, next);
		} else {
			l->timer_deadline_ns = 0;
			l->tsc_deadline = 0;
		}
	}
	pthread_mutex_unlock(&v->lock);
}

void lapic_timer_init(struct vcpu *v)
{
	hk_timer_init(&v->lapic.timer, lapic_timer_fire);
}

/* Caller holds the vCPU lock. A mode change stops the timer. */
void lapic_timer_write_lvt(struct vcpu *v, uint32_t val)
{
	struct lapic *l = &v->lapic;
	uint32_t old_mode = timer_mode(l);

	l->lvt[0] = val & (0xff | APIC_LVT_MASKED | LVT_TIMER_MODE);
	if (timer_mode(l) != old_mode) {
		lapic_timer_stop(v);
		l->timer_icr = 0;
	}
}

void lapic_timer_write_icr(struct vcpu *v, uint32_t count)
{
	struct lapic *l = &v->lapic;
	uint64_t period;

	if (timer_mode(l) == APIC_LVT_TIMER_TSCDEADLINE)
		return;
	lapic_timer_stop(v);
	l->timer_icr = count;
	if (!count)
		return;
	period = (uint64_t)count * timer_divide(l) *
		 (1000000000ull / GUEST_APIC_TIMER_HZ);
	if (timer_mode(l) == APIC_LVT_TIMER_PERIODIC)
		l->timer_period_ns = period < TIMER_MIN_PERIOD_NS ?
				     TIMER_MIN_PERIOD_NS : period;
	l->timer_start_ns = now_ns();
	timer_arm(v, l->timer_start_ns + period);
}

void lapic_timer_write_dcr(struct vcpu *v, uint32_t val)
{
	v->lapic.timer_dcr = val & 0xb;
}

uint32_t lapic_timer_read_ccr(struct vcpu *v)
{
	struct lapic *l = &v->lapic;
	uint64_t now = now_ns(), left, period;

	if (timer_mode(l) == APIC_LVT_TIMER_TSCDEADLINE || !l->timer_deadline_ns)
		return 0;
	if (now < l->timer_deadline_ns) {
		left = l->timer_deadline_ns - now;
	} else if (l->timer_period_ns) {
		period = l->timer_period_ns;
		left = period - (now - l->timer_start_ns) % period;
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

/* Writes are ignored outside TSC-deadline mode; 0 disarms. */
void lapic_timer_write_tsc_deadline(struct vcpu *v, uint64_t tsc)
{
	struct lapic *l = &v->lapic;

	if (timer_mode(l) != APIC_LVT_TIMER_TSCDEADLINE)
		return;
	lapic_timer_stop(v);
	l->tsc_deadline = tsc;
	if (tsc)
		timer_arm(v, tsc_to_ns(l, tsc));
}
