/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The two naive answers to "is the whole machine idle?" from the 2013
 * article, behind the same API, for comparison only:
 *
 *  counter: one global atomic count of idle CPUs. Every idle entry and exit
 *           writes the same cache line, which bounces between all CPUs.
 *  scan:    each CPU flips its own flag (the parity of its idle_ctr); every
 *           query scans all N flags.
 *
 * Both go straight from NOT to FULL_NOTED when the timekeeper sees every
 * CPU idle, and back to NOT when the first CPU leaves idle. Noting and
 * leaving idle form a store-buffering (Dekker) pair, so both sides use
 * sequentially consistent operations:
 *
 *   exit:     update own flag / the count, then load state
 *   is_idle:  cmpxchg state NOT->FULL_NOTED, then re-check the flags/count
 *
 * Either the exiting CPU sees FULL_NOTED (it resets it and wakes the
 * timekeeper) or the timekeeper's re-check sees the CPU busy (it takes the
 * note back).
 */
#include "sysidle_internal.h"

void naive_enter(struct sysidle *s, unsigned int cpu)
{
	/* seq_cst RMW: pairs with the flag loads in naive_all_idle(). */
	atomic_fetch_add(&s->cpu[cpu].idle_ctr, 1);
	if (s->strategy == SYSIDLE_STRATEGY_COUNTER && (int)cpu != s->timekeeper)
		/* seq_cst RMW on the shared line: pairs with the load of
		 * idle_count in naive_all_idle(). */
		atomic_fetch_add(&s->idle_count, 1);
}

bool naive_exit(struct sysidle *s, unsigned int cpu)
{
	int st = SYSIDLE_FULL_NOTED;

	/* seq_cst RMW: the Dekker pair with naive_is_idle()'s cmpxchg. */
	atomic_fetch_add(&s->cpu[cpu].idle_ctr, 1);
	if ((int)cpu == s->timekeeper)
		return false;
	if (s->strategy == SYSIDLE_STRATEGY_COUNTER)
		/* seq_cst RMW: the Dekker pair with naive_is_idle(). */
		atomic_fetch_sub(&s->idle_count, 1);
	/* seq_cst load, then cmpxchg: pairs with naive_is_idle()'s note. */
	if (atomic_load(&s->state) != SYSIDLE_FULL_NOTED)
		return false;
	if (atomic_compare_exchange_strong(&s->state, &st, SYSIDLE_NOT)) {
		sysidle_report(s, SYSIDLE_FULL_NOTED, SYSIDLE_NOT, (int)cpu);
		return true;
	}
	return false;
}

static bool naive_all_idle(struct sysidle *s)
{
	if (s->strategy == SYSIDLE_STRATEGY_COUNTER)
		/* seq_cst load: pairs with the RMWs in enter/exit. */
		return atomic_load(&s->idle_count) == s->nscanned;
	for (unsigned int i = 0; i < s->ncpus; i++)
		/* seq_cst load: pairs with the RMWs in enter/exit. */
		if ((int)i != s->timekeeper &&
		    (atomic_load(&s->cpu[i].idle_ctr) & 1))
			return false;
	return true;
}

enum sysidle_state naive_scan(struct sysidle *s)
{
	/* The query does all the work; a scan only looks. */
	(void)naive_all_idle(s);
	/* seq_cst load: a snapshot for the caller. */
	return (enum sysidle_state)atomic_load(&s->state);
}

bool naive_is_idle(struct sysidle *s)
{
	int st = SYSIDLE_NOT;

	/* seq_cst load: pairs with naive_exit()'s cmpxchg. */
	if (atomic_load(&s->state) == SYSIDLE_FULL_NOTED)
		return true;
	if (!naive_all_idle(s))
		return false;
	/* seq_cst cmpxchg, then the re-check: the Dekker pair with
	 * naive_exit()'s counter update followed by its state load. */
	if (!atomic_compare_exchange_strong(&s->state, &st, SYSIDLE_FULL_NOTED))
		return st == SYSIDLE_FULL_NOTED;
	sysidle_report(s, SYSIDLE_NOT, SYSIDLE_FULL_NOTED, -1);
	if (naive_all_idle(s))
		return true;
	/* A CPU left between the two checks: take the note back, unless
	 * that CPU already did (it then wakes us, harmlessly). */
	st = SYSIDLE_FULL_NOTED;
	if (atomic_compare_exchange_strong(&s->state, &st, SYSIDLE_NOT))
		sysidle_report(s, SYSIDLE_FULL_NOTED, SYSIDLE_NOT, -1);
	return false;
}
