/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Promela model of the lock-free handshake between the timekeeper vCPU
 * thread and the housekeeping thread of the VMM's --sysidle mode
 * (vmm/idle/, vmm/machine/vcpu.c), checked by check-model.sh. The library side is
 * modelled in detail by sysidle.pml; here it is reduced to what the
 * handshake touches.
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
 * of tk, see below), and init, which picks the configuration (every vCPU
 * has a pv tick; with -DNO_PVTICK one of them or both have none, hz == 0)
 * and starts them. Time: the housekeeping tick may fire at any moment while
 * it is armed (not stopped), which covers every tick period and every
 * scheduling.
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
 *  hk tick (idle_tick_fire -> idle_step): "fr = force_req; force_req = 0"
 *    = atomic_exchange(&force_req, false), then idle_force_exit(); "tk =
 *    tk_state" = the first atomic_load(&tk_state) and tk_busy(); then
 *    sysidle_poll(): "after = state" = sysidle_state(), up to 3 scan
 *    passes (the counter load and the cmpxchg of sysidle_scan, then its
 *    final state load), then sysidle_is_idle() (its load, its cmpxchg
 *    FULL -> FULL_NOTED); then "tk = tk_state" = the re-read of tk_state
 *    (absent with -DNO_REREAD) and tk_busy(); then idle_stop().
 *  idle_stop(): "stopped = 1" (and the housekeeping tick cancelled); each
 *    vCPU under its lock, in either order (--timekeeper): its pv tick
 *    suspended (pvtick_suspend) only if it is not VCPU_RUNNING, and the
 *    timekeeper found VCPU_RUNNING noted ("tk_running = 1", its
 *    tk_running flag); then, if tk_running, idle_restart() and return
 *    (-DNO_TK_RUNNING_RESTART: never); else the re-check "force_req ||
 *    state != FULL_NOTED" (the load of force_req, then the sysidle_state()
 *    load) and, if so, idle_hk_kick() below. With -DOLD_STOP: every pv
 *    tick suspended, no restart, no re-check.
 *  hk kick (idle_hk_kick; also the backstop's idle_kick_backstop_fire):
 *    "kick = 0" = the eventfd read (or "backstop = 0"); the exchange of
 *    force_req and idle_force_exit(); "stopped && state != FULL_NOTED" =
 *    its sysidle_state() load, then idle_restart().
 *  idle_restart(): "stopped = 0" (tk_running cleared with it: the flag is
 *    idle_stop's local), then each vCPU under its lock, in either
 *    order: pvtick_resume() for the timekeeper and for a vCPU not halted.
 *  idle_force_exit(): sysidle_force_exit() = sysidle_reset(FULL_NOTED):
 *    its load, then its cmpxchg to NOT (retried while in range); then the
 *    sysidle_state() load and idle_restart() when stopped.
 *  others (vcpu_wait_interrupt -> idle_halt / idle_wake): idle_kick_due(v,
 *    true) (unlocked, as the timekeeper's), then sysidle_enter under the
 *    lock (octr even, one step); the wake under the lock (o_lock):
 *    sysidle_exit (octr odd, then sysidle_reset's load and cmpxchg as one
 *    step: a lost cmpxchg retries on whatever in-range value it meets, and
 *    the load writes nothing), pvtick_resume_unarmed and VCPU_RUNNING in
 *    that step; then, unlocked, when its reset replaced FULL_NOTED,
 *    idle_kick_deferred() (O_WAKING until then); then the first exit arms
 *    its pv tick (o_tick = o_hz); running, its exits as the timekeeper's.
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
 * Properties (pan -N name):
 *  - stopped_busy_unrequested (safety): the tick is never left stopped
 *    under a busy timekeeper with nothing pending that will restart it:
 *    no state with idle.stopped, tk_state == TK_BUSY, the timekeeper past
 *    its tk_set_busy(), no force_req, no kick pending, held back, armed as
 *    a backstop or about to be sent, the housekeeping thread in none of
 *    its handlers. This is the "one of the two sides sees the other" of
 *    the comment in idle/tick.c: either the re-read sees TK_BUSY, or the
 *    timekeeper's load sees the state above SHORT and asks for the force
 *    exit. Since the fix of history 2 below, idle_stop() finding the
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
 *     path is armed after the vCPU's first exit (the steps above). Every
 *     property holds as before, with each variant.
 *
 * Variants:
 *  -DNO_PVTICK       one vCPU or both without a pv tick: windows are
 *                    impossible for a timekeeper without one, and a
 *                    held-back kick relies on the backstop timer; every
 *                    property above still holds;
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
 *                    injection) in tk_exit. Every property above holds but
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

/* enum sysidle_state */
#define NOT        0
#define SHORT      1
#define LONG       2
#define FULL       3
#define FULL_NOTED 4

/* tk_state */
#define TK_HALTED  0
#define TK_BUSY    1
#define WINDOW     2

/* tk phases in tk_set_busy() (ghost) */
#define TKP_DONE   0 /* not in tk_set_busy, or through it and its kick */
#define TKP_STORED 1 /* TK_BUSY stored, state not yet loaded */
#define TKP_REQ    2 /* state seen above SHORT, force_req not yet stored */
#define TKP_KICK   3 /* force_req stored, kick not yet sent or deferred */

/* the other vCPUs' phases (octr parity: even exactly in O_IDLE) */
#define O_RUNNING  0
#define O_IDLE     1
#define O_EXITING  2 /* counter odd, sysidle_reset not finished (locked) */
#define O_WAKING   3 /* its reset replaced FULL_NOTED, kick not yet deferred */

/* Configuration, chosen once by init: each vCPU has a pv tick (hz != 0);
 * with -DNO_PVTICK, one of them or both have none. */
bit  tk_hz = 1;
bit  o_hz = 1;

byte tk_state = TK_BUSY;   /* atomic_init(&idle.tk_state, TK_BUSY) */
bit  force_req;
bit  kick;                 /* eventfd */
byte state = NOT;
byte ophase = O_RUNNING;   /* vCPUs start running: idle_seq odd, ctr odd */
bit  stopped;              /* idle.stopped (housekeeping thread) */
bit  tk_tick = 1;          /* the timekeeper's pv tick armed */
bit  o_tick = 1;           /* the other vCPUs' pv tick armed */
bit  tk_irr;               /* a tick is pending for the timekeeper */
bit  tk_kick_due;          /* the tk holds back a kick (hk_kick_due_ns) */
bit  o_kick_due;           /* the others hold back a kick */
bit  backstop;             /* idle.kick_backstop armed */
bit  tk_run = 1;           /* the timekeeper's v->state == VCPU_RUNNING */
bit  tk_lock;              /* the timekeeper's v->lock, held across steps */
bit  o_lock;               /* the other vCPUs' v->lock, held across steps */
/* The housekeeping thread waits for that vCPU's lock (1: the timekeeper's,
 * 2: the others'): the vCPU does not take it again before (a fair lock, so
 * that the vCPU cannot starve the housekeeping thread). */
byte hk_wait;
/* The housekeeping loop (housekeeping.c) handles a pending kick before the
 * timers of the same poll() return: a timer callback may start while a
 * kick is pending only if that kick came after the poll() returned, so at
 * most one more poll round of timers runs before the kick is handled.
 * klate: a timer callback started with the kick already pending. */
bit  klate;

/* Ghost. */
byte tkp = TKP_DONE;
bit  hk_in;                /* the housekeeping thread is in a handler */
bit  busy_noted;           /* tk stored TK_BUSY while FULL_NOTED, not left */
bit  win_noted;            /* a window opened while FULL_NOTED, tick on */
bit  tk_halted_ghost;      /* the timekeeper is in HLT */
bit  stop_busy;            /* idle_stop() ran with tk_state == TK_BUSY */
/* Housekeeping thread only: idle_stop()'s tk_running (the timekeeper was
 * found VCPU_RUNNING); cleared by the restart it asks for. */
bit  tk_running;

#define TK_IS_BUSY (tk_state == TK_BUSY)
#define O_RUN (ophase == O_RUNNING || ophase == O_WAKING)
#define OTHERS_KICKING (ophase == O_WAKING || o_kick_due)
#define NOTHING_PENDING (!force_req && !kick && !tk_kick_due && !backstop && \
			 tkp == TKP_DONE && !OTHERS_KICKING && !hk_in)

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

/* Every step that may move the state off FULL_NOTED clears the ghosts. */
#define SET_STATE(v) \
	if :: state == FULL_NOTED && (v) != FULL_NOTED -> \
		busy_noted = 0; win_noted = 0 \
	   :: else -> skip fi; \
	state = (v)

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

/* ---- the housekeeping thread ---- */

/* idle_restart(): the timekeeper's pv tick resumes, and a running vCPU's
 * (halted non-timekeepers stay suppressed); each under the vCPU's lock, in
 * either order (--timekeeper). */
inline restart()
{
	if
	:: atomic { stopped = 0; stop_busy = 0; tk_running = 0; hk_wait = 1 }
	   atomic { !tk_lock -> tk_tick = tk_hz; hk_wait = 2 }
	   atomic { !o_lock -> if :: ophase != O_IDLE -> o_tick = o_hz
				  :: else -> skip fi; hk_wait = 0 }
	:: atomic { stopped = 0; stop_busy = 0; tk_running = 0; hk_wait = 2 }
	   atomic { !o_lock -> if :: ophase != O_IDLE -> o_tick = o_hz
				  :: else -> skip fi; hk_wait = 1 }
	   atomic { !tk_lock -> tk_tick = tk_hz; hk_wait = 0 }
	fi
}

/* idle_force_exit() */
inline force_exit()
{
	/* sysidle_reset(FULL_NOTED): load ... */
	st = state;
	do
	:: atomic { st > SHORT && state == st -> SET_STATE(NOT); st = 0; break }
	:: atomic { st > SHORT && state != st -> st = state }
	:: st <= SHORT -> st = 0; break
	od;
	if
	:: stopped && state != FULL_NOTED -> restart()
	:: else -> skip
	fi
}

/* idle_hk_kick() (also the backstop's callback) */
inline hk_kick()
{
	atomic { fr = force_req; force_req = 0 }
	if
	:: fr -> fr = 0; force_exit()
	:: else -> skip
	fi;
	if
	:: stopped && state != FULL_NOTED -> restart()
	:: else -> skip
	fi
}

/* idle_stop(): idle.stopped, then each vCPU under its lock (either order):
 * the pv tick of a vCPU not running suspended, the timekeeper found running
 * noted in tk_running (-DNO_TK_RUNNING_RESTART: not noted, so idle_stop
 * goes on to the re-check as before the fix) */
#ifdef LAPIC_TICK
/* the guest's own LAPIC tick is honoured: idle_stop leaves it armed */
#define TK_SUSPEND if :: !tk_run -> skip :: else -> tk_running = 1 fi
#define O_SUSPEND  if :: !O_RUN -> o_tick = 0 :: else -> skip fi
#elif defined(OLD_STOP)
#define TK_SUSPEND tk_tick = 0
#define O_SUSPEND  o_tick = 0
#else
#ifdef NO_TK_RUNNING_RESTART
#define TK_SUSPEND if :: !tk_run -> tk_tick = 0 :: else -> skip fi
#else
#define TK_SUSPEND if :: !tk_run -> tk_tick = 0 :: else -> tk_running = 1 fi
#endif
#define O_SUSPEND  if :: !O_RUN -> o_tick = 0 :: else -> skip fi
#endif
inline idle_stop()
{
	if
	:: atomic { stopped = 1; stop_busy = TK_IS_BUSY; hk_wait = 1 }
	   atomic { !tk_lock -> TK_SUSPEND; hk_wait = 2 }
	   atomic { !o_lock -> O_SUSPEND; hk_wait = 0 }
	:: atomic { stopped = 1; stop_busy = TK_IS_BUSY; hk_wait = 2 }
	   atomic { !o_lock -> O_SUSPEND; hk_wait = 1 }
	   atomic { !tk_lock -> TK_SUSPEND; hk_wait = 0 }
	fi;
#ifndef OLD_STOP
	if
	:: tk_running ->
		/* the timekeeper found running (woke after the re-read):
		 * idle_restart(), return */
		restart()
	:: else ->
		/* the re-check: force_req || sysidle_state() != FULL_NOTED */
		fr = force_req;
		if
		:: fr -> fr = 0; hk_kick()
		:: else ->
			if
			:: state != FULL_NOTED -> hk_kick()
			:: else -> skip
			fi
		fi
	fi
#endif
}

/* idle_step(): returns by "goto step_done" */
inline idle_step()
{
	atomic { fr = force_req; force_req = 0 }
	if
	:: fr -> fr = 0; force_exit()
	:: else -> skip
	fi;
	/* first load of tk_state, tk_busy() */
	if
	:: tk_state == TK_BUSY -> force_exit(); goto step_done
	:: tk_state == WINDOW -> /* the window's age: either */
		if
		:: force_exit(); goto step_done
		:: skip
		fi
	:: tk_state == TK_HALTED -> skip
	fi;
	/* sysidle_poll(): after = sysidle_state() */
	after = state;
	pass = 0;
	do
	:: pass < 3 && after < FULL ->
		before = after;
		/* sysidle_scan: the counter load */
		seen_idle = (ophase == O_IDLE);
		if
		:: !seen_idle ->
			/* sysidle_reset(FULL): load, cmpxchg */
			st = state;
			do
			:: atomic { st > SHORT && st <= FULL && state == st ->
				    SET_STATE(NOT); st = 0; break }
			:: atomic { st > SHORT && st <= FULL && state != st ->
				    st = state }
			:: st <= SHORT || st > FULL -> st = 0; break
			od
		:: else ->
			/* the state load, then sysidle_advance's cmpxchg
			 * (delay 0: a small VM) */
			st = state;
			atomic {
				if
				:: st < FULL && state == st -> state = st + 1
				:: else -> skip
				fi;
				st = 0
			}
		fi;
		seen_idle = 0;
		after = state;             /* sysidle_scan's final load */
		pass++;
		if
		:: after <= before -> break
		:: else -> skip
		fi
	:: else -> break
	od;
	pass = 0; before = 0; after = 0;
	/* sysidle_is_idle() */
	st = state;
	if
	:: st == FULL ->
		atomic {
			if
			:: state == FULL -> SET_STATE(FULL_NOTED); is_idle = 1
			:: else -> is_idle = (state == FULL_NOTED)
			fi;
			st = 0
		}
	:: else -> is_idle = (st == FULL_NOTED); st = 0
	fi;
	if
	:: !is_idle -> goto step_done
	:: else -> is_idle = 0
	fi;
#ifndef NO_REREAD
	/* the re-read of tk_state, tk_busy() */
	if
	:: tk_state == TK_BUSY -> force_exit(); goto step_done
	:: tk_state == WINDOW ->
		if
		:: force_exit()
		:: skip   /* in a window: look again next tick */
		fi;
		goto step_done
	:: tk_state == TK_HALTED -> skip
	fi;
#endif
	idle_stop();
step_done:
	skip
}

proctype hk()
{
	bit fr, seen_idle, is_idle;
	byte st, pass, before, after;

end_wait:
	do
	:: atomic { !stopped && !(kick && klate) -> klate = kick; hk_in = 1 }
		/* idle_tick_fire */
		idle_step();
		hk_in = 0
	:: atomic { kick -> kick = 0; klate = 0; hk_in = 1 }
		hk_kick();
		hk_in = 0
	:: atomic { backstop && !(kick && klate) ->
		    backstop = 0; klate = kick; hk_in = 1 }
		/* idle_kick_backstop_fire */
		hk_kick();
		hk_in = 0
	od
}

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
