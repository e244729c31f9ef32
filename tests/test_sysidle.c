/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Unit tests of the sysidle library, single-threaded, with a fake clock.
 * Races are staged at the exact point between a scan's counter loads and
 * its cmpxchg (a hook the library has when built with SYSIDLE_TEST_HOOKS),
 * or by doing half of an exit through the private layout.
 *
 * The program is one suite, "sysidle", whose test cases live by concern
 * in test_sysidle_states.c (config, transitions, timekeeper),
 * test_sysidle_delay.c (delay), test_sysidle_races.c (races) and
 * test_sysidle_strategies.c (naive); this file holds the fake clock, the
 * helpers they share and main.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "test_sysidle.h"

struct fake fk;

static uint64_t fake_clock(void *arg)
{
	struct fake *f = arg;

	f->clock_reads++;
	return f->now;
}

static void fake_before_advance(struct sysidle *s)
{
	(void)s;
	if (fk.hook) {
		void (*hook)(struct fake *) = fk.hook;

		fk.hook = NULL; /* one shot */
		fk.hook_calls++;
		hook(&fk);
	}
}

static void fake_transition(void *arg, enum sysidle_state from,
			    enum sysidle_state to, int cpu, uint64_t now)
{
	struct fake *f = arg;

	ck_assert_int_lt(f->ntr, 64);
	f->tr[f->ntr].from = from;
	f->tr[f->ntr].to = to;
	f->tr[f->ntr].cpu = cpu;
	f->tr[f->ntr].at = now;
	f->ntr++;
}

struct sysidle *make(unsigned int ncpus, int tk, uint64_t delay,
		     enum sysidle_strategy strategy)
{
	struct sysidle_config cfg;
	struct sysidle *s;

	memset(&fk, 0, sizeof(fk));
	sysidle_config_init(&cfg, ncpus);
	cfg.timekeeper = tk;
	cfg.delay_ns = delay;
	cfg.strategy = strategy;
	cfg.clock = fake_clock;
	cfg.clock_arg = &fk;
	cfg.on_transition = fake_transition;
	cfg.transition_arg = &fk;
	s = sysidle_create(&cfg);
	ck_assert_ptr_nonnull(s);
	fk.s = s;
	sysidle_test_set_before_advance(fake_before_advance);
	return s;
}

void all_enter(struct sysidle *s)
{
	for (unsigned int i = 0; i < sysidle_ncpus(s); i++)
		sysidle_enter(s, i);
}

/* Drive an all-idle machine with no delay up to FULL_NOTED. */
void climb_to_noted(struct sysidle *s)
{
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(sysidle_is_idle(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
}

static Suite *sysidle_suite(void)
{
	Suite *s = suite_create("sysidle");

	suite_add_tcase(s, sysidle_tcase_config());
	suite_add_tcase(s, sysidle_tcase_transitions());
	suite_add_tcase(s, sysidle_tcase_delay());
	suite_add_tcase(s, sysidle_tcase_timekeeper());
	suite_add_tcase(s, sysidle_tcase_races());
	suite_add_tcase(s, sysidle_tcase_naive());
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sysidle_suite());
	int failed;

	/* CK_ENV: verbosity from CK_VERBOSITY; TAP from CK_TAP_LOG_FILE_NAME. */
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
