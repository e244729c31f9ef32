/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * tk_handshake.pml: the housekeeping thread (hk): its periodic tick, its
 * kick handler and the deferred kick's backstop timer.
 *
 * Step by step (Promela step -> the C it models, in vmm/idle/ unless said):
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
 */

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
