/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Promela model of a vCPU's HLT wait (vmm/machine/vcpu_halt.c) against
 * the threads that post to it (vcpu.c vcpu_kick_for, vcpu_timer.c
 * timer_self_moved), checked by check-model.sh. What it shows: polling
 * before blocking, and the vCPU serving its own timer, lose no wake-up:
 * the vCPU never stays blocked with an interrupt pending or a deadline
 * passed, whatever the interleaving.
 *
 * Shared variables:
 *  - lock      v->lock (a mutex: held by one process at a time);
 *  - event     an interrupt posted (vcpu_has_wake_event), under the lock;
 *  - seq       v->wake_seq: bumped under the lock after each post (the C
 *              release increment; a Promela step is atomic, so the
 *              release/acquire pair is the order of the steps);
 *  - waiting   the vCPU sleeps on v->wake (pthread_cond_wait: the lock is
 *              dropped and the sleep begun in one step, as the condition
 *              variable guarantees; a signal ends the sleep of a waiter,
 *              and is lost when there is none);
 *  - dl        the LAPIC timer deadline this thread serves: 0 none,
 *              1 armed, not due, 2 due (time is the "tick" process, which
 *              makes an armed deadline due at any moment);
 *  - moved     another thread moved the deadline while the vCPU serves
 *              it (a held tick released: lapic_timer_release ->
 *              the ops' arm, vcpu_timer.c timer_arm -> timer_self_moved).
 * Processes: the vCPU thread (one HLT: poll, then block until an event,
 * serving its timer), a poster (one interrupt), the housekeeping thread
 * moving the deadline once, and time.
 *
 * Faults (-D): NO_SIGNAL (vcpu_kick_for does not signal a HALTED vCPU,
 * as if polling made it unneeded), NO_RECHECK (after the poll the vCPU
 * blocks without looking at the event again under the lock), NO_MOVE_WAKE
 * (timer_self_moved does not wake the wait: a deadline moved earlier is
 * missed).
 *
 * Properties: no invalid end state (the vCPU always leaves HLT: the
 * poster's interrupt is taken); liveness woken: the vCPU leaves HLT;
 * timer_served: a deadline that fell due is served before the vCPU
 * blocks for good. Non-vacuity: poll_never_hits (a poll sees the event),
 * never_timer_fire (the vCPU's own wait serves its deadline).
 */

bit lock;
bit event;
byte seq;
bit waiting;
byte dl;          /* 0 none, 1 armed, 2 due */
bit vcpu_done;    /* ghost: the vCPU left HLT */
bit poll_hit;     /* ghost: a poll saw the event */
bit timer_fired;  /* ghost: the vCPU's thread served its deadline */
bit poster_done;  /* ghost */

inline lock_take() { atomic { lock == 0 -> lock = 1 } }
inline lock_drop() { lock = 0 }

/* pthread_cond_signal: wakes the waiter, if any. */
inline cond_signal() { waiting = 0 }

proctype vcpu()
{
	byte seq0;

	lock_take();
	if
	:: event -> goto out
	:: else
	fi;
	/* halt_poll: seq read under the lock, then spin unlocked until it
	 * moves or the window ends (either may come first) */
	seq0 = seq;
	lock_drop();
	do
	:: seq != seq0 -> break
	:: true -> break /* the window ended */
	od;
	lock_take();
#ifdef NO_RECHECK
	/* the fault: one wait before any look at what was posted */
	atomic { waiting = 1; lock_drop() };
	(waiting == 0);
	lock_take();
#else
	if
	:: event -> poll_hit = 1; goto out
	:: else
	fi;
#endif
	/* the blocking loop: while nothing pending, halt_block */
	do
	:: event -> break
	:: !event && dl == 2 ->
		/* vcpu_timer_expire: the timer's expiry is pending (taken
		 * into the IRR by vcpu_has_wake_event) */
		timer_fired = 1; dl = 0; event = 1; break
	:: !event && dl != 2 ->
		/* pthread_cond_(timed)wait: unlock and sleep in one step;
		 * a timed wait (a deadline armed when it began: its absolute
		 * timeout may already have passed) also ends once it is due */
		atomic { waiting = 1; lock_drop() };
		if
		:: dl != 0 -> (waiting == 0 || dl == 2)
		:: else -> (waiting == 0)
		fi;
		waiting = 0;
		lock_take()
	od;
out:
	vcpu_done = 1;
	lock_drop()
}

proctype poster()
{
	lock_take();
	event = 1;
	seq++;
#ifndef NO_SIGNAL
	cond_signal();
#endif
	lock_drop();
	poster_done = 1
}

/* The housekeeping thread arms a deadline the waiting vCPU serves (a held
 * tick released), once; time makes it due. */
proctype mover()
{
	lock_take();
	dl = 1;
#ifndef NO_MOVE_WAKE
	seq++;
	cond_signal();
#endif
	lock_drop()
}

proctype time()
{
	atomic { dl == 1 -> dl = 2 }
}

init
{
	atomic {
		run vcpu();
		if
		:: run poster()
		:: run mover(); run time()  /* no interrupt: the timer alone */
		fi
	}
}

ltl woken { <> vcpu_done }
ltl timer_served { [] ((dl == 2 && waiting) -> <> (dl != 2 || vcpu_done)) }
ltl poll_never_hits { [] !poll_hit }
ltl never_timer_fire { [] !timer_fired }
