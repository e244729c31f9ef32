/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Promela model of the lock-free handshake between the timekeeper vCPU
 * thread and the housekeeping thread of the VMM's --sysidle mode
 * (vmm/idle/, vmm/machine/vcpu.c), checked by check-model.sh. The library side is
 * modelled in detail by sysidle.pml; here it is reduced to what the
 * handshake touches.
 *
 * The model is split by concern into the files it includes (spin runs
 * its input through the C preprocessor):
 *  - tk_handshake_shared.pml      the constants, the shared and ghost
 *                                 variables, the helper macros;
 *  - tk_handshake_properties.pml  the properties (ltl), with what each
 *                                 one says;
 *  - tk_handshake_vcpus.pml       the timekeeper vCPU thread (tk) and the
 *                                 other vCPUs (others), step by step;
 *  - tk_handshake_housekeeping.pml the housekeeping thread (hk), step by
 *                                 step;
 * this file keeps the overview, the abstractions, the model's history, its
 * variants and init.
 *
 * Shared variables (all C accesses to them are seq_cst, so Spin's
 * interleaving of single steps is faithful: one Promela step per load,
 * store, exchange or cmpxchg):
 *  - tk_state   idle.tk_state: TK_HALTED, TK_BUSY or WINDOW (the start
 *               time of a tick-only window; its age is not modelled: where
 *               the C code compares it with the tick period, tk_busy() and
 *               the "back in HLT too late" test of idle_halt, the model
 *               takes either answer, so every timing is covered);
 *  - force_req  idle.force_req;
 *  - kick       the housekeeping eventfd, a sticky flag (several kicks may
 *               be seen as one, as housekeeping.h says);
 *  - state      the library state NOT < SHORT < LONG < FULL < FULL_NOTED;
 *  - octr       the idle counter of the other vCPUs, reduced to one
 *               (the non-timekeeper vCPUs as one CPU: all idle or not).
 * The timekeeper's own sysidle_enter / sysidle_exit never change the state
 * (the library excludes it from the scan) and are not modelled.
 * Data under a vCPU's lock (v->state: tk_run, ophase; its pv tick armed:
 * tk_tick, o_tick; its pending tick vector: tk_irr), thread-local data (a
 * held-back kick, idle_vcpu(v)->kick_due_ns: tk_kick_due, o_kick_due) and
 * housekeeping-thread-only data (idle.stopped, the backstop timer armed)
 * are plain variables written inside the step of the C code that writes
 * them. A vCPU's locked section of several steps holds tk_lock / o_lock;
 * the housekeeping thread's locked sections (in idle_stop, idle_restart)
 * are one step each, taken when the lock is free. The lock is fair
 * (hk_wait): a vCPU does not take it again while the housekeeping thread
 * waits for it. Ghost variables (tkp, hk_in, busy_noted, win_noted, ...)
 * are written inside the step of the access they describe.
 *
 * Processes: the timekeeper vCPU thread (tk), the other vCPUs (others),
 * the housekeeping thread (hk: its periodic tick, its kick handler, the
 * deferred kick's backstop timer; the timekeeper's pvtick_fire is a step
 * of tk, see tk_handshake_vcpus.pml), and init, which picks the configuration (every vCPU
 * has a pv tick; with -DNO_PVTICK one of them or both have none, hz == 0)
 * and starts them. Time: the housekeeping tick may fire at any moment while
 * it is armed (not stopped), which covers every tick period and every
 * scheduling.
 *
 * The step-by-step correspondence with the C code is in
 * tk_handshake_vcpus.pml (the vCPU threads) and
 * tk_handshake_housekeeping.pml (the housekeeping thread).
 *
 * Abstractions, besides the time: the other vCPUs are one CPU; the scan
 * is that of a small VM (sysidle_poll, delay 0: a scan that does not
 * advance, as with a delay or the paced scan of a larger VM, writes
 * nothing and is the same as no tick); a vCPU's pv tick setting (hz) does
 * not change while it runs; the SIPI paths (vcpu_wait_sipi: an immediate
 * kick after the wake's locked section) and idle_external_kick (a force
 * request from outside, which can only help) are not modelled. The
 * housekeeping loop (housekeeping.c) handles a pending kick before the
 * timers of the same poll() return, so a kick is not starved by timer
 * callbacks: the model lets at most one more round of timer callbacks
 * start while a kick is pending (klate); without that, Spin's weak
 * fairness (per process, not per option) would let the tick starve the
 * kick. The backstop timer may be starved by the housekeeping tick, which
 * does its work while it runs; once the tick is stopped, the backstop is
 * the housekeeping thread's only timer and fires.
 * Every vCPU may also stay halted for good (a valid end state) or busy
 * for good (not a valid end state), so that liveness speaks of runs where
 * nothing else happens; the timekeeper may also stay for good in a
 * tick-only window (not a valid end state: a guest that runs, taking only
 * its tick's own exits, after a wake-up that only took the tick; in the C
 * code the housekeeping tick ends such a window once it is older than a
 * tick period, see tk_busy(), whose answer the model leaves open).
 *
 * Properties: see tk_handshake_properties.pml (pan -N name).
 *
 * What changed in the C code, and why (the model's history):
 *  1. The wake path's kick used to be sent at once; it is now always
 *     deferred (idle_kick_deferred / idle_kick_due), and idle_stop() used
 *     to suspend every vCPU's pv tick. With both, a vCPU woken between the
 *     housekeeping thread's re-read of tk_state and its idle_stop()
 *     resumed its pv tick in idle_wake(), idle_stop() suspended it again,
 *     and the held-back kick waited for an exit that a guest running
 *     without other exits never makes: the tick stayed stopped under a
 *     running vCPU (busy_stop_ends, busy_noted_leaves, vcpu_tick_resumes
 *     and wake_restarts violated; kept as the fault -DOLD_STOP).
 *     idle_stop() now leaves the pv tick of a running vCPU alone (its wake
 *     is one locked section, seen whole before or after) and re-checks
 *     force_req and the state at its end.
 *  2. That model, with a timekeeper allowed to stay in a tick-only window
 *     for good, found two more cases, both about the timekeeper's tick-only
 *     window. (i) A window opened under a stopped tick never ended: a
 *     window is aged only by the housekeeping tick, and nothing restarted
 *     the tick when the timekeeper woke with only its tick between the
 *     re-read and idle_stop() (found running, its pv tick kept, the
 *     re-check seeing FULL_NOTED and no request), or when its tick vector
 *     was pending from before the stop (its pv tick suspended by
 *     idle_stop(), and a tick-only wake does not resume it):
 *     window_stop_ends and the end states violated (both shown as
 *     information then). (ii) In the first of these runs, a timekeeper
 *     that went back to HLT in time left the VM fully idle with its pv
 *     tick armed, waking it each period (idle_tk_tick_off violated, shown
 *     as information). The fix: (a) idle_stop() restarts at once
 *     (idle_restart(), without the re-check) when it finds the timekeeper
 *     VCPU_RUNNING; (b) idle_wake() takes a timekeeper wake as tick-only
 *     only when its pv tick is not suspended, so a tick vector left
 *     pending by the stop goes the tk_set_busy() path (force exit, pv
 *     tick resumed, kick deferred). The window that lasts for good is now
 *     part of the model (it was the variant -DWINDOW_FOR_GOOD), and
 *     window_stop_ends, idle_tk_tick_off and the end states hold, also
 *     with -DNO_PVTICK. Without (a)
 *     (-DNO_TK_RUNNING_RESTART) window_stop_ends, idle_tk_tick_off and the
 *     end states are violated; without (b) (-DNO_SUPPRESSED_CHECK)
 *     window_stop_ends and the end states.
 *     Part (a) also covers a timekeeper that stored TK_BUSY after the
 *     re-read and is still running at idle_stop(): without the re-read
 *     (-DNO_REREAD), stopped_busy_unrequested, which it used to break,
 *     now holds (a timekeeper busy at idle_stop() is found running, or
 *     holds its lock then and is running or back in HLT when it lets it
 *     go). The re-read is still needed: without it a short wake-up of the
 *     timekeeper around the stop goes unnoticed, and wake_restarts is
 *     violated (it stores TK_BUSY and loads the state still below LONG;
 *     the scan reaches FULL_NOTED in the same housekeeping tick, the tick
 *     is stopped, and the timekeeper is back in HLT before idle_stop()
 *     looks at it: the tick stays stopped although the timekeeper ran
 *     while it was being stopped, with nothing asked).
 *  3. A wake from full idle by IPI took about 40 % longer than the same
 *     wake without --sysidle (the guest's tick off): the held-back kick
 *     went out as the waking vCPU halted again, just when the vCPU it had
 *     woken needed the host CPU, and the pv tick resumed on the wake path
 *     armed a host timer there. A held-back kick now goes to the backstop timer when
 *     its vCPU halts before it is due, and a pv tick resumed on the wake
 *     path is armed after the vCPU's first exit (the steps in
 *     tk_handshake_vcpus.pml). Every property holds as before, with each
 *     variant.
 *
 * Variants:
 *  -DNO_PVTICK       one vCPU or both without a pv tick: windows are
 *                    impossible for a timekeeper without one, and a
 *                    held-back kick relies on the backstop timer; every
 *                    property (tk_handshake_properties.pml) still holds;
 *  -DOLD_STOP        the former idle_stop() (history, 1): breaks
 *                    busy_stop_ends and vcpu_tick_resumes (and
 *                    busy_noted_leaves, wake_restarts, the end states);
 *  -DNO_REREAD       idle_step does not re-read tk_state after
 *                    sysidle_is_idle(): breaks wake_restarts (history, 2;
 *                    stopped_busy_unrequested holds);
 *  -DNO_FORCE_REQ    tk_set_busy() neither sets force_req nor asks for the
 *                    kick: breaks busy_noted_leaves (and busy_stop_ends);
 *  -DNO_TK_RUNNING_RESTART
 *                    the fix's part (a) taken away (history, 2): breaks
 *                    idle_tk_tick_off and window_stop_ends (and the end
 *                    states);
 *  -DNO_SUPPRESSED_CHECK
 *                    the fix's part (b) taken away (history, 2): breaks
 *                    window_stop_ends (and the end states);
 *  -DLAPIC_TICK      the timekeeper's tick is the guest's own periodic
 *                    LAPIC timer, not the pv tick (tk_tick() in
 *                    idle/timekeeper.c): honoured, so idle_stop never
 *                    suspends it and it keeps firing in full idle,
 *                    opening tick-only windows under a stopped
 *                    housekeeping tick; a window that outlives a period is
 *                    ended by the timekeeper's own exit (the next tick's
 *                    injection) in tk_exit. Every property holds but
 *                    idle_tk_tick_off (a pv-tick property: the LAPIC tick
 *                    stays armed in full idle, by design);
 *  -DLAPIC_TICK -DNO_EXIT_AGING
 *                    the fault: windows aged only by the housekeeping
 *                    tick, as for the pv tick (the code before issue 19's
 *                    rule, had it taken the LAPIC tick as the tick):
 *                    breaks window_stop_ends (and the end states): a
 *                    timekeeper that keeps running after a tick in full
 *                    idle is never noticed.
 */

#include "tk_handshake_shared.pml"
#include "tk_handshake_properties.pml"
#include "tk_handshake_vcpus.pml"
#include "tk_handshake_housekeeping.pml"

init
{
	atomic {
#ifdef NO_PVTICK
		/* at least one of the vCPUs runs without a pv tick */
		if
		:: tk_hz = 0
		:: o_hz = 0
		:: tk_hz = 0; o_hz = 0
		fi;
#endif
		tk_tick = tk_hz; o_tick = o_hz;
		run tk(); run others(); run hk()
	}
}
