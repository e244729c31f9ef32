/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tk_handshake.pml: the properties, checked one at a time by
 * check-model.sh.
 *
 * Properties (pan -N name):
 *  - stopped_busy_unrequested (safety): the tick is never left stopped
 *    under a busy timekeeper with nothing pending that will restart it:
 *    no state with idle.stopped, tk_state == TK_BUSY, the timekeeper past
 *    its tk_set_busy(), no force_req, no kick pending, held back, armed as
 *    a backstop or about to be sent, the housekeeping thread in none of
 *    its handlers. This is the "one of the two sides sees the other" of
 *    the comment in idle/tick.c: either the re-read sees TK_BUSY, or the
 *    timekeeper's load sees the state above SHORT and asks for the force
 *    exit. Since the fix of history 2 (in tk_handshake.pml), idle_stop() finding the
 *    timekeeper running restarts too, which alone keeps this property
 *    (see -DNO_REREAD).
 *  - busy_stop_ends (liveness, weak fairness): a stopped tick under a
 *    busy timekeeper is eventually restarted (or the timekeeper halts).
 *  - busy_noted_leaves (liveness): once the timekeeper turned busy while
 *    the state was FULL_NOTED, the state eventually leaves FULL_NOTED.
 *  - all_idle_stops (liveness): if the other vCPUs and the timekeeper stay
 *    halted, the tick is eventually stopped for good.
 *  - vcpu_tick_resumes (liveness): a running non-timekeeper vCPU with a
 *    pv tick whose tick is suspended gets it back.
 *  - wake_restarts (liveness): a stopped tick is eventually restarted once
 *    a vCPU woke: the state left FULL_NOTED (another vCPU's exit) or the
 *    timekeeper is busy. The held-back kick of a vCPU that runs for good
 *    needs its pv tick (or, without one, the backstop) for that.
 *  - idle_tk_tick_off (safety): in full idle with nothing pending (the
 *    tick stopped, every vCPU halted, no request or kick pending, the
 *    housekeeping thread in none of its handlers), the timekeeper's pv
 *    tick is suspended.
 *  - window_stop_ends (liveness): a stopped tick under a timekeeper in a
 *    tick-only window is eventually restarted, or the window ends (also
 *    when the window lasts for good).
 *  - no invalid end state: a vCPU that stays busy for good, or the
 *    timekeeper in a window for good, is not a valid end state, so a run
 *    that blocks there (with the housekeeping thread asleep, its tick
 *    stopped) is reported.
 *  - idle_end_clean (safety): where a run may end with every vCPU halted
 *    (the housekeeping thread asleep, its tick stopped, nothing pending),
 *    the state is FULL_NOTED and nothing is asked (no force_req, no
 *    busy_noted).
 * The last two are there because Spin's weak-fairness search (pan -a -f)
 * can miss a liveness violation whose witness is a run that ends (every
 * process blocked, the final state repeated): such a run either has a
 * vCPU busy for good or the timekeeper in a window for good (an invalid
 * end state) or every vCPU halted, where idle_end_clean leaves none of
 * the liveness properties above pending.
 * The strict reading "idle_stop() never runs while tk_state == TK_BUSY"
 * (stop_under_busy) does NOT hold, and need not: the timekeeper may store
 * TK_BUSY between the re-read and idle_stop(); its load then sees
 * FULL_NOTED and it asks for the force exit, which restarts the tick (and
 * if it is still running then, idle_stop() restarts at once).
 * check-model.sh shows that result as information.
 * Non-vacuity (each must be violated): stop_unreachable, never_force_req,
 * never_busy_noted, window_never_stopped (a tick-only window opened while
 * FULL_NOTED can be followed by the tick stopped: a wake-up that only
 * took the tick keeps the VM fully idle), never_tk_running_stop (idle_stop
 * finds the timekeeper running: the restart of the fix's part (a) is
 * reached), never_suppressed_irr (a halted timekeeper has its tick vector
 * pending under a suspended pv tick: the case of the fix's part (b)),
 * never_backstop (-DNO_PVTICK).
 */

/* ---- properties ---- */

ltl stopped_busy_unrequested {
	[] !(stopped && TK_IS_BUSY && NOTHING_PENDING)
}
ltl busy_stop_ends {
	[] ((stopped && TK_IS_BUSY) -> <> (!stopped || !TK_IS_BUSY))
}
ltl busy_noted_leaves { [] (busy_noted -> <> (state != FULL_NOTED)) }
ltl all_idle_stops {
	(<> [] (ophase == O_IDLE && tk_state == TK_HALTED)) -> <> [] stopped
}
ltl vcpu_tick_resumes {
	[] ((o_hz && ophase == O_RUNNING && !o_tick) ->
	    <> (o_tick || ophase != O_RUNNING))
}
ltl wake_restarts {
	[] ((stopped && (state != FULL_NOTED || TK_IS_BUSY)) -> <> !stopped)
}
/* Every state where the run may end (all vCPUs halted, the housekeeping
 * thread asleep with the tick stopped) is fully idle with nothing asked:
 * the weak-fairness search does not look at runs that end (see above). */
ltl idle_end_clean {
	[] ((tk_halted_ghost && ophase == O_IDLE && stopped && !kick &&
	     !backstop && !hk_in && tkp == TKP_DONE) ->
	    (state == FULL_NOTED && !busy_noted && !force_req))
}
/* In full idle with nothing pending, the timekeeper's pv tick is
 * suspended. */
ltl idle_tk_tick_off {
	[] !(stopped && tk_tick && tk_state == TK_HALTED && ophase == O_IDLE &&
	     NOTHING_PENDING)
}
/* A stopped tick under a timekeeper in a tick-only window is eventually
 * restarted (or the window ends). */
ltl window_stop_ends {
	[] ((stopped && tk_state == WINDOW) ->
	    <> (!stopped || tk_state != WINDOW))
}
/* The strict reading, which does not hold (see above). */
ltl stop_under_busy { [] !stop_busy }
/* Non-vacuity: each must be violated. */
ltl stop_unreachable { [] !stopped }
ltl never_force_req { [] !force_req }
ltl never_busy_noted { [] !busy_noted }
ltl window_never_stopped { [] !(win_noted && stopped) }
ltl never_tk_running_stop { [] !tk_running }
ltl never_suppressed_irr { [] !(tk_halted_ghost && tk_irr && !tk_tick) }
ltl never_backstop { [] !backstop }   /* with -DNO_PVTICK */
