/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Promela model of the full-system-idle protocol of sysidle/sysidle.c
 * (strategy "sysidle": per-CPU idle counters + the global state machine
 * NOT < SHORT < LONG < FULL < FULL_NOTED), checked by check-model.sh.
 *
 * Granularity. Every access of the C code to a CPU's idle_ctr and to the
 * global state is sequentially consistent, so all of them fall in one total
 * order and Spin's interleaving of single steps is a faithful model: one
 * Promela step per atomic load, RMW or cmpxchg (a cmpxchg is one atomic{}
 * block that also yields the value it saw on failure). Ghost variables
 * (phases, counts, flags used only by the properties) are updated inside the
 * step of the C access they describe, so they add no interleavings.
 *
 * Abstractions.
 *  - idle_ctr is kept as its parity only (nobody reads more): a worker's
 *    counter is even exactly while its phase is IDLE, so the phase variable
 *    below *is* the counter; "counter++" is the step that changes the phase
 *    between IDLE and non-IDLE.
 *  - idle_since and the clock: see "The delay" below.
 *  - The wake-up is a sticky flag (an eventfd written by the worker, read
 *    and cleared by the timekeeper). The assertion at the wake checks that
 *    it is never written while already pending, so a one-bit flag loses
 *    nothing of an eventfd's counter.
 *  - The timekeeper is a separate thread excluded from the scan
 *    (config.timekeeper = -1 or its own CPU): the NWORKERS workers are the
 *    scanned CPUs. A timekeeper CPU's own enter/exit never touch the state
 *    and are not modelled; sysidle_force_exit is modelled only in the
 *    TK_FREE variant (below).
 *  - on_transition callbacks are not modelled (they touch no shared state
 *    of the protocol).
 *
 * The delay (SHORT->LONG and LONG->FULL need "now >= newest idle entry +
 * delay"). `fresh` is set by every sysidle_enter (idle_since = now) and
 * cleared by the `clock` process, whose step means "the delay has passed
 * since every idle entry so far". While `fresh` is set the timekeeper's
 * delay check may come out either way; once it is clear it must succeed.
 * So safety is checked for every timing (an arbitrary, even zero, delay
 * and an arbitrary clock), and the check is never wrongly forced true:
 * `fresh` clear means every recorded idle_since, and so every value a scan
 * can have read, is at least the delay old. Liveness holds because under
 * weak fairness the clock, continuously enabled while `fresh` is set,
 * eventually takes its step: time passes.
 *
 * The timekeeper.
 *  - Default: it loops on sysidle_poll() for a small machine (ncpus <=
 *    small_cpus, the VMM's normal case), modelled exactly: load the state;
 *    up to 3 scan passes while the state is below FULL, each followed by the
 *    scan's final state load, stopping at the first pass that does not
 *    advance; then sysidle_is_idle(). When that returns true it sleeps until
 *    woken, consumes the wake and loops again. (Not a nondeterministic
 *    1..3: the pass count is the one the C code computes.)
 *  - -DTK_FREE: the timekeeper side calls sysidle_scan(), sysidle_is_idle()
 *    and sysidle_force_exit() in any order and number (a large machine's
 *    caller scanning at its own pace, concurrent timekeeper-side callers
 *    excepted). This covers every call sequence, so it is used for the
 *    safety properties only: liveness needs the poll's pacing.
 *
 * Workers start busy and running (idle_ctr = 1, state NOT) and alternate
 * sysidle_enter / sysidle_exit forever; from idle a worker may also stay idle
 * for good (it ends), which makes "all workers stay idle" possible under
 * weak fairness.
 *
 * -DCONCURRENT_SCAN adds a second thread calling sysidle_scan() (see the
 * end of the file); check-model.sh reports its results as information only.
 *
 * Injected faults (each must make check-model.sh report a violation):
 *  -DFAULT_NO_WAKE  the worker that clears FULL_NOTED does not wake the
 *                   timekeeper;
 *  -DFAULT_NO_RESET an exiting worker does not reset the state to NOT.
 */

#ifndef NWORKERS
#define NWORKERS 2
#endif

/* enum sysidle_state */
#define NOT        0
#define SHORT      1
#define LONG       2
#define FULL       3
#define FULL_NOTED 4

/* Worker phases (ghost; IDLE <=> idle_ctr even). */
#define RUNNING 0 /* busy: after create, or sysidle_exit has returned */
#define IDLE    1 /* between sysidle_enter and sysidle_exit */
#define EXITING 2 /* in sysidle_exit: idle_ctr odd, reset not finished */
#define WAKING  3 /* its reset replaced FULL_NOTED; wake not yet sent */

byte state = NOT;          /* s->state */
byte wst[NWORKERS];        /* phase of each worker = its idle_ctr parity */
bit  wake;                 /* the timekeeper's eventfd has a pending wake */
bit  fresh;                /* some idle entry may be younger than the delay */

/* Ghost. */
bit  tk_asleep;            /* sysidle_is_idle returned true, wake not yet consumed */
byte nrunning = NWORKERS;  /* workers in RUNNING */
byte nidle;                /* workers in IDLE (idle_ctr even) */
byte nwaking;              /* workers in WAKING */

#define CTR_IDLE(k)  (wst[k] == IDLE)
#define ALLIDLE      (nidle == NWORKERS)
#define ANYRUNNING   (nrunning > 0)

/* ---- properties (selected with pan -N name) ---- */

/* Safety: no worker runs while the state is FULL or FULL_NOTED. */
ltl no_run_in_full { [] !(ANYRUNNING && state >= FULL) }

/* Safety: the timekeeper asleep in FULL_NOTED implies every worker idle or
 * not yet through sysidle_exit (whose reset is still to come); asleep in any
 * other state implies the state was reset (NOT) and a wake is pending or
 * being sent. */
ltl tk_sleep_safe {
	[] (tk_asleep -> ((state == FULL_NOTED && !ANYRUNNING) ||
			  (state == NOT && (wake || nwaking > 0))))
}

/* Safety (extra): FULL_NOTED exists only while the timekeeper is asleep. */
ltl noted_only_asleep { [] (state == FULL_NOTED -> tk_asleep) }

/* "A wakeup reaches only a timekeeper in FULL_NOTED" is the assert() at the
 * wake in the worker: checked in every run, and on its own (with deadlocks)
 * in a run without never claim. */

/* Liveness (weak fairness): a running worker eventually has the timekeeper
 * running. */
ltl worker_running_wakes_tk { [] (ANYRUNNING -> <> !tk_asleep) }

/* Liveness (weak fairness): if all workers stay idle, the timekeeper
 * eventually stops (and stays stopped). */
ltl all_idle_tk_stops { (<> [] ALLIDLE) -> (<> [] tk_asleep) }

/* Non-vacuity: each of these must be violated by the correct model. */
ltl full_noted_unreachable { [] (state != FULL_NOTED) }
ltl tk_never_sleeps { [] !tk_asleep }
ltl never_woken { [] !wake }
ltl never_all_idle_forever { [] <> !ALLIDLE }  /* with -a -f */

/* ---- workers (the scanned CPUs) ---- */

proctype worker(byte me)
{
	byte old;   /* sysidle_reset()'s local */

	do
	:: /* sysidle_enter: idle_since = now; idle_ctr++ (even) */
		atomic { wst[me] = IDLE; nrunning--; nidle++; fresh = 1 }
		if
		:: break        /* stay idle for good */
		:: skip
		fi;
		/* sysidle_exit: idle_ctr++ (odd) */
		atomic { wst[me] = EXITING; nidle-- }
#ifdef FAULT_NO_RESET
		atomic { wst[me] = RUNNING; nrunning++ }
#else
		/* sysidle_reset(s, FULL_NOTED, me): old = load(state) */
		old = state;
		do
		:: atomic { /* cmpxchg(state, old -> NOT) succeeds */
			old > SHORT && old <= FULL_NOTED && state == old ->
			state = NOT;
			if
			:: old == FULL_NOTED -> wst[me] = WAKING; nwaking++
			:: else -> wst[me] = RUNNING; nrunning++
			fi;
			old = 0;
			break
		   }
		:: atomic { /* cmpxchg fails: old = current value, retry */
			old > SHORT && old <= FULL_NOTED && state != old ->
			old = state
		   }
		:: atomic { /* nothing to reset: sysidle_exit returns false */
			(old <= SHORT || old > FULL_NOTED) ->
			wst[me] = RUNNING; nrunning++; old = 0;
			break
		   }
		od;
		if
		:: wst[me] == WAKING ->
			/* sysidle_exit returned true: wake the timekeeper */
			atomic {
#ifndef FAULT_NO_WAKE
				/* a wakeup reaches only a timekeeper in
				 * FULL_NOTED: it noted it, and has not been
				 * woken since */
				assert(tk_asleep && !wake);
				wake = 1;
#endif
				wst[me] = RUNNING; nwaking--; nrunning++
			}
		:: else -> skip
		fi
#endif
	od
	/* here: idle for good (idle_ctr even, phase IDLE) */
}

/* ---- time: the delay passes ---- */

active proctype clock()
{
end:	do
	:: atomic { fresh -> fresh = 0 }
	od
}

/* ---- the timekeeper side ---- */

/* sysidle_scan() up to, not including, its final snapshot load of the
 * state. Uses the timekeeper's locals i, old, st. */
inline scan_pass()
{
	/* sysidle_scan_cpus: one seq_cst load of each counter, stop at the
	 * first busy CPU (i = NWORKERS + 1 then) */
	i = 0;
	do
	:: atomic { i < NWORKERS && CTR_IDLE(i) -> i++ }
	:: atomic { i < NWORKERS && !CTR_IDLE(i) -> i = NWORKERS + 1 }
	:: i >= NWORKERS -> break
	od;
	if
	:: i > NWORKERS ->
		/* a CPU is busy: sysidle_reset(s, FULL, -1) */
		i = 0;
		old = state;
		do
		:: atomic { old > SHORT && old <= FULL && state == old ->
			    state = NOT; old = 0; break }
		:: atomic { old > SHORT && old <= FULL && state != old ->
			    old = state }
		:: (old <= SHORT || old > FULL) -> old = 0; break
		od
	:: else ->
		/* all idle */
		i = 0;
		st = state;
		if
		:: st == NOT ->
			/* sysidle_advance(NOT, SHORT) */
			atomic { if :: state == NOT -> state = SHORT
				    :: else -> skip fi; st = 0 }
		:: st == SHORT || st == LONG ->
			if
			:: skip ->
				/* delay elapsed (always possible: any
				 * timing, delay 0 included):
				 * sysidle_advance(st, st + 1) */
				atomic { if :: state == st -> state = st + 1
					    :: else -> skip fi; st = 0 }
			:: fresh ->
				/* delay not elapsed: possible only while an
				 * idle entry may be recent */
				st = 0
			fi
		:: st >= FULL -> st = 0
		fi
	fi
}

/* sysidle_is_idle(); a true result puts the timekeeper to sleep in the same
 * step (it does nothing in between). */
inline is_idle()
{
	atomic {
		st = state;   /* load */
		if
		:: st == FULL_NOTED ->
			/* unreachable, as noted_only_asleep shows; kept
			 * because the C code has it */
			tk_asleep = 1; st = 0
		:: else -> skip
		fi
	}
	if
	:: st == FULL ->
		atomic {
			if
			:: state == FULL ->   /* cmpxchg FULL -> FULL_NOTED */
				state = FULL_NOTED; tk_asleep = 1
			:: else ->            /* lost: st = current value */
				if
				:: state == FULL_NOTED -> tk_asleep = 1
				:: else -> skip
				fi
			fi;
			st = 0
		}
	:: else -> st = 0
	fi
}

active proctype timekeeper()
{
	byte i, old, st;
#ifndef TK_FREE
	byte pass, before, after;
#endif

	do
	::
#ifdef TK_FREE
		if
		:: scan_pass()
		:: is_idle()
		:: /* sysidle_force_exit: sysidle_reset(s, FULL_NOTED, -1) */
			old = state;
			do
			:: atomic { old > SHORT && old <= FULL_NOTED &&
				    state == old ->
				    /* true would mean the state was
				     * FULL_NOTED while we are awake */
				    assert(old != FULL_NOTED);
				    state = NOT; old = 0; break }
			:: atomic { old > SHORT && old <= FULL_NOTED &&
				    state != old -> old = state }
			:: (old <= SHORT || old > FULL_NOTED) -> old = 0; break
			od
		fi;
#else
		/* sysidle_poll(), small machine */
		after = state;                       /* sysidle_state() */
		pass = 0;
		do
		:: pass < 3 && after < FULL ->
			before = after;
			scan_pass();
			after = state;               /* sysidle_scan's return */
			pass++;
			if
			:: after <= before -> break
			:: else -> skip
			fi
		:: else -> break
		od;
		pass = 0; before = 0; after = 0;
		is_idle();
#endif
		if
		:: tk_asleep ->
			/* stopped: sleep until woken, consume the wake */
end_sleep:		atomic { wake -> wake = 0; tk_asleep = 0 }
		:: else -> skip
		fi
	od
}

#ifdef CONCURRENT_SCAN
/* Not part of the verified configuration: a second timekeeper-side thread
 * calling sysidle_scan() concurrently with the timekeeper, which the
 * threading contract in sysidle.h allows ("they may also run concurrently
 * with each other"). It violates no_run_in_full: pairing (A) needs the
 * *next* scan's counter loads to come after the previous advance, and two
 * concurrent scans whose loads both precede a worker's exit can take the
 * state SHORT -> LONG -> FULL between them while that worker runs. */
active proctype scanner()
{
	byte i, old, st;

end:	do
	:: scan_pass()
	od
}
#endif

init
{
	byte k;

	atomic {
		do
		:: k < NWORKERS -> wst[k] = RUNNING; run worker(k); k++
		:: else -> break
		od;
		k = 0
	}
}
