/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The timekeeper vCPU (vCPU 0, --timekeeper N) and its tick: its pv tick
 * when that runs, else the guest's own LAPIC tick (tk_tick: periodic, or a
 * one-shot re-armed at a constant period), so that a guest that never
 * heard of the pv tick keeps its timekeeper idle too. Its state for the
 * rule "a wake-up that only took its tick keeps it idle" is one atomic,
 * tk_state, written by the timekeeper's own thread: TK_HALTED, TK_BUSY, or
 * the start time of a tick-only window. A wake-up with only the tick's
 * vector pending opens a window; the window closes at the next HLT if that
 * comes within one tick period and nothing but the tick's own exits (EOI,
 * the MISSED read, a re-armed tick's re-arm, interrupt-window and signal
 * exits) happened and no other vector was injected. Anything else, and a
 * window still open after a period, makes it TK_BUSY. A LAPIC tick keeps
 * firing in full idle (it is the guest's own timer: honoured), so its
 * windows are aged by the timekeeper's own exits too, not only by the
 * housekeeping tick, which is stopped then. The library is never
 * called from the vCPU thread for this: the timekeeper side alone calls
 * sysidle_force_exit, on the housekeeping thread (tick.c), when (a) the
 * timekeeper thread asked for it (force_req + kick: it turned TK_BUSY while
 * the state was above SHORT), or (b) the housekeeping tick finds the
 * timekeeper busy or its window older than a period.
 */
#include <linux/kvm.h>

#include <sysidle/guest_abi.h>

#include "base/housekeeping.h"
#include "base/time.h"
#include "idle/internal.h"
#include "idle/pvtick.h"
#include "machine/vcpu.h"
#include "machine/vm.h"

bool tk_busy(uint64_t tk, uint64_t now)
{
	struct idle_layer *idle = idle_layer();

	/* relaxed: the period is a setting; tk_state carries the order. */
	uint64_t p = atomic_load_explicit(&idle->tk_period,
					  memory_order_relaxed);

	return tk == TK_BUSY || (tk > TK_BUSY && now > tk && now - tk > p);
}

/* Timekeeper thread: it did more than take its tick. Returns true when
 * the housekeeping thread must be kicked to force the exit. */
bool tk_set_busy(const struct vcpu *v)
{
	struct idle_layer *idle = idle_layer();

	/* seq_cst store then seq_cst load of the state (sysidle_state):
	 * pairs with idle_step()'s cmpxchg (in sysidle_is_idle) then load
	 * of tk_state. */
	atomic_store(&idle->tk_state, TK_BUSY);
	if (sysidle_state(idle->s) <= SYSIDLE_SHORT)
		return false; /* nothing to reset; the next tick sees BUSY */
	/* seq_cst store: pairs with the exchange in idle_force_exit, which
	 * follows the exchange of force_req stored below; what woke @v
	 * (its lock held) is what the force-exit is put down to. */
	atomic_store(&idle->force_src, FORCE_SRC(v->wake_src, v->wake_detail));
	/* seq_cst store: pairs with the exchange in idle_hk_kick/idle_step. */
	atomic_store(&idle->force_req, true);
	return true;
}

/*
 * The timekeeper's tick, @v's lock held: its vector and period. The pv tick
 * when it is on (none while it is suspended: a tick pending then fired just
 * before idle_stop, and nothing would age its window), else the guest's
 * LAPIC timer when it is unmasked and a tick: periodic, or a one-shot /
 * TSC-deadline timer seen re-armed at a constant period. False: no tick.
 */
bool tk_tick(const struct vcpu *v, uint8_t *vector, uint64_t *period)
{
	const struct pvtick *t = pvtick_of(v);
	const struct lapic_timer *l = &v->lapic.timer;

	if (t->hz) {
		*vector = t->vector;
		*period = t->period_ns;
		return !t->suppressed;
	}
	*period = lapic_timer_tick_period(l);
	if (!*period || (lapic_timer_read_lvt(l) & APIC_LVT_MASKED))
		return false;
	*vector = (uint8_t)lapic_timer_read_lvt(l);
	return true;
}

/*
 * The timekeeper @v, lock held, not running (idle_stop): may its tick be
 * held back for the full-idle period? Only the guest's own LAPIC tick
 * (periodic or re-armed), and only under --lapic-tick-policy catchup or
 * discard; a pv tick is suspended instead (pvtick_suspend), any other
 * timer is honoured.
 */
bool tk_tick_holdable(const struct vcpu *v)
{
	struct idle_layer *idle = idle_layer();
	uint8_t vector;
	uint64_t period;

	return idle->vm->cfg &&
	       idle->vm->cfg->lapic_tick_policy != LAPIC_TICK_HONOUR &&
	       !pvtick_of(v)->hz && tk_tick(v, &vector, &period);
}

/* Timekeeper thread, lock held: it halts (idle_halt). Back in HLT within a
 * period of a tick-only window: still idle since before. */
void tk_halt(struct vcpu *v, bool plain, uint64_t now)
{
	struct idle_layer *idle = idle_layer();

	/* relaxed: written by this thread (tk_wake), like tk_state. */
	uint64_t period = atomic_load_explicit(&idle->tk_period,
					       memory_order_relaxed);
	/* relaxed: only this thread writes tk_state. */
	uint64_t tk = atomic_load_explicit(&idle->tk_state,
					   memory_order_relaxed);

	if (tk > TK_BUSY && !plain && now - tk > period && tk_set_busy(v))
		housekeeping_kick(); /* back in HLT too late */
	/* Took only its tick: still idle since before. Else: */
	if (!(tk > TK_BUSY && now - tk <= period))
		/* relaxed: a statistic (detection latency). */
		atomic_store_explicit(&idle_vcpu(v)->halted_at_ns, now,
				      memory_order_relaxed);
	/* seq_cst store: pairs with idle_step()'s loads. */
	atomic_store(&idle->tk_state, TK_HALTED);
	/* Still fully idle after a release (the max-hold backstop, or a
	 * catch-up that owed ticks): hold the tick again. */
	if (idle->tk_hold)
		lapic_timer_hold(&v->lapic.timer);
}

/* Timekeeper thread, lock held: it is woken (idle_wake). Returns true when
 * the housekeeping thread must be kicked. */
bool tk_wake(struct vcpu *v, bool plain, uint64_t now)
{
	struct idle_layer *idle = idle_layer();
	uint8_t vector = 0;
	uint64_t period = 0;
	bool kick;
	bool tick_only = !plain && tk_tick(v, &vector, &period) &&
			 !v->nmi_pending && !v->init_pending &&
			 lapic_irr_only(&v->lapic, vector);

	sysidle_exit(idle->s, v->id); /* never changes the state */
	if (tick_only) {
		idle->tk_vector = vector; /* this thread only (tk_inject) */
		/* a re-armed tick: its handler's re-arm is the tick's own */
		idle->tk_rearm = !pvtick_of(v)->hz && !lapic_timer_periodic(&v->lapic.timer);
		/* relaxed: a setting read by tk_busy(). */
		atomic_store_explicit(&idle->tk_period, period,
				      memory_order_relaxed);
		/* seq_cst store: pairs with idle_step()'s loads. */
		atomic_store(&idle->tk_state, now > TK_BUSY ? now : 2);
		return false;
	}
	kick = tk_set_busy(v);
	idle_vcpu(v)->tick_unarmed |= pvtick_resume_unarmed(v);
	return kick;
}

/* Any vCPU thread, before handling an exit: in the timekeeper's tick-only
 * window only the tick's own exits are allowed, within a period. */
void tk_exit(struct vcpu *v)
{
	struct idle_layer *idle = idle_layer();
	struct kvm_run *r = v->run;
	uint64_t tk;
	bool ok;

	if ((int)v->id != idle->tk)
		return;
	/* relaxed: only this thread writes tk_state. */
	tk = atomic_load_explicit(&idle->tk_state, memory_order_relaxed);
	if (tk <= TK_BUSY)
		return;
	switch (r->exit_reason) {
	case KVM_EXIT_HLT:
	case KVM_EXIT_IRQ_WINDOW_OPEN:
	case KVM_EXIT_INTR:
		ok = true;
		break;
	case KVM_EXIT_X86_RDMSR:
		ok = r->msr.index == MSR_SYSIDLE_PVTICK_MISSED;
		break;
	case KVM_EXIT_X86_WRMSR:
		ok = r->msr.index == APIC_X2APIC_MSR(APIC_REG_EOI) ||
		     (idle->tk_rearm &&
		      (r->msr.index == MSR_IA32_TSC_DEADLINE ||
		       r->msr.index == APIC_X2APIC_MSR(APIC_REG_TIMER_ICR)));
		break;
	case KVM_EXIT_MMIO:
		/* the xAPIC page where this vCPU's APIC base puts it */
		ok = r->mmio.is_write &&
		     lapic_mmio_claims(&v->lapic, r->mmio.phys_addr) &&
		     ((r->mmio.phys_addr & (APIC_PAGE_SIZE - 1)) ==
			      APIC_REG_EOI ||
		      (idle->tk_rearm &&
		       (r->mmio.phys_addr & (APIC_PAGE_SIZE - 1)) ==
			       APIC_REG_TIMER_ICR));
		break;
	default:
		ok = false;
	}
	/* relaxed: written by this thread (tk_wake). */
	if (ok && now_ns() - tk > atomic_load_explicit(&idle->tk_period,
						       memory_order_relaxed))
		ok = false; /* its window outlived a period: more than a tick */
	if (!ok && tk_set_busy(v))
		housekeeping_kick();
}

/*
 * Any vCPU thread, lock held, about to inject @vector: on the timekeeper,
 * in a tick-only window, only the tick's vector. A late tick a CATCHUP
 * still delivers (more owed after it) moves the window's start on by
 * 1/LAPIC_CATCHUP_FACTOR of a period: a burst of them is one window, as
 * long as the guest spends no more than that on each.
 */
void tk_inject(struct vcpu *v, int vector)
{
	struct idle_layer *idle = idle_layer();

	/* relaxed: only this thread writes tk_state. */
	uint64_t tk = atomic_load_explicit(&idle->tk_state,
					   memory_order_relaxed), later;

	if ((int)v->id != idle->tk || tk <= TK_BUSY)
		return;
	if (vector != idle->tk_vector) {
		if (tk_set_busy(v))
			housekeeping_kick();
		return;
	}
	if (!lapic_timer_owed(&v->lapic.timer))
		return;
	later = tk + lapic_timer_tick_period(&v->lapic.timer) /
		     LAPIC_CATCHUP_FACTOR;
	/* seq_cst store: pairs with idle_step()'s loads, as in tk_wake. */
	atomic_store(&idle->tk_state, later < now_ns() ? later : now_ns());
}
