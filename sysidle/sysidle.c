/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The full-system-idle state machine (strategy "sysidle"), after
 * kernel/rcu/tree_plugin.h of Linux 3.12 (NO_HZ_FULL_SYSIDLE).
 *
 * Memory ordering. Every access to a CPU's idle_ctr and to the global state
 * is sequentially consistent, so all of them fall in one total order. The
 * protocol needs two pairings:
 *
 *  (A) exit: idle_ctr++ (odd), then load state
 *      scan: load idle_ctr, then cmpxchg state
 *      Either the scan sees the CPU busy, or the CPU's load of the state
 *      comes before the scan's cmpxchg in the total order: the CPU then
 *      either resets the state itself (LONG and above) or, seeing SHORT or
 *      NOT, leaves it, and the *next* scan, whose loads come after this
 *      cmpxchg, sees it busy. That is why FULL needs two all-idle scans
 *      after SHORT (the LONG step).
 *
 *  (B) enter: store idle_since, then idle_ctr++ (even, release)
 *      scan:  load idle_ctr (acquire), then load idle_since
 *      A scan that sees the CPU idle sees the time it went idle, or later.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sysidle_internal.h"

static uint64_t sysidle_monotonic_ns(void *arg)
{
	struct timespec ts;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Time for the delay, kernel style. An idle entry does not read the clock:
 * it records the library's "jiffies", the clock as read by the latest scan
 * (the hot path stays a load of a read-mostly line). A recorded value J
 * says the entry happened in J's epoch: at or after the scan that stored J
 * and before the next scan stored its own time. So a scan knows an upper
 * bound for the newest entry, the end of its epoch:
 *
 *   maxj == this scan's time   epoch still open: no bound yet, use now and
 *                              look again next scan;
 *   maxj == the previous time  epoch closed by this scan: now;
 *   maxj <  the previous time  closed by an earlier scan: at the latest the
 *                              previous scan's time (remembered per maxj,
 *                              so the tightest bound seen is kept).
 *
 * The delay counts from that bound, so it is never cut short, whatever the
 * scan rate, and is granted at most one scan late. (An entry preempted
 * between its load of the jiffies and its counter increment is dated by
 * the load.) Scans are single-threaded: the timekeeper side.
 */
#define SYSIDLE_NO_MAXJ UINT64_MAX

/* Caller: sysidle_scan(), delay > 0. Returns the scan's time and publishes
 * it as the jiffies; *@prev gets the time of the previous scan. */
static uint64_t sysidle_jiffies_update(struct sysidle *s, uint64_t *prev)
{
	uint64_t now = sysidle_now(s);

	/* relaxed: a timestamp, written only here (one timekeeper side) and
	 * read by sysidle_enter(); its stores publish it by pairing (B). */
	*prev = atomic_load_explicit(&s->jiffies, memory_order_relaxed);
	atomic_store_explicit(&s->jiffies, now, memory_order_relaxed);
	return now;
}

/* Caller: sysidle_scan() after an all-idle pass, delay > 0. True when the
 * newest idle entry @maxj is certainly at least the delay old. */
static bool sysidle_delay_elapsed(struct sysidle *s, uint64_t maxj,
				  uint64_t now, uint64_t prev)
{
	if (maxj >= now) {
		s->stable_maxj = SYSIDLE_NO_MAXJ;
		s->stable_since = now;
	} else if (maxj != s->stable_maxj) {
		s->stable_maxj = maxj;
		s->stable_since = maxj < prev ? prev : now;
	}
	return now - s->stable_since >= s->delay_ns;
}

uint64_t sysidle_default_delay_ns(unsigned int ncpus, unsigned int small_cpus)
{
	if (ncpus <= small_cpus)
		return 0;
	return (((uint64_t)ncpus + 15) / 16) * 1000000u;
}

void sysidle_config_init(struct sysidle_config *cfg, unsigned int ncpus)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->ncpus = ncpus;
	cfg->timekeeper = SYSIDLE_NO_TIMEKEEPER;
	cfg->small_cpus = SYSIDLE_DEFAULT_SMALL;
	cfg->delay_ns = SYSIDLE_DELAY_DEFAULT;
	cfg->strategy = SYSIDLE_STRATEGY_SYSIDLE;
}

struct sysidle *sysidle_create(const struct sysidle_config *cfg)
{
	struct sysidle *s;
	size_t size;

	if (!cfg || cfg->ncpus == 0 || cfg->ncpus > SYSIDLE_MAX_CPUS ||
	    cfg->timekeeper < SYSIDLE_NO_TIMEKEEPER ||
	    cfg->timekeeper >= (int)cfg->ncpus ||
	    (unsigned int)cfg->strategy > SYSIDLE_STRATEGY_SCAN) {
		errno = EINVAL;
		return NULL;
	}
	size = sizeof(*s) + (size_t)cfg->ncpus * sizeof(s->cpu[0]);
	s = aligned_alloc(SYSIDLE_CACHELINE,
			  (size + SYSIDLE_CACHELINE - 1) &
				  ~(size_t)(SYSIDLE_CACHELINE - 1));
	if (!s)
		return NULL;
	memset(s, 0, size);
	s->ncpus = cfg->ncpus;
	s->timekeeper = cfg->timekeeper;
	s->small_cpus = cfg->small_cpus;
	s->nscanned = cfg->ncpus - (cfg->timekeeper >= 0 ? 1 : 0);
	s->delay_ns = cfg->delay_ns == SYSIDLE_DELAY_DEFAULT
			      ? sysidle_default_delay_ns(cfg->ncpus,
							 cfg->small_cpus)
			      : cfg->delay_ns;
	s->strategy = cfg->strategy;
	s->clock = cfg->clock ? cfg->clock : sysidle_monotonic_ns;
	s->clock_arg = cfg->clock_arg;
	s->on_transition = cfg->on_transition;
	s->transition_arg = cfg->transition_arg;
	atomic_init(&s->state, SYSIDLE_NOT);
	atomic_init(&s->idle_count, 0);
	atomic_init(&s->jiffies, 0);
	s->stable_maxj = SYSIDLE_NO_MAXJ;
	for (unsigned int i = 0; i < s->ncpus; i++) {
		atomic_init(&s->cpu[i].idle_ctr, 1); /* odd: busy */
		atomic_init(&s->cpu[i].idle_since, 0);
	}
	return s;
}

void sysidle_destroy(struct sysidle *s)
{
	free(s);
}

/*
 * Move the global state back to NOT if it is above SHORT and at most @max.
 * Returns the state replaced, or SYSIDLE_NOT when nothing was written. Any
 * caller; a lost cmpxchg re-reads and retries while the state stays in range.
 */
static int sysidle_reset(struct sysidle *s, int max, int cpu)
{
	/* seq_cst load: for an exiting CPU, pairing (A) with the scan's
	 * cmpxchg; also orders the caller's later non-idle work after it. */
	int old = atomic_load(&s->state);

	while (old > SYSIDLE_SHORT && old <= max) {
		/* seq_cst cmpxchg: pairs with the scan's and sysidle_is_idle's
		 * cmpxchgs; a failure reloads @old and we retry. */
		if (atomic_compare_exchange_strong(&s->state, &old,
						   SYSIDLE_NOT)) {
			sysidle_report(s, old, SYSIDLE_NOT, cpu);
			return old;
		}
	}
	return SYSIDLE_NOT;
}

/*
 * Caller: the owner of @cpu, which is busy (after create or exit).
 */
void sysidle_enter(struct sysidle *s, unsigned int cpu)
{
	struct sysidle_cpu *c = &s->cpu[cpu];

	if (s->strategy != SYSIDLE_STRATEGY_SYSIDLE) {
		naive_enter(s, cpu);
		return;
	}
	/* Only the delay reads the timestamp; without one, skip it. */
	if (s->delay_ns)
		/* relaxed load and store: a timestamp, published by the
		 * release below, pairing (B). */
		atomic_store_explicit(&c->idle_since,
				      atomic_load_explicit(&s->jiffies,
							   memory_order_relaxed),
				      memory_order_relaxed);
	/* seq_cst RMW, counter becomes even: releases idle_since, pairing (B)
	 * with the acquire load of idle_ctr in sysidle_scan_cpus(). */
	atomic_fetch_add(&c->idle_ctr, 1);
}

/*
 * Caller: the owner of @cpu, which is idle (after enter). Returns true when
 * this call cleared FULL_NOTED: the caller must wake the timekeeper.
 */
bool sysidle_exit(struct sysidle *s, unsigned int cpu)
{
	struct sysidle_cpu *c = &s->cpu[cpu];

	if (s->strategy != SYSIDLE_STRATEGY_SYSIDLE)
		return naive_exit(s, cpu);
	/* seq_cst RMW, counter becomes odd before the state load in
	 * sysidle_reset(): pairing (A) with sysidle_scan_cpus() + cmpxchg. */
	atomic_fetch_add(&c->idle_ctr, 1);
	/* The timekeeper may run in every state; it forces the exit itself. */
	if ((int)cpu == s->timekeeper)
		return false;
	return sysidle_reset(s, SYSIDLE_FULL_NOTED, (int)cpu) ==
	       SYSIDLE_FULL_NOTED;
}

/*
 * Caller: timekeeper side. Returns true when every non-timekeeper CPU was
 * idle as it was read, and sets *@maxj to the newest idle entry seen.
 */
static bool sysidle_scan_cpus(struct sysidle *s, uint64_t *maxj)
{
	uint64_t newest = 0;

	for (unsigned int i = 0; i < s->ncpus; i++) {
		struct sysidle_cpu *c = &s->cpu[i];
		uint64_t since;

		if ((int)i == s->timekeeper)
			continue;
		/* seq_cst load (acquire): pairing (A) with the exit RMW, and
		 * (B) with the enter RMW that released idle_since. */
		if (atomic_load(&c->idle_ctr) & 1)
#ifndef SYSIDLE_FAULT_SCAN_BUSY /* a deliberately broken build, for tests */
			return false;
#else
			continue;
#endif
		since = atomic_load_explicit(&c->idle_since,
					     memory_order_relaxed);
		if (since > newest)
			newest = since;
	}
	*maxj = newest;
	return true;
}

#ifdef SYSIDLE_TEST_HOOKS
/* Unit tests stage races here: between a scan's loads and its cmpxchg. */
static void (*sysidle_test_before_advance)(struct sysidle *s);

void sysidle_test_set_before_advance(void (*fn)(struct sysidle *s))
{
	sysidle_test_before_advance = fn;
}
#endif

/* Advance @from to @to unless a busy CPU got there first: a failed
 * cmpxchg means a CPU left idle, and the busy side wins (no retry). */
static void sysidle_advance(struct sysidle *s, int from, int to)
{
	int expected = from;

#ifdef SYSIDLE_TEST_HOOKS
	if (sysidle_test_before_advance)
		sysidle_test_before_advance(s);
#endif
	/* seq_cst cmpxchg: pairing (A), ordered after the counter loads of
	 * the scan that justified it; pairs with sysidle_reset()'s cmpxchg. */
	if (atomic_compare_exchange_strong(&s->state, &expected, to))
		sysidle_report(s, from, to, -1);
}

/*
 * Caller: the timekeeper side, one thread at a time (see the header).
 */
enum sysidle_state sysidle_scan(struct sysidle *s)
{
	uint64_t maxj, now = 0, prev = 0;
	int st;

	if (s->strategy != SYSIDLE_STRATEGY_SYSIDLE)
		return naive_scan(s);
	if (s->delay_ns)
		now = sysidle_jiffies_update(s, &prev);
	if (!sysidle_scan_cpus(s, &maxj)) {
		/* A CPU is busy: LONG or FULL go back to NOT. FULL_NOTED is
		 * left to that CPU's own exit, which resets it and wakes the
		 * timekeeper; clearing it here could steal that wake-up. */
		sysidle_reset(s, SYSIDLE_FULL, -1);
		/* seq_cst load: a snapshot for the caller. */
		return (enum sysidle_state)atomic_load(&s->state);
	}
	/* seq_cst load: after the counter loads of this scan. */
	st = atomic_load(&s->state);
	switch (st) {
	case SYSIDLE_NOT:
		sysidle_advance(s, SYSIDLE_NOT, SYSIDLE_SHORT);
		break;
	case SYSIDLE_SHORT:
	case SYSIDLE_LONG:
		if (s->delay_ns == 0 ||
		    sysidle_delay_elapsed(s, maxj, now, prev))
			sysidle_advance(s, st, st + 1);
		break;
	default:
		break;
	}
	/* seq_cst load: a snapshot for the caller. */
	return (enum sysidle_state)atomic_load(&s->state);
}

/*
 * Caller: the timekeeper. True means: stop, and wait to be woken.
 */
bool sysidle_is_idle(struct sysidle *s)
{
	int st;

	if (s->strategy != SYSIDLE_STRATEGY_SYSIDLE)
		return naive_is_idle(s);
	/* seq_cst load (acquire): orders it before the caller stopping its
	 * tick; pairs with the scan's cmpxchg to FULL. */
	st = atomic_load(&s->state);
	if (st == SYSIDLE_FULL) {
		/* seq_cst cmpxchg: pairs with sysidle_reset() in the exiting
		 * CPU. Whoever moves FULL_NOTED on afterwards sees our note
		 * and wakes us; if a CPU got in first, we lose (st reloaded). */
		if (atomic_compare_exchange_strong(&s->state, &st,
						   SYSIDLE_FULL_NOTED)) {
			sysidle_report(s, SYSIDLE_FULL, SYSIDLE_FULL_NOTED, -1);
			return true;
		}
	}
	return st == SYSIDLE_FULL_NOTED;
}

bool sysidle_poll(struct sysidle *s)
{
	if (s->strategy == SYSIDLE_STRATEGY_SYSIDLE &&
	    s->ncpus <= s->small_cpus) {
		int before, after = sysidle_state(s);

		/* One pass per step up to FULL; stop at the first pass
		 * that does not advance. */
		for (int pass = 0; pass < 3 && after < SYSIDLE_FULL; pass++) {
			before = after;
			after = sysidle_scan(s);
			if (after <= before)
				break;
		}
	} else if (s->strategy != SYSIDLE_STRATEGY_SYSIDLE) {
		sysidle_scan(s);
	}
	return sysidle_is_idle(s);
}

bool sysidle_force_exit(struct sysidle *s)
{
	if (s->strategy != SYSIDLE_STRATEGY_SYSIDLE) {
		int st = SYSIDLE_FULL_NOTED;

		/* seq_cst cmpxchg: pairs with naive_is_idle()'s note. */
		if (atomic_compare_exchange_strong(&s->state, &st,
						   SYSIDLE_NOT)) {
			sysidle_report(s, st, SYSIDLE_NOT, -1);
			return true;
		}
		return false;
	}
	return sysidle_reset(s, SYSIDLE_FULL_NOTED, -1) == SYSIDLE_FULL_NOTED;
}

enum sysidle_state sysidle_state(const struct sysidle *s)
{
	/* seq_cst load: a snapshot; pairs with every cmpxchg on state. */
	return (enum sysidle_state)atomic_load(
		&((struct sysidle *)s)->state);
}

unsigned int sysidle_ncpus(const struct sysidle *s)
{
	return s->ncpus;
}

uint64_t sysidle_delay_ns(const struct sysidle *s)
{
	return s->delay_ns;
}

bool sysidle_cpu_is_idle(const struct sysidle *s, unsigned int cpu)
{
	/* seq_cst load: a snapshot of the owner's counter. */
	return !(atomic_load(&((struct sysidle *)s)->cpu[cpu].idle_ctr) & 1);
}

static const char *const state_names[SYSIDLE_NR_STATES] = {
	"NOT", "SHORT", "LONG", "FULL", "FULL_NOTED",
};

const char *sysidle_state_name(enum sysidle_state st)
{
	return (unsigned int)st < SYSIDLE_NR_STATES ? state_names[st] : "?";
}

int sysidle_state_from_name(const char *name)
{
	for (int i = 0; name && i < SYSIDLE_NR_STATES; i++)
		if (strcmp(name, state_names[i]) == 0)
			return i;
	return -1;
}

static const char *const strategy_names[] = { "sysidle", "counter", "scan" };

const char *sysidle_strategy_name(enum sysidle_strategy st)
{
	return (unsigned int)st < 3 ? strategy_names[st] : "?";
}

int sysidle_strategy_parse(const char *name)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(name, strategy_names[i]) == 0)
			return i;
	return -1;
}
