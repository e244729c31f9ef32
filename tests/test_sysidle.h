/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The sysidle library's unit tests (test-sysidle): the fake clock and the
 * helpers of test_sysidle.c, and the test cases of the files that hold
 * them, by concern.
 */
#ifndef TEST_SYSIDLE_H
#define TEST_SYSIDLE_H

#include <check.h>
#include <stdint.h>

#include "../sysidle/sysidle_internal.h"

#define MS 1000000ull

/* The fake clock: tests set now; @hook runs once, inside the next scan,
 * right before its cmpxchg. */
struct fake {
	uint64_t now;
	unsigned long clock_reads;
	void (*hook)(struct fake *f);
	struct sysidle *s;
	unsigned int hook_cpu;
	int hook_calls;
	/* Transitions seen by the callback. */
	int ntr;
	struct {
		enum sysidle_state from, to;
		int cpu;
		uint64_t at;
	} tr[64];
};

extern struct fake fk;

/* A library of @ncpus CPUs on the fake clock, its hook and its
 * transition callback; fk is reset. */
struct sysidle *make(unsigned int ncpus, int tk, uint64_t delay,
		     enum sysidle_strategy strategy);
void all_enter(struct sysidle *s);
/* Drive an all-idle machine with no delay up to FULL_NOTED. */
void climb_to_noted(struct sysidle *s);

/* test_sysidle_states.c */
TCase *sysidle_tcase_config(void);
TCase *sysidle_tcase_transitions(void);
TCase *sysidle_tcase_timekeeper(void);
/* test_sysidle_delay.c */
TCase *sysidle_tcase_delay(void);
/* test_sysidle_races.c */
TCase *sysidle_tcase_races(void);
/* test_sysidle_strategies.c */
TCase *sysidle_tcase_naive(void);

#endif
