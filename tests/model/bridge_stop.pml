/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Promela model of the libvirt bridge's lock-free flags, checked by
 * check-model.sh: the list's staleness (tools/libvirt-bridge/events.c:
 * ev.stale, ev.quit) and the bounded stop (stop.c: the stop signal's
 * number, the eventfd, the forced exit; sysidle-consolidate's stopwatch.py
 * is the same protocol). What it shows: a lifecycle event is never lost to
 * a scan, the event loop thread always ends at the stop, and a stop signal
 * always ends the process, cleanly unless the main thread hangs in a
 * libvirt call that never returns.
 *
 * Shared variables (a Promela step is atomic, so each C release/acquire
 * pair is the order of the steps that touch the variable):
 *  - stale      ev.stale: set by the loop thread's lifecycle callback,
 *               taken by the main thread's exchange before a scan;
 *  - quit       ev.quit: set by events_stop, read by the loop thread;
 *  - wake       the 0 ms timeout events_stop adds to end the loop's wait;
 *  - signo      st.signo (with the eventfd): the stop was asked for;
 *  - done       stop_finish(): the clean stop ended.
 * Processes: the main thread (scans until the stop, any scan may hang for
 * good; then events_stop, joins the loop thread, stop_finish), the event
 * loop thread (lifecycle events until quit), the signal thread (stop.c),
 * and the sender of one SIGTERM, or of none.
 *
 * Time is not modelled: the forced exit's grace is Spin's `timeout`, which
 * is executable only when nothing else is: a clean stop that can no longer
 * progress. So "forced" means "the clean stop was stuck".
 *
 * Faults (-D): SPLIT_EXCHANGE (the main thread reads stale, then clears
 * it in another step: an event in between is lost), NO_LOOP_WAKE
 * (events_stop sets quit without the timeout that ends the loop's wait:
 * the join never returns), NO_FORCE (no forced exit: a hung main thread
 * keeps the process for good).
 *
 * Properties: relist_seen (an event is taken by a later scan, unless the
 * main thread hangs or the process ended); stop_ends (a stop signal ends
 * the process); forced_only_hung (a forced exit only when the main thread
 * hung). Non-vacuity: never_forced (a forced exit happens),
 * never_relisted (a scan takes an event).
 */

#ifndef NEVENTS
#define NEVENTS 2
#endif

bit stale;
bit quit;
bit wake;
bit signo;
bit done;
byte events_left = NEVENTS;
bit sent;        /* ghost: the SIGTERM was sent */
bit hung;        /* ghost: the main thread hangs in a libvirt call */
bit unseen;      /* ghost: an event no scan has taken yet */
bit relisted;    /* ghost: a scan took an event */
bit loop_done;   /* ghost: the loop thread ended */
bit forced;      /* ghost: the forced exit */
bit ended;       /* ghost: the process ended (clean or forced) */

proctype main_thread()
{
	bit took;

	do
	:: signo -> break                      /* stopping() */
	:: else ->
		if
		:: hung = 1;                   /* a call that never returns */
end_hang:	   (0)
		:: skip
		fi;
#ifdef SPLIT_EXCHANGE
		took = stale;
		stale = 0;
#else
		atomic { took = stale; stale = 0 }  /* events_relist_due */
#endif
		if
		:: took -> unseen = 0; relisted = 1
		:: else -> skip
		fi
		/* wait_until: the next scan's deadline, or the eventfd */
	od;
	/* events_stop: quit, then the timeout that ends the loop's wait */
	quit = 1;
#ifndef NO_LOOP_WAKE
	wake = 1;
#endif
	loop_done;                             /* pthread_join */
	done = 1;                              /* stop_finish */
	ended = 1
}

proctype loop_thread()
{
	do
	:: quit -> break
	:: else ->
		/* virEventRunDefaultImpl: waits for an event or a timeout
		 * (for good once there is neither: a valid end) */
end_wait:	if
		:: events_left > 0 ->
			atomic {
				events_left--;
				stale = 1;     /* on_lifecycle */
				unseen = 1
			}
		:: wake -> wake = 0
		fi
	od;
	loop_done = 1
}

proctype signal_thread()
{
end_idle:			               /* no signal, for good: valid */
	if
	:: done -> goto out
	:: sent -> signo = 1                   /* store, then the eventfd */
	fi;
#ifdef NO_FORCE
	done;
#else
	if
	:: done
	:: timeout -> forced = 1; ended = 1    /* the grace ran out */
	fi;
#endif
out:	skip
}

active proctype sender()
{
	if
	:: sent = 1
	:: skip
	fi
}

init
{
	atomic {
		run main_thread();
		run loop_thread();
		run signal_thread()
	}
}

ltl relist_seen { [] (unseen -> <> (!unseen || hung || ended)) }
ltl stop_ends { [] (sent -> <> ended) }
ltl forced_only_hung { [] (forced -> hung) }
ltl never_forced { [] !forced }
ltl never_relisted { [] !relisted }
