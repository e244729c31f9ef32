/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The host timer behind a vCPU's LAPIC timer (devices/lapic_timer.h's
 * ops): where its deadline waits, and who expires it.
 *  - The housekeeping thread's queue, whose callback expires it under
 *    the vCPU's lock (the timer's pending expiry then kicks the vCPU).
 *  - The vCPU's own thread (v->timer_self): the timeout of its wait in
 *    HLT (--vcpu-timers self), or a deadline it armed itself a few
 *    microseconds on, served right before its next KVM_RUN; no hop
 *    through another thread on the wake path.
 * The timer knows neither: it arms, cancels and is expired. The vCPU's
 * HLT (vcpu_halt.c) moves it between the two: wait_begin as it blocks,
 * wait_end as it leaves (unless the deadline is near enough to serve).
 */
#include "base/housekeeping.h"
#include "base/time.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vcpu_loop.h"
#include "machine/vm.h"

#define TIMER_SELF_SLACK_NS 2000ull /* spun rather than handed over */

static struct vcpu *timer_vcpu(struct lapic_timer *t)
{
	return container_of(t, struct vcpu, lapic.timer);
}

/* Only a deadline this near: a vCPU with an interrupt to take does not
 * spin for a timer (the advance is for a vCPU with nothing else to do). */
uint64_t vcpu_timer_keep_ns(const struct vcpu *v)
{
	const struct machine_config *cfg = v->vm->cfg;

	return cfg && cfg->timers_on_housekeeping ? 0 : TIMER_SELF_SLACK_NS;
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

static uint64_t timer_now(void)
{
	return now_ns();
}

/* Lock held. A deadline the vCPU's own thread arms (an exit it handles)
 * within its keep window stays with that thread, served before its next
 * KVM_RUN; a quiet move (a fallback) never changes hands. */
static void timer_arm(struct lapic_timer *t, uint64_t deadline_ns, bool quiet)
{
	struct vcpu *v = timer_vcpu(t);
	uint64_t keep;

	if (!quiet && !v->timer_self && vcpu_current() == v &&
	    (keep = vcpu_timer_keep_ns(v)) && deadline_ns <= now_ns() + keep)
		v->timer_self = true;
	if (v->timer_self)
		timer_self_moved(v);
	else if (quiet)
		hk_timer_arm_quiet(&v->timer_hk, deadline_ns);
	else
		hk_timer_arm(&v->timer_hk, deadline_ns);
}

/* Lock held. A wait that finds no deadline any more waits on. */
static void timer_cancel(struct lapic_timer *t, bool quiet)
{
	struct vcpu *v = timer_vcpu(t);

	if (v->timer_self)
		return;
	if (quiet)
		hk_timer_cancel_quiet(&v->timer_hk);
	else
		hk_timer_cancel(&v->timer_hk);
}

/* Lock held: the timer's expiry is pending, for the vCPU to take. */
static void timer_kick(struct lapic_timer *t)
{
	vcpu_kick_from(timer_vcpu(t), PAUSE_REASON_TIMER, WAKE_SRC_LAPIC_TIMER,
		       (lapic_timer_read_lvt(t) & APIC_LVT_TIMER_MODE) >>
		       APIC_LVT_TIMER_MODE_SHIFT);
}

static const struct lapic_timer_ops vcpu_timer_ops = {
	.now = timer_now,
	.arm = timer_arm,
	.cancel = timer_cancel,
	.kick = timer_kick,
};

/* Housekeeping thread: @deadline_ns passed; stale if the vCPU's own
 * thread took the timer over meanwhile (or the timer moved on). */
static void timer_hk_fire(struct hk_timer *h, uint64_t deadline_ns)
{
	struct vcpu *v = container_of(h, struct vcpu, timer_hk);

	pthread_mutex_lock(&v->lock);
	if (!v->timer_self)
		lapic_timer_expired(&v->lapic.timer, deadline_ns);
	pthread_mutex_unlock(&v->lock);
}

void vcpu_timer_init(struct vcpu *v)
{
	const struct machine_config *cfg = v->vm->cfg;

	hk_timer_init(&v->timer_hk, timer_hk_fire);
	hk_timer_set_name(&v->timer_hk, "lapic-timer");
	lapic_timer_init(&v->lapic.timer, &vcpu_timer_ops,
			 cfg ? cfg->lapic_tick_policy : LAPIC_TICK_HONOUR,
			 vm_cpu_has(v->vm, CPU_F_TSC_DEADLINE));
}

void vcpu_timer_wait_begin(struct vcpu *v)
{
	if (v->timer_self)
		return;
	v->timer_self = true;
	/* quiet: the host timer moves off it, no wake-up for nothing (its
	 * queue position is the housekeeping lock's: not looked at here) */
	hk_timer_cancel_quiet(&v->timer_hk);
}

uint64_t vcpu_timer_wait_deadline(const struct vcpu *v)
{
	return v->timer_self ? lapic_timer_deadline(&v->lapic.timer) : 0;
}

void vcpu_timer_expire(struct vcpu *v)
{
	uint64_t dl = lapic_timer_deadline(&v->lapic.timer);

	if (!dl)
		return;
	v->stats.timer_self_fired++;
	/* timer_self still set: a re-arm stays with this thread */
	lapic_timer_expired(&v->lapic.timer, dl);
}

void vcpu_timer_wait_end(struct vcpu *v, uint64_t now, uint64_t keep_ns)
{
	uint64_t dl = lapic_timer_deadline(&v->lapic.timer);

	if (!v->timer_self)
		return;
	if (dl && dl <= now + keep_ns)
		return; /* served before the next KVM_RUN */
	v->timer_self = false;
	if (dl)
		hk_timer_arm(&v->timer_hk, dl);
}

uint64_t vcpu_timer_entry_due(struct vcpu *v, uint64_t now, uint64_t keep_ns)
{
	if (!v->timer_self)
		return 0;
	vcpu_timer_wait_end(v, now, keep_ns);
	return v->timer_self ? lapic_timer_deadline(&v->lapic.timer) : 0;
}
