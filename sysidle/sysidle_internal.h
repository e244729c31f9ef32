/* SPDX-License-Identifier: GPL-2.0-only */
/* Private layout of struct sysidle, shared by the library's files. */
#ifndef SYSIDLE_INTERNAL_H
#define SYSIDLE_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>

#include "sysidle/sysidle.h"

#define SYSIDLE_CACHELINE 64

/*
 * One CPU's idle record, alone on its cache line, written only by the CPU's
 * owner. idle_ctr is even while the CPU is idle and odd while it is busy
 * (it starts at 1: busy); idle_since is when it last went idle.
 */
struct sysidle_cpu {
	_Atomic unsigned long idle_ctr;
	_Atomic uint64_t idle_since;
	char pad[SYSIDLE_CACHELINE - sizeof(unsigned long) - sizeof(uint64_t)];
} __attribute__((aligned(SYSIDLE_CACHELINE)));

_Static_assert(sizeof(struct sysidle_cpu) == SYSIDLE_CACHELINE,
	       "a CPU's record must fill exactly one cache line");

struct sysidle {
	/* Read-mostly: the configuration. */
	unsigned int ncpus;
	int timekeeper;
	unsigned int small_cpus;
	unsigned int nscanned; /* CPUs that take part in the answer */
	uint64_t delay_ns;
	enum sysidle_strategy strategy;
	sysidle_clock_fn clock;
	void *clock_arg;
	sysidle_transition_fn on_transition;
	void *transition_arg;

	/* The global state: read on every exit, written rarely. */
	_Atomic int state __attribute__((aligned(SYSIDLE_CACHELINE)));

	/* The library's jiffies (see sysidle.c): written by each scan, read
	 * on every idle entry when there is a delay. */
	_Atomic uint64_t jiffies __attribute__((aligned(SYSIDLE_CACHELINE)));

	/* Timekeeper side only: the newest idle entry seen by the scans and
	 * the latest time it can have happened. */
	uint64_t stable_maxj;
	uint64_t stable_since;

	/* SYSIDLE_STRATEGY_COUNTER only: idle non-timekeeper CPUs. Alone on
	 * its line so that the comparison measures its own bouncing. */
	_Atomic unsigned int idle_count
		__attribute__((aligned(SYSIDLE_CACHELINE)));

	struct sysidle_cpu cpu[] __attribute__((aligned(SYSIDLE_CACHELINE)));
};

static inline uint64_t sysidle_now(const struct sysidle *s)
{
	return s->clock(s->clock_arg);
}

static inline void sysidle_report(struct sysidle *s, int from, int to, int cpu)
{
	if (s->on_transition)
		s->on_transition(s->transition_arg, (enum sysidle_state)from,
				 (enum sysidle_state)to, cpu, sysidle_now(s));
}

#ifdef SYSIDLE_TEST_HOOKS
/* Unit tests only, before any sysidle call: @fn runs between a scan's
 * loads and its cmpxchg (NULL: nothing), to stage races there. */
void sysidle_test_set_before_advance(void (*fn)(struct sysidle *s));
#endif

/* Strategy back-ends (naive.c): same contracts as the public functions. */
void naive_enter(struct sysidle *s, unsigned int cpu);
bool naive_exit(struct sysidle *s, unsigned int cpu);
enum sysidle_state naive_scan(struct sysidle *s);
bool naive_is_idle(struct sysidle *s);

#endif
