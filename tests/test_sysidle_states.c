/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Unit tests of the sysidle library: its configuration, the state
 * machine's transitions and non-transitions, and the timekeeper (the
 * "config", "transitions" and "timekeeper" test cases; the fake clock is
 * in test_sysidle.c).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "test_sysidle.h"

/* ---- configuration ---------------------------------------------------- */

START_TEST(test_create_rejects_bad_config)
{
	struct sysidle_config cfg;

	sysidle_config_init(&cfg, 0);
	errno = 0;
	ck_assert_ptr_null(sysidle_create(&cfg));
	ck_assert_int_eq(errno, EINVAL);

	sysidle_config_init(&cfg, SYSIDLE_MAX_CPUS + 1);
	errno = 0;
	ck_assert_ptr_null(sysidle_create(&cfg));
	ck_assert_int_eq(errno, EINVAL);

	sysidle_config_init(&cfg, 4);
	cfg.timekeeper = 4;
	ck_assert_ptr_null(sysidle_create(&cfg));
	cfg.timekeeper = -2;
	ck_assert_ptr_null(sysidle_create(&cfg));
	cfg.timekeeper = 3;
	cfg.strategy = (enum sysidle_strategy)7;
	ck_assert_ptr_null(sysidle_create(&cfg));
	ck_assert_ptr_null(sysidle_create(NULL));
}
END_TEST

START_TEST(test_create_defaults)
{
	struct sysidle_config cfg;
	struct sysidle *s;

	sysidle_config_init(&cfg, 1024);
	ck_assert_int_eq(cfg.timekeeper, SYSIDLE_NO_TIMEKEEPER);
	ck_assert_uint_eq(cfg.small_cpus, 8);
	ck_assert_int_eq(cfg.strategy, SYSIDLE_STRATEGY_SYSIDLE);
	s = sysidle_create(&cfg);
	ck_assert_ptr_nonnull(s);
	ck_assert_uint_eq(sysidle_ncpus(s), 1024);
	ck_assert_uint_eq(sysidle_delay_ns(s), 64 * MS);
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	for (unsigned int i = 0; i < 1024; i++)
		ck_assert(!sysidle_cpu_is_idle(s, i)); /* all start busy */
	sysidle_destroy(s);
}
END_TEST

/* The kernel's rcu_sysidle_delay() in jiffies, with HZ = 1000 and
 * rcu_fanout_leaf = 16, turned into nanoseconds. */
static uint64_t kernel_delay_ns(unsigned long nr_cpu_ids, unsigned long small)
{
	const unsigned long hz = 1000, fanout_leaf = 16;

	if (nr_cpu_ids <= small)
		return 0;
	return ((nr_cpu_ids * hz + fanout_leaf * 1000 - 1) /
		(fanout_leaf * 1000)) * (1000000000ull / hz);
}

START_TEST(test_delay_formula)
{
	for (unsigned int n = 1; n <= 4096; n++) {
		ck_assert_uint_eq(sysidle_default_delay_ns(n, 8),
				  kernel_delay_ns(n, 8));
		ck_assert_uint_eq(sysidle_default_delay_ns(n, 64),
				  kernel_delay_ns(n, 64));
	}
	/* Landmarks, written out. */
	ck_assert_uint_eq(sysidle_default_delay_ns(8, 8), 0);
	ck_assert_uint_eq(sysidle_default_delay_ns(9, 8), 1 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(16, 8), 1 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(17, 8), 2 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(1024, 8), 64 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(4096, 8), 256 * MS);
	ck_assert_uint_eq(sysidle_default_delay_ns(4096, 4096), 0);
}
END_TEST

START_TEST(test_records_own_cache_lines)
{
	struct sysidle *s = make(64, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert_uint_eq((uintptr_t)&s->state % SYSIDLE_CACHELINE, 0);
	for (unsigned int i = 0; i < 64; i++) {
		uintptr_t a = (uintptr_t)&s->cpu[i];

		ck_assert_uint_eq(a % SYSIDLE_CACHELINE, 0);
		/* The global state never shares a CPU's line. */
		ck_assert_uint_ne(a / SYSIDLE_CACHELINE,
				  (uintptr_t)&s->state / SYSIDLE_CACHELINE);
	}
	sysidle_destroy(s);
}
END_TEST

/* ---- transitions and non-transitions ---------------------------------- */

START_TEST(test_climb_without_delay)
{
	struct sysidle *s = make(4, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert_uint_eq(sysidle_delay_ns(s), 0);
	all_enter(s);
	ck_assert(!sysidle_is_idle(s)); /* NOT: no */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert(!sysidle_is_idle(s)); /* SHORT: no, unchanged */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_SHORT);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_is_idle(s)); /* LONG: no, unchanged */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_LONG);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL); /* scan stops at FULL */
	ck_assert(sysidle_is_idle(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	ck_assert(sysidle_is_idle(s)); /* already noted: still yes */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL_NOTED);
	ck_assert_int_eq(fk.ntr, 4);
	ck_assert_int_eq(fk.tr[0].to, SYSIDLE_SHORT);
	ck_assert_int_eq(fk.tr[3].from, SYSIDLE_FULL);
	ck_assert_int_eq(fk.tr[3].to, SYSIDLE_FULL_NOTED);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(fk.tr[i].cpu, -1);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_busy_cpu_blocks_every_step)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	for (unsigned int i = 0; i < 3; i++)
		sysidle_enter(s, i); /* CPU 3 stays busy */
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
		ck_assert(!sysidle_is_idle(s));
	}
	ck_assert_int_eq(fk.ntr, 0);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_exit_below_long_writes_nothing)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	ck_assert(!sysidle_exit(s, 1)); /* NOT */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_enter(s, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert(!sysidle_exit(s, 2)); /* SHORT: read only */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_SHORT);
	ck_assert_int_eq(fk.ntr, 1);
	/* The busy CPU is seen by the next scan; SHORT is left as it is. */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert_int_eq(fk.ntr, 1);
	sysidle_enter(s, 2);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_exit_resets_long_and_full)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_exit(s, 0)); /* LONG -> NOT, nobody to wake */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, 0);

	sysidle_enter(s, 0);
	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(!sysidle_exit(s, 3)); /* FULL -> NOT: not yet noted */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_is_idle(s));
	ck_assert_int_eq(fk.tr[fk.ntr - 1].from, SYSIDLE_FULL);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, 3);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_exit_from_noted_wakes_once)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	climb_to_noted(s);
	ck_assert(sysidle_exit(s, 2)); /* this one wakes the timekeeper */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_exit(s, 1)); /* the next one does not */
	ck_assert(!sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_scan_cancels_long_and_full)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_LONG);
	/* Half an exit: the counter is odd, the state not yet read. */
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, -1);
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1); /* idle again */

	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_NOT);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_scan_leaves_noted_to_the_exiting_cpu)
{
	struct sysidle *s = make(4, -1, 0, SYSIDLE_STRATEGY_SYSIDLE);

	all_enter(s);
	climb_to_noted(s);
	/* CPU 1 is half-way through its exit: counter odd, state unread. A
	 * scan must not take FULL_NOTED, or CPU 1 would find NOT and never
	 * wake the sleeping timekeeper. */
	atomic_fetch_add(&s->cpu[1].idle_ctr, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL_NOTED);
	ck_assert(sysidle_is_idle(s));
	sysidle_destroy(s);
}
END_TEST

/* ---- the timekeeper --------------------------------------------------- */

START_TEST(test_timekeeper_excluded)
{
	struct sysidle *s = make(4, 0, 0, SYSIDLE_STRATEGY_SYSIDLE);

	for (unsigned int i = 1; i < 4; i++)
		sysidle_enter(s, i); /* CPU 0, the timekeeper, stays busy */
	climb_to_noted(s);
	/* The timekeeper taking its tick does not end full idle ... */
	sysidle_enter(s, 0);
	ck_assert(!sysidle_exit(s, 0));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	/* ... unless it says it did more. */
	ck_assert(sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	ck_assert(!sysidle_force_exit(s)); /* NOT: nothing to do */
	ck_assert_int_eq(fk.tr[fk.ntr - 1].cpu, -1);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_force_exit_per_state)
{
	struct sysidle *s = make(2, 0, 0, SYSIDLE_STRATEGY_SYSIDLE);

	sysidle_enter(s, 1);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_SHORT);
	ck_assert(!sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_SHORT); /* SHORT stays */
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_LONG);
	ck_assert(!sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_scan(s);
	sysidle_scan(s);
	ck_assert_int_eq(sysidle_scan(s), SYSIDLE_FULL);
	ck_assert(!sysidle_force_exit(s));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_single_cpu_timekeeper_only)
{
	/* Nothing to scan: the machine is idle as far as others go. */
	struct sysidle *s = make(1, 0, 0, SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert(sysidle_poll(s));
	sysidle_enter(s, 0);
	ck_assert(!sysidle_exit(s, 0));
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_FULL_NOTED);
	sysidle_destroy(s);
}
END_TEST

START_TEST(test_poll_small_machine_three_passes)
{
	struct sysidle *s = make(8, -1, SYSIDLE_DELAY_DEFAULT,
				 SYSIDLE_STRATEGY_SYSIDLE);

	ck_assert(!sysidle_poll(s)); /* all busy */
	ck_assert_int_eq(sysidle_state(s), SYSIDLE_NOT);
	all_enter(s);
	ck_assert(sysidle_poll(s)); /* NOT -> SHORT -> LONG -> FULL -> noted */
	ck_assert_int_eq(fk.ntr, 4);
	ck_assert(sysidle_exit(s, 7));
	sysidle_destroy(s);
}
END_TEST

TCase *sysidle_tcase_config(void)
{
	TCase *tc = tcase_create("config");

	tcase_add_test(tc, test_create_rejects_bad_config);
	tcase_add_test(tc, test_create_defaults);
	tcase_add_test(tc, test_delay_formula);
	tcase_add_test(tc, test_records_own_cache_lines);
	return tc;
}

TCase *sysidle_tcase_transitions(void)
{
	TCase *tc = tcase_create("transitions");

	tcase_add_test(tc, test_climb_without_delay);
	tcase_add_test(tc, test_busy_cpu_blocks_every_step);
	tcase_add_test(tc, test_exit_below_long_writes_nothing);
	tcase_add_test(tc, test_exit_resets_long_and_full);
	tcase_add_test(tc, test_exit_from_noted_wakes_once);
	tcase_add_test(tc, test_scan_cancels_long_and_full);
	tcase_add_test(tc, test_scan_leaves_noted_to_the_exiting_cpu);
	tcase_add_test(tc, test_poll_small_machine_three_passes);
	return tc;
}

TCase *sysidle_tcase_timekeeper(void)
{
	TCase *tc = tcase_create("timekeeper");

	tcase_add_test(tc, test_timekeeper_excluded);
	tcase_add_test(tc, test_force_exit_per_state);
	tcase_add_test(tc, test_single_cpu_timekeeper_only);
	return tc;
}
