/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The timekeeper vCPU (vCPU 0, --timekeeper N) and its tick. Its state for
 * the rule "a wake-up that only took its tick keeps it idle" is one atomic,
 * tk_state, written by the timekeeper's own thread: TK_HALTED, TK_BUSY, or
 * the start time of a tick-only window. A wake-up with only the pv tick
 * vector pending opens a window; the window closes at the next HLT if that
 * comes within one tick period and nothing but the tick's own exits (EOI,
 * the MISSED read, interrupt-window and signal exits) happened and no other
 * vector was injected. Anything else makes it TK_BUSY. The library is never
 * called from the vCPU thread for this: the timekeeper side alone calls
 * sysidle_force_exit, on the housekeeping thread (tick.c), when (a) the
 * timekeeper thread asked for it (force_req + kick: it turned TK_BUSY while
 * the state was above SHORT), or (b) the housekeeping tick finds the
 * timekeeper busy or its window older than a period.
 */
#include "base/housekeeping.h"
#include "idle/internal.h"
#include "idle/pvtick.h"

bool tk_busy(uint64_t tk, uint64_t now)
{
	/* relaxed: the period is a setting; tk_state carries the order. */
	uint64_t p = atomic_load_explicit(&idle.tk_period,
					  memory_order_relaxed);

	return tk == TK_BUSY || (tk > TK_BUSY && now > tk && now - tk > p);
}

/* Timekeeper thread: it did more than take its tick. Returns true when
 * the housekeeping thread must be kicked to force the exit. */
bool tk_set_busy(void)
{
	/* seq_cst store then seq_cst load of the state (sysidle_state):
	 * pairs with idle_step()'s cmpxchg (in sysidle_is_idle) then load
	 * of tk_state. */
	atomic_store(&idle.tk_state, TK_BUSY);
	if (sysidle_state(idle.s) <= SYSIDLE_SHORT)
		return false; /* nothing to reset; the next tick sees BUSY */
	/* seq_cst store: pairs with the exchange in idle_hk_kick/idle_step. */
	atomic_store(&idle.force_req, true);
	return true;
}

/* Timekeeper thread, lock held: it halts (idle_halt). Back in HLT within a
 * period of a tick-only window: still idle since before. */
void tk_halt(struct vcpu *v, bool plain, uint64_t now)
{
	uint64_t period = pvtick_of(v)->period_ns;
	/* relaxed: only this thread writes tk_state. */
	uint64_t tk = atomic_load_explicit(&idle.tk_state,
					   memory_order_relaxed);

	if (tk > TK_BUSY && !plain && now - tk > period && tk_set_busy())
		housekeeping_kick(); /* back in HLT too late */
	/* Took only its tick: still idle since before. Else: */
	if (!(tk > TK_BUSY && now - tk <= period))
		/* relaxed: a statistic (detection latency). */
		atomic_store_explicit(&idle_vcpu(v)->halted_at_ns, now,
				      memory_order_relaxed);
	/* seq_cst store: pairs with idle_step()'s loads. */
	atomic_store(&idle.tk_state, TK_HALTED);
}

/* Timekeeper thread, lock held: it is woken (idle_wake). Returns true when
 * the housekeeping thread must be kicked. */
bool tk_wake(struct vcpu *v, bool plain, uint64_t now)
{
	struct pvtick *t = pvtick_of(v);
	bool kick;
	/* A tick pending while the tick is suspended fired just before
	 * idle_stop: no window then (nothing would age it). */
	bool tick_only = !plain && t->hz && !t->suppressed &&
			 !v->nmi_pending && !v->init_pending &&
			 lapic_irr_only(&v->lapic, t->vector);

	sysidle_exit(idle.s, v->id); /* never changes the state */
	if (tick_only) {
		/* relaxed: a setting read by tk_busy(). */
		atomic_store_explicit(&idle.tk_period, t->period_ns,
				      memory_order_relaxed);
		/* seq_cst store: pairs with idle_step()'s loads. */
		atomic_store(&idle.tk_state, now > TK_BUSY ? now : 2);
		return false;
	}
	kick = tk_set_busy();
	pvtick_resume(v);
	return kick;
}

/* Any vCPU thread, before handling an exit: in the timekeeper's tick-only
 * window only the tick's own exits are allowed. */
void tk_exit(struct vcpu *v)
{
	struct kvm_run *r = v->run;
	bool ok;

	/* relaxed: only this thread writes tk_state. */
	if ((int)v->id != idle.tk ||
	    atomic_load_explicit(&idle.tk_state, memory_order_relaxed) <=
	    TK_BUSY)
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
		ok = r->msr.index == MSR_X2APIC_BASE + (APIC_REG_EOI >> 4);
		break;
	case KVM_EXIT_MMIO:
		ok = r->mmio.is_write &&
		     r->mmio.phys_addr == GUEST_LAPIC_BASE + APIC_REG_EOI;
		break;
	default:
		ok = false;
	}
	if (!ok && tk_set_busy())
		housekeeping_kick();
}

/* Timekeeper thread, lock held, about to inject @vector. */

/* Any vCPU thread, lock held, about to inject @vector: on the timekeeper,
 * in a tick-only window, only the tick's vector. */
void tk_inject(struct vcpu *v, int vector)
{
	/* relaxed: only this thread writes tk_state. */
	if ((int)v->id == idle.tk &&
	    atomic_load_explicit(&idle.tk_state, memory_order_relaxed) >
	    TK_BUSY && vector != pvtick_of(v)->vector && tk_set_busy())
		housekeeping_kick();
}
