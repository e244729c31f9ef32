/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tk_handshake.pml: the vCPU threads, the timekeeper (tk) and the other
 * vCPUs (others).
 *
 * Step by step (Promela step -> the C it models, in vmm/idle/ unless said):
 *  tk, HLT wake with more than the tick pending, or with its tick vector
 *    pending while its pv tick is suspended (vcpu.c: vcpu_wait_interrupt:
 *    the wait returns with v->lock; idle_wake, !tick_only; VCPU_RUNNING;
 *    unlock; all under tk_lock):
 *    tk_set_busy(): "tk_state = BUSY" = its atomic_store of TK_BUSY;
 *    "st = state" = sysidle_state() (seq_cst load); "force_req = 1" = its
 *    atomic_store of true; then pvtick_resume_unarmed() (the tick no
 *    longer suppressed, its timer not armed) and tk_run = 1
 *    (VCPU_RUNNING). Then, unlocked, idle_kick_deferred(): the kick is
 *    held back (tk_kick_due), and without a pv tick the backstop timer is
 *    armed (backstop). Then its first KVM_RUN returns (the guest EOIs
 *    the interrupt that woke it, or halts: every wake injects one, and a
 *    userspace LAPIC's EOI is an exit) and idle_kick_due(v, false) arms
 *    the pv tick under the lock (pvtick_arm_resumed): "tk_tick = tk_hz".
 *  tk, HLT wake with only its tick pending and its pv tick not suspended
 *    (idle_wake, tick_only: its "!t->suppressed" is "tk_tick"; the
 *    locked section as one step): "tk_state = WINDOW" = the atomic_store
 *    of now (window start), tk_run = 1. A tick vector left pending by
 *    idle_stop's pvtick_suspend takes the path above (-DNO_SUPPRESSED_CHECK:
 *    it opens a window, as before the fix).
 *  tk, in a window, a non-tick exit or injection (tk_exit,
 *    tk_inject): tk_set_busy() as above, then housekeeping_kick() at
 *    once.
 *  tk, running (vcpu_run_once -> idle_kick_due(v, false) after KVM_RUN):
 *    an exit at least IDLE_KICK_DEFER_NS after the wake sends the held-back
 *    kick. Any exit may (not forced); a vCPU that runs for good
 *    (busy_for_good) makes exits only with its pv tick armed (each tick
 *    kicks it out of KVM_RUN), and then weak fairness makes one send the
 *    kick; without an armed pv tick it may run for good without exits.
 *  tk, HLT (vcpu_wait_interrupt): idle_kick_due(v, true), unlocked, hands
 *    a held-back kick to the backstop timer (due when the kick would have
 *    gone out; with a pv tick it is armed here, without one it was armed
 *    at the wake) or, when it is due already, sends it; then under the
 *    lock VCPU_HALTED (tk_run = 0) and
 *    idle_halt: from a window that ended too late, tk_set_busy() +
 *    housekeeping_kick() (under tk_lock); then "tk_state = TK_HALTED" =
 *    the atomic_store of TK_HALTED.
 *  tk, halted: pvtick_fire (a housekeeping timer callback, under the
 *    lock) while tk_tick is armed: "tk_irr = 1", which allows one tick-only
 *    wake (modelled as a step of tk: only its effect on a halted timekeeper
 *    matters, and so it neither starves nor is starved by the housekeeping
 *    thread's handlers under Spin's per-process weak fairness).
 *  others (vcpu_wait_interrupt -> idle_halt / idle_wake): idle_kick_due(v,
 *    true) (unlocked, as the timekeeper's), then sysidle_enter under the
 *    lock (octr even, one step); the wake under the lock (o_lock):
 *    sysidle_exit (octr odd, then sysidle_reset's load and cmpxchg as one
 *    step: a lost cmpxchg retries on whatever in-range value it meets, and
 *    the load writes nothing), pvtick_resume_unarmed and VCPU_RUNNING in
 *    that step; then, unlocked, when its reset replaced FULL_NOTED,
 *    idle_kick_deferred() (O_WAKING until then); then the first exit arms
 *    its pv tick (o_tick = o_hz); running, its exits as the timekeeper's.
 */

/* ---- the timekeeper vCPU thread ---- */

/* tk_set_busy(); leaves tkp at TKP_KICK when the caller must kick, else
 * at TKP_DONE. */
inline tk_set_busy()
{
	atomic {
		tk_state = TK_BUSY; tkp = TKP_STORED;
		if :: state == FULL_NOTED -> busy_noted = 1
		   :: else -> skip fi
	}
	atomic {
		if
		:: state > SHORT -> tkp = TKP_REQ
		:: else -> tkp = TKP_DONE
		fi
	}
	if
	:: tkp == TKP_REQ ->
#ifdef NO_FORCE_REQ
		tkp = TKP_DONE
#else
		atomic { force_req = 1; tkp = TKP_KICK }
#endif
	:: else -> skip
	fi
}

/* housekeeping_kick() right after a tk_set_busy() that returned true
 * (tk_exit, tk_inject, idle_halt). */
inline tk_kick_now()
{
	if
	:: tkp == TKP_KICK -> atomic { kick = 1; tkp = TKP_DONE }
	:: else -> skip
	fi
}

proctype tk()
{
	/* Starts running, TK_BUSY, state NOT: nothing to request. */
busy:
	/* Running (VCPU_RUNNING, TK_BUSY). */
	if
	:: /* an exit at least the defer delay after the wake
	    * (vcpu_run_once -> idle_kick_due(v, false)); any exit, so not
	    * forced by fairness */
		atomic { tk_kick_due -> kick = 1; tk_kick_due = 0 }; goto busy
	:: /* runs for good; without a pv tick it makes no exit, and its
	    * held-back kick never goes out (only the backstop is left) */
		tk_kick_due = tk_kick_due & tk_hz; goto busy_for_good
	:: /* HLT: idle_kick_due(v, true), unlocked, before the lock: a
	    * held-back kick goes to the backstop timer (due then), or out at
	    * once when it is due already */
		if
		:: atomic { backstop = backstop | tk_kick_due; tk_kick_due = 0 }
		:: atomic { kick = kick | tk_kick_due; tk_kick_due = 0 }
		fi
	fi;
	/* vcpu_wait_interrupt: lock, VCPU_HALTED, idle_halt (from TK_BUSY:
	 * the store of TK_HALTED, sysidle_enter), the wait releases the lock */
	atomic { tk_run = 0; tk_state = TK_HALTED; tk_halted_ghost = 1 }
halted:
	if
	:: goto halted_for_good
	:: /* pvtick_fire (housekeeping thread, under the lock) while its
	    * tick is armed: the tick vector pending */
		atomic { tk_tick && !tk_irr -> tk_irr = 1 }; goto halted
	:: /* the wait returns with the lock; idle_wake, tick_only (only
	    * its tick pending, and its pv tick not suspended: a tick vector
	    * left pending by idle_stop's pvtick_suspend takes the path
	    * below): sysidle_exit (no state change), the window opens;
	    * VCPU_RUNNING; unlock */
#ifdef NO_SUPPRESSED_CHECK
		atomic { tk_irr -> tk_irr = 0; tk_halted_ghost = 0;
#else
		atomic { tk_irr && tk_tick -> tk_irr = 0; tk_halted_ghost = 0;
#endif
		tk_state = WINDOW; tk_run = 1;
		if :: state == FULL_NOTED && !stopped -> win_noted = 1
		   :: else -> skip fi }
		goto window
	:: /* the wait returns with the lock; idle_wake, something else
	    * pending: tk_set_busy(), pvtick_resume(); VCPU_RUNNING; unlock */
		atomic { hk_wait != 1 -> tk_lock = 1; tk_halted_ghost = 0;
			 tk_irr = 0 /* a pending tick is injected too */ }
		tk_set_busy();
		atomic { tk_run = 1; tk_lock = 0 }
		/* unlocked: idle_kick_deferred() (the backstop without a pv
		 * tick) */
		if
		:: tkp == TKP_KICK ->
			atomic { tk_kick_due = 1; tkp = TKP_DONE;
				 if :: !tk_hz -> backstop = 1
				    :: else -> skip fi }
		:: else -> skip
		fi;
		/* the first KVM_RUN returns (the guest EOIs the interrupt
		 * that woke it, or halts): idle_kick_due(v, false) arms the
		 * pv tick the wake resumed, under the lock
		 * (pvtick_arm_resumed) */
		atomic { hk_wait != 1 && !tk_lock -> tk_tick = tk_hz }
		goto busy
	fi;
window:
	if
	:: /* a non-tick exit (tk_exit) or another vector injected
	    * (tk_inject) */
		tk_set_busy(); tk_kick_now(); goto busy
	:: /* HLT in time: lock, VCPU_HALTED, idle_halt: the window closes
	    * (the store of TK_HALTED) */
		atomic { tk_run = 0; tk_state = TK_HALTED; tk_halted_ghost = 1 }
	:: /* HLT too late: lock, VCPU_HALTED, idle_halt: tk_set_busy(),
	    * housekeeping_kick(), the store of TK_HALTED */
		atomic { hk_wait != 1 -> tk_lock = 1; tk_run = 0 }
		tk_set_busy(); tk_kick_now();
		atomic { tk_state = TK_HALTED; tk_halted_ghost = 1; tk_lock = 0 }
#ifdef LAPIC_TICK
	:: /* runs on after its tick for a period: the guest's LAPIC tick
	    * keeps firing (it is honoured, never suspended), its next
	    * injection kicks the timekeeper out of KVM_RUN, and tk_exit finds
	    * the window older than a period: tk_set_busy(),
	    * housekeeping_kick() (-DNO_EXIT_AGING: windows are aged only by
	    * the housekeeping tick, as the pv tick's, and it runs for good) */
#ifdef NO_EXIT_AGING
		goto window_for_good
#else
		tk_tick; tk_set_busy(); tk_kick_now(); goto busy
#endif
#else
	:: /* runs for good taking only its tick (its own exits): the window
	    * never closes; not a valid end state */
		goto window_for_good
#endif
	fi;
	goto halted;

halted_for_good:
end_halted:
	(0);

busy_for_good:
	/* Busy from now on: not a valid end state. Its exits come (at least)
	 * with its pv tick, and send a held-back kick (idle_kick_due); weak
	 * fairness makes that happen while the tick stays armed. */
	do
	:: atomic { tk_kick_due && tk_tick -> kick = 1; tk_kick_due = 0 }
	od;

window_for_good:
	(0)
}

/* ---- the other vCPUs ---- */

proctype others()
{
running:
	if
	:: /* an exit at least the defer delay after the wake */
		atomic { o_kick_due -> kick = 1; o_kick_due = 0 }; goto running
	:: o_kick_due = o_kick_due & o_hz; goto o_busy_for_good
	:: /* HLT: idle_kick_due(v, true): to the backstop, or at once */
		if
		:: atomic { backstop = backstop | o_kick_due; o_kick_due = 0 }
		:: atomic { kick = kick | o_kick_due; o_kick_due = 0 }
		fi
	fi;
	/* lock, VCPU_HALTED, idle_halt -> sysidle_enter: counter even */
	ophase = O_IDLE;
	if
	:: goto idle_for_good
	:: skip
	fi;
	/* the wait returns with the lock; idle_wake -> sysidle_exit: counter
	 * odd */
	atomic { hk_wait != 2 -> ophase = O_EXITING; o_lock = 1 }
	/* sysidle_reset(FULL_NOTED): load, cmpxchg (as one step: the retries
	 * make it reset whatever in-range value it meets, and the load alone
	 * writes nothing); pvtick_resume; VCPU_RUNNING; unlock */
	atomic {
		if
		:: state > SHORT ->
			if
			:: state == FULL_NOTED -> ophase = O_WAKING
			:: else -> ophase = O_RUNNING
			fi;
			SET_STATE(NOT)
		:: else -> ophase = O_RUNNING
		fi;
		o_lock = 0
	}
	/* unlocked: idle_kick_deferred() */
	if
	:: ophase == O_WAKING ->
		atomic { o_kick_due = 1; ophase = O_RUNNING;
			 if :: !o_hz -> backstop = 1 :: else -> skip fi }
	:: else -> skip
	fi;
	/* the first KVM_RUN returns: pvtick_arm_resumed, under the lock */
	atomic { hk_wait != 2 && !o_lock -> o_tick = o_hz }
	goto running;

idle_for_good:
end_idle:
	(0);
o_busy_for_good:
	/* Busy from now on (not a valid end state); its exits come (at
	 * least) with its pv tick. */
	do
	:: atomic { o_kick_due && o_tick -> kick = 1; o_kick_due = 0 }
	od
}
