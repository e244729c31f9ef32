/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The paravirtual tick (include/sysidle/guest_abi.h): a per-vCPU periodic
 * fixed interrupt at the rate the guest asks for, driven by one
 * housekeeping timer per vCPU that has it enabled.
 *
 * Accounting: tick k (k >= 1) is due at epoch + k * period, epoch being the
 * time of the MSR_SYSIDLE_PVTICK_HZ write; the phase never changes while the
 * tick is on. Every due tick is either delivered (its vector set in the IRR)
 * or counted in @missed, which the guest reads and clears:
 *  - the housekeeping thread was late by more than a period: the extra
 *    periods are missed;
 *  - the previous tick is still pending in the IRR: missed;
 *  - under --sysidle, the vCPU is a halted non-timekeeper: missed, the timer
 *    is left disarmed (no host wake-up per period) and the periods that
 *    pass until the vCPU runs again are counted when it resumes
 *    (pvtick_resume; on the vCPU's own wake path pvtick_resume_unarmed,
 *    its timer armed after the vCPU's next KVM_RUN: pvtick_arm_resumed);
 *  - the whole VM is fully idle: every vCPU's tick is suspended and the
 *    periods are counted the same way when it resumes.
 *  - the guest reads MISSED while ticks are due whose timer has not fired
 *    yet: they are counted then (the timer moves on to the next period).
 * So at any time: delivered + missed-read + missed-pending + (periods not
 * yet accounted while suppressed, or resumed and not yet armed) == ticks
 * due since epoch.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <sysidle/guest_abi.h>

#include "base/error.h"
#include "base/time.h"
#include "idle/pvtick.h"
#include "machine/msr.h"
#include "machine/pause.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

static struct {
	struct pvtick *ticks; /* one per vCPU, by id */
	bool (*suppress)(const struct vcpu *v);
} pt;

struct pvtick *pvtick_of(const struct vcpu *v)
{
	return &pt.ticks[v->id];
}

static void pvtick_arm(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	t->deadline_ns = t->epoch_ns + t->next * t->period_ns;
	hk_timer_arm(&t->timer, t->deadline_ns);
}

static void pvtick_disarm(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	t->deadline_ns = 0;
	hk_timer_cancel(&t->timer);
}

/* The ticks due at @now from @next on (0 if none), accounted: next moves
 * past them. */
static uint64_t pvtick_take_due(struct pvtick *t, uint64_t now)
{
	uint64_t due;

	if (now < t->epoch_ns + t->next * t->period_ns)
		return 0;
	due = (now - t->epoch_ns) / t->period_ns + 1 - t->next;
	t->next += due;
	return due;
}

/* @v's lock held: set the tick's vector in the IRR and kick @v (for
 * @reason, should the VM be paused), unless the previous tick is still
 * pending there. Returns whether it was posted. */
static bool pvtick_post(struct vcpu *v, enum pause_reason reason)
{
	struct pvtick *t = pvtick_of(v);
	struct lapic *l = &v->lapic;

	if (l->irr[t->vector / 32] & (1u << (t->vector % 32)))
		return false;
	lapic_set_irr(l, t->vector, false);
	t->delivered++;
	vcpu_kick_from(v, reason, reason == PAUSE_REASON_KICK ? WAKE_SRC_KICK :
		       WAKE_SRC_PVTICK, t->vector);
	return true;
}

/* Housekeeping thread: a tick is due. */
static void pvtick_fire(struct hk_timer *ht, uint64_t deadline_ns)
{
	struct pvtick *t = container_of(ht, struct pvtick, timer);
	struct vcpu *v = t->vcpu;
	uint64_t due;

	pthread_mutex_lock(&v->lock);
	if (!t->hz || t->deadline_ns != deadline_ns) { /* stale */
		pthread_mutex_unlock(&v->lock);
		return;
	}
	due = pvtick_take_due(t, now_ns());
	if (!due) { /* early wake-up (cannot happen with an ABSTIME timer) */
		pvtick_arm(v);
	} else if (pt.suppress && pt.suppress(v)) {
		/* A halted non-timekeeper: nothing delivered, timer left
		 * disarmed until the vCPU runs (pvtick_resume). */
		t->missed += due;
		t->nsuppressed += due;
		t->suppressed = true;
		t->deadline_ns = 0;
	} else {
		/* the last one due is delivered, unless the previous one is
		 * still pending */
		t->missed += due;
		if (pvtick_post(v, PAUSE_REASON_TIMER))
			t->missed--;
		pvtick_arm(v);
	}
	pthread_mutex_unlock(&v->lock);
}

/* INIT: the tick is off. */
static void pvtick_reset(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	pvtick_disarm(v);
	t->hz = 0;
	t->vector = 0;
	t->missed = 0;
	t->suppressed = false;
}

void pvtick_suspend(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	t->stop_missed = 0;
	if (!t->hz || t->suppressed)
		return;
	pvtick_disarm(v);
	t->suppressed = true;
}

/* @v's lock held: the periods that passed while the tick was suppressed
 * are counted missed, and it is suppressed no longer. */
static void pvtick_unsuppress(struct pvtick *t)
{
	uint64_t due = pvtick_take_due(t, now_ns());

	t->missed += due;
	t->nsuppressed += due;
	t->stop_missed += due;
	t->suppressed = false;
}

bool pvtick_resume_unarmed(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	if (!t->hz || !t->suppressed)
		return false;
	pvtick_unsuppress(t);
	return true;
}

void pvtick_resume(struct vcpu *v)
{
	if (pvtick_resume_unarmed(v))
		pvtick_arm(v);
}

void pvtick_arm_resumed(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);
	uint64_t due;

	if (!t->hz || t->suppressed || t->deadline_ns)
		return; /* stopped, suspended again, or armed already */
	due = pvtick_take_due(t, now_ns());
	t->missed += due; /* periods run through before the first exit */
	pvtick_arm(v);
}

/*
 * @v's lock held: ticks already due on a running tick whose timer has not
 * fired yet (a late housekeeping thread) are counted missed now, and the
 * timer moves on to the next period; so a MISSED read never lags behind
 * elapsed time.
 */
static void pvtick_catch_up(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);
	uint64_t due;

	if (!t->hz || t->suppressed)
		return;
	due = pvtick_take_due(t, now_ns());
	if (due) {
		t->missed += due;
		if (t->deadline_ns) /* else armed by pvtick_arm_resumed */
			pvtick_arm(v);
	}
}

/*
 * @v's lock held, any thread (the control socket's "kick"): deliver @v's
 * pv tick now, as one of the ticks already due (resumed first if it was
 * suspended), so the guest's jiffies still equal elapsed time. Nothing is
 * delivered when no tick is due or one is still pending. Returns whether
 * one was.
 */
bool pvtick_deliver_now(struct vcpu *v)
{
	struct pvtick *t = pvtick_of(v);

	if (!t->hz)
		return false;
	if (t->suppressed)
		pvtick_resume(v);
	else
		pvtick_catch_up(v);
	if (!t->missed || !pvtick_post(v, PAUSE_REASON_KICK))
		return false;
	t->missed--;
	if (t->nsuppressed)
		t->nsuppressed--;
	return true;
}

static int pvtick_msr_read(struct vcpu *v, uint32_t index, uint64_t *val)
{
	struct pvtick *t = pvtick_of(v);

	pthread_mutex_lock(&v->lock);
	switch (index) {
	case MSR_SYSIDLE_PVTICK_HZ:
		*val = t->hz;
		break;
	case MSR_SYSIDLE_PVTICK_VECTOR:
		*val = t->vector;
		break;
	default: /* MISSED: read and clear */
		pvtick_catch_up(v);
		*val = t->missed;
		t->missed = 0;
		break;
	}
	pthread_mutex_unlock(&v->lock);
	return 0;
}

static int pvtick_msr_write(struct vcpu *v, uint32_t index, uint64_t val)
{
	struct pvtick *t = pvtick_of(v);
	int err = 0;

	pthread_mutex_lock(&v->lock);
	switch (index) {
	case MSR_SYSIDLE_PVTICK_HZ:
		if (val > SYSIDLE_PVTICK_MAX_HZ || (val && !t->vector)) {
			err = -1;
			break;
		}
		pvtick_disarm(v);
		t->hz = (uint32_t)val;
		t->missed = 0;
		t->suppressed = false;
		if (!val)
			break;
		t->period_ns = 1000000000ull / val;
		t->epoch_ns = now_ns();
		t->next = 1;
		pvtick_arm(v);
		break;
	case MSR_SYSIDLE_PVTICK_VECTOR:
		if (val < 16 || val > 255)
			err = -1;
		else
			t->vector = (uint8_t)val;
		break;
	default: /* MISSED is read-only */
		err = -1;
		break;
	}
	pthread_mutex_unlock(&v->lock);
	return err;
}

int pvtick_init(struct vm *vm, bool (*suppress)(const struct vcpu *v))
{
	pt.ticks = aligned_alloc(64, vm->ncpus * sizeof(*pt.ticks));
	if (!pt.ticks)
		return vmm_fail(VMM_EXIT_KVM, "pv tick: out of memory");
	memset(pt.ticks, 0, vm->ncpus * sizeof(*pt.ticks));
	pt.suppress = suppress;
	for (unsigned int i = 0; i < vm->ncpus; i++) {
		pt.ticks[i].vcpu = &vm->vcpus[i];
		hk_timer_init(&pt.ticks[i].timer, pvtick_fire);
		hk_timer_set_name(&pt.ticks[i].timer, "pv-tick");
	}
	vcpu_set_reset_hook(pvtick_reset);
	return msr_register(MSR_SYSIDLE_PVTICK_HZ, MSR_SYSIDLE_PVTICK_MISSED,
			    pvtick_msr_read, pvtick_msr_write);
}

/* After every vCPU and the housekeeping thread have stopped. */
void pvtick_fini(void)
{
	free(pt.ticks);
	pt.ticks = NULL;
}
